"""A transaction its coordinator committed is never aborted (issue 25, deliver 3): the verdict over
decoded ``__transaction_state`` records and the partition's producer state (pure), and hanging,
abort, restore-commit and diagnose over the fake facade, whose log the tests write."""

from __future__ import annotations

import json
import time

import pytest

from kafkatxn import auditlog, hanging, remedy, verdicts, verdicts_groups
from kafkatxn.txnlog_records import TxnLogRecord
from kafkatxn.errors import InputError
from kafkatxn.lost_commit import CLOCK_ALLOWANCE_MS, Ending, ending, settle, settle_all
from kafkatxn.model import Missing, ProducerState, TopicPartition, TransactionalId, TransactionDescription, TransactionListing, TransactionLogHistory
from kafkatxn.verdicts import Classification, OpenTransaction, Verdict
from kafkatxn.monitoring_plugin import check_ranges
from tests.support.cli_helpers import run_cli
from tests.support.fake_kafka import FakeCluster, KafkaModel

X = TopicPartition("orders", 0)
Y = TopicPartition("orders", 1)
TID, PID, EPOCH = "app-1", 7, 3
NOW = int(time.time() * 1000)
T0 = NOW - 3_600_000  # the open transaction's first record
Outcome = remedy.Outcome


def rec(state, partitions=(), epoch=EPOCH, pid=PID, at=T0, started=T0 - 50, tv=0, offset=0, tid=TID):
    return TxnLogRecord(tid, pid, epoch, state, tuple(sorted(str(p) for p in partitions)), 60_000, started, at, tv,
                        log_partition=2, log_offset=offset)


def committed(at=T0 + 100, parts=(X, Y)):
    """InitProducerId, then one transaction over ``parts``, committed at ``at``."""
    return [rec("Empty", at=T0 - 1000), rec("Ongoing", parts, at=T0 - 40), rec("PrepareCommit", parts, at=at),
            rec("CompleteCommit", at=at + 5)]


def open_txn(first=T0, last=T0 + 50, epoch=EPOCH, start=10):
    return OpenTransaction(X, ProducerState(PID, epoch, 4, last, 0, start), first_record_timestamp_ms=first)


def history(records, undecoded=0):
    return TransactionLogHistory(TID, 2, tuple(records), undecoded)


def hanging_c(txn=None, tid=TID):
    d = TransactionDescription(TID, 3, "CompleteCommit", PID, EPOCH, 60_000, -1, frozenset())
    return Classification(txn or open_txn(), Verdict.HANGING, verdicts.REASON_NOT_TRACKED, tid, d)


# -- the verdict, pure -------------------------------------------------------------------------


def test_the_log_shows_the_commit_of_this_producer_epoch_and_partition_a_lost_commit_marker():
    e = ending(open_txn(), history(committed()))
    assert e.ending is Ending.COMMITTED and e.log_offsets == (0,)
    c = settle(hanging_c(), history(committed()))
    assert c.verdict is Verdict.LOST_COMMIT and "lost COMMIT marker" in c.reason and "restore-commit" in c.reason


def test_the_log_shows_an_abort_hanging_as_today():
    records = [rec("Empty", at=T0 - 1000), rec("Ongoing", [X], at=T0 - 40), rec("PrepareAbort", [X], at=T0 + 100),
               rec("CompleteAbort", at=T0 + 105)]
    assert ending(open_txn(), history(records)).ending is Ending.ABORTED
    assert settle(hanging_c(), history(records)) == hanging_c()


def test_a_transaction_that_never_included_the_partition_hanging_as_today():
    records = committed(parts=(Y,))
    assert ending(open_txn(), history(records)).ending is Ending.NEVER_INCLUDED
    assert settle(hanging_c(), history(records)) == hanging_c()
    # InitProducerId's record alone (the harness's hanging maker): the epoch began, nothing after.
    assert ending(open_txn(first=None), history([rec("Empty")])).ending is Ending.NEVER_INCLUDED


