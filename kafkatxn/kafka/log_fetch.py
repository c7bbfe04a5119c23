"""Reading ``__transaction_state`` over the wire's Fetch (a :class:`FetchedLog`: the facade's, or an
executor's own), page after page under a deadline of its own, each record through the one decoder
(:func:`decoded` over :func:`kafkatxn.kafka.txnlog.decode`). Below the facade: it imports neither the
facade nor a client, so the facade's log API (:mod:`kafkatxn.kafka.transaction_log`) and the
executors' reader (:mod:`kafkatxn.kafka.log_reader`) both build on it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable, Collection, Iterable, Iterator, Mapping, Protocol

from kafkatxn.kafka.protocol import UnreadableRecords
from kafkatxn.kafka.txnlog import TOPIC, decode
from kafkatxn.txnlog_records import DecodeCounts, TxnLogEntry

if TYPE_CHECKING:
    from kafkatxn.kafka.protocol import FetchedPartition

EARLIEST = -2  # librdkafka's OFFSET_BEGINNING (ListOffsets' timestamp for the log start)
LATEST = -1  # ListOffsets' timestamp for the high watermark
DEFAULT_TIMEOUT_MS = 60_000
DEFAULT_BATCH = 10_000


class LogReadError(RuntimeError):
    """Reading the log failed; ``code`` is Kafka's error name when the broker or librdkafka gave one
    (``TOPIC_AUTHORIZATION_FAILED``), so a caller can tell a missing ACL without reading the message."""

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message)
        self.code = code


def key_filter(transactional_ids: Collection[str] | None) -> frozenset[bytes] | None:
    """The record keys (key version 0) of ``transactional_ids``: a read given them skips every other
    id's record before decoding it. Keys of another version are always decoded (and counted)."""
    if transactional_ids is None:
        return None
    return frozenset(b"\x00\x00" + len(t.encode()).to_bytes(2, "big") + t.encode() for t in transactional_ids)


def decoded(
    rows: Iterable[tuple[bytes | None, bytes | None, int, int]], p: int, keys: frozenset[bytes] | None, counts: DecodeCounts | None
) -> list[TxnLogEntry]:
    """``(key, value, offset, timestamp)`` records of log partition ``p`` decoded by the one decoder
    (:func:`kafkatxn.kafka.txnlog.decode`), whichever client read them; with ``keys``, other ids'
    records skipped undecoded."""
    out = []
    for key, value, offset, timestamp in rows:
        if keys is not None and key is not None and key[:2] == b"\x00\x00" and key not in keys:
            continue
        out.append(TxnLogEntry(decode(key, value, p, offset, counts), timestamp))
    return out


class ReadDeadline:
    """A read's own deadline: what is left of it, or TimeoutError naming what did not finish."""

    def __init__(self, topic: str, timeout_ms: int):
        self.topic = topic
        self.timeout_ms = timeout_ms
        self.at = time.monotonic() + timeout_ms / 1000

    def left(self, doing: str) -> float:
        """Seconds left, or TimeoutError naming what did not finish."""
        left = self.at - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"{doing} did not finish within {self.timeout_ms / 1000:g}s")
        return left


class FetchedLog(Protocol):
    """Where :func:`read_transaction_log` and :func:`follow_fetched` over Fetch get a log's records: the facade's Fetch
    (leaders, deadline, retries; :mod:`kafkatxn.kafka.transaction_log`), or an executor's own wire.
    Both raise :class:`LogReadError` for what cannot be read, except OFFSET_OUT_OF_RANGE, which is
    the answer's ``error``."""

    def fetch(self, positions: Mapping[int, int], max_wait_ms: int = 0) -> dict[int, FetchedPartition]: ...

    def offset_at(self, partition: int, timestamp_ms: int) -> int: ...


