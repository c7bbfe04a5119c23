"""One transactional id's history in ``__transaction_state``, walked record by record: pure, no Spark, no broker.

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

Timestamps are the coordinator's (``last_update_timestamp_ms``); tombstones carry the Kafka record
timestamp when the input has one. "Now" for expiry is the newest timestamp in the data, so the
result depends on the data only.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, NamedTuple, Protocol, Sequence

from kafkatxn.audit.families import family_of


class DeclarationIndex(Protocol):
    """What the per-id state machine asks of the inventory (:class:`kafkatxn.audit.inventory.InventoryIndex`,
    which builds on this module's severities and stats): the indexes of the declarations covering an id."""

    def match(self, tid: str) -> list[int]: ...


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


def median(values: Sequence[float]) -> float:
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
    stats.storm_median_interval_ms = int(median(intervals)) if intervals else -1
    stats.storm_inits_fencing = sum(1 for i in window if i[2])
    stats.storm_intervals_with_commits = sum(1 for a, b in zip(window, window[1:]) if b[3] > a[3])


def summarize_id(
    records: Sequence[Any], params: AuditParams = AuditParams(), inventory: DeclarationIndex | None = None
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

