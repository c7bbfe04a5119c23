"""Hanging transactions: open on a partition, unknown to their coordinator, so never completed.

The rule is the partition-side one of KIP-664, as Kafka's ``kafka-transactions.sh find-hanging``
applies it:

1. DescribeProducers over the partitions (one request per leader up to 10,000 partitions, or to one broker);
2. candidates: producers with an open transaction whose last write is older than the maximum
   transaction timeout — the coordinator would have aborted a transaction it tracks by then;
3. map the candidates' producer ids to transactional ids (ListTransactions, producer-id filter);
4. DescribeTransactions; a candidate is **hanging** when no transactional id maps to its producer
   id, the coordinator does not know the id, or the coordinator's transaction does not include the
   partition. Otherwise its coordinator still tracks it: **long-running**, listed separately.

Three verdicts, and only the cluster's positive answer makes one hanging (issue 13):

- ``hanging``: every coordinator that could own the transactional id answered and none tracks this
  transaction on this partition. "No transactional id for the producer" needs *every*
  ``__transaction_state`` partition to have a leader that answered ListTransactions: KRaft drops a
  dead broker from the metadata's broker list, so "every broker answered" is not enough;
- ``long_running``: its coordinator tracks it, or is completing it (PrepareCommit/PrepareAbort:
  markers pending, whatever producer id the coordinator now shows), or it is a two-phase-commit
  transaction (KIP-939, timeout ``Integer.MAX_VALUE``), which nobody times out;
- ``undetermined``: anything else, with the typed :class:`Missing` parts that kept it from being
  decided (a ``__transaction_state`` partition, the transactional id, a broker).

Kafka's tool ignores producer epochs, and so does this: a marker with a newer epoch of the same
producer id still closes the partition's transaction (transaction version 2 bumps the epoch at
every commit or abort), so a newer epoch at the coordinator is normal. A coordinator whose
transaction belongs to a *different* producer id writes markers for that id only, so that case is
hanging too (Kafka's tool cannot see it: its producer-id lookup already rules it out, except in a
race).

Steps 1, 3 and 4 are the snapshot (:func:`find_hanging`); deciding is pure
(:func:`find_candidates`, :func:`classify`) and tested without a broker.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Sequence

from kafkatxn import producers
from kafkatxn.model import (
    TRANSACTION_STATE_TOPIC, Broker, ClusterMetadata, Missing, Part, ProducerState, TopicPartition, TransactionalId,
    TransactionDescription,
)
from kafkatxn.errors import ClusterError
from kafkatxn.output import Report

if TYPE_CHECKING:  # capability modules are handed the facade; they do not import it
    from kafkatxn.kafka import Cluster

MAX_TIMEOUT_CONFIG = "transaction.max.timeout.ms"

REASON_NO_TRANSACTIONAL_ID = "no transactional id for producer"
REASON_UNKNOWN_TO_COORDINATOR = "transactional id unknown to coordinator"
REASON_NOT_TRACKED = "coordinator does not track this partition"
REASON_OTHER_PRODUCER = "coordinator's transaction belongs to another producer id"
REASON_COMPLETING = "its coordinator is completing it"
REASON_TWO_PHASE_COMMIT = "two-phase commit transaction: no one times it out"
REASON_LOG_UNANSWERED = "a coordinator that could own its transactional id did not answer"

# Coordinator states in which the coordinator has decided and is writing the markers.
COMPLETING_STATES = frozenset({"PrepareCommit", "PrepareAbort"})


@dataclass(frozen=True)
class OpenTransaction:
    """One producer's open transaction on one partition, from DescribeProducers."""

    tp: TopicPartition
    producer: ProducerState

    @property
    def start_offset(self) -> int:
        return self.producer.current_txn_start_offset


