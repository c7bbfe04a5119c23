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
import json
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer

from harness.jars import default_kafka_version
from harness.scenarios import create_topic, run_idempotent, unique
from kafkatxn.config import ConnectionConfig
from kafkatxn.kafka import Cluster
from kafkatxn.kafka import protocol as p
from tests.support.cli_helpers import run_cli

pytestmark = [
    pytest.mark.integration,
    # KIP-848's consumer protocol is on by default from 4.0 (3.7-3.9: early access, off unless configured).
    pytest.mark.skipif(int(default_kafka_version().split(".")[0]) < 4, reason="the consumer group protocol is Kafka 4's"),
]

RECORDS = 5  # per partition


class Reading:
    """A read_committed consumer of ``protocol`` that reads everything, commits, and goes on polling
    (a member of its group, Stable) until stopped."""

    def __init__(self, bootstrap: str, topic: str, group: str, protocol: str):
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
                                  "isolation.level": "read_committed", "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest", "log_level": 0})
        self.consumer.subscribe([topic])
        self.read = 0
        self.committed = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            msg = self.consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                self.read += 1
            if self.read == 2 * RECORDS and not self.committed.is_set():
                self.consumer.commit(asynchronous=False)
                self.committed.set()
        self.consumer.close()


def listed_stable(bootstrap: str, groups: set[str], timeout_s: float = 30) -> dict[str, p.ListedGroup]:
    """The groups as ListGroups lists them, once all are Stable."""
    deadline = time.monotonic() + timeout_s
    with Cluster(ConnectionConfig(bootstrap, timeout_ms=10_000)) as c:  # one broker: it lists every group
        while True:
            (answer,) = c.wire.send_all([(None, p.ListGroups())], time.monotonic() + 10)
            found = {g.group_id: g for g in answer.groups if g.group_id in groups}
            if len(found) == len(groups) and all(g.state == "Stable" for g in found.values()):
                return found
            assert time.monotonic() < deadline, found
            time.sleep(0.3)


def cli(capsys, bootstrap: str, *args: str) -> tuple[int, object, str]:
    result = run_cli(capsys, *args, "--bootstrap-server", bootstrap, "--timeout", "20s", "-o", "json")
    return result.code, json.loads(result.stdout), result.stderr


def by_group(rows: list[dict]) -> dict[str, list[dict]]:
    """Each group's rows, without the group's name (to compare two groups)."""
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(r["group"], []).append({k: v for k, v in r.items() if k not in ("group", "txn_age_ms")})
    return out


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
        tid = unique("kip848-tx")
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "log_level": 0})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(topic, value=b"open", partition=0)
        producer.flush(30)
        code, rows, stderr = cli(capsys, bootstrap, "lso", "--groups", new, classic, "--min-lag", "0")
        assert code in (0, 1, 2) and "GROUP_ID_NOT_FOUND" not in stderr, (code, stderr)
        groups = by_group(rows)
        held = {r["partition"]: r for r in groups[new]}[0]
        assert (held["verdict"], held["transactional_id"], held["committed_offset"]) == ("waiting", tid, RECORDS), held
        assert groups[new] == groups[classic]
        code, report, stderr = cli(capsys, bootstrap, "check", "--groups", "--group-regex", regex)
        assert code in (0, 1, 2) and report["status"] != "UNKNOWN" and report["groups_waiting"] == 2, (report, stderr)
    finally:
        if producer is not None:  # the session broker's other tests see no transaction of this one's left open
            with contextlib.suppress(KafkaException):  # none begun: the failure above is the test's
                producer.abort_transaction(30)
        for r in readers:
            r.stop.set()
        for r in readers:
            r.thread.join(15)
