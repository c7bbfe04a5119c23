"""diagnose's gap and explanation columns (gaps.gap_column, gaps.explain_column) over 100,000 rows
held as columns: each must be gaps.gap_of and gaps.explain of its row, row by row."""

from __future__ import annotations

import itertools

from kafkatxn import gaps
from kafkatxn.group_positions import GROUP_LAG_FIELDS, GroupLag
from kafkatxn.plain import RecordColumns
from kafkatxn.verdicts_groups import BlockVerdict, GroupVerdict


def _rows() -> list[GroupLag]:
    out = []
    cases = itertools.product(GroupVerdict, (None, 3, 12), (0, 4), (None, "__consumer_offsets-7"))
    for i, (verdict, committed, lag_to_hw, through) in enumerate(cases):
        held = verdict in (GroupVerdict.blocked, GroupVerdict.waiting)
        out.append(GroupLag(
            f"g{i % 5}", "orders", i, committed, 10, 10 + lag_to_hw, 10 - (committed or 0), lag_to_hw, verdict,
            None if i % 3 else bool(i % 2), 7 if held else None, "tx" if held else None, 1_000 if held else None,
            "coordinator" if held else None, False if held else None, False if held else None, False, None,
            through if held else None, BlockVerdict.in_flight if held else None))
    return out


def test_the_columns_are_each_rows_gap_and_explanation():
    rows = _rows()
    held = RecordColumns(GroupLag, {name: [getattr(r, name) for r in rows] for name in GROUP_LAG_FIELDS})
    holders = [None if i % 2 else f"producer {i}" for i in range(len(rows))]
    gap_column = gaps.gap_column(held.column("verdict"), held.column("lag_to_hw_messages"))
    assert gap_column == [gaps.gap_of(r) for r in rows]
    assert set(gap_column) == set(gaps.Gap)  # every rule taken
    assert gaps.explain_column(held, gap_column, holders) == [gaps.explain(r, g, h) for r, g, h in zip(rows, gap_column, holders)]
    assert gaps.explain_column(held, gap_column, holders).count(gaps.CAUGHT_UP) > 0