def test_compacted_history_is_undetermined_never_a_marker():
    """The cleaner kept the id's latest record: CompleteCommit, with no partitions. Neither marker is supported."""
    only_last = [rec("CompleteCommit", at=T0 + 105)]
    e = ending(open_txn(), history(only_last))
    assert e.ending is Ending.UNKNOWN and "compacted" in e.reason
    c = settle(hanging_c(), history(only_last))
    assert c.verdict is Verdict.UNDETERMINED and "compacted" in c.reason
    assert c.missing == (Missing(TopicPartition("__transaction_state", 2), e.reason),)
    # A surviving PrepareCommit whose transaction started after the first record cannot vouch for all of it.
    late_start = [rec("PrepareCommit", [X], at=T0 + 100, started=T0 + CLOCK_ALLOWANCE_MS + 1), rec("CompleteCommit", at=T0 + 105)]
    assert ending(open_txn(), history(late_start)).ending is Ending.UNKNOWN
    # One that started before the first record does (its transaction holds every record since).
    early_start = [rec("PrepareCommit", [X], at=T0 + 100, started=T0 - 50), rec("CompleteCommit", at=T0 + 105)]
    assert ending(open_txn(), history(early_start)).ending is Ending.COMMITTED
    # Without the first record's time nothing tells where the transaction began.
    assert ending(open_txn(first=None), history(early_start)).ending is Ending.UNKNOWN


def test_a_commit_and_an_abort_since_its_first_record_no_one_marker_is_right():
    records = committed() + [rec("Ongoing", [X], at=T0 + 200), rec("PrepareAbort", [X], at=T0 + 300)]
    e = ending(open_txn(last=T0 + 250), history(records))
    assert e.ending is Ending.UNKNOWN and "both" in e.reason


def test_transactions_that_ended_before_its_first_record_do_not_count():
    earlier_abort = [rec("Empty", at=T0 - 9000), rec("Ongoing", [X], at=T0 - 8000), rec("PrepareAbort", [X], at=T0 - 7000),
                     rec("CompleteAbort", at=T0 - 6990)]
    assert ending(open_txn(), history(earlier_abort + committed()[1:])).ending is Ending.COMMITTED


def test_records_written_after_the_commit_are_not_all_committed():
    e = ending(open_txn(last=T0 + 100 + CLOCK_ALLOWANCE_MS + 1), history(committed()))
    assert e.ending is Ending.UNKNOWN and "after" in e.reason


def test_another_epoch_or_producer_id_is_not_this_transaction():
    assert ending(open_txn(epoch=EPOCH + 1), history(committed())).ending is Ending.NEVER_INCLUDED
    other = [rec(r.state, tuple(TopicPartition("orders", int(p.rsplit("-", 1)[1])) for p in r.partitions), pid=PID + 1,
                 at=r.last_update_timestamp_ms) for r in committed()]
    assert ending(open_txn(), history(other)).ending is Ending.UNKNOWN  # P's own history is not there


def test_transaction_version_2_bumps_the_epoch_at_prepare():
    records = [rec("Empty", at=T0 - 1000, tv=2), rec("Ongoing", [X], at=T0 - 40, tv=2),
               rec("PrepareCommit", [X], epoch=EPOCH + 1, at=T0 + 100, tv=2), rec("CompleteCommit", epoch=EPOCH + 1, at=T0 + 105, tv=2)]
    assert ending(open_txn(), history(records)).ending is Ending.COMMITTED
    # The same PrepareCommit alone: version 2 says its data epoch is one less.
    assert ending(open_txn(), history(records[2:3])).ending is Ending.COMMITTED
    # The previous transaction's commit (data epoch EPOCH - 1) is not this one's.
    previous = [rec("Ongoing", [X], epoch=EPOCH - 1, at=T0 - 400, tv=2), rec("PrepareCommit", [X], at=T0 - 300, tv=2)]
    assert ending(open_txn(), history(previous)).ending is Ending.NEVER_INCLUDED


def test_records_it_could_not_decode_may_be_its_end():
    e = ending(open_txn(), history(committed(), undecoded=2))
    assert e.ending is Ending.UNKNOWN and "could not be decoded" in e.reason


