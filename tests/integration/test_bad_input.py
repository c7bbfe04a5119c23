"""Bad input against a real broker: what does not exist is named, in one line, and nothing changes.

Nonexistent topics and partitions, brokers, partitions without the named producer, transactional ids
the cluster does not know, and numbers too wide for Kafka's fields. Each case reads the cluster's
state before and after the command (offsets at both isolation levels through librdkafka consumers,
producer state, the transactions of this module's ids, the topic list, the audit log) and requires
them equal. The broker is the one the hanging and remedy tests share (verification off), so a
genuinely hanging transaction can sit on partition 0, ready to be aborted by mistake.
"""

from __future__ import annotations

import json
import uuid

import pytest

from harness import hanging_maker as hm
from kafkatxn import auditlog
from kafkatxn.config import ConnectionConfig
from kafkatxn.errors import INT16_MAX, INT32_MAX, INT64_MAX
from kafkatxn.kafka import Cluster
from kafkatxn.model import TopicPartition
from tests.support.cli_helpers import run_cli

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(kafka_hanging):
    return kafka_hanging


@pytest.fixture(scope="module")
def scene(broker):
    """Topic T: p0 holds a hanging transaction after a committed one, p1 a committed transaction."""
    topic = broker.create_topic(f"bad-input-{uuid.uuid4().hex[:8]}", partitions=2)
    bootstrap = broker.bootstrap_servers
    hm.write_committed(bootstrap, TopicPartition(topic, 0), [b"c0"], f"{topic}-c0")
    made = hm.make_hanging_transaction(bootstrap, f"{topic}-hanging", topic, 0)
    hm.write_committed(bootstrap, TopicPartition(topic, 1), [b"c1"], f"{topic}-c1")
    return topic, made


def state(broker, topic: str, audit_path) -> dict:
    """Everything a mistaken command could change, read without kafkatxn's commands."""
    bootstrap = broker.bootstrap_servers
    tps = [TopicPartition(topic, p) for p in (0, 1)]
    with Cluster(ConnectionConfig(bootstrap, timeout_ms=20_000)) as cluster:
        producers = cluster.describe_producers(tps)
        listed, _ = cluster.list_transactions()
    assert producers.complete and listed.complete
    return {
        # Internal topics come and go with first use (this very reading creates __consumer_offsets).
        "topics": sorted(t for t in broker.admin_client().list_topics(timeout=10).topics if not t.startswith("__")),
        "offsets": {str(tp): (hm.end_offset(bootstrap, tp, True), hm.end_offset(bootstrap, tp, False)) for tp in tps},
        "producers": {str(tp): sorted(tuple(s) for s in producers.value[tp]) for tp in tps},
        # Only this module's ids: other modules' transactions may time out meanwhile.
        "transactions": sorted((t.transactional_id, t.state, t.producer_id) for t in listed.value if t.transactional_id.startswith(topic)),
        "audit": auditlog.read_records(audit_path),
    }


def cli(capsys, broker, audit_path, *args):
    extra = ["--audit-log", str(audit_path)] if args[0] in ("abort", "fence") else []
    return run_cli(capsys, *args, *extra, "-b", broker.bootstrap_servers, "--timeout", "30s")


def one_line_error(result) -> str:
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kafkatxn: error: "), result.stderr
    assert "Traceback" not in result.stderr and "error: unexpected " not in result.stderr, result.stderr
    return lines[0]


NOPE = "no-such-topic-kt"

# (arguments, exit code, what stderr names); {t} is the topic, {pid}/{epoch} the hanging producer.
ERRORS = [
    (["producers", "-t", NOPE], 3, f"unknown topic '{NOPE}'"),
    (["lso", "-t", NOPE], 3, f"unknown topic '{NOPE}'"),
    (["hanging", "-t", NOPE], 3, f"unknown topic '{NOPE}'"),
    (["abort", "--max-transaction-timeout", "0s", "-t", NOPE, "-p", "0", "--start-offset", "0", "--yes"], 3, f"unknown topic '{NOPE}'"),
    (["producers", "-t", "{t}", "-p", "7"], 3, "has no partition 7 (it has 2: 0-1)"),
    (["hanging", "-t", "{t}", "-p", "7"], 3, "has no partition 7"),
    (["abort", "--max-transaction-timeout", "0s", "-t", "{t}", "-p", "7", "--start-offset", "0", "--yes"], 3, "has no partition 7"),
    (["producers", "-t", "{t}", "--broker-id", "42"], 3, "unknown broker id 42"),
    (["hanging", "--broker-id", "42"], 3, "unknown broker id 42"),
    (["producers", "-t", "bad topic"], 64, "bad topic name 'bad topic'"),
    (["abort", "--max-transaction-timeout", "0s", "-t", "bad/topic", "-p", "0", "--start-offset", "0", "--yes"], 64, "bad topic name 'bad/topic'"),
    # Wider than Kafka's fields: refused before the wire (an int64 producer id, an int32 epoch).
    (["transactions", "list", "--producer-id", str(INT64_MAX + 1)], 64, "--producer-id"),
    (["abort", "--max-transaction-timeout", "0s", "-t", "{t}", "-p", "0", "--producer-id", "{pid}", "--producer-epoch", "{epoch}",
      "--coordinator-epoch", str(INT32_MAX + 1), "--yes"], 64, "--coordinator-epoch"),
    (["abort", "--max-transaction-timeout", "0s", "-t", "{t}", "-p", "0", "--producer-id", "{pid}", "--producer-epoch", str(INT16_MAX + 1),
      "--coordinator-epoch", "0", "--yes"], 64, "--producer-epoch"),
    (["abort", "--max-transaction-timeout", "0s", "-t", "{t}", "-p", "0", "--start-offset", str(INT64_MAX + 1), "--yes"], 64, "--start-offset"),
    # Transactional ids the cluster does not know.
    (["fence", "{t}-never-seen", "--yes", "-o", "json"], 3, "unknown to the cluster"),  # refused in its row: fencing would create it
    (["transactions", "describe", "{t}-never-seen"], 1, "transactional id not found: {t}-never-seen"),
]


