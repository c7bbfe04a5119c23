"""Abort a hanging transaction: an ABORT marker (WriteTxnMarkers) on its partition.

As ``kafka-transactions.sh abort`` does, with the coordinator epoch DescribeProducers reports, sent
to the partition's leader. Only transactions whose coordinator does not track the partition
(hanging) get one: a marker written behind a live coordinator's back would lose the data of a
transaction its producer later commits. The steps and the audit log are the driver's
(:mod:`kafkatxn.remedy.driver`); the decisions are :mod:`kafkatxn.remedy.decide`'s.
"""

from __future__ import annotations

import time

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar, Sequence

from kafkatxn import facts_scan, gather, untracked, verdicts
from kafkatxn.auditlog import AuditLog
from kafkatxn.errors import AuthenticationError, InputError, KafkatxnError
from kafkatxn.model import Missing, Part, ProducerState, TopicPartition
from kafkatxn.plain import to_plain
from kafkatxn.remedy.decide import (
    AbortDecision, AbortTarget, Action, Outcome, Verification, already_aborted, coordinator_refusal, decide_abort,
    decide_abort_again, marker_coordinator_epoch, verify_abort,
)
from kafkatxn.remedy.driver import Acted, Confirm, Plan, Recheck, Remedy, RemedyResult, run

if TYPE_CHECKING:  # capability modules are handed the facade; they do not import it
    from kafkatxn.kafka import Cluster


@dataclass(frozen=True)
class AbortRow:
    TABLE_KEEPS: ClassVar[tuple[str, ...]] = ("start_offset",)  # what names the transaction: kept in narrow tables

    topic: str
    partition: int
    start_offset: int | None
    producer_id: int | None
    producer_epoch: int | None
    coordinator_epoch: int | None  # what the marker carries
    leader_id: int | None
    transactional_id: str | None
    coordinator_state: str | None
    outcome: Outcome
    reason: str
    lso_before: int | None
    high_watermark_before: int | None
    lso_after: int | None = None
    high_watermark_after: int | None = None


_PLANNED = {
    Action.ABORT: Outcome.WOULD_ABORT, Action.NOTHING: Outcome.NOTHING_TO_ABORT, Action.REFUSE: Outcome.REFUSED,
    Action.RESTORE: Outcome.WOULD_RESTORE,
}


@dataclass
class _AbortItem:
    target: AbortTarget
    decision: AbortDecision
    leader: int | None = None
    classification: verdicts.Classification | None = None
    lso_before: int | None = None
    hw_before: int | None = None
    outcome: Outcome | None = None
    reason: str = ""
    lso_after: int | None = None
    hw_after: int | None = None
    state_before: dict[str, Any] | None = None  # what the intent recorded
    retried: str = ""  # what happened before the marker that counted, for the row and the audit record
    nothing: Outcome = Outcome.NOTHING_TO_ABORT  # the plan's outcome when nothing is open there

    def row(self) -> AbortRow:
        p = self.decision.producer
        c = self.classification
        return AbortRow(
            topic=self.target.topic,
            partition=self.target.partition,
            start_offset=p.current_txn_start_offset if p else self.target.start_offset,
            producer_id=p.producer_id if p else self.target.producer_id,
            producer_epoch=p.producer_epoch if p else self.target.producer_epoch,
            coordinator_epoch=self.decision.marker_coordinator_epoch,
            leader_id=self.leader,
            transactional_id=c.transactional_id if c else None,
            coordinator_state=c.description.state if c and c.description else None,
            outcome=self.outcome or (self.nothing if self.decision.action is Action.NOTHING else _PLANNED[self.decision.action]),
            reason=self.reason or self.decision.reason,
            lso_before=self.lso_before,
            high_watermark_before=self.hw_before,
            lso_after=self.lso_after,
            high_watermark_after=self.hw_after,
        )

    def audit_target(self) -> dict[str, Any]:
        p = self.decision.producer
        return {
            "topic": self.target.topic,
            "partition": self.target.partition,
            "start_offset": p.current_txn_start_offset if p else self.target.start_offset,
            "producer_id": p.producer_id if p else self.target.producer_id,
            "producer_epoch": p.producer_epoch if p else self.target.producer_epoch,
        }

    def plan_state(self) -> Any:
        return None


@dataclass(frozen=True)
class HangingScope:
    """Where ``abort --all-hanging`` looks: the whole cluster, one topic, or one partition of it."""

    topic: str | None = None
    partition: int | None = None


