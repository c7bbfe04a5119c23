"""One renderer for every command: table, json, jsonl, csv, tsv.

Commands hand over dataclass rows (or a :class:`Report` of several row kinds). Keys are the
dataclass field names: snake_case, with units in the name, so they are stable for scripts.
"""

from __future__ import annotations

import csv
import dataclasses
import enum
import io
import json
import sys
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence, TextIO


FORMATS = ("table", "json", "jsonl", "csv", "tsv")

# Tables are for people at a terminal: without --wide they keep to this width, showing the columns
# an engineer acts on; ages and timestamps read as "3m12s" and local time. Structured formats keep
# every field under its key, in raw units.
TABLE_WIDTH = 120
# Left out first when a table does not fit (the raw material behind the columns that matter).
SECONDARY_COLUMNS = (
    "last_sequence", "coordinator_epoch", "last_timestamp_ms", "start_time_ms", "readable_before_lso",
    "last_write_age_ms", "leader_id", "lso_before", "high_watermark_before", "producer_epoch_before",
    "producer_epoch_after", "producer_id_after", "state_after", "holds_lso", "coordinator_id", "open_transactions",
    "producer_epoch", "high_watermark_after", "lso_after", "error",
)
# Never left out: what names the thing and what the engineer decides on.
ESSENTIAL_COLUMNS = frozenset({
    "topic", "partition", "group", "transactional_id", "producer_id", "verdict", "state", "status", "outcome",
    "scope", "name", "value", "api", "broker_id", "host", "kind", "message", "label", "lso_moved",
    "reason",  # why an action was refused or a verdict given: the next step depends on it
})
_DURATION_SUFFIXES = ("age_ms", "duration_ms", "timeout_ms")
_TIME_SUFFIXES = ("timestamp_ms", "time_ms", "_at_ms", "until_ms")


@dataclass
class Report:
    """Several kinds of rows plus a few scalar facts (e.g. ``cluster``: id, brokers, settings)."""

    facts: dict[str, Any] = field(default_factory=dict)
    sections: dict[str, Sequence[Any]] = field(default_factory=dict)


