"""The audit's decisions: pure functions over ``__transaction_state`` histories, no Spark, no broker.

The rule the audit enforces: a transactional id stays the same across restarts of one application
instance and differs between instances. The log shows both breaches.

What the coordinator writes (Kafka 3.x/4.x ``TransactionMetadata``), one record per transition:

* ``Empty``: InitProducerId. A new id gets a producer id and epoch 0; an existing id keeps its
  producer id and bumps the epoch (a new producer id once epochs run out). So every ``Empty`` record
  is one producer (re)initialising the id: a start, a restart, or a fence of another holder.
* ``Ongoing``: partitions added to the open transaction (epoch unchanged).
* ``PrepareCommit``/``PrepareAbort`` then ``CompleteCommit``/``CompleteAbort``: the end of a transaction.
  A client's own EndTxn keeps the epoch under transaction version 0/1 and bumps it by one under
  transaction version 2 (KIP-890: every commit or abort bumps the epoch, which is why an epoch bump
  alone is never evidence of fencing).
* A coordinator-initiated abort (InitProducerId from another producer while a transaction is
  open, or the transaction timing out) fences the epoch and aborts. How that shows depends on the
  versions, so each case has its own test (what a 4.3.1 broker writes was read off a real log):

  - client TV 0/1 (librdkafka, older Java clients): the client's own abort keeps its epoch and its
    version, so a ``PrepareAbort`` whose epoch moved past the open transaction's, or whose
    ``client_transaction_version`` differs from the open transaction's (a TV2 broker writes its own
    version, 2, on the aborts it initiates), was written by the coordinator;
  - client TV 2: every abort bumps the epoch once, the client's and the coordinator's alike. What
    follows tells them apart: a fencing abort is followed by the fencer's InitProducerId (``Empty``)
    as soon as the abort completes, a client's abort by its next transaction.

  A coordinator abort at or past the transaction's timeout (``last_update - start >= timeout_ms``)
  is a **timeout**; before it, a **fence**. ``PrepareEpochFence`` records, should a broker ever
  persist one, count as fences too (once, with the abort that follows).

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

**Inventory conflicts** (warning): an id or prefix declared by two instances; a declaration nothing
in the log matches; seen ids no declaration covers (grouped by family).

Timestamps are the coordinator's (``last_update_timestamp_ms``); tombstones carry the Kafka record
timestamp when the input has one. "Now" for expiry is the newest timestamp in the data, so the
result depends on the data only.
"""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, NamedTuple, Sequence

# Families (an id's shape, the framework it matches) live in families.py, which the live exporter
# uses without this module; their names stay importable here.
from kafkatxn.audit.families import (  # noqa: F401
    ADVICE, FRAMEWORK_FLINK, FRAMEWORK_NUMBERED, FRAMEWORK_OTHER, FRAMEWORK_RANDOM, FRAMEWORK_STREAMS, STATE_BYTES_PER_ID,
    STATE_BYTES_PER_PARTITION, family_of, framework_of, state_bytes,
)
from kafkatxn.errors import UsageError

SEVERITY_CRITICAL = "critical"
SEVERITY_WARNING = "warning"

DEFAULT_ID_EXPIRATION_MS = 7 * 86_400_000  # transactional.id.expiration.ms default
MAX_LISTED = 10  # producer ids, examples: enough to act on, bounded per row
MAX_STORM_LISTED = 20  # epochs and intervals of a storm


@dataclass(frozen=True)
class AuditParams:
    min_fences: int = 3
    fence_window_ms: int = 10 * 60_000
    min_family_size: int = 5
    one_shot_share: float = 0.8
    replacement_factor: float = 3.0
    id_expiration_ms: int = DEFAULT_ID_EXPIRATION_MS
    storm_min_inits: int = 6  # InitProducerIds within storm_window_ms that make a re-initialisation storm
    storm_window_ms: int = 10 * 60_000
    storm_family_factor: float = 2.0  # ... and at least this many times its siblings' (a per-batch writer re-inits them all)
    storm_severity: str = SEVERITY_CRITICAL


