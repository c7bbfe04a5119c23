"""Writing records in one Kafka transaction, for :mod:`kafkatxn.spark`'s writer on executors."""

from __future__ import annotations

from typing import Any, Iterable, Mapping


def write_in_one_transaction(
    producer_config: Mapping[str, Any],
    transactional_id: str,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes | None]],
    timeout_s: float,
) -> int:
    """Produce ``records`` (key, value) to ``topic`` in one transaction as ``transactional_id``;
    returns the count. InitProducerId first: it fences a zombie of the same id (an earlier attempt
    or run) and aborts whatever that one left open. On any failure the transaction is aborted."""
    producer = transactional_producer(producer_config, transactional_id)
    try:
        producer.init_transactions(timeout_s)
        producer.begin_transaction()
        count = produce_all(producer, topic, records)
        producer.commit_transaction(timeout_s)
    except Exception:
        abort_quietly(producer, timeout_s)
        raise
    finally:
        producer.flush(0)
    return count


def transactional_producer(producer_config: Mapping[str, Any], transactional_id: str) -> Any:
    """A librdkafka producer of ``producer_config`` as ``transactional_id`` (not yet initialised)."""
    from confluent_kafka import Producer

    from kafkatxn.kafka.client_logs import routed

    return Producer(routed({**producer_config, "transactional.id": transactional_id}))


def produce_all(producer: Any, topic: str, records: Iterable[tuple[bytes | None, bytes | None]]) -> int:
    """Hand every (key, value) to ``producer`` for ``topic``, waiting for room when its queue is full."""
    count = 0
    for key, value in records:
        while True:
            try:
                producer.produce(topic, key=key, value=value)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.05)
        count += 1
        if count % 10_000 == 0:
            producer.poll(0)
    return count


def abort_quietly(producer: Any, timeout_s: float) -> None:
    """Abort the open transaction, if the producer still can (a fenced or fatal one cannot: then the
    coordinator aborts it when the next attempt fences it, or at its timeout)."""
    try:
        producer.abort_transaction(timeout_s)
    except Exception:  # noqa: BLE001 - the caller's original error is the one that matters
        pass
