"""Large outputs are written a piece at a time (``-o json`` of records without a dict per row, tables
measured a column at a time and written a few thousand rows at a time): the text must be exactly
what the whole-output paths write, json.dumps(indent=2) of the plain rows and the table of every
cell made at once, whatever the values and wherever the pieces end."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any, NamedTuple

from hypothesis import given, settings, strategies as st

from kafkatxn import cells, output, plain
from kafkatxn.output import render_to_string
from kafkatxn.plain import to_plain
from kafkatxn.verdicts_groups import GroupVerdict


class Odd(enum.Enum):
    A = 1  # json cannot write the member itself: converted
    B = "b b"


@dataclass(frozen=True)
class Record:
    group: str
    partition: int
    committed_offset: int | None
    readable: bool | None
    verdict: GroupVerdict | None
    odd: Odd | None
    txn_age_ms: int | None  # a duration in tables
    start_time_ms: int | None  # a local time in tables (always another day here: no midnight flake)
    ratio: float | None
    producer_ids: Any  # tuples and lists: not scalars
    reason: str  # free text: wraps, and a command in it is lifted out of the table
    mixed: Any  # no one kind: 1 and True, 0.0 and -0.0 written differently


class Tuple(NamedTuple):
    topic: str
    partition: int
    leader: int | None
    _object_in_json = True


_TEXT = st.text(alphabet=st.sampled_from("ab -_%s:\"\\\n\t\x7f\u00e9\u4e2dNoneTrue"), max_size=10)
_BIG = st.integers(-2**70, 2**70)
_RECORD = st.builds(
    Record, _TEXT, st.integers(-5, 10**12), st.none() | _BIG, st.none() | st.booleans(), st.none() | st.sampled_from(GroupVerdict),
    st.none() | st.sampled_from(Odd), st.none() | st.integers(-100_000, 10**9), st.none() | st.sampled_from([0, -3, 1_600_000_000_000]),
    st.none() | st.floats(allow_nan=True, allow_infinity=True), st.tuples(st.integers(0, 9)) | st.lists(st.integers(0, 9), max_size=2),
    st.sampled_from(["", " padded ", "coordinator does not track this partition, a rather long reason to wrap",
                     "hanging; to end it now: kafkatxn abort --topic t --partition 0", "see `kafkatxn hanging`"]),
    st.sampled_from([1, True, 0.0, -0.0, "x", None, 1.5]))


def _plain_only(record: Record) -> Record:
    """The same record with scalar values only (the -o json row path without a fallback)."""
    return Record(record.group, record.partition, record.committed_offset, record.readable, record.verdict, None,
                  record.txn_age_ms, record.start_time_ms, None, None, record.reason, None)


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(_RECORD, max_size=12), scalars_only=st.booleans(), per_piece=st.sampled_from([1, 2, 5, 2_000]))
def test_json_of_records_is_json_dumps_of_their_plain_rows(rows, scalars_only, per_piece):
    rows = [_plain_only(r) for r in rows] if scalars_only else rows
    default = plain._ROWS_PER_PIECE
    plain._ROWS_PER_PIECE = per_piece
    try:
        assert render_to_string(rows, "json") == json.dumps([to_plain(r) for r in rows], indent=2) + "\n"
        tuples = [Tuple(r.group, r.partition, r.committed_offset) for r in rows]
        assert render_to_string(tuples, "json") == json.dumps([to_plain(t) for t in tuples], indent=2) + "\n"
        report = output.Report({"cluster_id": "c"}, {"rows": rows, "tuples": tuples})
        assert render_to_string(report, "json") == json.dumps(
            {"cluster_id": "c", "rows": [to_plain(r) for r in rows], "tuples": [to_plain(t) for t in tuples]}, indent=2) + "\n"
    finally:
        plain._ROWS_PER_PIECE = default


def _whole_table(rows: list, **kw: Any) -> str:
    """The table as it was made before it was streamed: every cell made at once, then laid out."""
    columns = [f.name for f in Record.__dataclass_fields__.values()]
    wide, width = kw.get("wide", False), kw.get("width", output.TABLE_WIDTH)
    kept = output.RecordRows(rows)
    shown = output.table_columns(columns, kept, wide, width, frozenset())
    text = output._table_of_cells(shown, [cells.column_cells(c, kept) for c in shown], len(rows), wide=wide, width=width,
                                  no_headers=kw.get("no_headers", False))
    left_out = [output.table_header(c) for c in columns if c not in shown and not output._raw_twin(c, columns)]
    if left_out and rows and not kw.get("no_headers", False):
        text += "\n\n" + output.hidden_note(left_out, width)
    return text + "\n" if text else ""


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(_RECORD, max_size=12), simple=st.booleans(), per_piece=st.sampled_from([1, 2, 5, 2_000]),
       layout=st.sampled_from([{"width": 120}, {"width": 60}, {"width": 400}, {"wide": True}, {"no_headers": True}]))
def test_a_streamed_table_is_the_table_of_every_cell_at_once(rows, simple, per_piece, layout):
    if simple:  # tables of printable cells that fit: the streamed path
        rows = [Record(r.group.replace("\n", "").replace("\t", "").replace("\x7f", "").encode("ascii", "ignore").decode().strip() or "g",
                       *[getattr(r, f) for f in list(Record.__dataclass_fields__)[1:10]], "a reason", r.mixed) for r in rows]
    default = cells.ROWS_PER_PIECE
    cells.ROWS_PER_PIECE = per_piece
    try:
        assert render_to_string(rows, "table", row_type=Record, **layout) == _whole_table(rows, **layout)
    finally:
        cells.ROWS_PER_PIECE = default


def test_json_writes_equal_values_of_different_kinds_each_as_its_own():
    """A column of few distinct values is encoded once per value: 1 and True, 0.0 and -0.0 are equal
    (one dict key) but json writes them differently."""
    for pair in ([1, True], [0, False], [0.0, -0.0], [1, 1.0], [GroupVerdict.blocked, "blocked"]):
        rows = [Tuple("t", i, pair[i % 2]) for i in range(40)]
        assert render_to_string(rows, "json") == json.dumps([to_plain(r) for r in rows], indent=2) + "\n"


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(_RECORD, max_size=12), fmt=st.sampled_from(["csv", "tsv"]), per_piece=st.sampled_from([1, 5, 2_000]))
def test_delimited_rows_made_a_column_at_a_time_are_the_rows_cell_by_cell(rows, fmt, per_piece):
    import csv
    import io

    expected = io.StringIO()
    writer = csv.writer(expected, delimiter="," if fmt == "csv" else "\t", lineterminator="\n")
    columns = list(Record.__dataclass_fields__)
    writer.writerow(columns)
    for row in map(to_plain, rows):
        writer.writerow([cells.cell_text(row.get(c)) for c in columns])
    default = cells.ROWS_PER_PIECE
    cells.ROWS_PER_PIECE = per_piece
    try:
        assert render_to_string(rows, fmt, row_type=Record) == expected.getvalue()
    finally:
        cells.ROWS_PER_PIECE = default
