"""``transactions history`` for one id on a transaction log of a million records (issue 25).

    python bench/bench_history.py [--records 1000000] [--rounds 5]

Starts one broker and writes a log of ``--records`` ``__transaction_state`` records into a topic of 50
partitions (the default ``transaction.state.log.num.partitions``), each on the partition the coordinator
would pick for its id (``abs(hashCode(id)) % 50``), with the txnlog encoder: 20,000 ids of 50 records
each (so the target's partition holds ~20,000 records of other ids too), plus the target id's own
history (inits, commits, a fence, a timeout). The command is pointed at that topic with its hidden
``--log-topic`` (the real log cannot be written by a client). Then it times, each as its own process:

* ``kafkatxn transactions history TARGET --log-topic T -o json`` (start-up included): reads the one
  partition that owns the id; target **under 2 s**, and the events must be the ones written;
* the reference, measured in the same run: the same reader (kafkatxn/kafka/log_reader.py) decoding the
  whole log (all 50 partitions, every record), what a tool that cannot pick the partition reads: with
  librdkafka's consumer (the Spark executors' source) and over the wire's Fetch (the facade's, which
  history uses).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness import KafkaCluster  # noqa: E402
from kafkatxn.verdicts import coordinator_partition  # noqa: E402
from kafkatxn.kafka.txnlog_encode import encode_key, encode_value_v1  # noqa: E402
from bench.benchlib import kafkatxn, run_measured  # noqa: E402

LOG_PARTITIONS = 50
RECORDS_PER_ID = 50
TARGET = "orders-app-target"
TOPIC = "bench-txnlog"
T0 = int(time.time() * 1000) - 3_600_000
EXPECTED = [
    "initialised", "committed", "committed",  # one instance
    "initialised", "committed",  # a second one takes over
    "fenced_open_transaction", "initialised",  # ... the first comes back, fencing the second's open transaction
    "timed_out_by_coordinator",  # its own transaction times out
    "initialised", "committed",
]


def value(pid: int, epoch: int, state: str, t: int, start: int = -1, parts=None, tv: int = 0) -> bytes:
    return encode_value_v1(producer_id=pid, producer_epoch=epoch, timeout_ms=60_000, state=state, partitions=parts,
                           last_update_timestamp_ms=t, start_timestamp_ms=start, client_transaction_version=tv)


def target_history() -> list[bytes]:
    """The target's records, as a 4.x coordinator writes them for a transaction-version-0 client."""
    out, t, e = [], T0, 0
    parts = ["orders-0"]

    def txn(epoch: int, commit: bool = True) -> None:
        nonlocal t
        start = t
        out.append(value(7, epoch, "Ongoing", t, start, parts))
        end = "Commit" if commit else "Abort"
        out.append(value(7, epoch, f"Prepare{end}", t + 5, start, parts))
        out.append(value(7, epoch, f"Complete{end}", t + 10, start))
        t += 1000

    out.append(value(7, e, "Empty", t))
    txn(e)
    txn(e)
    e += 1
    out.append(value(7, e, "Empty", t))
    txn(e)
    out.append(value(7, e, "Ongoing", t, t, parts))  # left open ...
    out.append(value(7, e + 1, "PrepareAbort", t + 5, t, parts))  # ... fenced: the coordinator's abort (epoch + 1)
    out.append(value(7, e + 1, "CompleteAbort", t + 10, t))
    e += 2
    out.append(value(7, e, "Empty", t + 20))
    t += 1000
    out.append(value(7, e, "Ongoing", t, t, parts))
    out.append(value(7, e + 1, "PrepareAbort", t + 60_000, t, parts))  # timed out: 60 s after its start
    out.append(value(7, e + 1, "CompleteAbort", t + 60_010, t))
    e += 2
    t += 61_000
    out.append(value(7, e, "Empty", t))
    txn(e)
    return out


