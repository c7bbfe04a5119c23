"""A table's cells, a column at a time: how a value reads in a cell (durations and local times for
people), the cells of a column, and tabulate's ``simple`` table written without tabulate.

A large table (``lso --groups`` prints 100,000 rows) is measured column by column first, then written
a few thousand rows at a time (:func:`measure`, :func:`stream_lines`): its cells are never all held.
"""

from __future__ import annotations

import enum
import operator
import re
from typing import Any, Callable, Iterator, NamedTuple, Sequence

from kafkatxn.durations import format_duration_ms
from kafkatxn.plain import RecordColumns, to_plain

DURATION_SUFFIXES = ("age_ms", "duration_ms", "timeout_ms")
TIME_SUFFIXES = ("timestamp_ms", "time_ms", "_at_ms", "until_ms")
ROWS_PER_PIECE = 2_000  # rows of a large table made and written at a time


def cell_text(value: Any) -> str:
    """A value as a cell of any text format (table, csv): lists comma-separated, None empty."""
    value = to_plain(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(cell_text(v) for v in value)
    if isinstance(value, dict):
        return ",".join(f"{k}={cell_text(v)}" for k, v in value.items())
    return str(value)


def format_local_time(ms: int, now_ms: int | None = None) -> str:
    """Local wall-clock time: ``14:03:27`` today, ``2026-11-20 14:03:27`` on another day."""
    import time

    now = time.localtime((now_ms if now_ms is not None else time.time() * 1000) / 1000)
    at = time.localtime(ms / 1000)
    same_day = (at.tm_year, at.tm_yday) == (now.tm_year, now.tm_yday)
    return time.strftime("%H:%M:%S" if same_day else "%Y-%m-%d %H:%M:%S", at)


def table_cell(column: str, value: Any) -> str:
    """A cell as a person reads it: durations and timestamps in human form, the rest as :func:`cell_text`."""
    if isinstance(value, int) and not isinstance(value, bool):
        if column.endswith(DURATION_SUFFIXES):
            # negative: a clock ahead of ours ("-2s"); -1 is the protocol's "unknown"
            return format_duration_ms(value) if value >= 0 else str(value) if value == -1 else f"-{format_duration_ms(-value)}"
        if column.endswith(TIME_SUFFIXES):
            return format_local_time(value) if value > 0 else ""
    return cell_text(value)


_STR_ONLY, _INT_ONLY = frozenset({str}), frozenset({int})


class RecordRows(list):
    """Rows of one record type whose fields are the table's columns, handed to a table as they are:
    a column's values are read off the records (a cell is the same whether its value is plain or not),
    with no dict made per row."""


def _values(column: str, plain: Sequence[Any], record: bool) -> list:
    if type(plain) is RecordColumns:  # rows held as columns: the column itself
        return list(plain.column(column))
    return list(map(operator.attrgetter(column), plain)) if record else [row.get(column) for row in plain]


def column_cells(column: str, plain: Sequence[dict] | RecordRows | RecordColumns) -> list[str]:
    """:func:`table_cell` of ``column`` in every row: a whole column at a time, strings and plain
    integers of a column that is not a duration or a time without a call each."""
    return _cells(column, _values(column, plain, type(plain) is RecordRows))


def text_rows(columns: Sequence[str], plain: Sequence[dict] | RecordRows) -> Iterator[Iterator[tuple[str, ...]]]:
    """:func:`cell_text` of ``columns`` in every row (csv, tsv), made a column at a time, rows a piece at a time."""
    record = type(plain) is RecordRows
    for start in range(0, len(plain), ROWS_PER_PIECE):
        part = plain[start:start + ROWS_PER_PIECE]
        yield zip(*(_cells(column, _values(column, part, record), human=False) for column in columns))


def _cells(column: str, values: list, human: bool = True) -> list[str]:
    if human and column.endswith(DURATION_SUFFIXES + TIME_SUFFIXES):
        return [table_cell(column, value) for value in values]
    kinds = set(map(type, values))
    if kinds <= _STR_ONLY:
        return values
    if kinds <= _INT_ONLY:
        return list(map(str, values))
    text_of = {kind: _text_of(kind) for kind in kinds}
    return [text_of[type(value)](value) for value in values]


# What cell_text writes, per type, where one call does it.
_CELL_TEXT: dict[type, Callable[[Any], str]] = {
    str: str.__str__, int: int.__repr__, type(None): lambda _: "", bool: lambda v: "true" if v else "false",
}


def _text_of(kind: type) -> Callable[[Any], str]:
    text = _CELL_TEXT.get(kind)
    if text is None and isinstance(kind, enum.EnumMeta) and all(type(m.value) is str for m in kind):
        text = operator.attrgetter("_value_")  # an enum of strings is written as its value
    return text or cell_text


class Measured(NamedTuple):
    """A column of a large table, measured before any row is written."""

    width: int  # its widest cell
    simple: bool  # every cell printable ASCII, with nothing to strip and no command to lift out
    cells: Callable[[int, int], list[str]]  # the cells of rows [start, stop)


_TABULATE_ONLY = re.compile(r"[^\x20-\x7e]")  # tabs, newlines, escapes, wide characters: tabulate measures them
_COMMAND = "kafkatxn "  # a cell naming a command to copy: output lifts it out of the table


def printable_ascii(text: str) -> bool:
    return _TABULATE_ONLY.search(text) is None


def _simple(texts: list[str]) -> bool:
    joined = "".join(texts)
    return _TABULATE_ONLY.search(joined) is None and _COMMAND not in joined and list(map(str.strip, texts)) == texts


def measure(column: str, plain: Sequence[dict] | RecordRows) -> Measured:
    """``column``'s widest cell, whether its cells are simple, and how to make them a piece at a time,
    holding no cell: strings are their own cells, integers measured by their extremes, other values
    (None, enums, booleans, durations, times) written once per distinct value."""
    record = type(plain) is RecordRows
    values = _values(column, plain, record)

    def values_of(start: int, stop: int) -> list:
        return values[start:stop] if held else _values(column, plain[start:stop], record)

    held = type(plain) is RecordColumns  # the column read once above is the cells' values

    human = column.endswith(DURATION_SUFFIXES + TIME_SUFFIXES)
    kinds = set(map(type, values))
    if not values:
        return Measured(0, True, lambda start, stop: [])
    if kinds <= _STR_ONLY and not human:
        return Measured(max(map(len, values)), _simple(values), values_of)
    if kinds <= _INT_ONLY and not human:
        return Measured(max(len(str(max(values))), len(str(min(values)))), True,
                        lambda start, stop: list(map(str, values_of(start, stop))))
    others = kinds - {type(None)}
    # Written once per distinct value where equal values are written alike (not 1 and True, 0.0 and -0.0).
    if len(others) <= 1 and others <= {str, int, bool} | {k for k in others if isinstance(k, enum.EnumMeta)}:
        written = {value: table_cell(column, value) if human else _text_of(type(value))(value) for value in set(values)}
        texts = list(written.values())
        return Measured(max(map(len, texts)), _simple(texts), lambda start, stop: list(map(written.__getitem__, values_of(start, stop))))
    cells = _cells(column, values)  # lists, floats, mixed kinds: every cell made now and kept
    return Measured(max(map(len, cells)), _simple(cells), lambda start, stop: cells[start:stop])


def stream_lines(headers: Sequence[str] | None, columns: Sequence[Measured], rows: int, pad: int = 2) -> Iterator[str]:
    """What :func:`simple_table_lines` writes of simple columns, joined by newlines, in pieces."""
    widths = [c.width for c in columns]
    first = True
    if headers is not None:
        if not headers:
            return
        widths = [max(w, len(h) + pad) for w, h in zip(widths, headers)]
        yield "  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip() + "\n" + "  ".join("-" * w for w in widths).rstrip()
        first = False
    elif not columns or not rows:
        return
    line = "  ".join(f"%-{w}s" for w in widths)
    for start in range(0, rows, ROWS_PER_PIECE):
        stop = min(start + ROWS_PER_PIECE, rows)
        lines = map(str.rstrip, map(line.__mod__, zip(*(c.cells(start, stop) for c in columns))))
        yield ("" if first else "\n") + "\n".join(lines)
        first = False


def simple_table_lines(headers: Sequence[str] | None, body: Sequence[Sequence[str]], pad: int = 2) -> list[str] | None:
    """The lines tabulate's ``simple`` table (``plain`` without ``headers``) writes for text cells,
    with ``disable_numparse``, in one pass: columns as wide as their widest cell (a header and ``pad``
    at least), cells stripped and left-aligned, two spaces between, lines stripped at the right. None
    when a cell or header is not printable ASCII (tabulate then measures it). At 100,000 rows tabulate
    spends seconds guessing types the cells do not need."""
    if headers is not None and _TABULATE_ONLY.search("".join(headers)):
        return None
    if not (headers if headers is not None else body and body[0]):
        return []  # no column: tabulate writes nothing
    raw = list(zip(*body))  # a column at a time: the loops below are C's
    if any(_TABULATE_ONLY.search("".join(column)) for column in raw):
        return None
    columns = [list(map(str.strip, column)) for column in raw]
    widths = [max(map(len, column), default=0) for column in columns]
    lines = []
    if headers is not None:
        widths = [max(w, len(h) + pad) for w, h in zip(widths, headers)] if columns else [len(h) + pad for h in headers]
        lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip(), "  ".join("-" * w for w in widths).rstrip()]
    if not body:
        return lines
    row_format = "  ".join(f"{{:<{w}}}" for w in widths)
    lines += [row_format.format(*row).rstrip() for row in zip(*columns)]
    return lines
