"""The answers every command shares: one definition per question, pure functions over what was gathered.

Is this open transaction hanging, long-running or undetermined? How old is it? Which one pins a
partition's LSO? Where does a consumer group stand, and is it blocked? ``lso``, ``hanging``,
``check``, ``diagnose``, the exporter and ``abort``'s plan all ask here, so two commands never
answer one question two ways. This module imports only :mod:`kafkatxn.model` and the standard
library (tests/unit/test_layering.py checks it); gathering lives in :mod:`kafkatxn.gather`.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Iterable, Mapping, NamedTuple, Sequence

from kafkatxn.model import (
    IDS_ALL, IDS_FILTERED, OPEN_TRANSACTION_STATES, TRANSACTION_STATE_TOPIC, ClusterMetadata, Missing, Part, ProducerState, TopicPartition,
    TransactionalId, TransactionDescription,
)

MAX_TIMEOUT_CONFIG = "transaction.max.timeout.ms"
# How often a coordinator looks for transactions past their own timeout and aborts them.
ABORT_CLEANUP_INTERVAL_CONFIG = "transaction.abort.timed.out.transaction.cleanup.interval.ms"
DEFAULT_ABORT_CLEANUP_INTERVAL_MS = 10_000  # Kafka's default
# After a transaction's own timeout and one cleanup interval, the time its coordinator's abort
# markers may take to land before the transaction counts as overdue (critical).
OVERDUE_MARGIN_MS = 5_000

REASON_NO_TRANSACTIONAL_ID = "no transactional id for producer"
REASON_UNKNOWN_TO_COORDINATOR = "transactional id unknown to coordinator"
REASON_NOT_TRACKED = "coordinator does not track this partition"
REASON_OTHER_PRODUCER = "coordinator's transaction belongs to another producer id"
REASON_COMPLETING = "its coordinator is completing it"
REASON_TWO_PHASE_COMMIT = "two-phase commit transaction: no one times it out"
REASON_LOG_UNANSWERED = "a coordinator that could own its transactional id did not answer"
REASON_IDS_FILTERED = "not authorized to see every transactional id: needs DESCRIBE on TransactionalId"
# The ACL that lets ListTransactions show every id (a wildcard ALLOW, no DENY).
ACL_EVERY_TRANSACTIONAL_ID = "DESCRIBE on TransactionalId * (every transactional id)"

# Coordinator states in which the coordinator has decided and is writing the markers.
COMPLETING_STATES = frozenset({"PrepareCommit", "PrepareAbort"})


class Verdict(str, enum.Enum):
    HANGING = "hanging"  # the cluster positively says no coordinator will complete it
    LONG_RUNNING = "long_running"  # its coordinator tracks it and will complete or abort it
    TRACKED = "long_running"  # alias of LONG_RUNNING (its earlier name)
    UNDETERMINED = "undetermined"  # a coordinator that could own it did not answer: see ``missing``
    LOST_COMMIT = "lost_commit"  # its coordinator's log shows it committed: the partition lost the COMMIT marker (kafkatxn.lost_commit)
    # No coordinator tracks it on this partition, but it is not past its deadline yet
    # (:func:`hanging_deadline_ms`): hanging from ``hanging_at_ms`` unless it ends first.
    UNTRACKED = "untracked"


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (UTF-16 code units, 32-bit signed; a lone surrogate, which a Java
    string may hold, is its own code unit)."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def coordinator_partition(transactional_id: str, log_partitions: int) -> int:
    """The ``__transaction_state`` partition owning an id: ``Utils.abs(id.hashCode) % partitions``
    (TransactionStateManager.partitionFor; ``Utils.abs`` maps Integer.MIN_VALUE to 0)."""
    h = java_string_hash(transactional_id)
    return (0 if h == -(1 << 31) else abs(h)) % log_partitions


def is_two_phase_commit(description: TransactionDescription | None) -> bool:
    return description is not None and description.two_phase_commit


def transaction_log_gaps(metadata: ClusterMetadata, answered_brokers: Iterable[int]) -> list[Missing]:
    """The ``__transaction_state`` partitions whose coordinator did not answer ListTransactions.

    Each partition's leader is the coordinator of the ids hashing to it. A partition without a
    leader, or whose leader did not answer, may hold the transactional id of any producer id; no
    partitions at all (topic not in the metadata) means no coordinator could be asked.
    """
    answered = set(answered_brokers)
    log = metadata.transaction_log
    if not log:
        # Metadata also leaves it out for a principal that may not DESCRIBE it.
        return [Missing(
            Part(TRANSACTION_STATE_TOPIC),
            f"not in the metadata (not created yet, or not authorized: needs DESCRIBE on Topic {TRANSACTION_STATE_TOPIC}): "
            "no transaction coordinator could be asked",
        )]
    gaps = []
    for p in log:
        if p.leader < 0:
            gaps.append(Missing(p.tp, "no leader: its coordinator is unavailable"))
        elif p.leader not in answered:
            gaps.append(Missing(p.tp, f"leader broker {p.leader} did not answer ListTransactions"))
    return gaps


@dataclass(frozen=True)
class CoordinatorView:
    """What the coordinators said about the candidates' producer ids (snapshot of steps 3 and 4)."""

    transactional_ids: dict[int, str] = field(default_factory=dict)  # producer id -> transactional id
    # __transaction_state partitions (or brokers) whose coordinator did not answer ListTransactions:
    # a producer id not listed may belong to an id they own.
    ids_missing: tuple[Missing, ...] = ()
    descriptions: dict[str, TransactionDescription] = field(default_factory=dict)
    unknown_ids: frozenset[str] = frozenset()  # TRANSACTIONAL_ID_NOT_FOUND
    unanswered_ids: dict[str, tuple[Missing, ...]] = field(default_factory=dict)  # id -> why its coordinator did not answer
    # Why ListTransactions may have left out ids this principal may not DESCRIBE (a producer id not
    # listed may belong to one of them): empty when the probe showed every id visible, or when
    # every producer id asked was listed (no probe needed).
    ids_hidden: tuple[Missing, ...] = ()

    @property
    def ids_complete(self) -> bool:
        """Every coordinator that could own a transactional id answered ListTransactions."""
        return not self.ids_missing