def _describe_partitions(cluster: Cluster, tps: Sequence[TopicPartition]) -> tuple[dict[TopicPartition, list[ProducerState]], list[Missing]]:
    described = cluster.describe_producers(sorted(set(tps)))
    return described.value, list(described.missing)


def _offsets(cluster: Cluster, tps: Sequence[TopicPartition]) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int], list[Missing]]:
    if not tps:
        return {}, {}, []
    pairs = cluster.stable_and_high_offsets(tps)  # one round trip per leader, LSO <= HW in each pair
    return ({tp: lso for tp, (lso, _hw) in pairs.value.items()}, {tp: hw for tp, (_lso, hw) in pairs.value.items()},
            [m.within("offsets") for m in pairs.missing])


def _classify(cluster: Cluster, items: Sequence[_AbortItem], operator_decides: bool = False) -> None:
    """Ask the coordinators about each item's transaction (a coordinator may have moved or come back)
    and, where that says hanging, what the coordinator's log says (a lost COMMIT marker?).
    ``operator_decides``: a hanging one whose log cannot tell how it ended stays hanging, on the
    operator's word (``--allow-unknown-outcome``), and its reason says so for the audit log."""
    view, _missing = gather.coordinator_view(cluster, {i.decision.producer.producer_id for i in items})
    found = [verdicts.classify(verdicts.OpenTransaction(i.target.tp, i.decision.producer), view) for i in items]
    for item, before, c in zip(items, found, gather.settle_by_transaction_log(cluster, found, [])):
        if operator_decides and before.verdict is verdicts.Verdict.HANGING and c.verdict is verdicts.Verdict.UNDETERMINED:
            c = replace(before, reason=f"{c.reason}; aborted on the operator's decision (--allow-unknown-outcome)")
        item.classification = c


