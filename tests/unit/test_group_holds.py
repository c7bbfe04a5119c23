"""A group held by a transaction: blocked through its offsets partition (a transactional offset
commit open on its __consumer_offsets partition: the stable offset fetch answers
UNSTABLE_OFFSET_COMMIT), waiting on a transaction in flight, and a healthy pipeline's small lag
(issue 34, items 2 and 5), over the pure verdicts and the shared fake cluster."""

from __future__ import annotations

import dataclasses
import json

import pytest

from kafkatxn import check, diagnose, exporter, lso, verdicts, verdicts_groups
from kafkatxn.cli.common import CommandContext
from kafkatxn.gaps import Gap
from kafkatxn.diagnose_rows import Action, TxnVerdict
from kafkatxn.model import TWO_PHASE_COMMIT_TIMEOUT_MS, Partial, ProducerState, TopicPartition, TransactionDescription
from kafkatxn.facts_cluster import gather_snapshot
from kafkatxn.verdicts import Classification, OpenTransaction, Verdict
from kafkatxn.verdicts_groups import GroupVerdict
from tests.support.blocked_group import ORDERS, blocked_model, now_ms
from tests.support.cli_helpers import run_cli
from tests.support.fake_kafka import FakeCluster, KafkaModel

OFFSETS_PARTITIONS = 5
NOW = 1_700_000_000_000


# -- pure ------------------------------------------------------------------------------------------


def test_offsets_partition_is_kafkas_partition_for():
    # "a".hashCode() == 97; Utils.abs(Integer.MIN_VALUE) is 0 (coordinator_partition's rule).
    assert verdicts_groups.offsets_partition("a", 50) == 47
    assert verdicts_groups.offsets_partition("billing", 50) == abs(verdicts.java_string_hash("billing")) % 50


@pytest.mark.parametrize("verdict", list(GroupVerdict))
def test_an_unstable_offset_fetch_blocks_whatever_the_offsets_say(verdict):
    assert verdicts_groups.stable_verdict(verdict, True) is GroupVerdict.blocked
    assert verdicts_groups.stable_verdict(verdict, False) is verdict


def _classification(verdict=Verdict.LONG_RUNNING, started_ago_ms=10_000, timeout_ms=60_000, state="Ongoing"):
    tp = TopicPartition("orders", 0)
    d = TransactionDescription("tx", 1, state, 7, 0, timeout_ms, NOW - started_ago_ms, frozenset({tp}))
    txn = OpenTransaction(tp, ProducerState(7, 0, 0, NOW - 1_000, -1, 5))
    return Classification(txn, verdict, "why", "tx", d if verdict is not Verdict.HANGING else None)


@pytest.mark.parametrize("classification, expected", [
    (_classification(), GroupVerdict.waiting),  # tracked, within its timeout: in flight
    (_classification(state="PrepareCommit"), GroupVerdict.waiting),  # its coordinator is completing it
    (_classification(started_ago_ms=61_000), GroupVerdict.blocked),  # past its own timeout: overdue
    (_classification(timeout_ms=TWO_PHASE_COMMIT_TIMEOUT_MS), GroupVerdict.blocked),  # two-phase commit: no one times it out
    (_classification(Verdict.HANGING), GroupVerdict.blocked),
    (_classification(Verdict.UNDETERMINED), GroupVerdict.blocked),
    (None, GroupVerdict.blocked),  # its transaction was not found or not classified
])
def test_held_verdict(classification, expected):
    assert verdicts_groups.held_verdict(classification, NOW) is expected


def test_lag_is_a_finding_from_the_threshold_on():
    assert not verdicts_groups.lag_is_finding(GroupVerdict.lagging, 2)  # a 1 s auto-commit's lag
    assert verdicts_groups.lag_is_finding(GroupVerdict.lagging, verdicts_groups.DEFAULT_LAG_THRESHOLD)
    assert verdicts_groups.lag_is_finding(GroupVerdict.lagging, 2, threshold=2)
    assert not verdicts_groups.lag_is_finding(GroupVerdict.blocked, 5_000)  # a block is its own finding


# -- blocked through the offsets partition -----------------------------------------------------------


