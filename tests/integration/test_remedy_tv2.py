"""`restore-commit`, `abort` and `fence` against Kafka's own Java producer on transaction version 2.

On transaction version 2 (KIP-890) every commit or abort bumps the producer's epoch, and a Kafka
4.3+ leader checks a marker that declares version 2 strictly (KIP-1228: its epoch must be above the
partition's). kafkatxn's markers declare version 0 and carry the epoch of the open transaction
itself, which the partition expects (kafkatxn/kafka/wire/transactions_codec.py). Each test drives one
TxnTraffic JVM (tests/support/java/TxnTraffic.java, the harness's kafka-clients) and checks, with
librdkafka consumers and DescribeProducers, not with kafkatxn's own verdicts: the LSO and high
watermark before and after, what a read_committed consumer reads, and what was not written where a
remedy refuses. The producer's epochs show transaction version 2 at work (one bump per commit).
"""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CTP

from harness import hanging_maker as hm
from harness.jars import default_kafka_version
from kafkatxn.config import ConnectionConfig
from kafkatxn.kafka import Cluster
from kafkatxn.model import TopicPartition
from tests.support.cli_helpers import run_cli
from tests.support.java_traffic import Session

pytestmark = [
    pytest.mark.integration,
    pytest.mark.destructive,
    pytest.mark.skipif(int(default_kafka_version().split(".")[0]) < 4,
                       reason="transaction version 2 (KIP-890) needs Kafka 4.x brokers and clients"),
]

TIMEOUT = ["--timeout", "30s"]


@pytest.fixture(scope="module")
def broker(kafka_hanging):
    # Verification off: the hanging transaction below is written by hand (harness/hanging_maker.py).
    # The Java producer's Produce v12+ is verified and added by its leader whatever this setting says.
    return kafka_hanging


def _offsets(bootstrap: str, tp: TopicPartition) -> tuple[int, int]:
    with Cluster(ConnectionConfig(bootstrap, timeout_ms=20_000)) as c:
        return c.stable_and_high_offsets([tp]).value[tp]


def _producer(bootstrap: str, tp: TopicPartition, producer_id: int | None = None):
    with Cluster(ConnectionConfig(bootstrap, timeout_ms=20_000)) as c:
        states = c.describe_producers([tp]).value[tp]
    if producer_id is None:
        (state,) = states
        return state
    return next(s for s in states if s.producer_id == producer_id)


def _committed(bootstrap: str, tp: TopicPartition, producer_id: int | None = None):
    """The producer's state once its last commit's marker is in the log. The Java producer's commit
    returns when the coordinator has the decision; the leader appends the marker (which carries the
    bumped epoch on transaction version 2) a moment later, so reading at once can see the old epoch."""
    deadline = time.monotonic() + 20
    while True:
        stable, high = _offsets(bootstrap, tp)
        state = _producer(bootstrap, tp, producer_id)
        if (stable == high and state.current_txn_start_offset == -1) or time.monotonic() > deadline:
            return state
        time.sleep(0.1)


