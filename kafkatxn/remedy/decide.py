"""What abort and fence decide, pure: over gathered values, with no facade and no audit log.

:func:`decide_abort` and :func:`coordinator_refusal` say whether an ABORT marker may be written,
:func:`verify_abort` whether it worked; :func:`decide_fence` and :func:`verify_fence` the same for
fencing a transactional id. A target the user names is checked once, as it is made
(:class:`AbortTarget`); input errors name the input (``{start_offset}``), and the CLI words them with
its own flags (:class:`kafkatxn.errors.InputError`).
"""

from __future__ import annotations

import enum
import shlex
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from kafkatxn import verdicts
from kafkatxn.errors import INT16_MAX, INT32_MAX, INT64_MAX, InputError, UsageError
from kafkatxn.exitcodes import Status, exit_code as shared_exit_code
from kafkatxn.model import ProducerState, TopicPartition, TransactionDescription
from kafkatxn.validation import check_topic_name, compile_regex

# Longest transaction timeout the fencing producer asks for when the id has none of its own.
DEFAULT_FENCE_TIMEOUT_MS = 60_000
# Coordinator states in which the id's transaction is not finished yet.
UNFINISHED_STATES = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"})


class Outcome(str, enum.Enum):
    WOULD_ABORT = "would abort"
    ABORTED = "aborted"
    NOTHING_TO_ABORT = "nothing to abort"
    WOULD_FENCE = "would fence"
    WOULD_RESTORE = "would restore commit"
    RESTORED = "commit restored"
    NOTHING_TO_RESTORE = "nothing to restore"
    FENCED = "fenced"
    # Not tracked by its coordinator but not past its deadline: abortable from then, or now on purpose.
    NOT_HANGING_YET = "not hanging yet"
    STILL_PINNED = "still pinned"  # fenced, but a partition its producer held is still pinned by it
    REFUSED = "refused"
    FAILED = "failed"  # the cluster said no: nothing changed
    UNKNOWN = "unknown"  # the request got no answer: it may or may not have taken effect


FAILING_OUTCOMES = frozenset({Outcome.REFUSED, Outcome.FAILED, Outcome.UNKNOWN, Outcome.STILL_PINNED})
# Nothing failed, but something is left for later: a finding, not "done".
PENDING_OUTCOMES = frozenset({Outcome.NOT_HANGING_YET})


def exit_code(outcomes: Iterable[Outcome], incomplete: bool = False) -> int:
    """0 when everything asked for is done (or was already), 1 when something is left to do later
    (not hanging yet), 3 when anything was refused or failed."""
    outcomes = list(outcomes)
    findings = Status.WARNING if any(o in PENDING_OUTCOMES for o in outcomes) else Status.OK
    return shared_exit_code(findings, undetermined=incomplete or any(o in FAILING_OUTCOMES for o in outcomes))


class Action(str, enum.Enum):
    ABORT = "abort"
    FENCE = "fence"
    RESTORE = "restore"  # write the COMMIT marker its coordinator's log shows was lost
    NOTHING = "nothing"
    REFUSE = "refuse"


@dataclass(frozen=True)
class Verification:
    """What verifying after the act found: the outcome, and why."""

    outcome: Outcome
    detail: str


# ==============================================================================================
# abort
# ==============================================================================================


@dataclass(frozen=True)
class AbortTarget:
    """The transaction the user names: by start offset, or by producer id, epoch and coordinator epoch.

    Checked as it is made (:func:`validate_target`): a target that exists is one Kafka could carry.
    """

    topic: str
    partition: int
    start_offset: int | None = None
    producer_id: int | None = None
    producer_epoch: int | None = None
    coordinator_epoch: int | None = None

    def __post_init__(self) -> None:
        validate_target(self)

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


# Wider than the fields of WriteTxnMarkers: would fail on the wire, after the audit intent.
_TARGET_LIMITS = (("partition", INT32_MAX), ("start_offset", INT64_MAX), ("producer_id", INT64_MAX),
                  ("producer_epoch", INT16_MAX), ("coordinator_epoch", INT32_MAX))


