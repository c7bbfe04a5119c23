"""``/metrics`` bodies shared by the scrapes of one snapshot, so that concurrent scrapes of a cached
snapshot render it once (and collect garbage once), not once each.

A snapshot is rendered once per format by :mod:`kafkatxn.exposition`'s encoder; the one family
that changes between its scrapes (the snapshot's age) is written per scrape. In gzip the body is
one stream of independently compressed deflate pieces (each before the last ends on a full flush)
whose trailer's CRC-32 is combined from the pieces', so the shared pieces are compressed once too.
"""

from __future__ import annotations

import copy
import logging
import struct
import threading
import zlib
from itertools import chain
from typing import Callable, Iterable, Iterator

from kafkatxn.exposition import GZIP_LEVEL, _Body, _family_texts, _joined, _pause_collection, _resume_collection, sized_parts
from kafkatxn.exposition_tables import TableGauge

log = logging.getLogger("kafkatxn.exporter")

_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00" + bytes([4 if GZIP_LEVEL == 1 else 2 if GZIP_LEVEL == 9 else 0]) + b"\x03"


def _deflated(parts: Iterable[bytes], final: bool) -> tuple[list[bytes], int, int]:
    """Raw deflate of ``parts`` that needs nothing before it (a fresh compressor) and, unless
    ``final``, ends on a full flush: such pieces one after another are one deflate stream.
    With their CRC-32 and length, for gzip's trailer. Each part is let go once compressed: only
    the compressed pieces are held."""
    compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
    out: list[bytes] = []
    crc = size = 0
    for part in parts:
        crc = zlib.crc32(part, crc)
        size += len(part)
        chunk = compressor.compress(part)
        if chunk:
            out.append(chunk)
    out.append(compressor.flush(zlib.Z_FINISH if final else zlib.Z_FULL_FLUSH))
    return [chunk for chunk in out if chunk], crc, size


def _gf2_times(matrix: list[int], vector: int) -> int:
    total, i = 0, 0
    while vector:
        if vector & 1:
            total ^= matrix[i]
        vector >>= 1
        i += 1
    return total


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """The CRC-32 of A+B from A's, B's and B's length (zlib's crc32_combine, which Python does not offer)."""
    if len2 <= 0:
        return crc1
    odd = [0xEDB88320] + [1 << n for n in range(31)]  # one zero bit
    even = [_gf2_times(odd, row) for row in odd]  # two zero bits
    odd = [_gf2_times(even, row) for row in even]  # four
    while True:
        even = [_gf2_times(odd, row) for row in odd]
        if len2 & 1:
            crc1 = _gf2_times(even, crc1)
        len2 >>= 1
        if not len2:
            break
        odd = [_gf2_times(even, row) for row in even]
        if len2 & 1:
            crc1 = _gf2_times(odd, crc1)
        len2 >>= 1
        if not len2:
            break
    return crc1 ^ crc2


def _with_age(per_scrape, age: float):
    """The per-scrape family (one sample: the snapshot's age) at ``age``."""
    metric = copy.copy(per_scrape)
    metric.samples = [sample._replace(value=max(age, 0.0)) for sample in per_scrape.samples]
    return metric


class _Rendered:
    """One snapshot's body in one format: the families before the per-scrape one and after it."""

    def __init__(self, per_scrape, texts: Callable[[list], Iterable[str]], head: Iterable[bytes], tail: Iterable[bytes],
                 gzipped: bool):
        self._per_scrape, self._texts, self.gzipped = per_scrape, texts, gzipped
        if gzipped:
            self._head, self._head_crc, self._head_len = _deflated(head, final=False)
            self._tail, self._tail_crc, self._tail_len = _deflated(tail, final=True)
        else:
            self._head, self._tail = list(head), list(tail)

    def parts(self, age: float) -> list[bytes]:
        middle: list[bytes] = []
        if self._per_scrape is not None:
            middle = [b"".join(_joined(self._texts([_with_age(self._per_scrape, age)])))]
        if not self.gzipped:
            return [*self._head, *middle, *self._tail]
        deflated, crc, size = _deflated(middle, final=False)
        crc = crc32_combine(crc32_combine(self._head_crc, crc, size), self._tail_crc, self._tail_len)
        trailer = struct.pack("<II", crc, (self._head_len + size + self._tail_len) & 0xFFFFFFFF)
        return [_GZIP_HEADER, *self._head, *deflated, *self._tail, trailer]


# A body of more series than this is not held uncompressed: without gzip it is written as it is
# made, for each scrape (20,000 groups x 20 partitions: 2,000,000 series, 250 MB of text, which
# the exporter would otherwise hold beside the snapshot); with gzip only its compressed pieces are held.
STREAM_SERIES = 200_000


def series_count(families: Iterable) -> int:
    """The families' series (a table's rows with a value counted without making its samples)."""
    return sum(len(m.values) if type(m) is TableGauge and m._samples is None else len(m.samples) for m in families)


