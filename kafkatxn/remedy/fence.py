"""Fence transactional ids: bump each id's epoch (InitProducerId), which aborts its open transaction
and fences its live producer. Ends the transactions a coordinator tracks, where abort refuses.

The steps and the audit log are the driver's (:mod:`kafkatxn.remedy.driver`); the decisions are
:mod:`kafkatxn.remedy.decide`'s; retrying a busy coordinator is the Kafka layer's.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Sequence

from kafkatxn import gather, verdicts
from kafkatxn.auditlog import AuditLog
from kafkatxn.errors import InputError, KafkatxnError
from kafkatxn.model import Missing, TopicPartition, TransactionalId, TransactionDescription
from kafkatxn.plain import to_plain
from kafkatxn.remedy.decide import (
    Action, FenceDecision, Outcome, Verification, decide_fence, fence_timeout_ms, matching_ids, verify_fence,
)
from kafkatxn.remedy.driver import Acted, Confirm, Plan, Recheck, Remedy, RemedyResult, run

if TYPE_CHECKING:  # capability modules are handed the facade; they do not import it
    from kafkatxn.kafka import Cluster


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
    last_stable_offsets_after: dict[str, int] | None = None  # of the partitions it held, read after the fence
    last_stable_offsets_before: dict[str, int] | None = None  # of every partition its producer held open, right before


@dataclass
class _FenceItem:
    transactional_id: str
    decision: FenceDecision
    before: TransactionDescription | None
    outcome: Outcome | None = None
    reason: str = ""
    after: TransactionDescription | None = None
    lso_after: dict[str, int] | None = None
    lso_before: dict[str, int] | None = None
    starts: dict[TopicPartition, int] = field(default_factory=dict)  # where the old producer's transactions start, per partition
    unasked: list[Missing] = field(default_factory=list)  # partitions whose producers did not answer before the fence

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
            last_stable_offsets_before=self.lso_before,
        )

    def audit_target(self) -> dict[str, Any]:
        return {"transactional_id": self.transactional_id}

    def plan_state(self) -> Any:
        return _plain_description(self.before)


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


def _open_partitions(cluster: Cluster, producer_id: int, partitions: Sequence[TopicPartition] | None = None,
                     unasked: list[Missing] | None = None) -> dict[TopicPartition, int]:
    """Where ``producer_id`` has a transaction open (its start offset), among ``partitions`` (every
    partition of the cluster when None: a partition its coordinator does not track is found too);
    the partitions that did not answer go to ``unasked``."""
    if partitions is None:
        partitions = [p.tp for p in cluster.select_partitions(include_internal=True)]
    described = cluster.describe_producers(sorted(partitions))
    if unasked is not None:
        unasked.extend(described.missing)
    return {tp: p.current_txn_start_offset for tp, ps in described.value.items() for p in ps
            if p.producer_id == producer_id and p.current_txn_start_offset >= 0}


class Fence(Remedy):
    name = "fence"
    acting = Action.FENCE

    def __init__(self, transactional_ids: Sequence[str], pattern: str | None, allow_unknown: bool, allow_two_phase_commit: bool):
        self.transactional_ids, self.pattern = transactional_ids, pattern
        self.allow_unknown, self.allow_two_phase_commit = allow_unknown, allow_two_phase_commit
        self.broker_max_ms: int | None = None

    def _decide(self, tid: str, found: dict[str, TransactionDescription], unknown: set[str], unanswered: dict[str, str]) -> FenceDecision:
        return decide_fence(tid, found.get(tid), tid in unknown, self.allow_unknown, unanswered.get(tid), self.allow_two_phase_commit)

    def plan(self, cluster: Cluster, audit: AuditLog) -> Plan:
        missing: list[Missing] = []
        if self.pattern is not None:
            listing, _support = cluster.list_transactions()
            missing += listing.missing
            tids = matching_ids((t.transactional_id for t in listing.value), self.pattern)
        else:
            tids = list(dict.fromkeys(self.transactional_ids))
        if not tids:
            return Plan([], missing)
        found, unknown, unanswered = _describe(cluster, tids)
        return Plan([_FenceItem(t, self._decide(t, found, unknown, unanswered), found.get(t)) for t in tids], missing)

    def before_acting(self, cluster: Cluster) -> None:
        try:
            self.broker_max_ms, _ = gather.cluster_max_transaction_timeout(cluster)
        except KafkatxnError:
            self.broker_max_ms = None  # the id's own timeout is then used; a broker that refuses it says so

    def recheck(self, cluster: Cluster, item: _FenceItem) -> Recheck:
        """Describe again, so the audit shows the state actually fenced."""
        tid = item.transactional_id
        found, unknown, unanswered = _describe(cluster, [tid])
        item.before = found.get(tid)
        again = self._decide(tid, found, unknown, unanswered)
        if again.action is Action.REFUSE:
            return Recheck.refused(f"changed since the plan was made: {again.reason}", _plain_description(item.before))
        if item.before is not None:
            # Every partition its producer holds open, tracked or not: a fence ends only the ones
            # its coordinator tracks, and verify says which it did not.
            item.starts = _open_partitions(cluster, item.before.producer_id, unasked=item.unasked)
            if item.starts:
                lso = cluster.list_offsets(sorted(item.starts), read_committed=True).value
                item.lso_before = {str(tp): off for tp, off in sorted(lso.items())}
        return Recheck.go(_plain_description(item.before))

    def act(self, cluster: Cluster, item: _FenceItem) -> Acted:
        retried = cluster.fence_transactional_id_retrying(item.transactional_id, fence_timeout_ms(item.before, self.broker_max_ms))
        return Acted(f"retried after {', '.join(retried)}; " if retried else "")

    def no_answer(self, item: _FenceItem, exc: BaseException) -> str:
        return f"InitProducerId failed: {exc}"

    def verify(self, cluster: Cluster, item: _FenceItem) -> tuple[Verification, Any]:
        """A newer epoch, nothing left open, and the LSO of the partitions the transaction held (as
        Kafka's tool leaves it to the user to check)."""
        still_open: list[TopicPartition] = []
        still_pinned: list[tuple[TopicPartition, int]] = []
        lso_held: list[str] = []
        failed = ""
        try:
            found, _unknown, _unanswered = _describe(cluster, [item.transactional_id])
            item.after = found.get(item.transactional_id)
            before = item.before
            held = sorted(set(item.starts) | set(before.partitions if before is not None else ()))
            if before is not None and held:
                now_open = _open_partitions(cluster, before.producer_id, held)
                left = sorted(tp for tp, start in now_open.items() if item.starts.get(tp, start) == start)
                still_open = [tp for tp in left if tp in before.partitions]
                still_pinned = [(tp, now_open[tp]) for tp in left if tp not in before.partitions]
                lso = cluster.list_offsets(held, read_committed=True).value
                item.lso_after = {str(tp): off for tp, off in sorted(lso.items())}
                lso_held = [str(tp) for tp, start in sorted(item.starts.items()) if tp in lso and lso[tp] <= start and tp not in left]
        except KafkatxnError as exc:
            failed = f"fenced; verifying failed: {exc}; "
        verdict = verify_fence(item.before, item.after, still_open, lso_held, still_pinned)
        # What could not be looked at is said, never taken as "nothing pinned there".
        unchecked = (f"; not checked for other open transactions of its producer (no answer): "
                     f"{', '.join(str(m.subject) for m in item.unasked[:5])}{' …' if len(item.unasked) > 5 else ''}"
                     if item.unasked else "")
        return replace(verdict, detail=failed + verdict.detail + unchecked), _plain_description(item.after)


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
        raise InputError("name transactional ids or pass {pattern} REGEX (not both)")
    if allow_two_phase_commit and pattern is not None:
        raise InputError("{allow_two_phase_commit} needs the transactional ids named, not {pattern}")
    if pattern is not None:
        matching_ids([], pattern)  # a bad regex is a usage error before any request
    remedy = Fence(transactional_ids, pattern, allow_unknown, allow_two_phase_commit)
    return run(remedy, cluster, audit=audit, confirm=confirm, dry_run=dry_run)