def test_an_unreadable_log_is_undetermined_naming_the_acl_and_other_verdicts_are_untouched():
    denied = Missing(TransactionalId(TID), "__transaction_state-2 not read: not authorized: needs READ on Topic __transaction_state",
                     acl="READ on Topic __transaction_state")
    c = settle(hanging_c(), None, [denied])
    assert c.verdict is Verdict.UNDETERMINED and c.missing == (denied,) and "could not be read" in c.reason
    tracked = Classification(open_txn(), Verdict.LONG_RUNNING, "coordinator tracks it", TID)
    no_id = Classification(open_txn(), Verdict.HANGING, verdicts.REASON_NO_TRANSACTIONAL_ID)
    assert settle_all([tracked, no_id], {}, [denied]) == [tracked, no_id]


# -- the commands over the fake facade ---------------------------------------------------------


def lost_commit_cluster(records, timeout_s: float = 30):
    """orders-0: producer 7 epoch 3's transaction from offset 10 is open (LSO 10, HW 16); its id's
    coordinator describes CompleteCommit with no partitions; ``records`` are its log."""
    model = KafkaModel(brokers=(1,), cluster_id="cid-1")
    model.add_partition("orders", 0, leader=1, lso=10, hw=16)
    model.add_transaction_log([1])
    model.producers[X] = [ProducerState(PID, EPOCH, 4, T0 + 50, 0, 10)]
    model.record_timestamps[X] = {10: T0}
    model.listings = [(TID, PID, "CompleteCommit")]
    model.transactions = {TID: TransactionDescription(TID, 1, "CompleteCommit", PID, EPOCH, 60_000, -1, frozenset())}
    model.transaction_log_by_id[TID] = list(records)
    model.max_timeouts = {1: "900000"}
    return FakeCluster(model, timeout_s)


@pytest.fixture
def audit(tmp_path):
    return auditlog.AuditLog(tmp_path / "audit.jsonl")


TARGET = remedy.AbortTarget("orders", 0, start_offset=10)


def test_hanging_names_the_lost_commit_and_abort_refuses_it_writing_nothing(audit):
    fake = lost_commit_cluster(committed())
    found = hanging.find_hanging(fake)
    assert found.hanging == [] and [(r.topic, r.partition, r.start_offset) for r in found.lost_commit] == [("orders", 0, 10)]
    assert "lost COMMIT marker" in found.lost_commit[0].reason
    for planned in (remedy.abort(fake, [TARGET], audit=audit, confirm=lambda rows: True),
                    remedy.abort(fake, all_hanging=True, audit=audit, confirm=lambda rows: True)):
        (row,) = planned.rows
        assert row.outcome is Outcome.REFUSED and "restore-commit" in row.reason, row.reason
    assert fake.called("write_abort_marker") == [] and fake.model.offsets[X] == [10, 16]
    assert [(r["record"], r["outcome"]) for r in audit.records()] == [("result", "refused")] * 2


def test_restore_commit_writes_the_commit_marker_verifies_and_audits(audit):
    fake = lost_commit_cluster(committed())
    result = remedy.restore_commit(fake, [TARGET], audit=audit, confirm=lambda rows: True)
    (row,) = result.rows
    assert (row.outcome, row.lso_before, row.lso_after) == (Outcome.RESTORED, 10, 17), row.reason
    assert fake.called("write_commit_marker") == [("write_commit_marker", X, PID, EPOCH, 0, 1)]
    assert fake.called("write_abort_marker") == []
    intent, res = audit.records()
    assert (intent["action"], intent["plan"]["write_txn_markers"]["result"], res["outcome"]) == ("restore-commit", "COMMIT", "commit restored")
    again = remedy.restore_commit(fake, [TARGET], audit=audit, confirm=lambda rows: True)
    assert [r.outcome for r in again.rows] == [Outcome.NOTHING_TO_RESTORE] and len(fake.called("write_commit_marker")) == 1


