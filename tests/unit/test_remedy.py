"""Abort and fence: the decisions (pure) and the plan/confirm/act/verify/audit flow over a fake facade."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace

import pytest

from kafkatxn import auditlog, remedy, verdicts
from kafkatxn.remedy import driver
from kafkatxn.model import ProducerState, TopicPartition, TransactionDescription, TransactionListing
from kafkatxn.cli.app import FLAGS
from kafkatxn.errors import EXIT_OK, EXIT_UNKNOWN, InputError, UsageError
from tests.support.cli_helpers import run_cli
from tests.support.fake_kafka import FakeCluster, KafkaModel

Action, Outcome = remedy.Action, remedy.Outcome
A0 = TopicPartition("a", 0)
A1 = TopicPartition("a", 1)


def state(pid, start=-1, epoch=0, coord=-1, ts=None):
    return ProducerState(pid, epoch, 3, ts if ts is not None else int(time.time() * 1000) - 3_600_000, coord, start)


def desc(tid, pid, partitions=(), state_name="Ongoing", epoch=0, timeout_ms=60_000):
    return TransactionDescription(tid, 1, state_name, pid, epoch, timeout_ms, 1, frozenset(partitions))


# -- abort decisions ----------------------------------------------------------------------------


def test_start_offset_form_aborts_the_producer_whose_transaction_starts_there():
    target = remedy.AbortTarget("a", 0, start_offset=120)
    d = remedy.decide_abort(target, [state(5, start=100, coord=4), state(7, start=120, epoch=2, coord=3)])
    assert (d.action, d.producer.producer_id, d.marker_coordinator_epoch) == (Action.ABORT, 7, 3)


def test_marker_uses_coordinator_epoch_0_when_the_producer_never_saw_a_marker():
    d = remedy.decide_abort(remedy.AbortTarget("a", 0, start_offset=0), [state(7, start=0, coord=-1)])
    assert d.marker_coordinator_epoch == 0


def test_nothing_open_is_nothing_to_abort():
    d = remedy.decide_abort(remedy.AbortTarget("a", 0, start_offset=120), [state(7)])
    assert d.action is Action.NOTHING


def test_another_open_transaction_means_the_offset_is_stale_and_is_refused():
    d = remedy.decide_abort(remedy.AbortTarget("a", 0, start_offset=121), [state(7, start=120)])
    assert d.action is Action.REFUSE
    assert "offset 120 (producer 7)" in d.reason


def test_a_recorded_earlier_abort_makes_a_repeat_nothing_to_abort():
    d = remedy.decide_abort(remedy.AbortTarget("a", 0, start_offset=120), [state(8, start=140)], already_aborted_at="T1")
    assert (d.action, d.reason) == (Action.NOTHING, "already aborted at T1")


def test_explicit_form_checks_producer_epoch_and_coordinator_epoch():
    open_txn = [state(7, start=120, epoch=2, coord=3)]

    def decide(**kw):
        return remedy.decide_abort(remedy.AbortTarget("a", 0, **kw), open_txn)

    ok = decide(producer_id=7, producer_epoch=2, coordinator_epoch=3)
    assert (ok.action, ok.marker_coordinator_epoch) == (Action.ABORT, 3)
    wrong_epoch = decide(producer_id=7, producer_epoch=1, coordinator_epoch=3)
    assert wrong_epoch.action is Action.REFUSE and "expected --producer-epoch 2" in wrong_epoch.reason
    # Higher than the partition saw: it would record it and fence the real coordinator's later markers.
    higher = decide(producer_id=7, producer_epoch=2, coordinator_epoch=999)
    assert higher.action is Action.REFUSE and "expected --coordinator-epoch 3" in higher.reason
    lower = decide(producer_id=7, producer_epoch=2, coordinator_epoch=2)  # the broker would reject it
    assert lower.action is Action.REFUSE and "expected --coordinator-epoch 3" in lower.reason
    assert decide(producer_id=7, producer_epoch=2, coordinator_epoch=3, start_offset=99).action is Action.REFUSE
    fresh_txn = [state(7, start=0)]  # coordinator epoch -1: no marker seen yet; 0 (or -1) is what fits
    for given in (0, -1):
        fresh = remedy.decide_abort(remedy.AbortTarget("a", 0, producer_id=7, producer_epoch=0, coordinator_epoch=given), fresh_txn)
        assert (fresh.action, fresh.marker_coordinator_epoch) == (Action.ABORT, 0)
    assert remedy.decide_abort(remedy.AbortTarget("a", 0, producer_id=7, producer_epoch=0, coordinator_epoch=1), fresh_txn).action is Action.REFUSE


def test_explicit_form_unknown_producer_is_refused_known_without_open_txn_is_nothing():
    producers = [state(7, start=120, epoch=2, coord=3), state(9, start=-1)]

    def decide(pid, already=None):
        return remedy.decide_abort(remedy.AbortTarget("a", 0, producer_id=pid, producer_epoch=2, coordinator_epoch=3), producers, already)

    unknown = decide(8)
    assert unknown.action is Action.REFUSE and "producer 8 is unknown to a-0" in unknown.reason  # a typo is no success
    assert decide(9).action is Action.NOTHING  # known, nothing open
    # Its state expired after an earlier abort: the audit log still says it was done.
    repeat = decide(8, already="2026-01-01T00:00:00Z")
    assert repeat.action is Action.NOTHING and "already aborted" in repeat.reason


@pytest.mark.parametrize(
    "kw",
    [{}, {"producer_id": 1}, {"producer_id": 1, "producer_epoch": 0}, {"start_offset": -1}],
)
def test_incomplete_targets_are_usage_errors(kw):
    with pytest.raises(UsageError):
        remedy.validate_target(remedy.AbortTarget("a", 0, **kw))


def test_only_hanging_transactions_may_get_a_marker():
    open_txn = verdicts.OpenTransaction(A0, state(7, start=0))
    tracked = verdicts.Classification(open_txn, verdicts.Verdict.LONG_RUNNING, "", "app", desc("app", 7, [A0]))
    assert "kafkatxn fence 'app'" in remedy.coordinator_refusal(tracked)
    undetermined = verdicts.Classification(open_txn, verdicts.Verdict.UNDETERMINED, "coordinator 2: timed out")
    assert "timed out" in remedy.coordinator_refusal(undetermined)
    hanging_one = verdicts.Classification(open_txn, verdicts.Verdict.HANGING, verdicts.REASON_NOT_TRACKED)
    assert remedy.coordinator_refusal(hanging_one) is None


def test_already_aborted_matches_cluster_partition_and_offset_of_successful_aborts_only():
    target = remedy.AbortTarget("a", 0, start_offset=120)
    base = {"record": "result", "action": "abort", "cluster_id": "c1", "time": "T",
            "target": {"topic": "a", "partition": 0, "start_offset": 120}}
    assert remedy.already_aborted([base | {"outcome": "aborted"}], "c1", target) == "T"
    assert remedy.already_aborted([base | {"outcome": "failed"}], "c1", target) is None
    assert remedy.already_aborted([base | {"outcome": "aborted"}], "c2", target) is None
    assert remedy.already_aborted([base | {"outcome": "aborted"}], "c1", replace(target, start_offset=121)) is None


def test_verify_abort():
    gone = [state(7, start=-1)]
    assert remedy.verify_abort(7, 120, [state(7, start=120)], 120, 120, 130).outcome is Outcome.FAILED
    moved = remedy.verify_abort(7, 120, gone, 120, 130, 130)
    assert moved.outcome is Outcome.ABORTED and "120 to 130" in moved.detail
    held = remedy.verify_abort(7, 120, gone + [state(8, start=110)], 110, 110, 130)
    assert held.outcome is Outcome.ABORTED and "producer 8" in held.detail
    assert remedy.verify_abort(7, 120, None, 120, None, None).outcome is Outcome.UNKNOWN


# -- fence decisions ----------------------------------------------------------------------------


def test_fence_refuses_unknown_ids_unless_allowed_and_ids_it_could_not_describe():
    assert remedy.decide_fence("t", None, unknown=True, allow_unknown=False).action is Action.REFUSE
    assert remedy.decide_fence("t", None, unknown=True, allow_unknown=True).action is Action.FENCE
    assert remedy.decide_fence("t", None, unknown=False, allow_unknown=True, unanswered="timed out").action is Action.REFUSE
    assert remedy.decide_fence("t", desc("t", 7), unknown=False, allow_unknown=False).action is Action.FENCE


def test_verify_fence_needs_a_new_epoch_nothing_unfinished_and_nothing_left_open():
    before = desc("t", 7, [A0], "Ongoing", epoch=3)
    after = desc("t", 7, [], "Empty", epoch=5)
    assert remedy.verify_fence(before, after, []).outcome is Outcome.FENCED
    assert remedy.verify_fence(before, replace(after, producer_epoch=3), []).outcome is Outcome.FAILED
    assert remedy.verify_fence(before, replace(after, state="PrepareAbort"), []).outcome is Outcome.FAILED
    assert remedy.verify_fence(before, after, [A0]).outcome is Outcome.FAILED
    assert remedy.verify_fence(before, None, []).outcome is Outcome.UNKNOWN
    assert "epoch 3 -> producer 7 epoch 5" in remedy.verify_fence(before, after, []).detail


def test_fence_timeout_keeps_the_ids_own_within_the_broker_maximum():
    assert remedy.fence_timeout_ms(desc("t", 7, timeout_ms=30_000), 900_000) == 30_000
    assert remedy.fence_timeout_ms(desc("t", 7, timeout_ms=600_000), 10_000) == 10_000
    assert remedy.fence_timeout_ms(None, 10_000) == 10_000
    assert remedy.fence_timeout_ms(None, None) == remedy.DEFAULT_FENCE_TIMEOUT_MS


def test_pattern_must_match_the_whole_id():
    assert remedy.matching_ids(["app-1", "app-10", "myapp-1"], r"app-\d") == ["app-1"]
    # The library names the input; the CLI words it with its flag (kafkatxn.cli.app.FLAGS).
    with pytest.raises(InputError, match="bad pattern regex") as raised:
        remedy.matching_ids([], "(")
    assert raised.value.worded(FLAGS).startswith("bad --pattern regex '(': ")


def test_exit_code():
    assert remedy.exit_code([Outcome.ABORTED, Outcome.NOTHING_TO_ABORT]) == EXIT_OK
    assert remedy.exit_code([Outcome.ABORTED, Outcome.REFUSED]) == EXIT_UNKNOWN
    assert remedy.exit_code([Outcome.UNKNOWN]) == EXIT_UNKNOWN
    assert remedy.exit_code([], incomplete=True) == EXIT_UNKNOWN


# -- flow over a fake facade --------------------------------------------------------------------


def remedy_cluster(producers, offsets, listings=(), descriptions=(), audit_path=None, timeout_s=30):
    """Broker 1 leading every partition of ``offsets`` (tp -> [lso, hw]); markers and fences change
    it as a broker would. ``audit_lines_at_action`` records how many audit lines were on disk as
    each marker or fence went out."""
    model = KafkaModel(brokers=(1,), cluster_id="cid-1")
    for tp, (lso, hw) in offsets.items():
        model.add_partition(tp.topic, tp.partition, leader=1, lso=lso, hw=hw)
    model.add_transaction_log([1])  # the coordinator: broker 1
    model.producers.update({tp: list(states) for tp, states in producers.items()})
    model.listings = [(t.transactional_id, t.producer_id, t.state) for t in listings]
    model.transactions = {d.transactional_id: d for d in descriptions}
    fake = FakeCluster(model, timeout_s)
    fake.audit_lines_at_action = []

    def count_audit_lines():
        exists = audit_path is not None and audit_path.exists()
        fake.audit_lines_at_action.append(len(audit_path.read_text().splitlines()) if exists else 0)

    fake.before_action = count_audit_lines
    return fake


@pytest.fixture
def audit(tmp_path):
    return auditlog.AuditLog(tmp_path / "audit.jsonl")


def hanging_cluster(audit, timeout_s=30):
    """a-0: producer 7's transaction from offset 10 is hanging (its id 'gone' has another partition);
    a-1: producer 8's transaction from offset 0 is tracked by its coordinator ('busy')."""
    return remedy_cluster(
        producers={A0: [state(7, start=10, epoch=2, coord=-1)], A1: [state(8, start=0)]},
        offsets={A0: [10, 20], A1: [0, 4]},
        listings=[TransactionListing("gone", 7, "Empty", 1), TransactionListing("busy", 8, "Ongoing", 1)],
        descriptions=[desc("gone", 7, [], "Empty", epoch=2), desc("busy", 8, [A1])],
        audit_path=audit.path,
        timeout_s=timeout_s,
    )


