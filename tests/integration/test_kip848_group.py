"""A KIP-848 consumer group (``group.protocol=consumer``, the default protocol of Kafka 4's brokers) on a
real broker, beside a classic group reading the same topic: ``lso --groups``, ``check --groups`` and
``diagnose`` give a determined answer with the group's rows, and when an open transaction holds the
topic they report the KIP-848 group held exactly as the classic one. DescribeGroups answers a
consumer-type group GROUP_ID_NOT_FOUND: every group command exited 3 ("incomplete answer: group g:
GROUP_ID_NOT_FOUND") while such a group had members. What is compared comes from the clients that
made the traffic, never from kafkatxn.
"""

from __future__ import annotations

import contextlib

import pytest
from confluent_kafka import KafkaException

from harness.jars import default_kafka_version
from harness.scenarios import create_topic, run_idempotent, unique
from tests.support.group_readers import RECORDS, Reading, assert_held_alike, by_group, cli, listed_stable, open_transaction

pytestmark = [
    pytest.mark.integration,
    # KIP-848's consumer protocol is on by default from 4.0 (3.7-3.9: early access, off unless configured).
    pytest.mark.skipif(int(default_kafka_version().split(".")[0]) < 4, reason="the consumer group protocol is Kafka 4's"),
]


def test_a_kip848_group_is_read_and_held_as_a_classic_group_is(capsys, kafka):
    bootstrap = kafka.bootstrap_servers
    topic = unique("kip848")
    create_topic(bootstrap, topic, partitions=2)
    for partition in (0, 1):
        run_idempotent(bootstrap, topic, partition=partition, records=RECORDS)
    new, classic = unique("kip848-consumer"), unique("kip848-classic")
    readers = [Reading(bootstrap, topic, new, "consumer"), Reading(bootstrap, topic, classic, "classic")]
    producer = None
    try:
        for r in readers:
            assert r.committed.wait(30), r.read
        listed = listed_stable(bootstrap, {new, classic})
        assert (listed[new].group_type, listed[classic].group_type) == ("consumer", "classic")
        regex = f"^({new}|{classic})$"

        # Caught up: a determined answer, with the group's rows (it was exit 3, GROUP_ID_NOT_FOUND).
        code, rows, stderr = cli(capsys, bootstrap, "lso", "--groups", new, classic, "--min-lag", "0")
        assert code == 0 and "GROUP_ID_NOT_FOUND" not in stderr, (code, stderr)
        groups = by_group(rows)
        assert [(r["partition"], r["committed_offset"], r["verdict"]) for r in groups[new]] == [(0, RECORDS, "caught_up"),
                                                                                               (1, RECORDS, "caught_up")]
        assert groups[new] == groups[classic]
        code, report, stderr = cli(capsys, bootstrap, "check", "--groups", "--group-regex", regex)
        assert (code, report["status"]) == (0, "OK"), (report, stderr)
        code, doc, stderr = cli(capsys, bootstrap, "diagnose", "--group", new)
        assert code == 0 and not doc["missing"] and [g["group"] for g in doc["groups"]] == [new], (doc, stderr)

        # An open transaction on partition 0: both groups held at it, reported alike.
        producer, tid = open_transaction(bootstrap, topic, "kip848-tx")
        assert_held_alike(capsys, bootstrap, new, classic, tid, regex, new, classic)
    finally:
        if producer is not None:  # the session broker's other tests see no transaction of this one's left open
            with contextlib.suppress(KafkaException):  # none begun: the failure above is the test's
                producer.abort_transaction(30)
        for r in readers:
            r.stop.set()
        for r in readers:
            r.thread.join(15)
