"""DescribeProducers' answers of a whole round held as the columns they came in (:class:`ProducerTable`):
a pass over the whole cluster describes 30,000 partitions and finds producer state on a few dozen."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import chain, compress

from kafkatxn.column_tables import FewApart
from kafkatxn.model import ProducerState, TopicPartition


class ProducerTable(FewApart):
    """Per partition, its producers' states: a read-only mapping over the answers' columns (each answer's
    partitions and their producers, every partition once). The partitions with producer state are found in
    C and made into lists apart (:meth:`held`); the dict of them all, a list made and a TopicPartition hashed
    each (~6 ms of every ``check`` at 30,000, and as much again for its copy), is made only when another
    partition is looked up or every one is read. ``nodes``: the broker each answer came from, sent to it as the
    leader ``grouped_by`` names of each of its partitions (:meth:`reporters`)."""

    __slots__ = ("_all", "_columns", "_few", "_grouped_by", "_nodes")

    def __init__(self, columns: Sequence[tuple[Sequence[TopicPartition], Sequence[Sequence[ProducerState]]]],
                 nodes: Sequence[int] = (), grouped_by: Mapping[TopicPartition, int] | None = None):
        self._columns, self._nodes, self._grouped_by = columns, nodes, grouped_by
        self._all: dict[TopicPartition, list[ProducerState]] | None = None
        held: dict[TopicPartition, list[ProducerState]] = {}
        for tps, producers in columns:
            held.update(zip(compress(tps, producers), map(list, filter(None, producers))))
        self._few = held

    def held(self) -> Mapping[TopicPartition, list[ProducerState]]:
        """The partitions with producer state, in the answers' order (not to be changed)."""
        return self._few

    def reporters(self, leaders: Mapping[TopicPartition, int]) -> set[int] | None:
        """The ``leaders`` of the partitions described, found without looking any up: the brokers that answered
        for some, when ``leaders`` is the mapping the requests were sent by; else None."""
        if leaders is not self._grouped_by or len(self._nodes) != len(self._columns):
            return None
        return {node for node, (tps, _) in zip(self._nodes, self._columns) if tps}

    def _made(self) -> dict[TopicPartition, list[ProducerState]]:
        every: dict[TopicPartition, list[ProducerState]] = {}
        for tps, producers in self._columns:
            every.update(zip(tps, map(list, producers)))
        every.update(self._few)  # the lists already handed out stay the partitions' own
        return every

    def __iter__(self) -> Iterator[TopicPartition]:
        return chain.from_iterable(tps for tps, _ in self._columns)

    def __len__(self) -> int:
        return sum(len(tps) for tps, _ in self._columns)


def held_states(states: Mapping[TopicPartition, Sequence[ProducerState]]) -> Mapping[TopicPartition, Sequence[ProducerState]]:
    """Of described producer ``states``, a mapping holding every partition with producer state (those
    without may be left out): a :class:`ProducerTable`'s partitions with state, any other mapping as it is."""
    return states.held() if type(states) is ProducerTable else states
