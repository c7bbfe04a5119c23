"""The scanned partitions' samples held as columns (:class:`PartitionColumns`): a check or a scrape at
30,000 partitions reads their offsets column by column (``snapshot.lso_lags``), and walks the samples
themselves only where a partition alerts or a series is written."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence
from itertools import repeat
from operator import add, itemgetter
from typing import Any, Callable

from kafkatxn.model import PartitionInfo, TopicPartition
from kafkatxn.offset_table import OffsetTable

_HEAD = itemgetter(slice(0, 3))  # of a PartitionInfo: its topic, partition and leader, as a sample begins


class PartitionColumns(Sequence):
    """The samples (``row``: ``snapshot.PartitionSample``, whose first three fields are a PartitionInfo's)
    of ``partitions`` with the offsets ``high`` and ``stable`` beside them (None where they did not
    arrive). Read as a sequence it is the tuple of the samples, made once (in C) when first walked or
    indexed; :attr:`high` and :attr:`stable` are read without making any. ``later``: where the two
    columns are not given, what makes them (once, when first read), and :attr:`trailing` the partitions
    whose LSO trails as ``(index, high, stable)``, every other partition's offsets arrived and not
    trailing: a check reads its lags from those alone (``snapshot.lso_lags``) and makes no column."""

    __slots__ = ("_high", "_later", "_rows", "_stable", "partitions", "row", "trailing")

    def __init__(self, row: type[tuple], partitions: Sequence[PartitionInfo], high: Sequence[int | None] | None,
                 stable: Sequence[int | None] | None,
                 later: Callable[[], tuple[Sequence[int | None], Sequence[int | None]]] | None = None,
                 trailing: list[tuple[int, int, int]] | None = None):
        self.row, self.partitions, self._high, self._stable = row, partitions, high, stable
        self._later, self.trailing = later, trailing
        self._rows: tuple | None = None

    def _columns(self) -> tuple[Sequence[int | None], Sequence[int | None]]:
        if self._high is None:
            self._high, self._stable = self._later()  # type: ignore[misc]
        return self._high, self._stable  # type: ignore[return-value]

    @property
    def high(self) -> Sequence[int | None]:
        return self._columns()[0]

    @property
    def stable(self) -> Sequence[int | None]:
        return self._columns()[1]

    def rows(self) -> tuple:
        """The samples, made once."""
        if self._rows is None:
            high, stable = self._columns()
            heads = map(_HEAD, self.partitions)
            self._rows = tuple(map(tuple.__new__, repeat(self.row), map(add, heads, zip(high, stable))))
        return self._rows

    def __len__(self) -> int:
        return len(self.partitions)

    def __getitem__(self, index: Any) -> Any:
        return self.rows()[index]

    def __iter__(self) -> Iterator:
        return iter(self.rows())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PartitionColumns):
            return self.rows() == other.rows()
        return isinstance(other, tuple) and self.rows() == other

    def __hash__(self) -> int:
        return hash(self.rows())  # as the tuple's

    def __repr__(self) -> str:
        return repr(self.rows())


def of_offsets(row: type[tuple], selected: Sequence[PartitionInfo], tps: Sequence[TopicPartition],
               offsets: Mapping[TopicPartition, tuple[int, int]]) -> PartitionColumns:
    """The samples of ``selected`` (whose ``tps`` are given) with their ``(LSO, HW)`` pairs in ``offsets``,
    None where absent, each column taken in C, one lookup each. From a whole round's table of every
    partition (an :class:`OffsetTable` of as many), in partition order (the metadata's), the columns are
    made only when read: the few partitions whose LSO trails are placed by bisection, and a check reads its
    lags from them (the columns were ~9 ms of every check, a lookup of 30,000 partitions, between the
    offsets' answers and the coordinators' round)."""
    if type(offsets) is OffsetTable and len(offsets) == len(tps):
        trailing = _placed(tps, offsets.trailing_offsets())
        if trailing is not None:
            return PartitionColumns(row, selected, None, None, lambda: _offset_columns(tps, offsets), trailing)
    return PartitionColumns(row, selected, *_offset_columns(tps, offsets))


def _offset_columns(tps: Sequence[TopicPartition], offsets: Mapping[TopicPartition, tuple[int, int]]) -> tuple[list, list]:
    """The high watermarks and LSOs of ``tps``, None where not in ``offsets``."""
    pairs = offsets.looked_up(tps) if type(offsets) is OffsetTable else list(map(offsets.get, tps))
    if all(pairs):  # every partition's offsets arrived (usually)
        return list(map(_SECOND, pairs)), list(map(_FIRST, pairs))
    return [pair[1] if pair else None for pair in pairs], [pair[0] if pair else None for pair in pairs]


_FIRST, _SECOND = itemgetter(0), itemgetter(1)  # of a pair


def _placed(tps: Sequence[TopicPartition], trailing: list[tuple[TopicPartition, int, int]]) -> list[tuple[int, int, int]] | None:
    """``trailing`` with each partition's index in ``tps`` (in partition order, each once: found by
    bisection, the partition at the index compared), in that order; None when one is not found there."""
    placed = []
    for tp, high, stable in trailing:
        i = bisect_left(tps, tp)
        if i == len(tps) or tps[i] != tp:
            return None
        placed.append((i, high, stable))
    placed.sort()
    return placed