class Verdict(str, enum.Enum):
    HANGING = "hanging"  # the cluster positively says no coordinator will complete it
    LONG_RUNNING = "long_running"  # its coordinator tracks it and will complete or abort it
    TRACKED = "long_running"  # alias of LONG_RUNNING (its earlier name)
    UNDETERMINED = "undetermined"  # a coordinator that could own it did not answer: see ``missing``


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (UTF-16 code units, 32-bit signed)."""
    h = 0
    data = s.encode("utf-16-be")
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
    log = sorted((p for p in metadata.partitions if p.topic == TRANSACTION_STATE_TOPIC), key=lambda p: p.partition)
    if not log:
        return [Missing(Part(TRANSACTION_STATE_TOPIC), "not in the metadata: no transaction coordinator could be asked")]
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

    @property
    def two_phase_commit(self) -> bool:
        return is_two_phase_commit(self.description)


# -- pure rules ---------------------------------------------------------------------------------


def is_candidate(producer: ProducerState, now_ms: int, max_transaction_timeout_ms: int) -> bool:
    """Open transaction whose last write is older than any transaction timeout allows (Kafka: strictly)."""
    return producer.current_txn_start_offset >= 0 and now_ms - producer.last_timestamp_ms > max_transaction_timeout_ms


def open_transactions(producers: dict[TopicPartition, list[ProducerState]]) -> list[OpenTransaction]:
    return [
        OpenTransaction(tp, p)
        for tp in sorted(producers)
        for p in producers[tp]
        if p.current_txn_start_offset >= 0
    ]


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
            return Classification(open_txn, Verdict.UNDETERMINED, f"{REASON_LOG_UNANSWERED} ({gaps})", missing=view.ids_missing)
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


def classify_all(candidates: Iterable[OpenTransaction], view: CoordinatorView) -> list[Classification]:
    return [classify(c, view) for c in candidates]


# -- rows ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HangingRow:
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int  # as DescribeProducers reports it; -1 when no marker was ever written
    start_offset: int
    last_timestamp_ms: int
    duration_ms: int  # since the producer's last write, as Kafka's tool measures it
    transactional_id: str | None
    coordinator_id: int | None
    coordinator_state: str | None
    reason: str
    last_stable_offset: int | None
    high_watermark: int | None
    lso_lag_messages: int | None  # high watermark minus LSO: what read_committed consumers cannot read
    holds_lso: bool | None  # this transaction is the one pinning the partition's LSO


@dataclass(frozen=True)
class _CandidateColumns:
    """The first columns of the long-running and undetermined rows."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    start_offset: int
    last_timestamp_ms: int
    duration_ms: int
    transactional_id: str | None


@dataclass(frozen=True)
class LongRunningRow(_CandidateColumns):
    coordinator_id: int | None
    coordinator_state: str | None
    transaction_timeout_ms: int | None
    transaction_age_ms: int | None  # since the coordinator started the transaction
    last_stable_offset: int | None
    high_watermark: int | None
    lso_lag_messages: int | None
    reason: str = ""
    two_phase_commit: bool = False  # KIP-939: no one times it out; an external manager commits or aborts it


@dataclass(frozen=True)
class UndeterminedRow(_CandidateColumns):
    """A candidate the cluster could not decide: neither hanging nor shown to be tracked."""

    reason: str
    missing: list[str]  # the parts that did not answer (a __transaction_state partition, an id, a broker)


def undetermined_row(c: Classification, now_ms: int) -> UndeterminedRow:
    return UndeterminedRow(**_candidate_fields(c, now_ms), reason=c.reason, missing=[str(m) for m in c.missing])


def _lag(tp: TopicPartition, lso: dict[TopicPartition, int], hw: dict[TopicPartition, int]) -> int | None:
    if tp in lso and tp in hw:
        return max(hw[tp] - lso[tp], 0)
    return None


def _candidate_fields(c: Classification, now_ms: int) -> dict:
    """The partition and the producer's open transaction: the columns of every verdict's row."""
    p = c.open_txn.producer
    return dict(
        topic=c.open_txn.tp.topic,
        partition=c.open_txn.tp.partition,
        producer_id=p.producer_id,
        producer_epoch=p.producer_epoch,
        start_offset=p.current_txn_start_offset,
        last_timestamp_ms=p.last_timestamp_ms,
        duration_ms=max(now_ms - p.last_timestamp_ms, 0),
        transactional_id=c.transactional_id,
    )


def _row_fields(c: Classification, now_ms: int, lso: dict[TopicPartition, int], hw: dict[TopicPartition, int]) -> dict:
    """The candidate's columns, its coordinator's view and the partition's LSO."""
    tp = c.open_txn.tp
    d = c.description
    return dict(
        **_candidate_fields(c, now_ms),
        coordinator_id=d.coordinator_id if d else None,
        coordinator_state=d.state if d else None,
        reason=c.reason,
        last_stable_offset=lso.get(tp),
        high_watermark=hw.get(tp),
        lso_lag_messages=_lag(tp, lso, hw),
    )


