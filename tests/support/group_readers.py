"""Readers of a topic on a real broker, as consumer groups of either protocol, and the group commands'
JSON: what the tests of KIP-848's consumer groups and of Kafka Streams' groups share."""

from __future__ import annotations

import json
import threading
import time

from confluent_kafka import Consumer, Producer

from harness.scenarios import unique
from kafkatxn.config import ConnectionConfig
from kafkatxn.kafka import Cluster
from kafkatxn.kafka import protocol as p
from tests.support.cli_helpers import run_cli

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


def open_transaction(bootstrap: str, topic: str, prefix: str) -> tuple[Producer, str]:
    """A transaction left open on ``topic``'s partition 0 (one record written): the producer, to abort
    it with, and its transactional id."""
    tid = unique(prefix)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "log_level": 0})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"open", partition=0)
    producer.flush(30)
    return producer, tid


def cli(capsys, bootstrap: str, *args: str) -> tuple[int, object, str]:
    result = run_cli(capsys, *args, "--bootstrap-server", bootstrap, "--timeout", "20s", "-o", "json")
    return result.code, json.loads(result.stdout), result.stderr


def by_group(rows: list[dict]) -> dict[str, list[dict]]:
    """Each group's rows, without the group's name (to compare two groups)."""
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(r["group"], []).append({k: v for k, v in r.items() if k not in ("group", "txn_age_ms")})
    return out


def assert_held_alike(capsys, bootstrap: str, group: str, classic: str, tid: str, regex: str, *named: str) -> None:
    """With ``tid`` open on partition 0: ``lso --groups`` (the groups ``named``, or every group) shows
    ``group`` waiting behind it at RECORDS, its rows those of the classic group ``classic``, and
    ``check --groups`` (``regex``) counts both waiting."""
    code, rows, stderr = cli(capsys, bootstrap, "lso", "--groups", *named, "--min-lag", "0")
    assert code in (0, 1, 2) and "GROUP_ID_NOT_FOUND" not in stderr, (code, stderr)
    groups = by_group(rows)
    held = {r["partition"]: r for r in groups[group]}[0]
    assert (held["verdict"], held["transactional_id"], held["committed_offset"]) == ("waiting", tid, RECORDS), held
    assert groups[group] == groups[classic]
    code, report, stderr = cli(capsys, bootstrap, "check", "--groups", "--group-regex", regex)
    assert code in (0, 1, 2) and report["status"] != "UNKNOWN" and report["groups_waiting"] == 2, (report, stderr)