def _read_committed(bootstrap: str, tp: TopicPartition) -> list[bytes]:
    """Every value a read_committed consumer gets from offset 0 up to the LSO (the partition's end for it)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"tv2-{time.monotonic_ns()}", "log_level": 0,
                         "isolation.level": "read_committed", "enable.partition.eof": True, "enable.auto.commit": False})
    consumer.assign([CTP(tp.topic, tp.partition, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None:
                continue
            if m.error() is None:
                values.append(m.value())
            elif m.error().code() == -191:  # _PARTITION_EOF
                return values
    finally:
        consumer.close()
    raise AssertionError(f"no end of {tp} reached; read {values}")


def _transaction_version(capsys, bootstrap: str) -> int:
    done = run_cli(capsys, "cluster", "-b", bootstrap, *TIMEOUT, "-o", "json")
    assert done.code == 0, done.stderr
    return json.loads(done.stdout)["transaction_version"]


def _cli(capsys, bootstrap: str, tmp_path: Path, *args: str):
    done = run_cli(capsys, *args, "-b", bootstrap, *TIMEOUT, "--audit-log", str(tmp_path / "audit.jsonl"), "-o", "json")
    return done, (json.loads(done.stdout) if done.stdout.strip() else None)


def test_a_hanging_transaction_under_a_tv2_producer_is_aborted_at_the_epoch_its_partition_expects(capsys, broker, unique_name, tmp_path):
    bootstrap = broker.bootstrap_servers
    topic, tid = unique_name[-200:], f"{unique_name[-190:]}-app"
    broker.create_topic(topic, partitions=1)
    tp = TopicPartition(topic, 0)
    assert _transaction_version(capsys, bootstrap) == 2

    with Session(broker, topic) as java:
        java.send(f"timeout {hm.HANGING_BROKER_MAX_TIMEOUT_MS}")
        java.send(f"init app {tid}")
        first = None
        for value in ("c0", "c1"):
            java.send(f"txn app {value}")
            state = _committed(bootstrap, tp)
            first = state.producer_epoch if first is None else first
        assert state.producer_epoch == first + 1  # transaction version 2: the commit marker bumped the epoch
        java.send("close app")

        # An open transaction of this producer id at the epoch its partition holds, never added to
        # the coordinator (which has the id in CompleteCommit): hanging, with TV2's epochs.
        epoch = state.producer_epoch
        with Cluster(ConnectionConfig(bootstrap, timeout_ms=20_000)) as c:
            start = hm.produce_transactional_batch(c, tp, state.producer_id, epoch, tid, [b"h0", b"h1", b"h2"])
        assert _offsets(bootstrap, tp) == (start, start + 3)
        assert _read_committed(bootstrap, tp) == [b"c0", b"c1"]

        # A marker one epoch above would pass the leader's check and fence the producer on this
        # partition: kafkatxn refuses any epoch but the open transaction's, and writes nothing.
        wrong, rows = _cli(capsys, bootstrap, tmp_path, "abort", "--max-transaction-timeout", "0s", "-t", topic, "-p", "0",
                           "--producer-id", str(state.producer_id), "--producer-epoch", str(epoch + 1),
                           "--coordinator-epoch", "0", "--yes")
        assert (wrong.code, rows[0]["outcome"]) == (3, "refused"), wrong.stdout + wrong.stderr
        assert _offsets(bootstrap, tp) == (start, start + 3)
        assert _producer(bootstrap, tp).producer_epoch == epoch

        done, rows = _cli(capsys, bootstrap, tmp_path, "abort", "--max-transaction-timeout", "0s", "-t", topic, "-p", "0",
                          "--start-offset", str(start), "--yes")
        assert done.code == 0, done.stdout + done.stderr
        (row,) = rows
        assert (row["outcome"], row["producer_id"], row["producer_epoch"]) == ("aborted", state.producer_id, epoch)
        assert _offsets(bootstrap, tp) == (start + 4, start + 4)  # the ABORT marker is the one record more
        assert _read_committed(bootstrap, tp) == [b"c0", b"c1"]
        after = _producer(bootstrap, tp)
        assert (after.producer_epoch, after.current_txn_start_offset) == (epoch, -1)  # not bumped: nobody fenced

        # The id goes on: its next producer commits on the partition.
        java.send(f"init again {tid}")
        java.send("txn again c2")
        _committed(bootstrap, tp)
    assert _read_committed(bootstrap, tp) == [b"c0", b"c1", b"c2"]
    assert _offsets(bootstrap, tp) == (start + 6, start + 6)


def test_a_live_tv2_producer_is_fenced_and_its_open_transaction_never_becomes_visible(capsys, kafka, unique_name, tmp_path):
    bootstrap = kafka.bootstrap_servers
    topic, tid = unique_name[-200:], f"{unique_name[-190:]}-live"
    kafka.create_topic(topic, partitions=1)
    tp = TopicPartition(topic, 0)
    assert _transaction_version(capsys, bootstrap) == 2

    with Session(kafka, topic) as java:
        java.send(f"init live {tid}")
        java.send("txn live c0")
        first = _committed(bootstrap, tp)
        java.send("txn live c1")
        second = _committed(bootstrap, tp)
        assert second.producer_epoch == first.producer_epoch + 1  # TV2: each commit bumps the epoch
        java.send("open live doomed")
        opened = _producer(bootstrap, tp)
        start = opened.current_txn_start_offset
        assert (opened.producer_epoch, start) == (second.producer_epoch, 4)
        assert _offsets(bootstrap, tp) == (start, start + 1)

        # Its coordinator tracks the transaction: abort refuses, points at fence, writes nothing.
        refused, rows = _cli(capsys, bootstrap, tmp_path, "abort", "--max-transaction-timeout", "0s", "-t", topic, "-p", "0",
                             "--start-offset", str(start), "--yes")
        assert refused.code == 3 and "kafkatxn fence" in rows[0]["reason"], refused.stdout + refused.stderr
        assert _offsets(bootstrap, tp) == (start, start + 1)

        done, rows = _cli(capsys, bootstrap, tmp_path, "fence", tid, "--yes")
        assert done.code == 0, done.stdout + done.stderr
        (row,) = rows
        assert (row["outcome"], row["state_before"], row["partitions_before"]) == ("fenced", "Ongoing", [f"{topic}-0"])
        assert row["producer_epoch_after"] > row["producer_epoch_before"] >= opened.producer_epoch
        assert _offsets(bootstrap, tp) == (start + 2, start + 2)  # the coordinator's ABORT marker
        assert _read_committed(bootstrap, tp) == [b"c0", b"c1"]

        # The live producer learns it was fenced when it tries to commit; nothing more is written.
        assert java.send("commit live") == "fenced commit live"
    assert _offsets(bootstrap, tp) == (start + 2, start + 2)
    assert _read_committed(bootstrap, tp) == [b"c0", b"c1"]


def _cut_last_batch(partition_dir: Path) -> int:
    """Cut the partition's log before its last record batch, which must be a control batch (a
    transaction marker), as a replica that never received it would hold it; returns its offset."""
    (segment,) = sorted(partition_dir.glob("*.log"))
    data = segment.read_bytes()
    position, last = 0, None
    while position + 12 <= len(data):
        base_offset, length = struct.unpack_from(">qi", data, position)
        if length <= 0 or position + 12 + length > len(data):
            break
        attributes = struct.unpack_from(">h", data, position + 21)[0]
        last = (position, base_offset, bool(attributes & 0x20))
        position += 12 + length
    assert last is not None and last[2], f"the last batch of {segment} is not a control batch: {last}"
    with open(segment, "r+b") as log:
        log.truncate(last[0])
    # Indexes and producer snapshots past the cut are rebuilt from the log when the broker recovers.
    for stale in [*partition_dir.glob("*.index"), *partition_dir.glob("*.timeindex"), *partition_dir.glob("*.snapshot")]:
        stale.unlink()
    return last[1]


def test_a_lost_tv2_commit_marker_is_restored_and_the_id_goes_on(capsys, kafka_factory, unique_name, tmp_path):
    cluster = kafka_factory(1)  # its own broker: the marker is cut out of the log while the broker is down
    bootstrap = cluster.bootstrap_servers
    topic, tid = unique_name[-200:], f"{unique_name[-190:]}-lost"
    cluster.create_topic(topic, partitions=1)
    tp = TopicPartition(topic, 0)
    assert _transaction_version(capsys, bootstrap) == 2

    with Session(cluster, topic) as java:
        java.send(f"init app {tid}")
        java.send("txn app c0")
        java.send("txn app c1")
        java.send("close app")
        data_epoch = _committed(bootstrap, tp).producer_epoch - 1  # c1's: TV2's COMMIT marker carries it bumped
        assert _offsets(bootstrap, tp) == (4, 4)  # c0, its marker, c1, its marker

        cluster.kill_broker(1)
        assert _cut_last_batch(cluster.node_dir(1) / "data" / f"{topic}-0") == 3
        cluster.start_broker(1, timeout=90)
        # The records of c1 without their marker: an open transaction the coordinator committed.
        deadline = time.monotonic() + 30
        while _offsets(bootstrap, tp)[1] != 3 and time.monotonic() < deadline:
            time.sleep(0.3)
        assert _offsets(bootstrap, tp) == (2, 3)
        assert _producer(bootstrap, tp).producer_epoch == data_epoch
        assert _read_committed(bootstrap, tp) == [b"c0"]

        target = ["--max-transaction-timeout", "0s", "-t", topic, "-p", "0", "--start-offset", "2", "--yes"]
        refused, rows = _cli(capsys, bootstrap, tmp_path, "abort", *target)
        assert refused.code == 3 and rows[0]["outcome"] == "refused", refused.stdout + refused.stderr
        assert "restore-commit" in rows[0]["reason"]
        assert _offsets(bootstrap, tp) == (2, 3)  # no marker of either kind

        restored, rows = _cli(capsys, bootstrap, tmp_path, "restore-commit", *target)
        assert restored.code == 0 and rows[0]["outcome"] == "commit restored", restored.stdout + restored.stderr
        assert _offsets(bootstrap, tp) == (4, 4)
        assert _read_committed(bootstrap, tp) == [b"c0", b"c1"]
        assert _producer(bootstrap, tp).producer_epoch == data_epoch  # the open transaction's own epoch

        # The id's next producer (InitProducerId bumps past every epoch used) commits after it.
        java.send(f"init again {tid}")
        java.send("txn again c2")
        _committed(bootstrap, tp)
    assert _read_committed(bootstrap, tp) == [b"c0", b"c1", b"c2"]
    assert _offsets(bootstrap, tp) == (6, 6)