def yes(rows):
    return True


def test_abort_writes_intent_then_marker_then_result_and_verifies(audit):
    fake = hanging_cluster(audit)
    result = remedy.abort(fake, [remedy.AbortTarget("a", 0, start_offset=10)], audit=audit, confirm=yes)
    (row,) = result.rows
    assert (row.outcome, row.lso_before, row.lso_after, row.high_watermark_after) == (Outcome.ABORTED, 10, 21, 21)
    assert row.transactional_id == "gone" and row.coordinator_state == "Empty"
    assert fake.called("write_abort_marker") == [("write_abort_marker", A0, 7, 2, 0, 1)]
    assert fake.audit_lines_at_action == [1]  # the intent was on disk before the marker went out
    intent, res = audit.records()
    assert (intent["record"], res["record"], res["outcome"]) == ("intent", "result", "aborted")
    assert intent["target"] == {"topic": "a", "partition": 0, "start_offset": 10, "producer_id": 7, "producer_epoch": 2}
    assert intent["cluster_id"] == "cid-1" and intent["state_before"]["last_stable_offset"] == 10
    assert res["state_after"]["last_stable_offset"] == 21
    assert result.exit_code == EXIT_OK


def test_abort_repeat_is_nothing_to_abort(audit):
    fake = hanging_cluster(audit)
    remedy.abort(fake, [remedy.AbortTarget("a", 0, start_offset=10)], audit=audit, confirm=yes)
    again = remedy.abort(fake, [remedy.AbortTarget("a", 0, start_offset=10)], audit=audit, confirm=yes)
    assert [r.outcome for r in again.rows] == [Outcome.NOTHING_TO_ABORT]
    assert again.exit_code == EXIT_OK and len(fake.called("write_abort_marker")) == 1


