"""What happened to a transactional id, read off its ``__transaction_state`` records: pure, no broker.

:class:`Timeline` walks decoded records (:mod:`kafkatxn.kafka.txnlog`) in log order, one id at a time
or many interleaved, and makes one :class:`HistoryRow` per record with the **events** it implies.
What the coordinator writes (Kafka 3.x/4.x ``TransactionCoordinator``/``TransactionMetadata``):

* ``Empty``: InitProducerId (``prepareIncrementProducerEpoch``): the epoch goes up by one; a new
  producer id with epoch 0 when the epoch was exhausted (``prepareProducerIdRotation``, epoch >= 32766).
  Every ``Empty`` is one producer (re)initialising the id: **initialised**.
* ``Ongoing``: partitions added (``prepareAddPartitions``), epoch unchanged: **partitions_added**
  (the first one of a transaction starts it).
* ``PrepareCommit``: **committed** (the commit is decided; markers follow, then ``CompleteCommit``).
* ``PrepareAbort``: the client's EndTxn, or the coordinator's own abort. The coordinator aborts an open
  transaction when another InitProducerId comes (``prepareFenceProducerEpoch``: the epoch goes up by
  one, never returned to a client; the new producer retries and writes ``Empty`` as soon as the abort
  completes) or when it times out (``abortTimedOutTransactions``, the same epoch fence). So:

  - client transaction version 0/1: the client's abort keeps its epoch and its version; a
    ``PrepareAbort`` whose epoch moved past the open transaction's, or whose
    ``client_transaction_version`` differs (the coordinator writes its own), is the coordinator's;
  - version 2 (KIP-890): every EndTxn bumps the epoch, so one bump says nothing; two say coordinator.
    Otherwise what follows tells: the fencer's ``Empty`` right after the abort completes is a fence,
    anything else was the client's abort. Such a row is held until the id's next record (or
    :meth:`Timeline.flush`).

  A coordinator abort at or past the transaction's timeout (``last_update - start >= timeout_ms``)
  is **timed_out_by_coordinator**; before it **fenced_open_transaction** (the row of the abort).
  Otherwise **aborted_by_client**.
* A ``PrepareCommit``/``PrepareAbort`` with ``next_producer_id`` set (TV2: the epoch ran out at this
  end, ``prepareAbortOrCommit``), or an ``Empty`` that moves to a new producer id after an exhausted
  epoch: **epoch_exhausted**; the ``Complete*`` record then carries the new producer id at epoch 0.
* ``PrepareEpochFence``, should a broker ever persist one: **fenced_open_transaction** (once, with its abort).
* A tombstone (or ``Dead``): **expired** (transactional.id.expiration.ms passed, or the id was removed).
* A record the decoder did not know: **unknown_record** (counted, shown, never a crash).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable, Sequence

from kafkatxn.txnlog_records import TxnLogEntry, TxnLogRecord, UndecodedRecord

INITIALISED = "initialised"
PARTITIONS_ADDED = "partitions_added"
COMMITTED = "committed"
ABORTED_BY_CLIENT = "aborted_by_client"
FENCED = "fenced_open_transaction"
TIMED_OUT = "timed_out_by_coordinator"
EPOCH_EXHAUSTED = "epoch_exhausted"
EXPIRED = "expired"
UNKNOWN_RECORD = "unknown_record"
EVENTS = (INITIALISED, PARTITIONS_ADDED, COMMITTED, ABORTED_BY_CLIENT, FENCED, TIMED_OUT, EPOCH_EXHAUSTED, EXPIRED, UNKNOWN_RECORD)

EXHAUSTED_EPOCH = 32766  # TransactionMetadata.isEpochExhausted: epoch >= Short.MaxValue - 1
# A fencer's InitProducerId is retried as soon as the abort it caused completes (CONCURRENT_TRANSACTIONS,
# then the client's backoff): an InitProducerId this long after a TV2 abort is a later start, not its cause.
FENCE_FOLLOW_MS = 10_000
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS


@dataclass(frozen=True)
class HistoryRow:
    """One ``__transaction_state`` record of an id, and what it implies (output keys)."""

    transactional_id: str
    time_ms: int  # the coordinator's last update (a tombstone's: the record's timestamp)
    state: str
    events: tuple[str, ...]
    producer_id: int
    producer_epoch: int
    partitions_added: tuple[str, ...]  # new in this record
    timeout_ms: int
    partitions: tuple[str, ...]  # the transaction's partitions so far (Ongoing, Prepare*)
    client_transaction_version: int
    log_partition: int
    log_offset: int


@dataclass
class _Id:
    last: TxnLogRecord | None = None
    open_epoch: int = -1  # epoch of the open transaction (-1: none)
    open_tv: int = 0
    open_parts: frozenset[str] = frozenset()
    fence_pending: bool = False  # a PrepareEpochFence was counted; its abort is the same fence
    held: list[HistoryRow] = field(default_factory=list)  # a TV2 abort waiting for what follows


class Timeline:
    """Records in, rows out, in log order per id; a TV2 abort whose cause depends on what follows is
    held until the id's next record comes (``feed``) or the read ends (``flush``)."""

    def __init__(self) -> None:
        self.ids: dict[str, _Id] = {}
        self.unknown: list[HistoryRow] = []

    def feed(self, entries: Iterable[TxnLogEntry | TxnLogRecord]) -> list[HistoryRow]:
        out: list[HistoryRow] = []
        for e in entries:
            record, ts = (e.record, e.timestamp_ms) if isinstance(e, TxnLogEntry) else (e, getattr(e, "record_timestamp_ms", -1))
            if type(record) is UndecodedRecord:
                row = HistoryRow("", ts, "unknown", (UNKNOWN_RECORD,), -1, -1, (), -1, (), -1, record.log_partition, record.log_offset)
                self.unknown.append(row)
                out.append(row)
                continue
            out.extend(self._one(record, ts))
        return out

    def flush(self) -> list[HistoryRow]:
        """Rows still held: a TV2 abort nothing followed is the client's."""
        out: list[HistoryRow] = []
        for s in self.ids.values():
            out.extend(_with(r, ABORTED_BY_CLIENT) if r.state == "PrepareAbort" else r for r in s.held)
            s.held = []
        return out

    def _one(self, r: TxnLogRecord, ts: int) -> list[HistoryRow]:
        s = self.ids.setdefault(r.transactional_id, _Id())
        out: list[HistoryRow] = []
        if s.held and r.state != "CompleteAbort":
            soon = r.last_update_timestamp_ms - s.held[0].time_ms <= FENCE_FOLLOW_MS
            cause = FENCED if r.state == "Empty" and soon else ABORTED_BY_CLIENT
            out.extend(_with(h, cause) if h.state == "PrepareAbort" else h for h in s.held)
            s.held = []
        events: list[str] = []
        added: tuple[str, ...] = ()
        hold = False
        prev = s.last
        state = r.state
        if r.tombstone or state == "Dead":
            events.append(EXPIRED)
            s.open_epoch, s.open_parts, s.fence_pending = -1, frozenset(), False
        elif state == "Empty":
            events.append(INITIALISED)
            if prev is not None and not prev.tombstone and prev.producer_id >= 0 and r.producer_id != prev.producer_id \
                    and prev.producer_epoch >= EXHAUSTED_EPOCH:
                events.append(EPOCH_EXHAUSTED)
            s.open_epoch, s.open_parts = -1, frozenset()
        elif state == "Ongoing":
            added = tuple(sorted(set(r.partitions) - s.open_parts))
            if s.open_epoch < 0:
                s.open_epoch, s.open_tv = r.producer_epoch, r.client_transaction_version
            s.open_parts = frozenset(r.partitions)
            if added:
                events.append(PARTITIONS_ADDED)
        elif state == "PrepareCommit":
            events.append(COMMITTED)
            s.open_epoch, s.open_parts = -1, frozenset()
        elif state == "PrepareAbort":
            cause = self._abort_cause(s, r, prev)
            s.open_epoch, s.open_parts = -1, frozenset()
            hold = cause is None
            if cause:
                events.append(cause)
        elif state == "PrepareEpochFence":
            events.append(FENCED)
            s.fence_pending = True
        if state in ("PrepareCommit", "PrepareAbort") and r.next_producer_id >= 0:
            events.append(EPOCH_EXHAUSTED)
        s.last = r
        row = HistoryRow(
            r.transactional_id, ts if r.tombstone else r.last_update_timestamp_ms, "" if r.tombstone else state,
            tuple(events), r.producer_id, r.producer_epoch, added, r.timeout_ms, tuple(r.partitions),
            r.client_transaction_version, r.log_partition, r.log_offset,
        )
        if s.held or hold:
            s.held.append(row)  # its cause is in what follows (or it is the CompleteAbort of one held)
        else:
            out.append(row)
        return out

    @staticmethod
    def _abort_cause(s: _Id, r: TxnLogRecord, prev: TxnLogRecord | None) -> str | None:
        """The event of a PrepareAbort ("": none), or None when only what follows can tell (TV2, one bump)."""
        if s.fence_pending:
            s.fence_pending = False
            return ""  # the abort of a PrepareEpochFence already shown
        if s.open_epoch >= 0:
            base, client_tv = s.open_epoch, s.open_tv
        elif prev is not None and not prev.tombstone and prev.producer_id == r.producer_id:
            base, client_tv = prev.producer_epoch, r.client_transaction_version  # abort of an empty transaction
        else:
            return ABORTED_BY_CLIENT  # nothing earlier was read (--since): as the record says
        timed_out = r.timeout_ms > 0 and r.start_timestamp_ms >= 0 and r.last_update_timestamp_ms - r.start_timestamp_ms >= r.timeout_ms
        bump = r.producer_epoch - base
        if client_tv < 2:
            by_coordinator = bump > 0 or r.client_transaction_version != client_tv
        elif bump >= 2:
            by_coordinator = True
        elif timed_out:
            by_coordinator = True
        else:
            return None
        if not by_coordinator:
            return ABORTED_BY_CLIENT
        return TIMED_OUT if timed_out else FENCED