class HistoryRecord(NamedTuple):
    """One row of a captured history (the data source's columns, in order); TxnLogRecord works too."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    partitions: tuple
    timeout_ms: int
    start_timestamp_ms: int
    last_update_timestamp_ms: int
    client_transaction_version: int
    previous_producer_id: int
    next_producer_id: int
    next_producer_epoch: int
    value_version: int
    tombstone: bool
    log_partition: int
    log_offset: int
    record_timestamp_ms: int = -1


# --------------------------------------------------------------------------------------------
# Per-id history
# --------------------------------------------------------------------------------------------


@dataclass
class IdStats:
    """What one transactional id's history shows; one row per id (``ids`` in ``--report``)."""

    transactional_id: str
    family: str
    log_partition: int
    records: int = 0
    first_seen_ms: int = -1
    last_seen_ms: int = -1
    inits: int = 0  # InitProducerId calls (Empty records)
    transactions: int = 0  # ends seen (PrepareCommit/PrepareAbort)
    commits: int = 0
    aborts: int = 0
    fences: int = 0  # coordinator aborts before the timeout, plus PrepareEpochFence records
    timeouts: int = 0  # coordinator aborts at or past the timeout
    max_fences_in_window: int = 0
    first_fence_ms: int = -1
    last_fence_ms: int = -1
    min_epoch: int = -1
    max_epoch: int = -1
    producer_ids: list[int] = field(default_factory=list)  # distinct, in order of appearance, at most MAX_LISTED
    producer_id_count: int = 0
    client_transaction_version: int = 0  # the highest seen
    partitions_written: int = 0  # distinct topic partitions its transactions touched
    expired: bool = False  # the last record is a tombstone
    declared_by: list[int] = field(default_factory=list)  # indexes of matching inventory declarations
    # The densest storm_window_ms of InitProducerIds (the re-initialisation storm rule's evidence):
    max_inits_in_window: int = 0
    storm_first_init_ms: int = -1
    storm_last_init_ms: int = -1
    storm_epochs: list[int] = field(default_factory=list)  # epoch each init gave, at most MAX_STORM_LISTED
    storm_intervals_ms: list[int] = field(default_factory=list)  # between consecutive inits, at most MAX_STORM_LISTED
    storm_median_interval_ms: int = -1
    storm_inits_fencing: int = 0  # inits in the window that fenced an open transaction
    storm_intervals_with_commits: int = 0  # intervals between inits in which a transaction committed


def _ts(record: Any) -> int:
    if record.tombstone:
        return getattr(record, "record_timestamp_ms", -1)
    return record.last_update_timestamp_ms


def densest_window(times: Sequence[int], window_ms: int) -> tuple[int, int]:
    """``(lo, hi)``: the first, largest run ``times[lo:hi]`` (sorted) within a span of ``window_ms``."""
    best = (0, 0)
    lo = 0
    for hi, t in enumerate(times):
        while t - times[lo] > window_ms:
            lo += 1
        if hi + 1 - lo > best[1] - best[0]:
            best = (lo, hi + 1)
    return best


def max_in_window(times: Sequence[int], window_ms: int) -> int:
    """The largest number of ``times`` (sorted) within any span of ``window_ms``."""
    lo, hi = densest_window(times, window_ms)
    return hi - lo


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        return 0.0
    mid = n // 2
    return float(ordered[mid]) if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def storm_evidence(stats: IdStats, inits: list[tuple[int, int, bool, int]], params: AuditParams) -> None:
    """Fill the storm fields from ``(time, epoch, fenced an open txn, commits so far)`` per init, in log order."""
    if not inits:
        return
    times = [i[0] for i in inits]
    if any(b < a for a, b in zip(times, times[1:])):  # log order is time order per id; be safe with clock skew
        inits = sorted(inits, key=lambda i: i[0])
        times = [i[0] for i in inits]
    lo, hi = densest_window(times, params.storm_window_ms)
    window = inits[lo:hi]
    stats.max_inits_in_window = hi - lo
    stats.storm_first_init_ms, stats.storm_last_init_ms = window[0][0], window[-1][0]
    stats.storm_epochs = [i[1] for i in window][:MAX_STORM_LISTED]
    intervals = [b[0] - a[0] for a, b in zip(window, window[1:])]
    stats.storm_intervals_ms = intervals[:MAX_STORM_LISTED]
    stats.storm_median_interval_ms = int(_median(intervals)) if intervals else -1
    stats.storm_inits_fencing = sum(1 for i in window if i[2])
    stats.storm_intervals_with_commits = sum(1 for a, b in zip(window, window[1:]) if b[3] > a[3])


