"""Plain values and their JSON text: records (dataclasses, named tuples marked ``_object_in_json``)
to dicts, enums to their values, sets to sorted lists (:func:`to_plain`); and ``json.dumps(indent=2)``'s
exact text, written in pieces with the C encoder (:func:`json_text`, :func:`write_json`). The renderer
(:mod:`kafkatxn.output`) and the audit log write through it.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import operator
from collections import namedtuple
from collections.abc import Sequence
from itertools import chain, repeat
from typing import Any, Callable, Iterable, Iterator, Mapping, TextIO

# Exact types that are already JSON-ready (an enum of str or int has its own type, so is not here).
_PLAIN_TYPES = frozenset({str, int, float, bool, type(None)})
# Per record type (a dataclass, or a named tuple marked ``_object_in_json``): its field names and a
# getter of their values, found once rather than per row, and a plain value not passed through
# to_plain again.
# A type that is not a record is kept as None: an enum's values (a verdict in every row) are not
# looked at again.
_RECORDS: dict[type, tuple[tuple[str, ...], Callable[[Any], tuple]] | None] = {}
_UNSEEN = object()


def _record_of(cls: type) -> tuple[tuple[str, ...], Callable[[Any], tuple]] | None:
    """``cls``'s field names and their getter when its instances are records, else None; found once."""
    record = _RECORDS.get(cls, _UNSEEN)
    return _record(cls) if record is _UNSEEN else record


def _record(cls: type) -> tuple[tuple[str, ...], Callable[[Any], tuple]] | None:
    names: tuple[str, ...] | None = None
    if dataclasses.is_dataclass(cls):
        names = tuple(f.name for f in dataclasses.fields(cls))
    elif getattr(cls, "_object_in_json", False):  # records made as named tuples for speed (model.py)
        names = cls._fields
    if names is None:
        _RECORDS[cls] = None
        return None
    getter = operator.attrgetter(*names) if len(names) > 1 else lambda v: tuple(getattr(v, n) for n in names)
    record = _RECORDS[cls] = (names, getter)
    return record


def record_fields(cls: type) -> frozenset[str]:
    """The fields of ``cls``'s records (:func:`to_plain` makes each a dict of them); empty when its
    instances are not records."""
    record = _record_of(cls)
    return frozenset(record[0]) if record is not None else frozenset()


def to_plain(value: Any) -> Any:
    """JSON-ready value: dataclasses to dicts, enums to their values, sets to sorted lists."""
    cls = type(value)
    if cls in _PLAIN_TYPES:
        return value
    record = _record_of(cls)
    if record is not None:
        names, values_of = record
        plain = _PLAIN_TYPES
        return {name: v if type(v) in plain else to_plain(v) for name, v in zip(names, values_of(value))}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted(to_plain(v) for v in value)
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    return value


# Types json writes exactly as it writes their plain values: the plain types, and enums whose
# members are a str (or int) equal to their own value (every verdict in every row). A record of
# these needs no copy of each value for -o json (:func:`json_ready`).
_JSON_SCALARS: set[type] = set(_PLAIN_TYPES)
_NOT_JSON_SCALARS: set[type] = set()


def _json_scalar(cls: type) -> bool:
    if cls in _JSON_SCALARS:
        return True
    if cls in _NOT_JSON_SCALARS:
        return False
    scalar = isinstance(cls, enum.EnumMeta) and all(
        (isinstance(m, str) and type(m.value) is str and str.__str__(m) == m.value)
        or (isinstance(m, int) and not isinstance(m, bool) and type(m.value) is int and int.__repr__(m) == repr(m.value))
        for m in cls)
    (_JSON_SCALARS if scalar else _NOT_JSON_SCALARS).add(cls)
    return scalar


def json_ready(value: Any) -> Any:
    """What :func:`to_plain` gives, for json's encoders: a record whose values are all JSON scalars
    is one ``dict`` of them as they are (a str enum is written as its value), with no call per value."""
    cls = type(value)
    record = _record_of(cls)
    if record is not None:
        names, values_of = record
        values = values_of(value)
        if _JSON_SCALARS.issuperset(map(type, values)) or all(map(_json_scalar, map(type, values))):
            return dict(zip(names, values))
    return to_plain(value)