def offsets_blocked_model(*, tracked=False, idle_ms=20 * 60_000, other_group="reports"):
    """orders-0 caught up (LSO = HW = 10) for billing at 10; a producer with a transactional offset
    commit for billing open on billing's __consumer_offsets partition since offset 40 (HW 42)."""
    model = KafkaModel(brokers=(1, 2))
    model.add_transaction_log([1, 2])
    model.add_partition("orders", 0, leader=1, lso=10, hw=10)
    offsets_tps = [model.add_partition("__consumer_offsets", n, leader=1 + n % 2, lso=0, hw=0) for n in range(OFFSETS_PARTITIONS)]
    held = offsets_tps[verdicts_groups.offsets_partition("billing", OFFSETS_PARTITIONS)]
    model.offsets[held] = [40, 42]
    now = now_ms()
    model.producers[held] = [ProducerState(6000, 2, 1, now - idle_ms, -1, 40)]
    if tracked:
        model.transactions["etl-tx"] = TransactionDescription(
            "etl-tx", 1, "Ongoing", 6000, 2, 900_000, now - 30_000, frozenset({held}))
    model.groups = {"billing": {ORDERS: 10}}
    if other_group:
        model.groups[other_group] = {ORDERS: 10}  # committed, nothing pending
    model.pending_offsets = {"billing": {ORDERS}}
    return model, FakeCluster(model), held


def test_lso_groups_calls_a_group_held_through_its_offsets_partition_blocked():
    """It was "caught_up" (lso --groups read the offsets without require_stable), exit 0."""
    _, cluster, held = offsets_blocked_model()
    report = lso.group_report(cluster)
    rows = {r.group: r for r in report.rows}
    billing = rows["billing"]
    assert billing.verdict is GroupVerdict.blocked and billing.blocked_through == str(held)
    assert billing.producer_id == 6000 and billing.txn_hanging is True  # the shared pin_verdict path: untracked, idle 20 min
    assert rows["reports"].verdict is GroupVerdict.caught_up and rows["reports"].blocked_through is None
    assert report.exit_code == 2
    assert any("UNSTABLE_OFFSET_COMMIT" in h and str(held) in h and "billing" in h for h in report.hints)


def test_diagnose_names_the_transaction_on_the_offsets_partition_and_the_abort():
    model, cluster, held = offsets_blocked_model()
    d = diagnose.run(cluster, ["billing"])
    (t,) = d.transactions
    assert t.producer_id == 6000 and t.partitions == (f"{held}@40",) and t.groups == ("billing",)
    assert t.verdict is TxnVerdict.hanging and t.action is Action.abort
    assert t.command == f"kafkatxn abort --topic __consumer_offsets --partition {held.partition} --start-offset 40"
    (row,) = d.partitions
    assert row.gap is Gap.blocked and "UNSTABLE_OFFSET_COMMIT" in row.explanation and str(held) in row.explanation
    assert d.groups[0].status == "blocked" and d.exit_code == 2
    # Nothing was written by looking.
    assert model.offsets[ORDERS] == [10, 10] and model.offsets[held] == [40, 42]


def test_the_abort_diagnose_gives_releases_the_group(capsys, monkeypatch, tmp_path):
    model, cluster, held = offsets_blocked_model()
    (t,) = diagnose.run(cluster, ["billing"]).transactions
    monkeypatch.setattr(CommandContext, "cluster", property(lambda self: cluster))
    done = run_cli(capsys, *t.command.split()[1:], "--yes", "--audit-log", str(tmp_path / "audit.jsonl"), "-b", "fake:9092")
    assert done.code == 0, done.stdout + done.stderr
    after = diagnose.run(cluster, ["billing"])
    assert after.transactions == [] and after.groups[0].status == "caught_up" and after.exit_code == 0
    assert model.offsets[ORDERS] == [10, 10]  # the data partition was not written


def test_diagnose_tracked_offsets_transaction_waits_and_offers_fence():
    _, cluster, held = offsets_blocked_model(tracked=True, idle_ms=2_000)
    d = diagnose.run(cluster, ["billing"])
    (t,) = d.transactions
    assert t.transactional_id == "etl-tx" and t.partitions == (f"{held}@40",)
    assert t.verdict is TxnVerdict.tracked and t.release_command == "kafkatxn fence etl-tx"
    assert d.partitions[0].gap is Gap.waiting and d.exit_code == 0


