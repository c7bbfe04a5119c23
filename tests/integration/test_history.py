"""``transactions history`` on a real broker (issue 25): what the coordinator's log says happened to an id,
asserted against what the test did to it.

One broker of its own (Kafka 4.x, the harness's jars) whose coordinator looks for timed-out transactions
every 500 ms. The shared id is used by librdkafka producers: two instances taking turns, one fenced
mid-transaction by the other's InitProducerId, one timed out by the coordinator; a second id is used by
Kafka's Java client, which speaks transaction version 2 on 4.x, so its epoch goes up at every commit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition

from harness import KafkaCluster
from harness import hanging_maker as hm
from kafkatxn.model import TopicPartition
from tests.support.cli_helpers import run_cli
from tests.support.java_traffic import run_script
from tests.support.quiet import quiet_logger
from tests.support.secure_commands import _commit

pytestmark = pytest.mark.integration

TOPIC = "history-out"
GROUP = "history-readers"
SHARED = f"hist-shared-{uuid.uuid4().hex[:6]}"
JAVA = f"hist-java-{uuid.uuid4().hex[:6]}"
TIMEOUT_S = 30
SHORT_TIMEOUT_MS = 2000


def producer(bootstrap: str, tid: str, timeout_ms: int = 60_000) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": timeout_ms, "logger": quiet_logger()})
    p.init_transactions(TIMEOUT_S)
    return p


def open_txn(p: Producer) -> None:
    p.begin_transaction()
    p.produce(TOPIC, b"x", partition=0)
    p.flush(TIMEOUT_S)


def commit_one(p: Producer) -> None:
    open_txn(p)
    p.commit_transaction(TIMEOUT_S)


@pytest.fixture(scope="module")
def story(kafka_workroot):
    """The cluster, after the test did what ``expected`` lists to SHARED and JAVA."""
    cluster = KafkaCluster(
        kafka_workroot / f"history-{uuid.uuid4().hex[:6]}", n_brokers=1, name="history",
        broker_config={"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"},
    )
    cluster.start(timeout=120)
    try:
        cluster.create_topic(TOPIC, partitions=1)
        b = cluster.bootstrap_servers
        a = producer(b, SHARED)  # instance A
        commit_one(a)
        other = producer(b, SHARED)  # instance B takes over: A is fenced (nothing open)
        commit_one(other)
        a = producer(b, SHARED)  # A starts again
        commit_one(a)
        other = producer(b, SHARED)  # B starts again and leaves a transaction open ...
        open_txn(other)
        a = producer(b, SHARED, timeout_ms=SHORT_TIMEOUT_MS)  # ... which A's InitProducerId fences
        open_txn(a)  # A's transaction outlives its 2 s timeout: the coordinator aborts it
        time.sleep(SHORT_TIMEOUT_MS / 1000 + 2)
        last = producer(b, SHARED)
        commit_one(last)
        # Kafka's Java client (transaction version 2 on 4.x): the epoch goes up at every commit.
        # Then a second instance's InitProducerId fences its open transaction.
        run_script(cluster, TOPIC, [f"init j {JAVA}", "txn j", "txn j", "txn j", "open j", f"init k {JAVA}", "txn k", "close k"])
        yield cluster, last
    finally:
        cluster.stop()


def history(capsys, cluster, *args: str):
    return run_cli(capsys, "transactions", "history", *args, "-b", cluster.bootstrap_servers, "--timeout", "20s", "-o", "json")


def test_history_shows_each_event_as_it_happened(capsys, story):
    cluster, _ = story
    done = history(capsys, cluster, SHARED, JAVA)
    assert done.code == 0, done.stderr
    rows = json.loads(done.stdout)
    shared = [r for r in rows if r["transactional_id"] == SHARED]
    events = [e for r in shared for e in r["events"] if e != "partitions_added"]
    assert events == [
        "initialised", "committed",  # A
        "initialised", "committed",  # B
        "initialised", "committed",  # A again
        "initialised",  # B again, leaving a transaction open
        "fenced_open_transaction", "initialised",  # A's InitProducerId fences it
        "timed_out_by_coordinator",  # A's own transaction, past its 2 s
        "initialised", "committed",
    ], [(r["state"], r["producer_epoch"], r["events"]) for r in shared]
    assert len({r["producer_id"] for r in shared}) == 1  # one id, one producer id: the epoch tells the holders apart
    epochs = [r["producer_epoch"] for r in shared]
    assert epochs == sorted(epochs) and epochs[-1] >= 7
    timed_out = next(r for r in shared if "timed_out_by_coordinator" in r["events"])
    assert timed_out["timeout_ms"] == SHORT_TIMEOUT_MS and timed_out["partitions"] == [f"{TOPIC}-0"]
    assert [r["partitions_added"] for r in shared if r["partitions_added"]][0] == [f"{TOPIC}-0"]

    java = [r for r in rows if r["transactional_id"] == JAVA]
    assert [e for r in java for e in r["events"] if e != "partitions_added"] == [
        "initialised", "committed", "committed", "committed", "fenced_open_transaction", "initialised", "committed",
    ], [(r["state"], r["producer_epoch"], r["client_transaction_version"], r["events"]) for r in java]
    commits = [r for r in java if r["state"] == "CompleteCommit"]
    assert [r["producer_epoch"] for r in commits][:3] == [1, 2, 3]  # TV2: every commit bumps the epoch
    assert {r["client_transaction_version"] for r in commits} == {2}
    assert rows.index(shared[0]) < rows.index(java[0])  # ids in the order asked


def test_since_and_an_unknown_id(capsys, story):
    cluster, _ = story
    done = history(capsys, cluster, SHARED, "never-used-id", "--since", "1h")
    assert done.code == 1 and "never-used-id" in done.stderr, done.stderr
    assert {r["transactional_id"] for r in json.loads(done.stdout)} == {SHARED}
    recent = history(capsys, cluster, SHARED, "--since", "1ms")
    assert recent.code == 1 and json.loads(recent.stdout) == []


def test_follow_shows_a_new_commit_within_two_seconds(story):
    cluster, last = story
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkatxn", "transactions", "history", SHARED, "--follow", "-o", "jsonl",
         "-b", cluster.bootstrap_servers, "--timeout", "20s"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    epoch = last_epoch(cluster)
    try:
        seen = []
        while not any(r["state"] == "CompleteCommit" and r["producer_epoch"] == epoch for r in seen):
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            seen.append(json.loads(line))  # the history so far, up to SHARED's last commit
        time.sleep(1)  # following now
        begun = time.monotonic()
        commit_one(last)
        while True:
            row = json.loads(proc.stdout.readline())
            if "committed" in row["events"]:
                break
        took = time.monotonic() - begun
        assert took < 2.0, took
    finally:
        proc.terminate()
        proc.wait(10)


def last_epoch(cluster) -> int:
    """The epoch of SHARED's last CompleteCommit so far, as the command shows it."""
    done = subprocess.run(
        [sys.executable, "-m", "kafkatxn", "transactions", "history", SHARED, "-o", "json", "-b", cluster.bootstrap_servers],
        capture_output=True, text=True, timeout=60,
    )
    return [r for r in json.loads(done.stdout) if r["state"] == "CompleteCommit"][-1]["producer_epoch"]