def validate_target(target: AbortTarget) -> None:
    """The one check of an abort target (:class:`AbortTarget` runs it as it is made)."""
    explicit = (target.producer_id, target.producer_epoch, target.coordinator_epoch)
    if target.start_offset is None and all(v is None for v in explicit):
        raise InputError("name the transaction with {start_offset}, or with {producer_id}, {producer_epoch} and {coordinator_epoch}")
    if any(v is not None for v in explicit) and any(v is None for v in explicit):
        raise InputError("{producer_id}, {producer_epoch} and {coordinator_epoch} go together")
    if target.start_offset is not None and target.start_offset < 0:
        raise InputError("{start_offset} must not be negative")
    if target.partition < 0:
        raise InputError("{partition} must not be negative")
    check_topic_name(target.topic)
    for name, limit in _TARGET_LIMITS:
        value = getattr(target, name)
        if value is not None and value > limit:
            raise InputError("{%s} {value} is larger than Kafka allows ({limit})" % name, value=value, limit=limit)


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


def open_elsewhere(producers: Sequence[ProducerState]) -> str:
    """Where the open transactions of ``producers`` start, for a reason."""
    opened = sorted((p.current_txn_start_offset, p.producer_id) for p in producers if p.current_txn_start_offset >= 0)
    return ", ".join(f"offset {o} (producer {pid})" for o, pid in opened)


def decide_abort(target: AbortTarget, producers: Sequence[ProducerState], already_aborted_at: str | None = None,
                 done: str = "aborted") -> AbortDecision:
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
                return AbortDecision(Action.NOTHING, f"already {done} at {already_aborted_at}")
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
        return AbortDecision(Action.NOTHING, f"already {done} at {already_aborted_at}")
    if open_txns:
        return AbortDecision(
            Action.REFUSE,
            f"no open transaction starts at offset {target.start_offset} on {where}; open transactions start at "
            f"{open_elsewhere(open_txns)} (run `kafkatxn hanging` again for current offsets)",
        )
    return AbortDecision(Action.NOTHING, f"no open transaction on {where}")


def decide_abort_again(tp: TopicPartition, planned: AbortDecision, producers: Sequence[ProducerState]) -> AbortDecision:
    """Right before the marker: is the very transaction the plan chose still open, as it was?"""
    p = planned.producer
    assert p is not None
    target = AbortTarget(tp.topic, tp.partition, p.current_txn_start_offset, p.producer_id, p.producer_epoch,
                         planned.marker_coordinator_epoch)
    return decide_abort(target, producers)


def coordinator_refusal(classification: verdicts.Classification) -> str | None:
    """Why the coordinator side forbids an abort marker (None when the transaction is hanging)."""
    if classification.verdict is verdicts.Verdict.HANGING:
        return None
    if classification.verdict is verdicts.Verdict.LOST_COMMIT:
        return (f"{classification.reason}: an ABORT marker would make committed records disappear for read_committed "
                "consumers; write the COMMIT marker with `kafkatxn restore-commit` instead")
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


def restore_refusal(classification: verdicts.Classification) -> str | None:
    """Why a COMMIT marker may not be written (None when its coordinator's log shows the commit)."""
    if classification.verdict is verdicts.Verdict.LOST_COMMIT:
        return None
    if classification.verdict is verdicts.Verdict.HANGING:
        return (f"its coordinator's log does not show it committed ({classification.reason}): a COMMIT marker would "
                "expose records no one committed; `kafkatxn abort` ends a hanging transaction")
    return coordinator_refusal(classification)


def already_aborted(records: Iterable[dict[str, Any]], cluster_id: str | None, target: AbortTarget,
                    action: str = "abort", done: Outcome = Outcome.ABORTED) -> str | None:
    """Time of an earlier successful abort (``action``, ``done``) of this very transaction in the audit log, if any."""
    latest = None
    for r in records:
        if r.get("record") != "result" or r.get("action") != action or r.get("outcome") != done.value:
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


