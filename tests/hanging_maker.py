"""Make a genuinely hanging transaction on a real broker, for tests and the benchmark.

A hanging transaction is an open transaction on a partition that its coordinator does not track.
A well-behaved client cannot make one, so this speaks the protocol by hand: InitProducerId for a
transactional id (the coordinator now knows the id, in state Empty with no partitions), then a
transactional record batch written straight to the partition leader with Produce, never sending
AddPartitionsToTxn. The broker must run with ``transaction.partition.verification.enable=false``,
otherwise it asks the coordinator and rejects the write. No marker is ever written for that
batch, so the partition's last stable offset stays pinned at its first offset.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkatxn.cluster import Cluster, TopicPartition
from kafkatxn.config import ConnectionConfig

# Produce v12 and older name topics by name (v13 wants topic ids); v3+ carries the transactional id.
_PRODUCE_VERSION = 11


class HangingMakerError(RuntimeError):
    pass


@dataclass(frozen=True)
class HangingTransaction:
    transactional_id: str
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    start_offset: int  # offset of the first record of the open transaction
    records: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


def init_producer_id(cluster: Cluster, transactional_id: str, transaction_timeout_ms: int = 60_000) -> tuple[int, int]:
    """InitProducerId at the id's coordinator; returns (producer_id, producer_epoch)."""
    from kafka.protocol.producer.transaction import InitProducerIdRequest

    coordinators = cluster.find_transaction_coordinators([transactional_id])
    if transactional_id not in coordinators.value:
        raise HangingMakerError(f"no coordinator for {transactional_id!r}: {coordinators.missing}")
    request = InitProducerIdRequest(
        transactional_id=transactional_id, transaction_timeout_ms=transaction_timeout_ms, max_version=4
    )
    (resp,) = cluster._send_all([(coordinators.value[transactional_id], request)])
    if isinstance(resp, BaseException):
        raise HangingMakerError(f"InitProducerId failed: {resp!r}")
    if resp.error_code:
        raise HangingMakerError(f"InitProducerId failed with error code {resp.error_code}")
    return resp.producer_id, resp.producer_epoch


def produce_transactional_batch(
    cluster: Cluster,
    tp: TopicPartition,
    producer_id: int,
    producer_epoch: int,
    transactional_id: str,
    values: list[bytes],
    base_sequence: int = 0,
) -> int:
    """One transactional batch to the leader of ``tp`` without AddPartitionsToTxn; returns its base offset."""
    from kafka.protocol.producer.produce import ProduceRequest
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=True, producer_id=producer_id,
        producer_epoch=producer_epoch, base_sequence=base_sequence, batch_size=1 << 20,
    )
    for i, value in enumerate(values):
        builder.append(i, timestamp=None, key=None, value=value, headers=[])
    records = bytes(builder.build())
    leader = next(p.leader for p in cluster.metadata(refresh=True).partitions if p.tp == tp)
    data = ProduceRequest.TopicProduceData
    request = ProduceRequest(
        transactional_id=transactional_id,
        acks=-1,
        timeout_ms=10_000,
        topic_data=[data(name=tp.topic, partition_data=[data.PartitionProduceData(index=tp.partition, records=records)])],
        max_version=_PRODUCE_VERSION,
    )
    (resp,) = cluster._send_all([(leader, request)])
    if isinstance(resp, BaseException):
        raise HangingMakerError(f"Produce to {tp} failed: {resp!r}")
    for topic in resp.responses:
        for part in topic.partition_responses:
            if part.error_code:
                raise HangingMakerError(
                    f"Produce to {tp} failed with error code {part.error_code} "
                    "(is transaction.partition.verification.enable=false on the broker?)"
                )
            return part.base_offset
    raise HangingMakerError(f"Produce to {tp}: empty response")


def make_hanging_transaction(
    bootstrap_servers: str,
    transactional_id: str,
    topic: str,
    partition: int = 0,
    records: int = 3,
    transaction_timeout_ms: int = 60_000,
) -> HangingTransaction:
    """An open transaction on ``topic``/``partition`` that the coordinator of ``transactional_id`` never hears of."""
    config = ConnectionConfig(bootstrap_servers=bootstrap_servers, timeout_ms=30_000)
    with Cluster(config) as cluster:
        producer_id, producer_epoch = init_producer_id(cluster, transactional_id, transaction_timeout_ms)
        tp = TopicPartition(topic, partition)
        values = [f"hanging-{transactional_id}-{i}".encode() for i in range(records)]
        offset = produce_transactional_batch(cluster, tp, producer_id, producer_epoch, transactional_id, values)
    return HangingTransaction(transactional_id, topic, partition, producer_id, producer_epoch, offset, records)
