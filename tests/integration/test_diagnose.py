"""`kafkatxn diagnose` (and group lag on /metrics) against real brokers: a read_committed group stopped
behind an open transaction a real librdkafka client left open, a caught-up group past committed and
aborted transactions, a hanging transaction, and a transaction whose coordinator is gone.

Offsets and ids to compare with come from the clients that made the traffic (harness/scenarios.py,
harness/hanging_maker.py), never from kafkatxn. Each suggested command is run as diagnose printed it.
"""

from __future__ import annotations

import json
import shlex
import time

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from harness import hanging_maker as hm
from harness.scenarios import create_topic, run_idempotent, run_transaction, unique
from kafkatxn.config import ConnectionConfig
from kafkatxn.kafka import Cluster
from kafkatxn.model import TopicPartition
from tests.support.cli_helpers import run_cli
from tests.support.exporter_process import ExporterProcess
from tests.support.groups import commit_offset, consume

pytestmark = pytest.mark.integration


def diagnose(capsys, bootstrap: str, *args: str, expect_code: int) -> dict:
    result = run_cli(capsys, "diagnose", "--bootstrap-server", bootstrap, "--timeout", "20s", "-o", "json", *args)
    assert result.code == expect_code, (result.code, result.stdout, result.stderr)
    return json.loads(result.stdout)


def run_suggested(capsys, command: str, bootstrap: str, audit_log) -> None:
    """The command diagnose printed, as an operator pastes it (plus connection, --yes and an audit log)."""
    for part in command.split(" && "):
        argv = shlex.split(part)
        assert argv[0] == "kafkatxn"
        result = run_cli(capsys, *argv[1:], "--bootstrap-server", bootstrap, "--yes", "--audit-log", str(audit_log), "--timeout", "30s")
        assert result.code == 0, (part, result.stdout, result.stderr)


def group_metrics(exporter: ExporterProcess, *groups: str) -> dict[tuple[str, str], float]:
    samples, _ = exporter.scrape()
    return {
        (name, dict(labels)["group"]): value
        for (name, labels), value in samples.items()
        if name.startswith("kafkatxn_group_") and dict(labels).get("group") in groups and "partition" in dict(labels)
    }


def test_open_transaction_blocks_one_group_the_other_is_caught_up_and_fence_releases_it(capsys, kafka, tmp_path):
    bootstrap = kafka.bootstrap_servers
    blocked_topic, phantom_topic = unique("diag-blocked"), unique("diag-phantom")
    billing, reports = unique("billing"), unique("reports")
    create_topic(bootstrap, blocked_topic, partitions=1)
    create_topic(bootstrap, phantom_topic, partitions=1)
    tp = TopicPartition(blocked_topic, 0)
    run_idempotent(bootstrap, blocked_topic, partition=0, records=3)
    txn = run_transaction(bootstrap, blocked_topic, [0], "open", records_per_partition=4)
    run_transaction(bootstrap, phantom_topic, [0], "committed", records_per_partition=3)
    aborted = run_transaction(bootstrap, phantom_topic, [0], "aborted", records_per_partition=3)
    exporter = None
    try:
        o = txn.start_offset(tp)
        assert consume(bootstrap, blocked_topic, billing, commit_each_message=False) == [0, 1, 2]
        consume(bootstrap, phantom_topic, reports, commit_each_message=True)  # stops before the markers
        phantom_hw = aborted.written[0].last_offset + 2

        exporter = ExporterProcess("-b", bootstrap, "--cache-ttl", "0s", "--scrape-timeout", "20s",
                                   "--group-regex", f"^({billing}|{reports})$")
        # A transaction in flight (tracked, within its timeout): billing waits on it; it is not blocked.
        metrics = group_metrics(exporter, billing, reports)
        assert metrics[("kafkatxn_group_blocked", billing)] == 0
        assert metrics[("kafkatxn_group_blocked", reports)] == 0
        assert metrics[("kafkatxn_group_lag_messages", reports)] == 0
        assert metrics[("kafkatxn_group_lag_to_high_watermark_messages", reports)] > 0

        regex = ("--group-regex", f"^({billing}|{reports})$")
        # Behind a transaction in flight within its timeout a group waits: not critical (issue 24) …
        checked = run_cli(capsys, "check", "--bootstrap-server", bootstrap, "--timeout", "20s", *regex)
        assert checked.code == 0, checked.stdout
        assert "groups_blocked=0;;0;0" in checked.stdout and "groups_waiting=1;" in checked.stdout
        # … and critical once the transaction is older than --txn-age-crit.
        checked = run_cli(capsys, "check", "--bootstrap-server", bootstrap, "--timeout", "20s", *regex,
                          "--txn-age-warn", "1ms", "--txn-age-crit", "2ms")
        assert checked.code == 2, checked.stdout
        assert "1 consumer group blocked" in checked.stdout and "groups_blocked=1;;0;0" in checked.stdout

        doc = diagnose(capsys, bootstrap, "--group", billing, expect_code=0)
        (group,) = doc["groups"]
        assert (group["group"], group["status"], group["pinned_by"]) == (billing, "waiting", [txn.transactional_id])
        (part,) = doc["partitions"]
        assert (part["committed_offset"], part["last_stable_offset"], part["gap"]) == (o, o, "waiting")
        (t,) = doc["transactions"]
        assert (t["transactional_id"], t["producer_id"], t["producer_epoch"]) == (txn.transactional_id, txn.producer_id, txn.producer_epoch)
        assert (t["verdict"], t["action"], t["coordinator_state"]) == ("tracked", "wait", "Ongoing")
        assert t["transaction_timeout_ms"] == txn.timeout_ms and t["aborts_at_ms"] > time.time() * 1000
        assert t["groups"] == [billing] and t["partitions"] == [f"{blocked_topic}-0@{o}"]
        assert t["release_command"] == f"kafkatxn fence {txn.transactional_id}"

        doc = diagnose(capsys, bootstrap, "--group", reports, expect_code=0)
        (group,) = doc["groups"]
        assert group["status"] == "caught_up" and group["lag_messages"] == 0 and group["phantom_messages"] > 0
        (part,) = doc["partitions"]
        assert part["gap"] == "phantom" and part["high_watermark"] == phantom_hw and "markers" in part["explanation"]

        table = run_cli(capsys, "diagnose", "--bootstrap-server", bootstrap, "--group", billing, "--group", reports)
        assert table.code == 0, table.stderr
        assert f"$ kafkatxn fence {txn.transactional_id}" in table.stdout
        assert max(len(line) for line in table.stdout.splitlines()) <= 120

        run_suggested(capsys, t["release_command"], bootstrap, tmp_path / "audit.jsonl")

        doc = diagnose(capsys, bootstrap, "--group", billing, expect_code=0)
        assert doc["transactions"] == [] and doc["groups"][0]["status"] == "caught_up"  # only aborted records left
        metrics = group_metrics(exporter, billing, reports)
        assert metrics[("kafkatxn_group_blocked", billing)] == 0
        checked = run_cli(capsys, "check", "--bootstrap-server", bootstrap, "--timeout", "20s", *regex)
        assert "groups_blocked=0;;0;0" in checked.stdout, checked.stdout
    finally:
        if exporter is not None:
            exporter.stop()
        try:
            txn.abort()
        except KafkaException:
            pass  # fenced by the test: nothing left to abort


