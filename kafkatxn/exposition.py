"""The exporter's HTTP exposition: prometheus_client's formats, byte for byte, at a fraction of the cost.

At tens of thousands of partitions a scrape carries three samples per partition. prometheus_client
formats each one generically (label names validated and escaped, labels sorted, per sample): a large
share of the time a scrape may take. :func:`encode` writes the same text for the families kafkatxn
makes (gauges with legacy-valid metric and label names, no timestamps, units or exemplars) with the
per-family work done once per family, and hands every other family to prometheus_client's own
encoder, so the output is prometheus_client's whatever the registry holds
(``tests/unit/test_exposition.py`` compares them). :func:`make_wsgi_app` is prometheus_client's
``make_wsgi_app`` (content negotiation, ``name[]``, gzip) with this encoder where it applies.
"""

from __future__ import annotations

import functools
import gc
import re
import zlib
from itertools import chain
from typing import Callable, Iterable, Iterator
from urllib.parse import parse_qs

from prometheus_client import exposition as _text
from prometheus_client.openmetrics import exposition as _om
from prometheus_client.registry import Collector

from kafkatxn import collection
from kafkatxn.exposition_tables import (  # noqa: F401  LabelRows: the table families' rows, made by exporter_metrics
    LabelRows, TableGauge, _escape_value, _table_lines, _table_rows, _table_size, _value,
)

# Names this encoder writes bare: Prometheus' classic metric and label names (its data model; a label
# name starting "__" is reserved). Any other name is written by prometheus_client itself, which
# quotes UTF-8 names, so both encoders agree whatever prometheus_client version is installed.
_CLASSIC_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_CLASSIC_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def _is_classic_metric_name(name: str) -> bool:
    return _CLASSIC_METRIC_NAME.fullmatch(name) is not None


def _is_classic_label_name(name: str) -> bool:
    return _CLASSIC_LABEL_NAME.fullmatch(name) is not None and not name.startswith("__")

# For legacy-valid names (all kafkatxn uses) these two escapings leave names as they are; the
# others (dots, values) rewrite them, and prometheus_client's encoder is used as it is.
_SAME_FOR_LEGACY_NAMES = frozenset({_om.UNDERSCORES, _om.ALLOWUTF8})


class _One(Collector):
    def __init__(self, metric):
        self._metric = metric

    def collect(self):
        return iter((self._metric,))


def sized_parts(metrics: Iterable, openmetrics: bool = False, escaping: str = _om.UNDERSCORES,
                version: str = "1.0.0") -> tuple[Iterator[bytes], int]:
    """:func:`iter_parts`' body and its length, known before it is written (a Content-Length, so a
    scrape ends at its last byte, not when the connection closes): each table family of ints is sized
    now and written when its turn comes, a slice of rows at a time; the other families (few series
    each) are written now. For an ``escaping`` in :data:`_SAME_FOR_LEGACY_NAMES`."""
    pieces: list = []  # bytes, or a table family's lines to write when their turn comes
    small: list[str] = []
    length = 0
    for metric in metrics:
        lines = _fast_lines(metric, openmetrics)
        if type(metric) is TableGauge and metric._samples is None and lines is not None:
            head, rows = _head(metric, openmetrics), _table_rows(metric)
            size = _table_size(metric, head, rows)
            if size is not None:
                if small:
                    pieces.append("".join(small).encode("utf-8"))
                    small = []
                pieces.append(_table_lines(metric, head, rows))
                length += size
                continue
        small.extend(lines if lines is not None else (_other_text(metric, openmetrics, escaping, version),))
    if openmetrics:
        small.append("# EOF\n")
    if small:
        pieces.append("".join(small).encode("utf-8"))
    length += sum(len(piece) for piece in pieces if type(piece) is bytes)

    def parts() -> Iterator[bytes]:
        for piece in pieces:
            if type(piece) is bytes:
                yield piece
            else:
                yield from _joined(piece)

    return parts(), length


def _head(metric, openmetrics: bool) -> list[str]:
    """A gauge family's HELP and TYPE lines."""
    name, doc = metric.name, metric.documentation
    if openmetrics:
        doc = _escape_value(doc)
    else:
        doc = doc.replace("\\", r"\\").replace("\n", r"\n")
    return [f"# HELP {name} {doc}\n", f"# TYPE {name} gauge\n"]


def _fast_lines(metric, openmetrics: bool) -> Iterable[str] | None:
    """The family's lines (a table's in slices), or None when it is not one this encoder covers."""
    name = metric.name
    if metric.type != "gauge" or metric.unit or not _is_classic_metric_name(name):
        return None
    out = _head(metric, openmetrics)
    if type(metric) is TableGauge and metric._samples is None:
        if not all(_is_classic_label_name(k) for k in metric.label_rows.names):
            return None
        return _table_lines(metric, out)
    append = out.append
    keys: tuple | None = None
    order: list[str] = []
    escaped: dict[str, str] = {}  # label values repeat (a topic per partition): escape each once
    for s in metric.samples:
        if s.name != name or s.timestamp is not None or s.exemplar is not None or s.native_histogram is not None:
            return None
        labels = s.labels
        if not labels:
            append(f"{name} {_value(s.value)}\n")
            continue
        here = tuple(labels)
        if here != keys:
            if not all(_is_classic_label_name(k) for k in here):
                return None
            keys, order = here, sorted(here)
        parts = []
        for k in order:
            v = labels[k]
            e = escaped.get(v)
            if e is None:
                e = escaped[v] = _escape_value(v) if ("\\" in v or "\n" in v or '"' in v) else v
            parts.append(f'{k}="{e}"')
        append(f"{name}{{{','.join(parts)}}} {_value(s.value)}\n")
    return out


