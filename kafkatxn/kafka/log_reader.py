"""Reading a range of one partition as raw records, for the Spark auditor's executors.

A plain assign-only consumer (no group is joined, nothing is committed), read_uncommitted, with a
deadline of its own: executors have no facade, only the connection settings they were handed.
"""

from __future__ import annotations

import time
from typing import Any, Iterator, NamedTuple

from kafkatxn.kafka.errors import clean

# Settings that must hold whatever the user's properties say: no group, no commits.
_CONSUMER_FIXED = {
    "group.id": "kafkatxn-audit-reader",  # librdkafka requires one; assign() never joins it
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": True,
    "isolation.level": "read_uncommitted",
    "auto.offset.reset": "earliest",
}


class RawRecord(NamedTuple):
    key: bytes | None
    value: bytes | None
    offset: int
    timestamp_ms: int


def read_range(
    conf: dict[str, Any], topic: str, partition: int, start: int, end: int, timeout_ms: int, batch_size: int
) -> Iterator[list[RawRecord]]:
    """Records of ``topic``-``partition`` from ``start`` up to ``end`` (exclusive), in chunks of up to
    ``batch_size``. Raises TimeoutError past ``timeout_ms`` and RuntimeError (one redacted line) on a
    client error."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    if end <= 0 or (start >= 0 and start >= end):
        return
    consumer = Consumer({**conf, **_CONSUMER_FIXED})
    deadline = time.monotonic() + timeout_ms / 1000
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        done = False
        while not done:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(
                    f"reading {topic}-{partition} up to offset {end} did not finish within {timeout_ms / 1000:g}s"
                )
            # consume() waits for the whole batch or the timeout: a short timeout keeps the tail quick.
            messages = consumer.consume(num_messages=batch_size, timeout=min(left, 0.1))
            chunk: list[RawRecord] = []
            for m in messages:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if m.offset() >= end:  # the log's end passed the planned end: all read
                            done = True
                        continue
                    raise KafkaException(err)
                offset = m.offset()
                if offset >= end:
                    done = True
                    break
                chunk.append(RawRecord(m.key(), m.value(), offset, m.timestamp()[1]))
                if offset >= end - 1:
                    done = True
                    break
            if chunk:
                yield chunk
    except KafkaException as exc:
        raise RuntimeError(f"reading {topic}-{partition} failed: {clean(exc.args[0].str() if exc.args else exc)}") from None
    finally:
        consumer.close()