@pytest.mark.parametrize("records, why", [
    ([rec("Empty", at=T0 - 1000), rec("Ongoing", [X], at=T0 - 40), rec("PrepareAbort", [X], at=T0 + 100)], "does not show it committed"),
    ([rec("CompleteCommit", at=T0 + 105)], "compacted"),
])
def test_restore_refuses_what_the_log_does_not_show_committed(audit, records, why):
    fake = lost_commit_cluster(records)
    (row,) = remedy.restore_commit(fake, [TARGET], audit=audit, confirm=lambda rows: True).rows
    assert row.outcome is Outcome.REFUSED and why in row.reason, row.reason
    assert fake.called("write_commit_marker") == [] and fake.model.offsets[X] == [10, 16]


def test_the_log_shows_an_abort_abort_goes_ahead_as_today(audit):
    fake = lost_commit_cluster([rec("Empty", at=T0 - 1000), rec("Ongoing", [X], at=T0 - 40), rec("PrepareAbort", [X], at=T0 + 100)])
    (row,) = remedy.abort(fake, [TARGET], audit=audit, confirm=lambda rows: True).rows
    assert row.outcome is Outcome.ABORTED and fake.called("write_abort_marker") == [("write_abort_marker", X, PID, EPOCH, 0, 1)]


def test_without_read_on_the_log_hanging_is_undetermined_exit_3_and_abort_refuses(audit, capsys, monkeypatch):
    fake = lost_commit_cluster(committed())
    fake.model.transaction_log_denied = True
    found = hanging.find_hanging(fake)
    assert found.hanging == found.lost_commit == [] and len(found.undetermined) == 1
    assert "READ on Topic __transaction_state" in found.undetermined[0].reason
    (row,) = remedy.abort(fake, [TARGET], audit=audit, confirm=lambda rows: True).rows
    assert row.outcome is Outcome.REFUSED and fake.called("write_abort_marker") == []
    monkeypatch.setattr("kafkatxn.kafka.Cluster", lambda config: fake)
    assert run_cli(capsys, "hanging", "-b", "f:1").code == 3


def test_cli_hanging_exits_2_and_diagnose_suggests_restore_commit(capsys, monkeypatch, tmp_path):
    fake = lost_commit_cluster(committed())
    fake.model.groups = {"billing": {X: 10}}
    monkeypatch.setattr("kafkatxn.kafka.Cluster", lambda config: fake)
    result = run_cli(capsys, "hanging", "-b", "f:1", "-o", "json")
    assert result.code == 2 and "restore-commit --topic orders --partition 0 --start-offset 10" in result.stderr
    assert json.loads(result.stdout)["lost_commit"][0]["start_offset"] == 10
    diagnosed = run_cli(capsys, "diagnose", "-b", "f:1", "--group", "billing", "-o", "json")
    (txn,) = json.loads(diagnosed.stdout)["transactions"]
    assert (txn["verdict"], txn["action"]) == ("lost_commit", "restore_commit"), txn
    assert txn["command"] == "kafkatxn restore-commit --topic orders --partition 0 --start-offset 10"
    restored = run_cli(capsys, "restore-commit", "-b", "f:1", "-t", "orders", "-p", "0", "--start-offset", "10", "--yes",
                       "--audit-log", str(tmp_path / "a.jsonl"))
    assert restored.code == 0 and "commit restored" in restored.stdout, restored.stderr


def test_a_compacted_log_refuses_the_abort_unless_the_operator_decides_and_the_audit_log_says_so(audit):
    fake = lost_commit_cluster([rec("CompleteCommit", at=T0 + 105)])
    (row,) = remedy.abort(fake, [TARGET], audit=audit, confirm=lambda rows: True).rows
    assert row.outcome is Outcome.REFUSED and "compacted" in row.reason and fake.called("write_abort_marker") == []
    (row,) = remedy.abort(fake, [TARGET], allow_unknown_outcome=True, audit=audit, confirm=lambda rows: True).rows
    assert row.outcome is Outcome.ABORTED and len(fake.called("write_abort_marker")) == 1
    intent = next(r for r in audit.records() if r["record"] == "intent")
    assert "compacted" in intent["state_before"]["hanging_reason"] and "--allow-unknown-outcome" in intent["state_before"]["hanging_reason"]
    # The operator decides only where the log cannot tell: a commit it shows is still refused.
    shown = lost_commit_cluster(committed())
    (row,) = remedy.abort(shown, [TARGET], allow_unknown_outcome=True, audit=audit, confirm=lambda rows: True).rows
    assert row.outcome is Outcome.REFUSED and shown.called("write_abort_marker") == []
    with pytest.raises(InputError):
        remedy.abort(shown, all_hanging=True, allow_unknown_outcome=True, audit=audit, confirm=lambda rows: True)


