"""The audit's findings over per-id histories (:mod:`kafkatxn.audit.history`): pure, no Spark, no broker.

**Shared id** (critical): ``min_fences`` or more fences within ``fence_window_ms``. A restart
explains one fence: the new instance fences its own zombie's open transaction. Two live instances
sharing an id fence each other every time either one re-initialises, so fences come in bursts.
A crash loop that dies mid-transaction every time looks the same in the log; the evidence (fence
times, inits) tells the two apart.

**Unstable ids** (warning): ids are grouped into families by masking UUIDs, ISO timestamps, hex
runs and numbers (``job-{uuid}``, ``app-{n}``). A family is unstable when it has at least
``min_family_size`` members, at least ``one_shot_share`` of them lived once (a single
InitProducerId), and the family is much larger than the number of members alive at the same time
(``size >= replacement_factor * peak concurrency``): members are being replaced, not reused.
A stable per-partition scheme (``app-q-0`` … ``app-q-7``) has all members alive together, and
restarts make them return (several InitProducerIds), so it is never flagged. Each unstable member
pins coordinator state (and producer state on every partition it wrote to) until
``transactional.id.expiration.ms`` after its last use; the finding says how many and until when.

An id initialised again and again within ``storm_window_ms`` (``storm_min_inits`` or more, and
``storm_family_factor`` times its siblings') is a **re-initialisation storm**: two live instances
taking turns, or a crash loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, NamedTuple, Sequence

from kafkatxn.audit.families import ADVICE, FRAMEWORK_OTHER, STATE_BYTES_PER_PARTITION, framework_of, state_bytes
from kafkatxn.audit.history import SEVERITY_CRITICAL, SEVERITY_WARNING, AuditParams, IdStats, median


@dataclass(frozen=True)
class SharedIdFinding:
    transactional_id: str
    severity: str
    fences: int
    max_fences_in_window: int
    fence_window_ms: int
    inits: int
    transactions: int
    commits: int
    aborts: int
    timeouts: int
    first_seen_ms: int
    last_seen_ms: int
    first_fence_ms: int
    last_fence_ms: int
    min_epoch: int
    max_epoch: int
    producer_ids: list[int]
    client_transaction_version: int
    log_partition: int


@dataclass(frozen=True)
class UnstableFamilyFinding:
    family: str
    severity: str
    family_size: int
    one_shot_ids: int
    peak_concurrent_ids: int
    first_seen_ms: int
    last_seen_ms: int
    creation_rate_per_hour: float | None
    transactions: int
    pinned_ids: int  # members not yet expired: each holds coordinator state
    pinned_partitions: int  # producer-state entries their transactions left on partitions
    pinned_until_ms: int  # when the last of them expires (last use + id expiration)
    steady_state_pinned_ids: int | None  # creation rate x id expiration
    id_expiration_ms: int
    examples: list[str]
    framework: str  # whose naming the family's shape matches (FRAMEWORK_*)
    estimated_state_bytes: int  # what the pinned ids and partitions hold on the brokers (order of magnitude)
    steady_state_bytes: int | None  # the same at the steady state
    advice: str


@dataclass(frozen=True)
class FamilySummary:
    """Every family whose shape a framework writes (or that is unstable): what the brokers hold for it."""

    family: str
    framework: str
    verdict: str  # churning (an unstable family) | stable
    ids: int
    live_ids: int  # not expired: held until transactional.id.expiration.ms after their last use
    live_partitions: int  # producer-state entries their transactions left on partitions
    estimated_state_bytes: int
    held_until_ms: int  # when the last live member expires (-1: none live)
    id_expiration_ms: int
    examples: list[str]


def shared_id_finding(stats: IdStats, params: AuditParams = AuditParams()) -> SharedIdFinding | None:
    if stats.max_fences_in_window < params.min_fences:
        return None
    return SharedIdFinding(
        transactional_id=stats.transactional_id,
        severity=SEVERITY_CRITICAL,
        fences=stats.fences,
        max_fences_in_window=stats.max_fences_in_window,
        fence_window_ms=params.fence_window_ms,
        inits=stats.inits,
        transactions=stats.transactions,
        commits=stats.commits,
        aborts=stats.aborts,
        timeouts=stats.timeouts,
        first_seen_ms=stats.first_seen_ms,
        last_seen_ms=stats.last_seen_ms,
        first_fence_ms=stats.first_fence_ms,
        last_fence_ms=stats.last_fence_ms,
        min_epoch=stats.min_epoch,
        max_epoch=stats.max_epoch,
        producer_ids=list(stats.producer_ids),
        client_transaction_version=stats.client_transaction_version,
        log_partition=stats.log_partition,
    )


@dataclass(frozen=True)
class InitStormFinding:
    """One id initialised again and again within ``init_window_ms``: two live instances taking turns, or a crash loop."""

    transactional_id: str
    severity: str
    likely_cause: str  # instances_taking_turns | crash_loop
    max_inits_in_window: int
    init_window_ms: int
    inits: int  # over the whole history
    first_init_ms: int  # of the densest window
    last_init_ms: int
    epochs: list[int]  # the epoch each init in the window gave (a new producer id restarts at 0)
    intervals_ms: list[int]  # between consecutive inits in the window
    median_interval_ms: int
    inits_fencing_open_transaction: int  # inits in the window that aborted another holder's open transaction
    intervals_with_commits: int  # intervals in the window in which the id committed work
    family: str
    family_size: int
    siblings_median_inits: float  # the rest of the family's busiest windows (-1: no siblings)
    producer_ids: list[int]
    commits: int
    aborts: int
    timeouts: int
    client_transaction_version: int
    log_partition: int


def storm_cause(stats: IdStats) -> str:
    """Which a storm most likely is. Live instances taking turns each do work between their inits
    (a commit in most intervals); a crash loop dies before or during its first transactions."""
    intervals = max(stats.max_inits_in_window - 1, 1)
    return "instances_taking_turns" if stats.storm_intervals_with_commits * 2 >= intervals else "crash_loop"


def siblings_median(values: Sequence[int], own: int) -> float:
    """Median of a family's ``max_inits_in_window`` without one occurrence of ``own``; -1 without siblings."""
    rest = list(values)
    rest.remove(own)
    return median(rest) if rest else -1.0