def encode(registry: Collector, openmetrics: bool = False, escaping: str = _om.UNDERSCORES, version: str = "1.0.0") -> bytes:
    """What prometheus_client's ``generate_latest`` (text 0.0.4) or, with ``openmetrics``,
    ``openmetrics.generate_latest`` returns for ``registry``."""
    return b"".join(encode_parts(registry, openmetrics, escaping, version))


# A family's lines of this size or more are a part of their own; smaller ones are joined together.
_OWN_PART_CHARS = 64 * 1024


def encode_parts(registry: Collector, openmetrics: bool = False, escaping: str = _om.UNDERSCORES,
                 version: str = "1.0.0") -> list[bytes]:
    """:func:`encode`'s body in parts, which the HTTP server writes one after another: a 60 MB body
    (5,000 groups x 20 partitions) is not joined into one string and copied again into bytes, which
    took a sixth of the exposition's time and held the body twice."""
    if escaping not in _SAME_FOR_LEGACY_NAMES:
        if openmetrics:
            return [_om.generate_latest(registry, escaping=escaping, version=version)]
        return [_text.generate_latest(registry, escaping=escaping)]
    return list(iter_parts(registry.collect(), openmetrics, escaping, version))


def iter_parts(metrics: Iterable, openmetrics: bool = False, escaping: str = _om.UNDERSCORES,
               version: str = "1.0.0") -> Iterator[bytes]:
    """:func:`encode_parts` of ``metrics``, each part made when it is asked for: a body written as it is
    made holds a slice of a family at a time, never the whole text (250 MB at 20,000 groups x 20).
    For an ``escaping`` that writes legacy names as they are (:data:`_SAME_FOR_LEGACY_NAMES`)."""
    texts = _family_texts(metrics, openmetrics, escaping, version)
    yield from _joined(chain(texts, ("# EOF\n",)) if openmetrics else texts)


def _family_texts(metrics: Iterable, openmetrics: bool, escaping: str, version: str) -> Iterator[str]:
    for metric in metrics:
        lines = _fast_lines(metric, openmetrics)
        if lines is not None:
            yield from lines
        else:
            yield _other_text(metric, openmetrics, escaping, version)


def _other_text(metric, openmetrics: bool, escaping: str, version: str) -> str:
    """A family this encoder does not cover, as prometheus_client writes it."""
    if openmetrics:
        return _om.generate_latest(_One(metric), escaping=escaping, version=version).decode("utf-8").removesuffix("# EOF\n")
    return _text.generate_latest(_One(metric), escaping=escaping).decode("utf-8")


def _joined(texts: Iterable[str]) -> Iterator[bytes]:
    """The texts as bytes: each of :data:`_OWN_PART_CHARS` or more a part of its own, encoded as it
    comes (its text then let go), the smaller ones joined together; at least one part."""
    small: list[str] = []
    size = 0
    sent = False
    for text in texts:
        if len(text) < _OWN_PART_CHARS:
            small.append(text)
            size += len(text)
            if size < _OWN_PART_CHARS:
                continue
            text, small, size = "".join(small), [], 0
        elif small:
            yield "".join(small).encode("utf-8")
            small, size = [], 0
        sent = True
        yield text.encode("utf-8")
    if small or not sent:
        yield "".join(small).encode("utf-8")


def _encode_parts(encoder: Callable[[Collector], bytes], registry: Collector) -> list[bytes]:
    """``encoder``'s body (from :func:`choose_encoder`) in parts where it is :func:`encode`."""
    if encoder is encode:
        return encode_parts(registry)
    if isinstance(encoder, functools.partial) and encoder.func is encode:
        return encode_parts(registry, *encoder.args, **encoder.keywords)
    return [encoder(registry)]


def choose_encoder(accept_header: str | None) -> tuple[Callable[[Collector], bytes], str]:
    """prometheus_client's content negotiation, answered with :func:`encode`."""
    encoder, content_type = _text.choose_encoder(accept_header or "")
    if encoder is _text.generate_latest:
        return encode, content_type
    if isinstance(encoder, functools.partial):
        kw = encoder.keywords
        if encoder.func is _text.generate_latest:
            return functools.partial(encode, escaping=kw.get("escaping", _om.UNDERSCORES)), content_type
        if encoder.func is _om.generate_latest:
            return functools.partial(encode, openmetrics=True, escaping=kw.get("escaping", _om.UNDERSCORES),
                                     version=kw.get("version", "1.0.0")), content_type
    return encoder, content_type  # a format this module does not know: prometheus_client's own


