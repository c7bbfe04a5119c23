"""The one reader of ``__transaction_state``: given partitions, from given offsets or a start time, up
to their end, under one deadline, yielding decoded records (:mod:`kafkatxn.kafka.txnlog`).

The Spark auditor's executors call it for one log partition each (``kafkatxn/audit/source.py``); a
one-process command calls it for the partition that holds one id
(:func:`kafkatxn.verdicts.coordinator_partition`) and needs no Spark. Given connection settings
(an executor has no facade) it reads with a plain assign-only librdkafka consumer (no group is joined,
nothing is committed), read_uncommitted; given a :class:`FetchedLog` (the facade's, one Fetch per
page) it reads over the wire. Either way with a deadline of its own, and every record goes through
the one decoder (:func:`decoded`). Records it cannot decode come through as
:class:`~kafkatxn.txnlog_records.UndecodedRecord`, counted, never raised.
"""

from __future__ import annotations

from typing import Any, Collection, Iterable, Iterator, Mapping

from kafkatxn.kafka.client_errors import clean
from kafkatxn.kafka.log_fetch import (
    DEFAULT_BATCH, DEFAULT_TIMEOUT_MS, EARLIEST, FetchedLog, LogReadError, ReadDeadline, decoded, key_filter, read_fetched,
)
from kafkatxn.kafka.txnlog import TOPIC
from kafkatxn.txnlog_records import DecodeCounts, TxnLogEntry


def _failed(what: str, exc: Any) -> LogReadError:
    err = exc.args[0] if exc.args else None
    code = err.name() if hasattr(err, "name") else None
    return LogReadError(f"{what} failed: {clean(err.str() if hasattr(err, 'str') else exc)}", code)


def _decoded(messages: list[Any], p: int, keys: frozenset[bytes] | None, counts: DecodeCounts | None) -> list[TxnLogEntry]:
    return decoded(((m.key(), m.value(), m.offset(), m.timestamp()[1]) for m in messages), p, keys, counts)


def _consumer(conf: Mapping[str, Any]) -> Any:
    from confluent_kafka import Consumer

    from kafkatxn.kafka.client_logs import ASSIGN_ONLY_CONSUMER, routed

    return Consumer(routed({**conf, **ASSIGN_ONLY_CONSUMER}))


def read_transaction_log(
    conf: Mapping[str, Any] | FetchedLog,
    partitions: Iterable[int] | None = None,
    *,
    start_offsets: Mapping[int, int] | None = None,
    start_time_ms: int | None = None,
    end_offsets: Mapping[int, int] | None = None,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    batch_size: int = DEFAULT_BATCH,
    topic: str = TOPIC,
    counts: DecodeCounts | None = None,
    transactional_ids: Collection[str] | None = None,
    next_offsets: dict[int, int] | None = None,
) -> Iterator[list[TxnLogEntry]]:
    """Decoded records of ``partitions`` (all of the topic's when None), in chunks of up to ``batch_size``,
    partition after partition, each in log order.

    A partition is read from ``start_offsets[p]`` (default: its beginning) or from the first record at
    or after ``start_time_ms``, up to ``end_offsets[p]`` (exclusive; default: its end when the read
    starts). ``counts`` counts decoded, unknown-version and corrupt records. Raises TimeoutError once
    ``timeout_ms`` has passed since the call, and RuntimeError (one redacted line) on a client error.

    ``conf`` is librdkafka's settings (a consumer reads: the Spark executors'), or a :class:`FetchedLog`
    (the facade's Fetch: the one-process commands'); either way each record goes through :func:`decoded`.
    """
    if start_offsets is not None and start_time_ms is not None:
        raise ValueError("give start offsets or a start time, not both")
    deadline = ReadDeadline(topic, timeout_ms)
    if isinstance(conf, Mapping) and needs_wire(conf):  # librdkafka cannot log in: an own facade, over Fetch
        yield from _read_over_own_wire(conf, partitions, topic, timeout_ms, start_offsets=start_offsets, start_time_ms=start_time_ms,
                                       end_offsets=end_offsets, batch_size=batch_size, counts=counts,
                                       transactional_ids=transactional_ids, next_offsets=next_offsets)
        return
    if not isinstance(conf, Mapping):  # the wire's Fetch
        if partitions is None:
            raise ValueError("a read over Fetch names its partitions")
        yield from read_fetched(conf, partitions, start_offsets=start_offsets, start_time_ms=start_time_ms, end_offsets=end_offsets,
                                deadline=deadline, batch_size=batch_size, topic=topic, counts=counts,
                                transactional_ids=transactional_ids, next_offsets=next_offsets)
        return
    from confluent_kafka import KafkaException

    consumer = _consumer(conf)
    what = f"reading {topic}"
    try:
        parts = sorted(partitions) if partitions is not None else _partitions(consumer, topic, deadline)
        ends = dict(end_offsets) if end_offsets is not None else _ends(consumer, topic, parts, deadline)
        if start_time_ms is not None:
            starts = _starts_at(consumer, topic, parts, start_time_ms, ends, deadline)
        else:
            starts = {p: (start_offsets or {}).get(p, EARLIEST) for p in parts}
        keys = key_filter(transactional_ids)
        for p in parts:
            what = f"reading {topic}-{p}"
            for chunk in _read(consumer, topic, p, starts[p], ends.get(p, 0), deadline, batch_size):
                yield _decoded(chunk, p, keys, counts)
            if next_offsets is not None:
                next_offsets[p] = max(ends.get(p, 0), starts[p])
    except KafkaException as exc:
        raise _failed(what, exc) from None
    finally:
        consumer.close()


