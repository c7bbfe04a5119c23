"""Abort hanging transactions and fence transactional ids, safely.

Both actions follow the same steps: plan from a fresh snapshot, show the plan, get confirmation
(the caller's ``confirm``), check the state again right before acting, write a durable audit intent,
act, verify, write the audit result. Deciding is pure (:func:`decide_abort`,
:func:`coordinator_refusal`, :func:`decide_fence`, :func:`verify_abort`, :func:`verify_fence`)
and tested without a broker.

Abort writes an ABORT marker (WriteTxnMarkers) to the partition leader, as
``kafka-transactions.sh abort`` does, with the coordinator epoch DescribeProducers reports. It only
aborts transactions whose coordinator does not track the partition (hanging): a marker written
behind a live coordinator's back would lose the data of a transaction its producer later commits.
Transactions the coordinator tracks are ended by fencing their transactional id instead.
"""

from __future__ import annotations

import enum
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from kafkatxn import gather, hanging, verdicts
from kafkatxn.auditlog import AuditLog
from kafkatxn.validation import check_topic_name, compile_regex
from kafkatxn.model import Missing, ProducerState, TopicPartition, TransactionalId, TransactionDescription
from kafkatxn.errors import (
    EXIT_USAGE, INT16_MAX, INT32_MAX, INT64_MAX, AuthenticationError, KafkatxnError, UsageError,
)
from kafkatxn.exitcodes import exit_code as shared_exit_code
from kafkatxn.output import to_plain

if TYPE_CHECKING:  # capability modules are handed the facade; they do not import it
    from kafkatxn.kafka import Cluster

# Longest transaction timeout the fencing producer asks for when the id has none of its own.
DEFAULT_FENCE_TIMEOUT_MS = 60_000
# Coordinator states in which the id's transaction is not finished yet.
UNFINISHED_STATES = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"})


class Outcome(str, enum.Enum):
    WOULD_ABORT = "would abort"
    ABORTED = "aborted"
    NOTHING_TO_ABORT = "nothing to abort"
    WOULD_FENCE = "would fence"
    FENCED = "fenced"
    REFUSED = "refused"
    FAILED = "failed"  # the cluster said no: nothing changed
    UNKNOWN = "unknown"  # the request got no answer: it may or may not have taken effect


FAILING_OUTCOMES = frozenset({Outcome.REFUSED, Outcome.FAILED, Outcome.UNKNOWN})


def exit_code(outcomes: Iterable[Outcome], incomplete: bool = False) -> int:
    """0 when everything asked for is done (or was already), 3 when anything was refused or failed."""
    return shared_exit_code(undetermined=incomplete or any(o in FAILING_OUTCOMES for o in outcomes))


# ==============================================================================================
# abort
# ==============================================================================================


@dataclass(frozen=True)
class AbortTarget:
    """The transaction the user names: by start offset, or by producer id, epoch and coordinator epoch."""

    topic: str
    partition: int
    start_offset: int | None = None
    producer_id: int | None = None
    producer_epoch: int | None = None
    coordinator_epoch: int | None = None

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


def validate_target(target: AbortTarget) -> None:
    explicit = (target.producer_id, target.producer_epoch, target.coordinator_epoch)
    if target.start_offset is None and all(v is None for v in explicit):
        raise UsageError("name the transaction with --start-offset, or with --producer-id, --producer-epoch and --coordinator-epoch")
    if any(v is not None for v in explicit) and any(v is None for v in explicit):
        raise UsageError("--producer-id, --producer-epoch and --coordinator-epoch go together")
    if target.start_offset is not None and target.start_offset < 0:
        raise UsageError("--start-offset must not be negative")
    if target.partition < 0:
        raise UsageError("--partition must not be negative")
    check_topic_name(target.topic)
    # Wider than the fields of WriteTxnMarkers: would fail on the wire, after the audit intent.
    for value, limit, option in ((target.partition, INT32_MAX, "--partition"), (target.start_offset, INT64_MAX, "--start-offset"),
                                 (target.producer_id, INT64_MAX, "--producer-id"), (target.producer_epoch, INT16_MAX, "--producer-epoch"),
                                 (target.coordinator_epoch, INT32_MAX, "--coordinator-epoch")):
        if value is not None and value > limit:
            raise UsageError(f"{option} {value} is larger than Kafka allows ({limit})")


class Action(str, enum.Enum):
    ABORT = "abort"
    FENCE = "fence"
    NOTHING = "nothing"
    REFUSE = "refuse"


@dataclass(frozen=True)
class AbortDecision:
    action: Action
    reason: str
    producer: ProducerState | None = None
    marker_coordinator_epoch: int | None = None


def marker_coordinator_epoch(reported: int) -> int:
    """The coordinator epoch the ABORT marker carries: the one the partition last saw for the producer.

    DescribeProducers reports -1 before a producer's first marker; Kafka's tool then uses 0, which
    is no higher than any real coordinator epoch, so the broker accepts it. Never a higher one: the
    partition would record it and reject every later marker of the real coordinator.
    """
    return max(reported, 0)