@dataclass(frozen=True)
class Classification:
    open_txn: OpenTransaction
    verdict: Verdict
    reason: str
    transactional_id: str | None = None
    description: TransactionDescription | None = None
    missing: tuple[Missing, ...] = ()  # for UNDETERMINED: the typed parts that did not answer
    hanging_at_ms: int | None = None  # for UNTRACKED: when it becomes hanging unless it ends first

    @property
    def two_phase_commit(self) -> bool:
        return is_two_phase_commit(self.description)

    @property
    def transaction(self) -> OpenTransaction:
        """The open transaction with what its coordinator said of it (its age comes from there)."""
        return dataclasses.replace(self.open_txn, transactional_id=self.transactional_id, description=self.description)


def is_candidate(producer: ProducerState, now_ms: int, max_transaction_timeout_ms: int) -> bool:
    """Open transaction whose last write is older than any transaction timeout allows (Kafka: strictly)."""
    return producer.current_txn_start_offset >= 0 and now_ms - producer.last_timestamp_ms > max_transaction_timeout_ms


def find_candidates(
    producers: dict[TopicPartition, list[ProducerState]], now_ms: int, max_transaction_timeout_ms: int
) -> list[OpenTransaction]:
    return [t for t in open_transactions(producers) if is_candidate(t.producer, now_ms, max_transaction_timeout_ms)]


def classify(open_txn: OpenTransaction, view: CoordinatorView) -> Classification:
    """Hanging, long-running, or undetermined: the coordinator side of the rule for one open transaction."""
    pid = open_txn.producer.producer_id
    tid = view.transactional_ids.get(pid)
    if tid is None:
        if not view.ids_complete:
            gaps = ", ".join(str(m.subject) for m in view.ids_missing)
            # No coordinator could be asked at all (brokers before Kafka 3.0): the reason says why.
            reason = view.ids_missing[0].reason if view.ids_missing[0].subject == IDS_PART else f"{REASON_LOG_UNANSWERED} ({gaps})"
            return Classification(open_txn, Verdict.UNDETERMINED, reason, missing=view.ids_missing)
        if view.ids_hidden:
            # Kafka's find-hanging calls this hanging; the coordinator may well track it under an
            # id this principal may not see.
            why = "; ".join(m.reason for m in view.ids_hidden)
            reason = REASON_IDS_FILTERED if why == REASON_IDS_FILTERED else f"{REASON_IDS_FILTERED} ({why})"
            return Classification(open_txn, Verdict.UNDETERMINED, reason, missing=view.ids_hidden)
        return Classification(open_txn, Verdict.HANGING, REASON_NO_TRANSACTIONAL_ID)
    if tid in view.unknown_ids:
        return Classification(open_txn, Verdict.HANGING, REASON_UNKNOWN_TO_COORDINATOR, tid)
    description = view.descriptions.get(tid)
    if description is None:
        gaps = view.unanswered_ids.get(tid) or (Missing(TransactionalId(tid), "no answer from its coordinator"),)
        why = "; ".join(m.reason for m in gaps)
        return Classification(open_txn, Verdict.UNDETERMINED, f"its coordinator did not answer: {why}", tid, missing=gaps)
    if description.state in COMPLETING_STATES:
        # The coordinator has decided; it writes the markers (retrying while a leader is down).
        # Transaction version 2 may show a new producer id once the epoch ran out: still its transaction.
        return Classification(
            open_txn, Verdict.LONG_RUNNING, f"{REASON_COMPLETING} (state {description.state}: markers pending)", tid, description
        )
    if description.producer_id != pid:
        return Classification(
            open_txn, Verdict.HANGING, f"{REASON_OTHER_PRODUCER} ({description.producer_id})", tid, description
        )
    if open_txn.tp not in description.partitions:
        return Classification(open_txn, Verdict.HANGING, REASON_NOT_TRACKED, tid, description)
    if is_two_phase_commit(description):
        return Classification(open_txn, Verdict.LONG_RUNNING, f"{REASON_TWO_PHASE_COMMIT} (state {description.state})", tid, description)
    return Classification(open_txn, Verdict.LONG_RUNNING, f"coordinator tracks it (state {description.state})", tid, description)