def hanging_row(
    c: Classification, now_ms: int, lso: dict[TopicPartition, int], hw: dict[TopicPartition, int]
) -> HangingRow:
    p = c.open_txn.producer
    tp = c.open_txn.tp
    return HangingRow(
        **_row_fields(c, now_ms, lso, hw),
        coordinator_epoch=p.coordinator_epoch,
        holds_lso=(lso[tp] == p.current_txn_start_offset) if tp in lso else None,
    )


def long_running_row(
    c: Classification, now_ms: int, lso: dict[TopicPartition, int], hw: dict[TopicPartition, int]
) -> LongRunningRow:
    d = c.description
    return LongRunningRow(
        **_row_fields(c, now_ms, lso, hw),
        transaction_timeout_ms=d.timeout_ms if d else None,
        transaction_age_ms=(now_ms - d.start_time_ms) if d and d.start_time_ms >= 0 else None,
        two_phase_commit=c.two_phase_commit,
    )


def max_timeout_from_configs(values: Iterable[str | None]) -> int | None:
    """The largest ``transaction.max.timeout.ms`` any broker allows (the bound any coordinator enforces)."""
    parsed = [int(v) for v in values if v is not None and str(v).strip().lstrip("-").isdigit()]
    return max(parsed) if parsed else None


# -- snapshot -----------------------------------------------------------------------------------


@dataclass
class HangingResult:
    hanging: list[HangingRow]
    long_running: list[LongRunningRow]
    max_transaction_timeout_ms: int
    max_transaction_timeout_source: str
    partitions_scanned: int
    open_transactions: int
    candidates: int
    missing: list[Missing] = field(default_factory=list)
    classifications: list[Classification] = field(default_factory=list)
    undetermined: list[UndeterminedRow] = field(default_factory=list)

    def report(self) -> Report:
        facts = {
            "max_transaction_timeout_ms": self.max_transaction_timeout_ms,
            "max_transaction_timeout_source": self.max_transaction_timeout_source,
            "partitions_scanned": self.partitions_scanned,
            "open_transactions": self.open_transactions,
            "candidates": self.candidates,
            "hanging_count": len(self.hanging),
            "long_running_count": len(self.long_running),
            "undetermined_count": len(self.undetermined),
        }
        return Report(
            facts=facts,
            sections={"hanging": self.hanging, "long_running": self.long_running, "undetermined": self.undetermined},
        )


def select_partitions(
    cluster: Cluster,
    broker_id: int | None = None,
    topics: Sequence[str] | None = None,
    partition: int | None = None,
) -> list[TopicPartition]:
    """The partitions to scan: named topics, or the whole cluster with internal topics; only those
    with a replica on ``broker_id`` when given (as Kafka's tool selects them)."""
    chosen = cluster.select_partitions(topics=topics, partition=partition, include_internal=True)
    if broker_id is not None:
        chosen = producers.partitions_for_broker(chosen, broker_id, (b.id for b in cluster.metadata().brokers))
    return [p.tp for p in chosen]


def cluster_max_transaction_timeout(cluster: Cluster) -> tuple[int, list[Missing]]:
    """The brokers' largest ``transaction.max.timeout.ms``, and the brokers that did not say."""
    configs = cluster.broker_configs([MAX_TIMEOUT_CONFIG])
    value = max_timeout_from_configs(
        entries[MAX_TIMEOUT_CONFIG].value for entries in configs.value.values() if MAX_TIMEOUT_CONFIG in entries
    )
    if value is None:
        why = "; ".join(map(str, configs.missing)) or "no broker reported it"
        raise ClusterError(f"could not read {MAX_TIMEOUT_CONFIG} from the brokers ({why}); pass --max-transaction-timeout")
    return value, list(configs.missing)