def _open_elsewhere(producers: Sequence[ProducerState]) -> str:
    opened = sorted((p.current_txn_start_offset, p.producer_id) for p in producers if p.current_txn_start_offset >= 0)
    return ", ".join(f"offset {o} (producer {pid})" for o, pid in opened)


def decide_abort(target: AbortTarget, producers: Sequence[ProducerState], already_aborted_at: str | None = None) -> AbortDecision:
    """The partition side: is there exactly the open transaction the user named?

    Nothing open where the user points is "nothing to abort" (a repeat is safe); something else
    open there means the user's view is stale, and the abort is refused.
    """
    open_txns = [p for p in producers if p.current_txn_start_offset >= 0]
    where = f"{target.tp}"
    if target.producer_id is not None:
        match = next((p for p in open_txns if p.producer_id == target.producer_id), None)
        if match is None:
            if already_aborted_at:
                return AbortDecision(Action.NOTHING, f"already aborted at {already_aborted_at}")
            if not any(p.producer_id == target.producer_id for p in producers):
                # A typo in a runbook must not read as success.
                return AbortDecision(
                    Action.REFUSE,
                    f"producer {target.producer_id} is unknown to {where} (it has no state for it); "
                    f"known producers: {', '.join(str(p.producer_id) for p in producers) or 'none'}",
                )
            return AbortDecision(Action.NOTHING, f"producer {target.producer_id} has no open transaction on {where}")
        if target.start_offset is not None and match.current_txn_start_offset != target.start_offset:
            return AbortDecision(
                Action.REFUSE,
                f"producer {target.producer_id}'s open transaction on {where} starts at offset "
                f"{match.current_txn_start_offset}, not {target.start_offset}",
            )
        if match.producer_epoch != target.producer_epoch:
            return AbortDecision(
                Action.REFUSE,
                f"producer {target.producer_id}'s open transaction on {where} has epoch {match.producer_epoch}, "
                f"not {target.producer_epoch}: expected --producer-epoch {match.producer_epoch}",
            )
        expected = marker_coordinator_epoch(match.coordinator_epoch)
        given = target.coordinator_epoch
        if given != expected and not (given == -1 and match.coordinator_epoch == -1):
            # Higher would be recorded by the partition and fence every later marker of the real
            # coordinator for this producer; lower is rejected by the broker.
            return AbortDecision(
                Action.REFUSE,
                f"coordinator epoch {given} is not the one {where} last saw for producer {target.producer_id} "
                f"(it reports {match.coordinator_epoch}): expected --coordinator-epoch {expected}",
            )
        return AbortDecision(Action.ABORT, "open transaction found", match, expected)
    match = next((p for p in open_txns if p.current_txn_start_offset == target.start_offset), None)
    if match is not None:
        return AbortDecision(Action.ABORT, "open transaction found", match, marker_coordinator_epoch(match.coordinator_epoch))
    if already_aborted_at:
        return AbortDecision(Action.NOTHING, f"already aborted at {already_aborted_at}")
    if open_txns:
        return AbortDecision(
            Action.REFUSE,
            f"no open transaction starts at offset {target.start_offset} on {where}; open transactions start at "
            f"{_open_elsewhere(open_txns)} (run `kafkatxn hanging` again for current offsets)",
        )
    return AbortDecision(Action.NOTHING, f"no open transaction on {where}")


def coordinator_refusal(classification: verdicts.Classification) -> str | None:
    """Why the coordinator side forbids an abort marker (None when the transaction is hanging)."""
    if classification.verdict is verdicts.Verdict.HANGING:
        return None
    if classification.verdict is verdicts.Verdict.LONG_RUNNING:
        d = classification.description
        state = d.state if d else "unknown"
        if d is not None and d.state in verdicts.COMPLETING_STATES:
            return (
                f"its coordinator is completing it (transactional id {classification.transactional_id!r}, state {state}: "
                "markers pending); an ABORT marker here could break its atomicity"
            )
        return (
            f"its coordinator still tracks it (transactional id {classification.transactional_id!r}, state {state}) "
            f"and will complete or abort it; to end it now: kafkatxn fence {classification.transactional_id!r}"
        )
    return f"undetermined, could not check it with its coordinator: {classification.reason}"


def already_aborted(records: Iterable[dict[str, Any]], cluster_id: str | None, target: AbortTarget) -> str | None:
    """Time of an earlier successful abort of this very transaction in the audit log, if any."""
    latest = None
    for r in records:
        if r.get("record") != "result" or r.get("action") != "abort" or r.get("outcome") != Outcome.ABORTED.value:
            continue
        if cluster_id is not None and r.get("cluster_id") not in (None, cluster_id):
            continue
        t = r.get("target") or {}
        if t.get("topic") != target.topic or t.get("partition") != target.partition:
            continue
        if target.start_offset is not None and t.get("start_offset") != target.start_offset:
            continue
        if target.producer_id is not None and t.get("producer_id") != target.producer_id:
            continue
        latest = r.get("time")
    return latest


