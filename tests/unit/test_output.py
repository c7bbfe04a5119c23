"""The one renderer: every format, stable keys, parseable back."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass

import pytest

from kafkatxn.output import Report, render_to_string


@dataclass(frozen=True)
class Row:
    topic: str
    partition: int
    lag_messages: int
    producer_ids: tuple[int, ...]
    transactional_id: str | None


ROWS = [Row("orders", 0, 42, (7, 9), "tx-a"), Row("orders, EU", 1, 0, (), None)]


def test_json_round_trip_keeps_types_and_keys():
    data = json.loads(render_to_string(ROWS, "json"))
    assert data == [
        {"topic": "orders", "partition": 0, "lag_messages": 42, "producer_ids": [7, 9], "transactional_id": "tx-a"},
        {"topic": "orders, EU", "partition": 1, "lag_messages": 0, "producer_ids": [], "transactional_id": None},
    ]


def test_jsonl_is_one_object_per_line():
    lines = render_to_string(ROWS, "jsonl").splitlines()
    assert [json.loads(line)["partition"] for line in lines] == [0, 1]


@pytest.mark.parametrize("fmt, delimiter", [("csv", ","), ("tsv", "\t")])
def test_delimited_formats_quote_and_parse_back(fmt, delimiter):
    text = render_to_string(ROWS, fmt)
    rows = list(csv.DictReader(io.StringIO(text), delimiter=delimiter))
    assert rows[1]["topic"] == "orders, EU"
    assert rows[0]["producer_ids"] == "7,9"
    assert rows[1]["transactional_id"] == ""
    assert list(rows[0]) == ["topic", "partition", "lag_messages", "producer_ids", "transactional_id"]


def test_no_headers_drops_the_header_row():
    assert render_to_string(ROWS, "csv", no_headers=True).splitlines()[0].startswith("orders,0,42")
    table = render_to_string(ROWS, "table", no_headers=True)
    assert "lag_messages" not in table and "orders" in table


def test_empty_rows_still_have_columns_for_scripts():
    assert render_to_string([], "csv", row_type=Row).strip() == "topic,partition,lag_messages,producer_ids,transactional_id"
    assert json.loads(render_to_string([], "json", row_type=Row)) == []
    assert render_to_string([], "table", row_type=Row, empty_message="no rows") == "no rows\n"


def test_table_does_not_reformat_numbers():
    text = render_to_string([Row("t", 1, 10_000_000_000_000_001, (), "007")], "table")
    assert "10000000000000001" in text and "007" in text


def test_report_renders_facts_and_sections_in_every_format():
    report = Report({"cluster_id": "abc", "broker_count": 1}, {"rows": ROWS})
    doc = json.loads(render_to_string(report, "json"))
    assert doc["cluster_id"] == "abc" and len(doc["rows"]) == 2
    records = [json.loads(x) for x in render_to_string(report, "jsonl").splitlines()]
    assert records[0] == {"section": "facts", "cluster_id": "abc", "broker_count": 1}
    assert {r["section"] for r in records[1:]} == {"rows"}
    table = render_to_string(report, "table")
    assert "cluster_id" in table and "ROWS" in table
    # csv is one table per stream: one header (section first, every section's columns), one row per record.
    text = render_to_string(report, "csv")
    assert "\n\n" not in text
    parsed = list(csv.DictReader(io.StringIO(text)))
    assert text.startswith("section,cluster_id,broker_count,topic")
    assert [r["section"] for r in parsed] == ["facts", "rows", "rows"]
    assert parsed[0]["cluster_id"] == "abc" and parsed[0]["topic"] == "" and parsed[2]["topic"] == "orders, EU"


def test_records_made_as_named_tuples_are_objects_in_json():
    """PartitionInfo and ProducerState are named tuples for speed; in JSON (the audit log's states,
    ``-o json``) they stay objects with their field names, as when they were dataclasses."""
    from kafkatxn.model import PartitionInfo, ProducerState
    from kafkatxn.plain import to_plain

    state = ProducerState(7, 3, 12, 1_700_000_000_000, 5, 100)
    assert to_plain([state]) == [{"producer_id": 7, "producer_epoch": 3, "last_sequence": 12,
                                  "last_timestamp_ms": 1_700_000_000_000, "coordinator_epoch": 5, "current_txn_start_offset": 100}]
    assert to_plain(PartitionInfo("t", 0, 1, (1, 2), (1,))) == {
        "topic": "t", "partition": 0, "leader": 1, "replicas": [1, 2], "isr": [1], "internal": False}


@pytest.mark.parametrize("rows_per_piece", [2_000, 2])
def test_json_text_is_exactly_what_json_writes_with_indent_2(monkeypatch, rows_per_piece):
    """``-o json`` is written by the C encoder (json.dump with indent runs Python's, token by token),
    rows a piece at a time: the text must be json.dumps(indent=2)'s to the byte, whatever the values,
    including strings that look like the row separators it rewrites, and across pieces."""
    import random

    from kafkatxn import plain
    from kafkatxn.plain import json_text, write_json

    monkeypatch.setattr(plain, "_ROWS_PER_PIECE", rows_per_piece)

    rng = random.Random(25)
    scalars = [None, True, False, 0, -1, 2**70, 1.5, float("nan"), float("inf"), -0.0, "", "x",
               'a"b\\c\n\u00e9\U0001F600', "},\n    {", "}, {", "\n  },\n  {"]
    keys = ["k", "\u00e9", "a b", "", "1", 'x"y', "},\n    {"]

    def value(depth=0):
        r = rng.random()
        if depth > 3 or r < 0.4:
            return rng.choice(scalars)
        if r < 0.6:
            return [value(depth + 1) for _ in range(rng.randint(0, 4))]
        if r < 0.8:  # rows: what every command prints
            return [{k: rng.choice(scalars) for k in rng.sample(keys, rng.randint(1, 4))} for _ in range(rng.randint(1, 4))]
        return {(rng.choice(keys) if rng.random() < 0.9 else rng.choice([1, None, True, 2.5])): value(depth + 1)
                for _ in range(rng.randint(0, 4))}

    for _ in range(5000):
        v = value()
        assert json_text(v) == json.dumps(v, indent=2)
    assert json_text([]) == "[]" and json_text({}) == "{}" and json_text([{}]) == json.dumps([{}], indent=2)
    written = io.StringIO()
    write_json(v := {"facts": {"a": 1}, "rows": [{"group": "g", "n": i} for i in range(5)]}, written)
    assert written.getvalue() == json.dumps(v, indent=2) + "\n"


# -- tables written in one pass ------------------------------------------------------------------

from hypothesis import given, settings, strategies as st  # noqa: E402

_TEXT = st.text(alphabet=st.sampled_from("ab -_.:09TrueFals{}<> \t\n\u00e9\u4e2d\x1b"), max_size=8)


@settings(max_examples=400, deadline=None)
@given(columns=st.integers(0, 5).flatmap(lambda n: st.tuples(
           st.lists(_TEXT, min_size=n, max_size=n),
           st.lists(st.lists(_TEXT, min_size=n, max_size=n), max_size=6))),
       pad=st.sampled_from([0, 1, 2]), with_headers=st.booleans())
def test_the_one_pass_table_is_tabulates_to_the_byte(columns, pad, with_headers):
    """What simple_table_lines writes is exactly tabulate's simple (or headerless plain) table; cells it
    cannot measure alone (tabs, newlines, escapes, wide characters) are left to tabulate."""
    import tabulate as tabulate_module
    from tabulate import tabulate

    from kafkatxn.output import simple_table_lines

    headers, body = columns
    lines = simple_table_lines(headers if with_headers else None, body, pad)
    printable = all(c.isascii() and c.isprintable() for c in "".join(headers if with_headers else []) + "".join(map("".join, body)))
    assert (lines is not None) == printable
    if lines is None:
        return
    tabulate_module.MIN_PADDING, default = pad, tabulate_module.MIN_PADDING
    try:
        expected = (tabulate(body, headers=headers, tablefmt="simple", disable_numparse=True) if with_headers
                    else tabulate(body, tablefmt="plain", disable_numparse=True))
    finally:
        tabulate_module.MIN_PADDING = default
    assert "\n".join(lines) == expected


def test_a_table_of_many_rows_measures_each_cell_once(monkeypatch):
    """Choosing the columns that fit measures a column once, not once per column it tries to drop."""
    from kafkatxn import output

    calls = []
    real = output.measure
    monkeypatch.setattr(output, "measure", lambda column, plain: calls.append(column) or real(column, plain))
    rows = [Row(f"topic-{i}", i, i * 1000, (i,), f"a-rather-long-transactional-id-{i}") for i in range(50)]
    text = render_to_string(rows, "table", width=40)
    assert text.startswith("topic") and calls and sorted(calls) == sorted(set(calls))


def test_json_keeps_a_str_enum_as_its_value_and_a_record_of_scalars_in_one_dict():
    """-o json of records whose verdicts are str enums: the text json.dumps writes of their values;
    an enum whose member is not its own value is still converted (to_plain)."""
    import enum

    from kafkatxn.plain import json_ready, json_text, to_plain
    from kafkatxn.verdicts_groups import GroupVerdict

    class Odd(enum.Enum):
        A = 1  # no str or int in it: json could not write the member itself

    @dataclass(frozen=True)
    class Verdicts:
        topic: str
        verdict: GroupVerdict
        odd: Odd

    rows = [Verdicts("orders", GroupVerdict.blocked, Odd.A), Verdicts("billing", GroupVerdict.caught_up, Odd.A)]
    assert json_text([json_ready(r) for r in rows]) == json.dumps([to_plain(r) for r in rows], indent=2)
    assert json.loads(render_to_string(rows, "json"))[0] == {"topic": "orders", "verdict": "blocked", "odd": 1}


@pytest.mark.parametrize("rows_per_piece", [2_000, 3])
def test_records_with_a_column_of_string_tuples_are_written_as_json_writes_them_without_a_row_by_row_pass(
        monkeypatch, rows_per_piece):
    """diagnose's group summaries hold ``pinned_by`` (a tuple of transactional ids, mostly empty):
    the column is written once per distinct tuple, to the byte what json.dumps(indent=2) writes of the
    rows' plain values, at any depth; a tuple holding anything but strings and integers still goes
    row by row."""
    from kafkatxn import plain

    monkeypatch.setattr(plain, "_ROWS_PER_PIECE", rows_per_piece)

    @dataclass(frozen=True)
    class Summary:
        group: str
        partitions: int
        pinned_by: tuple

    rows = [Summary(f"g{i}", i, ("app-1", 'x"y', "\u00e9") if i % 3 == 0 else (("producer 7",) if i % 3 == 1 else ()))
            for i in range(10)]
    rows.append(Summary("g-list", 1, ["a", 2]))
    slow = []
    real = plain._pieces
    monkeypatch.setattr(plain, "_pieces", lambda value, depth: slow.append(value) or real(value, depth))
    for value in (rows, {"groups": rows}, {"a": {"groups": rows}}):
        slow.clear()
        assert plain.json_text(value) == json.dumps(plain.to_plain(value), indent=2)
        assert not any(isinstance(v, dict) and "pinned_by" in v for v in slow), "written row by row"
    odd = [Summary("g", 1, (True,)), Summary("h", 2, (1.5,))]
    assert plain.json_text(odd) == json.dumps(plain.to_plain(odd), indent=2)