def summarize_id(
    records: Sequence[Any], params: AuditParams = AuditParams(), inventory: "InventoryIndex | None" = None
) -> IdStats:
    """Walk one id's records in log order (log_offset) and count what happened to it."""
    first = records[0]
    tid = first.transactional_id
    stats = IdStats(tid, family_of(tid), first.log_partition)
    open_txn: dict[int, tuple[int, int]] = {}  # producer id -> (epoch, client TV) of its open transaction
    last_epoch: dict[int, int] = {}  # producer id -> epoch of its latest record
    fenced_pending = False  # a PrepareEpochFence was counted; its PrepareAbort is the same fence
    candidate = -1  # time of a TV2 abort that is a fence if an InitProducerId comes next
    fence_times: list[int] = []
    pids: dict[int, None] = {}
    partitions: set[str] = set()
    first_seen = last_seen = -1
    min_epoch = max_epoch = -1
    tv = 0
    tomb_first = tomb_last = -1
    inits: list[tuple[int, int, bool, int]] = []  # (time, epoch, fenced an open transaction, commits before it)
    fences_at_last_init = 0
    for r in records:
        stats.records += 1
        if r.tombstone:
            # Expiry is not activity: a tombstone's time counts only when nothing else is left.
            t = _ts(r)
            if t >= 0:
                tomb_first = t if tomb_first < 0 else min(tomb_first, t)
                tomb_last = max(tomb_last, t)
            stats.expired = True
            open_txn.clear()
            candidate = -1
            continue
        stats.expired = False
        t = r.last_update_timestamp_ms
        if t >= 0:
            first_seen = t if first_seen < 0 else min(first_seen, t)
            last_seen = max(last_seen, t)
        state = r.state
        pid = r.producer_id
        epoch = r.producer_epoch
        if pid >= 0:
            pids.setdefault(pid, None)
        if epoch >= 0:
            min_epoch = epoch if min_epoch < 0 else min(min_epoch, epoch)
            max_epoch = max(max_epoch, epoch)
        if r.client_transaction_version > tv:
            tv = r.client_transaction_version
        if candidate >= 0 and state != "CompleteAbort":
            if state == "Empty":  # the fencer's InitProducerId, retried once the abort completed
                fence_times.append(candidate)
            candidate = -1
        if state == "Empty":
            stats.inits += 1
            open_txn.pop(pid, None)
            inits.append((t, epoch, len(fence_times) > fences_at_last_init, stats.commits))
            fences_at_last_init = len(fence_times)
        elif state == "Ongoing":
            open_txn.setdefault(pid, (epoch, r.client_transaction_version))
            partitions.update(r.partitions)
        elif state == "PrepareCommit" or state == "PrepareAbort":
            stats.transactions += 1
            opened = open_txn.pop(pid, None)
            if state == "PrepareCommit":
                stats.commits += 1
            else:
                stats.aborts += 1
                if fenced_pending:
                    fenced_pending = False
                elif opened is not None or pid in last_epoch:
                    base, client_tv = opened if opened is not None else (last_epoch[pid], r.client_transaction_version)
                    elapsed = r.last_update_timestamp_ms - r.start_timestamp_ms
                    timed_out = r.timeout_ms > 0 and r.start_timestamp_ms >= 0 and elapsed >= r.timeout_ms
                    if client_tv < 2:
                        # The client's own EndTxn keeps its epoch and its version; a coordinator abort does not.
                        by_coordinator = epoch - base > 0 or r.client_transaction_version != client_tv
                        if by_coordinator and timed_out:
                            stats.timeouts += 1
                        elif by_coordinator:
                            fence_times.append(r.last_update_timestamp_ms)
                    elif timed_out:
                        stats.timeouts += 1
                    elif opened is not None:
                        # TV2: every abort bumps the epoch once, so only what follows tells: a fence
                        # is followed by the fencer's InitProducerId; a client abort by its next transaction.
                        candidate = r.last_update_timestamp_ms
        elif state == "PrepareEpochFence":
            fence_times.append(r.last_update_timestamp_ms)
            fenced_pending = True
        if pid >= 0 and epoch >= 0:
            last_epoch[pid] = epoch
    storm_evidence(stats, inits, params)
    fence_times.sort()
    stats.fences = len(fence_times)
    if fence_times:
        stats.first_fence_ms, stats.last_fence_ms = fence_times[0], fence_times[-1]
        stats.max_fences_in_window = max_in_window(fence_times, params.fence_window_ms)
    if first_seen < 0:
        first_seen, last_seen = tomb_first, tomb_last
    stats.first_seen_ms, stats.last_seen_ms = first_seen, last_seen
    stats.min_epoch, stats.max_epoch = min_epoch, max_epoch
    stats.producer_ids = list(pids)[:MAX_LISTED]
    stats.producer_id_count = len(pids)
    stats.client_transaction_version = tv
    stats.partitions_written = len(partitions)
    if inventory is not None:
        stats.declared_by = inventory.match(tid)
    return stats