def _read_fetched(
    source: FetchedLog, topic: str, p: int, start_offsets: Mapping[int, int] | None, start_time_ms: int | None,
    end: int | None, deadline: ReadDeadline, batch_size: int, keys: frozenset[bytes] | None, counts: DecodeCounts | None,
    next_offsets: dict[int, int] | None,
) -> Iterator[list[TxnLogEntry]]:
    """One partition over Fetch: from its start (its log start, ``start_offsets[p]`` or the first offset
    at or after ``start_time_ms``: ListOffsets by time) up to ``end`` or the high watermark of its first
    answer, page after page (each a Fetch of at most the source's bytes)."""
    if start_time_ms is not None:
        pos = source.offset_at(p, start_time_ms)
        if pos < 0:  # no record that recent: nothing to read, and the end is where a follow goes on
            pos = end if end is not None else source.offset_at(p, LATEST)
    else:
        pos = (start_offsets or {}).get(p, EARLIEST)
    pos = max(pos, 0)
    reset = False
    while end is None or pos < end:
        deadline.left(f"reading {topic}-{p}" + (f" up to offset {end}" if end is not None else ""))
        part = source.fetch({p: pos})[p]
        if part.error == "OFFSET_OUT_OF_RANGE" and not reset:  # below the log start (or past the end)
            reset = True
            first = source.offset_at(p, EARLIEST)
            if pos < first:
                pos = first
                continue
            end = pos if end is None else end
            break
        if part.error is not None:
            raise LogReadError(f"reading {topic}-{p} failed: {part.error}", part.error)
        end = part.high_watermark if end is None else end
        try:
            rows = [(r.key, r.value, r.offset, r.timestamp) for b in part.batches if not b.is_control
                    for r in b.records if pos <= r.offset < end]
        except UnreadableRecords as exc:
            raise LogReadError(f"reading {topic}-{p} failed: {exc}", str(exc)) from None
        after = max([pos, *(b.last_offset + 1 for b in part.batches)])
        for i in range(0, len(rows), batch_size):
            yield decoded(rows[i : i + batch_size], p, keys, counts)
        if after == pos:  # nothing past pos below the end any more (the log was truncated)
            break
        pos = after
    if next_offsets is not None:
        next_offsets[p] = max(end if end is not None else pos, pos)


def _follow_fetched(
    source: FetchedLog, start_offsets: Mapping[int, int], topic: str, keys: frozenset[bytes] | None,
    counts: DecodeCounts | None, poll_s: float, stop: Callable[[], bool] | None,
) -> Iterator[list[TxnLogEntry]]:
    """Every partition in one Fetch per leader a poll, the broker holding each for up to ``poll_s``
    until a record comes."""
    positions = dict(start_offsets)
    while stop is None or not stop():
        chunk: list[TxnLogEntry] = []
        for p, part in sorted(source.fetch(positions, max_wait_ms=int(poll_s * 1000)).items()):
            if part.error is not None:
                raise LogReadError(f"following {topic}-{p} failed: {part.error}", part.error)
            try:
                fetched = [(r.key, r.value, r.offset, r.timestamp) for b in part.batches if not b.is_control
                           for r in b.records if r.offset >= positions[p]]
            except UnreadableRecords as exc:
                raise LogReadError(f"following {topic}-{p} failed: {exc}", str(exc)) from None
            chunk.extend(decoded(fetched, p, keys, counts))
            positions[p] = max([positions[p], *(b.last_offset + 1 for b in part.batches)])
        yield chunk


def read_fetched(
    source: FetchedLog,
    partitions: Iterable[int],
    *,
    start_offsets: Mapping[int, int] | None = None,
    start_time_ms: int | None = None,
    end_offsets: Mapping[int, int] | None = None,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    deadline: ReadDeadline | None = None,
    batch_size: int = DEFAULT_BATCH,
    topic: str = TOPIC,
    counts: DecodeCounts | None = None,
    transactional_ids: Collection[str] | None = None,
    next_offsets: dict[int, int] | None = None,
) -> Iterator[list[TxnLogEntry]]:
    """Decoded records of ``partitions`` over ``source``'s Fetch, in chunks of up to ``batch_size``,
    partition after partition: what :func:`kafkatxn.kafka.log_reader.read_transaction_log` reads given
    a :class:`FetchedLog` (the same options; ``deadline`` when the caller's clock already runs)."""
    if start_offsets is not None and start_time_ms is not None:
        raise ValueError("give start offsets or a start time, not both")
    deadline = deadline or ReadDeadline(topic, timeout_ms)
    for p in sorted(partitions):
        yield from _read_fetched(source, topic, p, start_offsets, start_time_ms, (end_offsets or {}).get(p), deadline,
                                 batch_size, key_filter(transactional_ids), counts, next_offsets)


def follow_fetched(
    source: FetchedLog,
    start_offsets: Mapping[int, int],
    *,
    topic: str = TOPIC,
    counts: DecodeCounts | None = None,
    transactional_ids: Collection[str] | None = None,
    poll_s: float = 0.2,
    stop: Callable[[], bool] | None = None,
) -> Iterator[list[TxnLogEntry]]:
    """New records of the partitions in ``start_offsets`` over ``source``'s Fetch, one chunk per poll:
    what ``transactions history --follow`` reads through the facade."""
    yield from _follow_fetched(source, start_offsets, topic, key_filter(transactional_ids), counts, poll_s, stop)
