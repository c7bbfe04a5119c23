"""The Kafka side of :mod:`kafkatxn.spark_eos`'s exactly-once writer: a task's output and its ledger
record in one transaction, and reading the ledger back with ``read_committed``.

The ledger is a compacted topic. Its key names one writing task, ``<application>/<query>/<partition>``;
its value says which batch that task last committed (JSON). The writer's task, as its transactional
id, calls InitProducerId first: that fences every earlier attempt of the same task and lets the
coordinator finish whatever transaction that attempt left (committed if it reached PrepareCommit,
aborted otherwise). Only then does it read its ledger entry: what it reads is final, so a batch the
entry already covers is skipped, and any other is written with the entry in the same transaction.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from kafkatxn.kafka.errors import clean, kafka_error_code
from kafkatxn.kafka.log_reader import _CONSUMER_FIXED
from kafkatxn.kafka.transactional_writer import abort_quietly, produce_all, transactional_producer

# The ledger reader: assign-only (no group joined, nothing committed), committed records only, and an
# end-of-partition event at the last stable offset.
_READER_FIXED = {**_CONSUMER_FIXED, "group.id": "kafkatxn-ledger-reader", "isolation.level": "read_committed"}
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


def consumer_settings(producer_config: Mapping[str, Any]) -> dict[str, Any]:
    """The connection settings of ``producer_config`` for the ledger reader."""
    conf = {k: v for k, v in producer_config.items() if k not in _NOT_FOR_CONSUMERS}
    return {**conf, **_READER_FIXED}


def ledger_partition_count(config: Mapping[str, Any], topic: str, timeout_s: float = 30.0) -> int:
    """The ledger topic's partition count; 0 when it does not exist."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    try:
        found = AdminClient(_admin_settings(config)).list_topics(topic, timeout=timeout_s).topics.get(topic)
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
    admin = AdminClient(_admin_settings(config))
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
    own last entry, not the ledger's length."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    deadline = time.monotonic() + timeout_s
    key = slot.key.encode()
    consumer = Consumer(dict(consumer_config))
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
                return None if found is None else int(json.loads(found)["batch"])
            end, window = start, window * 4
        return None
    finally:
        consumer.close()


class _Background:
    """One call in a thread of its own; ``result`` returns its value or raises its error."""

    def __init__(self, fn: Any, *args: Any):
        self._fn, self._args, self._out = fn, args, {}
        self._thread = threading.Thread(target=self._run, daemon=True, name="kafkatxn-ledger-read")

    def _run(self) -> None:
        try:
            self._out["value"] = self._fn(*self._args)
        except BaseException as e:  # noqa: BLE001 - handed to the caller by result()
            self._out["error"] = e

    def start(self) -> None:
        self._thread.start()

    def result(self, timeout_s: float) -> Any:
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise TimeoutError(f"reading the ledger did not finish within {timeout_s:g}s")
        if "error" in self._out:
            raise self._out["error"]
        return self._out["value"]


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

    InitProducerId first (fencing and completing any earlier attempt of this task); then the ledger
    is read while the records are produced (its round trips off the critical path): if it already
    covers ``batch_id`` the transaction is aborted (``read_committed`` consumers never see it) and the
    task skipped. On any failure the transaction is aborted and the error raised."""
    producer = transactional_producer(producer_config, transactional_id)
    ledger = _Background(last_committed_batch, consumer_settings(producer_config), slot, timeout_s)
    try:
        producer.init_transactions(timeout_s)
        ledger.start()  # only now: what it reads is final for every earlier attempt
        producer.begin_transaction()
        count = produce_all(producer, topic, records)
        committed = ledger.result(timeout_s)
        if committed is not None and committed >= batch_id:
            producer.abort_transaction(timeout_s)
            return TaskOutcome(transactional_id, batch_id, 0, True, committed)
        value = json.dumps({**(entry or {}), "batch": batch_id, "records": count, "transactional_id": transactional_id,
                            "committed_at_ms": int(time.time() * 1000)}).encode()
        producer.produce(slot.topic, key=slot.key.encode(), value=value, partition=slot.partition)
        producer.commit_transaction(timeout_s)
    except Exception:
        abort_quietly(producer, timeout_s)
        raise
    finally:
        producer.flush(0)
    return TaskOutcome(transactional_id, batch_id, count, False, batch_id)