IDS_PART = Part("transactional ids")


def hidden_ids(visibility: str, probe_missing: Sequence[Missing] = ()) -> tuple[Missing, ...]:
    """Why a producer id missing from ListTransactions may still have a transactional id, from the
    visibility probe (``IDS_ALL``, ``IDS_FILTERED``, ``IDS_UNKNOWN``): nothing when every id is
    visible; otherwise the typed part, naming the ACL that would show every id."""
    if visibility == IDS_ALL:
        return ()
    part = IDS_PART
    if visibility == IDS_FILTERED:
        return (Missing(part, REASON_IDS_FILTERED, acl=ACL_EVERY_TRANSACTIONAL_ID),)
    why = "; ".join(m.reason for m in probe_missing) or "no answer"
    return (Missing(part, f"could not find out whether every transactional id is visible: {why}"),)


def classify_all(candidates: Iterable[OpenTransaction], view: CoordinatorView) -> list[Classification]:
    return [classify(c, view) for c in candidates]


# -- when an untracked transaction becomes hanging ------------------------------------------------


def own_timeout_ms(c: Classification) -> int | None:
    """The producer's own transaction timeout, where it bounds the wait: its coordinator answers
    for this producer id, reports the timeout, and does not track this partition (a transaction
    that leaves it out, or one already ended). None where no coordinator says which timeout the
    producer has (no id, an unknown id, another producer id) or nobody times it out (two-phase commit)."""
    d = c.description
    if d is None or d.producer_id != c.open_txn.producer_id or d.two_phase_commit or c.open_txn.tp in d.partitions:
        return None
    return d.timeout_ms if d.timeout_ms >= 0 else None


def hanging_deadline_ms(c: Classification, max_transaction_timeout_ms: int | None) -> int | None:
    """The last moment an open transaction no coordinator tracks may still end by itself: its last
    write plus its producer's own transaction timeout where its coordinator reports it, else plus
    the brokers' maximum (the bound on every producer's timeout); the smaller where both are known,
    so a maximum the caller gives (``--max-transaction-timeout 0``) moves it earlier. Past it (strictly,
    as Kafka's tool compares) it is hanging. None when neither timeout is known."""
    bounds = [b for b in (own_timeout_ms(c), max_transaction_timeout_ms) if b is not None]
    if not bounds:
        return None
    return c.open_txn.last_timestamp_ms + min(bounds)


# A coordinator in these states for the producer has ended (or is ending) a transaction: the markers
# of one that timed out may land between DescribeProducers and its answer.
ENDING_STATES = frozenset({"PrepareCommit", "PrepareAbort", "PrepareEpochFence", "CompleteCommit", "CompleteAbort"})


def may_have_just_ended(c: Classification) -> bool:
    """An untracked transaction whose coordinator describes its producer as having just ended one:
    it is asked about once more before it is called hanging (a young untracked one always is)."""
    d = c.description
    return d is not None and d.producer_id == c.open_txn.producer_id and d.state in ENDING_STATES