def _with(row: HistoryRow, event: str) -> HistoryRow:
    return replace(row, events=row.events + (event,))


def timeline(entries: Iterable[TxnLogEntry | TxnLogRecord]) -> list[HistoryRow]:
    """Every row of ``entries`` (in log order), nothing held back."""
    t = Timeline()
    rows = t.feed(entries) + t.flush()
    return sorted(rows, key=lambda r: (r.log_partition, r.log_offset))


def count_events(rows: Sequence[HistoryRow]) -> dict[str, int]:
    counts = dict.fromkeys(EVENTS, 0)
    for r in rows:
        for e in r.events:
            if e in counts:
                counts[e] += 1
    return counts


@dataclass(frozen=True)
class HistorySummary:
    """One id's history in a line, and the counts behind it (diagnose's evidence)."""

    transactional_id: str
    line: str
    records: int
    first_record_ms: int
    last_commit_ms: int
    inits_last_hour: int
    fences_last_hour: int
    inits_followed_by_commits_last_hour: int  # of the intervals between two inits, those with a commit
    timeouts_last_day: int
    fences_last_day: int
    commits_last_day: int
    client_aborts_last_day: int
    epochs_exhausted_last_day: int
    producer_ids: tuple[int, ...]


def _times(n: int) -> str:
    return "once" if n == 1 else "twice" if n == 2 else f"{n} times"