def init_storm_finding(
    stats: IdStats, params: AuditParams = AuditParams(), family_inits: Sequence[int] | None = None
) -> InitStormFinding | None:
    """A storm: ``storm_min_inits`` inits within ``storm_window_ms``, and (with siblings in its family)
    at least ``storm_family_factor`` times their median. A writer that re-initialises every id of a
    fixed set once per batch (kafkatxn.spark, Flink's pooled ids) keeps all siblings at one rate;
    an id two instances share is initialised by both, more often than its siblings."""
    n = stats.max_inits_in_window
    if n < params.storm_min_inits:
        return None
    values = list(family_inits) if family_inits is not None else [n]
    siblings = siblings_median(values, n)
    if siblings >= 0 and n < params.storm_family_factor * siblings:
        return None
    return InitStormFinding(
        transactional_id=stats.transactional_id,
        severity=params.storm_severity,
        likely_cause=storm_cause(stats),
        max_inits_in_window=n,
        init_window_ms=params.storm_window_ms,
        inits=stats.inits,
        first_init_ms=stats.storm_first_init_ms,
        last_init_ms=stats.storm_last_init_ms,
        epochs=list(stats.storm_epochs),
        intervals_ms=list(stats.storm_intervals_ms),
        median_interval_ms=stats.storm_median_interval_ms,
        inits_fencing_open_transaction=stats.storm_inits_fencing,
        intervals_with_commits=stats.storm_intervals_with_commits,
        family=stats.family,
        family_size=len(values),
        siblings_median_inits=siblings,
        producer_ids=list(stats.producer_ids),
        commits=stats.commits,
        aborts=stats.aborts,
        timeouts=stats.timeouts,
        client_transaction_version=stats.client_transaction_version,
        log_partition=stats.log_partition,
    )


class FamilyMember(NamedTuple):
    """What the family rules read of an IdStats (the Spark job's family stage moves only these)."""

    transactional_id: str
    first_seen_ms: int
    last_seen_ms: int
    inits: int
    transactions: int
    partitions_written: int
    expired: bool


