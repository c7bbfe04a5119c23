"""`kafkatxn abort` and `kafkatxn fence` against a real broker.

Shares the broker of the hanging tests (verification off, transaction.max.timeout.ms=10000). What
each test checks after acting comes from librdkafka consumers and producers, not from kafkatxn.
"""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from harness import hanging_maker as hm
from kafkatxn import auditlog
from kafkatxn.config import ConnectionConfig
from kafkatxn.kafka import Cluster
from kafkatxn.model import TopicPartition
from tests.support.cli_helpers import run_cli

pytestmark = [pytest.mark.integration, pytest.mark.destructive]


@pytest.fixture(scope="module")
def broker(kafka_hanging):
    return kafka_hanging


@pytest.fixture
def topic(broker, unique_name):
    broker.create_topic(unique_name[-200:], partitions=2)
    return unique_name[-200:]


def cli(capsys, broker, audit_path, *args):
    result = run_cli(capsys, *args, "-b", broker.bootstrap_servers, "--timeout", "30s", "--audit-log", audit_path, "-o", "json")
    return result, (json.loads(result.stdout) if result.stdout.strip() else None)


def producer_states(broker, tp):
    with Cluster(ConnectionConfig(broker.bootstrap_servers, timeout_ms=20_000)) as cluster:
        return cluster.describe_producers([tp]).value[tp]


def test_abort_releases_a_hanging_transaction_and_is_safe_to_repeat(capsys, broker, topic, tmp_path):
    bootstrap = broker.bootstrap_servers
    tp = TopicPartition(topic, 0)
    hm.write_committed(bootstrap, tp, [b"before"], f"{topic}-before")
    made = hm.make_hanging_transaction(bootstrap, f"{topic}-tid", topic, 0)
    hm.write_committed(bootstrap, tp, [b"after-0", b"after-1"], f"{topic}-after")
    assert hm.read_values(bootstrap, tp, read_committed=True, wait_s=1.5) == [b"before"]
    audit_path = tmp_path / "audit.jsonl"

    result, rows = cli(capsys, broker, audit_path, "abort", "--max-transaction-timeout", "0s", "--topic", topic, "--partition", "0",
                       "--start-offset", str(made.start_offset), "--yes")
    assert result.code == 0, result.stderr
    (row,) = rows
    assert (row["outcome"], row["producer_id"], row["producer_epoch"], row["lso_before"]) == (
        "aborted", made.producer_id, made.producer_epoch, made.start_offset)

    high_watermark = hm.end_offset(bootstrap, tp, read_committed=False)
    assert hm.end_offset(bootstrap, tp, read_committed=True) == high_watermark == row["lso_after"]
    assert hm.read_values(bootstrap, tp, read_committed=True, wait_s=2) == [b"before", b"after-0", b"after-1"]

    intent, outcome = auditlog.read_records(audit_path)
    assert (intent["record"], intent["action"], outcome["record"], outcome["outcome"]) == ("intent", "abort", "result", "aborted")
    assert intent["target"]["start_offset"] == made.start_offset and intent["cluster_id"] == broker.cluster_id
    assert intent["state_before"]["last_stable_offset"] == made.start_offset
    assert outcome["state_after"]["last_stable_offset"] == high_watermark

    again, rows = cli(capsys, broker, audit_path, "abort", "--max-transaction-timeout", "0s", "--topic", topic, "--partition", "0",
                      "--start-offset", str(made.start_offset), "--yes")
    assert again.code == 0, again.stderr
    assert [r["outcome"] for r in rows] == ["nothing to abort"]
    assert len(auditlog.read_records(audit_path)) == 2  # nothing acted, nothing recorded


def test_a_stale_start_offset_is_refused_and_nothing_changes(capsys, broker, topic, tmp_path):
    bootstrap = broker.bootstrap_servers
    tp = TopicPartition(topic, 0)
    made = hm.make_hanging_transaction(bootstrap, f"{topic}-tid", topic, 0)
    before = producer_states(broker, tp)
    audit_path = tmp_path / "audit.jsonl"

    result, rows = cli(capsys, broker, audit_path, "abort", "--max-transaction-timeout", "0s", "--topic", topic, "--partition", "0",
                       "--start-offset", str(made.start_offset + 1), "--yes")
    assert result.code == 3
    assert [r["outcome"] for r in rows] == ["refused"]
    assert f"offset {made.start_offset} (producer {made.producer_id})" in rows[0]["reason"]
    assert producer_states(broker, tp) == before
    assert hm.end_offset(bootstrap, tp, read_committed=True) == made.start_offset
    # A refusal is on the audit log as a result without an intent: nothing was attempted.
    assert [(r["record"], r["outcome"]) for r in auditlog.read_records(audit_path)] == [("result", "refused")]

    # The explicit form with a wrong epoch is refused the same way; the right one works.
    result, rows = cli(capsys, broker, audit_path, "abort", "--max-transaction-timeout", "0s", "-t", topic, "-p", "0", "--producer-id", str(made.producer_id),
                       "--producer-epoch", str(made.producer_epoch + 1), "--coordinator-epoch", "0", "--yes")
    assert (result.code, rows[0]["outcome"]) == (3, "refused")
    result, rows = cli(capsys, broker, audit_path, "abort", "--max-transaction-timeout", "0s", "-t", topic, "-p", "0", "--producer-id", str(made.producer_id),
                       "--producer-epoch", str(made.producer_epoch), "--coordinator-epoch", "-1", "--yes")
    assert (result.code, rows[0]["outcome"]) == (0, "aborted"), result.stderr