def verify_abort(
    producer_id: int, start_offset: int, producers_after: Sequence[ProducerState] | None,
    lso_before: int | None, lso_after: int | None, hw_after: int | None, done: Outcome = Outcome.ABORTED,
) -> Verification:
    """After the marker: the transaction must be gone and the LSO past its start (unless another holds it);
    ``done`` is the outcome then (ABORTED, or RESTORED for a COMMIT marker)."""
    if producers_after is None:
        return Verification(Outcome.UNKNOWN, "could not describe the partition's producers after the marker")
    still = next(
        (p for p in producers_after if p.producer_id == producer_id and p.current_txn_start_offset == start_offset), None
    )
    if still is not None:
        return Verification(Outcome.FAILED, "the transaction is still open after the marker")
    if lso_after is None:
        return Verification(done, "transaction gone; LSO could not be read")
    if lso_after > start_offset or (hw_after is not None and lso_after >= hw_after):
        moved = f"LSO moved from {lso_before} to {lso_after}" if lso_before is not None else f"LSO now {lso_after}"
        return Verification(done, moved)
    holders = open_elsewhere(producers_after)
    return Verification(
        done, f"transaction gone; LSO {lso_after} is still held by {holders or 'another open transaction'}"
    )


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
    lso_held: Sequence[str] = (), still_pinned: Sequence[tuple[TopicPartition, int]] = (),
) -> Verification:
    """After InitProducerId: a newer producer id or epoch, nothing unfinished, no partition left open
    (``lso_held``: partitions whose LSO is still at or below the old transaction's start, held by another;
    ``still_pinned``: partitions, with their start offsets, where the old producer's transaction
    stays open because its coordinator did not track them: the fence cannot end those, abort does)."""
    if after is None:
        return Verification(Outcome.UNKNOWN, "could not describe the transactional id afterwards")
    if before is not None and (after.producer_id, after.producer_epoch) == (before.producer_id, before.producer_epoch):
        return Verification(Outcome.FAILED, "producer id and epoch did not change")
    if after.state in UNFINISHED_STATES:
        return Verification(Outcome.FAILED, f"state is still {after.state}")
    if still_open:
        return Verification(
            Outcome.FAILED, f"the old producer still has an open transaction on {', '.join(map(str, still_open))}"
        )
    if before is None:
        return Verification(Outcome.FENCED, f"created with producer {after.producer_id} epoch {after.producer_epoch}")
    if still_pinned:
        where = ", ".join(f"{tp}@{start}" for tp, start in still_pinned)
        nxt = " && ".join(f"kafkatxn abort --topic {shlex.quote(tp.topic)} --partition {tp.partition} --start-offset {start}"
                          for tp, start in still_pinned)
        return Verification(
            Outcome.STILL_PINNED,
            f"producer {before.producer_id} epoch {before.producer_epoch} -> producer {after.producer_id} epoch "
            f"{after.producer_epoch}, but still pinned: its transaction on {where} was not tracked by its coordinator, "
            f"so the fence could not end it; next: {nxt}",
        )
    held = f"; LSO still held by another transaction on {', '.join(lso_held)}" if lso_held else ""
    return Verification(
        Outcome.FENCED,
        f"producer {before.producer_id} epoch {before.producer_epoch} -> producer {after.producer_id} epoch {after.producer_epoch}{held}",
    )


def fence_timeout_ms(described: TransactionDescription | None, broker_max_ms: int | None) -> int:
    """The transaction timeout the fencing InitProducerId carries: the id's own, within the brokers' maximum."""
    own = described.timeout_ms if described is not None and described.timeout_ms > 0 else DEFAULT_FENCE_TIMEOUT_MS
    return min(own, broker_max_ms) if broker_max_ms else own


def matching_ids(transactional_ids: Iterable[str], pattern: str) -> list[str]:
    """Ids the whole of which ``pattern`` matches (a partial match would fence more than meant)."""
    try:
        rx = compile_regex(pattern, "pattern")
    except UsageError as exc:  # the input named as the caller names it: the CLI says --pattern
        raise InputError("bad {pattern} regex {why}", why=str(exc).removeprefix("bad pattern regex ")) from None
    return sorted({t for t in transactional_ids if rx.fullmatch(t)})
