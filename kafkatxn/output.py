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
) -> None:
    """Write ``rows`` to ``out`` (stdout) in ``fmt``. ``row_type`` fixes the columns when there are no rows."""
    out = out or sys.stdout
    if isinstance(rows, Report):
        _render_report(rows, fmt, no_headers=no_headers, out=out)
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

        body = [[_cell(item.get(c)) for c in columns] for item in plain]
        if no_headers:
            text = tabulate(body, tablefmt="plain", disable_numparse=True)
        else:
            text = tabulate(body, headers=columns, tablefmt="simple", disable_numparse=True)
        if text:
            out.write(text + "\n")
    else:
        raise ValueError(f"unknown output format {fmt!r}")


def _render_report(report: Report, fmt: str, *, no_headers: bool, out: TextIO) -> None:
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
            out.write(f"{key.ljust(width)}  {_cell(value)}\n")
        for name, rows in report.sections.items():
            out.write(f"\n{name.upper()}\n")
            render(rows, "table", no_headers=no_headers, out=out, empty_message="(none)")
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
