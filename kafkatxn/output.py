"""One renderer for every command: table, json, jsonl, csv, tsv.

Commands hand over dataclass rows (or a :class:`Report` of several row kinds). Keys are the
dataclass field names: snake_case, with units in the name, so they are stable for scripts.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence, TextIO

from kafkatxn.cells import (
    DURATION_SUFFIXES, TIME_SUFFIXES, Measured, RecordRows, cell_text, column_cells, measure, simple_table_lines,
    printable_ascii, stream_lines, table_cell, text_rows,
)
from kafkatxn.plain import RecordColumns, json_rows, record_fields, to_plain, write_json


# Tables are for people at a terminal: without --wide they keep to its width (this one when stdout is
# not a terminal and COLUMNS is not set), showing the columns an engineer acts on; ages and timestamps
# read as "3m12s" and local time. Structured formats keep every field under its key, in raw units.
# How a table is made to fit, in order, is in docs/verdicts.md ("Tables at 80 columns").
TABLE_WIDTH = 120
_NARROWEST = 20


def terminal_width(out: TextIO | None = None) -> int:
    """The width tables and reports keep to: the terminal's when ``out`` is one, else ``COLUMNS``
    when set, else :data:`TABLE_WIDTH`."""
    stream = out or sys.stdout
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    if tty:
        return max(shutil.get_terminal_size((TABLE_WIDTH, 24)).columns, _NARROWEST)
    columns = os.environ.get("COLUMNS", "").strip()
    return max(int(columns), _NARROWEST) if columns.isdigit() and int(columns) > 0 else TABLE_WIDTH
# Left out first when a table does not fit (the raw material behind the columns that matter).
SECONDARY_COLUMNS = (
    "last_sequence", "coordinator_epoch", "last_timestamp_ms", "start_time_ms", "readable_before_lso",
    "last_write_age_ms", "leader_id", "lso_before", "high_watermark_before", "producer_epoch_before",
    "producer_epoch_after", "producer_id_after", "state_after", "holds_lso", "coordinator_id", "open_transactions",
    "producer_epoch", "high_watermark_after", "lso_after", "error",
)
# Never left out: what names the thing and what the engineer decides on (and a row type's TABLE_KEEPS).
ESSENTIAL_COLUMNS = frozenset({
    "topic", "partition", "group", "transactional_id", "producer_id", "verdict", "state", "status", "outcome",
    "scope", "name", "value", "api", "broker_id", "host", "kind", "message", "label", "lso_moved",
    "reason",  # why an action was refused or a verdict given: the next step depends on it
    "events",  # what a transaction-log record implies (transactions history)
})

@dataclass
class Report:
    """Several kinds of rows plus a few scalar facts (e.g. ``cluster``: id, brokers, settings)."""

    facts: dict[str, Any] = field(default_factory=dict)
    sections: dict[str, Sequence[Any]] = field(default_factory=dict)


_HEADER_WORDS = (("last_stable_offset", "lso"), ("high_watermark", "hw"), ("transaction_", "txn_"), ("committed_offset", "committed"))


# Abbreviations for a table that still does not fit once its free text is wrapped (docs/verdicts.md).
_SHORT_WORDS = (
    ("transactional_id", "txn_id"), ("producer_epoch", "epoch"), ("producer_id", "pid"), ("coordinator", "coord"),
    ("partitions", "parts"), ("partition", "part"), ("transactions", "txns"), ("active_", ""), ("broker_id", "broker"),
    ("timestamp", "ts"), ("last_write", "write"), ("lag_to_hw", "to_hw"), ("lag_to_lso", "lag"), ("explanation", "why"),
)


def table_header(column: str, short: bool = False) -> str:
    """Short headers for tables (as kafka-transactions.sh and rpk print them): converted columns lose
    their ``_ms`` (the cell is no longer in milliseconds), ``_messages`` goes, and the long offset
    names become ``lso`` and ``hw``; ``short`` abbreviates further (``txn_id``, ``pid``, ``part``).
    Keys in structured formats do not change."""
    if column.endswith(DURATION_SUFFIXES + TIME_SUFFIXES):
        column = column[: -len("_ms")]
    if column.endswith("_messages"):
        column = column[: -len("_messages")]
    for long, abbreviated in _HEADER_WORDS + (_SHORT_WORDS if short else ()):
        column = column.replace(long, abbreviated)
    return column


def _headers(shown: Sequence[str], short: bool) -> list[str]:
    """Headers for ``shown``; the long ones where abbreviating would make two alike."""
    headers = [table_header(c, short) for c in shown]
    return headers if len(set(headers)) == len(headers) else [table_header(c) for c in shown]


def _fits(widths: Sequence[int]) -> int:
    # tabulate pads headers by 2 (its MIN_PADDING) and separates columns by 2 spaces.
    return sum(widths) + 2 * max(len(widths) - 1, 0)


def _raw_twin(column: str, columns: Sequence[str]) -> bool:
    return column.endswith("_ms") and column[:-3] in columns


def table_columns(columns: Sequence[str], plain: Sequence[dict], wide: bool = False, width: int = TABLE_WIDTH,
                  keep: frozenset[str] = frozenset(), cell_width: Callable[[str], int] | None = None) -> list[str]:
    """The columns a table shows: every one with ``wide``; otherwise raw twins of human columns
    (``age_ms`` next to ``age``) are left out, then secondary columns and then the rightmost
    non-essential ones, until the table fits ``width``; never one in ``keep``. ``cell_width``: a
    column's widest cell, when the caller has measured it."""
    cell_width = cell_width or (lambda column: max(map(len, column_cells(column, plain)), default=0))
    shown = list(columns)
    if wide:
        return shown
    shown = [c for c in shown if not _raw_twin(c, columns)]

    widest: dict[str, int] = {}  # per column, measured once: dropping one does not change the others

    def table_width(cols: list[str]) -> int:
        for c in cols:
            if c not in widest:
                widest[c] = max(len(table_header(c)) + 2, cell_width(c))
        return _fits([widest[c] for c in cols])

    droppable = [c for c in SECONDARY_COLUMNS if c in shown and c not in keep]
    droppable += [c for c in reversed(shown) if c not in ESSENTIAL_COLUMNS and c not in keep and c not in droppable]
    for column in droppable:
        if table_width(shown) <= width:
            break
        shown.remove(column)
    return shown