def group_histories(records: Iterable[Any]) -> Iterator[list[Any]]:
    """Records grouped by transactional id, each group in log order, ids sorted."""
    by_id: dict[str, list[Any]] = defaultdict(list)
    for r in records:
        if r.transactional_id is not None:
            by_id[r.transactional_id].append(r)
    for tid in sorted(by_id):
        group = by_id[tid]
        group.sort(key=lambda r: (r.log_partition, r.log_offset))
        yield group


# --------------------------------------------------------------------------------------------
# Findings
# --------------------------------------------------------------------------------------------


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


@dataclass(frozen=True)
class InventoryFinding:
    kind: str  # declared_twice, declared_not_seen, undeclared
    severity: str
    subject: str  # the id, prefix or family concerned
    declared_by: list[str]  # "application/instance" of each declaration involved
    ids_seen: int
    first_seen_ms: int
    last_seen_ms: int
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
    return _median(rest) if rest else -1.0


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


# --------------------------------------------------------------------------------------------
# Inventory
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Declaration:
    application: str
    instance: str
    transactional_id: str | None = None
    prefix: str | None = None

    @property
    def owner(self) -> str:
        return f"{self.application}/{self.instance}"

    @property
    def subject(self) -> str:
        return self.transactional_id if self.transactional_id is not None else f"{self.prefix}*"

    def covers(self, tid: str) -> bool:
        if self.transactional_id is not None:
            return tid == self.transactional_id
        return tid.startswith(self.prefix or "")


class InventoryIndex:
    """Finds the declarations covering an id: exact ids by dict, prefixes by one lookup per length."""

    def __init__(self, declarations: Sequence[Declaration]):
        self.declarations = list(declarations)
        self._exact: dict[str, list[int]] = defaultdict(list)
        self._prefix: dict[str, list[int]] = defaultdict(list)
        for i, d in enumerate(self.declarations):
            if d.transactional_id is not None:
                self._exact[d.transactional_id].append(i)
            else:
                self._prefix[d.prefix or ""].append(i)
        self._lengths = sorted({len(p) for p in self._prefix})

    def match(self, tid: str) -> list[int]:
        found = list(self._exact.get(tid, ()))
        for n in self._lengths:
            if n > len(tid):
                break
            found.extend(self._prefix.get(tid[:n], ()))
        return sorted(found)