def made_rows(cls: type, names: tuple[str, ...], values: Iterable[tuple]) -> list:
    """Instances of the frozen dataclass ``cls`` with ``names`` (its fields, in order) set to each of
    ``values``: the instances its ``__init__`` makes, equal and hashing alike, without its
    ``object.__setattr__`` per field. Only for classes without ``__post_init__``, slots or default factories."""
    # What __init__ would do beyond setting the fields, or a field left out, must not pass silently
    # (a field left out would read as its class-level default).
    # (A class whose instances have no __dict__ to fill, a slotted one, has no __dictoffset__.)
    if names != tuple(f.name for f in dataclasses.fields(cls)) or hasattr(cls, "__post_init__") or not cls.__dictoffset__:
        raise TypeError(f"made_rows cannot make {cls.__name__} rows with fields {names}")
    new = object.__new__
    rows = []
    append = rows.append
    for v in values:
        row = new(cls)
        row.__dict__.update(zip(names, v, strict=True))
        append(row)
    return rows


_VIEWS: dict[type, type] = {}  # per row class, the named tuple RecordColumns.fields reads rows as


class RecordColumns(Sequence):
    """Rows of the frozen dataclass ``cls`` held as one sequence per field (``columns``, by name), not
    as an object each: ``lso --groups`` and ``diagnose`` make 100,000 at 5,000 groups, and print them
    a column at a time (:func:`write_json`, the tables of :mod:`kafkatxn.cells`). Read as a sequence
    it is the list of its rows, each made as ``cls(**fields)`` makes it (:func:`made_rows`): one when
    indexed, all of them (once) when walked; :meth:`column` reads a field without making any."""

    __slots__ = ("_columns", "_length", "_rows", "cls", "names")

    def __init__(self, cls: type, columns: Mapping[str, Sequence]):
        names = tuple(f.name for f in dataclasses.fields(cls))
        if set(columns) != set(names) or hasattr(cls, "__post_init__") or not cls.__dictoffset__:
            raise TypeError(f"RecordColumns cannot hold {cls.__name__} rows with fields {sorted(columns)}")
        lengths = {len(c) for c in columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"columns of unequal lengths {sorted(lengths)}")
        self.cls, self.names = cls, names
        self._columns = {name: columns[name] for name in names}
        self._length = lengths.pop() if lengths else 0
        self._rows: list | None = None

    def column(self, name: str) -> Sequence:
        """Every row's ``name``, in order."""
        return self._columns[name]

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index):  # an int or a slice, as a list takes them
        if isinstance(index, slice):
            return RecordColumns(self.cls, {name: column[index] for name, column in self._columns.items()})
        if self._rows is not None:
            return self._rows[index]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError("RecordColumns index out of range")
        return made_rows(self.cls, self.names, [tuple(column[index] for column in self._columns.values())])[0]

    def rows(self) -> list:
        """The rows, made once."""
        if self._rows is None:
            self._rows = made_rows(self.cls, self.names, zip(*self._columns.values())) if self._length else []
        return self._rows

    def __iter__(self) -> Iterator:
        return iter(self.rows())

    def fields(self, indices: Iterable[int] | None = None) -> list:
        """The rows at ``indices`` (every row when None), in that order, to be read and not kept: named
        tuples of the rows' fields (a tuple each, not a ``cls``), for the few a pass looks at one by one."""
        view = _VIEWS.get(self.cls)
        if view is None:
            view = _VIEWS[self.cls] = namedtuple(f"{self.cls.__name__}Fields", self.names)  # type: ignore[misc]
        columns = self._columns.values()
        if indices is None:
            return list(map(tuple.__new__, repeat(view), zip(*columns)))
        indices = indices if isinstance(indices, (list, range)) else list(indices)
        # Each column's values at ``indices`` picked in C, then put together row by row.
        return list(map(tuple.__new__, repeat(view), zip(*(list(map(column.__getitem__, indices)) for column in columns))))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RecordColumns):
            return self.rows() == other.rows()
        return isinstance(other, (list, tuple)) and self.rows() == list(other)

    __hash__ = None  # type: ignore[assignment]  # as a list's

    def __repr__(self) -> str:
        return f"RecordColumns({self.cls.__name__}, {self._length} rows)"


