"""`kafkatxn lso` against a real broker: an open transaction pins the LSO, read_committed groups
stuck behind it are blocked, and groups past markers and aborted records are caught up.

Offsets and ids to compare with come from the clients that made the traffic (harness/scenarios.py,
delivery reports, the consumer's own commits), never from kafkatxn.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from confluent_kafka import Consumer, TopicPartition as CTP

from harness.scenarios import create_topic, run_idempotent, run_transaction, unique
from kafkatxn.model import TopicPartition
from tests.support.groups import commit, consume

pytestmark = pytest.mark.integration


def kafkatxn(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkatxn", *args], capture_output=True, text=True, timeout=90)


def lso_rows(bootstrap: str, *args: str, expect_code: int) -> list[dict]:
    result = kafkatxn("lso", "-b", bootstrap, "--timeout", "20s", "-o", "json", *args)
    assert result.returncode == expect_code, (result.returncode, result.stdout, result.stderr)
    return json.loads(result.stdout)


def committed_offset(bootstrap: str, topic: str, group: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return consumer.committed([CTP(topic, 0)], timeout=20)[0].offset
    finally:
        consumer.close()


def test_open_transaction_pins_the_lso_and_blocks_a_read_committed_group(kafka):
    bootstrap = kafka.bootstrap_servers
    topic, group = unique("lso-pin"), unique("lso-pin-group")
    create_topic(bootstrap, topic, partitions=1)
    tp = TopicPartition(topic, 0)
    plain = run_idempotent(bootstrap, topic, partition=0, records=3)
    txn = run_transaction(bootstrap, topic, [0], "open", records_per_partition=4)
    try:
        o = txn.start_offset(tp)
        high_watermark = txn.written[0].last_offset + 1
        assert o == plain.written.last_offset + 1 > 0  # the transaction does not start at 0

        assert consume(bootstrap, topic, group, commit_each_message=False) == [0, 1, 2]
        assert committed_offset(bootstrap, topic, group) == o

        (row,) = lso_rows(bootstrap, "--topic", topic, expect_code=1)
        assert row["last_stable_offset"] == o
        assert row["high_watermark"] == high_watermark
        assert row["lag_messages"] == high_watermark - o
        assert (row["producer_id"], row["transactional_id"], row["txn_start_offset"]) == (txn.producer_id, txn.transactional_id, o)
        assert row["open_transactions"] == 1
        assert 0 <= row["txn_age_ms"] < 120_000

        # Old enough for --critical-age: exit 2.
        lso_rows(bootstrap, "--topic", topic, "--critical-age", "0s", expect_code=2)

        # A transaction in flight (tracked, within its timeout): the group waits on it, no finding.
        (grow,) = lso_rows(bootstrap, "--groups", group, expect_code=0)
        assert grow["verdict"] == "waiting"
        assert (grow["committed_offset"], grow["last_stable_offset"], grow["high_watermark"]) == (o, o, high_watermark)
        assert (grow["lag_to_lso_messages"], grow["lag_to_hw_messages"]) == (0, high_watermark - o)
        assert grow["transactional_id"] == txn.transactional_id

        # Two samples a moment apart: the pinned LSO did not move.
        watched = kafkatxn("lso", "-b", bootstrap, "--topic", topic, "--samples", "2", "-n", "200ms", "-o", "jsonl")
        assert watched.returncode == 1, watched.stderr
        samples = [json.loads(line) for line in watched.stdout.splitlines()]
        assert [s["lso_moved"] for s in samples] == [None, False]
        assert {s["last_stable_offset"] for s in samples} == {o}

        txn.commit()  # returns once the markers are on the partition

        assert lso_rows(bootstrap, "--topic", topic, expect_code=0) == []
        (zero,) = lso_rows(bootstrap, "--topic", topic, "--min-lag", "0", expect_code=0)
        assert zero["lag_messages"] == 0 and zero["last_stable_offset"] == zero["high_watermark"] == high_watermark + 1

        # The committed records are readable now: lagging, a finding from --lag-threshold on.
        (grow,) = lso_rows(bootstrap, "--groups", group, "--lag-threshold", "1", expect_code=1)
        assert grow["verdict"] == "lagging"
        lso_rows(bootstrap, "--groups", group, expect_code=0)  # a few records: below the default threshold
        assert grow["readable_before_lso"] is True
        assert grow["lag_to_lso_messages"] == high_watermark + 1 - o

        assert consume(bootstrap, topic, group, commit_each_message=False, start=o) == list(range(o, high_watermark))
        (grow,) = lso_rows(bootstrap, "--groups", group, expect_code=0)
        assert grow["verdict"] == "caught_up"
    finally:
        txn.abort()


def test_group_past_committed_and_aborted_transactions_is_caught_up(kafka):
    bootstrap = kafka.bootstrap_servers
    topic = unique("lso-markers")
    caught_up, fresh = unique("lso-caught-up"), unique("lso-fresh")
    create_topic(bootstrap, topic, partitions=1)
    committed = run_transaction(bootstrap, topic, [0], "committed", records_per_partition=3)
    aborted = run_transaction(bootstrap, topic, [0], "aborted", records_per_partition=3)
    committed_records = list(range(committed.written[0].first_offset, committed.written[0].last_offset + 1))
    # Aborted records and both markers follow the last committed record.
    high_watermark = aborted.written[0].last_offset + 2

    # Committing each message leaves the offset after the last record: before the commit marker.
    assert consume(bootstrap, topic, caught_up, commit_each_message=True) == committed_records
    commit_offset = committed_offset(bootstrap, topic, caught_up)
    assert commit_offset == committed_records[-1] + 1 < high_watermark

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": fresh})
    commit(lambda: consumer.commit(offsets=[CTP(topic, 0, 0)], asynchronous=False))  # has read nothing yet
    consumer.close()

    rows = {r["group"]: r for r in lso_rows(bootstrap, "--groups", caught_up, fresh, "--lag-threshold", "1", expect_code=1)}
    row = rows[caught_up]
    assert row["verdict"] == "caught_up"
    assert row["committed_offset"] == commit_offset
    assert row["last_stable_offset"] == row["high_watermark"] == high_watermark
    assert row["lag_to_hw_messages"] == high_watermark - commit_offset > 0  # what every other lag tool reports
    assert row["readable_before_lso"] is False
    assert rows[fresh]["verdict"] == "lagging" and rows[fresh]["readable_before_lso"] is True

    (only,) = lso_rows(bootstrap, "--groups", caught_up, expect_code=0)
    assert only["verdict"] == "caught_up"
    # Without reading the gap, it counts as lag.
    (unprobed,) = lso_rows(bootstrap, "--groups", caught_up, "--probe-max-gap", "0", "--lag-threshold", "1", expect_code=1)
    assert unprobed["verdict"] == "lagging" and unprobed["readable_before_lso"] is None


def test_unknown_topic_and_group_exit_3(kafka):
    for args, fragment in ((["--topic", unique("no-such-topic")], "unknown topic"), (["--groups", unique("no-such-group")], "unknown consumer group")):
        result = kafkatxn("lso", "-b", kafka.bootstrap_servers, "--timeout", "20s", *args)
        assert result.returncode == 3, result.stderr
        assert fragment in result.stderr and result.stdout == ""


def test_requests_are_one_per_leader_on_three_brokers(kafka_cluster3):
    bootstrap = kafka_cluster3.bootstrap_servers
    topic = unique("lso-3b")
    kafka_cluster3.create_topic(topic, partitions=6, replication_factor=3)  # returns once every partition has a leader
    leaders = {p.leader for p in kafka_cluster3.admin_client().list_topics(topic, timeout=10).topics[topic].partitions.values()}
    assert len(leaders) > 1  # with a single leader, "one per leader" could not be told from "one in all"
    txn = run_transaction(bootstrap, topic, list(range(6)), "open", records_per_partition=1)
    try:
        result = kafkatxn("lso", "-b", bootstrap, "--timeout", "20s", "-o", "json", "--topic", topic, "--debug")
        assert result.returncode == 1, result.stderr
        rows = json.loads(result.stdout)
        assert sorted(r["partition"] for r in rows) == list(range(6))
        assert {(r["last_stable_offset"], r["high_watermark"], r["producer_id"]) for r in rows} == {(0, 1, txn.producer_id)}
        (line,) = [ln for ln in result.stderr.splitlines() if "requests sent:" in ln]
        counts = dict(item.split("=") for item in line.split("requests sent: ", 1)[1].split(", "))
        # One ListOffsets per leader and isolation level, one DescribeProducers per leader.
        assert int(counts["ListOffsets"]) == 2 * len(leaders)
        assert int(counts["DescribeProducers"]) == len(leaders)
    finally:
        txn.abort()
