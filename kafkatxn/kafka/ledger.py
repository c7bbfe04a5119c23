"""The Kafka side of :mod:`kafkatxn.spark_eos`'s exactly-once writer: a task's output and its ledger
record in one transaction, and reading the ledger back with ``read_committed``.

The ledger is a compacted topic. Its key names one writing task, ``<application>/<query>/<partition>``;
its value says which batch that task last committed (JSON). The writer's task, as its transactional
id, calls InitProducerId first: that fences every earlier attempt of the same task and lets the
coordinator finish whatever transaction that attempt left (committed if it reached PrepareCommit,
aborted otherwise). Only then does it read its ledger entry, before it begins a transaction or takes
a row: what it reads is final, so a batch the entry already covers is skipped with nothing produced,
and any other is written with the entry in the same transaction. A Python worker keeps the producer
for the task's next batch (:class:`_Kept`), unless its transaction was aborted.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from kafkatxn.kafka.client_logs import ASSIGN_ONLY_CONSUMER, routed
from kafkatxn.kafka.client_errors import clean, kafka_error_code
from kafkatxn.kafka.transactional_writer import abort_quietly, produce_all, transactional_producer

# The ledger reader: assign-only (no group joined, nothing committed), committed records only, and an
# end-of-partition event at the last stable offset.
# fetch.wait.max.ms: the broker answers an empty fetch at once, so the end of the partition (reached
# past the commit markers, which a consumer never sees as records) is known in milliseconds, not the
# 500 ms librdkafka's default makes a reader wait there.
_READER_FIXED = {**ASSIGN_ONLY_CONSUMER, "group.id": "kafkatxn-ledger-reader", "isolation.level": "read_committed",
                 "fetch.wait.max.ms": 5}
# Producer and admin settings a consumer must not be given (librdkafka warns or refuses).
_NOT_FOR_CONSUMERS = ("transactional.id", "transaction.timeout.ms", "enable.idempotence", "acks", "linger.ms",
                      "batch.size", "batch.num.messages", "queue.buffering.max.messages", "queue.buffering.max.kbytes",
                      "compression.type", "compression.codec", "delivery.timeout.ms", "message.timeout.ms")
FIRST_WINDOW = 64  # offsets read back from the end first; the window grows 4x until the key is found


@dataclass(frozen=True)
class LedgerSlot:
    """Where one task's ledger entry lives: topic, partition and key."""

    topic: str
    partition: int
    key: str


@dataclass(frozen=True)
class TaskOutcome:
    """What one task did for one batch: wrote ``records`` and its ledger entry, or skipped the batch
    because its ledger entry already covered ``committed_batch``."""

    transactional_id: str
    batch_id: int
    records: int
    skipped: bool
    committed_batch: int | None
    new_producer: bool = True  # False: this worker's producer kept from an earlier batch (no InitProducerId)


def consumer_settings(producer_config: Mapping[str, Any]) -> dict[str, Any]:
    """The connection settings of ``producer_config`` for the ledger reader."""
    conf = {k: v for k, v in producer_config.items() if k not in _NOT_FOR_CONSUMERS}
    return {**conf, **_READER_FIXED}


def ledger_partition_count(config: Mapping[str, Any], topic: str, timeout_s: float = 30.0) -> int:
    """The ledger topic's partition count; 0 when it does not exist."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    try:
        found = AdminClient(routed(_admin_settings(config))).list_topics(topic, timeout=timeout_s).topics.get(topic)
    except KafkaException as e:
        raise RuntimeError(f"could not read the ledger topic {topic}: {clean(e)}") from None
    return len(found.partitions) if found is not None and found.error is None else 0


def ensure_ledger_topic(config: Mapping[str, Any], topic: str, partitions: int, timeout_s: float = 30.0) -> int:
    """Create the compacted ledger topic unless it exists; returns its partition count."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    count = ledger_partition_count(config, topic, timeout_s)
    if count:
        return count
    admin = AdminClient(routed(_admin_settings(config)))
    try:
        replicas = min(3, max(1, len(admin.list_topics(timeout=timeout_s).brokers)))
        new = NewTopic(topic, num_partitions=partitions, replication_factor=replicas, config=ledger_topic_config(replicas))
        admin.create_topics([new], request_timeout=timeout_s)[topic].result(timeout_s)
    except KafkaException as e:
        if kafka_error_code(e) != "TOPIC_ALREADY_EXISTS":
            raise RuntimeError(f"could not create the ledger topic {topic}: {clean(e)}") from None
    deadline = time.monotonic() + timeout_s
    while not (count := ledger_partition_count(config, topic, timeout_s)) and time.monotonic() < deadline:
        time.sleep(0.2)  # metadata catches up with the creation
    return count or partitions


def ledger_topic_config(replication_factor: int) -> dict[str, str]:
    """The ledger's topic settings: compacted (never deleted by time or size), and a committed entry
    kept on a majority of replicas."""
    return {
        "cleanup.policy": "compact",
        "min.insync.replicas": str(max(1, min(2, replication_factor - 1))),
        "min.compaction.lag.ms": "0",
    }