def summarize(transactional_id: str, rows: Sequence[HistoryRow], now_ms: int) -> HistorySummary:
    """What diagnose says of an id's rows (its own, in log order) as of ``now_ms``."""
    hour = [r for r in rows if r.time_ms >= now_ms - HOUR_MS]
    day = [r for r in rows if r.time_ms >= now_ms - DAY_MS]
    h, d = count_events(hour), count_events(day)
    inits = [i for i, r in enumerate(hour) if INITIALISED in r.events]
    with_commits = sum(1 for a, b in zip(inits, inits[1:]) if any(COMMITTED in r.events for r in hour[a:b]))
    commits = [r.time_ms for r in rows if COMMITTED in r.events]
    said: list[str] = []
    n = len(inits)
    if n >= 3 and 2 * with_commits >= n - 1 and h[FENCED]:
        said.append(f"initialised {n} times in the last hour by alternating producers: two instances share this id")
    elif n >= 3 and 2 * with_commits >= n - 1:
        said.append(f"initialised {n} times in the last hour, committing in between: restarts, or instances taking turns")
    elif n >= 3:
        said.append(f"initialised {n} times in the last hour with few commits in between: a crash loop")
    if d[FENCED] and not said:
        said.append(f"fenced an open transaction {_times(d[FENCED])} today (another InitProducerId with this id)")
    if d[TIMED_OUT]:
        said.append(f"timed out and aborted by the coordinator {_times(d[TIMED_OUT])} today")
    if d[EPOCH_EXHAUSTED]:
        said.append(f"ran out of epochs {_times(d[EPOCH_EXHAUSTED])} today (a new producer id each time)")
    if d[ABORTED_BY_CLIENT]:
        said.append(f"aborted by its producer {_times(d[ABORTED_BY_CLIENT])} today")
    said.append(f"committed {_times(d[COMMITTED])} today" if d[COMMITTED] else "no commit today")
    if not day:
        said = ["no record in the transaction log today" if rows else "no record in the transaction log"]
    return HistorySummary(
        transactional_id, "; ".join(said), len(rows), rows[0].time_ms if rows else -1, commits[-1] if commits else -1,
        n, h[FENCED], with_commits, d[TIMED_OUT], d[FENCED], d[COMMITTED], d[ABORTED_BY_CLIENT], d[EPOCH_EXHAUSTED],
        tuple(dict.fromkeys(r.producer_id for r in rows if r.producer_id >= 0)),
    )
