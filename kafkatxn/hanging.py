"""Hanging transactions: open on a partition, unknown to their coordinator, so never completed.

The rule is the partition-side one of KIP-664, as Kafka's ``kafka-transactions.sh find-hanging``
applies it:

1. DescribeProducers over the partitions (≤500 a request, to leaders or to one broker);
2. candidates: producers with an open transaction whose last write is older than the maximum
   transaction timeout — the coordinator would have aborted a transaction it tracks by then;
3. map the candidates' producer ids to transactional ids (ListTransactions, producer-id filter);
4. DescribeTransactions; a candidate is **hanging** when no transactional id maps to its producer
   id, the coordinator does not know the id, or the coordinator's transaction does not include the
   partition. Otherwise its coordinator still tracks it: **long-running**, listed separately.

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
from typing import Iterable, Sequence

from kafkatxn import producers
from kafkatxn.kafka import Cluster
from kafkatxn.model import Missing, ProducerState, TopicPartition, TransactionalId, TransactionDescription
from kafkatxn.errors import ClusterError
from kafkatxn.output import Report

MAX_TIMEOUT_CONFIG = "transaction.max.timeout.ms"

REASON_NO_TRANSACTIONAL_ID = "no transactional id for producer"
REASON_UNKNOWN_TO_COORDINATOR = "transactional id unknown to coordinator"
REASON_NOT_TRACKED = "coordinator does not track this partition"
REASON_OTHER_PRODUCER = "coordinator's transaction belongs to another producer id"


@dataclass(frozen=True)
class OpenTransaction:
    """One producer's open transaction on one partition, from DescribeProducers."""

    tp: TopicPartition
    producer: ProducerState

    @property
    def start_offset(self) -> int:
        return self.producer.current_txn_start_offset


class Verdict(str, enum.Enum):
    HANGING = "hanging"
    TRACKED = "tracked"  # the coordinator still tracks it and will complete or abort it
    UNDETERMINED = "undetermined"  # the coordinator could not be asked


@dataclass(frozen=True)
class CoordinatorView:
    """What the coordinators said about the candidates' producer ids (snapshot of steps 3 and 4)."""

    transactional_ids: dict[int, str] = field(default_factory=dict)  # producer id -> transactional id
    ids_complete: bool = True  # every broker answered ListTransactions
    descriptions: dict[str, TransactionDescription] = field(default_factory=dict)
    unknown_ids: frozenset[str] = frozenset()  # TRANSACTIONAL_ID_NOT_FOUND
    unanswered_ids: dict[str, str] = field(default_factory=dict)  # id -> why its coordinator did not answer


@dataclass(frozen=True)
class Classification:
    open_txn: OpenTransaction
    verdict: Verdict
    reason: str
    transactional_id: str | None = None
    description: TransactionDescription | None = None


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
    """Hanging, tracked, or undetermined: the coordinator side of the rule for one open transaction."""
    pid = open_txn.producer.producer_id
    tid = view.transactional_ids.get(pid)
    if tid is None:
        if not view.ids_complete:
            return Classification(open_txn, Verdict.UNDETERMINED, "not every broker answered ListTransactions")
        return Classification(open_txn, Verdict.HANGING, REASON_NO_TRANSACTIONAL_ID)
    if tid in view.unknown_ids:
        return Classification(open_txn, Verdict.HANGING, REASON_UNKNOWN_TO_COORDINATOR, tid)
    description = view.descriptions.get(tid)
    if description is None:
        why = view.unanswered_ids.get(tid, "no answer from its coordinator")
        return Classification(open_txn, Verdict.UNDETERMINED, why, tid)
    if description.producer_id != pid:
        return Classification(
            open_txn, Verdict.HANGING, f"{REASON_OTHER_PRODUCER} ({description.producer_id})", tid, description
        )
    if open_txn.tp not in description.partitions:
        return Classification(open_txn, Verdict.HANGING, REASON_NOT_TRACKED, tid, description)
    return Classification(open_txn, Verdict.TRACKED, f"coordinator tracks it (state {description.state})", tid, description)


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
class LongRunningRow:
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    start_offset: int
    last_timestamp_ms: int
    duration_ms: int
    transactional_id: str | None
    coordinator_id: int | None
    coordinator_state: str | None
    transaction_timeout_ms: int | None
    transaction_age_ms: int | None  # since the coordinator started the transaction
    last_stable_offset: int | None
    high_watermark: int | None
    lso_lag_messages: int | None


def _lag(tp: TopicPartition, lso: dict[TopicPartition, int], hw: dict[TopicPartition, int]) -> int | None:
    if tp in lso and tp in hw:
        return max(hw[tp] - lso[tp], 0)
    return None