# -- the facade's read of the log --------------------------------------------------------------


def test_the_facade_reads_only_the_partitions_owning_the_ids_and_names_a_refused_read():
    """Over the fake wire's Fetch: the owner's partition is read and decoded (a neighbour's record
    left out, a record of an unknown version counted), a partition whose leader refuses the read
    (TOPIC_AUTHORIZATION_FAILED) is a Missing naming the ACL it needs."""
    from kafkatxn.kafka.txnlog_encode import encode_key, encode_value_v1
    from kafkatxn.kafka import protocol as p
    from kafkatxn.kafka.transaction_log import TransactionLogApi

    model = KafkaModel(brokers=(1,))
    log = model.add_transaction_log([1] * 5)
    fake = FakeCluster(model)
    owner = verdicts.coordinator_partition(TID, 5)
    denied = next(t for t in (f"other-{i}" for i in range(100)) if verdicts.coordinator_partition(t, 5) != owner)
    empty = encode_value_v1(producer_id=PID, producer_epoch=EPOCH, timeout_ms=60_000, state="Empty", partitions=None,
                            last_update_timestamp_ms=T0, start_timestamp_ms=-1)
    rows = [(encode_key(TID), empty), (encode_key("neighbour"), empty), (encode_key(TID), bytes.fromhex("0007deadbeef"))]
    model.batches[log[owner]] = [p.FetchedBatch(0, 2, -1, -1, False, None, tuple(
        p.FetchedRecord(i, T0, key, value) for i, (key, value) in enumerate(rows)))]
    model.offsets[log[owner]] = [3, 3]
    model.partition_errors[(1, log[verdicts.coordinator_partition(denied, 5)])] = ["TOPIC_AUTHORIZATION_FAILED"]
    got = TransactionLogApi.transaction_log_histories(fake, [TID, denied])
    fetched = sorted(f.tp.partition for _n, r in model.sent if isinstance(r, p.Fetch) for f in r.partitions)
    assert fetched == sorted({owner, verdicts.coordinator_partition(denied, 5)})
    (history,) = got.value.values()
    assert (history.transactional_id, history.log_partition, history.undecoded) == (TID, owner, 1)
    assert [(r.transactional_id, r.producer_id, r.producer_epoch, r.state, r.log_offset) for r in history.records] == [
        (TID, PID, EPOCH, "Empty", 0)
    ]
    (m,) = got.missing
    assert m.subject == TransactionalId(denied) and m.acl == "READ on Topic __transaction_state"
    assert "not authorized: needs READ on Topic __transaction_state" in m.reason


def test_check_and_the_exporter_call_a_lost_commit_what_hanging_calls_it():
    """One truth: the snapshot check and the exporter share settles hanging verdicts by the log too,
    so a lost COMMIT marker is neither counted as hanging (whose runbook says abort) nor left out."""
    from kafkatxn import check, exitcodes, exporter_metrics
    from kafkatxn.facts_cluster import gather_snapshot

    snap = gather_snapshot(lost_commit_cluster(committed()))
    assert snap.hanging == () and [(s.topic, s.partition, s.start_offset) for s in snap.lost_commits] == [("orders", 0, 10)]
    result = check.evaluate(snap)
    assert result.status is exitcodes.Status.CRITICAL
    assert [f.kind for f in result.findings] == ["lost_commit_marker"] and "never abort" in result.findings[0].message
    perf = {p.label: p.value for p in result.perfdata}
    assert (perf["hanging_transactions"], perf["lost_commit_markers"]) == (0, 1)
    families = {f.name: f for f in exporter_metrics.metric_families(snap)}
    assert families["kafkatxn_lost_commit_markers"].samples[0].value == 1
    assert families["kafkatxn_hanging_transactions"].samples[0].value == 0
    # The log says aborted: hanging, as hanging says.
    aborted = gather_snapshot(lost_commit_cluster([rec("Empty", at=T0 - 1000), rec("Ongoing", [X], at=T0 - 40),
                                                   rec("PrepareAbort", [X], at=T0 + 100)]))
    assert (len(aborted.hanging), aborted.lost_commits) == (1, ())


