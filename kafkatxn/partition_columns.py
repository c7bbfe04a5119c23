"""The scanned partitions' samples held as columns (:class:`PartitionColumns`): a check or a scrape at
30,000 partitions reads their offsets column by column (``snapshot.lso_lags``), and walks the samples
themselves only where a partition alerts or a series is written."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import repeat
from operator import add, itemgetter
from typing import Any

from kafkatxn.model import PartitionInfo

_HEAD = itemgetter(slice(0, 3))  # of a PartitionInfo: its topic, partition and leader, as a sample begins


class PartitionColumns(Sequence):
    """The samples (``row``: ``snapshot.PartitionSample``, whose first three fields are a PartitionInfo's)
    of ``partitions`` with the offsets ``high`` and ``stable`` beside them (None where they did not
    arrive). Read as a sequence it is the tuple of the samples, made once (in C) when first walked or
    indexed; :attr:`high` and :attr:`stable` are read without making any."""

    __slots__ = ("_rows", "high", "partitions", "row", "stable")

    def __init__(self, row: type[tuple], partitions: Sequence[PartitionInfo], high: Sequence[int | None], stable: Sequence[int | None]):
        self.row, self.partitions, self.high, self.stable = row, partitions, high, stable
        self._rows: tuple | None = None

    def rows(self) -> tuple:
        """The samples, made once."""
        if self._rows is None:
            heads = map(_HEAD, self.partitions)
            self._rows = tuple(map(tuple.__new__, repeat(self.row), map(add, heads, zip(self.high, self.stable))))
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
