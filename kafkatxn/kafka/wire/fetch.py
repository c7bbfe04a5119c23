"""Fetch, one request per leader for many partitions, each from its offset; the record batches
decoded by kafka-python's record reader (``kafka.record``) into :mod:`kafkatxn.kafka.protocol`'s types.

Sent at v4 (isolation levels, aborted transactions, the last stable offset) to v12: v13 names topics
by id, which the metadata here does not keep. No fetch session (session id 0, epoch -1: a full fetch
each time), no replica id: a plain consumer's fetch, which needs READ on the topic.
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka.wire.fetch_records import plain_records
from kafkatxn.kafka.wire.names import error_name
from kafkatxn.kafka.wire.offsets_codec import _decode_list_offsets  # the same answer as ListOffsets'
from kafkatxn.model import TopicPartition

MIN_VERSION = 4  # isolation_level, last_stable_offset and aborted_transactions came with v4
MAX_VERSION = 12  # v13 identifies topics by id
CONTROL_TYPES = {0: "ABORT", 1: "COMMIT"}


def _fetch(_wire: Any, request: p.Fetch) -> Any:
    from kafka.protocol.consumer.fetch import FetchRequest

    topic_cls = FetchRequest.FetchTopic
    partition_cls = topic_cls.FetchPartition
    by_topic: dict[str, list[p.FetchOffset]] = {}
    for part in request.partitions:
        by_topic.setdefault(part.tp.topic, []).append(part)
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=request.max_wait_ms,
        min_bytes=1,
        max_bytes=request.max_bytes,
        isolation_level=1 if request.read_committed else 0,
        session_id=0,
        session_epoch=-1,
        topics=[
            topic_cls(topic=t, partitions=[
                partition_cls(partition=f.tp.partition, current_leader_epoch=-1, fetch_offset=f.offset, last_fetched_epoch=-1,
                              log_start_offset=-1, partition_max_bytes=f.max_bytes or request.partition_max_bytes)
                for f in parts
            ])
            for t, parts in by_topic.items()
        ],
        forgotten_topics_data=[],
        rack_id="",
        min_version=MIN_VERSION,
        max_version=MAX_VERSION,
    )


class BatchRecords(Sequence[p.FetchedRecord]):
    """An uncompressed batch's records, decoded when first read. The read_committed probe reads none
    of a batch whose offsets have no gaps (:attr:`~kafkatxn.kafka.protocol.FetchedBatch.gapless`):
    at 5,000 groups an exporter scrape probes 7,500 partitions, and decoding their records up front
    took a tenth of it. A batch that cannot be read raises :class:`~kafkatxn.kafka.protocol.UnreadableRecords`."""

    __slots__ = ("_batch", "_rows")

    def __init__(self, batch: Any):
        # kafka-python's DefaultRecordBatch (which holds a copy of its bytes), or the batch's bytes
        # (:mod:`.fetch_answers`), made into one when first read
        self._batch = batch
        self._rows: tuple[p.FetchedRecord, ...] | None = None

    def _decoded(self) -> tuple[p.FetchedRecord, ...]:
        if self._rows is None:
            try:
                batch = self._batch
                rows = plain_records(batch) if isinstance(batch, bytes) else None  # the wire's reader (.fetch_records)
                if rows is None and isinstance(batch, bytes):  # one it does not read: kafka-python's, and its error
                    from kafka.record import MemoryRecords

                    batch = MemoryRecords(batch).next_batch()
                self._rows = rows if rows is not None else _rows(batch)
            except Exception as exc:  # noqa: BLE001 - what kafka-python's reader raises on a corrupt batch
                raise p.UnreadableRecords(f"CORRUPT_MESSAGE ({type(exc).__name__}: {exc})") from None
            self._batch = None
        return self._rows

    def __getitem__(self, index: Any) -> Any:
        return self._decoded()[index]

    def __len__(self) -> int:
        return len(self._decoded())

    def __iter__(self) -> Iterator[p.FetchedRecord]:
        return iter(self._decoded())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and self._decoded() == tuple(other)

    def __hash__(self) -> int:
        return hash(self._decoded())

    def __repr__(self) -> str:
        if self._rows is not None:
            return repr(self._rows)
        return "<records not read yet>" if isinstance(self._batch, bytes) else f"<{self._batch.records_count} records, not read yet>"


def _rows(batch: Any) -> tuple[p.FetchedRecord, ...]:
    return tuple(p.FetchedRecord(r.offset, r.timestamp, r.key, r.value) for r in batch)


def batches(records: Any) -> tuple[p.FetchedBatch, ...]:
    """The record batches of a partition's ``records`` bytes, a compressed one uncompressed and a
    control batch's marker read at once, the records of the others when first read (:class:`BatchRecords`);
    a batch the response cut short at its end is left out, as consumers do."""
    from kafka.record import MemoryRecords

    if not records:
        return ()
    out = []
    reader = MemoryRecords(bytes(records) if not isinstance(records, (bytes, bytearray)) else records)
    batch = reader.next_batch()
    while batch is not None:
        one = typed_batch(batch)
        if one is not None:
            out.append(one)
        batch = reader.next_batch()
    return tuple(out)


def control_type(rows: Sequence[p.FetchedRecord]) -> str:
    """A control batch's marker, from its first record's key (version, type: 0 ABORT, 1 COMMIT)."""
    kind = rows[0].key if rows else None
    code = int.from_bytes(kind[2:4], "big", signed=True) if kind is not None and len(kind) >= 4 else -1
    return CONTROL_TYPES.get(code, f"TYPE_{code}")


def typed_batch(batch: Any) -> p.FetchedBatch | None:
    """One of kafka-python's record batches as a :class:`~kafkatxn.kafka.protocol.FetchedBatch` (None:
    an old-format batch without records)."""
    if batch.magic >= 2:
        control = None
        if batch.is_control_batch:
            rows: Sequence[p.FetchedRecord] = _rows(batch)
            control = control_type(rows)
        elif batch.compression_type != batch.CODEC_NONE:
            rows = _rows(batch)  # decompressed here: a codec that fails is this partition's answer
        else:
            rows = BatchRecords(batch)
        return p.FetchedBatch(batch.base_offset, batch.last_offset, batch.producer_id, batch.producer_epoch,
                              bool(batch.is_transactional), control, rows, batch.records_count)
    rows = _rows(batch)  # message formats 0 and 1: no producer, no transactions
    return p.FetchedBatch(rows[0].offset, rows[-1].offset, -1, -1, False, None, rows) if rows else None


def _decode_fetch(_request: p.Fetch, resp: Any) -> p.FetchResponse:
    out = []
    for topic in resp.responses:
        for part in topic.partitions:
            tp = TopicPartition(topic.topic, part.partition_index)
            aborted = tuple(p.AbortedTransaction(a.producer_id, a.first_offset) for a in part.aborted_transactions or ())
            error = error_name(part.error_code)
            try:
                found = batches(part.records) if error is None else ()
            except Exception as exc:  # noqa: BLE001 - a batch this client cannot read is this partition's answer
                error, found = f"CORRUPT_MESSAGE ({type(exc).__name__}: {exc})", ()
            out.append(p.FetchedPartition(tp, error, part.high_watermark, part.last_stable_offset, part.log_start_offset,
                                          aborted, found))
    return p.FetchResponse(error_name(getattr(resp, "error_code", 0) or 0), tuple(out))


def _list_offsets_at(_wire: Any, request: p.ListOffsetsAt) -> Any:
    from kafka.protocol.consumer.offsets import ListOffsetsRequest

    topic_cls = ListOffsetsRequest.ListOffsetsTopic
    partition_cls = topic_cls.ListOffsetsPartition
    return ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=[
            topic_cls(name=t, partitions=[partition_cls(partition_index=i, timestamp=request.timestamp_ms) for i in ps])
            for t, ps in p.by_topic(request.partitions).items()
        ],
        min_version=1,  # one offset per partition (v0 answers a list)
    )


CODECS = {p.Fetch: (_fetch, _decode_fetch), p.ListOffsetsAt: (_list_offsets_at, _decode_list_offsets)}