@dataclass(frozen=True)
class AbortVerification:
    outcome: Outcome
    detail: str


def verify_abort(
    producer_id: int, start_offset: int, producers_after: Sequence[ProducerState] | None,
    lso_before: int | None, lso_after: int | None, hw_after: int | None,
) -> AbortVerification:
    """After the marker: the transaction must be gone and the LSO past its start (unless another holds it)."""
    if producers_after is None:
        return AbortVerification(Outcome.UNKNOWN, "could not describe the partition's producers after the marker")
    still = next(
        (p for p in producers_after if p.producer_id == producer_id and p.current_txn_start_offset == start_offset), None
    )
    if still is not None:
        return AbortVerification(Outcome.FAILED, "the transaction is still open after the marker")
    if lso_after is None:
        return AbortVerification(Outcome.ABORTED, "transaction gone; LSO could not be read")
    if lso_after > start_offset or (hw_after is not None and lso_after >= hw_after):
        moved = f"LSO moved from {lso_before} to {lso_after}" if lso_before is not None else f"LSO now {lso_after}"
        return AbortVerification(Outcome.ABORTED, moved)
    holders = _open_elsewhere(producers_after)
    return AbortVerification(
        Outcome.ABORTED, f"transaction gone; LSO {lso_after} is still held by {holders or 'another open transaction'}"
    )


@dataclass(frozen=True)
class AbortRow:
    topic: str
    partition: int
    start_offset: int | None
    producer_id: int | None
    producer_epoch: int | None
    coordinator_epoch: int | None  # what the ABORT marker carries
    leader_id: int | None
    transactional_id: str | None
    coordinator_state: str | None
    outcome: Outcome
    reason: str
    lso_before: int | None
    high_watermark_before: int | None
    lso_after: int | None = None
    high_watermark_after: int | None = None


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
            outcome=self.outcome or _planned_outcome(self.decision.action),
            reason=self.reason or self.decision.reason,
            lso_before=self.lso_before,
            high_watermark_before=self.hw_before,
            lso_after=self.lso_after,
            high_watermark_after=self.hw_after,
        )


def _planned_outcome(action: Action) -> Outcome:
    return {Action.ABORT: Outcome.WOULD_ABORT, Action.NOTHING: Outcome.NOTHING_TO_ABORT, Action.REFUSE: Outcome.REFUSED}[action]


@dataclass
class RemedyResult:
    rows: list[Any]
    missing: list[Missing] = field(default_factory=list)
    acted: bool = False

    @property
    def exit_code(self) -> int:
        return exit_code((r.outcome for r in self.rows), incomplete=bool(self.missing))


Confirm = Callable[[list[Any]], bool]


def _describe_partitions(cluster: Cluster, tps: Iterable[TopicPartition]) -> tuple[dict[TopicPartition, list[ProducerState]], list[Missing]]:
    described = cluster.describe_producers(sorted(set(tps)))
    return described.value, list(described.missing)


def _offsets(cluster: Cluster, tps: Sequence[TopicPartition]) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    if not tps:
        return {}, {}
    pairs = cluster.stable_and_high_offsets(tps).value  # one round trip per leader, LSO <= HW in each pair
    return {tp: lso for tp, (lso, _hw) in pairs.items()}, {tp: hw for tp, (_lso, hw) in pairs.items()}


def _plan_targets(cluster: Cluster, targets: Sequence[AbortTarget], audit: AuditLog) -> list[_AbortItem]:
    leaders = {}
    for t in targets:
        validate_target(t)
        (info,) = cluster.select_partitions(topics=[t.topic], partition=t.partition)  # unknown ones raise
        leaders[t.tp] = info.leader
    states, missing = _describe_partitions(cluster, leaders)
    records = audit.records()
    cluster_id = cluster.metadata().cluster_id
    items = []
    for t in targets:
        if t.tp not in states:
            why = "; ".join(m.reason for m in missing if m.subject == t.tp) or "no answer"
            items.append(_AbortItem(t, AbortDecision(Action.REFUSE, f"could not describe producers of {t.tp}: {why}"), leaders[t.tp]))
            continue
        decision = decide_abort(t, states[t.tp], already_aborted(records, cluster_id, t))
        items.append(_AbortItem(t, decision, leaders[t.tp]))
    to_check = [i for i in items if i.decision.action is Action.ABORT]
    if to_check:
        view, _missing = gather.coordinator_view(cluster, {i.decision.producer.producer_id for i in to_check})
        for item in to_check:
            item.classification = verdicts.classify(verdicts.OpenTransaction(item.target.tp, item.decision.producer), view)
            refusal = coordinator_refusal(item.classification)
            if refusal:
                item.decision = replace(item.decision, action=Action.REFUSE, reason=refusal)
            else:
                item.decision = replace(item.decision, reason=f"hanging: {item.classification.reason}")
    return items