class Abort(Remedy):
    name = "abort"
    acting = Action.ABORT
    commit = False  # the marker's result: ABORT here, COMMIT for restoring a lost one (kafkatxn.remedy.restore)
    done = Outcome.ABORTED
    nothing_to_do = Outcome.NOTHING_TO_ABORT

    def refusal(self, c: verdicts.Classification) -> str | None:
        """Why the coordinator side forbids this marker (None: go)."""
        return coordinator_refusal(c)

    def __init__(self, targets: Sequence[AbortTarget], all_hanging: bool, scope: HangingScope | None,
                 max_transaction_timeout_ms: int | None):
        self.targets, self.all_hanging = targets, all_hanging
        self.allow_unknown_outcome = False  # the operator decides where the coordinator's log cannot tell
        self.scope, self.max_transaction_timeout_ms = scope or HangingScope(), max_transaction_timeout_ms

    # -- plan ------------------------------------------------------------------------------------

    def plan(self, cluster: Cluster, audit: AuditLog) -> Plan:
        # Before Kafka 3.0 no coordinator can be asked: every item would be refused, so nothing is planned.
        cluster.require_transaction_apis()
        plan = self._plan_all_hanging(cluster) if self.all_hanging else self._plan_targets(cluster, audit)
        actionable = [i for i in plan.items if i.decision.action is self.acting]
        lso, hw, missing = _offsets(cluster, sorted({i.target.tp for i in actionable}))
        if self.all_hanging:  # as hanging names them: the offsets its rows show that did not answer
            plan.missing.extend(missing)
        for i in actionable:
            i.lso_before, i.hw_before = lso.get(i.target.tp), hw.get(i.target.tp)
        return plan

    def _plan_targets(self, cluster: Cluster, audit: AuditLog) -> Plan:
        leaders = {}
        for t in self.targets:
            (info,) = cluster.select_partitions(topics=[t.topic], partition=t.partition)  # unknown ones raise
            leaders[t.tp] = info.leader
        states, missing = _describe_partitions(cluster, list(leaders))
        records = audit.records()
        items = []
        for t in self.targets:
            if t.tp not in states:
                why = "; ".join(m.reason for m in missing if m.subject == t.tp) or "no answer"
                items.append(_AbortItem(t, AbortDecision(Action.REFUSE, f"could not describe producers of {t.tp}: {why}"), leaders[t.tp]))
                continue
            done_at = already_aborted(records, audit.cluster_id, t, self.name, self.done)
            items.append(_AbortItem(t, decide_abort(t, states[t.tp], done_at, self.done.value), leaders[t.tp], nothing=self.nothing_to_do))
        to_check = [i for i in items if i.decision.action is Action.ABORT]
        if to_check:
            _classify(cluster, to_check, self.allow_unknown_outcome)
            for item in to_check:
                refusal = self.refusal(item.classification)
                if refusal is None:
                    # The one rule hanging applies: past its deadline (its producer's own timeout,
                    # or the maximum) since its last write, or not hanging yet.
                    waiting = self._not_due(cluster, item.classification)
                    if waiting is not None:
                        item.decision = replace(item.decision, action=Action.NOTHING, reason=waiting)
                        item.nothing = Outcome.NOT_HANGING_YET
                        continue
                if refusal:
                    item.decision = replace(item.decision, action=Action.REFUSE, reason=refusal)
                else:
                    item.decision = replace(item.decision, action=self.acting, reason=f"{item.classification.verdict.value}: {item.classification.reason}")
        return Plan(items)

    def _not_due(self, cluster: Cluster, c: verdicts.Classification) -> str | None:
        """Why ``c`` may not be written a marker yet (None: past its deadline). The brokers'
        maximum is read only where its coordinator does not report its producer's own timeout."""
        if self.max_transaction_timeout_ms is None and verdicts.own_timeout_ms(c) is None:
            self.max_transaction_timeout_ms = gather.cluster_max_transaction_timeout(cluster)[0]
        max_ms = self.max_transaction_timeout_ms
        if verdicts.is_due(c, int(time.time() * 1000), max_ms):
            return None
        return not_hanging_yet(c, max_ms)

    def _plan_all_hanging(self, cluster: Cluster) -> Plan:
        scope = self.scope
        # The fact layer's scan, as hanging lists it: what this acts on is what hanging lists.
        found = facts_scan.take_scan(
            cluster, topics=[scope.topic] if scope.topic is not None else None, partition=scope.partition,
            max_transaction_timeout_ms=self.max_transaction_timeout_ms,
        )
        leaders = cluster.metadata().leaders
        items = []
        self.max_transaction_timeout_ms = found.max_transaction_timeout_ms  # the recheck dates by the same
        for c in found.untracked():
            p = c.open_txn.producer
            target = AbortTarget(c.open_txn.tp.topic, c.open_txn.tp.partition, start_offset=p.current_txn_start_offset)
            items.append(_AbortItem(target, AbortDecision(Action.NOTHING, not_hanging_yet(c, found.max_transaction_timeout_ms), p),
                                    leaders.get(c.open_txn.tp), c, nothing=Outcome.NOT_HANGING_YET))
        for c in found.due():
            if c.verdict is verdicts.Verdict.LONG_RUNNING:
                continue  # not hanging: its coordinator completes it (see `kafkatxn hanging`)
            p = c.open_txn.producer
            target = AbortTarget(c.open_txn.tp.topic, c.open_txn.tp.partition, start_offset=p.current_txn_start_offset)
            if c.verdict is not verdicts.Verdict.HANGING:
                # Never a marker on a guess, nor on a commit: listed, refused and audited as such.
                decision = AbortDecision(Action.REFUSE, coordinator_refusal(c) or c.reason, p)
            else:
                decision = AbortDecision(Action.ABORT, f"hanging: {c.reason}", p, marker_coordinator_epoch(p.coordinator_epoch))
            items.append(_AbortItem(target, decision, leaders.get(c.open_txn.tp), c))
        return Plan(items, found.missing)

    # -- recheck, act, verify --------------------------------------------------------------------

    def recheck(self, cluster: Cluster, item: _AbortItem) -> Recheck:
        """The same transaction must still be open (the plan may be minutes old), asked of the
        partition's current leader (leaders move, brokers die, while people read plans), and still
        hanging as its coordinators see it."""
        tp = item.target.tp
        leader, producers, why = cluster.leader_and_producers(tp)
        if producers is None:
            return Recheck.refused(f"could not re-check {tp} before acting: {why}")
        item.leader = leader
        again = decide_abort_again(tp, item.decision, producers)
        if again.action is Action.NOTHING:
            return Recheck.nothing(self.nothing_to_do, "closed since the plan was made")
        if again.action is Action.REFUSE:
            refusal: str | None = again.reason
        else:
            item.decision = replace(item.decision, producer=again.producer)
            self._classify_settled(cluster, item)
            refusal = self.refusal(item.classification)
            if refusal is None:  # written to since the plan, it may be short of its deadline again
                refusal = self._not_due(cluster, item.classification)
        if refusal:
            return Recheck.refused(f"changed since the plan was made: {refusal}", {"producers": to_plain(producers)})
        c = item.classification
        item.state_before = {
            "producer": to_plain(again.producer),
            "last_stable_offset": item.lso_before,
            "high_watermark": item.hw_before,
            "transactional_id": c.transactional_id if c else None,
            "coordinator_state": item.row().coordinator_state,
            "hanging_reason": c.reason if c else None,
        }
        marker = {"leader_id": item.leader, "coordinator_epoch": item.decision.marker_coordinator_epoch,
                  "result": "COMMIT" if self.commit else "ABORT"}
        return Recheck.go(item.state_before, plan={"write_txn_markers": marker})

    def _classify_settled(self, cluster: Cluster, item: _AbortItem) -> None:
        """:func:`_classify`, asked again while the coordinators' side is undetermined for a reason
        that passes: the recheck comes right after a confirmation, often right after a broker died,
        and its coordinators take their ``__transaction_state`` partitions over (and load them)
        after the partition's leader has moved. Waited out like that leader
        (:meth:`~kafkatxn.kafka.markers.MarkersApi.pause_while_facts_settle`); still undetermined
        then, it is refused. A refusal by an ACL, or brokers too old to ask, do not pass: not waited."""
        while True:
            _classify(cluster, [item], self.allow_unknown_outcome)
            c = item.classification
            if c is None or c.verdict is not verdicts.Verdict.UNDETERMINED or not may_settle(c.missing):
                return
            if not cluster.pause_while_facts_settle():
                return
            cluster.metadata(refresh=True)

    def act(self, cluster: Cluster, item: _AbortItem) -> Acted:
        """The marker, to the leader. Where the leader died or moved while it was on its way (it may
        or may not have landed), or the broker the metadata names is not the leader yet (metadata
        runs ahead of the broker it names, and followers answer DescribeProducers too), the
        partition's leader is asked again and the marker written there only if the transaction is
        still open: the first retry at once, later ones after a pause each, while leaders may be waited for
        (:meth:`~kafkatxn.kafka.markers.MarkersApi.pause_while_facts_settle`)."""
        from kafkatxn.kafka.facade import LEADERSHIP_ERRORS  # the Kafka layer's one list; loaded only to act

        tp, planned = item.target.tp, item.decision.producer
        tries = MarkerRetries()
        while True:
            try:
                error = cluster.write_abort_marker(
                    tp, planned.producer_id, planned.producer_epoch, item.decision.marker_coordinator_epoch, item.leader,
                    commit=self.commit,
                )
            except KafkatxnError as exc:  # a leader that did not answer is looked for again below
                if isinstance(exc, AuthenticationError) or not tries.may_go_on(cluster):
                    raise
                failure = f"no answer: {exc}"
            else:
                if not error:
                    return Acted(item.retried)
                if error not in LEADERSHIP_ERRORS or not tries.may_go_on(cluster):
                    return Acted.ending(Outcome.FAILED, f"{item.retried}the leader refused the marker: {error}", item.state_before)
                failure = error
            failed_at = item.leader
            try:
                leader, producers, why = cluster.leader_and_producers(tp)
            except KafkatxnError as exc:
                leader, producers, why = None, None, str(exc)
            if producers is None:
                item.retried = tries.note(failed_at, failure, None)
                return Acted.ending(Outcome.UNKNOWN, f"{item.retried}no leader of {tp} could be asked: {why}")
            item.leader = leader
            item.retried = tries.note(failed_at, failure, leader)
            now_leader = f"{leader_asked(leader, failed_at)},"
            again = decide_abort_again(tp, item.decision, producers)
            if again.action is Action.NOTHING:
                item.retried += f"{now_leader} has it closed; "
                return Acted(item.retried)
            if again.action is Action.REFUSE:
                return Acted.ending(Outcome.REFUSED, f"{item.retried}{now_leader} shows a change: {again.reason}",
                                    {"producers": to_plain(producers)})

    def no_answer(self, item: _AbortItem, exc: BaseException) -> str:
        return f"{item.retried}writing the marker got no answer: {exc}"

    def verify(self, cluster: Cluster, item: _AbortItem) -> tuple[Verification, Any]:
        """The transaction gone and the LSO past its start."""
        tp, planned = item.target.tp, item.decision.producer
        after: list[ProducerState] | None = None
        failed = ""
        try:
            states, _ = _describe_partitions(cluster, [tp])
            after = states.get(tp)
            lso, hw, _missing = _offsets(cluster, [tp])
            item.lso_after, item.hw_after = lso.get(tp), hw.get(tp)
        except KafkatxnError as exc:
            failed = f"marker written; verifying failed: {exc}; "
        verdict = verify_abort(planned.producer_id, planned.current_txn_start_offset, after, item.lso_before, item.lso_after,
                               item.hw_after, self.done)
        state_after = {
            "producers": to_plain(after) if after is not None else None,
            "last_stable_offset": item.lso_after,
            "high_watermark": item.hw_after,
            "leader_id": item.leader,
        }
        return replace(verdict, detail=failed + verdict.detail), state_after