def test_dry_run_and_refusals_change_nothing_and_ask_nothing(audit):
    fake = hanging_cluster(audit)

    def must_not_ask(rows):
        raise AssertionError("asked for confirmation")

    dry = remedy.abort(fake, [remedy.AbortTarget("a", 0, start_offset=10)], audit=audit, confirm=must_not_ask, dry_run=True)
    assert [r.outcome for r in dry.rows] == [Outcome.WOULD_ABORT]
    stale = remedy.abort(fake, [remedy.AbortTarget("a", 0, start_offset=11)], audit=audit, confirm=must_not_ask)
    assert [r.outcome for r in stale.rows] == [Outcome.REFUSED] and stale.exit_code == EXIT_UNKNOWN
    tracked = remedy.abort(fake, [remedy.AbortTarget("a", 1, start_offset=0)], audit=audit, confirm=must_not_ask)
    assert [r.outcome for r in tracked.rows] == [Outcome.REFUSED] and "kafkatxn fence 'busy'" in tracked.rows[0].reason
    assert fake.called("write_abort_marker") == []
    # The dry run leaves no trace; each refusal is on the audit log as a result without an intent.
    records = audit.records()
    assert [(r["record"], r["outcome"], r["target"]["start_offset"]) for r in records] == [("result", "refused", 11), ("result", "refused", 0)]
    assert "kafkatxn fence 'busy'" in records[1]["detail"]
    assert fake.model.offsets[A0] == [10, 20]


def test_declining_changes_nothing(audit):
    fake = hanging_cluster(audit)
    with pytest.raises(remedy.Declined):
        remedy.abort(fake, [remedy.AbortTarget("a", 0, start_offset=10)], audit=audit, confirm=lambda rows: False)
    assert fake.called("write_abort_marker") == [] and audit.records() == []


def test_state_changing_after_the_plan_is_caught_before_the_marker(audit):
    fake = hanging_cluster(audit)

    def someone_else_aborts_it_meanwhile(rows):
        fake.model.close_transaction(A0, 7)
        return True

    result = remedy.abort(fake, [remedy.AbortTarget("a", 0, start_offset=10)], audit=audit, confirm=someone_else_aborts_it_meanwhile)
    assert [r.outcome for r in result.rows] == [Outcome.NOTHING_TO_ABORT]
    assert fake.called("write_abort_marker") == [] and audit.records() == []

    fake = hanging_cluster(audit)

    def producer_bumped_epoch(rows):
        fake.model.producers[A0] = [state(7, start=10, epoch=3)]
        return True

    result = remedy.abort(fake, [remedy.AbortTarget("a", 0, start_offset=10)], audit=audit, confirm=producer_bumped_epoch)
    assert [r.outcome for r in result.rows] == [Outcome.REFUSED] and fake.called("write_abort_marker") == []


