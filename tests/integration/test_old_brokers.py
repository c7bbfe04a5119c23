"""Brokers before KIP-664's admin APIs (issue 27, 6): Kafka 2.8.x in ZooKeeper mode, from Maven's jars,
with real transactional traffic from librdkafka (two open transactions, a committed one) and a
read_committed group blocked behind one of them.

2.8 answers DescribeProducers but not ListTransactions or DescribeTransactions: ``lso``, ``lso
--groups``, ``producers``, ``check`` and the exporter give what those two APIs are not needed for
and name the rest as missing; what needs the coordinator says in one line which API the brokers lack
and that it needs Kafka 3.0, exit 3, nothing written; ``check`` and the exporter publish every value
either gathered (and right) or not at all. ``OLD_KAFKA_2_VERSION`` picks another 2.x release.
"""

from __future__ import annotations

import json
import os

import pytest

from harness import KafkaCluster
from harness.scenarios import create_topic, run_transaction, unique
from kafkatxn.model import TopicPartition
from tests.support.cli_helpers import run_cli_subprocess
from tests.support.exporter_process import ExporterProcess
from tests.support.groups import commit_offset

pytestmark = pytest.mark.integration

VERSION = os.environ.get("OLD_KAFKA_2_VERSION", "2.8.2")
NEEDS_3 = "needs Apache Kafka 3.0 or newer"


@pytest.fixture(scope="module")
def old(kafka_workroot):
    cluster = KafkaCluster(kafka_workroot / f"kafka-{VERSION}", kafka_version=VERSION, name="old")
    assert cluster.metadata_mode == "zookeeper"
    with cluster:
        bootstrap = cluster.bootstrap_servers
        topic, group = unique("old-orders"), unique("old-billing")
        create_topic(bootstrap, topic, partitions=2)
        run_transaction(bootstrap, topic, [0, 1], "committed")
        opened = [run_transaction(bootstrap, topic, [p], "open") for p in (0, 1)]  # 2 records each, left open
        tp0 = TopicPartition(topic, 0)
        commit_offset(bootstrap, group, tp0, opened[0].start_offset(tp0))  # at the LSO the first one pins
        yield cluster, topic, group, opened
        for run in opened:
            run.abort()


def kafkatxn(cluster, *args):
    return run_cli_subprocess("--bootstrap-server", cluster.bootstrap_servers, "--timeout", "20s", *args, timeout=90)


def one_line(result, api):
    """stderr is one line naming the API the brokers lack and the release that brings it."""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and api in lines[0] and NEEDS_3 in lines[0], result.stderr
    assert "Error 35" not in result.stderr and "IncompatibleBrokerVersion" not in result.stderr


def test_cluster_shows_the_version_it_inferred(old):
    cluster, *_ = old
    result = kafkatxn(cluster, "cluster", "-o", "json")
    assert result.code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["kafka_version"] == ".".join(VERSION.split(".")[:2])
    assert {a["api"]: a["max_version"] for a in report["apis"]}["ListTransactions"] is None


def test_lso_and_lso_groups_show_the_offsets_and_name_the_coordinator_side_missing(old):
    cluster, topic, group, opened = old
    result = kafkatxn(cluster, "lso", "--topic", topic, "-o", "json")
    assert result.code == 3, result.stderr
    one_line(result, "ListTransactions")
    rows = {r["partition"]: r for r in json.loads(result.stdout)}
    for p, run in enumerate(opened):
        tp = TopicPartition(topic, p)
        assert (rows[p]["last_stable_offset"], rows[p]["lag_messages"]) == (run.start_offset(tp), 2)
        assert rows[p]["producer_id"] == run.producer_id and rows[p]["transactional_id"] is None
    result = kafkatxn(cluster, "lso", "--groups", group, "-o", "json")
    assert result.code == 3, result.stderr
    one_line(result, "ListTransactions")
    (row,) = json.loads(result.stdout)
    assert (row["group"], row["partition"], row["verdict"], row["producer_id"]) == (group, 0, "blocked", opened[0].producer_id)


def test_producers_are_described_and_only_their_transactional_ids_are_missing(old):
    cluster, topic, _group, opened = old
    result = kafkatxn(cluster, "producers", "--topic", topic, "-o", "json")
    assert result.code == 3, result.stderr
    one_line(result, "ListTransactions")
    open_rows = {(r["partition"], r["producer_id"]): r for r in json.loads(result.stdout) if r["current_txn_start_offset"] >= 0}
    assert set(open_rows) == {(p, run.producer_id) for p, run in enumerate(opened)}


