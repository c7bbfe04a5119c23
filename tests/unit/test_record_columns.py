"""Rows held as columns (plain.RecordColumns): ``lso --groups`` and ``diagnose`` make their 100,000 rows
so and print them a column at a time. Read as a sequence they must be the rows ``__init__`` makes, and
every output format must print them exactly as it prints the list of those rows."""

from __future__ import annotations

import pytest

from kafkatxn import facts_lso, group_positions, lso, output, plain
from kafkatxn.group_positions import GROUP_LAG_FIELDS, GroupLag
from kafkatxn.model import ProducerState, TopicPartition, TransactionDescription
from kafkatxn.plain import RecordColumns
from kafkatxn.verdicts import OpenTransaction
from kafkatxn.verdicts_groups import BlockVerdict, GroupVerdict, Offsets

FORMATS = ("json", "jsonl", "csv", "tsv", "table")
TP0, TP1, TP2 = TopicPartition("orders", 0), TopicPartition("orders", 1), TopicPartition("payments", 0)
NOW = 1_700_000_000_000


def txn(pid: int, start: int, tid: str, started: int) -> OpenTransaction:
    """An open transaction on TP0, which its coordinator describes as open since ``started``."""
    described = TransactionDescription(tid, 1, "Ongoing", pid, 0, 60_000, started, frozenset([TP0]))
    return OpenTransaction(TP0, ProducerState(pid, 0, 0, NOW - 1_000, 0, start), tid, described)


def group_snap(offsets: dict, committed: dict, first_readable: dict, open_txns: dict) -> facts_lso.GroupSnapshot:
    lso_snapshot = facts_lso.LsoSnapshot(NOW, {tp: Offsets(hw, l) for tp, (l, hw) in offsets.items()}, open_txns)
    return facts_lso.GroupSnapshot(lso_snapshot, committed, first_readable)


def _rows() -> list[GroupLag]:
    out = []
    for i in range(7):
        blocked = i % 3 == 0
        out.append(GroupLag(
            f"group-{i // 2}", "orders" if i % 2 else "pay\u00e9ments", i, None if i == 5 else 10 + i, 20, 25, 3, 5,
            GroupVerdict.blocked if blocked else GroupVerdict.caught_up, None if i % 2 else False,
            7 if blocked else None, "tx\"1" if blocked else None, 930_000 if blocked else None, "coordinator" if blocked else None,
            None if i == 3 else blocked or None, False if blocked else None, False, 12_000 if blocked else None,
            "__consumer_offsets-3" if i == 6 else None, BlockVerdict.hanging if blocked else None))
    return out


def _held(rows: list[GroupLag]) -> RecordColumns:
    return RecordColumns(GroupLag, {name: [getattr(r, name) for r in rows] for name in GROUP_LAG_FIELDS})


def test_read_as_a_sequence_they_are_the_rows_init_makes():
    rows = _rows()
    held = _held(rows)
    assert len(held) == len(rows) and held == rows and list(held) == rows
    assert held[2] == rows[2] and held[-1] == rows[-1] and hash(held[2]) == hash(rows[2])
    assert held[1:4] == rows[1:4] and type(held[1:4]) is RecordColumns
    assert [tuple(v) for v in held.fields([4, 1])] == [tuple(getattr(rows[i], n) for n in GROUP_LAG_FIELDS) for i in (4, 1)]
    with pytest.raises(IndexError):
        held[len(rows)]
    with pytest.raises(TypeError):  # a field left out would read as the class's default
        RecordColumns(GroupLag, {name: [] for name in GROUP_LAG_FIELDS[:-1]})
    with pytest.raises(ValueError):
        RecordColumns(GroupLag, {name: [None] * (2 if name == "group" else 1) for name in GROUP_LAG_FIELDS})


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_prints_them_as_it_prints_the_rows(fmt):
    rows = _rows()
    for wide in (False, True):
        assert output.render_to_string(_held(rows), fmt, row_type=GroupLag, wide=wide) == \
            output.render_to_string(rows, fmt, row_type=GroupLag, wide=wide)
    assert output.render_to_string(_held([]), fmt, row_type=GroupLag, empty_message="none") == \
        output.render_to_string([], fmt, row_type=GroupLag, empty_message="none")


def test_json_of_many_rows_is_json_dumps_and_makes_no_row(monkeypatch):
    """More rows than one piece of plain.py's writer, json and tables made from the columns alone."""
    import json

    rows = _rows() * 700
    expected_json = json.dumps([plain.to_plain(r) for r in rows], indent=2) + "\n"
    expected_table = output.render_to_string(rows, "table", row_type=GroupLag)
    held = _held(rows)
    monkeypatch.setattr(plain, "made_rows", lambda *a: pytest.fail("a row was made"))
    assert output.render_to_string(held, "json", row_type=GroupLag) == expected_json
    assert output.render_to_string(held, "table", row_type=GroupLag) == expected_table


def test_group_lags_are_held_as_columns_and_lso_decides_on_them_without_making_rows(monkeypatch):
    s = group_snap(
        {TP0: (100, 130), TP1: (60, 60), TP2: (40, 40)},
        {"billing": {TP0: 98, TP1: 59, TP2: 10}, "audit": {TP0: 100}},
        first_readable={(TP0, 98): None, (TP1, 59): None, (TP2, 10): 10},
        open_txns={TP0: [txn(21, 100, tid="etl", started=NOW - 9_000)]},
    )
    rows = group_positions.group_lags(s)
    assert type(rows) is RecordColumns
    listed = list(rows)
    monkeypatch.setattr(plain, "made_rows", lambda *a: pytest.fail("a row was made"))
    fresh = group_positions.group_lags(s)
    assert lso.groups_exit_code(fresh) == lso.groups_exit_code(listed)
    assert lso.offsets_hints(fresh) == lso.offsets_hints(listed)
    assert lso.undetermined_pins(s.lso, fresh) == lso.undetermined_pins(s.lso, listed)
    assert lso.restore_hints(s.lso, fresh) == lso.restore_hints(s.lso, listed)
    assert list(lso.sort_rows(fresh, None, 2).column("group")) == [r.group for r in listed[:2]]


def test_diagnose_decides_and_prints_its_rows_from_columns_as_from_the_rows(monkeypatch):
    """diagnose's partition rows share the group-lag columns; its summaries and findings read columns,
    and say what they say of the list of those rows."""
    from kafkatxn import diagnose, facts_lso
    from tests.support.blocked_group import blocked_model

    model, cluster = blocked_model()
    model.groups["fresh"] = {next(iter(model.groups["reports"])): 2}
    snapshot = facts_lso.take_held_group_snapshot(cluster)
    monkeypatch.setattr(plain, "made_rows", lambda *a: pytest.fail("a row was made"))
    d = diagnose.diagnose(snapshot)
    text = output.render_to_string(d.report(), "json")
    monkeypatch.undo()
    partitions = d.partitions
    assert type(partitions) is RecordColumns and len(partitions) == 3
    listed = list(partitions)
    holders = {t.producer_id: t.transactional_id for t in d.transactions}
    assert diagnose.group_summaries(partitions, holders) == diagnose.group_summaries(listed, holders) == d.groups
    assert diagnose._findings(partitions, d.transactions, None) == diagnose._findings(listed, d.transactions, None)
    assert text == output.render_to_string(diagnose.Diagnosis(
        d.taken_at_ms, d.groups, listed, d.transactions, d.max_transaction_timeout_ms, d.missing, d.exit_code, d.summary,
    ).report(), "json")