def is_due(c: Classification, now_ms: int, max_transaction_timeout_ms: int | None) -> bool | None:
    """Whether ``c`` is past its :func:`hanging_deadline_ms` (None: the deadline is not known). A
    transaction its coordinator tracks is due once idle past the maximum (``hanging`` lists it as
    long-running then)."""
    if c.verdict is Verdict.LONG_RUNNING:
        return None if max_transaction_timeout_ms is None else is_candidate(c.open_txn.producer, now_ms, max_transaction_timeout_ms)
    deadline = hanging_deadline_ms(c, max_transaction_timeout_ms)
    return None if deadline is None else now_ms > deadline


def with_deadline(c: Classification, now_ms: int, max_transaction_timeout_ms: int | None) -> Classification:
    """``c`` under the time rule: classified hanging but not past its deadline, it is UNTRACKED
    (hanging from the moment after the deadline, unless it ends first); anything else as it is."""
    if c.verdict is not Verdict.HANGING or is_due(c, now_ms, max_transaction_timeout_ms) is not False:
        return c
    deadline = hanging_deadline_ms(c, max_transaction_timeout_ms)
    assert deadline is not None  # is_due answered
    return dataclasses.replace(c, verdict=Verdict.UNTRACKED, hanging_at_ms=deadline + 1)


def deadline_source(c: Classification, max_transaction_timeout_ms: int | None) -> str:
    """Which timeout :func:`hanging_deadline_ms` used, in words."""
    own = own_timeout_ms(c)
    if own is not None and (max_transaction_timeout_ms is None or own <= max_transaction_timeout_ms):
        return f"its producer's {own} ms transaction timeout"
    return f"the {max_transaction_timeout_ms} ms maximum transaction timeout"


def max_timeout_from_configs(values: Iterable[str | None]) -> int | None:
    """The largest ``transaction.max.timeout.ms`` any broker allows (the bound any coordinator enforces)."""
    parsed = [int(v) for v in values if v is not None and str(v).strip().lstrip("-").isdigit()]
    return max(parsed) if parsed else None


# -- open transactions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class OpenTransaction:
    """One producer's open transaction on one partition (DescribeProducers), with what its
    coordinator said of it when that was gathered."""

    tp: TopicPartition
    producer: ProducerState
    transactional_id: str | None = None
    description: TransactionDescription | None = None  # the coordinator's transaction for that id
    # The timestamp of the batch at the transaction's start offset (its first record), when read.
    first_record_timestamp_ms: int | None = None

    @property
    def producer_id(self) -> int:
        return self.producer.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.producer.producer_epoch

    @property
    def start_offset(self) -> int:
        return self.producer.current_txn_start_offset

    @property
    def last_timestamp_ms(self) -> int:
        return self.producer.last_timestamp_ms

    @property
    def coordinator_start_time_ms(self) -> int | None:
        """When the coordinator started this transaction, if it describes it as this producer's
        open transaction on this partition (otherwise its start time belongs to another one)."""
        d = self.description
        if (
            d is not None
            and d.producer_id == self.producer.producer_id
            and d.state in OPEN_TRANSACTION_STATES
            and self.tp in d.partitions
            and d.start_time_ms >= 0
        ):
            return d.start_time_ms
        return None


def open_transactions(
    producers: Mapping[TopicPartition, Sequence[ProducerState]], view: "CoordinatorView | None" = None
) -> list[OpenTransaction]:
    """Every open transaction in described producer states, in partition then offset order; with
    what ``view`` says of each producer id."""
    out = []
    # 30,000 partitions a scrape, few with an open transaction: those are found first, then sorted.
    with_open = [tp for tp, states in producers.items() if any(s.current_txn_start_offset >= 0 for s in states)]
    for tp in sorted(with_open):
        for p in sorted(producers[tp], key=lambda s: s.current_txn_start_offset):
            if p.current_txn_start_offset < 0:
                continue
            tid = view.transactional_ids.get(p.producer_id) if view is not None else None
            description = view.descriptions.get(tid) if view is not None and tid is not None else None
            out.append(OpenTransaction(tp, p, tid, description))
    return out


def by_partition(txns: Iterable[OpenTransaction]) -> dict[TopicPartition, list[OpenTransaction]]:
    out: dict[TopicPartition, list[OpenTransaction]] = {}
    for t in txns:
        out.setdefault(t.tp, []).append(t)
    return out


# Where a transaction's age comes from, best first (``txn_age_source`` in the rows).
AGE_FROM_COORDINATOR = "coordinator"  # the coordinator's start time of this transaction on this partition
AGE_FROM_FIRST_RECORD = "first_record"  # the timestamp of the partition's first record of the transaction
AGE_FROM_LAST_WRITE = "last_write"  # DescribeProducers' last timestamp: a lower bound (the first record was not read)