@dataclass(frozen=True)
class HangingScope:
    """Where ``abort --all-hanging`` looks: the whole cluster, one topic, or one partition of it."""

    topic: str | None = None
    partition: int | None = None


def _plan_all_hanging(
    cluster: Cluster, max_transaction_timeout_ms: int | None, scope: HangingScope | None = None,
) -> tuple[list[_AbortItem], list[Missing]]:
    scope = scope or HangingScope()
    found = hanging.find_hanging(
        cluster, topics=[scope.topic] if scope.topic is not None else None, partition=scope.partition,
        max_transaction_timeout_ms=max_transaction_timeout_ms,
    )
    leaders = cluster.metadata().leaders
    items = []
    for c in found.classifications:
        if c.verdict is verdicts.Verdict.LONG_RUNNING:
            continue  # not hanging: its coordinator completes it (see `kafkatxn hanging`)
        p = c.open_txn.producer
        target = AbortTarget(c.open_txn.tp.topic, c.open_txn.tp.partition, start_offset=p.current_txn_start_offset)
        if c.verdict is verdicts.Verdict.UNDETERMINED:
            # Never a marker on a guess: listed, refused and audited as such.
            decision = AbortDecision(Action.REFUSE, coordinator_refusal(c) or c.reason, p)
        else:
            decision = AbortDecision(Action.ABORT, f"hanging: {c.reason}", p, marker_coordinator_epoch(p.coordinator_epoch))
        items.append(_AbortItem(target, decision, leaders.get(c.open_txn.tp), c))
    return items, found.missing


def _audit_refusal(audit: AuditLog, action: str, target: dict[str, Any], reason: str, state: Any = None) -> None:
    """A refusal on the audit log: a result record with no intent (nothing was attempted)."""
    audit.result(uuid.uuid4().hex, action, target, Outcome.REFUSED.value, state, reason)


def _coordinator_recheck(cluster: Cluster, item: _AbortItem, producer: ProducerState) -> str | None:
    """Right before the marker: ask the coordinators again (a coordinator may have moved or come back)."""
    view, _missing = gather.coordinator_view(cluster, [producer.producer_id])
    item.classification = verdicts.classify(verdicts.OpenTransaction(item.target.tp, producer), view)
    return coordinator_refusal(item.classification)


def _target_record(item: _AbortItem) -> dict[str, Any]:
    p = item.decision.producer
    return {
        "topic": item.target.topic,
        "partition": item.target.partition,
        "start_offset": p.current_txn_start_offset if p else item.target.start_offset,
        "producer_id": p.producer_id if p else item.target.producer_id,
        "producer_epoch": p.producer_epoch if p else item.target.producer_epoch,
    }


# WriteTxnMarkers errors that mean the broker asked is not (or no longer) the partition's leader.
_LEADER_MOVED = frozenset({"NOT_LEADER_FOR_PARTITION", "NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE",
                           "REPLICA_NOT_AVAILABLE", "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH"})
# Waiting for a partition's new leader may use this share of the deadline; the rest is kept for the
# marker and its verification.
LEADER_WAIT_SHARE = 2 / 3


def _leader_and_producers(cluster: Cluster, tp: TopicPartition) -> tuple[int | None, list[ProducerState] | None, str]:
    """The partition's leader, from fresh metadata, and the producers it reports.

    A leader that does not answer (it died, leadership is moving) is asked again as metadata changes,
    for a share of the deadline; then ``(None, None, why)``.
    """
    while True:
        info = next((p for p in cluster.metadata(refresh=True).partitions if p.tp == tp), None)
        if info is None or info.leader < 0:
            why = f"{tp} has no leader"
        else:
            states, missing = _describe_partitions(cluster, [tp])
            if tp in states:
                return info.leader, states[tp], ""
            why = "; ".join(map(str, missing)) or f"no answer from broker {info.leader}"
        # Brokers notice a dead leader within their session timeout (seconds): worth waiting for.
        stop_at = cluster.deadline - cluster.config.timeout_s * (1 - LEADER_WAIT_SHARE)
        if time.monotonic() + 0.5 >= stop_at:
            return None, None, why
        time.sleep(0.5)


def _recheck(item: _AbortItem, producers: Sequence[ProducerState]) -> AbortDecision:
    planned = item.decision.producer
    assert planned is not None
    return decide_abort(
        AbortTarget(item.target.topic, item.target.partition, planned.current_txn_start_offset, planned.producer_id,
                    planned.producer_epoch, item.decision.marker_coordinator_epoch),
        producers,
    )