def _admin_settings(config: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k not in _NOT_FOR_CONSUMERS}


def last_committed_batch(consumer_config: Mapping[str, Any], slot: LedgerSlot, timeout_s: float) -> int | None:
    """The batch the ledger entry at ``slot`` says was committed last (read_committed), or None.

    Read backwards from the end in growing windows, so the cost is the few records after the task's
    own last entry, not the ledger's length. The reader is kept for the next call in this process."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    deadline = time.monotonic() + timeout_s
    key = slot.key.encode()
    conf_key = config_key(consumer_config)
    consumer = _READERS.pop(conf_key, None) or Consumer(routed(consumer_config))
    try:
        low, end = consumer.get_watermark_offsets(TopicPartition(slot.topic, slot.partition), timeout=timeout_s)
        window = FIRST_WINDOW
        while end > low:
            start = max(low, end - window)
            consumer.assign([TopicPartition(slot.topic, slot.partition, start)])
            found: bytes | None = None
            seen = False
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"reading the ledger {slot.topic}[{slot.partition}] did not finish within {timeout_s:g}s")
                msg = consumer.poll(min(left, 1.0))
                if msg is None:
                    continue
                if msg.error():
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        break
                    raise RuntimeError(f"reading the ledger {slot.topic}[{slot.partition}] failed: {clean(msg.error())}")
                if msg.offset() >= end:
                    break
                if msg.key() == key:
                    found, seen = msg.value(), True
            if seen:
                result = None if found is None else int(json.loads(found)["batch"])
                break
            end, window = start, window * 4
        else:
            result = None
    except BaseException:
        consumer.close()  # its state is unknown: the next read builds a new one
        raise
    consumer.unassign()
    _READERS[conf_key] = consumer
    return result


def config_key(config: Mapping[str, Any]) -> tuple:
    """A hashable stand-in for a client configuration (callbacks by their kind: they are pickled
    anew for every task, and the same writer's are the same)."""
    plain = (str, int, float, bool, type(None))
    return tuple(sorted((k, v if isinstance(v, plain) else type(v).__qualname__) for k, v in config.items()))


@dataclass
class _Kept:
    """A transactional producer kept by this Python worker for the next batch of the same task.

    ``committed`` is the batch the task's ledger entry holds (None: no entry), as this producer read
    it right after its InitProducerId or committed it since (``known``; not known: the ledger must be
    read). While the producer is not fenced, no later attempt of its transactional id has called
    InitProducerId, and every earlier one had finished before this producer's own InitProducerId: so
    what it read or last committed is the ledger's. A later attempt fences it, and a fenced producer
    can commit nothing: so trusting ``committed`` never lets a batch be written twice.

    A producer whose transaction was aborted is never kept: an abort purges what librdkafka had
    queued, and a produce request built but not sent leaves a gap in the partition's sequence
    numbers that fails the producer's next commit (OUT_OF_ORDER_SEQUENCE_NUMBER)."""

    producer: Any
    committed: int | None
    known: bool = False  # ``committed`` is the ledger's: read after InitProducerId, or this producer's own commit
    aborted: bool = False  # an aborted transaction may leave librdkafka's sequence numbers behind: never kept

    def abort(self, timeout_s: float) -> None:
        self.aborted = True
        abort_quietly(self.producer, timeout_s)


# Per Python worker (Spark reuses its workers across tasks and batches): one kept producer per
# (transactional id, settings), one kept ledger reader per settings. A task takes an entry out while
# it works and puts it back only when its transaction ended cleanly.
_KEPT: dict[tuple, _Kept] = {}
_READERS: dict[tuple, Any] = {}


class _NotUsable(Exception):
    """A kept producer failed before any of the task's records were handed to it (fenced, most often)."""


def covers(committed: int | None, batch_id: int) -> bool:
    """Whether a ledger entry saying ``committed`` means ``batch_id`` was already written (the one
    ledger check: batch ids only grow, and a task writes its entry with every batch)."""
    return committed is not None and committed >= batch_id


def write_batch_once(
    producer_config: Mapping[str, Any],
    transactional_id: str,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes | None]],
    slot: LedgerSlot,
    batch_id: int,
    timeout_s: float,
    entry: Mapping[str, Any] | None = None,
) -> TaskOutcome:
    """Write ``records`` to ``topic`` and the ledger entry "``slot.key`` committed ``batch_id``" in one
    transaction as ``transactional_id``, unless the ledger already covers ``batch_id``.

    With this worker's kept producer for the id: no InitProducerId, and no ledger read (see
    :class:`_Kept`); its transaction starts with the ledger entry, whose delivery is awaited before
    any record is taken, so a fenced producer is found while the records are still untouched: it is
    dropped, and the task goes on as below.

    Otherwise a new producer: InitProducerId first (fencing and completing any earlier attempt of this
    task), then the ledger is read; if it already covers ``batch_id`` the task is skipped before any
    transaction begins (nothing produced, nothing to abort). On any failure the transaction is
    aborted, the producer dropped and the error raised: Spark's retry starts afresh. A producer is
    kept for the worker's next batch only when its transaction committed or never began."""
    key = (transactional_id, config_key(producer_config))
    kept = _KEPT.pop(key, None)
    if kept is not None:
        try:
            outcome = _transaction(kept, True, producer_config, transactional_id, topic, records, slot, batch_id, timeout_s, entry)
        except _NotUsable:
            kept.producer.flush(0)
        except Exception:
            kept.abort(timeout_s)
            kept.producer.flush(0)
            raise
        else:
            _keep(key, kept)
            return outcome
    fresh = _Kept(transactional_producer(producer_config, transactional_id), None)
    try:
        fresh.producer.init_transactions(timeout_s)
        outcome = _transaction(fresh, False, producer_config, transactional_id, topic, records, slot, batch_id, timeout_s, entry)
    except Exception:
        fresh.abort(timeout_s)
        fresh.producer.flush(0)
        raise
    _keep(key, fresh)
    return outcome