# A scrape of a large cluster makes about a million objects that live until it ends (offsets,
# producer states, samples); Python's collector, triggered by allocation counts, would walk them
# dozens of times while the scrape runs. So cyclic collection waits while scrapes run, and a full
# collection follows each scrape once its body has been written: nothing cyclic outlives a scrape
# (made rarer, or left to the allocation counts, RSS grows faster: bench/bench_soak.py). A body
# shared by the scrapes of one snapshot (exposition_shared) pauses and collects once, for its
# render, not once per concurrent scrape.
def _pause_collection() -> None:
    collection.pause()


def _resume_collection() -> None:
    collection.resume()
    # Every scrape that ends collects, not only the last of overlapping ones: scrapers that keep
    # overlapping (two Prometheus replicas, a short interval) would otherwise keep the collector
    # paused for good while cyclic garbage piles up.
    gc.collect()


class _Body(list):
    """The response body's parts (its length is sent as Content-Length); the WSGI server closes it
    once the body is written, which ends the scrape's pause of the collector."""

    def __init__(self, parts: list[bytes], on_close: Callable[[], None]):
        super().__init__(parts)
        self._on_close: Callable[[], None] | None = on_close

    def close(self) -> None:
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()


def _gzip_parts(parts: list[bytes]) -> list[bytes]:
    """The parts as one gzip stream (what ``gzip.compress`` makes, but for parts not joined first)."""
    compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS)  # 16+: gzip's header and trailer
    out = [compressor.compress(part) for part in parts]
    out.append(compressor.flush())
    return [chunk for chunk in out if chunk]


# Prometheus always asks for gzip. Level 1 takes a fraction of level 6's time for a body only a
# little larger, which a scrape over any network carries in milliseconds.
GZIP_LEVEL = 1


def _encoding_of(encoder: Callable) -> tuple[bool, str, str] | None:
    """(openmetrics, escaping, version) of an :func:`encode` that writes legacy names as they are."""
    if encoder is encode:
        return False, _om.UNDERSCORES, "1.0.0"
    if isinstance(encoder, functools.partial) and encoder.func is encode and not encoder.args:
        kw = encoder.keywords
        escaping = kw.get("escaping", _om.UNDERSCORES)
        if escaping in _SAME_FOR_LEGACY_NAMES:
            return kw.get("openmetrics", False), escaping, kw.get("version", "1.0.0")
    return None


def make_wsgi_app(registry: Collector, bodies=None) -> Callable:
    """prometheus_client's ``make_wsgi_app`` for ``registry`` with :func:`encode`, gzip at
    :data:`GZIP_LEVEL` (prometheus_client uses 9); with ``bodies``, a
    :class:`kafkatxn.exposition_shared.SnapshotBodies` over the collector ``registry`` holds, a whole
    body in a format :func:`encode` writes comes from there."""

    def app(environ: dict, start_response: Callable) -> Iterable[bytes]:
        method = environ["REQUEST_METHOD"]
        if method == "OPTIONS":
            status, headers, output = "200 OK", [("Allow", "OPTIONS,GET")], b""
        elif method != "GET":
            status, headers = "405 Method Not Allowed", [("Allow", "OPTIONS,GET")]
            output = f"# HTTP {status}: {method}; use OPTIONS or GET\n".encode()
        elif environ["PATH_INFO"] == "/favicon.ico":
            status, headers, output = "200 OK", [], b""
        else:
            encoder, content_type = choose_encoder(environ.get("HTTP_ACCEPT"))
            params = parse_qs(environ.get("QUERY_STRING", ""))
            encoding = _encoding_of(encoder) if bodies is not None and "name[]" not in params else None
            if encoding is not None:
                assert bodies is not None
                gzipped = _text.gzip_accepted(environ.get("HTTP_ACCEPT_ENCODING"))
                parts = bodies.parts(*encoding, gzipped)
                headers = [("Content-Type", content_type)] + ([("Content-Encoding", "gzip")] if gzipped else [])
                length = sum(map(len, parts)) if isinstance(parts, list) else parts.length  # streamed: sized beforehand
                start_response("200 OK", headers + [("Content-Length", str(length))])
                return parts
            _pause_collection()
            try:
                target = registry.restricted_registry(params["name[]"]) if "name[]" in params else registry
                parts = _encode_parts(encoder, target)
                status, headers = "200 OK", [("Content-Type", content_type)]
                if _text.gzip_accepted(environ.get("HTTP_ACCEPT_ENCODING")):
                    parts = _gzip_parts(parts)
                    headers.append(("Content-Encoding", "gzip"))
                # Set here: the server sets it only for a body of one part.
                headers.append(("Content-Length", str(sum(map(len, parts)))))
                start_response(status, headers)
            except BaseException:
                _resume_collection()
                raise
            return _Body(parts, _resume_collection)
        start_response(status, headers)
        return [output]

    return app
