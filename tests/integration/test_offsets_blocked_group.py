"""A read_committed group held through its ``__consumer_offsets`` partition, on a real broker at its
default ``transaction.max.timeout.ms`` (15 min): a librdkafka transactional producer (an
exactly-once application) commits the group's offsets in a transaction (``send_offsets_to_transaction``),
opens the next one and is killed. The group's own consumer then cannot start: its stable offset
fetch (KIP-447) answers UNSTABLE_OFFSET_COMMIT. ``lso --groups``, ``diagnose`` and ``check --groups``
name the transaction on the group's offsets partition (they called the group caught up: issue 34);
the fix diagnose offers lets the group's real consumer start at its committed offset.

What is compared comes from the clients that made the traffic, never from kafkatxn.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition as CTP

from harness.scenarios import create_topic, run_idempotent, unique
from kafkatxn.config import ConnectionConfig
from kafkatxn.kafka import Cluster
from kafkatxn.model import TopicPartition
from kafkatxn.verdicts_groups import offsets_partition
from tests.support.cli_helpers import run_cli

pytestmark = pytest.mark.integration

COMMITTED = 5  # the offset the group's last committed transaction stored
PENDING = 8  # the offset the killed producer's open transaction was storing

# The exactly-once application: one committed transaction (records to OUT, the group's offset
# COMMITTED), then one left open (offset PENDING), then it waits to be killed.
APPLICATION = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Consumer, Producer, TopicPartition
    bootstrap, source, out, group, tid = sys.argv[1:6]
    committed, pending = int(sys.argv[6]), int(sys.argv[7])
    metadata = Consumer({"bootstrap.servers": bootstrap, "group.id": group}).consumer_group_metadata()
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": 900000})
    producer.init_transactions(30)
    for offset, end in ((committed, producer.commit_transaction), (pending, None)):
        producer.begin_transaction()
        producer.produce(out, value=b"out-%d" % offset, partition=0)
        producer.flush(30)
        producer.send_offsets_to_transaction([TopicPartition(source, 0, offset)], metadata, 30)
        if end is not None:
            end(30)
    print("open", flush=True)
    time.sleep(600)
""")


def cli(capsys, bootstrap: str, *args: str, codes=(0,)) -> tuple[dict | list, str]:
    result = run_cli(capsys, *args, "--bootstrap-server", bootstrap, "--timeout", "20s", "-o", "json")
    assert result.code in codes, (args, result.code, result.stdout, result.stderr)
    return json.loads(result.stdout), result.stderr


def offsets_of(bootstrap: str, *tps: TopicPartition) -> dict[TopicPartition, tuple[int, int]]:
    with Cluster(ConnectionConfig(bootstrap, timeout_ms=20_000)) as c:
        pairs = c.stable_and_high_offsets(tps)
        assert not pairs.missing, pairs.missing
        return pairs.value


def committed_by_its_consumer(bootstrap: str, group: str, tp: TopicPartition, timeout_s: float) -> int | None:
    """The group's committed offset as its read_committed consumer fetches it (librdkafka sets
    require_stable): None while the fetch does not succeed within ``timeout_s``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                         "enable.auto.commit": False})
    try:
        (found,) = consumer.committed([CTP(tp.topic, tp.partition)], timeout=timeout_s)
        return found.offset if found.error is None else None
    except KafkaException:
        return None
    finally:
        consumer.close()


def first_record_read(bootstrap: str, group: str, tp: TopicPartition) -> int:
    """The offset of the first record the group's read_committed consumer reads, starting where the group committed."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                         "enable.auto.commit": False, "auto.offset.reset": "latest"})
    try:
        consumer.assign([CTP(tp.topic, tp.partition)])  # no offset: the committed one
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(1)
            if msg is not None and msg.error() is None:
                return msg.offset()
        raise AssertionError("the group's consumer read nothing within 30 s")
    finally:
        consumer.close()


def test_a_group_held_through_its_offsets_partition_is_named_and_the_fix_lets_its_consumer_start(capsys, kafka, tmp_path):
    bootstrap = kafka.bootstrap_servers
    source, out, group, tid = unique("offsets-src"), unique("offsets-out"), unique("offsets-eos"), unique("offsets-eos-tx")
    create_topic(bootstrap, source, partitions=1)
    create_topic(bootstrap, out, partitions=1)
    run_idempotent(bootstrap, source, partition=0, records=10)
    src = TopicPartition(source, 0)
    app = subprocess.Popen([sys.executable, "-c", APPLICATION, bootstrap, source, out, group, tid, str(COMMITTED), str(PENDING)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = app.stdout.readline()
        assert line.strip() == "open", (line, app.stderr.read() if app.poll() is not None else "")
    finally:
        os.kill(app.pid, signal.SIGKILL)  # crashed mid-transaction: its offset commit stays open
        app.wait(10)
    with Cluster(ConnectionConfig(bootstrap, timeout_ms=20_000)) as c:
        count = sum(1 for p in c.metadata().partitions if p.topic == "__consumer_offsets")
    held = TopicPartition("__consumer_offsets", offsets_partition(group, count))

    # The group's own consumer cannot learn where to start.
    assert committed_by_its_consumer(bootstrap, group, src, timeout_s=5) is None
    before = offsets_of(bootstrap, src, held)
    assert before[held][0] < before[held][1]  # the open transaction pins the offsets partition's LSO

    (row,), _ = cli(capsys, bootstrap, "lso", "--groups", group)
    assert (row["verdict"], row["blocked_through"], row["transactional_id"]) == ("waiting", str(held), tid), row
    assert row["committed_offset"] == COMMITTED and row["txn_hanging"] is False

    doc, _ = cli(capsys, bootstrap, "diagnose", "--group", group)
    (t,) = doc["transactions"]
    assert t["transactional_id"] == tid and t["groups"] == [group]
    assert t["partitions"] == [f"{held}@{before[held][0]}"] and t["coordinator_state"] == "Ongoing"
    assert t["transaction_timeout_ms"] == 900_000 and t["verdict"] == "tracked"
    (part,) = doc["partitions"]
    assert part["gap"] == "waiting" and "UNSTABLE_OFFSET_COMMIT" in part["explanation"] and str(held) in part["explanation"]
    fix = t["release_command"] if t["action"] == "wait" else t["command"]
    assert fix == f"kafkatxn fence {tid}"

    checked, _ = cli(capsys, bootstrap, "check", "--groups", "--group-regex", f"^{group}$", "--txn-age-warn", "1ms",
                     "--txn-age-crit", "none", codes=(1,))
    assert checked["groups_waiting"] == 1, checked
    assert any(str(held) in f["message"] and f["subject"] == group for f in checked["findings"]), checked["findings"]

    # Looking wrote nothing.
    assert offsets_of(bootstrap, src, held) == before

    for part_of_fix in fix.split(" && "):
        argv = shlex.split(part_of_fix)
        result = run_cli(capsys, *argv[1:], "--bootstrap-server", bootstrap, "--yes", "--audit-log", str(tmp_path / "audit.jsonl"),
                         "--timeout", "30s")
        assert result.code == 0, (part_of_fix, result.stdout, result.stderr)

    # The group's own consumer starts, at the offset its last committed transaction stored.
    assert committed_by_its_consumer(bootstrap, group, src, timeout_s=20) == COMMITTED
    assert first_record_read(bootstrap, group, src) == COMMITTED
    after = offsets_of(bootstrap, src)
    assert after[src] == before[src]  # the source partition was never written
    (row,), _ = cli(capsys, bootstrap, "lso", "--groups", group)
    assert (row["verdict"], row["blocked_through"]) == ("lagging", None), row