def test_a_refused_marker_is_recorded_as_failed(audit):
    fake = hanging_cluster(audit)
    fake.model.marker_error = "TRANSACTION_COORDINATOR_FENCED"
    result = remedy.abort(fake, [remedy.AbortTarget("a", 0, start_offset=10)], audit=audit, confirm=yes)
    assert [r.outcome for r in result.rows] == [Outcome.FAILED] and "COORDINATOR_FENCED" in result.rows[0].reason
    assert [r.get("outcome") for r in audit.records()] == [None, "failed"]
    assert result.exit_code == EXIT_UNKNOWN


def test_abort_all_hanging_aborts_only_the_hanging_one(audit):
    fake = hanging_cluster(audit)
    result = remedy.abort(fake, all_hanging=True, max_transaction_timeout_ms=60_000, audit=audit, confirm=yes)
    assert [(r.topic, r.partition, r.outcome) for r in result.rows] == [("a", 0, Outcome.ABORTED)]
    assert [c[1] for c in fake.called("write_abort_marker")] == [A0]


def test_abort_all_hanging_in_one_topic_leaves_the_other_topics_alone(audit):
    b0 = TopicPartition("b", 0)
    fake = remedy_cluster(
        producers={A0: [state(7, start=10, epoch=2)], b0: [state(9, start=5, epoch=1)]},
        offsets={A0: [10, 20], b0: [5, 9]},
        listings=[TransactionListing("gone", 7, "Empty", 1), TransactionListing("left", 9, "Empty", 1)],
        descriptions=[desc("gone", 7, [], "Empty", epoch=2), desc("left", 9, [], "Empty", epoch=1)],
        audit_path=audit.path,
    )
    scoped = remedy.abort(fake, all_hanging=True, scope=remedy.HangingScope("b"), max_transaction_timeout_ms=60_000,
                          audit=audit, confirm=yes)
    assert [(r.topic, r.partition, r.outcome) for r in scoped.rows] == [("b", 0, Outcome.ABORTED)]
    assert [c[1] for c in fake.called("write_abort_marker")] == [b0]


def test_abort_all_hanging_takes_topic_and_partition_as_its_scope(capsys, cli_env, monkeypatch):
    _, path = cli_env
    seen = {}

    def fake_abort(cluster, targets=(), **kw):
        seen.update(kw)
        return remedy.RemedyResult([], [])

    monkeypatch.setattr(remedy, "abort", fake_abort)
    result = run_cli(capsys, "abort", "-b", "f:1", "--all-hanging", "-t", "orders", "-p", "3", "--yes", "--audit-log", path)
    assert result.code == 0, result.stderr
    assert seen["all_hanging"] and seen["scope"] == remedy.HangingScope("orders", 3)


def test_abort_needs_a_target_or_all_hanging(audit):
    with pytest.raises(UsageError):
        remedy.abort(hanging_cluster(audit), [], audit=audit, confirm=yes)


def fence_cluster(audit):
    return remedy_cluster(
        producers={A0: [state(7, start=10, epoch=3)]},
        offsets={A0: [10, 20]},
        listings=[TransactionListing("app-1", 7, "Ongoing", 1), TransactionListing("app-10", 9, "Empty", 1)],
        descriptions=[desc("app-1", 7, [A0], "Ongoing", epoch=3, timeout_ms=30_000), desc("app-10", 9, [], "Empty")],
        audit_path=audit.path,
    )


def test_fence_shows_old_and_new_epoch_aborts_the_open_transaction_and_audits(audit):
    fake = fence_cluster(audit)
    result = remedy.fence(fake, ["app-1"], audit=audit, confirm=yes)
    (row,) = result.rows
    assert (row.outcome, row.producer_epoch_before, row.producer_epoch_after) == (Outcome.FENCED, 3, 5)
    assert (row.state_before, row.state_after, row.partitions_before) == ("Ongoing", "Empty", ["a-0"])
    assert fake.called("fence") == [("fence", "app-1", 30_000)]  # the id's own timeout
    assert fake.audit_lines_at_action == [1]
    assert [r["record"] for r in audit.records()] == ["intent", "result"]
    assert fake.model.offsets[A0][0] == fake.model.offsets[A0][1]


def test_fence_refuses_unknown_ids_unless_allowed(audit):
    fake = fence_cluster(audit)
    refused = remedy.fence(fake, ["app-1", "nope"], audit=audit, confirm=yes)
    assert [(r.transactional_id, r.outcome) for r in refused.rows] == [("app-1", Outcome.FENCED), ("nope", Outcome.REFUSED)]
    assert refused.exit_code == EXIT_UNKNOWN
    allowed = remedy.fence(fake, ["nope"], allow_unknown=True, audit=audit, confirm=yes)
    assert [r.outcome for r in allowed.rows] == [Outcome.FENCED]


def test_fence_pattern_matches_whole_ids_and_dry_run_touches_nothing(audit):
    fake = fence_cluster(audit)
    result = remedy.fence(fake, pattern=r"app-\d", audit=audit, confirm=yes, dry_run=True)
    assert [(r.transactional_id, r.outcome) for r in result.rows] == [("app-1", Outcome.WOULD_FENCE)]
    assert fake.called("fence") == [] and audit.records() == []