def test_diagnose_carries_the_history_line(capsys, story):
    cluster, _ = story
    holder = producer(cluster.bootstrap_servers, SHARED)  # the 7th InitProducerId, and an open transaction
    open_txn(holder)
    try:
        # A read_committed group committed at the open transaction's first offset: blocked behind it.
        start = hm.end_offset(cluster.bootstrap_servers, TopicPartition(TOPIC, 0), read_committed=True)
        _commit(cluster.bootstrap_servers, GROUP, ConfluentTopicPartition(TOPIC, 0, start))
        done = run_cli(capsys, "diagnose", "--group", GROUP, "-b", cluster.bootstrap_servers, "--timeout", "20s", "-o", "json")
        doc = json.loads(done.stdout)
        (txn,) = doc["transactions"]
        assert txn["transactional_id"] == SHARED, doc
        assert txn["history"].startswith("initialised 7 times in the last hour by alternating producers: two instances share this id"), txn
        assert "timed out and aborted by the coordinator once today" in txn["history"], txn
        evidence = txn["history_evidence"]
        assert evidence["inits_last_hour"] == 7 and evidence["timeouts_last_day"] == 1 and evidence["fences_last_hour"] == 1
        table = run_cli(capsys, "diagnose", "--group", GROUP, "-b", cluster.bootstrap_servers, "--timeout", "20s")
        assert "history" in table.stdout and "two instances share this id" in table.stdout.replace("\n", " "), table.stdout
    finally:
        holder.abort_transaction(TIMEOUT_S)