def parse_inventory(text: str, source: str = "<inventory>") -> list[Declaration]:
    """CSV (header: application,instance,transactional_id,prefix) or JSON (a list of such objects,
    or ``{"declarations": [...]}``); each declaration names an id or a prefix, not both."""
    stripped = text.lstrip()
    if stripped.startswith("[") or stripped.startswith("{"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{source}: not valid JSON: {exc.msg} at line {exc.lineno}") from None
        except RecursionError:  # json gives up on deep nesting this way, not with JSONDecodeError
            raise UsageError(f"{source}: not valid JSON: nested too deeply") from None
        rows = doc.get("declarations") if isinstance(doc, dict) else doc
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise UsageError(f"{source}: expected a list of objects with application, instance, transactional_id or prefix")
        numbered = [(i + 1, r) for i, r in enumerate(rows)]
        where = "entry"
    else:
        reader = csv.DictReader(io.StringIO(text))
        header = [h.strip() for h in (reader.fieldnames or [])]
        if not {"application", "instance"} <= set(header) or not ({"transactional_id", "prefix"} & set(header)):
            raise UsageError(f"{source}: CSV header must have application, instance, and transactional_id and/or prefix")
        numbered = [(reader.line_num, {(k or "").strip(): v for k, v in r.items()}) for r in reader]
        where = "line"
    out: list[Declaration] = []
    for n, row in numbered:
        app = str(row.get("application") or "").strip()
        inst = str(row.get("instance") or "").strip()
        tid = str(row.get("transactional_id") or "").strip() or None
        prefix = str(row.get("prefix") or "").strip() or None
        if not app or not inst:
            raise UsageError(f"{source}: {where} {n}: application and instance are required")
        if (tid is None) == (prefix is None):
            raise UsageError(f"{source}: {where} {n}: give exactly one of transactional_id and prefix")
        out.append(Declaration(app, inst, tid, prefix))
    return out


def read_inventory(path: str | Path) -> list[Declaration]:
    path = Path(path).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"inventory file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read inventory file {path}: {exc.__class__.__name__}") from None
    return parse_inventory(text, str(path))


def _overlap(a: Declaration, b: Declaration) -> str | None:
    """The id or prefix two declarations both claim, or None."""
    if a.transactional_id is not None and b.transactional_id is not None:
        return a.transactional_id if a.transactional_id == b.transactional_id else None
    if a.transactional_id is not None:
        return a.transactional_id if b.covers(a.transactional_id) else None
    if b.transactional_id is not None:
        return b.transactional_id if a.covers(b.transactional_id) else None
    pa, pb = a.prefix or "", b.prefix or ""
    if pa.startswith(pb):
        return f"{pa}*"
    if pb.startswith(pa):
        return f"{pb}*"
    return None


@dataclass(frozen=True)
class UndeclaredGroup:
    family: str
    ids_seen: int
    first_seen_ms: int
    last_seen_ms: int
    examples: list[str]


def undeclared_groups(stats: Iterable[IdStats]) -> list[UndeclaredGroup]:
    """Seen ids no declaration covers, by family (what the Spark job computes with a groupBy)."""
    groups: dict[str, list[IdStats]] = defaultdict(list)
    for s in stats:
        if not s.declared_by:
            groups[s.family].append(s)
    return [
        UndeclaredGroup(
            fam,
            len(members),
            min(m.first_seen_ms for m in members),
            max(m.last_seen_ms for m in members),
            sorted(m.transactional_id for m in members)[:3],
        )
        for fam, members in groups.items()
    ]


def inventory_findings(
    declarations: Sequence[Declaration], matched: set[int], undeclared: Iterable[UndeclaredGroup]
) -> list[InventoryFinding]:
    """Conflicts within the inventory, declarations nothing matched, and seen ids nobody declared."""
    out: list[InventoryFinding] = []
    for i, a in enumerate(declarations):
        for b in declarations[i + 1 :]:
            if (a.application, a.instance) == (b.application, b.instance):
                continue
            claimed = _overlap(a, b)
            if claimed is not None:
                out.append(InventoryFinding("declared_twice", SEVERITY_WARNING, claimed, [a.owner, b.owner], 0, -1, -1, []))
    for i, d in enumerate(declarations):
        if i not in matched:
            out.append(InventoryFinding("declared_not_seen", SEVERITY_WARNING, d.subject, [d.owner], 0, -1, -1, []))
    for g in undeclared:
        out.append(
            InventoryFinding("undeclared", SEVERITY_WARNING, g.family, [], g.ids_seen, g.first_seen_ms, g.last_seen_ms, list(g.examples))
        )
    return sort_inventory(out)


def sort_inventory(findings: Iterable[InventoryFinding]) -> list[InventoryFinding]:
    order = {"declared_twice": 0, "declared_not_seen": 1, "undeclared": 2}
    return sorted(findings, key=lambda f: (order.get(f.kind, 9), f.subject, f.declared_by))