# -- the driver: one order of steps, the audit log written by it alone ----------------------------


def trail(audit):
    """The audit log as (record, outcome) pairs, in order."""
    return [(r["record"], r.get("outcome")) for r in audit.records()]


@dataclass(frozen=True)
class _Row:
    name: str
    outcome: Outcome | None
    reason: str


@dataclass
class _Item:
    name: str
    decision: remedy.AbortDecision
    outcome: Outcome | None = None
    reason: str = ""

    def row(self):
        return _Row(self.name, self.outcome, self.reason)

    def audit_target(self):
        return {"name": self.name}

    def plan_state(self):
        return {"seen": self.name}


class Recording(driver.Remedy):
    """A new action is a plan and an act: this one records when each step runs, and how many audit
    lines were on disk then. ``recheck``/``act``/``verify`` answer what ``answers`` says per item."""

    name = "record"
    acting = Action.ABORT

    def __init__(self, audit, items, answers):
        self.audit, self.items, self.answers, self.steps = audit, items, answers, []

    def step(self, what, item=None):
        self.steps.append((what, item.name if item else None, len(self.audit.records())))

    def plan(self, cluster, audit):
        self.step("plan")
        return driver.Plan(self.items)

    def before_acting(self, cluster):
        self.step("before_acting")

    def recheck(self, cluster, item):
        self.step("recheck", item)
        return self.answers.get((item.name, "recheck"), driver.Recheck.go({"before": item.name}, plan={"send": 1}))

    def act(self, cluster, item):
        self.step("act", item)
        answer = self.answers.get((item.name, "act"), driver.Acted("note; "))
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def verify(self, cluster, item):
        self.step("verify", item)
        return remedy.Verification(Outcome.ABORTED, "verified"), {"after": item.name}


def recording(audit, answers=None, names=("x",), action=Action.ABORT):
    items = [_Item(n, remedy.AbortDecision(action, f"planned {n}")) for n in names]
    return Recording(audit, items, answers or {})


def test_driver_runs_plan_confirm_recheck_intent_act_verify_result_in_that_order(audit):
    rec = recording(audit)
    asked = []
    result = driver.run(rec, FakeCluster(KafkaModel()), audit=audit, confirm=lambda rows: asked.append(rows) or True)
    assert asked == [[_Row("x", None, "")]]  # the plan, before anything was rechecked
    # (step, item, audit lines on disk): the intent is written after the recheck and before the act.
    assert rec.steps == [("plan", None, 0), ("before_acting", None, 0), ("recheck", "x", 0), ("act", "x", 1), ("verify", "x", 1)]
    intent, res = audit.records()
    assert (intent["record"], intent["action"], intent["target"], intent["state_before"], intent["plan"]) == (
        "intent", "record", {"name": "x"}, {"before": "x"}, {"send": 1})
    assert (res["record"], res["action_id"], res["outcome"], res["state_after"], res["detail"]) == (
        "result", intent["action_id"], "aborted", {"after": "x"}, "note; verified")
    assert result.rows == [_Row("x", Outcome.ABORTED, "note; verified")] and result.acted


def test_driver_refused_at_recheck_writes_a_result_and_no_intent(audit):
    rec = recording(audit, {("x", "recheck"): driver.Recheck.refused("changed", {"now": 1})})
    result = driver.run(rec, FakeCluster(KafkaModel()), audit=audit, confirm=yes)
    assert [s[0] for s in rec.steps] == ["plan", "before_acting", "recheck"]  # never acted
    (res,) = audit.records()
    assert (res["record"], res["outcome"], res["state_after"], res["detail"]) == ("result", "refused", {"now": 1}, "changed")
    assert result.rows == [_Row("x", Outcome.REFUSED, "changed")] and result.exit_code == EXIT_UNKNOWN


def test_driver_nothing_left_at_recheck_writes_nothing(audit):
    rec = recording(audit, {("x", "recheck"): driver.Recheck.nothing(Outcome.NOTHING_TO_ABORT, "closed meanwhile")})
    result = driver.run(rec, FakeCluster(KafkaModel()), audit=audit, confirm=yes)
    assert audit.records() == [] and result.rows == [_Row("x", Outcome.NOTHING_TO_ABORT, "closed meanwhile")]


def test_driver_failed_act_is_a_result_after_the_intent_without_verifying(audit):
    rec = recording(audit, {("x", "act"): driver.Acted.ending(Outcome.FAILED, "the broker said no", {"as": "before"})})
    result = driver.run(rec, FakeCluster(KafkaModel()), audit=audit, confirm=yes)
    assert "verify" not in [s[0] for s in rec.steps]
    assert trail(audit) == [("intent", None), ("result", "failed")]
    assert audit.records()[1]["state_after"] == {"as": "before"} and result.exit_code == EXIT_UNKNOWN


def test_driver_act_without_an_answer_is_unknown_on_record_and_a_bug_still_raises(audit):
    from kafkatxn.errors import DeadlineExceeded

    rec = recording(audit, {("x", "act"): DeadlineExceeded("timed out after 30s"), ("y", "act"): ValueError("bug")}, names=("x", "y"))
    with pytest.raises(ValueError):
        driver.run(rec, FakeCluster(KafkaModel()), audit=audit, confirm=yes)
    assert trail(audit) == [("intent", None), ("result", "unknown"), ("intent", None), ("result", "unknown")]
    assert audit.records()[1]["detail"] == "record got no answer: timed out after 30s"
    assert rec.items[0].outcome is Outcome.UNKNOWN