def _execute_abort(cluster: Cluster, item: _AbortItem, audit: AuditLog) -> None:
    planned = item.decision.producer
    assert planned is not None
    tp = item.target.tp
    # Right before acting: the same transaction must still be open (the plan may be minutes old),
    # asked of the partition's current leader (leaders move, brokers die, while people read plans).
    leader, producers, why = _leader_and_producers(cluster, tp)
    if producers is None:
        item.outcome, item.reason = Outcome.REFUSED, f"could not re-check {tp} before acting: {why}"
        _audit_refusal(audit, "abort", _target_record(item), item.reason)
        return
    item.leader = leader
    recheck = _recheck(item, producers)
    if recheck.action is Action.NOTHING:
        item.outcome, item.reason = Outcome.NOTHING_TO_ABORT, "closed since the plan was made"
        return
    if recheck.action is Action.REFUSE:
        item.outcome, item.reason = Outcome.REFUSED, f"changed since the plan was made: {recheck.reason}"
        _audit_refusal(audit, "abort", _target_record(item), item.reason, {"producers": to_plain(producers)})
        return
    refusal = _coordinator_recheck(cluster, item, recheck.producer)
    if refusal:
        item.outcome, item.reason = Outcome.REFUSED, f"changed since the plan was made: {refusal}"
        _audit_refusal(audit, "abort", _target_record(item), item.reason, {"producers": to_plain(producers)})
        return
    target = _target_record(item)
    state_before = {
        "producer": to_plain(recheck.producer),
        "last_stable_offset": item.lso_before,
        "high_watermark": item.hw_before,
        "transactional_id": item.classification.transactional_id if item.classification else None,
        "coordinator_state": item.row().coordinator_state,
        "hanging_reason": item.classification.reason if item.classification else None,
    }
    marker = {"leader_id": item.leader, "coordinator_epoch": item.decision.marker_coordinator_epoch, "result": "ABORT"}
    action_id = audit.intent("abort", target, state_before, plan={"write_txn_markers": marker})
    retried = ""  # what happened before the marker that counted, for the row and the audit record
    for attempt in (1, 2):
        try:
            error = cluster.write_abort_marker(
                tp, planned.producer_id, planned.producer_epoch, item.decision.marker_coordinator_epoch, item.leader
            )
        except Exception as exc:  # noqa: BLE001 - whatever happened, the intent gets its result
            # A leader that did not answer is looked for again below; anything else ends here, on record.
            if attempt == 2 or not isinstance(exc, KafkatxnError) or isinstance(exc, AuthenticationError):
                item.outcome, item.reason = Outcome.UNKNOWN, f"{retried}writing the marker got no answer: {exc}"
                audit.result(action_id, "abort", target, item.outcome.value, None, item.reason)
                if not isinstance(exc, KafkatxnError):
                    raise
                return
            failure = f"no answer: {exc}"
        else:
            if not error:
                break
            if error not in _LEADER_MOVED or attempt == 2:
                item.outcome, item.reason = Outcome.FAILED, f"{retried}the leader refused the marker: {error}"
                audit.result(action_id, "abort", target, item.outcome.value, state_before, item.reason)
                return
            failure = error
        # The leader died or moved while the marker was on its way, so it may or may not have landed:
        # ask the partition's new leader, and write the marker there only if the transaction is still open.
        retried = f"broker {item.leader} did not take the marker ({failure}); "
        try:
            leader, producers, why = _leader_and_producers(cluster, tp)
        except KafkatxnError as exc:
            leader, producers, why = None, None, str(exc)
        if producers is None:
            item.outcome, item.reason = Outcome.UNKNOWN, f"{retried}no leader of {tp} could be asked: {why}"
            audit.result(action_id, "abort", target, item.outcome.value, None, item.reason)
            return
        now_leader = f"broker {leader}, {'its new leader' if leader != item.leader else 'still its leader'},"
        item.leader = leader
        recheck = _recheck(item, producers)
        if recheck.action is Action.NOTHING:
            retried += f"{now_leader} has it closed; "
            break
        if recheck.action is Action.REFUSE:
            item.outcome, item.reason = Outcome.REFUSED, f"{retried}{now_leader} shows a change: {recheck.reason}"
            audit.result(action_id, "abort", target, item.outcome.value, {"producers": to_plain(producers)}, item.reason)
            return
        retried += f"retried on {now_leader.rstrip(',')}; "
    after: list[ProducerState] | None = None
    lso_after = hw_after = None
    try:
        states, _ = _describe_partitions(cluster, [tp])
        after = states.get(tp)
        lso, hw = _offsets(cluster, [tp])
        lso_after, hw_after = lso.get(tp), hw.get(tp)
    except KafkatxnError as exc:
        item.reason = f"marker written; verifying failed: {exc}"
    verdict = verify_abort(planned.producer_id, planned.current_txn_start_offset, after, item.lso_before, lso_after, hw_after)
    item.outcome, item.lso_after, item.hw_after = verdict.outcome, lso_after, hw_after
    item.reason = retried + (verdict.detail if not item.reason else f"{item.reason}; {verdict.detail}")
    state_after = {
        "producers": to_plain(after) if after is not None else None,
        "last_stable_offset": lso_after,
        "high_watermark": hw_after,
        "leader_id": item.leader,
    }
    audit.result(action_id, "abort", target, item.outcome.value, state_after, item.reason)