@dataclass(frozen=True)
class TransactionAge:
    ms: int
    source: str  # AGE_FROM_*


def transaction_age(txn: OpenTransaction | None, now_ms: int) -> TransactionAge | None:
    """How old an open transaction is: since its coordinator started it where the coordinator
    describes it as open on this partition; otherwise since the partition's first record of it
    (hanging transactions have no coordinator start); otherwise since the producer's last write, a
    lower bound. None only when none of them is known."""
    if txn is None:
        return None
    started = txn.coordinator_start_time_ms
    if started is not None:
        return TransactionAge(max(now_ms - started, 0), AGE_FROM_COORDINATOR)
    if txn.first_record_timestamp_ms is not None and txn.first_record_timestamp_ms >= 0:
        return TransactionAge(max(now_ms - txn.first_record_timestamp_ms, 0), AGE_FROM_FIRST_RECORD)
    if txn.last_timestamp_ms >= 0:
        return TransactionAge(max(now_ms - txn.last_timestamp_ms, 0), AGE_FROM_LAST_WRITE)
    return None


def transaction_age_ms(txn: OpenTransaction | None, now_ms: int) -> int | None:
    """The one age of an open transaction (:func:`transaction_age`), in milliseconds."""
    age = transaction_age(txn, now_ms)
    return age.ms if age is not None else None


def needs_first_record(txn: OpenTransaction) -> bool:
    """Whether the transaction's age has to be read from its first record (no coordinator start)."""
    return txn.coordinator_start_time_ms is None and txn.first_record_timestamp_ms is None


def overdue_grace_ms(abort_cleanup_interval_ms: int | None = None) -> int:
    """How long past its own timeout a tracked transaction is left to its coordinator: one abort
    cleanup interval (the brokers', Kafka's default where not read) and a margin for the markers."""
    interval = abort_cleanup_interval_ms if abort_cleanup_interval_ms is not None else DEFAULT_ABORT_CLEANUP_INTERVAL_MS
    return interval + OVERDUE_MARGIN_MS


def is_past_timeout(txn: OpenTransaction | None, now_ms: int) -> bool:
    """Past its own timeout: the coordinator tracks it as open here and it is older than the
    transaction timeout its producer set (two-phase-commit transactions have none). Its
    coordinator aborts it at its next cleanup: a warning, not yet a page."""
    if txn is None or txn.coordinator_start_time_ms is None or txn.description is None:
        return False
    d = txn.description
    return not d.two_phase_commit and now_ms - txn.coordinator_start_time_ms > d.timeout_ms


def is_overdue(txn: OpenTransaction | None, now_ms: int, abort_cleanup_interval_ms: int | None = None) -> bool:
    """Overdue: past its own timeout by more than :func:`overdue_grace_ms`, so its coordinator had
    its chance to abort it and did not (critical)."""
    return is_past_timeout(txn, now_ms - overdue_grace_ms(abort_cleanup_interval_ms))


class PinVerdict(str, enum.Enum):
    """What the whole rule says of an open transaction (the one pinning an LSO), its hanging
    classification settled by its coordinator's log as ``hanging`` settles it."""

    NOT_HANGING = "not_hanging"  # tracked by its coordinator, or written within the maximum timeout
    HANGING = "hanging"
    LOST_COMMIT = "lost_commit"  # its coordinator committed it; the partition lost the COMMIT marker
    UNDETERMINED = "undetermined"  # a coordinator, its log or the maximum timeout did not answer
    UNTRACKED = "untracked"  # no coordinator tracks it, not past its deadline yet: hanging then unless it ends


def pin_verdict(classification: Classification | None, now_ms: int, max_transaction_timeout_ms: int | None) -> PinVerdict:
    """The whole rule (classified hanging, :func:`classify`, and past its deadline,
    :func:`hanging_deadline_ms`) over a classification settled by the coordinator's log
    (:func:`kafkatxn.lost_commit.settle`): a transaction no coordinator tracks is UNTRACKED until its
    deadline, then the settled verdict; one whose coordinator could not say is not hanging within
    the maximum timeout (no producer's timeout is longer), undetermined after it. Without a
    classification, or without a timeout to date it by, it is undetermined."""
    if classification is None:
        return PinVerdict.UNDETERMINED
    verdict = classification.verdict
    if verdict is Verdict.LONG_RUNNING:
        return PinVerdict.NOT_HANGING
    if verdict is Verdict.UNTRACKED:
        return PinVerdict.UNTRACKED
    due = is_due(classification, now_ms, max_transaction_timeout_ms)
    if due is None:
        return PinVerdict.UNDETERMINED
    if not due:
        # Before its deadline what the log says does not matter yet: untracked where the
        # coordinators positively said so, not hanging where they could not say.
        untracked = verdict is Verdict.HANGING or own_timeout_ms(classification) is not None
        return PinVerdict.UNTRACKED if untracked else PinVerdict.NOT_HANGING
    return {
        Verdict.HANGING: PinVerdict.HANGING,
        Verdict.LOST_COMMIT: PinVerdict.LOST_COMMIT,
    }.get(verdict, PinVerdict.UNDETERMINED)