class Streamed:
    """A body written as it is made, its ``length`` known beforehand (:func:`kafkatxn.exposition.sized_parts`):
    cyclic GC, paused when its families were made, waits until it is closed."""

    def __init__(self, parts: Iterator[bytes], length: int):
        self._parts: Iterator[bytes] | None = parts
        self.length = length

    def __iter__(self) -> Iterator[bytes]:
        written = 0
        if self._parts is not None:
            for part in self._parts:
                written += len(part)
                yield part
        self.close()  # written to the end: the server closes it too
        if written != self.length:  # a client would wait for bytes that never come, or stop short
            log.error("a streamed /metrics body was %d bytes, not the %d sent as its length", written, self.length)

    def close(self) -> None:
        parts, self._parts = self._parts, None
        if parts is not None:
            parts.close()  # type: ignore[attr-defined]  # a generator: lets go of the families it holds
            _resume_collection()


class SnapshotBodies:
    """``/metrics`` bodies rendered once per snapshot and format and shared by every scrape served
    from that snapshot, gzip included: 200 scrapes of one cached snapshot cost one render.

    ``source.snapshot()`` gives the snapshot to serve and its age, ``source.families(snapshot, age)``
    its families (what ``source.collect()`` yields), and of those only the one named
    ``source.per_scrape_family`` (one sample: the snapshot's age) differs between scrapes of one
    snapshot: it is written for each scrape, in gzip as a piece of the stream of its own."""

    def __init__(self, source):
        self._source = source
        self._lock = threading.Lock()  # one render at a time; scrapes of the same snapshot wait for it
        self._snapshot: object = None
        self._bodies: dict[tuple, _Rendered] = {}
        self._in_flight = 0
        self._count_lock = threading.Lock()
        self.renders = 0

    def parts(self, openmetrics: bool, escaping: str, version: str, gzipped: bool) -> list[bytes] | Streamed:
        """The body's parts, held, or :class:`Streamed`, made as it is written: a body without gzip of
        more than :data:`STREAM_SERIES` series, which is not held."""
        key = (openmetrics, escaping, version, gzipped)
        with self._count_lock:
            self._in_flight += 1  # waiting for a gather included: it will share this snapshot
        snapshot, age = None, 0.0
        try:
            if getattr(self._source, "stale", lambda: False)():
                # A new gather is due: the served snapshot (and its bodies) is not kept through it.
                with self._lock:
                    self._snapshot, self._bodies = None, {}
            snapshot, age = self._source.snapshot()
            with self._lock:
                if self._snapshot is not snapshot:  # only the latest snapshot's bodies are kept
                    self._snapshot, self._bodies = snapshot, {}
                rendered = self._bodies.get(key)
                rendering = rendered is None
                if rendering:
                    # Collection stays paused until this scrape's body is written: the full
                    # collection that ends the render then follows its last byte, not precedes its first.
                    rendered = self._render(snapshot, *key)
                    if isinstance(rendered, _Rendered):
                        self._bodies[key] = rendered
            try:
                if not isinstance(rendered, _Rendered):  # its families, written for this scrape alone
                    return self._streamed(rendered, openmetrics, escaping, version, age)
                parts = rendered.parts(age)
                return _Body(parts, _resume_collection) if rendering else parts
            except BaseException:
                if rendering:
                    _resume_collection()
                raise
        finally:
            with self._count_lock:
                self._in_flight -= 1
                last = self._in_flight == 0
            # A snapshot no later scrape will be served from (--cache-ttl 0s, or past its TTL) keeps
            # no body in memory once the scrapes sharing it have theirs (60 MB at 5,000 groups).
            if last and snapshot is not None and age >= getattr(self._source, "cache_ttl_s", 0.0):
                with self._lock:
                    if self._snapshot is snapshot and self._in_flight == 0:
                        self._snapshot, self._bodies = None, {}

    def _streamed(self, families: list, openmetrics: bool, escaping: str, version: str, age: float) -> Streamed:
        per_scrape = self._source.per_scrape_family
        at_age = [_with_age(m, age) if m.name == per_scrape else m for m in families]
        del families
        return Streamed(*sized_parts(at_age, openmetrics, escaping, version))

    def _render(self, snapshot, openmetrics: bool, escaping: str, version: str, gzipped: bool) -> _Rendered | list:
        """The body, rendered once for the scrapes of ``snapshot``; or, for one not held
        (:data:`STREAM_SERIES`), its families, which each scrape writes as it goes."""
        def texts(metrics: list) -> Iterator[str]:
            return _family_texts(metrics, openmetrics, escaping, version)

        _pause_collection()  # resumed when the scrape that rendered has its body (parts)
        try:
            self.renders += 1
            families = list(self._source.families(snapshot, 0.0))
            if not gzipped and series_count(families) > STREAM_SERIES:
                return families
            at = next((i for i, m in enumerate(families) if m.name == self._source.per_scrape_family), None)
            per_scrape = families[at] if at is not None else None
            head = _joined(texts(families[:at] if at is not None else families))
            tail_texts = texts(families[at + 1:]) if at is not None else iter(())
            tail = _joined(chain(tail_texts, ("# EOF\n",)) if openmetrics else tail_texts)
            return _Rendered(per_scrape, texts, head, tail, gzipped)
        except BaseException:
            _resume_collection()
            raise