def test_check_and_exporter_count_the_group_held_through_its_offsets_partition():
    """check --groups said groups_blocked=0."""
    _, cluster, held = offsets_blocked_model()
    snapshot = gather_snapshot(cluster, groups=True)
    billing = [g for g in snapshot.groups if g.group == "billing"]
    assert [(g.blocked, g.blocked_through, g.txn_hanging) for g in billing] == [(True, str(held), True)]
    result = check.evaluate(snapshot)
    assert result.facts["groups_blocked"] == 1 and result.exit_code == 2
    assert any(f.kind == "group_blocked" and str(held) in f.message for f in result.findings)
    text = exporter.render_text(snapshot).decode()
    assert "kafkatxn_groups_blocked 1.0" in text and "kafkatxn_groups_waiting 0.0" in text


def test_a_group_sharing_the_offsets_partition_without_a_pending_commit_is_not_held():
    # Same offsets partition (a group name hashing there), nothing pending for it: stable.
    name = next(f"g{i}" for i in range(1000)
                if verdicts_groups.offsets_partition(f"g{i}", OFFSETS_PARTITIONS) == verdicts_groups.offsets_partition("billing", OFFSETS_PARTITIONS))
    _, cluster, _held = offsets_blocked_model(other_group=name)
    rows = {r.group: r for r in lso.group_report(cluster).rows}
    assert rows[name].verdict is GroupVerdict.caught_up and rows["billing"].verdict is GroupVerdict.blocked


def test_the_stable_fetch_is_asked_only_where_the_offsets_partition_holds_a_transaction():
    model, cluster, held = offsets_blocked_model()
    model.offsets[held] = [42, 42]
    model.producers[held] = []
    lso.group_report(cluster)
    assert not [r for _node, r in model.sent if type(r).__name__ == "OffsetFetch" and r.stable]


def test_a_broker_without_require_stable_has_no_unstable_offsets():
    model, cluster, _held = offsets_blocked_model()
    model.api_versions["OffsetFetch"] = (1, 6)
    rows = {r.group: r for r in lso.group_report(cluster).rows}
    assert rows["billing"].verdict is GroupVerdict.caught_up


# -- a healthy pipeline is quiet --------------------------------------------------------------------


def test_a_group_at_the_lso_of_a_young_tracked_transaction_is_waiting_exit_0():
    _, cluster = blocked_model()  # tracked, 30 s old, 10 min timeout
    report = lso.group_report(cluster, ["billing"])
    (row,) = report.rows
    assert row.verdict is GroupVerdict.waiting and row.transactional_id == "billing-tx" and row.txn_hanging is False
    assert report.exit_code == 0
    snapshot = gather_snapshot(cluster, groups=True, group_regex="^billing$")
    (g,) = snapshot.groups
    assert g.waiting and not g.blocked
    assert check.evaluate(snapshot).exit_code == 0


def test_waiting_past_the_critical_age_is_still_critical():
    _, cluster = blocked_model(started_ago_ms=400_000)
    report = lso.group_report(cluster, ["billing"], critical_age_ms=300_000)
    assert report.rows[0].verdict is GroupVerdict.waiting and report.exit_code == 2


def test_overdue_is_blocked_not_waiting():
    _, cluster = blocked_model(started_ago_ms=700_000, timeout_ms=600_000)
    assert lso.group_report(cluster, ["billing"], critical_age_ms=None).rows[0].verdict is GroupVerdict.blocked


def test_a_small_lag_changes_no_exit_code():
    model, cluster = blocked_model(tracked=False)
    model.offsets[ORDERS] = [7, 7]
    model.producers[ORDERS] = []
    model.groups["billing"][ORDERS] = 5  # two records behind: a 1 s auto-commit
    report = lso.group_report(cluster, ["billing"])
    assert report.rows[0].verdict is GroupVerdict.lagging and report.exit_code == 0
    assert lso.group_report(cluster, ["billing"], lag_threshold=2).exit_code == 1
    assert diagnose.run(cluster, ["billing"]).exit_code == 0
    assert diagnose.run(cluster, ["billing"], lag_threshold=2).exit_code == 1