def pin_flags(verdict: PinVerdict | None) -> tuple[bool | None, bool | None]:
    """``(txn_hanging, txn_lost_commit)`` of a row: both None where there is no pinning transaction
    or its verdict is undetermined (a value not determined is missing, never a reassuring false)."""
    if verdict is None or verdict is PinVerdict.UNDETERMINED:
        return None, None
    return verdict is PinVerdict.HANGING, verdict is PinVerdict.LOST_COMMIT


def open_transaction_count(producers: Mapping[TopicPartition, Sequence[ProducerState]]) -> int:
    """How many transactions are open on the partitions described (one per producer and partition)."""
    return sum(1 for ps in producers.values() for p in ps if p.current_txn_start_offset >= 0)


def last_write_age_ms(txn: OpenTransaction | None, now_ms: int) -> int | None:
    """Since the producer's last write to the partition."""
    if txn is None or txn.last_timestamp_ms < 0:
        return None
    return max(0, now_ms - txn.last_timestamp_ms)


def best_age_ms(txn_age_ms: int | None, last_write_age_ms: int | None) -> int | None:
    """The transaction's age where the coordinator knows it, else the age of its last write (a lower bound)."""
    return txn_age_ms if txn_age_ms is not None else last_write_age_ms


def coordinator_age_ms(start_time_ms: int, now_ms: int) -> int | None:
    """A transaction's age by its coordinator's start time (-1: none open): check's and the
    exporter's transaction ages, and :func:`transaction_age_ms` once the start is this partition's."""
    return max(now_ms - start_time_ms, 0) if start_time_ms >= 0 else None


def pinning_transaction(open_txns: Sequence[OpenTransaction], lso: int) -> OpenTransaction | None:
    """The open transaction whose first offset is the LSO.

    Without an exact match (the LSO moved between ListOffsets and DescribeProducers) the earliest
    open transaction, which pins the LSO now.
    """
    for t in open_txns:
        if t.start_offset == lso:
            return t
    return min(open_txns, key=lambda t: t.start_offset, default=None)


# -- hanging, long-running, undetermined ---------------------------------------------------------


# -- consumer groups ----------------------------------------------------------------------------


class GroupVerdict(str, enum.Enum):
    caught_up = "caught_up"
    lagging = "lagging"
    blocked = "blocked"
    unknown = "unknown"  # no committed offset, and where it starts depends on its auto.offset.reset
    # Held as blocked is, by a transaction in flight (:func:`held_verdict`): it reads on at its commit.
    waiting = "waiting"


class Offsets(NamedTuple):
    """A partition's offsets from one leader. A tuple: a pass over 30,000 partitions makes one each."""

    high_watermark: int
    last_stable_offset: int

    @property
    def lag(self) -> int:
        # The LSO is read before the HW, so LSO <= HW; clamp anyway in case a leader moved between.
        return max(0, self.high_watermark - self.last_stable_offset)


def group_verdict(committed: int, lso: int, hw: int, readable_before_lso: bool | None) -> GroupVerdict:
    """Where a group stands on a partition, for a read_committed consumer (c = committed, l = LSO, h = HW; l <= h).

    1. ``c >= h``: **caught_up**, nothing left to read (c > h only after records were deleted).
    2. ``c == l < h``: **blocked**. The next offset is the first record of an open transaction:
       the consumer cannot move until that transaction ends, however long it takes.
    3. ``l < c < h``: **lagging**. The group has read past the LSO, so it reads uncommitted
       records (read_uncommitted); what is left is ``h - c``.
    4. ``c < l``: offsets between the commit and the LSO. They may hold nothing a read_committed
       consumer returns: commit/abort markers (the "lag of 1" after every transaction when a
       consumer commits the offset after its last record) and aborted records. The probe
       (``readable_before_lso``) reads the gap with a read_committed consumer:

       - False (only markers and aborted records): the consumer stands, in effect, at the LSO,
         so as in 1/2: **caught_up** when ``l == h``, **blocked** when ``l < h``.
       - True: **lagging**, there are records to read.
       - None (gap not probed: larger than the probe limit, or the probe failed): **lagging**,
         the gap counts as lag.

    The committed offset does not say which isolation level the group reads with. A
    read_uncommitted group at ``c == l < h`` is reported blocked although it would read on.
    """
    if committed >= hw:
        return GroupVerdict.caught_up
    if committed == lso:
        return GroupVerdict.blocked
    if committed > lso:
        return GroupVerdict.lagging
    if readable_before_lso is False:
        return GroupVerdict.caught_up if lso == hw else GroupVerdict.blocked
    return GroupVerdict.lagging


