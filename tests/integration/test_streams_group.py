"""A Kafka Streams application on the streams rebalance protocol (KIP-1071, ``group.protocol=streams``,
on by default from Kafka 4.2) with exactly-once processing, on a real broker at its defaults, beside a
classic consumer group reading the same topic: the group commands list its group, read the partitions
its tasks hold (StreamsGroupDescribe, API 89), and report it held behind an open transaction exactly as
the classic group. ListGroups lists a streams group with protocol
type "streams", which the commands left out (as Connect's), so ``check --groups`` counted a held
Streams application nowhere. What is compared comes from the clients that made the traffic."""

from __future__ import annotations

import contextlib
import time

import pytest
from confluent_kafka import KafkaException

from harness.jars import default_kafka_version
from harness.scenarios import create_topic, run_idempotent, unique
from kafkatxn.config import ConnectionConfig
from kafkatxn.kafka import Cluster
from kafkatxn.model import TopicPartition
from tests.support.group_readers import RECORDS, Reading, assert_held_alike, by_group, cli, listed_stable, open_transaction
from tests.support.java_streams import StreamsApp

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(tuple(map(int, default_kafka_version().split(".")[:2])) < (4, 2),
                       reason="the streams rebalance protocol is on by default from Kafka 4.2"),
]


def committed(bootstrap: str, group: str, topic: str, offset: int, timeout_s: float = 60) -> None:
    """Wait until ``group`` has committed ``offset`` on both partitions (the Streams application
    commits in its transactions every 100 ms)."""
    deadline = time.monotonic() + timeout_s
    want = {TopicPartition(topic, 0): offset, TopicPartition(topic, 1): offset}
    with Cluster(ConnectionConfig(bootstrap, timeout_ms=10_000)) as c:
        while True:
            found = c.group_offsets([group]).value.get(group, {})
            if {tp: found.get(tp) for tp in want} == want:
                return
            assert time.monotonic() < deadline, found
            time.sleep(0.3)


def test_a_streams_group_is_listed_and_held_as_a_classic_group_is(capsys, kafka):
    bootstrap = kafka.bootstrap_servers
    topic, sink = unique("streams-in"), unique("streams-out")
    create_topic(bootstrap, topic, partitions=3)  # partition 2 stays empty: read, never committed
    create_topic(bootstrap, sink, partitions=2)
    for partition in (0, 1):
        run_idempotent(bootstrap, topic, partition=partition, records=RECORDS)
    app_id, classic = unique("streams-app"), unique("streams-classic")
    producer = None
    with StreamsApp(kafka, app_id, topic, sink) as app:
        reader = Reading(bootstrap, topic, classic, "classic")
        try:
            app.wait_for("RUNNING")
            committed(bootstrap, app_id, topic, RECORDS)
            assert reader.committed.wait(30), reader.read
            listed = listed_stable(bootstrap, {app_id, classic})
            assert (listed[app_id].protocol_type, listed[app_id].group_type) == ("streams", "streams")
            regex = f"^({app_id}|{classic})$"

            # Caught up: both groups listed (the streams group was not), with the same rows.
            code, report, stderr = cli(capsys, bootstrap, "check", "--groups", "--group-regex", regex)
            assert code == 0 and report["status"] == "OK", (report, stderr)
            # Every group (the session broker's other tests' too): the listing is what is tested.
            code, rows, stderr = cli(capsys, bootstrap, "lso", "--groups", "--min-lag", "0")
            assert code in (0, 1, 2), (code, stderr)
            groups = by_group(rows)
            # Partition 2, empty, has no commit: only the members' tasks (StreamsGroupDescribe) and
            # assignments (DescribeGroups) say the groups read it.
            assert [(r["partition"], r["committed_offset"], r["verdict"]) for r in groups[app_id]] == [
                (0, RECORDS, "caught_up"), (1, RECORDS, "caught_up"), (2, None, "caught_up")], groups[app_id]
            assert groups[app_id] == groups[classic]

            # An open transaction on partition 0: both held at it, reported alike.
            producer, tid = open_transaction(bootstrap, topic, "streams-tx")
            assert_held_alike(capsys, bootstrap, app_id, classic, tid, regex)
            code, doc, stderr = cli(capsys, bootstrap, "diagnose", "--group", app_id)
            assert code in (0, 1, 2) and not doc["missing"] and [g["group"] for g in doc["groups"]] == [app_id], (doc, stderr)
        finally:
            if producer is not None:
                with contextlib.suppress(KafkaException):
                    producer.abort_transaction(30)
            reader.stop.set()
            reader.thread.join(15)