def _partitions(consumer: Any, topic: str, deadline: ReadDeadline) -> list[int]:
    from confluent_kafka import KafkaException

    metadata = consumer.list_topics(topic, timeout=deadline.left(f"reading the partitions of {topic}"))
    found = metadata.topics.get(topic)
    if found is None:
        raise RuntimeError(f"topic {topic} does not exist")
    if found.error is not None:
        raise KafkaException(found.error)
    return sorted(found.partitions)


def _ends(consumer: Any, topic: str, parts: list[int], deadline: ReadDeadline) -> dict[int, int]:
    """Each partition's end (high watermark) now."""
    from confluent_kafka import TopicPartition

    ends = {}
    for p in parts:
        left = deadline.left(f"reading the end offset of {topic}-{p}")
        ends[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=left, cached=False)[1]
    return ends


def _starts_at(
    consumer: Any, topic: str, parts: list[int], time_ms: int, ends: Mapping[int, int], deadline: ReadDeadline
) -> dict[int, int]:
    """Each partition's first offset at or after ``time_ms``; its end when no record is that recent."""
    from confluent_kafka import KafkaException, TopicPartition

    if not parts:
        return {}
    asked = [TopicPartition(topic, p, time_ms) for p in parts]
    found = consumer.offsets_for_times(asked, timeout=deadline.left(f"finding offsets of {topic} by time"))
    starts = {}
    for tp in found:
        if tp.error is not None:
            raise KafkaException(tp.error)
        starts[tp.partition] = tp.offset if tp.offset >= 0 else ends.get(tp.partition, 0)
    return starts


def _read(
    consumer: Any, topic: str, partition: int, start: int, end: int, deadline: ReadDeadline, batch_size: int
) -> Iterator[list[Any]]:
    """The messages of ``topic``-``partition`` from ``start`` up to ``end`` (exclusive), in chunks."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    if end <= 0 or (start >= 0 and start >= end):
        return
    consumer.assign([TopicPartition(topic, partition, start)])
    done = False
    while not done:
        left = deadline.left(f"reading {topic}-{partition} up to offset {end}")
        # consume() waits for the whole batch or the timeout: a short timeout keeps the tail quick.
        messages = consumer.consume(num_messages=batch_size, timeout=min(left, 0.1))
        chunk = []
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
            chunk.append(m)
            if offset >= end - 1:
                done = True
                break
        if chunk:
            yield chunk


def needs_wire(conf: Mapping[str, Any]) -> bool:
    """Settings librdkafka cannot log in with (confluent-kafka's wheels have no GSSAPI): read over Fetch."""
    mechanism = conf.get("sasl.mechanisms", conf.get("sasl.mechanism", ""))
    return str(mechanism).upper() == "GSSAPI"


def _read_over_own_wire(
    conf: Mapping[str, Any], partitions: Iterable[int] | None, topic: str, timeout_ms: int, **options: Any
) -> Iterator[list[TxnLogEntry]]:
    """An executor's read where librdkafka cannot log in: a facade of its own, built from the connection
    settings it was handed (as the driver's planning builds one), read over its Fetch."""
    from kafkatxn.config import ConnectionConfig
    from kafkatxn.errors import KafkatxnError
    from kafkatxn.kafka.facade import Cluster
    from kafkatxn.kafka.transaction_log import FacadeLog

    settings = {k: str(v) for k, v in conf.items() if k not in ("bootstrap.servers", "client.id", "logger", "error_cb")}
    try:
        with Cluster(ConnectionConfig(str(conf["bootstrap.servers"]), settings, max(timeout_ms, 1))) as cluster:
            parts = sorted(partitions) if partitions is not None else sorted(
                p.partition for p in cluster.metadata().partitions if p.topic == topic)
            yield from read_transaction_log(FacadeLog(cluster, topic), parts, topic=topic, timeout_ms=timeout_ms, **options)
    except KafkatxnError as exc:  # connecting or logging in: one redacted line, as the consumer's failures are
        raise LogReadError(f"reading {topic} failed: {clean(exc)}") from None
