"""The exporter's table families: many series of one label set (:class:`LabelRows`, a column per label)
shared by several gauge families (:class:`TableGauge`, a value per row), and their lines written a
slice of rows at a time without a Python-level step per series (:func:`_table_lines`), their size
known beforehand (:func:`_table_size`). :mod:`kafkatxn.exposition` writes them beside every other
family, byte for byte as prometheus_client would.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import compress

from prometheus_client.core import GaugeMetricFamily, Sample
from prometheus_client.utils import floatToGoString


class LabelRows:
    """Label values shared by several :class:`TableGauge` families, a column per label name (in the
    order of ``names``), a row per series; each series' label text is made once for all of them.
    Columns, not a tuple per row: at 20,000 groups x 20 partitions 400,000 tuples would be held
    beside the label texts for nothing but :attr:`values`, which few readers ask for."""

    def __init__(self, names: Iterable[str], columns: Sequence[Sequence[str]] | None = None):
        self.names = tuple(names)
        self.columns: list[Sequence[str]] = list(columns) if columns is not None else [[] for _ in self.names]
        if len(self.columns) != len(self.names) or len({len(c) for c in self.columns}) > 1:
            raise ValueError("a column per label name, all of one length")
        self._text: list[list[str]] | None = None  # pieces()
        self._bytes: int | None = None  # piece_bytes()

    def __len__(self) -> int:
        return len(self.columns[0]) if self.columns else 0

    @property
    def values(self) -> list[tuple[str, ...]]:
        """A tuple per row, in the order of ``names``."""
        return list(zip(*self.columns))

    def append(self, values: tuple[str, ...]) -> None:
        for column, value in zip(self.columns, values, strict=True):
            column.append(value)  # type: ignore[attr-defined]  # columns given are lists when appended to
        self._text = self._bytes = None

    def extend(self, values: Iterable[tuple[str, ...]]) -> None:
        for row in values:
            self.append(row)

    def text(self) -> list[str]:
        """``{name="value",...}`` per row: names sorted (each row's :meth:`pieces` joined)."""
        return list(map("".join, zip(*self.pieces())))

    def pieces(self) -> list[list[str]]:
        """Each row's label text in pieces, a column per label (names sorted): the first's ``{name="value",``,
        the next ones' ``name="value",``, the last's ``name="value"}``; each piece made once per distinct
        value of its label and shared by its rows (400,000 texts, 50 MB at 20,000 groups x 20 partitions,
        where 20,000 groups, 100 topics and a few hundred partition numbers say the same). A piece per
        label, not one for a row's last labels together: a group's partitions are a few hundred texts,
        not one per topic and partition (100,000 at 100,000 partitions), each made in C from its column."""
        if self._text is None:
            order = sorted(self.names)
            columns = [self.columns[self.names.index(k)] for k in order]
            # Escaping is rare: looked for in a column's values at once, each distinct value escaped once.
            for i, column in enumerate(columns):
                together = "".join(column)
                if "\\" in together or "\n" in together or '"' in together:
                    escaped = {v: _escape_value(v) for v in set(column) if "\\" in v or "\n" in v or '"' in v}
                    columns[i] = [escaped.get(v, v) for v in column]
            last = len(order) - 1
            # Templates: a name's own % is no placeholder.
            templates = [("{" if i == 0 else "") + k.replace("%", "%%") + '="%s"' + ("}" if i == last else ",")
                         for i, k in enumerate(order)]
            # Each piece made on its value's first row and looked up in C on the others: one pass over
            # the rows (400,000 at 20,000 groups x 20), not one to find the distinct values and one to look them up.
            self._text = [list(map(_Pieces(template).__getitem__, column)) for template, column in zip(templates, columns)]
        return self._text

    def piece_bytes(self) -> int:
        """The UTF-8 bytes of every row's label text (:meth:`pieces`), counted once for the families sharing them."""
        if self._bytes is None:
            self._bytes = sum(_utf8_len(column) for column in self.pieces())
        return self._bytes


class _Pieces(dict):
    """A label text's piece per value, made by ``template % value`` the first time the value is asked for."""

    def __init__(self, template: str):
        super().__init__()
        self._template = template

    def __missing__(self, value: str) -> str:
        piece = self[value] = self._template % value
        return piece


def _utf8_len(texts: list[str]) -> int:
    """The UTF-8 bytes of ``texts``: of their join, whose ``isascii`` reads a flag (one join in C, not a
    length and a flag read per text: 100,000 texts a label at 5,000 groups x 20 partitions)."""
    joined = "".join(texts)
    return len(joined) if joined.isascii() else len(joined.encode("utf-8"))


class TableGauge(GaugeMetricFamily):
    """A gauge family of many series whose labels are :class:`LabelRows` shared with other families:
    ``values[i]`` is the value of row ``i`` (None: no series for that row).

    At 5,000 consumer groups x 20 partitions a scrape carries 500,000 group series in five families:
    making a prometheus_client ``Sample`` and its label dict for each, then formatting each one,
    took seconds. :func:`encode` writes the rows directly, the label text made once for the five;
    anything else that reads ``samples`` (prometheus_client's encoders, a ``name[]`` filter, the
    tests) gets the usual samples, made on first use."""

    def __init__(self, name: str, documentation: str, rows: LabelRows):
        super().__init__(name, documentation, labels=list(rows.names))
        self.label_rows = rows
        self.values: list[float | None] = []
        self._samples: list[Sample] | None = None

    @property  # type: ignore[override]
    def samples(self) -> list[Sample]:
        if self._samples is None:
            names = self.label_rows.names
            self._samples = [Sample(self.name, dict(zip(names, labels)), value, None, None)
                             for labels, value in zip(self.label_rows.values, self.values) if value is not None]
        return self._samples

    @samples.setter
    def samples(self, value: list[Sample]) -> None:
        self._samples = value

    def add_metric(self, labels, value, timestamp=None) -> None:  # noqa: ANN001 - prometheus_client's signature
        raise TypeError("a TableGauge is filled through its LabelRows and values")


# A family of many series is written this many rows at a time: no text of a whole family (50 MB
# at 20,000 groups x 20 partitions) is ever held, only a slice of it until it is encoded. A slice's
# text (about 600 KB) and its bytes stay in the CPU's cache between the join, the encoding and the
# socket's copy; at 50,000 rows (6 MB each) the lines took twice as long (5 families x 100,000
# rows: 107 -> 54 ms CPU, interleaved in-process).
_CHUNK_ROWS = 5_000


def _table_rows(metric: TableGauge) -> tuple[list, list[list[str]], set]:
    """The values and the label texts' pieces (:meth:`LabelRows.pieces`) of the rows that have a series,
    and their distinct values (one set, which :func:`_table_lines` and :func:`_table_size` both read)."""
    values = metric.values
    pieces = metric.label_rows.pieces()
    distinct = set(values)
    if None in distinct:  # rows without a series
        keep = [v is not None for v in values]
        values, pieces = list(compress(values, keep)), [list(compress(column, keep)) for column in pieces]
        distinct.discard(None)
    return values, pieces, distinct


def _table_lines(metric: TableGauge, head: list[str], rows: tuple[list, list[list[str]], set] | None = None) -> Iterator[str]:
    """The family's lines, ``head`` first, in slices of :data:`_CHUNK_ROWS` rows: where every value is
    an int (lags, counts, flags), each distinct value's text made once and a slice's lines joined
    without a Python-level step per series. ``rows``: its :func:`_table_rows`, when already made."""
    values, pieces, distinct = rows if rows is not None else _table_rows(metric)
    yield "".join(head)
    name = metric.name
    if not all(type(v) is int for v in distinct):  # 1 == 1.0 == True, -0.0 == 0, NaN != NaN: no keys for texts
        texts = list(map("".join, zip(*pieces)))
        for at in range(0, len(texts), _CHUNK_ROWS):
            yield "".join([f"{name}{labels} {_value(value)}\n"
                           for labels, value in zip(texts[at:at + _CHUNK_ROWS], values[at:at + _CHUNK_ROWS])])
        return
    # name, the label pieces, value and the next line's name, ...: one join over a list filled by slice
    # assignments, a third of the time of a join per line (500,000 lines at 5,000 groups); a line's
    # name written with the value before it, a piece fewer per line to join (a tenth of the lines' time).
    suffix = {v: f" {_value(v)}\n{name}" for v in distinct}
    last = {v: f" {_value(v)}\n" for v in distinct}  # a slice's last line: no line of it after
    step = 1 + len(pieces)
    for at in range(0, len(values), _CHUNK_ROWS):
        chunk = values[at:at + _CHUNK_ROWS]
        parts = [name] * (1 + step * len(chunk))
        for i, column in enumerate(pieces, 1):
            parts[i::step] = column[at:at + _CHUNK_ROWS]
        parts[step::step] = map(suffix.__getitem__, chunk)
        parts[-1] = last[chunk[-1]]
        yield "".join(parts)


def _table_size(metric: TableGauge, head: list[str], rows: tuple[list, list[list[str]], set]) -> int | None:
    """The bytes :func:`_table_lines` writes for ``rows`` (its :func:`_table_rows`), known without
    writing them (from the label pieces' lengths and each value's text's); None unless every value is
    an int."""
    values, pieces, distinct = rows
    if not all(type(v) is int for v in distinct):
        return None
    size = len("".join(head).encode("utf-8")) + len(metric.name.encode("utf-8")) * len(values)
    rows_pieces = metric.label_rows.pieces()
    # Every row has a series (no row left out by _table_rows): the pieces' bytes its rows' families share.
    size += metric.label_rows.piece_bytes() if pieces is rows_pieces else sum(map(_utf8_len, pieces))
    line_end = {v: len(_value(v)) + 2 for v in distinct}  # " value\n"
    if len(distinct) <= _COUNTED:  # flags and counts: each value counted in C (a small int is found by identity)
        return size + sum(line_end[v] * values.count(v) for v in distinct)
    return size + sum(map(line_end.__getitem__, values))


# A family of at most this many distinct values is sized by counting each (list.count), else by
# looking each row's value up.
_COUNTED = 4


def _value(v) -> str:
    # floatToGoString(int) is repr(float(v)), in Go's exponent form from 1e6 up; ints below that
    # print as "N.0" (exact below 2**53, so the bound keeps it identical).
    if type(v) is int and -(2**53) < v < 1_000_000:
        return f"{v}.0"
    return floatToGoString(v)


def _escape_value(v: str) -> str:
    return v.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
