"""`kafkatxn hanging` against a real broker holding a genuinely hanging transaction.

The broker (shared with the remedy tests) runs with transaction.partition.verification.enable=false
and transaction.max.timeout.ms=10000; harness/hanging_maker.py writes a transactional batch that no
coordinator knows about.
"""

from __future__ import annotations

import json
import time
from contextlib import contextmanager

import pytest
from confluent_kafka import Producer

from harness import hanging_maker as hm
from kafkatxn import verdicts
from kafkatxn.model import TopicPartition
from tests.support.cli_helpers import run_cli

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(kafka_hanging):
    return kafka_hanging


@pytest.fixture(scope="module")
def stuck(broker):
    """Topic with committed records, then a hanging transaction, then more committed records (all on p0)."""
    topic = f"hanging-{time.monotonic_ns()}"
    broker.create_topic(topic, partitions=2)
    tp = TopicPartition(topic, 0)
    hm.write_committed(broker.bootstrap_servers, tp, [b"before-0", b"before-1"], f"{topic}-before")
    made = hm.make_hanging_transaction(broker.bootstrap_servers, f"{topic}-tid", topic, 0, records=3)
    hm.write_committed(broker.bootstrap_servers, tp, [b"after-0", b"after-1"], f"{topic}-after")
    return made, time.monotonic()


def scan(capsys, broker, *args):
    result = run_cli(capsys, "hanging", "-b", broker.bootstrap_servers, "--timeout", "30s", "-o", "json", *args)
    return result, (json.loads(result.stdout) if result.stdout.strip() else None)


def test_a_hanging_transaction_pins_the_lso_and_stalls_read_committed_consumers(broker, stuck):
    made, _ = stuck
    bootstrap = broker.bootstrap_servers
    assert made.start_offset == 3  # after two records and their commit marker
    assert hm.end_offset(bootstrap, made.tp, read_committed=True) == made.start_offset
    assert hm.end_offset(bootstrap, made.tp, read_committed=False) > made.start_offset + made.records
    assert hm.read_values(bootstrap, made.tp, read_committed=True, wait_s=2) == [b"before-0", b"before-1"]
    # The records are there; only read_committed consumers cannot get past them.
    uncommitted = hm.read_values(bootstrap, made.tp, read_committed=False, wait_s=2)
    assert b"after-1" in uncommitted and f"hanging-{made.transactional_id}-0".encode() in uncommitted


@contextmanager
def ordinary_transaction(broker, tp: TopicPartition):
    """A transaction its coordinator tracks, open on ``tp`` for the block. Its timeout is the
    broker's maximum (10 s): each check runs within seconds of its start, because the coordinator
    aborts it once that passes and a slow scan must not see it ended."""
    ordinary = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": f"{tp.topic}-ordinary",
                         "transaction.timeout.ms": hm.HANGING_BROKER_MAX_TIMEOUT_MS, "log_level": 0})
    ordinary.init_transactions(30)
    ordinary.begin_transaction()
    ordinary.produce(tp.topic, b"ordinary", partition=tp.partition)
    assert ordinary.flush(30) == 0
    try:
        yield
    finally:
        ordinary.abort_transaction(30)


def test_hanging_is_reported_and_an_ordinary_transaction_within_its_timeout_is_not(capsys, broker, stuck):
    made, made_at = stuck
    # Default max timeout: the broker's transaction.max.timeout.ms (10 s), read from the broker.
    time.sleep(max(0.0, made_at + hm.HANGING_BROKER_MAX_TIMEOUT_MS / 1000 + 1 - time.monotonic()))
    ordinary_tp = TopicPartition(made.topic, 1)
    with ordinary_transaction(broker, ordinary_tp):
        result, doc = scan(capsys, broker)
    assert result.code == 2, result.stderr
    assert doc["max_transaction_timeout_ms"] == hm.HANGING_BROKER_MAX_TIMEOUT_MS
    mine = [r for r in doc["hanging"] if r["topic"] == made.topic]
    assert mine == [
        {
            "topic": made.topic, "partition": 0, "producer_id": made.producer_id, "producer_epoch": made.producer_epoch,
            "coordinator_epoch": -1, "start_offset": made.start_offset,
            "last_timestamp_ms": mine[0]["last_timestamp_ms"], "duration_ms": mine[0]["duration_ms"],
            "transactional_id": made.transactional_id, "coordinator_id": 1, "coordinator_state": "Empty",
            "reason": "coordinator does not track this partition",
            "last_stable_offset": made.start_offset, "high_watermark": mine[0]["high_watermark"],
            "lso_lag_messages": mine[0]["high_watermark"] - made.start_offset, "holds_lso": True,
            # Its coordinator does not date it: its age is its first record's (issue 24).
            "transaction_age_ms": mine[0]["transaction_age_ms"], "transaction_age_source": "first_record",
        }
    ]
    assert mine[0]["high_watermark"] == hm.end_offset(broker.bootstrap_servers, made.tp, read_committed=False)
    assert mine[0]["duration_ms"] > hm.HANGING_BROKER_MAX_TIMEOUT_MS
    # The first record is no later than the last write.
    assert mine[0]["transaction_age_ms"] >= mine[0]["duration_ms"]
    everything = doc["hanging"] + doc["long_running"]
    assert not [r for r in everything if r["partition"] == 1 and r["topic"] == made.topic]

    # Past a shorter bound the ordinary transaction is a candidate, but its coordinator tracks
    # it: long-running, never hanging.
    with ordinary_transaction(broker, ordinary_tp):
        time.sleep(1.5)
        result, doc = scan(capsys, broker, "--topic", made.topic, "--max-transaction-timeout", "1s")
    assert result.code == 2, result.stderr
    assert [(r["partition"], r["reason"]) for r in doc["hanging"]] == [(0, verdicts.REASON_NOT_TRACKED)]
    assert [(r["partition"], r["transactional_id"], r["coordinator_state"]) for r in doc["long_running"]] == [
        (1, f"{made.topic}-ordinary", "Ongoing")
    ]


def test_selection_by_topic_partition_and_broker(capsys, broker, stuck):
    made, _ = stuck
    result, doc = scan(capsys, broker, "--topic", made.topic, "--partition", "1", "--max-transaction-timeout", "1s")
    assert (result.code, doc["partitions_scanned"], doc["hanging"]) == (0, 1, [])
    result, doc = scan(capsys, broker, "--broker-id", "1", "--max-transaction-timeout", "1s")
    assert result.code == 2
    assert (made.topic, 0, made.producer_id) in {(r["topic"], r["partition"], r["producer_id"]) for r in doc["hanging"]}
    # The whole-cluster scan covers internal topics too.
    assert doc["partitions_scanned"] > 2
    result, _ = scan(capsys, broker, "--topic", "no-such-topic")
    assert result.code == 3 and "no-such-topic" in result.stderr
