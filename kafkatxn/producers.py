"""Producer state on partitions (DescribeProducers), with the transactional id where the cluster knows it.

The producer states are a fact of :mod:`kafkatxn.facts` (:func:`kafkatxn.facts.producer_states`, the only
I/O); :func:`producer_rows` and :func:`summarize` are pure functions over them.
:func:`describe_producers` does both for callers that just want rows.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Iterable

from kafkatxn import facts
from kafkatxn.facts import ProducerStates
from kafkatxn.model import FrozenRecord, Partial, PartitionInfo, ProducerState, TopicPartition, record
from kafkatxn.producer_table import every_state
from kafkatxn.errors import NotFoundError
from kafkatxn.gather import in_one_run

if TYPE_CHECKING:  # capability modules are handed the facade; they do not import it
    from kafkatxn.kafka import Cluster


@record
class ProducerRow(FrozenRecord):
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

    def __init__(self, topic: str, partition: int, broker_id: int, producer_id: int, producer_epoch: int,
                 last_sequence: int, last_timestamp_ms: int, age_ms: int | None, coordinator_epoch: int,
                 current_txn_start_offset: int, transactional_id: str | None) -> None:
        self.__dict__.update(topic=topic, partition=partition, broker_id=broker_id, producer_id=producer_id,
                             producer_epoch=producer_epoch, last_sequence=last_sequence,
                             last_timestamp_ms=last_timestamp_ms, age_ms=age_ms, coordinator_epoch=coordinator_epoch,
                             current_txn_start_offset=current_txn_start_offset, transactional_id=transactional_id)


@record
class ProducerSummaryRow(FrozenRecord):
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

    def __init__(self, scope: str, broker_id: int | None, topic: str | None, partitions: int, active_producer_ids: int,
                 producer_states: int, open_transactions: int) -> None:
        self.__dict__.update(scope=scope, broker_id=broker_id, topic=topic, partitions=partitions,
                             active_producer_ids=active_producer_ids, producer_states=producer_states,
                             open_transactions=open_transactions)


def producer_rows(snapshot: ProducerStates) -> list[ProducerRow]:
    rows = []
    states = every_state(snapshot.states)  # every partition looked up: in C
    for tp in sorted(states):
        for s in sorted(states[tp], key=lambda s: s.producer_id):
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


def summarize(snapshot: ProducerStates, per_topic: bool = True) -> list[ProducerSummaryRow]:
    """Per broker, then (``per_topic``) per topic: partitions described, distinct producers, states
    held, open transactions."""
    by_broker: dict[int, list[TopicPartition]] = defaultdict(list)
    by_topic: dict[str, list[TopicPartition]] = defaultdict(list)
    states = every_state(snapshot.states)  # every partition looked up twice: in C
    reporter = facts.reporter_of(snapshot.reported_by)  # (each partition iterated was described)
    for tp in states:
        by_broker[reporter(tp, -1)].append(tp)
        by_topic[tp.topic].append(tp)
    rows = [_summary_row(states, "broker", tps, broker_id=b) for b, tps in sorted(by_broker.items())]
    if per_topic:
        rows += [_summary_row(states, "topic", tps, topic=t) for t, tps in sorted(by_topic.items())]
    return rows


@in_one_run
def describe_producers(
    cluster: Cluster,
    partitions: Iterable[PartitionInfo | TopicPartition],
    broker_id: int | None = None,
    summary: bool = False,
) -> Partial[list[ProducerRow]] | Partial[list[ProducerSummaryRow]]:
    """Rows for ``kafkatxn producers``: one per partition and producer, or the summary per broker and topic."""
    snapshot = facts.producer_states(cluster, partitions, broker_id=broker_id, with_transactional_ids=not summary)
    rows = summarize(snapshot) if summary else producer_rows(snapshot)
    return Partial(rows, snapshot.missing)  # type: ignore[return-value]


def select_partitions(
    cluster: Cluster,
    topics: Iterable[str] = (),
    partition: int | None = None,
    broker_id: int | None = None,
    include_internal: bool = False,
) -> list[TopicPartition]:
    """The partitions ``kafkatxn producers`` describes; unknown topics, partitions or brokers raise :class:`NotFoundError`.

    With ``broker_id``, only partitions that broker holds a replica of (it can describe no others).
    """
    topics = list(topics)
    chosen = facts.selected_partitions(cluster, topics, partition, broker_id, include_internal=include_internal)
    if broker_id is not None and not chosen and topics:
        named = f"{topics[0]}-{partition}" if partition is not None else ", ".join(topics)
        raise NotFoundError(f"broker {broker_id} holds no replica of {named}")
    return chosen


def _summary_row(
    described: Mapping[TopicPartition, Sequence[ProducerState]], scope: str, tps: list[TopicPartition],
    broker_id: int | None = None, topic: str | None = None,
) -> ProducerSummaryRow:
    states = [s for tp in tps for s in described[tp]]
    return ProducerSummaryRow(
        scope=scope,
        broker_id=broker_id,
        topic=topic,
        partitions=len(tps),
        active_producer_ids=len({s.producer_id for s in states}),
        producer_states=len(states),
        open_transactions=len({s.producer_id for s in states if s.current_txn_start_offset >= 0}),
    )

