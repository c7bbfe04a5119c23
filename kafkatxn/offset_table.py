"""Both isolation levels' offsets of many partitions, held as the columns ListOffsets' answers bring
(:class:`OffsetTable`): a pass over the whole cluster reads 30,000 partitions and looks up the few whose
last stable offset trails the high watermark."""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, KeysView, Mapping, Sequence, ValuesView
from itertools import compress, repeat
from operator import gt
from typing import Any

from kafkatxn.model import TopicPartition


class OffsetTable(Mapping[TopicPartition, tuple]):
    """Per partition, ``shape(high watermark, last stable offset)`` (``verdicts_groups.Offsets``), or the
    ``(last stable offset, high watermark)`` pair without ``shape``: a read-only mapping over three
    columns (the partitions, each once, and their two offsets). The partitions that trail (HW > LSO) are
    found in C and held apart (:meth:`trailing`); the dict of them all, a named tuple made and a
    TopicPartition hashed each (~9 ms at 30,000), is made only when another partition is looked up or
    every one is read."""

    __slots__ = ("_all", "_columns", "_shape", "_trailing", "_trailing_rows")

    def __init__(self, tps: Sequence[TopicPartition], high: Sequence[int], stable: Sequence[int], shape: type[tuple] | None = None):
        self._columns = (tps, high, stable)
        self._shape = shape
        self._all: dict[TopicPartition, tuple] | None = None
        rows = self._trailing_rows = list(compress(range(len(tps)), map(gt, high, stable)))
        self._trailing = {tps[i]: self._value(high[i], stable[i]) for i in rows}

    def _value(self, high: int, stable: int) -> tuple:
        return (stable, high) if self._shape is None else tuple.__new__(self._shape, (high, stable))

    def _every(self) -> dict[TopicPartition, tuple]:
        if self._all is None:
            tps, high, stable = self._columns
            pairs = zip(stable, high) if self._shape is None else map(tuple.__new__, repeat(self._shape), zip(high, stable))
            self._all = dict(zip(tps, pairs))
        return self._all

    def trailing(self) -> list[TopicPartition]:
        """The partitions whose last stable offset trails the high watermark, in the columns' order."""
        return list(self._trailing)

    def trailing_offsets(self) -> list[tuple[TopicPartition, int, int]]:
        """The partitions whose last stable offset trails, as ``(partition, high watermark, last stable
        offset)``, in the columns' order."""
        tps, high, stable = self._columns
        return [(tps[i], high[i], stable[i]) for i in self._trailing_rows]

    def looked_up(self, tps: Sequence[TopicPartition]) -> list[tuple | None]:
        """Each of ``tps``' value (None: not in the table), in that order, looked up in C."""
        return list(map(self._every().get, tps))

    def __getitem__(self, tp: TopicPartition) -> tuple:
        found = self._trailing.get(tp)
        return found if found is not None else self._every()[tp]

    def get(self, tp: TopicPartition, default: Any = None) -> Any:
        found = self._trailing.get(tp)
        return found if found is not None else self._every().get(tp, default)

    def __contains__(self, tp: object) -> bool:
        return tp in self._trailing or tp in self._every()

    def __iter__(self) -> Iterator[TopicPartition]:
        return iter(self._columns[0])

    def __len__(self) -> int:
        return len(self._columns[0])

    # The dict's own views: read in C, not a look-up each through __getitem__.
    def keys(self) -> KeysView[TopicPartition]:
        return self._every().keys()

    def items(self) -> ItemsView[TopicPartition, tuple]:
        return self._every().items()

    def values(self) -> ValuesView[tuple]:
        return self._every().values()

    def __repr__(self) -> str:
        return f"OffsetTable({self._every()!r})"