# ``json.dump(indent=2)`` runs Python's own encoder (the C one only writes without indent), token by
# token: most of the time of a large ``lso --groups -o json``. :func:`json_text` writes the
# same text with the C encoder: a list of flat objects (rows of plain values) in one call, its
# separators carrying the newline and indent of a row's fields. A raw newline appears only in those
# separators (JSON escapes it in strings), so ``}<separator>{`` is exactly where one row ends and the
# next begins, and is rewritten into indent's form.
_FLAT_ENCODERS: dict[int, json.JSONEncoder] = {}
_STR = frozenset({str})
_ROWS_PER_PIECE = 2_000  # rows encoded in one call: the text is written a piece at a time, not held whole


def _flat_rows_pieces(rows: list, depth: int) -> Iterator[str] | None:
    """``rows`` as indent=2 writes them at ``depth``, in pieces, when every row is a non-empty object of
    plain values; None otherwise."""
    for row in rows:
        if type(row) is not dict or not row or not _STR.issuperset(map(type, row)) \
                or not _JSON_SCALARS.issuperset(map(type, row.values())):
            return None
    row_pad, field_pad = "\n" + "  " * (depth + 1), "\n" + "  " * (depth + 2)
    encoder = _FLAT_ENCODERS.get(depth)
    if encoder is None:
        encoder = _FLAT_ENCODERS[depth] = json.JSONEncoder(separators=("," + field_pad, ": "))
    between = "}," + field_pad + "{"  # [{"a": 1,<field_pad>"b": 2},<field_pad>{...}]
    rewritten = row_pad + "}," + row_pad + "{" + field_pad

    def pieces() -> Iterator[str]:
        for start in range(0, len(rows), _ROWS_PER_PIECE):
            text = encoder.encode(rows[start:start + _ROWS_PER_PIECE])[2:-2].replace(between, rewritten)
            yield ("[" if start == 0 else ",") + row_pad + "{" + field_pad + text + row_pad + "}"
        yield "\n" + "  " * depth + "]"

    return pieces()


# Records of one type (what every command's rows are) are written without a dict per row, a piece of
# rows at a time, a column at a time: integers and strings json writes as they are go into the rows'
# text by one % per piece; a column of few distinct values is encoded once per value; any other is
# one C encoding with a newline between values (never inside a JSON scalar's text), split there.
_VALUES_ENCODER = json.JSONEncoder(separators=("\n", ": "))
_INT = frozenset({int})
_SEQUENCES = frozenset({tuple, list})
_STR_OR_INT = frozenset({str, int})
_NOT_ALIKE = frozenset({float})  # 0.0 and -0.0, 1.0 and 1 are equal but written differently


def _as_it_is(text: str) -> bool:
    """json writes ``text`` between quotes as it is: no quote, backslash, control or non-ASCII character."""
    return text.isascii() and text.isprintable() and '"' not in text and "\\" not in text


def _column_text(values: list, depth: int) -> tuple[list, bool] | None:
    """``values`` as the rows' % takes them at ``depth``, and whether they go between quotes; None when
    one is neither a JSON scalar nor a tuple or list of strings and integers."""
    kinds = set(map(type, values))
    if kinds == _INT:
        return values, False  # %s of an int is its repr, as json writes it
    if kinds == _STR and _as_it_is("".join(values)):
        return values, True
    if kinds <= _SEQUENCES:
        return _sequences_text(values, depth)
    if not all(map(_json_scalar, kinds)):
        return None
    alike = not kinds & _NOT_ALIKE and not (bool in kinds and any(issubclass(k, int) for k in kinds - {bool}))
    distinct = set(values) if alike else values
    if len(distinct) * 4 <= len(values):  # each distinct value encoded once
        written = {v: json.dumps(v) for v in distinct}
        return list(map(written.__getitem__, values)), False
    return _VALUES_ENCODER.encode(values)[1:-1].split("\n"), False


def _sequences_text(values: list, depth: int) -> tuple[list, bool] | None:
    """A column of tuples (or lists) of strings and integers (diagnose's ``pinned_by``: most of them
    alike, most empty), as indent=2 writes each at ``depth``: each distinct one encoded once. None
    when an item is anything else (bool is left out: ``True == 1`` would share a text)."""
    pad = "\n" + "  " * depth
    written: dict[tuple, str] = {}
    out = []
    for value in values:
        key = tuple(value)
        text = written.get(key)
        if text is None:
            if not _STR_OR_INT.issuperset(map(type, key)):
                return None
            text = written[key] = json.dumps(key, indent=2).replace("\n", pad)
        out.append(text)
    return out, False