def to_plain(value: Any) -> Any:
    """JSON-ready value: dataclasses to dicts, enums to their values, sets to sorted lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted(to_plain(v) for v in value)
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    return value


def _cell(value: Any) -> str:
    value = to_plain(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(_cell(v) for v in value)
    if isinstance(value, dict):
        return ",".join(f"{k}={_cell(v)}" for k, v in value.items())
    return str(value)


def _is_duration(column: str) -> bool:
    return column.endswith(_DURATION_SUFFIXES)


def _is_time(column: str) -> bool:
    return column.endswith(_TIME_SUFFIXES)


def format_local_time(ms: int, now_ms: int | None = None) -> str:
    """Local wall-clock time: ``14:03:27`` today, ``2026-11-20 14:03:27`` on another day."""
    import time

    now = time.localtime((now_ms if now_ms is not None else time.time() * 1000) / 1000)
    at = time.localtime(ms / 1000)
    same_day = (at.tm_year, at.tm_yday) == (now.tm_year, now.tm_yday)
    return time.strftime("%H:%M:%S" if same_day else "%Y-%m-%d %H:%M:%S", at)


def _table_cell(column: str, value: Any) -> str:
    """A cell as a person reads it: durations and timestamps in human form, the rest as ``_cell``."""
    from kafkatxn.durations import format_duration_ms

    if isinstance(value, int) and not isinstance(value, bool):
        if _is_duration(column):
            return format_duration_ms(value) if value >= 0 else str(value)
        if _is_time(column):
            return format_local_time(value) if value > 0 else ""
    return _cell(value)


_HEADER_WORDS = (("last_stable_offset", "lso"), ("high_watermark", "hw"), ("transaction_", "txn_"), ("committed_offset", "committed"))


def table_header(column: str) -> str:
    """Short headers for tables (as kafka-transactions.sh and rpk print them): converted columns lose
    their ``_ms`` (the cell is no longer in milliseconds), ``_messages`` goes, and the long offset
    names become ``lso`` and ``hw``. Keys in structured formats do not change."""
    if _is_duration(column) or _is_time(column):
        column = column[: -len("_ms")]
    if column.endswith("_messages"):
        column = column[: -len("_messages")]
    for long, short in _HEADER_WORDS:
        column = column.replace(long, short)
    return column


def table_columns(columns: Sequence[str], plain: Sequence[dict], wide: bool = False, width: int = TABLE_WIDTH) -> list[str]:
    """The columns a table shows: every one with ``wide``; otherwise raw twins of human columns
    (``age_ms`` next to ``age``) are left out, then secondary columns and then the rightmost
    non-essential ones, until the table fits ``width``."""
    shown = list(columns)
    if wide:
        return shown
    shown = [c for c in shown if not (c.endswith("_ms") and c[:-3] in columns)]

    def table_width(cols: list[str]) -> int:
        # tabulate pads headers by 2 (its MIN_PADDING) and separates columns by 2 spaces.
        widths = [max([len(table_header(c)) + 2] + [len(_table_cell(c, row.get(c))) for row in plain]) for c in cols]
        return sum(widths) + 2 * max(len(cols) - 1, 0)

    droppable = [c for c in SECONDARY_COLUMNS if c in shown]
    droppable += [c for c in reversed(shown) if c not in ESSENTIAL_COLUMNS and c not in droppable]
    for column in droppable:
        if table_width(shown) <= width:
            break
        shown.remove(column)
    return shown


# Free text that is kept in narrow tables (ESSENTIAL_COLUMNS) but may wrap onto more lines.
_WRAPPABLE_COLUMNS = ("reason", "explanation", "message", "risk")
_MIN_WRAP = 16


def _wrap_widths(shown: Sequence[str], body: Sequence[Sequence[str]], width: int = TABLE_WIDTH) -> list[int | None] | None:
    """Per column, the width to wrap free text at so the table fits ``width``; None where it already fits."""
    widths = [max([len(table_header(c)) + 2] + [len(row[i]) for row in body]) for i, c in enumerate(shown)]
    excess = sum(widths) + 2 * max(len(shown) - 1, 0) - width
    if excess <= 0:
        return None
    wrap: list[int | None] = [None] * len(shown)
    for i in sorted((i for i, c in enumerate(shown) if c in _WRAPPABLE_COLUMNS), key=lambda i: -widths[i]):
        cut = min(excess, widths[i] - _MIN_WRAP)
        if cut > 0:
            wrap[i] = widths[i] - cut
            excess -= cut
        if excess <= 0:
            break
    return wrap if any(w is not None for w in wrap) else None


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
) -> None:
    """Write ``rows`` to ``out`` (stdout) in ``fmt``. ``row_type`` fixes the columns when there are no rows.
    ``wide`` makes tables show every column (structured formats always do)."""
    out = out or sys.stdout
    if isinstance(rows, Report):
        _render_report(rows, fmt, no_headers=no_headers, out=out, wide=wide)
        return
    columns = _columns(rows, row_type)
    plain = [to_plain(r) for r in rows]
    if fmt == "json":
        json.dump(plain, out, indent=2, sort_keys=False)
        out.write("\n")
    elif fmt == "jsonl":
        for item in plain:
            out.write(json.dumps(item, separators=(",", ":")) + "\n")
    elif fmt in ("csv", "tsv"):
        writer = csv.writer(out, delimiter="," if fmt == "csv" else "\t", lineterminator="\n")
        if not no_headers:
            writer.writerow(columns)
        for item in plain:
            writer.writerow([_cell(item.get(c)) for c in columns])
    elif fmt == "table":
        if not plain and empty_message:
            out.write(empty_message + "\n")
            return
        from tabulate import tabulate  # only tables need it; importing it costs every command start

        shown = table_columns(columns, plain, wide)
        body = [[_table_cell(c, item.get(c)) for c in shown] for item in plain]
        wrap = None if wide else _wrap_widths(shown, body)
        if no_headers:
            text = tabulate(body, tablefmt="plain", disable_numparse=True, maxcolwidths=wrap)
        else:
            text = tabulate(body, headers=[table_header(c) for c in shown], tablefmt="simple", disable_numparse=True,
                            maxcolwidths=wrap)
        if text:
            out.write(text + "\n")
    else:
        raise ValueError(f"unknown output format {fmt!r}")


def _render_report(report: Report, fmt: str, *, no_headers: bool, out: TextIO, wide: bool = False) -> None:
    if fmt == "json":
        doc = dict(to_plain(report.facts))
        for name, rows in report.sections.items():
            doc[name] = to_plain(list(rows))
        json.dump(doc, out, indent=2)
        out.write("\n")
        return
    if fmt == "table":
        width = max((len(k) for k in report.facts), default=0)
        for key, value in report.facts.items():
            out.write(f"{key.ljust(width)}  {_table_cell(key, value)}\n")
        for name, rows in report.sections.items():
            out.write(f"\n{name.upper()}\n")
            render(rows, "table", no_headers=no_headers, out=out, empty_message="(none)", wide=wide)
        return
    # Line formats: one record per row, tagged with its section, facts first as their own section.
    records: list[dict] = []
    if report.facts:
        records.append({"section": "facts", **to_plain(report.facts)})
    for name, rows in report.sections.items():
        records.extend({"section": name, **to_plain(r)} for r in rows)
    if fmt == "jsonl":
        for rec in records:
            out.write(json.dumps(rec, separators=(",", ":")) + "\n")
        return
    delimiter = "," if fmt == "csv" else "\t"
    first = True
    for name, group in _group_by_section(records):
        columns = list(dict.fromkeys(k for rec in group for k in rec))
        if not first:
            out.write("\n")
        first = False
        writer = csv.writer(out, delimiter=delimiter, lineterminator="\n")
        if not no_headers:
            writer.writerow(columns)
        for rec in group:
            writer.writerow([_cell(rec.get(c)) for c in columns])


def _group_by_section(records: Iterable[dict]) -> list[tuple[str, list[dict]]]:
    groups: dict[str, list[dict]] = {}
    for rec in records:
        groups.setdefault(rec["section"], []).append(rec)
    return list(groups.items())


def render_to_string(rows: Sequence[Any] | Report, fmt: str = "table", **kw: Any) -> str:
    buf = io.StringIO()
    render(rows, fmt, out=buf, **kw)
    return buf.getvalue()