# --------------------------------------------------------------------------------------------
# The whole audit
# --------------------------------------------------------------------------------------------


@dataclass
class AuditResult:
    records: int
    transactional_ids: int
    unknown_records: int
    corrupt_records: int
    first_record_ms: int
    last_record_ms: int
    shared_ids: list[SharedIdFinding]
    unstable_ids: list[UnstableFamilyFinding]
    inventory: list[InventoryFinding]
    init_storms: list[InitStormFinding] = field(default_factory=list)
    families: list[FamilySummary] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        from kafkatxn.errors import EXIT_CRITICAL, EXIT_OK, EXIT_WARNING

        if self.shared_ids or any(f.severity == SEVERITY_CRITICAL for f in self.init_storms):
            return EXIT_CRITICAL
        if self.unstable_ids or self.inventory or self.init_storms:
            return EXIT_WARNING
        return EXIT_OK

    def comparable(self) -> dict:
        """Everything but where the data came from: two runs over the same data compare equal."""
        from kafkatxn.output import to_plain

        doc = to_plain(self)
        doc.pop("sources", None)
        return doc


def finish(
    stats: Sequence[IdStats],
    params: AuditParams,
    records: int,
    unknown: int,
    corrupt: int,
    declarations: Sequence[Declaration] | None,
) -> AuditResult:
    """Findings from per-id stats; the reference for what the Spark job does stage by stage."""
    shared = sorted(
        (f for f in (shared_id_finding(s, params) for s in stats) if f is not None), key=lambda f: f.transactional_id
    )
    families: dict[str, list[IdStats]] = defaultdict(list)
    for s in stats:
        families[s.family].append(s)
    unstable = sorted(
        (f for f in (unstable_family_finding(fam, ms, params) for fam, ms in families.items()) if f is not None),
        key=lambda f: f.family,
    )
    churning = {f.family for f in unstable}
    summaries = sort_families(
        f for f in (family_summary(fam, ms, params, fam in churning) for fam, ms in families.items()) if f is not None
    )
    storms = sorted(
        (
            f
            for f in (
                init_storm_finding(s, params, [m.max_inits_in_window for m in families[s.family]])
                for s in stats
                if s.max_inits_in_window >= params.storm_min_inits
            )
            if f is not None
        ),
        key=lambda f: f.transactional_id,
    )
    inventory: list[InventoryFinding] = []
    if declarations is not None:
        matched = {i for s in stats for i in s.declared_by}
        inventory = inventory_findings(declarations, matched, undeclared_groups(stats))
    seen = [t for s in stats for t in (s.first_seen_ms, s.last_seen_ms) if t >= 0]
    return AuditResult(
        records=records,
        transactional_ids=len(stats),
        unknown_records=unknown,
        corrupt_records=corrupt,
        first_record_ms=min(seen, default=-1),
        last_record_ms=max(seen, default=-1),
        shared_ids=shared,
        unstable_ids=unstable,
        inventory=inventory,
        init_storms=storms,
        families=summaries,
    )


def sort_families(rows: Iterable[FamilySummary]) -> list[FamilySummary]:
    return sorted(rows, key=lambda f: (-f.estimated_state_bytes, f.family))


def audit_local(
    records: Iterable[Any],
    params: AuditParams = AuditParams(),
    declarations: Sequence[Declaration] | None = None,
    unknown: int = 0,
    corrupt: int = 0,
) -> AuditResult:
    """The whole audit in one process: the benchmark reference and the oracle for the Spark job.

    ``records`` are decoded records (TxnLogRecord or HistoryRecord), in any order; duplicates of
    one log position (a history overlapping the live log) count once.
    """
    seen_positions: set[tuple[int, int]] = set()
    unique: list[Any] = []
    for r in records:
        pos = (r.log_partition, r.log_offset)
        if pos in seen_positions:
            continue
        seen_positions.add(pos)
        unique.append(r)
    index = InventoryIndex(declarations) if declarations is not None else None
    stats = [summarize_id(group, params, index) for group in group_histories(unique)]
    return finish(stats, params, len(unique), unknown, corrupt, declarations)