def peak_concurrency(intervals: Iterable[tuple[int, int]]) -> int:
    """Most intervals ``[start, end]`` open at one instant (touching ends overlap)."""
    events: list[tuple[int, int]] = []
    for start, end in intervals:
        events.append((start, 0))  # starts sort before ends at the same instant
        events.append((max(start, end), 1))
    events.sort()
    live = peak = 0
    for _, kind in events:
        if kind == 0:
            live += 1
            peak = max(peak, live)
        else:
            live -= 1
    return peak


def unstable_family_finding(
    family: str, members: Sequence[IdStats], params: AuditParams = AuditParams(), now_ms: int | None = None
) -> UnstableFamilyFinding | None:
    size = len(members)
    if size < params.min_family_size:
        return None
    one_shot = sum(1 for m in members if m.inits <= 1)
    if one_shot < params.one_shot_share * size:
        return None
    peak = peak_concurrency((m.first_seen_ms, m.last_seen_ms) for m in members)
    if size < params.replacement_factor * max(peak, 1):
        return None
    firsts = sorted(m.first_seen_ms for m in members)
    span_ms = firsts[-1] - firsts[0]
    rate = round((size - 1) * 3_600_000 / span_ms, 3) if span_ms > 0 else None
    last_seen = max(m.last_seen_ms for m in members)
    now = last_seen if now_ms is None else now_ms
    pinned = [m for m in members if not m.expired and m.last_seen_ms + params.id_expiration_ms > now]
    steady = round(rate * params.id_expiration_ms / 3_600_000) if rate is not None else None
    framework = framework_of(family)
    per_member_partitions = sum(m.partitions_written for m in members) / size
    return UnstableFamilyFinding(
        family=family,
        severity=SEVERITY_WARNING,
        family_size=size,
        one_shot_ids=one_shot,
        peak_concurrent_ids=peak,
        first_seen_ms=firsts[0],
        last_seen_ms=last_seen,
        creation_rate_per_hour=rate,
        transactions=sum(m.transactions for m in members),
        pinned_ids=len(pinned),
        pinned_partitions=sum(m.partitions_written for m in pinned),
        pinned_until_ms=max((m.last_seen_ms for m in pinned), default=last_seen) + params.id_expiration_ms if pinned else -1,
        steady_state_pinned_ids=steady,
        id_expiration_ms=params.id_expiration_ms,
        examples=sorted(m.transactional_id for m in members)[:3],
        framework=framework,
        estimated_state_bytes=state_bytes(len(pinned), sum(m.partitions_written for m in pinned)),
        steady_state_bytes=round(state_bytes(steady, 0) + steady * per_member_partitions * STATE_BYTES_PER_PARTITION)
        if steady is not None else None,
        advice=ADVICE[framework],
    )


def family_summary(
    family: str, members: Sequence[IdStats], params: AuditParams = AuditParams(), unstable: bool = False,
    now_ms: int | None = None,
) -> FamilySummary | None:
    """The family row of the report: for framework-shaped families and unstable ones, None for the rest."""
    framework = framework_of(family)
    if framework == FRAMEWORK_OTHER and not unstable:
        return None
    last_seen = max(m.last_seen_ms for m in members)
    now = last_seen if now_ms is None else now_ms
    live = [m for m in members if not m.expired and m.last_seen_ms + params.id_expiration_ms > now]
    partitions = sum(m.partitions_written for m in live)
    return FamilySummary(
        family=family,
        framework=framework,
        verdict="churning" if unstable else "stable",
        ids=len(members),
        live_ids=len(live),
        live_partitions=partitions,
        estimated_state_bytes=state_bytes(len(live), partitions),
        held_until_ms=max(m.last_seen_ms for m in live) + params.id_expiration_ms if live else -1,
        id_expiration_ms=params.id_expiration_ms,
        examples=sorted(m.transactional_id for m in members)[:3],
    )



def sort_families(rows: Iterable[FamilySummary]) -> list[FamilySummary]:
    return sorted(rows, key=lambda f: (-f.estimated_state_bytes, f.family))