def hanging_row(
    c: Classification, now_ms: int, lso: dict[TopicPartition, int], hw: dict[TopicPartition, int]
) -> HangingRow:
    p = c.open_txn.producer
    tp = c.open_txn.tp
    d = c.description
    return HangingRow(
        topic=tp.topic,
        partition=tp.partition,
        producer_id=p.producer_id,
        producer_epoch=p.producer_epoch,
        coordinator_epoch=p.coordinator_epoch,
        start_offset=p.current_txn_start_offset,
        last_timestamp_ms=p.last_timestamp_ms,
        duration_ms=max(now_ms - p.last_timestamp_ms, 0),
        transactional_id=c.transactional_id,
        coordinator_id=d.coordinator_id if d else None,
        coordinator_state=d.state if d else None,
        reason=c.reason,
        last_stable_offset=lso.get(tp),
        high_watermark=hw.get(tp),
        lso_lag_messages=_lag(tp, lso, hw),
        holds_lso=(lso[tp] == p.current_txn_start_offset) if tp in lso else None,
    )


def long_running_row(
    c: Classification, now_ms: int, lso: dict[TopicPartition, int], hw: dict[TopicPartition, int]
) -> LongRunningRow:
    p = c.open_txn.producer
    tp = c.open_txn.tp
    d = c.description
    return LongRunningRow(
        topic=tp.topic,
        partition=tp.partition,
        producer_id=p.producer_id,
        producer_epoch=p.producer_epoch,
        start_offset=p.current_txn_start_offset,
        last_timestamp_ms=p.last_timestamp_ms,
        duration_ms=max(now_ms - p.last_timestamp_ms, 0),
        transactional_id=c.transactional_id,
        coordinator_id=d.coordinator_id if d else None,
        coordinator_state=d.state if d else None,
        transaction_timeout_ms=d.timeout_ms if d else None,
        transaction_age_ms=(now_ms - d.start_time_ms) if d and d.start_time_ms >= 0 else None,
        last_stable_offset=lso.get(tp),
        high_watermark=hw.get(tp),
        lso_lag_messages=_lag(tp, lso, hw),
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

    def report(self) -> Report:
        facts = {
            "max_transaction_timeout_ms": self.max_transaction_timeout_ms,
            "max_transaction_timeout_source": self.max_transaction_timeout_source,
            "partitions_scanned": self.partitions_scanned,
            "open_transactions": self.open_transactions,
            "candidates": self.candidates,
            "hanging_count": len(self.hanging),
            "long_running_count": len(self.long_running),
        }
        return Report(facts=facts, sections={"hanging": self.hanging, "long_running": self.long_running})


def undetermined_missing(c: Classification) -> Missing:
    """An undetermined candidate, as a missing part of the answer."""
    return Missing(c.open_txn.tp, f"producer {c.open_txn.producer.producer_id}: {c.reason}")


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
    """Steps 3 and 4 of the rule for these producer ids; the list names what did not answer."""
    list_missing: list[Missing] = []
    tids = producers.transactional_ids_for(cluster, producer_ids, list_missing)
    found: dict[str, TransactionDescription] = {}
    not_found: dict[str, str] = {}
    unanswered: dict[str, str] = {}
    describe_missing: list[Missing] = []
    if tids:
        described = cluster.describe_transactions(sorted(set(tids.values())))
        found, not_found, describe_missing = described.value.found, described.value.not_found, described.missing
        for m in describe_missing:
            if isinstance(m.subject, TransactionalId):
                unanswered[m.subject.id] = str(m)
    view = CoordinatorView(
        transactional_ids=tids,
        ids_complete=not list_missing,
        descriptions=found,
        unknown_ids=frozenset(not_found),
        unanswered_ids=unanswered,
    )
    return view, list_missing + describe_missing


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
        lso_part = cluster.list_offsets(affected, read_committed=True)
        hw_part = cluster.list_offsets(affected, read_committed=False)
        lso, hw = lso_part.value, hw_part.value
        missing += [m.within("LSO") for m in lso_part.missing] + [m.within("high watermark") for m in hw_part.missing]

    hanging = [hanging_row(c, now_ms, lso, hw) for c in classifications if c.verdict is Verdict.HANGING]
    long_running = [long_running_row(c, now_ms, lso, hw) for c in classifications if c.verdict is Verdict.TRACKED]
    for c in classifications:
        if c.verdict is Verdict.UNDETERMINED:
            missing.append(undetermined_missing(c))
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
    )