def test_abort_all_hanging(capsys, broker, topic, tmp_path):
    made = [hm.make_hanging_transaction(broker.bootstrap_servers, f"{topic}-tid-{p}", topic, p) for p in (0, 1)]
    time.sleep(1.2)
    audit_path = tmp_path / "audit.jsonl"
    result, rows = cli(capsys, broker, audit_path, "abort", "--all-hanging", "--max-transaction-timeout", "1s", "--yes")
    assert result.code == 0, result.stderr
    mine = {(r["topic"], r["partition"], r["producer_id"]): r["outcome"] for r in rows if r["topic"] == topic}
    assert mine == {(topic, m.partition, m.producer_id): "aborted" for m in made}
    for m in made:
        assert hm.end_offset(broker.bootstrap_servers, m.tp, True) == hm.end_offset(broker.bootstrap_servers, m.tp, False)
    records = auditlog.read_records(audit_path)
    assert [r["record"] for r in records] == ["intent", "result"] * len(rows)


def test_fence_ends_a_live_producers_open_transaction(capsys, broker, topic, tmp_path):
    bootstrap = broker.bootstrap_servers
    tp = TopicPartition(topic, 0)
    tid = f"{topic}-live"
    live = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": 10_000, "log_level": 0,
                     "logger": __import__("logging").getLogger("tests.fenced")})
    live.init_transactions(30)
    live.begin_transaction()
    for i in range(3):
        live.produce(topic, f"doomed-{i}".encode(), partition=0)
    assert live.flush(30) == 0
    start = hm.end_offset(bootstrap, tp, read_committed=True)
    audit_path = tmp_path / "audit.jsonl"

    # Its coordinator tracks this transaction: abort refuses and points at fence.
    result, rows = cli(capsys, broker, audit_path, "abort", "--max-transaction-timeout", "0s", "-t", topic, "-p", "0", "--start-offset", str(start), "--yes")
    assert result.code == 3 and "kafkatxn fence" in rows[0]["reason"]

    result, rows = cli(capsys, broker, audit_path, "fence", tid, "--yes")
    assert result.code == 0, result.stderr
    (row,) = rows
    assert (row["outcome"], row["state_before"], row["partitions_before"]) == ("fenced", "Ongoing", [f"{topic}-0"])
    assert row["producer_id_after"] == row["producer_id_before"]
    assert row["producer_epoch_after"] > row["producer_epoch_before"]

    with pytest.raises(KafkaException) as failed:
        live.commit_transaction(30)
    assert failed.value.args[0].code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)
    assert hm.read_values(bootstrap, tp, read_committed=True, wait_s=2) == []
    assert hm.end_offset(bootstrap, tp, True) == hm.end_offset(bootstrap, tp, False)

    records = [r for r in auditlog.read_records(audit_path) if r["action"] == "fence"]  # the abort's refusal is there too
    assert [(r["record"], r["action"], r.get("outcome")) for r in records] == [("intent", "fence", None), ("result", "fence", "fenced")]
    assert records[0]["state_before"]["producer_epoch"] == row["producer_epoch_before"]
    assert records[1]["state_after"]["producer_epoch"] == row["producer_epoch_after"]


def test_fence_refuses_an_unknown_id_unless_allowed(capsys, broker, tmp_path):
    tid = f"never-seen-{time.monotonic_ns()}"
    audit_path = tmp_path / "audit.jsonl"
    result, rows = cli(capsys, broker, audit_path, "fence", tid, "--yes")
    assert (result.code, rows[0]["outcome"]) == (3, "refused")
    with Cluster(ConnectionConfig(broker.bootstrap_servers, timeout_ms=20_000)) as cluster:
        described = cluster.describe_transactions([tid])
    assert tid in described.value.not_found  # refusing created nothing
    result, rows = cli(capsys, broker, audit_path, "fence", tid, "--allow-unknown", "--yes")
    assert (result.code, rows[0]["outcome"]) == (0, "fenced"), result.stderr