def test_driver_plan_refusals_are_recorded_dry_runs_and_declines_record_nothing(audit):
    refused = recording(audit, action=Action.REFUSE)
    out = driver.run(refused, FakeCluster(KafkaModel()), audit=audit, confirm=lambda rows: pytest.fail("asked"))
    assert [s[0] for s in refused.steps] == ["plan"] and out.rows == [_Row("x", None, "")]
    (res,) = audit.records()
    assert (res["record"], res["outcome"], res["state_after"], res["detail"]) == ("result", "refused", {"seen": "x"}, "planned x")
    dry = recording(audit)
    driver.run(dry, FakeCluster(KafkaModel()), audit=audit, confirm=lambda rows: pytest.fail("asked"), dry_run=True)
    with pytest.raises(remedy.Declined):
        driver.run(recording(audit), FakeCluster(KafkaModel()), audit=audit, confirm=lambda rows: False)
    assert len(audit.records()) == 1 and [s[0] for s in dry.steps] == ["plan"]


# The same orders through abort and fence, over the fake cluster.


def test_abort_done_refused_at_recheck_failed_and_unknown_leave_these_audit_trails(audit, tmp_path):
    def run_abort(fake, log, confirm=yes):
        return remedy.abort(fake, [remedy.AbortTarget("a", 0, start_offset=10)], audit=log, confirm=confirm)

    done = run_abort(hanging_cluster(audit), audit)
    assert [r.outcome for r in done.rows] == [Outcome.ABORTED] and trail(audit) == [("intent", None), ("result", "aborted")]

    log = auditlog.AuditLog(tmp_path / "refused.jsonl")
    fake = hanging_cluster(log)

    def bump(rows):
        fake.model.producers[A0] = [state(7, start=10, epoch=3)]
        return True

    run_abort(fake, log, bump)
    assert trail(log) == [("result", "refused")] and fake.called("write_abort_marker") == []
    assert log.records()[0]["state_after"]["producers"][0]["producer_epoch"] == 3  # what the recheck saw

    log = auditlog.AuditLog(tmp_path / "failed.jsonl")
    fake = hanging_cluster(log)
    fake.model.marker_error = "INVALID_PRODUCER_EPOCH"
    failed = run_abort(fake, log)
    assert trail(log) == [("intent", None), ("result", "failed")] and len(fake.called("write_abort_marker")) == 1
    intent, res = log.records()
    assert res["state_after"] == intent["state_before"] and "refused the marker: INVALID_PRODUCER_EPOCH" in failed.rows[0].reason

    log = auditlog.AuditLog(tmp_path / "unknown.jsonl")
    fake = hanging_cluster(log)
    fake.model.timeouts[1] = {"WriteTxnMarkers"}  # the leader takes the marker and never answers
    unknown = run_abort(fake, log)
    # Broker 1 used up its share of the deadline: silent for the rest of the command, so it is
    # neither rechecked nor sent a second marker; what happened stays unknown, and says so.
    assert trail(log) == [("intent", None), ("result", "unknown")] and len(fake.called("write_abort_marker")) == 1
    (row,) = unknown.rows
    assert row.outcome is Outcome.UNKNOWN and row.reason.startswith("broker 1 did not take the marker (no answer: ")
    assert "no leader of a-0 could be asked: " in row.reason and "timed out" in row.reason
    assert log.records()[1]["detail"] == row.reason and log.records()[1]["state_after"] is None


def test_a_leadership_error_on_the_marker_is_retried_at_the_new_leader_once(audit):
    fake = hanging_cluster(audit)
    fake.model.partitions[A0] = fake.model.partitions[A0]._replace(replicas=(1, 2), isr=(1, 2))
    fake.model.brokers = (1, 2)
    moved = []

    def leadership_moves_as_the_first_marker_goes_out():
        if not moved:
            moved.append(A0)
            fake.model.partition_errors[(1, A0)] = ["NOT_LEADER_OR_FOLLOWER"]  # broker 1's answer to the marker
            fake.model.partitions[A0] = fake.model.partitions[A0]._replace(leader=2)

    fake.before_action = leadership_moves_as_the_first_marker_goes_out
    result = remedy.abort(fake, [remedy.AbortTarget("a", 0, start_offset=10)], audit=audit, confirm=yes)
    (row,) = result.rows
    assert row.outcome is Outcome.ABORTED, row.reason
    assert [c[-1] for c in fake.called("write_abort_marker")] == [1, 2]
    assert row.reason.startswith("broker 1 did not take the marker (NOT_LEADER_OR_FOLLOWER); retried on broker 2, its new leader; ")
    assert trail(audit) == [("intent", None), ("result", "aborted")] and row.leader_id == 2


def leader_moving_to_broker_2(fake, refusals_at_2):
    """Broker 1 leads a-0 until the first marker goes out; then the metadata names broker 2, which
    refuses the next ``refusals_at_2`` markers as not the leader (yet): metadata runs ahead of the
    broker it names, and a follower answers DescribeProducers all the same (Partition.activeProducerState
    reads the local log, leader or not)."""
    fake.model.partitions[A0] = fake.model.partitions[A0]._replace(replicas=(1, 2), isr=(1, 2))
    fake.model.brokers = (1, 2)
    markers = []

    def as_each_marker_goes_out():
        markers.append(A0)
        if len(markers) == 1:
            fake.model.partition_errors[(1, A0)] = ["NOT_LEADER_OR_FOLLOWER"]
            fake.model.partitions[A0] = fake.model.partitions[A0]._replace(leader=2)
        elif len(markers) - 1 <= refusals_at_2:
            fake.model.partition_errors[(2, A0)] = ["NOT_LEADER_OR_FOLLOWER"]  # taken by this marker only

    fake.before_action = as_each_marker_goes_out