def abort(
    cluster: Cluster,
    targets: Sequence[AbortTarget] = (),
    *,
    all_hanging: bool = False,
    scope: HangingScope | None = None,
    max_transaction_timeout_ms: int | None = None,
    audit: AuditLog,
    confirm: Confirm,
    dry_run: bool = False,
) -> RemedyResult:
    """Plan, confirm, act and verify; rows are the plan (dry run, declined) or the outcomes."""
    if all_hanging == bool(targets):
        raise UsageError("name one transaction (--topic, --partition, --start-offset) or pass --all-hanging")
    audit.cluster_id = cluster.metadata().cluster_id
    missing: list[Missing] = []
    if all_hanging:
        items, missing = _plan_all_hanging(cluster, max_transaction_timeout_ms, scope)
    else:
        items = _plan_targets(cluster, targets, audit)
    actionable = [i for i in items if i.decision.action is Action.ABORT]
    lso, hw = _offsets(cluster, sorted({i.target.tp for i in actionable}))
    for i in actionable:
        i.lso_before, i.hw_before = lso.get(i.target.tp), hw.get(i.target.tp)
    plan_rows = [i.row() for i in items]
    if not dry_run:
        for i in items:
            if i.decision.action is Action.REFUSE:
                _audit_refusal(audit, "abort", _target_record(i), i.decision.reason)
    if dry_run or not actionable:
        return RemedyResult(plan_rows, missing)
    if not confirm(plan_rows):
        raise Declined()
    # The deadline is for the network, not for the person reading the plan.
    cluster.restart_deadline()
    for item in actionable:
        _execute_abort(cluster, item, audit)
    return RemedyResult([i.row() for i in items], missing, acted=True)