def may_settle(missing: Sequence[Missing]) -> bool:
    """Whether an undetermined verdict missing these parts may be determined by asking again soon:
    brokers, log partitions and coordinators that did not answer (moving, loading, restarting) may;
    a part the principal may not see, or a whole kind of answer the brokers do not give (a typed
    :class:`~kafkatxn.model.Part`: too old a Kafka, ids filtered by ACLs), does not."""
    return bool(missing) and not any(m.not_authorized or isinstance(m.subject, Part) for m in missing)


def leader_asked(leader: int, failed_at: int | None) -> str:
    """The leader a marker is retried on, named beside the broker that did not take it."""
    return f"broker {leader}, {'its new leader' if leader != failed_at else 'still its leader'}"


class MarkerRetries:
    """The markers that did not land, told once each: the same refusal from the same broker again
    (a leader not elected yet, polled every pause) is counted, not repeated."""

    def __init__(self) -> None:
        self.steps: list[list] = []  # [broker, failure, leader asked next, times]

    def may_go_on(self, cluster: Cluster) -> bool:
        """The first retry goes at once (fresh metadata names the new leader); later ones after a
        pause, while the share of the deadline for waiting on leaders lasts."""
        return not self.steps or cluster.pause_while_facts_settle()

    def note(self, broker: int | None, failure: str, leader: int | None) -> str:
        if self.steps and self.steps[-1][:3] == [broker, failure, leader]:
            self.steps[-1][3] += 1
        else:
            self.steps.append([broker, failure, leader, 1])
        return "".join(
            f"broker {broker} did not take the marker ({failure}){f' {times} times' if times > 1 else ''}; "
            + (f"retried on {leader_asked(asked, broker)}; " if asked is not None else "")
            for broker, failure, asked, times in self.steps
        )


