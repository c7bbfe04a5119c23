"""A consumer group that never committed, stuck behind a hanging transaction since it started
(issue 24, 4): a real read_committed librdkafka consumer subscribed as group ``ledger``-…, assigned
both partitions of a topic whose partition 0 holds a hanging transaction at offset 0.

The hanging transaction comes from harness/hanging_maker.py (its broker runs with
transaction.partition.verification.enable=false); the offsets compared with come from it, not from
kafkatxn.
"""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Consumer

from harness import hanging_maker as hm
from harness.scenarios import unique
from kafkatxn.model import TopicPartition
from tests.support.cli_helpers import run_cli

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def hanging_broker(kafka_hanging):
    return kafka_hanging


def subscribed_consumer(bootstrap: str, topic: str, group: str, partitions: int) -> Consumer:
    """A read_committed consumer in ``group``, subscribed to ``topic``, that never commits; returned
    once its assignment holds ``partitions`` partitions."""
    assigned: list = []
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
        "enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": 30_000,
    })
    consumer.subscribe([topic], on_assign=lambda _c, tps: assigned.extend(tps))
    deadline = time.monotonic() + 60
    while len(assigned) < partitions:
        assert time.monotonic() < deadline, f"no assignment of {partitions} partitions within 60 s: {assigned}"
        assert consumer.poll(0.5) is None  # nothing readable: partition 0 is pinned at LSO 0, partition 1 empty
    return consumer


def test_group_without_commits_behind_a_hanging_transaction(capsys, hanging_broker, unique_name):
    bootstrap = hanging_broker.bootstrap_servers
    topic, group = unique_name[-190:], unique("ledger")
    hanging_broker.create_topic(topic, partitions=2)
    # A committed transaction elsewhere first: on a new broker it creates __transaction_state.
    hanging_broker.create_topic(f"{topic}-warm", partitions=1)
    hm.write_committed(bootstrap, TopicPartition(f"{topic}-warm", 0), [b"warm"], f"{topic}-warm")
    made = hm.make_hanging_transaction(bootstrap, f"{topic}-tid", topic, 0)
    assert made.start_offset == 0
    consumer = subscribed_consumer(bootstrap, topic, group, partitions=2)
    try:
        time.sleep(hm.HANGING_BROKER_MAX_TIMEOUT_MS / 1000 + 1)  # idle past transaction.max.timeout.ms: the rule applies
        consumer.poll(0.1)  # still a member

        result = run_cli(capsys, "diagnose", "--bootstrap-server", bootstrap, "--timeout", "20s", "-o", "json", "--group", group)
        assert result.code == 2, (result.stdout, result.stderr)
        doc = json.loads(result.stdout)
        assert "no committed offsets to diagnose" not in doc["summary"]
        (g,) = doc["groups"]
        assert (g["group"], g["status"]) == (group, "blocked")
        parts = {p["partition"]: p for p in doc["partitions"]}
        assert set(parts) == {0, 1}
        stuck = parts[0]
        assert (stuck["committed_offset"], stuck["last_stable_offset"], stuck["gap"]) == (None, 0, "blocked")
        assert stuck["explanation"].startswith(
            f"{group} has no committed offsets on {topic}-0; its consumers start at earliest or latest, both at or behind LSO 0, pinned by"
        )
        assert (parts[1]["committed_offset"], parts[1]["gap"]) == (None, "none")
        (t,) = doc["transactions"]
        assert (t["verdict"], t["producer_id"], t["groups"]) == ("hanging", made.producer_id, [group])
        assert t["command"] == f"kafkatxn abort --topic {topic} --partition 0 --start-offset 0"

        shown = run_cli(capsys, "lso", "--bootstrap-server", bootstrap, "--timeout", "20s", "--groups", group, "-o", "json")
        rows = {r["partition"]: r for r in json.loads(shown.stdout)}
        assert shown.code == 2, shown.stderr  # blocked behind a hanging transaction: critical, as diagnose says
    finally:
        consumer.close()
    assert (rows[0]["committed_offset"], rows[0]["verdict"], rows[0]["producer_id"]) == (None, "blocked", made.producer_id)
    assert (rows[1]["committed_offset"], rows[1]["verdict"]) == (None, "caught_up")
