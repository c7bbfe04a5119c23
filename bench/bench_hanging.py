"""`kafkatxn hanging` over a whole cluster versus Kafka's own find-hanging, on the same cluster.

    python bench/bench_hanging.py                       # 3 brokers, 2,000 partitions, 110 producers
    python bench/bench_hanging.py --brokers 2 --rounds 3

Starts a cluster with harness/ (transaction.partition.verification.enable=false, so hanging
transactions can be made), creates ``--topics`` x ``--partitions-per-topic`` partitions, and gives
them producer state:

* ``--hanging`` genuinely hanging transactions (harness/hanging_maker.py: InitProducerId, then a raw
  transactional Produce without AddPartitionsToTxn);
* ``--open`` ordinary transactions left open (600 s timeout): candidates their coordinator still
  tracks, which neither tool may report;
* ``--committed`` transactional producers that committed, and ``--idempotent`` idempotent ones.

After ``--wait`` seconds every transaction is older than the 1-minute bound both tools are given
(Kafka's tool takes whole minutes). Then, ``--rounds`` times, alternating:

* reference: ``org.apache.kafka.tools.TransactionsCommand find-hanging --broker-id B`` run once per
  broker (the tool needs --topic or --broker-id), each a JVM started by the harness, as an operator
  would run ``kafka-transactions.sh``;
* ``kafkatxn hanging --max-transaction-timeout 1m`` once, as its own process (Python start included).

Findings must be identical as sets of (topic, partition, producer_id). Prints both medians and the
ratio kafkatxn / reference (target <= 0.5). Exit 1 when the findings differ.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import Finding, find_hanging_per_broker  # noqa: E402  (puts the repository on sys.path)
from confluent_kafka import Producer  # noqa: E402

from harness import hanging_maker  # noqa: E402
from harness import KafkaCluster  # noqa: E402
from kafkatxn.model import TopicPartition  # noqa: E402

TARGET_RATIO = 0.5
BOUND_MINUTES = 1


def create_topics(cluster: KafkaCluster, topics: int, partitions: int) -> list[str]:
    return [cluster.create_topic(f"bench-hanging-{i:03d}", partitions=partitions, timeout=180) for i in range(topics)]


def spread(topics: list[str], partitions: int, count: int, salt: int) -> list[TopicPartition]:
    """``count`` distinct partitions scattered over the topics (and so over the brokers)."""
    out: list[TopicPartition] = []
    i = 0
    while len(out) < count:
        tp = TopicPartition(topics[(i + salt) % len(topics)], (i * 37 + salt * 11) % partitions)
        if tp not in out:
            out.append(tp)
        i += 1
    return out


def seed(bootstrap: str, topics: list[str], partitions: int, args: argparse.Namespace) -> tuple[set[Finding], list[Producer]]:
    quiet = {"bootstrap.servers": bootstrap, "log_level": 0, "linger.ms": 5}
    for i, tp in enumerate(spread(topics, partitions, args.committed, salt=1)):
        p = Producer({**quiet, "transactional.id": f"bench-committed-{i}"})
        p.init_transactions(30)
        p.begin_transaction()
        p.produce(tp.topic, b"committed", partition=tp.partition)
        p.commit_transaction(30)
    idem = [Producer({**quiet, "enable.idempotence": True}) for _ in range(args.idempotent)]
    for p, tp in zip(idem, spread(topics, partitions, args.idempotent, salt=2)):
        p.produce(tp.topic, b"idempotent", partition=tp.partition)
    for p in idem:
        p.flush(30)
    open_producers = []
    for i, tp in enumerate(spread(topics, partitions, args.open, salt=3)):
        p = Producer({**quiet, "transactional.id": f"bench-open-{i}", "transaction.timeout.ms": 600_000})
        p.init_transactions(30)
        p.begin_transaction()
        p.produce(tp.topic, b"open", partition=tp.partition)
        p.flush(30)
        open_producers.append(p)  # kept alive: the transaction stays open and tracked
    expected: set[Finding] = set()
    for i, tp in enumerate(spread(topics, partitions, args.hanging, salt=4)):
        made = hanging_maker.make_hanging_transaction(bootstrap, f"bench-hanging-{i}", tp.topic, tp.partition, records=2)
        expected.add((made.topic, made.partition, made.producer_id))
    return expected, open_producers


def run_kafkatxn(bootstrap: str) -> tuple[float, set[Finding], dict]:
    command = [sys.executable, "-m", "kafkatxn", "hanging", "-b", bootstrap, "--max-transaction-timeout", f"{BOUND_MINUTES}m",
               "--timeout", "120s", "-o", "json"]
    started = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    elapsed = time.perf_counter() - started
    if proc.returncode not in (0, 2):
        raise SystemExit(f"kafkatxn hanging exited {proc.returncode}: {proc.stderr.strip()}")
    doc = json.loads(proc.stdout)
    return elapsed, {(r["topic"], r["partition"], r["producer_id"]) for r in doc["hanging"]}, doc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--partitions-per-topic", type=int, default=100)
    parser.add_argument("--hanging", type=int, default=20)
    parser.add_argument("--open", type=int, default=10)
    parser.add_argument("--committed", type=int, default=60)
    parser.add_argument("--idempotent", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--wait", type=float, default=BOUND_MINUTES * 60 + 2, help="seconds between seeding and measuring")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-hanging-") as workdir:
        # Verification off so hanging transactions can be made; the default 15-minute maximum
        # transaction timeout keeps the open ones tracked for the whole run.
        cluster = KafkaCluster(Path(workdir), n_brokers=args.brokers, name="bench-hanging",
                               broker_config={"transaction.partition.verification.enable": "false"})
        cluster.start(timeout=180)
        try:
            topics = create_topics(cluster, args.topics, args.partitions_per_topic)
            expected, open_producers = seed(cluster.bootstrap_servers, topics, args.partitions_per_topic, args)
            seeded_at = time.monotonic()
            producers = args.hanging + args.open + args.committed + args.idempotent
            print(f"cluster: {args.brokers} brokers, {args.topics * args.partitions_per_topic} partitions in {args.topics} "
                  f"topics (+ internal), {producers} producers ({args.hanging} hanging, {args.open} open and tracked, "
                  f"{args.committed} committed, {args.idempotent} idempotent)")
            time.sleep(max(0.0, seeded_at + args.wait - time.monotonic()))

            # Warm-up of each (page cache, JVM class-data sharing archive), not counted.
            find_hanging_per_broker(cluster, BOUND_MINUTES)
            run_kafkatxn(cluster.bootstrap_servers)
            ours, theirs = [], []
            ours_found = theirs_found = set()
            doc: dict = {}
            for _ in range(args.rounds):
                t, theirs_found = find_hanging_per_broker(cluster, BOUND_MINUTES)
                theirs.append(t)
                t, ours_found, doc = run_kafkatxn(cluster.bootstrap_servers)
                ours.append(t)
            del open_producers
        finally:
            cluster.stop()

    identical = ours_found == theirs_found == expected
    ratio = statistics.median(ours) / statistics.median(theirs)
    print(f"partitions scanned by kafkatxn: {doc.get('partitions_scanned')} (internal topics included)")
    print(f"findings: kafkatxn {len(ours_found)}, find-hanging {len(theirs_found)}, made {len(expected)}; "
          f"identical: {'yes' if identical else 'NO'}")
    if not identical:
        print(f"  only kafkatxn: {sorted(ours_found - theirs_found)}")
        print(f"  only find-hanging: {sorted(theirs_found - ours_found)}")
        print(f"  made but not found: {sorted(expected - (ours_found & theirs_found))}")
    print(f"find-hanging, once per broker ({args.brokers} JVMs): median {statistics.median(theirs):.2f} s "
          f"(runs: {', '.join(f'{t:.2f}' for t in theirs)})")
    print(f"kafkatxn hanging, whole cluster:            median {statistics.median(ours):.2f} s "
          f"(runs: {', '.join(f'{t:.2f}' for t in ours)})")
    print(f"ratio kafkatxn / find-hanging: {ratio:.2f} (target <= {TARGET_RATIO})")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
