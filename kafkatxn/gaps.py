"""What lies between a read_committed group's position and the high watermark, and the one line
that says it (``diagnose`` shows it per group and partition). Pure: over :class:`kafkatxn.group_positions.GroupLag`
rows, deciding nothing that :mod:`kafkatxn.verdicts` does not."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kafkatxn.group_positions import GroupLag
from kafkatxn.verdicts_groups import GroupVerdict

if TYPE_CHECKING:
    from kafkatxn.plain import RecordColumns


class Gap(str, enum.Enum):
    """What lies between a group's committed offset and the high watermark."""

    none = "none"  # nothing: at the high watermark
    phantom = "phantom"  # only transaction markers and aborted records: nothing to read
    lag = "lag"  # records to read (or a gap too large to probe, counted as lag)
    blocked = "blocked"  # an open transaction holds the LSO where the group stands (or its offsets)
    waiting = "waiting"  # as blocked, by a transaction in flight: it reads on at its commit
    unknown = "unknown"  # no committed offset: where it stands depends on its consumers' auto.offset.reset


# The gap a verdict says; a group caught up has none, or only markers and aborted records (phantom) up to the HW.
_GAP_OF_VERDICT = {
    GroupVerdict.blocked: Gap.blocked, GroupVerdict.waiting: Gap.waiting, GroupVerdict.lagging: Gap.lag,
    GroupVerdict.unknown: Gap.unknown,
}
CAUGHT_UP = "caught up"  # explain's line for a committed group with no gap: most rows


def gap_column(verdicts: Sequence[GroupVerdict], lags_to_hw: Sequence[int]) -> list[Gap]:
    """What lies between each row's position and the high watermark, from its verdict and
    lag_to_hw_messages columns (100,000 rows at 5,000 groups: one dictionary lookup each, no row
    read): the verdict's gap when it is held, lagging or unknown; caught up, phantom when offsets
    remain to the high watermark (markers, aborted records), else none."""
    of, phantom, none = _GAP_OF_VERDICT.get, Gap.phantom, Gap.none
    return [of(v) or (phantom if h > 0 else none) for v, h in zip(verdicts, lags_to_hw)]


def explain_column(rows: RecordColumns, gaps: Sequence[Gap], holders: Sequence[str | None]) -> list[str]:
    """:func:`explain` of each of ``rows`` (held as columns), with its gap and holder: a row with no gap
    and a committed offset is :data:`CAUGHT_UP` (explain's rule for it, taken without reading the row:
    three rows in four at 5,000 groups); the rest are read and explained one by one."""
    out = [CAUGHT_UP] * len(gaps)
    none = Gap.none
    rest = [i for i, (gap, committed) in enumerate(zip(gaps, rows.column("committed_offset"))) if gap is not none or committed is None]
    for i, row in zip(rest, rows.fields(rest)):
        out[i] = explain(row, gaps[i], holders[i])
    return out


def explain(row: GroupLag, gap: Gap, holder: str | None) -> str:
    """One line saying what the gap is."""
    if row.blocked_through is not None and gap in (Gap.blocked, Gap.waiting):
        who = holder or "an open transaction (not found: it may just have ended)"
        how = "waits until" if gap is Gap.waiting else "cannot start until"
        return (f"{gap.value}: its consumers' stable offset fetch answers UNSTABLE_OFFSET_COMMIT: {who} has a "
                f"transactional offset commit open on {row.blocked_through}; a read_committed consumer {how} it ends")
    if row.committed_offset is None:
        return _explain_uncommitted(row, gap, holder)
    c, l, h = row.committed_offset, row.last_stable_offset, row.high_watermark
    if gap is Gap.none:
        return CAUGHT_UP
    if gap is Gap.phantom:
        return f"caught up: the {h - c} offsets to the high watermark are transaction markers or aborted records (phantom lag)"
    if gap is Gap.blocked:
        who = holder or "an open transaction (not found: it may just have ended)"
        before = f" after {l - c} offsets of markers/aborted records" if c < l else ""
        return f"blocked{before} at LSO {l} by {who}; {h - l} offsets wait behind it"
    if gap is Gap.waiting:
        before = f" after {l - c} offsets of markers/aborted records" if c < l else ""
        return f"waiting{before} at LSO {l} for {holder or 'a transaction in flight'} to commit (tracked, within its timeout)"
    if c > l:
        return f"lagging: {h - c} offsets past the LSO (the group reads uncommitted records)"
    if row.readable_before_lso is None:
        return f"lagging: {l - c} offsets to the LSO (gap not probed: counted as lag, markers included)"
    return f"lagging: records to read in the {l - c} offsets to the LSO"


def _explain_uncommitted(row: GroupLag, gap: Gap, holder: str | None) -> str:
    """:func:`explain` for a partition the group is assigned with no committed offset
    (:func:`kafkatxn.verdicts_groups.uncommitted_verdict`)."""
    l, h = row.last_stable_offset, row.high_watermark
    none = f"{row.group} has no committed offsets on {row.topic}-{row.partition}"
    if gap is Gap.blocked or gap is Gap.waiting:
        who = holder or "an open transaction (not found: it may just have ended)"
        return (f"{none}; its consumers start at earliest or latest, both at or behind LSO {l}, pinned by {who}; "
                f"{h - l} offsets wait behind it")
    if gap is Gap.unknown:
        return (f"{none}; where its consumers stand depends on their auto.offset.reset, which the broker does not know: "
                f"latest waits at LSO {l}, earliest reads up to {row.lag_to_lso_messages} offsets from the log start first")
    return f"{none}; nothing to read from earliest or latest (the log starts at the high watermark {h})"