def test_a_new_leader_not_leading_yet_is_asked_again_until_it_takes_the_marker(audit):
    """CI (stop 59): the leader was killed after the intent; the metadata named broker 3, which
    answered DescribeProducers and refused the marker (NOT_LEADER_OR_FOLLOWER) — it was not leading
    yet — and the abort, retried once only, failed."""
    fake = hanging_cluster(audit)
    leader_moving_to_broker_2(fake, refusals_at_2=2)
    result = remedy.abort(fake, [remedy.AbortTarget("a", 0, start_offset=10)], audit=audit, confirm=yes)
    (row,) = result.rows
    assert row.outcome is Outcome.ABORTED, row.reason
    assert [c[-1] for c in fake.called("write_abort_marker")] == [1, 2, 2, 2]
    assert row.reason.startswith(
        "broker 1 did not take the marker (NOT_LEADER_OR_FOLLOWER); retried on broker 2, its new leader; "
        "broker 2 did not take the marker (NOT_LEADER_OR_FOLLOWER) 2 times; retried on broker 2, still its leader; "
    ), row.reason
    assert trail(audit) == [("intent", None), ("result", "aborted")] and row.leader_id == 2
    assert fake.model.offsets[A0] == [21, 21]  # the marker written once, past the old high watermark


def test_a_leader_that_never_takes_the_marker_fails_within_the_share_of_the_deadline(audit):
    fake = hanging_cluster(audit, timeout_s=1.5)
    leader_moving_to_broker_2(fake, refusals_at_2=1000)
    started = time.monotonic()
    result = remedy.abort(fake, [remedy.AbortTarget("a", 0, start_offset=10)], audit=audit, confirm=yes)
    elapsed = time.monotonic() - started
    (row,) = result.rows
    assert row.outcome is Outcome.FAILED and row.reason.endswith("the leader refused the marker: NOT_LEADER_OR_FOLLOWER")
    assert elapsed < 1.5 and len(fake.called("write_abort_marker")) >= 2
    assert trail(audit) == [("intent", None), ("result", "failed")]
    assert fake.model.offsets[A0] == [10, 20]  # nothing was written


def test_the_kafka_layer_waits_for_a_leader_within_its_share_of_the_deadline():
    model = KafkaModel(brokers=(1,))
    model.add_partition("a", 0, leader=-1, replicas=(1,))
    model.producers[A0] = open_txn = [state(7, start=10)]
    model.leader_moves[A0] = 1  # elected by the second metadata request
    fake = FakeCluster(model, timeout_s=3)
    fake.metadata()
    assert fake.leader_and_producers(A0) == (1, open_txn, "")
    model.partitions[A0] = model.partitions[A0]._replace(leader=-1)
    fake = FakeCluster(model, timeout_s=1.5)
    started = time.monotonic()
    assert fake.leader_and_producers(A0) == (None, None, "a-0 has no leader")
    assert 0.4 < time.monotonic() - started < 1.5 * 2 / 3 + 0.2  # a share of the deadline, the rest kept to verify


def test_the_leader_named_before_a_marker_is_the_broker_that_reported_the_producers():
    """CI: the leader died after the intent; the metadata still named it, DescribeProducers' own retry
    was answered by the new leader, and the marker went to the dead one again ("still its leader")."""
    model = KafkaModel(brokers=(1, 2))
    model.add_partition("a", 0, leader=2, replicas=(1, 2))
    model.producers[A0] = open_txn = [state(7, start=10)]
    model.down.add(2)
    model.leader_moves[A0] = 1  # the second metadata request names the new leader
    fake = FakeCluster(model, timeout_s=3)
    assert fake.leader_and_producers(A0) == (1, open_txn, "")


def test_fence_failed_without_an_answer_is_unknown_after_its_intent(audit, monkeypatch):
    from kafkatxn.errors import AuthenticationError

    fake = fence_cluster(audit)

    def refused(tid, timeout_ms):
        raise AuthenticationError("not authorized to use transactional id 'app-1'")

    monkeypatch.setattr(fake, "fence_transactional_id", refused)
    result = remedy.fence(fake, ["app-1"], audit=audit, confirm=yes)
    assert trail(audit) == [("intent", None), ("result", "unknown")]
    assert result.rows[0].reason == "InitProducerId failed: not authorized to use transactional id 'app-1'"


# -- the commands -------------------------------------------------------------------------------


@pytest.fixture
def cli_env(monkeypatch, tmp_path):
    path = tmp_path / "audit.jsonl"
    fake = hanging_cluster(auditlog.AuditLog(path))
    monkeypatch.setattr("kafkatxn.kafka.Cluster", lambda config: fake)
    return fake, path


def test_abort_without_a_terminal_or_yes_refuses_with_exit_64(capsys, cli_env):
    fake, path = cli_env
    result = run_cli(capsys, "abort", "-b", "fake:9092", "-t", "a", "-p", "0", "--start-offset", "10", "--audit-log", path)
    assert result.code == 64
    assert "--yes" in result.stderr and "Plan:" in result.stderr
    assert fake.called("write_abort_marker") == []


def test_abort_with_yes_acts_and_prints_rows(capsys, cli_env):
    fake, path = cli_env
    result = run_cli(capsys, "abort", "-b", "fake:9092", "-t", "a", "-p", "0", "--start-offset", "10", "--yes",
                     "--audit-log", path, "-o", "json")
    assert result.code == 0, result.stderr
    (row,) = json.loads(result.stdout)
    assert (row["outcome"], row["lso_after"]) == ("aborted", 21)
    assert len(fake.called("write_abort_marker")) == 1