@pytest.fixture(scope="module")
def hanging_broker(kafka_hanging):
    return kafka_hanging


def test_hanging_transaction_diagnose_suggests_abort_and_it_works(capsys, hanging_broker, unique_name, tmp_path):
    bootstrap = hanging_broker.bootstrap_servers
    topic, group = unique_name[-200:], unique("stuck")
    hanging_broker.create_topic(topic, partitions=1)
    tp = TopicPartition(topic, 0)
    hm.write_committed(bootstrap, tp, [b"before"], f"{topic}-before")
    made = hm.make_hanging_transaction(bootstrap, f"{topic}-tid", topic, 0)
    hm.write_committed(bootstrap, tp, [b"after-0", b"after-1"], f"{topic}-after")
    commit_offset(bootstrap, group, tp, made.start_offset)
    time.sleep(hm.HANGING_BROKER_MAX_TIMEOUT_MS / 1000 + 1)  # idle past transaction.max.timeout.ms: the rule applies

    doc = diagnose(capsys, bootstrap, "--group", group, expect_code=2)
    (t,) = doc["transactions"]
    assert (t["verdict"], t["action"], t["producer_id"], t["transactional_id"]) == ("hanging", "abort", made.producer_id, made.transactional_id)
    assert t["command"] == f"kafkatxn abort --topic {topic} --partition 0 --start-offset {made.start_offset}"

    run_suggested(capsys, t["command"], bootstrap, tmp_path / "audit.jsonl")

    # The committed records after it are readable now: lagging, by less than --lag-threshold.
    doc = diagnose(capsys, bootstrap, "--group", group, expect_code=0)
    assert doc["transactions"] == [] and doc["groups"][0]["status"] == "lagging"
    diagnose(capsys, bootstrap, "--group", group, "--lag-threshold", "1", expect_code=1)
    assert hm.read_values(bootstrap, tp, read_committed=True, wait_s=1.5) == [b"before", b"after-0", b"after-1"]


def test_coordinator_unavailable_diagnose_cannot_decide_and_says_why(capsys, kafka_factory):
    cluster = kafka_factory(
        3,
        {"transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
         "transaction.max.timeout.ms": "10000"},
    )
    bootstrap = cluster.bootstrap_servers
    tid, topic, group = unique("diag-orphan"), unique("diag-orphan"), unique("orphaned")
    with Cluster(ConnectionConfig(bootstrap, timeout_ms=30_000)) as kc:
        deadline = time.monotonic() + 60
        while True:  # the first FindCoordinator creates __transaction_state
            found = kc.find_transaction_coordinators([tid])
            if tid in found.value or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        coordinator = found.value[tid]
    other = next(b for b in cluster.running_broker_ids() if b != coordinator)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[other]])])[topic].result(30)
    cluster._wait_for_leaders(topic, 1, time.monotonic() + 30)
    tp = TopicPartition(topic, 0)
    txn = run_transaction(bootstrap, topic, [0], "open", transactional_id=tid, timeout_ms=10_000)
    commit_offset(bootstrap, group, tp, txn.start_offset(tp))
    cluster.kill_broker(coordinator)  # the only replica of the id's __transaction_state partition
    txn.wait_until_open_longer_than(10_000 + 1_000)

    doc = diagnose(capsys, bootstrap, "--group", group, expect_code=3)
    (t,) = doc["transactions"]
    assert t["producer_id"] == txn.producer_id and t["verdict"] == "undetermined" and t["action"] == "undecided"
    assert t["command"].startswith("cannot decide: ")
    # Why: the broker that coordinates the id did not answer, or its __transaction_state partition has no leader.
    assert "ListTransactions" in t["reason"] or "__transaction_state" in t["reason"], t["reason"]
    print("cannot decide because:", t["reason"])
    assert doc["groups"][0]["status"] == "blocked"