class Declined(KafkatxnError):
    """The plan was not confirmed; nothing was changed."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str = "not confirmed; nothing was changed"):
        super().__init__(message)


# ==============================================================================================
# fence
# ==============================================================================================


@dataclass(frozen=True)
class FenceDecision:
    action: Action  # FENCE or REFUSE
    reason: str


def decide_fence(
    transactional_id: str, described: TransactionDescription | None, unknown: bool, allow_unknown: bool, unanswered: str | None = None,
    allow_two_phase_commit: bool = False,
) -> FenceDecision:
    if described is not None:
        if verdicts.is_two_phase_commit(described) and described.state in UNFINISHED_STATES and not allow_two_phase_commit:
            # KIP-939: an external transaction manager decides; fencing would abort what it may be about to commit.
            return FenceDecision(
                Action.REFUSE,
                f"two-phase commit transaction (state {described.state}): an external transaction manager may be about "
                f"to commit it; fencing aborts it (name the id and pass --allow-two-phase-commit to fence anyway)",
            )
        if described.state in UNFINISHED_STATES:
            return FenceDecision(Action.FENCE, f"state {described.state}: its open transaction will be aborted")
        return FenceDecision(Action.FENCE, f"state {described.state}: no open transaction; the epoch is bumped")
    if unknown:
        if allow_unknown:
            return FenceDecision(Action.FENCE, "unknown to the cluster: fencing creates it (--allow-unknown)")
        return FenceDecision(Action.REFUSE, "unknown to the cluster: fencing would create it (pass --allow-unknown to do so)")
    return FenceDecision(Action.REFUSE, f"could not describe it: {unanswered or 'its coordinator did not answer'}")


def verify_fence(
    before: TransactionDescription | None, after: TransactionDescription | None, still_open: Sequence[TopicPartition],
    lso_held: Sequence[str] = (),
) -> AbortVerification:
    """After InitProducerId: a newer producer id or epoch, nothing unfinished, no partition left open
    (``lso_held``: partitions whose LSO is still at or below the old transaction's start, held by another)."""
    if after is None:
        return AbortVerification(Outcome.UNKNOWN, "could not describe the transactional id afterwards")
    if before is not None and (after.producer_id, after.producer_epoch) == (before.producer_id, before.producer_epoch):
        return AbortVerification(Outcome.FAILED, "producer id and epoch did not change")
    if after.state in UNFINISHED_STATES:
        return AbortVerification(Outcome.FAILED, f"state is still {after.state}")
    if still_open:
        return AbortVerification(
            Outcome.FAILED, f"the old producer still has an open transaction on {', '.join(map(str, still_open))}"
        )
    if before is None:
        return AbortVerification(Outcome.FENCED, f"created with producer {after.producer_id} epoch {after.producer_epoch}")
    held = f"; LSO still held by another transaction on {', '.join(lso_held)}" if lso_held else ""
    return AbortVerification(
        Outcome.FENCED,
        f"producer {before.producer_id} epoch {before.producer_epoch} -> producer {after.producer_id} epoch {after.producer_epoch}{held}",
    )


# What Admin.fenceProducers retries (KAFKA-16570): the coordinator is busy completing the previous
# transaction, or is loading its log partition. Retried within the deadline.
FENCE_RETRIABLE = frozenset({"CONCURRENT_TRANSACTIONS", "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR"})
FENCE_RETRY_BACKOFF_S = 0.2


def _fence_with_retries(cluster: Cluster, transactional_id: str, timeout_ms: int) -> list[str]:
    """InitProducerId until it succeeds, a non-retriable error, or the deadline; returns the retried errors."""
    from kafkatxn.kafka.errors import kafka_error_code

    retried: list[str] = []
    while True:
        try:
            cluster.fence_transactional_id(transactional_id, timeout_ms)
            return retried
        except KafkatxnError as exc:
            code = kafka_error_code(exc.__cause__) if exc.__cause__ is not None else None
            backoff = min(FENCE_RETRY_BACKOFF_S * 2 ** len(retried), 1.0)
            if code not in FENCE_RETRIABLE or cluster.deadline - time.monotonic() < backoff + 1.0:
                raise
            retried.append(code)
            time.sleep(backoff)


def fence_timeout_ms(described: TransactionDescription | None, broker_max_ms: int | None) -> int:
    """The transaction timeout the fencing InitProducerId carries: the id's own, within the brokers' maximum."""
    own = described.timeout_ms if described is not None and described.timeout_ms > 0 else DEFAULT_FENCE_TIMEOUT_MS
    return min(own, broker_max_ms) if broker_max_ms else own


@dataclass(frozen=True)
class FenceRow:
    transactional_id: str
    coordinator_id: int | None
    outcome: Outcome
    reason: str
    state_before: str | None
    producer_id_before: int | None
    producer_epoch_before: int | None
    partitions_before: list[str]  # partitions of the transaction that the fence aborts
    state_after: str | None = None
    producer_id_after: int | None = None
    producer_epoch_after: int | None = None
    two_phase_commit: bool = False  # KIP-939 transaction (timeout 2147483647 ms)
    last_stable_offsets_after: dict[str, int] | None = None  # of partitions_before, read after the fence


@dataclass
class _FenceItem:
    transactional_id: str
    decision: FenceDecision
    before: TransactionDescription | None
    outcome: Outcome | None = None
    reason: str = ""
    after: TransactionDescription | None = None
    lso_after: dict[str, int] | None = None

    def row(self) -> FenceRow:
        b, a = self.before, self.after
        planned = Outcome.WOULD_FENCE if self.decision.action is Action.FENCE else Outcome.REFUSED
        return FenceRow(
            transactional_id=self.transactional_id,
            coordinator_id=(a or b).coordinator_id if (a or b) else None,
            outcome=self.outcome or planned,
            reason=self.reason or self.decision.reason,
            state_before=b.state if b else None,
            producer_id_before=b.producer_id if b else None,
            producer_epoch_before=b.producer_epoch if b else None,
            partitions_before=sorted(str(tp) for tp in b.partitions) if b else [],
            state_after=a.state if a else None,
            producer_id_after=a.producer_id if a else None,
            producer_epoch_after=a.producer_epoch if a else None,
            two_phase_commit=verdicts.is_two_phase_commit(b),
            last_stable_offsets_after=self.lso_after,
        )


def matching_ids(transactional_ids: Iterable[str], pattern: str) -> list[str]:
    """Ids the whole of which ``pattern`` matches (a partial match would fence more than meant)."""
    rx = compile_regex(pattern, "--pattern")
    return sorted({t for t in transactional_ids if rx.fullmatch(t)})


def _describe(cluster: Cluster, tids: Sequence[str]) -> tuple[dict[str, TransactionDescription], set[str], dict[str, str]]:
    described = cluster.describe_transactions(tids)
    found, not_found = described.value.found, described.value.not_found
    unanswered = {}
    for tid in tids:
        if tid not in found and tid not in not_found:
            reasons = [m.reason for m in described.missing_for(TransactionalId(tid))]
            unanswered[tid] = "; ".join(reasons) or "; ".join(map(str, described.missing)) or "no answer"
    return found, set(not_found), unanswered


def _plain_description(d: TransactionDescription | None) -> dict[str, Any] | None:
    return to_plain(d) if d is not None else None


def _execute_fence(cluster: Cluster, item: _FenceItem, allow_unknown: bool, broker_max_ms: int | None, audit: AuditLog,
                   allow_two_phase_commit: bool = False) -> None:
    tid = item.transactional_id
    target = {"transactional_id": tid}
    # Right before acting: describe again, so the audit shows the state actually fenced.
    found, unknown, unanswered = _describe(cluster, [tid])
    item.before = found.get(tid)
    recheck = decide_fence(tid, item.before, tid in unknown, allow_unknown, unanswered.get(tid), allow_two_phase_commit)
    if recheck.action is Action.REFUSE:
        item.outcome, item.reason = Outcome.REFUSED, f"changed since the plan was made: {recheck.reason}"
        _audit_refusal(audit, "fence", target, item.reason, _plain_description(item.before))
        return
    starts: dict[TopicPartition, int] = {}  # where the old transaction starts on each of its partitions
    if item.before is not None and item.before.partitions:
        states, _ = _describe_partitions(cluster, item.before.partitions)
        starts = {tp: p.current_txn_start_offset for tp, ps in states.items() for p in ps
                  if p.producer_id == item.before.producer_id and p.current_txn_start_offset >= 0}
    action_id = audit.intent("fence", target, _plain_description(item.before))
    retried: list[str] = []
    try:
        retried = _fence_with_retries(cluster, tid, fence_timeout_ms(item.before, broker_max_ms))
    except Exception as exc:  # noqa: BLE001 - whatever happened, the intent gets its result
        item.outcome, item.reason = Outcome.UNKNOWN, f"InitProducerId failed: {exc}"
        audit.result(action_id, "fence", target, item.outcome.value, None, item.reason)
        if not isinstance(exc, KafkatxnError):
            raise
        return
    still_open: list[TopicPartition] = []
    lso_held: list[str] = []
    try:
        found, _unknown, _unanswered = _describe(cluster, [tid])
        item.after = found.get(tid)
        if item.before is not None and item.before.partitions:
            states, _ = _describe_partitions(cluster, item.before.partitions)
            still_open = sorted(
                tp for tp, ps in states.items()
                if any(p.producer_id == item.before.producer_id and p.current_txn_start_offset >= 0 for p in ps)
            )
            # The LSO of the partitions the transaction held, as Kafka's tool leaves it to the user to check.
            lso = cluster.list_offsets(sorted(item.before.partitions), read_committed=True).value
            item.lso_after = {str(tp): off for tp, off in sorted(lso.items())}
            lso_held = [str(tp) for tp, start in sorted(starts.items()) if tp in lso and lso[tp] <= start and tp not in still_open]
    except KafkatxnError as exc:
        item.reason = f"fenced; verifying failed: {exc}"
    verdict = verify_fence(item.before, item.after, still_open, lso_held)
    item.outcome = verdict.outcome
    note = f"retried after {', '.join(retried)}; " if retried else ""
    item.reason = note + (verdict.detail if not item.reason else f"{item.reason}; {verdict.detail}")
    audit.result(action_id, "fence", target, item.outcome.value, _plain_description(item.after), item.reason)


def fence(
    cluster: Cluster,
    transactional_ids: Sequence[str] = (),
    *,
    pattern: str | None = None,
    allow_unknown: bool = False,
    allow_two_phase_commit: bool = False,
    audit: AuditLog,
    confirm: Confirm,
    dry_run: bool = False,
) -> RemedyResult:
    """Bump the epoch of each id (aborting its open transaction, fencing its producer); verify; audit."""
    if bool(transactional_ids) == (pattern is not None):
        raise UsageError("name transactional ids or pass --pattern REGEX (not both)")
    if allow_two_phase_commit and pattern is not None:
        raise UsageError("--allow-two-phase-commit needs the transactional ids named, not --pattern")
    audit.cluster_id = cluster.metadata().cluster_id
    missing: list[Missing] = []
    if pattern is not None:
        matching_ids([], pattern)  # a bad regex is a usage error before any request
        listing, _support = cluster.list_transactions()
        missing += listing.missing
        tids = matching_ids((t.transactional_id for t in listing.value), pattern)
    else:
        tids = list(dict.fromkeys(transactional_ids))
    if not tids:
        return RemedyResult([], missing)
    found, unknown, unanswered = _describe(cluster, tids)
    items = [
        _FenceItem(t, decide_fence(t, found.get(t), t in unknown, allow_unknown, unanswered.get(t), allow_two_phase_commit), found.get(t))
        for t in tids
    ]
    actionable = [i for i in items if i.decision.action is Action.FENCE]
    plan_rows = [i.row() for i in items]
    if not dry_run:
        for i in items:
            if i.decision.action is Action.REFUSE:
                _audit_refusal(audit, "fence", {"transactional_id": i.transactional_id}, i.decision.reason,
                               _plain_description(i.before))
    if dry_run or not actionable:
        return RemedyResult(plan_rows, missing)
    if not confirm(plan_rows):
        raise Declined()
    cluster.restart_deadline()  # the deadline is for the network, not for the person reading the plan
    try:
        broker_max_ms, _ = gather.cluster_max_transaction_timeout(cluster)
    except KafkatxnError:
        broker_max_ms = None  # the id's own timeout is then used; a broker that refuses it says so
    for item in actionable:
        _execute_fence(cluster, item, allow_unknown, broker_max_ms, audit, allow_two_phase_commit)
    return RemedyResult([i.row() for i in items], missing, acted=True)