def coordinator_view(cluster: Cluster, producer_ids: Iterable[int]) -> tuple[CoordinatorView, list[Missing]]:
    """Steps 3 and 4 of the rule for these producer ids; the list names what did not answer.

    ListTransactions goes to every broker in the metadata; which ``__transaction_state``
    partitions that covered is decided from their leaders (:func:`transaction_log_gaps`).
    """
    wanted = sorted({pid for pid in producer_ids if pid >= 0})
    md = cluster.metadata()
    asked = [b.id for b in md.brokers]
    tids: dict[int, str] = {}
    list_missing: list[Missing] = []
    if wanted:  # an empty filter would list every transaction
        listed, _ = cluster.list_transactions(broker_ids=asked, producer_ids=wanted)
        list_missing = [m.within("transactional ids") for m in listed.missing]
        tids = {t.producer_id: t.transactional_id for t in listed.value if t.producer_id in set(wanted)}
    silent = {m.subject.id for m in list_missing if isinstance(m.subject, Broker)}
    gaps = transaction_log_gaps(md, [b for b in asked if b not in silent]) if wanted else []
    found: dict[str, TransactionDescription] = {}
    not_found: dict[str, str] = {}
    unanswered: dict[str, tuple[Missing, ...]] = {}
    describe_missing: list[Missing] = []
    if tids:
        described = cluster.describe_transactions(sorted(set(tids.values())))
        found, not_found, describe_missing = described.value.found, described.value.not_found, described.missing
        for tid in set(tids.values()):
            if tid not in found and tid not in not_found:
                unanswered[tid] = tuple(described.missing_for(TransactionalId(tid))) or (
                    Missing(TransactionalId(tid), "no answer from its coordinator"),
                )
    view = CoordinatorView(
        transactional_ids=tids,
        ids_missing=tuple(gaps),
        descriptions=found,
        unknown_ids=frozenset(not_found),
        unanswered_ids=unanswered,
    )
    # The gaps are reported through the verdicts they leave undetermined, not as missing on their own.
    return view, list_missing + list(describe_missing)


@dataclass
class Scan:
    """Every open transaction of a producer-state snapshot, the candidates, and their verdicts."""

    open_transactions: list[OpenTransaction]
    candidates: list[OpenTransaction]
    classifications: list[Classification]
    missing: list[Missing]


def classify_open_transactions(
    cluster: Cluster, states: dict[TopicPartition, list[ProducerState]], now_ms: int, max_transaction_timeout_ms: int
) -> Scan:
    """Steps 2 to 4 of the rule over described producer states (``hanging``, ``check`` and the exporter)."""
    all_open = open_transactions(states)
    candidates = [t for t in all_open if is_candidate(t.producer, now_ms, max_transaction_timeout_ms)]
    if not candidates:
        return Scan(all_open, candidates, [], [])
    view, missing = coordinator_view(cluster, {c.producer.producer_id for c in candidates})
    return Scan(all_open, candidates, classify_all(candidates, view), missing)


def find_hanging(
    cluster: Cluster,
    broker_id: int | None = None,
    topics: Sequence[str] | None = None,
    partition: int | None = None,
    max_transaction_timeout_ms: int | None = None,
) -> HangingResult:
    missing: list[Missing] = []
    # The selection first: a bad one (--partition without one --topic) is a usage error before any request.
    tps = select_partitions(cluster, broker_id, topics, partition)
    if max_transaction_timeout_ms is None:
        max_transaction_timeout_ms, config_missing = cluster_max_transaction_timeout(cluster)
        source = f"broker config {MAX_TIMEOUT_CONFIG}"
        missing += config_missing
    else:
        source = "--max-transaction-timeout"
    snapshot = producers.snapshot_producers(cluster, tps, broker_id=broker_id, with_transactional_ids=False)
    missing += snapshot.missing
    now_ms = snapshot.taken_at_ms
    scan = classify_open_transactions(cluster, snapshot.states, now_ms, max_transaction_timeout_ms)
    missing += scan.missing
    all_open, candidates, classifications = scan.open_transactions, scan.candidates, scan.classifications

    affected = sorted({c.open_txn.tp for c in classifications if c.verdict is not Verdict.UNDETERMINED})
    lso: dict[TopicPartition, int] = {}
    hw: dict[TopicPartition, int] = {}
    if affected:
        # Both isolation levels in one round trip per leader (LSO <= HW within each pair).
        pairs = cluster.stable_and_high_offsets(affected)
        lso = {tp: pair[0] for tp, pair in pairs.value.items()}
        hw = {tp: pair[1] for tp, pair in pairs.value.items()}
        missing += [m.within("offsets") for m in pairs.missing]

    hanging = [hanging_row(c, now_ms, lso, hw) for c in classifications if c.verdict is Verdict.HANGING]
    long_running = [long_running_row(c, now_ms, lso, hw) for c in classifications if c.verdict is Verdict.LONG_RUNNING]
    undetermined = [undetermined_row(c, now_ms) for c in classifications if c.verdict is Verdict.UNDETERMINED]
    return HangingResult(
        hanging=hanging,
        long_running=long_running,
        max_transaction_timeout_ms=max_transaction_timeout_ms,
        max_transaction_timeout_source=source,
        partitions_scanned=len(tps),
        open_transactions=len(all_open),
        candidates=len(candidates),
        missing=missing,
        classifications=classifications,
        undetermined=undetermined,
    )