def write_log(bootstrap: str, records: int) -> int:
    """``records`` records of 20,000-odd ids (a small pool of values, keys all distinct per id) plus the target's."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 2_000_000, "compression.type": "lz4", "log_level": 0})
    pool = [value(1000 + i, i % 5, s, T0 + i) for i, s in enumerate(["Empty", "Ongoing", "PrepareCommit", "CompleteCommit"] * 4)]
    target = target_history()
    ids = -(-(records - len(target)) // RECORDS_PER_ID)  # at least ``records`` in all
    written = 0
    for i in range(ids):
        tid = f"app-{i}-{uuid.UUID(int=i).hex[:8]}"
        key, p = encode_key(tid), coordinator_partition(tid, LOG_PARTITIONS)
        for j in range(RECORDS_PER_ID):
            producer.produce(TOPIC, pool[j % len(pool)], key, partition=p)
            written += 1
        producer.poll(0)
    key, p = encode_key(TARGET), coordinator_partition(TARGET, LOG_PARTITIONS)
    for v in target:
        producer.produce(TOPIC, v, key, partition=p)
        written += 1
    left = producer.flush(300)
    if left:
        raise RuntimeError(f"{left} records not written")
    return written


FULL_READ = """
import sys, time
from kafkatxn.kafka.log_reader import read_transaction_log
started = time.perf_counter()
n = sum(len(c) for c in read_transaction_log({"bootstrap.servers": sys.argv[1]}, topic=sys.argv[2], timeout_ms=600_000))
print(n, time.perf_counter() - started)
"""

# The same reader over the wire's Fetch (the facade's source: what history, hanging and diagnose use).
FULL_READ_WIRE = """
import sys, time
from kafkatxn.config import ConnectionConfig
from kafkatxn.kafka import Cluster
from kafkatxn.kafka.log_reader import read_transaction_log
from kafkatxn.kafka.transaction_log import FacadeLog
started = time.perf_counter()
with Cluster(ConnectionConfig(sys.argv[1], timeout_ms=600_000)) as cluster:
    parts = sorted(p.partition for p in cluster.metadata().partitions if p.topic == sys.argv[2])
    n = sum(len(c) for c in read_transaction_log(FacadeLog(cluster, sys.argv[2]), parts, topic=sys.argv[2], timeout_ms=600_000))
print(n, time.perf_counter() - started)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    workdir = Path("/tmp") / f"bench-history-{uuid.uuid4().hex[:6]}"
    cluster = KafkaCluster(workdir, n_brokers=1, name="bench-history")
    cluster.start(timeout=120)
    try:
        b = cluster.bootstrap_servers
        cluster.create_topic(TOPIC, partitions=LOG_PARTITIONS)
        began = time.perf_counter()
        written = write_log(b, args.records)
        print(f"wrote {written} records in {time.perf_counter() - began:.1f} s; the target's partition "
              f"({coordinator_partition(TARGET, LOG_PARTITIONS)}) holds ~{written // LOG_PARTITIONS}")
        history, full, full_wire = [], [], []
        ok = True
        for _ in range(args.rounds):
            run = kafkatxn("transactions", "history", TARGET, "--log-topic", TOPIC, "-o", "json", "-b", b, "--timeout", "60s")
            rows = json.loads(run.stdout) if run.returncode == 0 else []
            events = [e for r in rows for e in r["events"] if e != "partitions_added"]
            if events != EXPECTED:
                print(f"history answered wrong (exit {run.returncode}): {events} {run.stderr[-500:]}")
                ok = False
            history.append(run.seconds)
            for script, how, times in ((FULL_READ, "", full), (FULL_READ_WIRE, " over Fetch", full_wire)):
                ref = run_measured([sys.executable, "-c", script, b, TOPIC])
                count = int(ref.stdout.split()[0]) if ref.returncode == 0 else -1
                if count != written:
                    print(f"the full read{how} saw {count} records, not {written}: {ref.stderr[-500:]}")
                    ok = False
                times.append(ref.seconds)
        h, f = statistics.median(history), statistics.median(full)
        print(f"history, one id, one partition (own process): median {h:.3f} s (min {min(history):.3f}, max {max(history):.3f}, n={len(history)})")
        print(f"reference, the whole log by the same reader:  median {f:.3f} s (min {min(full):.3f}, max {max(full):.3f})")
        fw = statistics.median(full_wire)
        print(f"  the same, over Fetch (the facade's source):  median {fw:.3f} s (min {min(full_wire):.3f}, max {max(full_wire):.3f})")
        print(f"ratio history / whole log: {h / f:.3f}; target under 2 s: {'met' if h < 2.0 else 'MISSED'}")
        return 0 if ok and h < 2.0 else 1
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
