"""Principals that see part of the cluster (issue 23): a SASL single-broker KRaft cluster with the
StandardAuthorizer, and principals with a literal, a prefixed, no and a wildcard DESCRIBE on
transactional ids, READ on some topics only, and nothing on the Cluster.

Traffic: ``other-1`` has an open transaction on ``orders-0`` that its coordinator tracks (not
visible to the literal, prefixed and no-id principals); ``app-1`` has a hanging one on ``stuck-0``
(tests/hanging_maker.py, with transaction partition verification off). Every command runs with
``--max-transaction-timeout 2s``, so both are hanging candidates while ``other-1`` stays open.

The rule under test: a tracked transaction is never hanging for any principal; where the principal
may not see the answer the verdict is undetermined (exit 3), naming the ACL that would show it.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition as ConfluentTopicPartition

from kafkatxn.model import TopicPartition
from kafkatxn.verdicts import REASON_IDS_FILTERED
from harness import hanging_maker as hm
from harness import scenarios
from tests.support.cli_helpers import run_cli
from tests.support.secure_commands import _commit
from harness import KafkaCluster
from harness.security import (
    Acl, SaslUsers, SecureKafka, authorizer_broker_config, grant, make_pki, secure_setup, write_properties,
)

pytestmark = pytest.mark.integration

ORDERS, STUCK, DESCRIBED, HIDDEN = "orders", "stuck", "described-only", "hidden"
TRACKED_ID, HANGING_ID = "other-1", "app-1"
TRACKED_TP, HANGING_TP = TopicPartition(ORDERS, 0), TopicPartition(STUCK, 0)
MAX_TXN = "2s"
CLUSTER = "kafka-cluster"
GROUP = "orders-app"  # committed at the tracked transaction's first offset: blocked behind it

# What every principal but "some-topics" and "no-cluster" may do besides transactional ids.
READ_ALL = [
    Acl("TOPIC", "*", "READ"), Acl("GROUP", "*", "DESCRIBE"), Acl("CLUSTER", CLUSTER, "DESCRIBE"),
    Acl("CLUSTER", CLUSTER, "DESCRIBE_CONFIGS"),
]
ALL_IDS = Acl("TRANSACTIONAL_ID", "*", "DESCRIBE")
PRINCIPALS = {
    "literal": [Acl("TRANSACTIONAL_ID", HANGING_ID, "DESCRIBE"), *READ_ALL],
    "prefixed": [Acl("TRANSACTIONAL_ID", "app-", "DESCRIBE", "PREFIXED"), *READ_ALL],
    # May write markers (CLUSTER_ACTION) but not see ids: only the verdict keeps abort from the tracked one.
    "no-ids": [*READ_ALL, Acl("CLUSTER", CLUSTER, "CLUSTER_ACTION")],
    "wildcard": [ALL_IDS, *READ_ALL],
    "some-topics": [
        ALL_IDS, Acl("TOPIC", ORDERS, "READ"), Acl("TOPIC", STUCK, "READ"), Acl("TOPIC", DESCRIBED, "DESCRIBE"),
        Acl("TOPIC", "__transaction_state", "DESCRIBE"), *READ_ALL[1:],
    ],
    "no-cluster": [ALL_IDS, Acl("TOPIC", "*", "READ")],
}
FILTERED = ("literal", "prefixed", "no-ids")  # may not describe other-1
SEES_HANGING_ID = ("literal", "prefixed", "wildcard", "some-topics", "no-cluster")
# Sees the id and can read __transaction_state: hanging and abort read the id's log partition first
# (issue 25: a lost COMMIT marker is never aborted); where it cannot the verdict is undetermined
# ("some-topics" may not READ the log). The log is read over Fetch, which names no consumer group:
# "no-cluster", without DESCRIBE on groups, reads it too.
DECIDES_HANGING = tuple(p for p in SEES_HANGING_ID if p != "some-topics")


@dataclass
class Restricted:
    cluster: KafkaCluster
    secure: SecureKafka
    properties: dict[str, Path]
    tracked: scenarios.TransactionRun
    hanging: hm.HangingTransaction
    workdir: Path

    def run(self, capsys, principal: str, *args: str):
        bootstrap = self.secure.bootstrap("scram")
        return run_cli(capsys, *args, "-b", bootstrap, "-c", str(self.properties[principal]), "--timeout", "20s", "-o", "json")

    def offsets(self, tp: TopicPartition) -> tuple[int, int]:
        """(LSO, high watermark), read as the super user."""
        plain = self.cluster.bootstrap_servers
        return hm.end_offset(plain, tp, read_committed=True), hm.end_offset(plain, tp, read_committed=False)


@pytest.fixture(scope="module")
def restricted(kafka_workroot: Path):
    workdir = kafka_workroot / f"restricted-{uuid.uuid4().hex[:8]}"
    pki = make_pki(workdir / "pki")
    users = SaslUsers.random()
    setup = secure_setup(pki, users, mtls=False)
    config = {**setup.broker_config, **authorizer_broker_config(), "transaction.partition.verification.enable": "false"}
    cluster = KafkaCluster(workdir / "kafka", listeners=setup.listeners, format_arguments=setup.format_arguments,
                           broker_config=config, name="restricted")
    try:
        cluster.start(timeout=120)
    except Exception:
        cluster.save_logs(Path(__file__).resolve().parents[2] / "test-logs" / "startup-restricted")
        raise
    secure = SecureKafka(cluster, pki, users, setup)
    try:
        for topic in (ORDERS, STUCK, DESCRIBED, HIDDEN):
            cluster.create_topic(topic, partitions=1, replication_factor=1)
        properties = {}
        for name, acls in PRINCIPALS.items():
            user = secure.add_scram_user(f"kt-{name}", f"pw-{uuid.uuid4().hex}")
            grant(cluster.admin_client(), f"User:{user.name}", acls)
            properties[name] = write_properties(workdir / f"{name}.properties", {
                "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
                "sasl.username": user.name, "sasl.password": user.password, "ssl.ca.location": str(pki.ca),
            })
        plain = cluster.bootstrap_servers
        tracked = scenarios.run_transaction(plain, ORDERS, [0], "open", TRACKED_ID, timeout_ms=600_000)
        made = hm.make_hanging_transaction(plain, HANGING_ID, STUCK)
        _commit(plain, GROUP, ConfluentTopicPartition(ORDERS, 0, tracked.start_offset(TRACKED_TP)))
        time.sleep(2.5)  # both are now older than --max-transaction-timeout
        yield Restricted(cluster, secure, properties, tracked, made, workdir)
        tracked.abort()
    finally:
        cluster.stop()


def doc(result) -> dict:
    assert result.stdout.strip(), f"exit {result.code}: {result.stderr}"
    return json.loads(result.stdout)


def rows_at(rows, tp: TopicPartition) -> list[dict]:
    return [r for r in rows if (r["topic"], r["partition"]) == tuple(tp)]


# -- hanging -----------------------------------------------------------------------------------


@pytest.mark.parametrize("principal", list(PRINCIPALS))
def test_the_tracked_transaction_is_never_hanging(capsys, restricted, principal):
    result = restricted.run(capsys, principal, "hanging", "-t", ORDERS, "--max-transaction-timeout", MAX_TXN)
    d = doc(result)
    assert rows_at(d["hanging"], TRACKED_TP) == [], result.stdout
    if principal in FILTERED:
        assert result.code == 3, result.stderr
        (row,) = rows_at(d["undetermined"], TRACKED_TP)
        assert row["reason"] == REASON_IDS_FILTERED
        assert any("DESCRIBE on TransactionalId" in m for m in row["missing"])
        assert REASON_IDS_FILTERED in result.stderr
    else:
        assert result.code == 1, result.stderr  # long-running only
        (row,) = rows_at(d["long_running"], TRACKED_TP)
        assert row["transactional_id"] == TRACKED_ID


@pytest.mark.parametrize("principal", list(PRINCIPALS))
def test_the_hanging_transaction_is_hanging_only_where_its_id_is_visible(capsys, restricted, principal):
    result = restricted.run(capsys, principal, "hanging", "-t", STUCK, "--max-transaction-timeout", MAX_TXN)
    d = doc(result)
    if principal in DECIDES_HANGING:
        assert result.code == 2, result.stderr
        (row,) = rows_at(d["hanging"], HANGING_TP)
        assert (row["transactional_id"], row["producer_id"]) == (HANGING_ID, restricted.hanging.producer_id)
    elif principal in SEES_HANGING_ID:
        assert result.code == 3, result.stderr
        assert d["hanging"] == []
        (row,) = rows_at(d["undetermined"], HANGING_TP)
        assert "its coordinator's log could not be read (__transaction_state-" in row["reason"], row
        if principal == "some-topics":
            assert "not authorized: needs READ on Topic __transaction_state" in row["reason"], row
    else:
        assert result.code == 3, result.stderr
        assert d["hanging"] == []
        (row,) = rows_at(d["undetermined"], HANGING_TP)
        assert row["reason"] == REASON_IDS_FILTERED


def test_topics_a_principal_may_not_read_are_missing_parts_naming_the_acl(capsys, restricted):
    described = restricted.run(capsys, "some-topics", "hanging", "-t", DESCRIBED, "--max-transaction-timeout", MAX_TXN)
    assert described.code == 3
    assert f"not authorized: needs READ on Topic {DESCRIBED}" in described.stderr
    producers = restricted.run(capsys, "some-topics", "producers", "-t", DESCRIBED)
    assert producers.code == 3 and f"not authorized: needs READ on Topic {DESCRIBED}" in producers.stderr
    hidden = restricted.run(capsys, "some-topics", "hanging", "-t", HIDDEN, "--max-transaction-timeout", MAX_TXN)
    assert hidden.code == 3 and HIDDEN in hidden.stderr  # Metadata leaves it out: unknown to this principal


def test_without_describe_configs_the_maximum_timeout_is_asked_for_by_name(capsys, restricted):
    result = restricted.run(capsys, "no-cluster", "hanging", "-t", ORDERS)
    assert result.code == 3
    assert "not authorized: needs DESCRIBE_CONFIGS on Cluster" in result.stderr
    assert "--max-transaction-timeout" in result.stderr


# -- check, lso, diagnose ----------------------------------------------------------------------


@pytest.mark.parametrize("principal", list(PRINCIPALS))
def test_check_never_pages_for_the_tracked_transaction(capsys, restricted, principal):
    result = restricted.run(capsys, principal, "check", "--topic-regex", ORDERS, "--max-transaction-timeout", MAX_TXN)
    assert result.code != 2, result.stdout + result.stderr
    if principal in FILTERED:
        assert result.code == 3, result.stdout + result.stderr
        assert "DESCRIBE on TransactionalId" in result.stdout + result.stderr


@pytest.mark.parametrize("principal", list(PRINCIPALS))
def test_check_pages_for_the_hanging_transaction_only_where_it_can_see_its_id(capsys, restricted, principal):
    # Where hanging decides it; where the principal may not read the coordinator's log, check leaves it
    # undetermined as hanging does (whether it committed, a lost COMMIT marker, is not known there).
    result = restricted.run(capsys, principal, "check", "--topic-regex", STUCK, "--max-transaction-timeout", MAX_TXN)
    assert result.code == (2 if principal in DECIDES_HANGING else 3), result.stdout + result.stderr
    if principal in SEES_HANGING_ID and principal not in DECIDES_HANGING:
        assert "needs READ on Topic __transaction_state" in result.stdout, result.stdout


@pytest.mark.parametrize("principal", list(PRINCIPALS))
def test_lso_names_the_pinning_transaction_only_where_its_id_is_visible(capsys, restricted, principal):
    result = restricted.run(capsys, principal, "lso", "-t", ORDERS)
    assert result.code in (0, 1), result.stderr
    (row,) = [r for r in json.loads(result.stdout) if r["partition"] == 0]
    assert row["transactional_id"] == (None if principal in FILTERED else TRACKED_ID), result.stdout


@pytest.mark.parametrize("principal", list(PRINCIPALS))
def test_diagnose_never_calls_the_tracked_transaction_hanging(capsys, restricted, principal):
    result = restricted.run(capsys, principal, "diagnose", "-g", GROUP, "-t", ORDERS, "--max-transaction-timeout", MAX_TXN)
    d = doc(result)
    verdicts = {t["verdict"] for t in d.get("transactions", [])}
    assert "hanging" not in verdicts, result.stdout
    if principal in FILTERED:
        assert result.code == 3 and verdicts == {"undetermined"}, result.stdout + result.stderr
        assert "DESCRIBE on TransactionalId" in result.stdout + result.stderr
    if principal == "no-cluster":  # ListGroups leaves the group out; it is refused, not unknown
        assert result.code == 3 and f"not authorized: needs DESCRIBE on Group {GROUP}" in result.stderr, result.stderr


# -- transactions list, producers --------------------------------------------------------------


@pytest.mark.parametrize("principal,listed", [
    ("literal", [HANGING_ID]), ("prefixed", [HANGING_ID]), ("no-ids", []), ("wildcard", [HANGING_ID, TRACKED_ID]),
])
def test_transactions_list_says_when_it_leaves_ids_out(capsys, restricted, principal, listed):
    result = restricted.run(capsys, principal, "transactions", "list")
    ids = sorted(r["transactional_id"] for r in json.loads(result.stdout)) if result.stdout.strip() else []
    assert [i for i in ids if i in (HANGING_ID, TRACKED_ID)] == listed
    if principal == "wildcard":
        assert result.code == 0, result.stderr
    else:
        assert result.code == 3 and REASON_IDS_FILTERED in result.stderr, result.stderr


@pytest.mark.parametrize("principal", list(PRINCIPALS))
def test_producers_shows_the_open_transaction_to_every_reader_of_the_topic(capsys, restricted, principal):
    result = restricted.run(capsys, principal, "producers", "-t", ORDERS)
    assert result.code == 0, result.stderr
    rows = json.loads(result.stdout)
    assert any(r["producer_id"] == restricted.tracked.producer_id for r in rows)


# -- abort -------------------------------------------------------------------------------------


@pytest.mark.parametrize("principal", list(PRINCIPALS))
def test_abort_all_hanging_dry_run_plans_only_what_is_positively_hanging(capsys, restricted, principal, tmp_path):
    result = restricted.run(capsys, principal, "abort", "--all-hanging", "--dry-run", "--max-transaction-timeout", MAX_TXN,
                            "--audit-log", str(tmp_path / "audit.jsonl"))
    rows = json.loads(result.stdout)
    planned = {(r["topic"], r["partition"]) for r in rows if r["outcome"] == "would abort"}
    assert planned == ({tuple(HANGING_TP)} if principal in DECIDES_HANGING else set()), result.stdout
    assert result.code == (3 if principal in FILTERED or principal not in DECIDES_HANGING else 0), result.stdout + result.stderr


def test_abort_all_hanging_by_a_filtered_principal_writes_no_marker(capsys, restricted, tmp_path):
    before = {tp: restricted.offsets(tp) for tp in (TRACKED_TP, HANGING_TP)}
    result = restricted.run(capsys, "no-ids", "abort", "--all-hanging", "--yes", "--max-transaction-timeout", MAX_TXN,
                            "--audit-log", str(tmp_path / "audit.jsonl"))
    assert {tp: restricted.offsets(tp) for tp in (TRACKED_TP, HANGING_TP)} == before, result.stdout  # no marker
    assert result.code == 3, result.stdout + result.stderr
    assert REASON_IDS_FILTERED in result.stdout


# -- cluster -----------------------------------------------------------------------------------


@pytest.mark.parametrize("principal,expected", [
    ("literal", {"transactional ids": "filtered", "broker configs": "yes", "abort markers": "no"}),
    ("prefixed", {"transactional ids": "filtered"}),
    ("no-ids", {"transactional ids": "filtered", "abort markers": "yes"}),
    ("wildcard", {"transactional ids": "all", "topics": "all", "consumer groups": "all"}),
    ("some-topics", {"transactional ids": "all", "topics": "filtered", f"producer state of {DESCRIBED}": "not authorized"}),
    ("no-cluster", {"transactional ids": "all", "broker configs": "no", "consumer groups": "filtered"}),
])
def test_cluster_shows_what_the_principal_can_and_cannot_see(capsys, restricted, principal, expected):
    result = restricted.run(capsys, principal, "cluster")
    seen = {r["part"]: r["visible"] for r in doc(result)["visibility"]}
    assert {k: seen.get(k) for k in expected} == expected, result.stdout
    if principal == "no-cluster":
        assert result.code == 3 and "not authorized: needs DESCRIBE_CONFIGS on Cluster" in result.stderr
    else:
        assert result.code == 0, result.stderr


# -- transactions history (issue 25) -------------------------------------------------------------


def test_history_needs_read_on_the_transaction_log_and_diagnose_goes_on_without_it(capsys, restricted):
    denied = restricted.run(capsys, "some-topics", "transactions", "history", TRACKED_ID)
    assert denied.code == 3, denied.stderr
    assert len(denied.stderr.strip().splitlines()) == 1 and "needs READ on Topic __transaction_state" in denied.stderr, denied.stderr
    allowed = restricted.run(capsys, "wildcard", "transactions", "history", TRACKED_ID)
    assert allowed.code == 0, allowed.stderr
    assert [(r["state"], r["events"]) for r in doc(allowed)] == [("Empty", ["initialised"]), ("Ongoing", ["partitions_added"])]
    diagnosed = restricted.run(capsys, "some-topics", "diagnose", "--group", GROUP, "--max-transaction-timeout", MAX_TXN)
    (txn,) = doc(diagnosed)["transactions"]
    assert txn["history"].startswith("undetermined: ") and "needs READ on Topic __transaction_state" in txn["history"], txn
    assert txn["history_evidence"] is None