def test_a_transaction_dated_for_the_log_is_not_read_again_by_hanging_or_the_snapshot():
    """settle_by_transaction_log reads the first record of each hanging transaction of a known id;
    hanging's rows and the snapshot's samples date the same transaction from there, not with a
    second read of the partition."""
    from kafkatxn.facts_cluster import gather_snapshot

    aborted = [rec("Empty", at=T0 - 1000), rec("Ongoing", [X], at=T0 - 40), rec("PrepareAbort", [X], at=T0 + 100)]

    def first_record_reads(fake) -> int:
        return sum(1 for _name, starts in fake.called("first_record_timestamps") if X in starts)

    for gather_once in (hanging.find_hanging, gather_snapshot):
        fake = lost_commit_cluster(aborted)
        gather_once(fake)
        assert first_record_reads(fake) == 1, gather_once
    found = hanging.find_hanging(lost_commit_cluster(aborted))
    # Still dated by its first record (T0), as before.
    assert [(r.start_offset, r.transaction_age_source) for r in found.hanging] == [(10, "first_record")]
    assert found.hanging[0].transaction_age_ms >= NOW - T0


# -- lso and lso --groups: what hanging says of the pinning transaction ---------------------------


def lso_json(capsys, fake, monkeypatch, *args: str):
    monkeypatch.setattr("kafkatxn.kafka.Cluster", lambda config: fake)
    result = run_cli(capsys, "lso", "-b", "f:1", "-o", "json", *args)
    return result, json.loads(result.stdout)


def test_lso_calls_a_lost_commit_what_hanging_calls_it_and_says_restore_commit(capsys, monkeypatch):
    """The pinning transaction's verdict is hanging's, settled by the coordinator's log: a lost
    COMMIT marker is not hanging (abort would drop committed records); the hint is restore-commit."""
    fake = lost_commit_cluster(committed())
    fake.model.groups = {"billing": {X: 10}}
    assert hanging.find_hanging(fake).lost_commit  # what hanging says
    hint = "restore it: kafkatxn restore-commit --topic orders --partition 0 --start-offset 10"
    # --critical-age 1000d: critical only because nothing but restore-commit ends the block, not by age.
    for args in ((), ("--groups", "billing"), ("--groups", "billing", "--critical-age", "1000d")):
        result, (row,) = lso_json(capsys, fake, monkeypatch, *args)
        assert (row["topic"], row["partition"], row["producer_id"]) == ("orders", 0, PID), row
        assert row["txn_hanging"] is False, (args, row)  # it used to be called hanging (true)
        assert row["txn_lost_commit"] is True, (args, row)
        assert hint in result.stderr and "abort" not in result.stderr.replace("do not abort", ""), result.stderr
        if "--groups" in args:
            assert row["verdict"] == "blocked" and result.code == 2, (args, result.code, result.stderr)
    # The library's rows: the group blocked behind it is critical whatever the age threshold.
    from kafkatxn import facts_lso, group_positions, lso as lso_mod

    (group_row,) = group_positions.group_lags(facts_lso.take_group_snapshot(fake, ["billing"]))
    assert lso_mod.blocked_row_severity(group_row, None) is verdicts_groups.Severity.critical
    assert verdicts_groups.blocked_severity(False, False, False, old=False, lost_commit=True) is verdicts_groups.Severity.critical