class Severity(str, enum.Enum):
    ok = "ok"
    warning = "warning"
    critical = "critical"


def is_too_old(age_ms: int | None, critical_age_ms: int | None) -> bool:
    return critical_age_ms is not None and age_ms is not None and age_ms >= critical_age_ms


def blocked_severity(hanging: bool | None, overdue: bool, too_old: bool, old: bool = True, lost_commit: bool | None = False,
                     waiting: bool = False) -> Severity:
    """How bad a group blocked behind an open transaction is: **critical** only when that
    transaction is hanging, lost its COMMIT marker (nothing releases it but ``restore-commit``),
    is overdue (past its own timeout and its coordinator's chance to abort it, :func:`is_overdue`),
    or is older than the critical age (``too_old``); **warning** when ``waiting`` on something that
    is not in flight any more (no coordinator tracks it yet, :attr:`BlockVerdict.untracked`, or it is
    past its own timeout, :attr:`BlockVerdict.past_timeout`), or when ``old`` (past a warning age,
    where the command has one); otherwise a transaction in flight within its timeout is **ok**,
    whatever moment the sample caught: a consumer keeping up with a producer that commits every
    100 ms sits at the LSO in many samples. An undetermined verdict (None) is no reason for
    critical: the caller says it cannot be known."""
    if hanging or lost_commit or overdue or too_old:
        return Severity.critical
    return Severity.warning if old or waiting else Severity.ok


class BlockVerdict(str, enum.Enum):
    """What the transaction blocking a reader is, in the one word every row, page and alert names."""

    hanging = "hanging"  # no coordinator will ever end it (abort releases it)
    lost_commit = "lost_commit"  # committed by its coordinator, the COMMIT marker lost (restore-commit releases it)
    overdue = "overdue"  # tracked, past its own timeout and its coordinator's abort interval (fence releases it)
    past_timeout = "past_timeout"  # tracked, past its own timeout: its coordinator aborts it at its next cleanup
    untracked = "untracked"  # no coordinator tracks it: hanging from its deadline unless it ends first
    in_flight = "in_flight"  # tracked (or within the maximum timeout) and within its timeout: its producer ends it
    undetermined = "undetermined"  # the cluster could not say


# The blocks that are no page yet but never "OK": the reader waits on something no producer is ending now.
WAITING_BLOCKS = frozenset({BlockVerdict.untracked, BlockVerdict.past_timeout})
STUCK_BLOCKS = frozenset({BlockVerdict.hanging, BlockVerdict.lost_commit, BlockVerdict.overdue})


def block_verdict(pin: PinVerdict | None, txn: OpenTransaction | None, now_ms: int,
                  abort_cleanup_interval_ms: int | None = None) -> BlockVerdict | None:
    """The blocking transaction's verdict from its :func:`pin_verdict` and its own timeout (None: no
    blocking transaction)."""
    if pin is None:
        return None
    if pin is PinVerdict.UNDETERMINED:
        return BlockVerdict.undetermined
    if pin is PinVerdict.HANGING:
        return BlockVerdict.hanging
    if pin is PinVerdict.LOST_COMMIT:
        return BlockVerdict.lost_commit
    if pin is PinVerdict.UNTRACKED:
        return BlockVerdict.untracked
    if is_overdue(txn, now_ms, abort_cleanup_interval_ms):
        return BlockVerdict.overdue
    if is_past_timeout(txn, now_ms):
        return BlockVerdict.past_timeout
    return BlockVerdict.in_flight


