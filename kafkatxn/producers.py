"""Producer state on partitions (DescribeProducers), with the transactional id where the cluster knows it.

The snapshot step (:func:`snapshot_producers`) is the only I/O; :func:`producer_rows` and
:func:`summarize` are pure functions over the snapshot. :func:`describe_producers` does both for
callers that just want rows.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable

from kafkatxn.model import Missing, Part, Partial, PartitionInfo, ProducerState, TopicPartition
from kafkatxn.errors import NotFoundError, UnsupportedBrokerError
from kafkatxn.gather import in_one_run

if TYPE_CHECKING:  # capability modules are handed the facade; they do not import it
    from kafkatxn.kafka import Cluster


@dataclass(frozen=True)
class ProducerRow:
    """One active producer on one partition: the columns of ``kafka-transactions.sh describe-producers`` and more."""

    topic: str
    partition: int
    broker_id: int  # the replica that reported this state (the leader unless --broker-id)
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp_ms: int  # timestamp of the producer's last record batch (-1 if unknown)
    age_ms: int | None  # now - last_timestamp_ms; negative means the producer's clock is ahead (tables: "-2s")
    coordinator_epoch: int  # -1 until the producer's first transaction marker
    current_txn_start_offset: int  # -1 when the producer has no open transaction on this partition
    transactional_id: str | None  # None for idempotent producers, or when the id has expired


@dataclass(frozen=True)
class ProducerSummaryRow:
    """Producer-state load per broker and per topic (KIP-854 / KIP-936: many short-lived producers).

    ``scope`` is ``broker`` (``broker_id`` set) or ``topic`` (``topic`` set).
    """

    scope: str
    broker_id: int | None
    topic: str | None
    partitions: int
    active_producer_ids: int  # distinct producer ids
    producer_states: int  # (partition, producer id) entries: what the brokers keep in memory
    open_transactions: int  # distinct producer ids with a transaction open in this scope


@dataclass
class ProducerSnapshot:
    """What DescribeProducers (and ListTransactions for the ids) returned, at ``taken_at_ms``."""

    taken_at_ms: int
    states: dict[TopicPartition, list[ProducerState]]
    reported_by: dict[TopicPartition, int]  # broker asked for each partition
    transactional_ids: dict[int, str] = field(default_factory=dict)  # producer id -> transactional id
    missing: list[Missing] = field(default_factory=list)


def partitions_for_broker(partitions: Iterable[PartitionInfo], broker_id: int, known_brokers: Iterable[int]) -> list[PartitionInfo]:
    """The partitions of which ``broker_id`` holds a replica; an unknown broker raises :class:`NotFoundError`."""
    known = sorted(set(known_brokers))
    if broker_id not in known:
        raise NotFoundError(f"unknown broker id {broker_id} (brokers: {', '.join(map(str, known))})")
    return [p for p in partitions if broker_id in p.replicas]


def transactional_ids_for(cluster: Cluster, producer_ids: Iterable[int], missing: list[Missing] | None = None) -> dict[int, str]:
    """Transactional id of each producer id the coordinators know (ListTransactions with a producer-id filter).

    Idempotent producers, and producer ids whose transactional id expired or moved to a new producer
    id, are absent. Brokers that did not answer are appended to ``missing`` when given.
    """
    wanted = sorted({pid for pid in producer_ids if pid >= 0})
    if not wanted:
        return {}  # an empty filter would list every transaction
    try:
        listed, _ = cluster.list_transactions(producer_ids=wanted)
    except UnsupportedBrokerError as exc:  # Kafka 2.8: producer state, but no ListTransactions to name its ids
        if missing is None:
            raise
        missing.append(Missing(Part("transactional ids"), str(exc)))
        return {}
    if missing is not None:
        missing.extend(m.within("transactional ids") for m in listed.missing)
    return {t.producer_id: t.transactional_id for t in listed.value if t.producer_id in set(wanted)}


def snapshot_producers(
    cluster: Cluster,
    partitions: Iterable[PartitionInfo | TopicPartition],
    broker_id: int | None = None,
    with_transactional_ids: bool = True,
    described: Partial[dict[TopicPartition, list[ProducerState]]] | None = None,
) -> ProducerSnapshot:
    """DescribeProducers for ``partitions``, batched per leader, or all sent to ``broker_id``;
    ``described``: their answer, already asked for (``Cluster.offsets_and_producers``)."""
    if described is None:
        tps = sorted(dict.fromkeys(p.tp if isinstance(p, PartitionInfo) else TopicPartition(*p) for p in partitions))
        described = cluster.describe_producers(tps, broker_id=broker_id)
    if broker_id is not None:
        reported_by = {tp: broker_id for tp in described.value}
    else:
        leaders = cluster.metadata().leaders
        reported_by = {tp: leaders.get(tp, -1) for tp in described.value}
    missing = list(described.missing)
    tids: dict[int, str] = {}
    if with_transactional_ids:
        pids = {s.producer_id for states in described.value.values() for s in states}
        tids = transactional_ids_for(cluster, pids, missing)
    return ProducerSnapshot(int(time.time() * 1000), described.value, reported_by, tids, missing)


def producer_rows(snapshot: ProducerSnapshot) -> list[ProducerRow]:
    rows = []
    for tp in sorted(snapshot.states):
        for s in sorted(snapshot.states[tp], key=lambda s: s.producer_id):
            age_ms = snapshot.taken_at_ms - s.last_timestamp_ms if s.last_timestamp_ms >= 0 else None
            rows.append(
                ProducerRow(
                    topic=tp.topic,
                    partition=tp.partition,
                    broker_id=snapshot.reported_by.get(tp, -1),
                    producer_id=s.producer_id,
                    producer_epoch=s.producer_epoch,
                    last_sequence=s.last_sequence,
                    last_timestamp_ms=s.last_timestamp_ms,
                    age_ms=age_ms,
                    coordinator_epoch=s.coordinator_epoch,
                    current_txn_start_offset=s.current_txn_start_offset,
                    transactional_id=snapshot.transactional_ids.get(s.producer_id),
                )
            )
    return rows


def summarize(snapshot: ProducerSnapshot, per_topic: bool = True) -> list[ProducerSummaryRow]:
    """Per broker, then (``per_topic``) per topic: partitions described, distinct producers, states
    held, open transactions."""
    by_broker: dict[int, list[TopicPartition]] = defaultdict(list)
    by_topic: dict[str, list[TopicPartition]] = defaultdict(list)
    for tp in snapshot.states:
        by_broker[snapshot.reported_by.get(tp, -1)].append(tp)
        by_topic[tp.topic].append(tp)
    rows = [_summary_row(snapshot, "broker", tps, broker_id=b) for b, tps in sorted(by_broker.items())]
    if per_topic:
        rows += [_summary_row(snapshot, "topic", tps, topic=t) for t, tps in sorted(by_topic.items())]
    return rows


@in_one_run
def describe_producers(
    cluster: Cluster,
    partitions: Iterable[PartitionInfo | TopicPartition],
    broker_id: int | None = None,
    summary: bool = False,
) -> Partial[list[ProducerRow]] | Partial[list[ProducerSummaryRow]]:
    """Rows for ``kafkatxn producers``: one per partition and producer, or the summary per broker and topic."""
    snapshot = snapshot_producers(cluster, partitions, broker_id=broker_id, with_transactional_ids=not summary)
    rows = summarize(snapshot) if summary else producer_rows(snapshot)
    return Partial(rows, snapshot.missing)  # type: ignore[return-value]


def select_partitions(
    cluster: Cluster,
    topics: Iterable[str] = (),
    partition: int | None = None,
    broker_id: int | None = None,
    include_internal: bool = False,
) -> list[PartitionInfo]:
    """The partitions ``kafkatxn producers`` describes; unknown topics, partitions or brokers raise :class:`NotFoundError`.

    With ``broker_id``, only partitions that broker holds a replica of (it can describe no others).
    """
    topics = list(topics)
    chosen = cluster.select_partitions(topics, partition, include_internal=include_internal)
    if broker_id is None:
        return chosen
    on_broker = partitions_for_broker(chosen, broker_id, (b.id for b in cluster.metadata().brokers))
    if not on_broker and topics:
        named = f"{topics[0]}-{partition}" if partition is not None else ", ".join(topics)
        raise NotFoundError(f"broker {broker_id} holds no replica of {named}")
    return on_broker


def _summary_row(
    snapshot: ProducerSnapshot, scope: str, tps: list[TopicPartition], broker_id: int | None = None, topic: str | None = None
) -> ProducerSummaryRow:
    states = [s for tp in tps for s in snapshot.states[tp]]
    return ProducerSummaryRow(
        scope=scope,
        broker_id=broker_id,
        topic=topic,
        partitions=len(tps),
        active_producer_ids=len({s.producer_id for s in states}),
        producer_states=len(states),
        open_transactions=len({s.producer_id for s in states if s.current_txn_start_offset >= 0}),
    )

