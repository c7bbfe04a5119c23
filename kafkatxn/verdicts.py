"""The answers every command shares: one definition per question, pure functions over what was gathered.

Is this open transaction hanging, long-running or undetermined? Which one pins a partition's LSO?
How old it is (:mod:`kafkatxn.verdicts_age`) and where a consumer group stands
(:mod:`kafkatxn.verdicts_groups`) are answered beside it. ``lso``, ``hanging``, ``check``,
``diagnose``, the exporter and ``abort``'s plan all ask here, so two commands never answer one
question two ways. These modules import only :mod:`kafkatxn.model`, each other and the standard
library (tests/unit/test_layering.py checks it); gathering lives in :mod:`kafkatxn.gather`.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import field
from itertools import chain, compress
from typing import Iterable, Mapping, Sequence
from operator import mul

from kafkatxn.model import (
    FRESH, IDS_ALL, IDS_FILTERED, OPEN_TRANSACTION_STATES, TRANSACTION_STATE_TOPIC, ClusterMetadata, FrozenRecord, Missing, Part,
    ProducerState, TopicPartition, TransactionalId, TransactionDescription, record,
)

MAX_TIMEOUT_CONFIG = "transaction.max.timeout.ms"

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
    UNDETERMINED = "undetermined"  # a coordinator that could own it did not answer: see ``missing``
    LOST_COMMIT = "lost_commit"  # its coordinator's log shows it committed: the partition lost the COMMIT marker (kafkatxn.lost_commit)
    # No coordinator tracks it on this partition, but it is not past its deadline yet
    # (:func:`hanging_deadline_ms`): hanging from ``hanging_at_ms`` unless it ends first.
    UNTRACKED = "untracked"


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (UTF-16 code units, 32-bit signed; a lone surrogate, which a Java
    string may hold, is its own code unit)."""
    if s.isascii() and len(s) <= _POWERS_UP_TO:
        # An ASCII character is its code unit: sum(unit * 31 ** (n - 1 - i)) taken in C, the same
        # modulo 2**32 as Horner's rule (a scrape hashes every group name: 20,000 at 20,000 groups).
        h = sum(map(mul, s.encode("ascii"), _powers_of_31(len(s)))) & 0xFFFFFFFF
        return h - (1 << 32) if h >= 1 << 31 else h
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


_POWERS_UP_TO = 255  # Kafka's names are at most 249 characters
_POWERS: dict[int, list[int]] = {}


def _powers_of_31(n: int) -> list[int]:
    """``31 ** (n - 1 - i) mod 2**32`` for i in range(n), made once per length."""
    powers = _POWERS.get(n)
    if powers is None:
        powers = _POWERS[n] = [pow(31, n - 1 - i, 1 << 32) for i in range(n)]
    return powers


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


@record  # a frozen dataclass whose methods are not compiled as it is made: model.Record
class CoordinatorView(FrozenRecord):
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

    def __init__(self, transactional_ids: dict[int, str] = FRESH, ids_missing: tuple[Missing, ...] = (),
                 descriptions: dict[str, TransactionDescription] = FRESH, unknown_ids: frozenset[str] = frozenset(),
                 unanswered_ids: dict[str, tuple[Missing, ...]] = FRESH, ids_hidden: tuple[Missing, ...] = ()) -> None:
        self.__dict__.update(
            transactional_ids={} if transactional_ids is FRESH else transactional_ids, ids_missing=ids_missing,
            descriptions={} if descriptions is FRESH else descriptions, unknown_ids=unknown_ids,
            unanswered_ids={} if unanswered_ids is FRESH else unanswered_ids, ids_hidden=ids_hidden,
        )

    @property
    def ids_complete(self) -> bool:
        """Every coordinator that could own a transactional id answered ListTransactions."""
        return not self.ids_missing


@record
class Classification(FrozenRecord):
    """A verdict on one open transaction (:func:`classify`), and why."""

    open_txn: OpenTransaction
    verdict: Verdict
    reason: str
    transactional_id: str | None = None
    description: TransactionDescription | None = None
    missing: tuple[Missing, ...] = ()  # for UNDETERMINED: the typed parts that did not answer
    hanging_at_ms: int | None = None  # for UNTRACKED: when it becomes hanging unless it ends first

    def __init__(self, open_txn: OpenTransaction, verdict: Verdict, reason: str, transactional_id: str | None = None,
                 description: TransactionDescription | None = None, missing: tuple[Missing, ...] = (),
                 hanging_at_ms: int | None = None) -> None:
        self.__dict__.update(open_txn=open_txn, verdict=verdict, reason=reason, transactional_id=transactional_id,
                             description=description, missing=missing, hanging_at_ms=hanging_at_ms)

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


@record
class OpenTransaction(FrozenRecord):
    """One producer's open transaction on one partition (DescribeProducers), with what its
    coordinator said of it when that was gathered."""

    tp: TopicPartition
    producer: ProducerState
    transactional_id: str | None = None
    description: TransactionDescription | None = None  # the coordinator's transaction for that id
    # The timestamp of the batch at the transaction's start offset (its first record), when read.
    first_record_timestamp_ms: int | None = None

    def __init__(self, tp: TopicPartition, producer: ProducerState, transactional_id: str | None = None,
                 description: TransactionDescription | None = None, first_record_timestamp_ms: int | None = None) -> None:
        self.__dict__.update(tp=tp, producer=producer, transactional_id=transactional_id, description=description,
                             first_record_timestamp_ms=first_record_timestamp_ms)

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
    # 30,000 partitions a scrape, few with an open transaction: those are found first (the partitions
    # with no producer state left out in C), then sorted.
    with_open = [tp for tp, states in compress(producers.items(), producers.values())
                 if any(s.current_txn_start_offset >= 0 for s in states)]
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
    return sum(1 for p in chain.from_iterable(producers.values()) if p.current_txn_start_offset >= 0)  # empty partitions in C


def pinning_transaction(open_txns: Sequence[OpenTransaction], lso: int) -> OpenTransaction | None:
    """The open transaction whose first offset is the LSO.

    Without an exact match (the LSO moved between ListOffsets and DescribeProducers) the earliest
    open transaction, which pins the LSO now.
    """
    for t in open_txns:
        if t.start_offset == lso:
            return t
    return min(open_txns, key=lambda t: t.start_offset, default=None)
