"""Consumer groups on a real broker, made with librdkafka's consumer (not kafkatxn): read as a
read_committed application does and commit, or commit an offset outright. Commits retry while a new
broker's group coordinator is still loading."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition as CTP

from kafkatxn.model import TopicPartition

RETRIABLE_COMMIT_ERRORS = (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE)


def consume(bootstrap: str, topic: str, group: str, commit_each_message: bool, start: int = 0) -> list[int]:
    """A read_committed consumer of partition 0 reads from ``start`` to the end and commits: the
    position (what ``commit()`` stores), or, like per-record acknowledging applications, each
    message's offset + 1.

    It starts at an explicit offset: on a new broker, fetching the committed offset can fail with
    NOT_COORDINATOR while the offsets topic loads, and librdkafka does not retry that for assign().
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    offsets: list[int] = []
    errors: list[KafkaError] = []
    try:
        consumer.assign([CTP(topic, 0, start)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(1)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    break
                if msg.error().fatal():
                    raise AssertionError(msg.error())
                errors.append(msg.error())  # e.g. NOT_COORDINATOR while a new broker loads its offsets topic
                continue
            offsets.append(msg.offset())
            if commit_each_message:
                commit(lambda: consumer.commit(message=msg, asynchronous=False))
        else:
            raise AssertionError(f"no end of partition within 30 s; read {offsets}; errors {errors}")
        if not commit_each_message:
            commit(lambda: consumer.commit(asynchronous=False))
        return offsets
    finally:
        consumer.close()


def commit(do_commit) -> None:
    """Commit, retrying while a new broker's group coordinator is still loading."""
    for attempt in range(50):
        try:
            do_commit()
            return
        except KafkaException as exc:
            if not exc.args[0].retriable() and exc.args[0].code() not in RETRIABLE_COMMIT_ERRORS or attempt == 49:
                raise
            time.sleep(0.2)


def commit_offset(bootstrap: str, group: str, tp: TopicPartition, offset: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        commit(lambda: consumer.commit(offsets=[CTP(tp.topic, tp.partition, offset)], asynchronous=False))
    finally:
        consumer.close()
