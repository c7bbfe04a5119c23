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
from itertools import chain
from typing import Any, Callable, Iterator, Sequence, TextIO


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


def _record_rows_pieces(rows: list, depth: int) -> Iterator[str] | None:
    """What indent=2 writes of ``[to_plain(r) for r in rows]`` at ``depth``, in pieces, when ``rows``
    are records of one type with fields; None otherwise."""
    cls = type(rows[0])
    record = _record_of(cls)
    if record is None or not record[0] or len(set(map(type, rows))) != 1:
        return None
    names, values_of = record
    width = len(names)
    row_pad, field_pad = "\n" + "  " * (depth + 1), "\n" + "  " * (depth + 2)
    keys = [json.dumps(n).replace("%", "%%") + ": " for n in names]
    between = "," + row_pad
    templates: dict[tuple, str] = {}

    def pieces() -> Iterator[str]:
        for start in range(0, len(rows), _ROWS_PER_PIECE):
            part = rows[start:start + _ROWS_PER_PIECE]
            values = list(chain.from_iterable(map(values_of, part)))  # row after row
            columns = [values[i::width] for i in range(width)]
            texts = [_column_text(column, depth + 2) for column in columns]
            if None not in texts:
                for i, column, (text, _) in zip(range(width), columns, texts):
                    if text is not column:
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
