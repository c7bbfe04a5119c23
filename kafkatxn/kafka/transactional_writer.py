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
    from confluent_kafka import Producer

    conf = dict(producer_config)
    conf["transactional.id"] = transactional_id
    producer = Producer(conf)
    count = 0
    try:
        producer.init_transactions(timeout_s)
        producer.begin_transaction()
        for key, value in records:
            producer.produce(topic, key=key, value=value)
            count += 1
            if count % 10_000 == 0:
                producer.poll(0)
        producer.commit_transaction(timeout_s)
    except Exception:
        try:
            producer.abort_transaction(timeout_s)
        except Exception:  # noqa: BLE001 - a fenced or fatal producer cannot abort; the original error matters
            pass
        raise
    finally:
        producer.flush(0)
    return count