def block_severity(verdict: BlockVerdict | None, too_old: bool, old: bool = True) -> Severity:
    """:func:`blocked_severity` of a :class:`BlockVerdict`."""
    return blocked_severity(
        None if verdict is BlockVerdict.undetermined else verdict is BlockVerdict.hanging,
        verdict is BlockVerdict.overdue, too_old, old,
        lost_commit=None if verdict is BlockVerdict.undetermined else verdict is BlockVerdict.lost_commit,
        waiting=verdict in WAITING_BLOCKS,
    )


def readable_before_lso(first_readable: int | None, lso: int) -> bool:
    """Whether the probe found a record below the snapshot's LSO (the LSO may have moved since)."""
    return first_readable is not None and first_readable < lso


def uncommitted_verdict(log_start: int | None, lso: int, hw: int) -> GroupVerdict:
    """Where a read_committed group stands on a partition it is assigned but has no committed offset on.

    The broker does not know the consumer's ``auto.offset.reset``. Both starts are known, though:
    ``earliest`` is the log start offset, ``latest`` is what ListOffsets answers a read_committed
    consumer, the LSO. When the log starts at (or past) the LSO, both starts are at or behind it:

    - ``l < h``: **blocked** whatever the setting: the first record is the open transaction's.
    - ``l == h``: **caught_up**: there is nothing to read from either start.

    Otherwise (the log start below the LSO, or not known) **unknown**: ``latest`` waits at the LSO,
    ``earliest`` has records to read first.
    """
    if log_start is None or log_start < lso:
        return GroupVerdict.unknown
    return GroupVerdict.caught_up if lso >= hw else GroupVerdict.blocked


CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
# A read_committed group's lag below this many messages on a partition changes no exit code: the
# same figure as check's --lso-lag-warn. A consumer committing every second (auto.commit.interval.ms
# 1 s) of a partition taking under 1,000 records a second always trails by less.
DEFAULT_LAG_THRESHOLD = 1000


def offsets_partition(group: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition holding a group's commits, whose leader is its coordinator:
    ``Utils.abs(groupId.hashCode) % partitions`` (GroupMetadataManager.partitionFor), the rule
    :func:`coordinator_partition` applies to transactional ids."""
    return coordinator_partition(group, partitions)


def stable_verdict(verdict: GroupVerdict, unstable: bool) -> GroupVerdict:
    """A group blocked through its offsets partition: where its stable offset fetch (``require_stable``,
    as a read_committed consumer asks, KIP-447) answers UNSTABLE_OFFSET_COMMIT on a partition, a
    transactional offset commit (``sendOffsetsToTransaction``) is open on the group's
    ``__consumer_offsets`` partition: its consumers cannot learn where to start, whatever the
    partition's offsets say, until that transaction ends. **blocked** there; elsewhere ``verdict``."""
    return GroupVerdict.blocked if unstable else verdict


def in_flight(classification: Classification | None, now_ms: int) -> bool:
    """A transaction in flight: its coordinator tracks it (so it completes it, or aborts it at its
    timeout), not as a two-phase-commit one (no one times those out), and it is not past its own timeout."""
    return (
        classification is not None
        and classification.verdict is Verdict.LONG_RUNNING
        and not classification.two_phase_commit
        and not is_past_timeout(classification.transaction, now_ms)
    )


def held_verdict(classification: Classification | None, now_ms: int) -> GroupVerdict:
    """A group held by an open transaction (blocked at its LSO, or through its offsets partition):
    **waiting** while that transaction is :func:`in_flight` (a healthy pipeline sits there between
    commits), otherwise **blocked** (hanging, lost commit, overdue, undetermined, not tracked, or
    the transaction was not found)."""
    return GroupVerdict.waiting if in_flight(classification, now_ms) else GroupVerdict.blocked


def lag_is_finding(verdict: GroupVerdict, lag_messages: int, threshold: int = DEFAULT_LAG_THRESHOLD) -> bool:
    """Whether a lagging group's read_committed lag counts as a finding (a warning): at least
    ``threshold`` messages. Less is what a consumer committing every second leaves behind."""
    return verdict is GroupVerdict.lagging and lag_messages >= threshold


def may_have_ended(pin: OpenTransaction | None, classification: Classification | None) -> bool:
    """Whether what was read of a lagging partition may be a transaction that ended between two
    requests, to be asked again once: nothing open was described (it ended after ListOffsets), or
    the coordinator describes the pinning producer with a transaction that no longer holds the
    partition (it ended after DescribeProducers). A hanging transaction looks like the second: the
    offsets asked again tell them apart (its LSO does not move)."""
    if pin is None:
        return True
    c = classification
    return (c is not None and c.verdict is not Verdict.LONG_RUNNING and c.description is not None
            and c.description.producer_id == pin.producer_id)