def _record_rows_pieces(rows: list | RecordColumns, depth: int) -> Iterator[str] | None:
    """What indent=2 writes of ``[to_plain(r) for r in rows]`` at ``depth``, in pieces, when ``rows``
    are records of one type with fields (or :class:`RecordColumns`: read a column at a time); None otherwise."""
    held = rows if type(rows) is RecordColumns else None
    if held is not None:
        names = held.names
        record = _record_of(held.cls)
    else:
        record = _record_of(type(rows[0]))
        if record is None or not record[0] or len(set(map(type, rows))) != 1:
            return None
        names = record[0]
    values_of = record[1] if record is not None else None
    width = len(names)
    row_pad, field_pad = "\n" + "  " * (depth + 1), "\n" + "  " * (depth + 2)
    keys = [json.dumps(n).replace("%", "%%") + ": " for n in names]
    between = "," + row_pad
    templates: dict[tuple, str] = {}

    def pieces() -> Iterator[str]:
        for start in range(0, len(rows), _ROWS_PER_PIECE):
            part = rows[start:start + _ROWS_PER_PIECE]
            if held is not None:  # held as columns: each one sliced, the rows' values laid out row after row below
                columns = [held.column(name)[start:start + _ROWS_PER_PIECE] for name in names]
                values = [None] * (len(part) * width)
            else:
                values = list(chain.from_iterable(map(values_of, part)))  # row after row
                columns = [values[i::width] for i in range(width)]
            texts = [_column_text(column, depth + 2) for column in columns]
            if None not in texts:
                for i, column, (text, _) in zip(range(width), columns, texts):
                    if text is not column or held is not None:
                        values[i::width] = text
                quoted = tuple(q for _, q in texts)
                template = templates.get((quoted, len(part)))
                if template is None:
                    row = "{" + field_pad + ("," + field_pad).join(k + ('"%s"' if q else "%s") for k, q in zip(keys, quoted)) + row_pad + "}"
                    template = templates[(quoted, len(part))] = between.join([row] * len(part))
                text = template % tuple(values)
            else:  # a value to convert (a list, a set, an enum that is not its value): row by row
                text = between.join("".join(_pieces(json_ready(r), depth + 1)) for r in part)
            yield ("[" if start == 0 else ",") + row_pad + text
        yield "\n" + "  " * depth + "]"

    return pieces()


def _pieces(value: Any, depth: int) -> Iterator[str]:
    cls = type(value)
    if cls is RecordColumns:
        if len(value):
            yield from _record_rows_pieces(value, depth)  # type: ignore[misc]
        else:
            yield "[]"
        return
    if (cls is dict or cls is list) and value:
        inner, close = "\n" + "  " * (depth + 1), "\n" + "  " * depth
        if cls is list:
            fast = _flat_rows_pieces(value, depth) or _record_rows_pieces(value, depth)
            if fast is not None:
                yield from fast
                return
            for i, item in enumerate(value):
                yield ("[" if i == 0 else ",") + inner
                yield from _pieces(item, depth + 1)
            yield close + "]"
            return
        if _STR.issuperset(map(type, value)):
            for i, (key, item) in enumerate(value.items()):
                yield ("{" if i == 0 else ",") + inner + json.dumps(key) + ": "
                yield from _pieces(item, depth + 1)
            yield close + "}"
            return
    # Anything else (scalars, empty or other containers, keys that are not strings): json's own text.
    yield json.dumps(value, indent=2).replace("\n", "\n" + "  " * depth)


def json_rows(rows: Sequence[Any]) -> list:
    """``rows`` ready for :func:`write_json`: records of one type as they are (written without a dict
    each), anything else :func:`json_ready` row by row."""
    if type(rows) is RecordColumns:
        return rows  # type: ignore[return-value]
    rows = rows if type(rows) is list else list(rows)
    if rows and _record_of(type(rows[0])) is not None and len(set(map(type, rows))) == 1:
        return rows
    return [json_ready(r) for r in rows]


def json_text(value: Any) -> str:
    """Exactly ``json.dumps(value, indent=2)``, many times faster for rows of plain values."""
    return "".join(_pieces(value, 0))


def write_json(value: Any, out: TextIO) -> None:
    """:func:`json_text` of ``value`` and a newline, written to ``out`` a piece at a time."""
    for piece in _pieces(value, 0):
        out.write(piece)
    out.write("\n")