def not_hanging_yet(c: verdicts.Classification, max_transaction_timeout_ms: int | None) -> str:
    """What an abort says of a transaction no coordinator tracks that is not past its deadline."""
    deadline = verdicts.hanging_deadline_ms(c, max_transaction_timeout_ms)
    at = deadline + 1 if deadline is not None else None
    tp, start = c.open_txn.tp, c.open_txn.start_offset
    # The command last: a table prints a command its reason names on a line of its own.
    return (f"not hanging yet: {untracked.state(at)} (its deadline: {verdicts.deadline_source(c, max_transaction_timeout_ms)}); "
            f"abortable then; aborting now risks this: {untracked.ABORT_NOW_RISK}; to abort it now on purpose: "
            f"{untracked.abort_command(tp, start, now=True)}")


def abort(
    cluster: Cluster,
    targets: Sequence[AbortTarget] = (),
    *,
    all_hanging: bool = False,
    allow_unknown_outcome: bool = False,
    scope: HangingScope | None = None,
    max_transaction_timeout_ms: int | None = None,
    audit: AuditLog,
    confirm: Confirm,
    dry_run: bool = False,
) -> RemedyResult:
    """Plan, confirm, act and verify; rows are the plan (dry run, declined) or the outcomes."""
    if all_hanging == bool(targets):
        raise InputError("name one transaction ({topic}, {partition}, {start_offset}) or pass {all_hanging}")
    if allow_unknown_outcome and all_hanging:
        raise InputError("{allow_unknown_outcome} needs the transaction named, not {all_hanging}")
    remedy = Abort(targets, all_hanging, scope, max_transaction_timeout_ms)
    remedy.allow_unknown_outcome = allow_unknown_outcome
    return run(remedy, cluster, audit=audit, confirm=confirm, dry_run=dry_run)
