"""The leader of each partition of a metadata read as columns (``ColumnMetadata.leaders``): a dict made
only when it is read whole (:class:`LeadersWhenRead`); a partition looked up alone is found in its
topic's run."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from kafkatxn.model import TopicPartition

if TYPE_CHECKING:
    from kafkatxn.metadata_columns import ColumnMetadata


class LeaderMap(dict):  # type: ignore[type-arg]
    """:attr:`ColumnMetadata.leaders`: the leader of each partition, and the ``metadata`` it is of (whose
    partitions are grouped by leader from its columns: ``session.group_by_leader``)."""

    metadata: "ColumnMetadata"


_MISSING = object()
# Partitions a LeadersWhenRead looks up alone before it makes the dict: a caller that reads many of them one
# by one (through a bound ``get``) pays dict's look-ups after that, not a run's each.
LOOKED_UP_ALONE = 256


class LeadersWhenRead(LeaderMap):
    """A :class:`LeaderMap` made when read whole: a partition looked up alone (``get``, ``[]``, ``in``) is
    found in its topic's run, by its position where the run numbers its partitions 0 .. n-1 (as Kafka's
    answers do); anything else (iteration, length, keys, items, a partition the runs do not place, the
    ``LOOKED_UP_ALONE``-th look-up) fills the dict from the columns once and makes it a plain
    :class:`LeaderMap`. ``lso`` routes the few partitions that lag: the dict of 30,000 was ~12 ms of its CPU."""

    looked_up = 0

    def get(self, tp: Any, default: Any = None) -> Any:  # type: ignore[override]
        found = _placed(self, tp)
        if found is _MISSING:
            return dict.get(whole_leaders(self), tp, default)
        return default if found is None else found

    def __getitem__(self, tp: Any) -> int:
        found = _placed(self, tp)
        if found is _MISSING:
            return dict.__getitem__(whole_leaders(self), tp)
        if found is None:
            raise KeyError(tp)
        return found

    def __contains__(self, tp: object) -> bool:
        found = _placed(self, tp)
        return dict.__contains__(whole_leaders(self), tp) if found is _MISSING else found is not None

    def __iter__(self) -> Iterator[TopicPartition]:
        return dict.__iter__(whole_leaders(self))

    def __len__(self) -> int:
        return dict.__len__(whole_leaders(self))

    def __eq__(self, other: object) -> bool:
        return dict.__eq__(whole_leaders(self), other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return dict.__repr__(whole_leaders(self))

    def __reversed__(self) -> Iterator[TopicPartition]:
        return dict.__reversed__(whole_leaders(self))

    def __or__(self, other: Any) -> Any:
        return dict.__or__(whole_leaders(self), other)

    def __ror__(self, other: Any) -> Any:
        return dict.__ror__(whole_leaders(self), other)

    def keys(self) -> Any:  # type: ignore[override]
        return dict.keys(whole_leaders(self))

    def values(self) -> Any:  # type: ignore[override]
        return dict.values(whole_leaders(self))

    def items(self) -> Any:  # type: ignore[override]
        return dict.items(whole_leaders(self))

    def copy(self) -> dict:  # type: ignore[override]
        return dict(dict.items(whole_leaders(self)))


def whole_leaders(leaders: Any) -> Any:
    """``leaders``, a :class:`LeadersWhenRead` filled and made a plain :class:`LeaderMap` (any other as it is):
    for a caller about to look up many partitions, in C."""
    if type(leaders) is LeadersWhenRead:
        with _FILLING:  # the exporter's threads share a metadata: one fills, none reads it half filled
            if type(leaders) is LeadersWhenRead:
                leaders.metadata._filled_leaders(leaders)
                leaders.__class__ = LeaderMap
    return leaders


_FILLING = threading.Lock()


def _placed(leaders: LeaderMap, tp: Any) -> Any:
    """``tp``'s leader from its topic's run; None where no run has the topic or its run, numbered 0 .. n-1,
    not the partition; _MISSING where the runs do not place it (a run with gaps in its numbers), enough
    were looked up, or ``leaders`` is a dict already (a bound method of it, taken before it was filled)."""
    if type(leaders) is not LeadersWhenRead:
        return _MISSING
    leaders.looked_up += 1
    if leaders.looked_up > LOOKED_UP_ALONE:
        return _MISSING
    try:
        run = leaders.metadata._run_by_topic.get(tp[0])
        index = tp[1]
    except (TypeError, IndexError, KeyError):
        return _MISSING
    if run is None:
        return None
    indexes = run.indexes
    if type(index) is not int or not indexes or indexes[0] != 0 or indexes[-1] != len(indexes) - 1:
        return _MISSING  # numbers with gaps (increasing, each once: 0 .. n-1 when the ends are)
    return run.leaders[index] if 0 <= index < len(indexes) else None