# Free text that is kept in narrow tables (ESSENTIAL_COLUMNS) and wraps first, inside its own cell.
_WRAPPABLE_COLUMNS = ("reason", "explanation", "message", "risk")
_MIN_WRAP = 16


def _wrap_widths(shown: Sequence[str], cell_widths: Sequence[int], width: int = TABLE_WIDTH) -> tuple[list[int | None] | None, bool, int]:
    """Per column, the width to wrap its cells at so the table fits ``width`` (None where it fits
    already), whether headers are abbreviated, and the padding headers get: free text wraps first;
    then headers are abbreviated; then they lose their padding; then the widest other columns wrap
    inside their cells, down to their header. ``cell_widths``: each column's widest cell."""
    wrap: list[int | None] = [None] * len(shown)
    for short in (False, True):
        headers = _headers(shown, short)
        widths = [max(len(h) + 2, cell_widths[i]) for i, h in enumerate(headers)]
        excess = _fits(widths) - width
        if excess <= 0:
            return None, short, 2
        for i in sorted((i for i, c in enumerate(shown) if c in _WRAPPABLE_COLUMNS), key=lambda i: -widths[i]):
            cut = min(excess, widths[i] - _MIN_WRAP)
            if cut > 0:
                widths[i] -= cut
                wrap[i] = widths[i]
                excess -= cut
            if excess <= 0:
                return wrap, short, 2
    widths = [max(len(h), wrap[i] or cell_widths[i]) for i, h in enumerate(headers)]
    excess = _fits(widths) - width
    while excess > 0:  # the last resort: any column, widest first, never narrower than its header
        i = max(range(len(shown)), key=lambda i: widths[i] - len(headers[i]))
        cut = min(excess, widths[i] - len(headers[i]), max(widths[i] // 2, 1))
        if cut <= 0:
            break
        widths[i] -= cut
        wrap[i] = widths[i]
        excess -= cut
    return wrap, True, 0


# A command to copy inside free text ("…; to end it now: kafkatxn fence 'x'"): a table prints it
# below itself, on its own line, and the cell points at it. Quoted references (`kafkatxn hanging`)
# stay in the cell, never split across lines.
_COMMAND_IN_TEXT = re.compile(r"(?<![`\w])kafkatxn [a-z][^;`\n]*?(?=;|\)?$)")
_QUOTED_COMMAND = re.compile(r"`kafkatxn [^`]*`")
_NBSP = "\u00a0"


def _commands_out_of_cells(shown: Sequence[str], body: list[list[str]]) -> list[str]:
    """Take the commands to copy out of free-text cells, leaving ``[n]`` in their place."""
    commands: list[str] = []

    def lift(match: re.Match) -> str:
        commands.append(match.group(0).strip())
        return f"[{len(commands)}]"

    # Only the columns that may hold one are looked at cell by cell, in the rows' order.
    looked_at = [i for i, column in enumerate(shown)
                 if column in _WRAPPABLE_COLUMNS or any("kafkatxn " in row[i] for row in body)]
    for row in body if looked_at else ():
        for i in looked_at:
            if shown[i] in _WRAPPABLE_COLUMNS or "kafkatxn " in row[i]:
                row[i] = _COMMAND_IN_TEXT.sub(lift, row[i])
                row[i] = _QUOTED_COMMAND.sub(lambda m: m.group(0).replace(" ", _NBSP), row[i])
    return commands


def wrap_text(text: str, width: int, indent: str = "  ") -> list[str]:
    """``text`` wrapped to ``width`` (later lines indented), a ``kafkatxn …`` command in it never split."""
    import textwrap

    kept = re.sub(r"kafkatxn [^;()`\n]*", lambda m: m.group(0).rstrip().replace(" ", _NBSP), text)
    lines = textwrap.wrap(kept, width, subsequent_indent=indent, break_on_hyphens=False, break_long_words=False)
    return [line.replace(_NBSP, " ") for line in lines] or [""]


def hidden_note(hidden: Sequence[str], width: int) -> str:
    """The line under a narrow table naming the columns it left out (as ``--wide`` heads them)."""
    return "\n".join(wrap_text(f"(left out to fit {width} columns: {', '.join(dict.fromkeys(hidden))}; --wide shows them)", width))


def table_text(columns: Sequence[str], plain: Sequence[dict], *, wide: bool = False, width: int | None = None,
               no_headers: bool = False, keep: frozenset[str] = frozenset(), hidden: list[str] | None = None) -> str:
    """A table of ``plain`` rows within ``width`` (the terminal's), then any command its cells name,
    each on its own line, then the columns left out to fit (or they are added to ``hidden``: the
    caller names them once, under all its tables)."""
    return "".join(table_pieces(columns, plain, wide=wide, width=width, no_headers=no_headers, keep=keep, hidden=hidden))


def table_pieces(columns: Sequence[str], plain: Sequence[dict], *, wide: bool = False, width: int | None = None,
                 no_headers: bool = False, keep: frozenset[str] = frozenset(), hidden: list[str] | None = None) -> Iterator[str]:
    """:func:`table_text` in pieces: a table of simple cells that fits is written a few thousand rows
    at a time, each column measured first (:func:`kafkatxn.cells.measure`), no cell held."""
    width = width or TABLE_WIDTH
    measured: dict[str, Measured] = {}

    def measure_once(column: str) -> Measured:
        if column not in measured:
            measured[column] = measure(column, plain)
        return measured[column]

    shown = table_columns(columns, plain, wide, width, keep, lambda column: measure_once(column).width)
    kept = [measure_once(c) for c in shown]
    wrap, short, pad = (None, False, 2) if wide else _wrap_widths(shown, [m.width for m in kept], width)
    headers = None if no_headers else _headers(shown, short)
    if wrap is None and all(m.simple for m in kept) and printable_ascii("".join(headers or ())):
        yield from stream_lines(headers, kept, len(plain), pad)
    else:
        yield _table_of_cells(shown, [m.cells(0, len(plain)) for m in kept], len(plain), wide=wide, width=width,
                              no_headers=no_headers)
    left_out = [] if no_headers or not plain else [  # a headless table is for scripts
        table_header(c) for c in columns if c not in shown and not _raw_twin(c, columns)]  # a raw twin's human form is shown
    if hidden is not None:
        hidden.extend(left_out)
    elif left_out:
        yield "\n\n" + hidden_note(left_out, width)


def _table_of_cells(shown: Sequence[str], cells: list[list[str]], rows: int, *, wide: bool, width: int, no_headers: bool) -> str:
    """A table whose cells are held: commands lifted out of them, wrapped to fit, by tabulate where
    :func:`simple_table_lines` cannot measure them."""
    body = [list(row) for row in zip(*cells)] if shown else [[] for _ in range(rows)]
    commands = _commands_out_of_cells(shown, body)
    cell_widths = [max((len(row[i]) for row in body), default=0) for i in range(len(shown))]
    wrap, short, pad = (None, False, 2) if wide else _wrap_widths(shown, cell_widths, width)
    fast = simple_table_lines(None if no_headers else _headers(shown, short), body, pad) if wrap is None else None
    if fast is not None:  # a table that fits once its commands are lifted out (hanging's next steps): no tabulate (~18 ms)
        text = "\n".join(fast)
    else:
        text = _tabulated(shown, body, wrap, short, pad, no_headers)
    text = text.replace(_NBSP, " ")
    if commands:
        text += "\n"
    for number, cmd in enumerate(commands, 1):
        text += f"\n[{number}]:\n  {cmd}"
    return text


def _tabulated(shown: Sequence[str], body: list[list[str]], wrap: list[int | None] | None, short: bool, pad: int,
               no_headers: bool) -> str:
    """``body`` wrapped to fit by tabulate: only such tables import it (importing it costs a command ~18 ms)."""
    import tabulate as tabulate_module
    from tabulate import tabulate

    if no_headers:
        return tabulate(body, tablefmt="plain", disable_numparse=True, maxcolwidths=wrap)
    tabulate_module.MIN_PADDING, default = pad, tabulate_module.MIN_PADDING  # no argument for it
    try:
        return tabulate(body, headers=_headers(shown, short), tablefmt="simple", disable_numparse=True, maxcolwidths=wrap)
    finally:
        tabulate_module.MIN_PADDING = default


def _columns(rows: Sequence[Any], row_type: type | None) -> list[str]:
    if row_type is not None and dataclasses.is_dataclass(row_type):
        return [f.name for f in dataclasses.fields(row_type)]
    if rows:
        return list(to_plain(rows[0]).keys())
    return []


def render(
    rows: Sequence[Any] | Report,
    fmt: str = "table",
    *,
    no_headers: bool = False,
    row_type: type | None = None,
    out: TextIO | None = None,
    empty_message: str | None = None,
    wide: bool = False,
    width: int | None = None,
    missing: Sequence[Any] = (),
    hidden: list[str] | None = None,
) -> None:
    """Write ``rows`` to ``out`` (stdout) in ``fmt``. ``row_type`` fixes the columns when there are no rows.
    ``wide`` makes tables show every column (structured formats always do); tables keep to ``width``
    (default: :func:`terminal_width` of ``out``). ``missing``: the parts that did not answer (the caller
    names them on stderr); an empty table then says "not determined", never that there is nothing."""
    out = out or sys.stdout
    if isinstance(rows, Report):
        _render_report(rows, fmt, no_headers=no_headers, out=out, wide=wide, width=width, missing=missing)
        return
    columns = _columns(rows, row_type)
    if fmt == "json":
        write_json(json_rows(rows), out)
        return
    if fmt in ("table", "csv", "tsv") and type(rows) is RecordColumns and set(columns) <= set(rows.names):
        plain: Sequence[dict] | RecordRows | RecordColumns = rows  # its cells read a column at a time, no row made
    elif fmt in ("table", "csv", "tsv") and rows and set(columns) <= record_fields(type(rows[0])) and all(type(r) is type(rows[0]) for r in rows):
        plain = RecordRows(rows)
    else:
        plain = [to_plain(r) for r in rows]
    if fmt == "jsonl":
        for item in plain:
            out.write(json.dumps(item, separators=(",", ":")) + "\n")
    elif fmt in ("csv", "tsv"):
        writer = csv.writer(out, delimiter="," if fmt == "csv" else "\t", lineterminator="\n")
        if not no_headers:
            writer.writerow(columns)
        for piece in text_rows(columns, plain) if columns else ([()] * len(plain),):
            writer.writerows(piece)
    elif fmt == "table":
        if not plain and missing:
            out.write(not_determined(missing) + "\n")
            return
        if not plain and empty_message:
            out.write(empty_message + "\n")
            return
        keep = frozenset(getattr(row_type or (type(rows[0]) if rows else None), "TABLE_KEEPS", ()))
        written = False
        for piece in table_pieces(columns, plain, wide=wide, width=width or terminal_width(out), no_headers=no_headers,
                                  keep=keep, hidden=hidden):
            written = written or bool(piece)
            out.write(piece)
        if written:
            out.write("\n")
    else:
        raise ValueError(f"unknown output format {fmt!r}")


def not_determined(missing: Sequence[Any]) -> str:
    """What an empty table of an incomplete answer says instead of "(none)"."""
    return f"not determined ({len(missing)} part{'s' if len(missing) != 1 else ''} missing, see below)"


def _render_report(report: Report, fmt: str, *, no_headers: bool, out: TextIO, wide: bool = False,
                   width: int | None = None, missing: Sequence[Any] = ()) -> None:
    if fmt == "json":
        doc = dict(to_plain(report.facts))
        for name, rows in report.sections.items():
            doc[name] = json_rows(rows)
        write_json(doc, out)
        return
    if fmt == "table":
        key_width = max((len(k) for k in report.facts), default=0)
        for key, value in report.facts.items():
            out.write(f"{key.ljust(key_width)}  {table_cell(key, value)}\n")
        width = width or terminal_width(out)
        hidden: list[str] = []
        for name, rows in report.sections.items():
            out.write(f"\n{name.upper()}\n")
            render(rows, "table", no_headers=no_headers, out=out, empty_message="(none)", wide=wide, width=width, missing=missing,
                   hidden=hidden)
        if hidden:
            out.write("\n" + hidden_note(hidden, width) + "\n")
        return
    # Line formats: one record per row, tagged with its section, facts first as their own section.
    # csv and tsv are one table (one header: every section's columns, `section` first), so that any
    # csv reader takes the whole stream; a column a section does not have is empty in its rows.
    records: list[dict] = []
    if report.facts:
        records.append({"section": "facts", **to_plain(report.facts)})
    for name, rows in report.sections.items():
        records.extend({"section": name, **to_plain(r)} for r in rows)
    if fmt == "jsonl":
        for rec in records:
            out.write(json.dumps(rec, separators=(",", ":")) + "\n")
        return
    columns = list(dict.fromkeys(["section", *(k for rec in records for k in rec)]))
    writer = csv.writer(out, delimiter="," if fmt == "csv" else "\t", lineterminator="\n")
    if not no_headers:
        writer.writerow(columns)
    for rec in records:
        writer.writerow([cell_text(rec.get(c)) for c in columns])


def render_to_string(rows: Sequence[Any] | Report, fmt: str = "table", **kw: Any) -> str:
    buf = io.StringIO()
    render(rows, fmt, out=buf, **kw)
    return buf.getvalue()