def test_what_needs_the_coordinator_says_which_api_is_lacking_and_writes_nothing(old, tmp_path):
    cluster, topic, _group, opened = old
    audit = tmp_path / "audit.jsonl"
    for args, api in [
        (("transactions", "list"), "ListTransactions"),
        (("transactions", "describe", opened[0].transactional_id), "DescribeTransactions"),
        (("fence", "--dry-run", opened[0].transactional_id), "DescribeTransactions"),
        (("abort", "--all-hanging", "--yes", "--max-transaction-timeout", "1ms", "--audit-log", str(audit)), "ListTransactions"),
    ]:
        result = kafkatxn(cluster, *args)
        assert (result.code, result.stdout) == (3, ""), (args, result)
        one_line(result, api)
    assert not audit.exists() or audit.read_text() == ""
    # hanging: the open transactions past the (given) maximum timeout are undetermined, never hanging.
    result = kafkatxn(cluster, "hanging", "--topic", topic, "--max-transaction-timeout", "1ms", "-o", "json")
    assert result.code == 3, result.stderr
    report = json.loads(result.stdout)
    assert report["hanging"] == [] and len(report["undetermined"]) == 2
    assert all("ListTransactions" in u["reason"] and NEEDS_3 in u["reason"] for u in report["undetermined"])


def _truth(cluster, opened):
    """What check and the exporter may publish on this cluster, from the clients that made it."""
    partitions = sum(len(t.partitions) for t in cluster.admin_client().list_topics(timeout=10).topics.values())
    return {
        "hanging_transactions": 0, "lost_commit_markers": 0, "undetermined_transactions": 0,  # none past the 15-minute maximum
        "untracked_transactions": 0,  # within it, no coordinator can be asked before Kafka 3.0: not called untracked
        "lso_lag_max": 2, "lagging_partitions": 2, "open_transactions": len(opened),
        "active_producer_ids_max": 3,  # the committed transaction's producer and the two open ones
        "partitions": partitions, "groups_blocked": 0, "groups_waiting": 1, "group_lag_max": 0,
    }


def test_check_publishes_every_value_gathered_or_not_at_all(old):
    cluster, _topic, group, opened = old
    result = kafkatxn(cluster, "check", "--groups", "--group-regex", f"^{group}$", "-o", "json")
    assert result.code == 3, result.stdout + result.stderr
    report = json.loads(result.stdout)
    perf = {p["label"]: p["value"] for p in report["perfdata"]}
    missing = perf.pop("missing_parts")
    assert perf == _truth(cluster, opened)  # transaction_age_max was not gathered: absent, not 0
    reasons = [f["message"] for f in report["findings"] if f["kind"] == "incomplete"]
    assert len(reasons) == missing >= 1 and all(NEEDS_3 in r for r in reasons), reasons
    assert report["transaction_age_max_ms"] is None


def test_the_exporter_publishes_every_value_gathered_or_not_at_all(old):
    cluster, _topic, group, opened = old
    exporter = ExporterProcess("-b", cluster.bootstrap_servers, "--cache-ttl", "0s", "--scrape-timeout", "20s",
                               "--group-regex", f"^{group}$")
    try:
        samples, _took = exporter.scrape()
    finally:
        exporter.stop()
    value = {name: v for (name, labels), v in samples.items() if not labels}
    truth = _truth(cluster, opened)
    assert value["kafkatxn_up"] == 1 and value["kafkatxn_scrape_incomplete"] == 1
    assert (value["kafkatxn_hanging_transactions"], value["kafkatxn_undetermined_transactions"]) == (0, 0)
    assert (value["kafkatxn_lso_lag_max_messages"], value["kafkatxn_lagging_partitions"]) == (2, 2)
    assert (value["kafkatxn_open_transactions"], value["kafkatxn_partitions"]) == (len(opened), truth["partitions"])
    assert value["kafkatxn_groups_blocked"] == 1  # blocked at the LSO (check counts it as waiting: young)
    assert {labels: v for (name, labels), v in samples.items() if name == "kafkatxn_active_producer_ids"} == {
        (("broker", "1"),): 3}
    # ListTransactions and DescribeTransactions did not answer: their figures are absent, the parts named.
    names = {name for name, _labels in samples}
    assert not names & {"kafkatxn_transactions", "kafkatxn_transaction_oldest_age_seconds"}
    assert {dict(labels)["part"] for (name, labels), v in samples.items()
            if name == "kafkatxn_scrape_part_missing" and v == 1} == {"transaction states", "transaction ages"}