class EndedBetweenRequests(FakeCluster):
    """ListOffsets answers from before the transaction's commit once (LSO 3 < HW 7); DescribeProducers
    already sees it committed: the race of a healthy pipeline."""

    stale = True

    def stable_and_high_offsets(self, partitions, high_first=None):
        answer = super().stable_and_high_offsets(partitions, high_first)
        if self.stale and ORDERS in answer.value:
            self.stale = False
            return Partial({**answer.value, ORDERS: (3, 7) if high_first is None else high_first(7, 3)}, answer.missing)
        return answer


def test_a_transaction_that_ended_between_two_requests_is_asked_again_not_undetermined():
    """diagnose exited 3: "blocked ... by an open transaction (not found: it may just have ended)"."""
    model, _ = blocked_model(tracked=False)
    model.offsets[ORDERS] = [8, 8]  # committed: marker at 7
    model.producers[ORDERS] = []
    cluster = EndedBetweenRequests(model)
    d = diagnose.run(cluster, ["billing"])
    assert d.exit_code == 0, (d.summary, [p.explanation for p in d.partitions])
    assert d.partitions[0].verdict is GroupVerdict.lagging and d.partitions[0].last_stable_offset == 8


# -- filters and regexes that match nothing ------------------------------------------------------------


@pytest.fixture
def fake_cli(monkeypatch):
    model, cluster = blocked_model()
    monkeypatch.setattr(CommandContext, "cluster", property(lambda self: cluster))
    return model, cluster


def test_min_lag_removing_every_row_says_so(capsys, fake_cli):
    result = run_cli(capsys, "lso", "--groups", "--min-lag", "10", "-b", "fake:9092")
    assert "no committed offsets" not in result.stdout + result.stderr
    assert "--min-lag" in result.stdout + result.stderr and result.code == 0


def test_check_group_regex_matching_no_group_is_unknown(capsys, fake_cli):
    result = run_cli(capsys, "check", "--groups", "--group-regex", "legder", "-b", "fake:9092", "-o", "json")
    report = json.loads(result.stdout)
    assert result.code == 3 and report["status"] == "UNKNOWN"
    assert any("legder" in f["message"] for f in report["findings"])


def test_a_transaction_whose_coordinator_moved_on_between_two_requests_is_asked_again():
    """ListOffsets and DescribeProducers saw producer 5000's transaction open at 3; by DescribeTransactions
    its coordinator had it committed (its id's transaction holds no partition): the LSO is read again,
    it moved, and the group is not held (it was "blocked", exit 1, in a healthy pipeline)."""
    model, _ = blocked_model()
    d0 = model.transactions["billing-tx"]
    model.transactions["billing-tx"] = TransactionDescription(
        "billing-tx", 1, "CompleteCommit", 5000, 3, d0.timeout_ms, -1, frozenset())
    cluster = EndedBetweenRequests(model)
    model.offsets[ORDERS] = [8, 8]  # what ListOffsets answers from now on: committed, marker at 7
    report = lso.group_report(cluster, ["billing"])
    (row,) = report.rows
    assert (row.verdict, row.last_stable_offset, row.producer_id) == (GroupVerdict.lagging, 8, None)
    assert report.exit_code == 0
    # A transaction that still pins the LSO after the second look stays as the verdicts say.
    model, _ = blocked_model()
    model.transactions["billing-tx"] = TransactionDescription(
        "billing-tx", 1, "CompleteCommit", 5000, 3, d0.timeout_ms, -1, frozenset())
    (row,) = lso.group_report(FakeCluster(model), ["billing"]).rows
    assert row.verdict is GroupVerdict.blocked and row.producer_id == 5000


def test_may_have_ended():
    c = _classification(Verdict.HANGING)
    pin = c.open_txn
    assert verdicts_groups.may_have_ended(None, None)  # a lag with nothing open
    assert not verdicts_groups.may_have_ended(pin, _classification())  # tracked
    assert not verdicts_groups.may_have_ended(pin, c)  # hanging with no description: nothing says it ended
    moved_on = dataclasses.replace(_classification(), verdict=Verdict.HANGING)
    assert verdicts_groups.may_have_ended(pin, moved_on)