@pytest.mark.parametrize("args, code, named", ERRORS, ids=[" ".join(a[:4]) for a, _c, _n in ERRORS])
def test_what_does_not_exist_is_named_and_nothing_changes(capsys, broker, scene, tmp_path, args, code, named):
    topic, made = scene
    fill = {"{t}": topic, "{pid}": str(made.producer_id), "{epoch}": str(made.producer_epoch)}

    def filled(text: str) -> str:
        for key, value in fill.items():
            text = text.replace(key, value)
        return text

    args = [filled(a) for a in args]
    audit_path = tmp_path / "audit.jsonl"
    before = state(broker, topic, audit_path)
    result = cli(capsys, broker, audit_path, *args)
    assert result.code == code, result.stdout + result.stderr
    if args[0] == "fence":
        (row,) = json.loads(result.stdout)
        assert row["outcome"] == "refused" and filled(named) in row["reason"], row
    elif code in (3, 64):
        assert filled(named) in one_line_error(result), result.stderr
        assert result.stdout == ""
    else:
        assert filled(named) in result.stderr, result.stderr
    after = state(broker, topic, audit_path)
    assert without_audit(after) == without_audit(before)
    # A refused fence is audited as refused (a result with no intent); nothing else is written.
    expected = [("result", "refused")] if args[0] == "fence" else []
    assert audit_added(before, after) == expected


def without_audit(snapshot: dict) -> dict:
    return {k: v for k, v in snapshot.items() if k != "audit"}


def audit_added(before: dict, after: dict) -> list[tuple[str, str | None]]:
    return [(r["record"], r.get("outcome")) for r in after["audit"][len(before["audit"]):]]


def test_a_producer_the_partition_never_saw_is_refused_and_nothing_changes(capsys, broker, scene, tmp_path):
    """The producer exists on p0 (a hanging transaction); p1 never saw it, and an invented id is
    nowhere: each abort is refused in its row (a typo in a runbook must not read as success),
    audited as refused, and changes nothing, the hanging transaction included."""
    topic, made = scene
    audit_path = tmp_path / "audit.jsonl"
    before = state(broker, topic, audit_path)
    for partition, producer_id in ((1, made.producer_id), (0, 987_654_321)):
        result = cli(capsys, broker, audit_path, "abort", "--max-transaction-timeout", "0s", "-t", topic, "-p", str(partition), "--producer-id", str(producer_id),
                     "--producer-epoch", str(made.producer_epoch), "--coordinator-epoch", "0", "--yes", "-o", "json")
        assert result.code == 3, result.stderr
        (row,) = json.loads(result.stdout)
        assert row["outcome"] == "refused"
        assert row["reason"].startswith(f"producer {producer_id} is unknown to {topic}-{partition}"), row["reason"]
    # A start offset where p1 has nothing open: nothing to abort, and nothing written.
    result = cli(capsys, broker, audit_path, "abort", "--max-transaction-timeout", "0s", "-t", topic, "-p", "1", "--start-offset", "0", "--yes", "-o", "json")
    assert result.code == 0, result.stderr
    assert [r["outcome"] for r in json.loads(result.stdout)] == ["nothing to abort"]
    after = state(broker, topic, audit_path)
    assert without_audit(after) == without_audit(before)
    assert audit_added(before, after) == [("result", "refused"), ("result", "refused")]
    assert after["offsets"][f"{topic}-0"][0] == made.start_offset  # still pinned: nothing was aborted


def test_patterns_that_match_no_transactional_id_change_nothing(capsys, broker, scene, tmp_path):
    topic, _made = scene
    audit_path = tmp_path / "audit.jsonl"
    before = state(broker, topic, audit_path)
    fenced = cli(capsys, broker, audit_path, "fence", "--pattern", f"{topic}-nothing-.*", "--yes")
    assert fenced.code == 0 and "nothing to fence" in fenced.stderr + fenced.stdout, fenced.stderr
    listed = cli(capsys, broker, audit_path, "transactions", "list", "--pattern", f"{topic}-nothing-.*", "-o", "json")
    assert (listed.code, json.loads(listed.stdout)) == (0, [])
    assert state(broker, topic, audit_path) == before