def _keep(key: tuple, kept: _Kept) -> None:
    if kept.aborted:
        kept.producer.flush(0)
    else:
        _KEPT[key] = kept


def _transaction(kept: _Kept, was_kept: bool, producer_config: Mapping[str, Any], transactional_id: str, topic: str,
                 records: Iterable[tuple[bytes | None, bytes | None]], slot: LedgerSlot, batch_id: int,
                 timeout_s: float, entry: Mapping[str, Any] | None) -> TaskOutcome:
    """One batch's transaction on an initialised producer (``was_kept``: from an earlier task, so
    probed first); updates ``kept.committed``. The ledger is known before a row is produced."""
    if not kept.known:
        kept.committed = last_committed_batch(consumer_settings(producer_config), slot, timeout_s)
        kept.known = True
    if covers(kept.committed, batch_id):
        return TaskOutcome(transactional_id, batch_id, 0, True, kept.committed, not was_kept)
    producer = kept.producer
    value = json.dumps({**(entry or {}), "batch": batch_id, "transactional_id": transactional_id,
                        "committed_at_ms": int(time.time() * 1000)}).encode()
    ledger_entry = dict(topic=slot.topic, key=slot.key.encode(), value=value, partition=slot.partition)
    if was_kept:
        _probe(kept, ledger_entry, timeout_s)
    else:
        producer.begin_transaction()
        producer.produce(**ledger_entry)
    count = produce_all(producer, topic, records)
    kept.known = False  # unknown until the commit is known to have succeeded
    producer.commit_transaction(timeout_s)
    kept.committed, kept.known = batch_id, True
    return TaskOutcome(transactional_id, batch_id, count, False, batch_id, not was_kept)


def _probe(kept: _Kept, ledger_entry: Mapping[str, Any], timeout_s: float) -> None:
    """Begin a kept producer's transaction with the ledger entry and wait for its delivery: a producer
    fenced by a later attempt (or otherwise unusable) fails here, before any record is taken."""
    producer = kept.producer
    delivered: dict[str, Any] = {}
    try:
        producer.begin_transaction()
        producer.produce(**ledger_entry, on_delivery=lambda err, _msg: delivered.setdefault("error", err))
        producer.flush(timeout_s)
    except Exception as e:  # noqa: BLE001 - any failure here: start afresh with a new producer
        raise _NotUsable(str(e)) from None
    if delivered.get("error") is not None or "error" not in delivered:
        kept.abort(timeout_s)
        raise _NotUsable(str(delivered.get("error")))


def writer_batches(connection: Mapping[str, Any], topic: str, prefix: str, timeout_s: float) -> dict[str, int]:
    """Per task key starting with ``prefix`` (``<application>/<query>/``), the batch its ledger entry
    says was committed last: the whole compacted topic read with ``read_committed`` to its end
    (a deleted entry, a tombstone, is left out). Raises TimeoutError or RuntimeError, in words."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    deadline = time.monotonic() + timeout_s
    consumer = Consumer(routed(consumer_settings(connection)))
    found: dict[str, int] = {}
    try:
        meta = consumer.list_topics(topic, timeout=max(deadline - time.monotonic(), 0.1)).topics.get(topic)
        if meta is None or meta.error is not None or not meta.partitions:
            raise RuntimeError(f"the ledger topic {topic} does not exist")
        consumer.assign([TopicPartition(topic, p, -2) for p in meta.partitions])  # -2: the beginning
        left = set(meta.partitions)
        while left:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading the ledger topic {topic} did not finish within {timeout_s:g}s")
            msg = consumer.poll(min(max(deadline - time.monotonic(), 0.01), 0.5))
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    left.discard(msg.partition())
                    continue
                raise RuntimeError(f"reading the ledger topic {topic} failed: {clean(msg.error())}")
            key = (msg.key() or b"").decode("utf-8", "replace")
            if key.startswith(prefix):
                if msg.value() is None:
                    found.pop(key, None)
                else:
                    found[key] = int(json.loads(msg.value())["batch"])
    finally:
        consumer.close()
    return found