def test_abort_usage_errors(capsys, cli_env):
    _, path = cli_env
    assert run_cli(capsys, "abort", "-b", "f:1", "-t", "a", "--audit-log", path).code == 64
    assert run_cli(capsys, "abort", "-b", "f:1", "--all-hanging", "-t", "a", "--start-offset", "3", "--audit-log", path).code == 64
    assert run_cli(capsys, "abort", "-b", "f:1", "--all-hanging", "-p", "0", "--audit-log", path).code == 64  # which topic?
    assert run_cli(capsys, "abort", "-b", "f:1", "-t", "a", "-p", "0", "--producer-id", "7", "--audit-log", path).code == 64
    assert run_cli(capsys, "fence", "-b", "f:1", "--pattern", "(", "--audit-log", path).code == 64
    assert run_cli(capsys, "fence", "-b", "f:1", "--audit-log", path).code == 64


def test_next_run_warns_once_about_an_intent_without_result(capsys, cli_env):
    fake, path = cli_env
    stale = auditlog.AuditLog(path, cluster_id="cid-1")
    stale.intent("abort", {"topic": "a", "partition": 0, "start_offset": 10}, None)
    lines = path.read_text().splitlines()
    record = json.loads(lines[0])
    record["pid"] = 2**22 + 12345  # a process that is gone
    path.write_text(json.dumps(record) + "\n")
    first = run_cli(capsys, "abort", "-b", "f:1", "-t", "a", "-p", "0", "--start-offset", "10", "--dry-run", "--audit-log", path)
    warnings = [line for line in first.stderr.splitlines() if "never recorded a result" in line]
    assert len(warnings) == 1 and "a-0 at offset 10" in warnings[0]
    acting = run_cli(capsys, "abort", "-b", "f:1", "-t", "a", "-p", "0", "--start-offset", "10", "--yes", "--audit-log", path)
    assert "never recorded a result" in acting.stderr
    assert acting.code == 0
    later = run_cli(capsys, "abort", "-b", "f:1", "-t", "a", "-p", "0", "--start-offset", "10", "--yes", "--audit-log", path)
    assert "never recorded a result" not in later.stderr  # closed as interrupted by the acting run


class _Terminal:
    """stdin of an interactive session: a terminal with the user's answer typed in."""

    def __init__(self, answer):
        self._lines = [answer + "\n"]

    def isatty(self):
        return True

    def readline(self, *args):
        return self._lines.pop(0) if self._lines else ""

    def read(self, *args):
        return self.readline()


@pytest.mark.parametrize("answer, code, markers", [("n", 0, 0), ("y", 0, 1)])  # "n": nothing was changed, no error
def test_a_terminal_user_is_asked_and_only_yes_acts(capsys, cli_env, monkeypatch, answer, code, markers):
    fake, path = cli_env
    monkeypatch.setattr("sys.stdin", _Terminal(answer))
    result = run_cli(capsys, "abort", "-b", "f:1", "-t", "a", "-p", "0", "--start-offset", "10", "--audit-log", path)
    assert result.code == code, result.stderr
    assert "Write these ABORT markers?" in result.stderr
    assert ("nothing was changed" in result.stderr) == (answer == "n")
    assert len(fake.called("write_abort_marker")) == markers
    assert len(auditlog.read_records(path)) == 2 * markers


def test_ids_can_be_named_as_kafka_transactions_sh_names_them(capsys, cli_env, monkeypatch):
    """Runbooks written for kafka-transactions.sh (--transactional-id, force-terminate's
    --transactionalId) work unchanged; ids given both ways are fenced once each, in order."""
    from kafkatxn import transaction_listing

    _, path = cli_env
    fenced, described = [], []
    monkeypatch.setattr(remedy, "fence", lambda cluster, ids, **kw: fenced.append(list(ids)) or remedy.RemedyResult([], []))
    monkeypatch.setattr(transaction_listing, "describe_transactions",
                        lambda cluster, ids: described.append(list(ids)) or transaction_listing.TransactionsResult([]))
    result = run_cli(capsys, "fence", "-b", "f:1", "a", "--transactional-id", "b", "--transactionalId", "a", "--yes", "--audit-log", path)
    assert result.code == 0, result.stderr
    assert run_cli(capsys, "transactions", "describe", "-b", "f:1", "--transactional-id", "c").code == 0
    assert fenced == [["a", "b"]] and described == [["c"]]
    assert run_cli(capsys, "transactions", "describe", "-b", "f:1").code == 64


def test_the_time_a_person_reads_the_plan_is_not_the_networks_and_yes_gets_no_second_deadline(audit, monkeypatch):
    """The deadline is for the network: a slow confirmation is added back to it (and what the command
    learned of the cluster is forgotten, since it may have changed meanwhile); an instant one (--yes)
    leaves the command one --timeout in all, not a second one after the plan."""
    import time as time_module

    clock = [time_module.monotonic()]
    monkeypatch.setattr("kafkatxn.remedy.driver.time.monotonic", lambda: clock[0])  # the time module's, for all
    fake = hanging_cluster(audit)
    before = fake.deadline
    fake.silent[9] = object()
    clock[0] += 20  # the plan took 20 s of the network's time
    remedy.abort(fake, [remedy.AbortTarget("a", 0, start_offset=10)], audit=audit, confirm=yes)
    assert fake.deadline == before and 9 in fake.silent  # --yes: still the one deadline, and what it learned

    fake = hanging_cluster(audit)

    def slow_reader(rows):
        clock[0] += 120  # two minutes reading the plan
        return True

    before = fake.deadline
    fake.silent[9] = object()
    remedy.abort(fake, [remedy.AbortTarget("a", 0, start_offset=10)], audit=audit, confirm=slow_reader)
    assert fake.deadline - before == pytest.approx(120) and 9 not in fake.silent