def test_check_and_the_exporter_call_a_group_behind_a_lost_commit_stuck():
    from kafkatxn import check, exitcodes, exporter_metrics
    from kafkatxn.facts_cluster import gather_snapshot

    fake = lost_commit_cluster(committed())
    fake.model.groups = {"billing": {X: 10}}
    snap = gather_snapshot(fake, groups=True)
    (sample,) = snap.groups
    assert sample.blocked and sample.txn_hanging is False, sample
    assert sample.txn_lost_commit is True, sample
    assert sample.stuck and snap.group_stuck(sample) is True
    # Stuck whatever the age thresholds: no --txn-age-crit.
    result = check.evaluate(snap, check.Thresholds(*check_ranges(None, None, "none", "none", None, None)))
    assert result.status is exitcodes.Status.CRITICAL
    assert [f.kind for f in result.findings] == ["lost_commit_marker", "group_blocked"], result.findings
    families = {f.name: f for f in exporter_metrics.metric_families(snap)}
    assert [s.value for s in families["kafkatxn_group_stuck"].samples] == [1]
    assert families["kafkatxn_groups_stuck"].samples[0].value == 1



def test_one_gather_with_groups_reads_the_ids_log_once_and_its_passes_agree():
    """The snapshot's hanging pass settles the pin by its coordinator's log; the group pass takes that
    answer for the same transaction instead of reading the log again (and so cannot disagree with it)."""
    from kafkatxn.facts_cluster import gather_snapshot

    fake = lost_commit_cluster(committed())
    fake.model.groups = {"billing": {X: 10}}
    snap = gather_snapshot(fake, groups=True)
    assert [c[1] for c in fake.called("transaction_log_histories")] == [(TID,)]
    assert [(s.topic, s.partition) for s in snap.lost_commits] == [("orders", 0)]
    (sample,) = snap.groups
    assert sample.txn_lost_commit is True and sample.txn_hanging is False


@pytest.mark.parametrize("fault", ["log_denied", "coordinator_loading"])
def test_lso_on_an_undetermined_pin_says_unknown_never_false_and_exits_3(capsys, monkeypatch, fault):
    """A verdict that was not determined (its coordinator's log could not be read, or its coordinator
    did not answer) is missing (null) in lso's rows, the answer is undetermined (exit 3: never
    critical, never OK), and check and the exporter say the group's block cannot be known."""
    from kafkatxn import check, exitcodes, exporter_metrics, monitoring_plugin
    from kafkatxn.facts_cluster import gather_snapshot

    fake = lost_commit_cluster(committed(), timeout_s=3)  # a coordinator that stays loading costs half the time left
    fake.model.groups = {"billing": {X: 10}}
    if fault == "log_denied":
        fake.model.transaction_log_denied = True
    else:
        fake.model.transaction_errors[TID] = "COORDINATOR_LOAD_IN_PROGRESS"
    for args in (("--critical-age", "1000d"), ("--groups", "billing", "--critical-age", "1000d")):
        result, (row,) = lso_json(capsys, fake, monkeypatch, *args)
        assert row["txn_hanging"] is None, (args, row)  # it used to be true (log unread) or false (no coordinator)
        assert row["txn_lost_commit"] is None, (args, row)
        assert result.code == 3 and "hanging verdict orders-0" in result.stderr, (args, result.code, result.stderr)
        assert "restore-commit" not in result.stderr and "abort" not in result.stderr
    snap = gather_snapshot(fake, groups=True)
    (sample,) = snap.groups
    assert sample.blocked and sample.txn_hanging is None and not sample.stuck and snap.group_stuck(sample) is None
    result = check.evaluate(snap, check.Thresholds(*check_ranges(None, None, "none", "none", None, None)))
    assert result.status is exitcodes.Status.UNKNOWN, result.findings
    assert "group_undetermined" in [f.kind for f in result.findings] and "group_blocked" not in [f.kind for f in result.findings]
    assert "groups_waiting=0" in monitoring_plugin.format_perfdata(result.perfdata)  # nor counted as a group waiting in flight
    families = {f.name: f for f in exporter_metrics.metric_families(snap)}
    assert [s.value for s in families["kafkatxn_group_stuck"].samples] == []  # no series: never a reassuring 0
