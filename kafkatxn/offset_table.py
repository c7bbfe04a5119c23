"""Both isolation levels' offsets of many partitions, held as the columns ListOffsets' answers bring
(:class:`OffsetTable`): a pass over the whole cluster reads 30,000 partitions and looks up the few whose
last stable offset trails the high watermark."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import compress, repeat
from operator import gt

from kafkatxn.column_tables import FewApart
from kafkatxn.model import TopicPartition


class OffsetTable(FewApart):
    """Per partition, ``shape(high watermark, last stable offset)`` (``verdicts_groups.Offsets``), or the
    ``(last stable offset, high watermark)`` pair without ``shape``: a read-only mapping over three
    columns (the partitions, each once, and their two offsets). The partitions that trail (HW > LSO) are
    found in C and held apart (:meth:`trailing`); the dict of them all, a named tuple made and a
    TopicPartition hashed each (~9 ms at 30,000), is made only when another partition is looked up or
    every one is read."""

    __slots__ = ("_all", "_columns", "_few", "_shape", "_trailing_rows")

    def __init__(self, tps: Sequence[TopicPartition], high: Sequence[int], stable: Sequence[int], shape: type[tuple] | None = None):
        self._columns = (tps, high, stable)
        self._shape = shape
        self._all: dict[TopicPartition, tuple] | None = None
        rows = self._trailing_rows = list(compress(range(len(tps)), map(gt, high, stable)))
        self._few = {tps[i]: self._value(high[i], stable[i]) for i in rows}

    def _value(self, high: int, stable: int) -> tuple:
        return (stable, high) if self._shape is None else tuple.__new__(self._shape, (high, stable))

    def _made(self) -> dict[TopicPartition, tuple]:
        tps, high, stable = self._columns
        pairs = zip(stable, high) if self._shape is None else map(tuple.__new__, repeat(self._shape), zip(high, stable))
        return dict(zip(tps, pairs))

    def trailing(self) -> list[TopicPartition]:
        """The partitions whose last stable offset trails the high watermark, in the columns' order."""
        return list(self._few)

    def trailing_offsets(self) -> list[tuple[TopicPartition, int, int]]:
        """The partitions whose last stable offset trails, as ``(partition, high watermark, last stable
        offset)``, in the columns' order."""
        tps, high, stable = self._columns
        return [(tps[i], high[i], stable[i]) for i in self._trailing_rows]

    def looked_up(self, tps: Sequence[TopicPartition]) -> list[tuple | None]:
        """Each of ``tps``' value (None: not in the table), in that order, looked up in C."""
        return list(map(self._every().get, tps))

    def __iter__(self) -> Iterator[TopicPartition]:
        return iter(self._columns[0])

    def __len__(self) -> int:
        return len(self._columns[0])
