"""Make a genuinely hanging transaction on a real broker, for tests, the benchmark and the demo.

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

from kafkatxn.kafka import Cluster
from kafkatxn.model import TopicPartition
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


def init_producer_id(cluster: Cluster, transactional_id: str, transaction_timeout_ms: int = 10_000) -> tuple[int, int]:
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
    transaction_timeout_ms: int = 10_000,
) -> HangingTransaction:
    """An open transaction on ``topic``/``partition`` that the coordinator of ``transactional_id`` never hears of."""
    config = ConnectionConfig(bootstrap_servers=bootstrap_servers, timeout_ms=30_000)
    with Cluster(config) as cluster:
        producer_id, producer_epoch = init_producer_id(cluster, transactional_id, transaction_timeout_ms)
        tp = TopicPartition(topic, partition)
        values = [f"hanging-{transactional_id}-{i}".encode() for i in range(records)]
        offset = produce_transactional_batch(cluster, tp, producer_id, producer_epoch, transactional_id, values)
    return HangingTransaction(transactional_id, topic, partition, producer_id, producer_epoch, offset, records)


# -- a broker that lets hanging transactions be made ---------------------------------------------

# Verification off, so a raw Produce without AddPartitionsToTxn is accepted; a small maximum
# transaction timeout, so transactions become hanging candidates within seconds, not 15 minutes.
HANGING_BROKER_CONFIG = {
    "transaction.partition.verification.enable": "false",
    "transaction.max.timeout.ms": "10000",
}
HANGING_BROKER_MAX_TIMEOUT_MS = 10_000


# -- independent views of a partition (librdkafka consumers, not kafkatxn) -----------------------


def read_values(bootstrap_servers: str, tp: TopicPartition, read_committed: bool, wait_s: float = 3.0) -> list[bytes]:
    """Every record value a consumer of this isolation level gets from offset 0 within ``wait_s``."""
    import time

    from confluent_kafka import Consumer, TopicPartition as CTP

    consumer = Consumer({
        "bootstrap.servers": bootstrap_servers,
        "group.id": f"hanging-maker-{time.monotonic_ns()}",
        "enable.auto.commit": False,
        "isolation.level": "read_committed" if read_committed else "read_uncommitted",
        "log_level": 0,
    })
    values: list[bytes] = []
    try:
        consumer.assign([CTP(tp.topic, tp.partition, 0)])
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
    finally:
        consumer.close()
    return values


def end_offset(bootstrap_servers: str, tp: TopicPartition, read_committed: bool) -> int:
    """The partition's end as a consumer of this isolation level sees it: the LSO or the high watermark."""
    from confluent_kafka import Consumer, TopicPartition as CTP

    consumer = Consumer({
        "bootstrap.servers": bootstrap_servers,
        "group.id": "hanging-maker-watermarks",
        "isolation.level": "read_committed" if read_committed else "read_uncommitted",
        "log_level": 0,
    })
    try:
        _low, high = consumer.get_watermark_offsets(CTP(tp.topic, tp.partition), timeout=15)
        return high
    finally:
        consumer.close()


def write_committed(bootstrap_servers: str, tp: TopicPartition, values: list[bytes], transactional_id: str,
                    settle_timeout_s: float = 30) -> None:
    """One committed transaction of ``values`` on ``tp``, returned once its markers are written.

    commit_transaction returns once the coordinator decided (PrepareCommit); the markers follow, and
    until then the partition's high watermark and LSO still move by themselves. So this waits for its
    own id to be CompleteCommit (``wait_until_committed``). The LSO cannot tell instead: a hanging
    transaction before this one pins it, as in most scenes here.
    """
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap_servers, "transactional.id": transactional_id,
                         "transaction.timeout.ms": 10_000, "log_level": 0})
    producer.init_transactions(30)
    producer.begin_transaction()
    for value in values:
        producer.produce(tp.topic, value=value, partition=tp.partition)
    producer.commit_transaction(30)
    # The facade's deadline is the whole session's: past the wait's, so the wait's error is the one seen.
    with Cluster(ConnectionConfig(bootstrap_servers, timeout_ms=int(settle_timeout_s * 1000) + 10_000)) as cluster:
        wait_until_committed(cluster, transactional_id, settle_timeout_s)


def wait_until_committed(cluster: Cluster, transactional_id: str, timeout_s: float = 30, sleep=None, clock=None) -> None:
    """Wait until the coordinator of ``transactional_id`` says CompleteCommit: it moves there only once
    every partition's leader took the COMMIT marker (WriteTxnMarkers appends with acks=all), so each
    partition's high watermark is past it, whatever pins its LSO."""
    import time

    sleep = sleep or time.sleep
    clock = clock or time.monotonic
    deadline = clock() + timeout_s
    while True:
        described = cluster.describe_transactions([transactional_id])
        found = described.value.found.get(transactional_id)
        if found is not None and found.state == "CompleteCommit":
            return
        if clock() > deadline:
            seen = found.state if found else described.value.not_found.get(transactional_id) or described.missing
            raise HangingMakerError(f"the commit of {transactional_id!r} was not complete within {timeout_s} s: {seen}")
        sleep(0.05)


# Between its decision and its markers a transaction is PrepareCommit or PrepareAbort at its coordinator.
_ENDING = ("PrepareCommit", "PrepareAbort")


def wait_until_settled(bootstrap_servers: str, id_prefix: str, timeout_s: float = 30) -> None:
    """Wait until no transaction whose id starts with ``id_prefix`` is between its decision and its
    markers: a scene read before that (its LSO and high watermark) moves on by itself afterwards
    (CI: test_bad_input read c1 in PrepareCommit before a command and CompleteCommit after it).
    ``write_committed`` waits for its own; this is for transactions committed otherwise."""
    import time

    deadline = time.monotonic() + timeout_s
    with Cluster(ConnectionConfig(bootstrap_servers, timeout_ms=20_000)) as cluster:
        while True:
            listed, _ = cluster.list_transactions()
            ending = [(t.transactional_id, t.state) for t in listed.value
                      if t.transactional_id.startswith(id_prefix) and t.state in _ENDING]
            if listed.complete and not ending:
                return
            if time.monotonic() > deadline:
                raise HangingMakerError(f"transactions of {id_prefix}* did not settle within {timeout_s} s: {ending or listed.missing}")
            time.sleep(0.1)
