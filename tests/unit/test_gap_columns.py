"""diagnose's gap and explanation columns (gaps.gap_column, gaps.explain_column) over 100,000 rows
held as columns: each must be the row's gap and gaps.explain of its row, row by row."""

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


def _gap_of(row: GroupLag) -> gaps.Gap:
    """The rule, row by row."""
    if row.verdict is GroupVerdict.blocked:
        return gaps.Gap.blocked
    if row.verdict is GroupVerdict.waiting:
        return gaps.Gap.waiting
    if row.verdict is GroupVerdict.lagging:
        return gaps.Gap.lag
    if row.verdict is GroupVerdict.unknown:
        return gaps.Gap.unknown
    return gaps.Gap.phantom if row.lag_to_hw_messages > 0 else gaps.Gap.none


def test_the_columns_are_each_rows_gap_and_explanation():
    rows = _rows()
    held = RecordColumns(GroupLag, {name: [getattr(r, name) for r in rows] for name in GROUP_LAG_FIELDS})
    holders = [None if i % 2 else f"producer {i}" for i in range(len(rows))]
    gap_column = gaps.gap_column(held.column("verdict"), held.column("lag_to_hw_messages"))
    assert gap_column == [_gap_of(r) for r in rows]
    assert set(gap_column) == set(gaps.Gap)  # every rule taken
    assert gaps.explain_column(held, gap_column, holders) == [gaps.explain(r, g, h) for r, g, h in zip(rows, gap_column, holders)]
    assert gaps.explain_column(held, gap_column, holders).count(gaps.CAUGHT_UP) > 0


def _partition(verdict: GroupVerdict, lag: int, gap: gaps.Gap, producer_id: int | None):
    from kafkatxn.diagnose_rows import PartitionDiagnosis

    return PartitionDiagnosis("g", "orders", 0, 1, 10, 12, lag, lag, 2, verdict, gap, "", producer_id, None)


def test_findings_a_lagging_partition_by_its_lag_and_a_blocked_one_whose_transaction_was_not_found():
    """diagnose._findings' two questions over every row, asked in C: whether any lagging partition lags
    by the threshold (the largest lag does), and whether a blocked partition's transaction was not found."""
    from kafkatxn import diagnose

    lagging, caught_up = GroupVerdict.lagging, GroupVerdict.caught_up
    rows = [_partition(caught_up, 9, gaps.Gap.none, None), _partition(lagging, 3, gaps.Gap.lag, None),
            _partition(lagging, 5, gaps.Gap.lag, None)]
    for threshold, code in ((5, 1), (6, 0), (3, 1), (10, 0)):  # the caught-up row's 9 is no lagging lag
        assert diagnose._findings(rows, [], None, threshold) == (code, False)
    blocked = _partition(GroupVerdict.blocked, 0, gaps.Gap.blocked, 7)
    assert diagnose._findings([*rows, blocked], [], None, 100) == (1, False)
    assert diagnose._findings([*rows, blocked, _partition(GroupVerdict.blocked, 0, gaps.Gap.blocked, None)], [], None, 100) == (1, True)
