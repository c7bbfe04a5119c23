"""DescribeProducers' answers of a whole round held as the columns they came in (:class:`ProducerTable`):
a pass over the whole cluster describes 30,000 partitions and more. Where producers are idempotent (every
Kafka producer since 3.0, by default) each of them has producer state, and a few have a transaction open:
what a pass reads of them (the open transactions, the producer ids per broker) is found over the columns
in C, not a Python step per partition."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import chain, compress, repeat
from operator import itemgetter

from kafkatxn.column_tables import FewApart
from kafkatxn.model import ProducerState, TopicPartition

_PRODUCER_ID = itemgetter(0)  # of a ProducerState (a named tuple)
_TXN_START = itemgetter(5)  # its CurrentTxnStartOffset
# A transaction open: CurrentTxnStartOffset >= 0 (-1: none), the verdicts' rule (verdicts.open_transactions),
# as a C call on an int: -1 < offset.
_IN_TRANSACTION = (-1).__lt__


class ProducerTable(FewApart):
    """Per partition, its producers' states: a read-only mapping over the answers' columns (each answer's
    partitions and their producers, every partition once). The partitions with a transaction open are found
    in C and made into lists apart (:meth:`open_held`); those with any producer state when asked
    (:meth:`held`); the dict of them all, a list made and a TopicPartition hashed each (~6 ms of every
    ``check`` at 30,000, and as much again for its copy), only when another partition is looked up or every
    one is read. ``nodes``: the broker each answer came from, sent to it as the leader ``grouped_by`` names
    of each of its partitions (:meth:`reporters`, :meth:`producer_ids_by_reporter`)."""

    __slots__ = ("_all", "_columns", "_few", "_grouped_by", "_held", "_nodes", "_open")

    def __init__(self, columns: Sequence[tuple[Sequence[TopicPartition], Sequence[Sequence[ProducerState]]]],
                 nodes: Sequence[int] = (), grouped_by: Mapping[TopicPartition, int] | None = None):
        self._columns, self._nodes, self._grouped_by = columns, nodes, grouped_by
        self._all: dict[TopicPartition, list[ProducerState]] | None = None
        self._held: dict[TopicPartition, list[ProducerState]] | None = None
        found: dict[TopicPartition, list[ProducerState]] = {}
        for tps, producers in columns:
            if any(producers):  # (an answer none of whose partitions has producer state left: a quiet cluster's)
                # Each producer's partition (its index in the answer), its producers' states flattened beside it.
                at = chain.from_iterable(map(repeat, range(len(producers)), map(len, producers)))
                for i in dict.fromkeys(compress(at, map(_IN_TRANSACTION, map(_TXN_START, chain.from_iterable(producers))))):
                    found[tps[i]] = list(producers[i])
        self._open = self._few = found

    def open_held(self) -> Mapping[TopicPartition, list[ProducerState]]:
        """The partitions with a transaction open (a producer's CurrentTxnStartOffset >= 0), every producer's
        state of each, in the answers' order (not to be changed)."""
        return self._open

    def held(self) -> Mapping[TopicPartition, list[ProducerState]]:
        """The partitions with producer state, in the answers' order (not to be changed)."""
        if self._held is None:
            held: dict[TopicPartition, list[ProducerState]] = {}
            if self._all is not None:  # each partition's list is its own, whichever way it is read
                held.update(item for item in self._all.items() if item[1])
            else:
                for tps, producers in self._columns:
                    held.update(zip(compress(tps, producers), map(list, filter(None, producers))))
                held.update(self._open)
            self._held = self._few = held
        return self._held

    def reporters(self, leaders: Mapping[TopicPartition, int]) -> set[int] | None:
        """The ``leaders`` of the partitions described, found without looking any up: the brokers that answered
        for some, when ``leaders`` is the mapping the requests were sent by; else None."""
        if leaders is not self._grouped_by or len(self._nodes) != len(self._columns):
            return None
        return {node for node, (tps, _) in zip(self._nodes, self._columns) if tps}

    def producer_ids_by_reporter(self, leaders: Mapping[TopicPartition, int]) -> dict[int, set[int]] | None:
        """Per broker of :meth:`reporters`, the producer ids of the partitions it answered for (read in C);
        None where :meth:`reporters` is."""
        reporters = self.reporters(leaders)
        if reporters is None:
            return None
        ids: dict[int, set[int]] = {node: set() for node in sorted(reporters)}
        for node, (tps, producers) in zip(self._nodes, self._columns):
            if tps:
                ids[node].update(map(_PRODUCER_ID, chain.from_iterable(producers)))
        return ids

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


def open_states(states: Mapping[TopicPartition, Sequence[ProducerState]]) -> Mapping[TopicPartition, Sequence[ProducerState]]:
    """Of described producer ``states``, a mapping holding every partition with a transaction open (others
    may be left out: the verdicts pick the open transactions of what they are given): a
    :class:`ProducerTable`'s :meth:`~ProducerTable.open_held`, any other mapping as it is."""
    return states.open_held() if type(states) is ProducerTable else states


def every_state(states: Mapping[TopicPartition, Sequence[ProducerState]]) -> Mapping[TopicPartition, Sequence[ProducerState]]:
    """Of described producer ``states``, the mapping to read every partition's from (``producers``' rows and
    summary): a :class:`ProducerTable`'s dict of them all (:meth:`~kafkatxn.column_tables.FewApart.whole`), any
    other mapping as it is."""
    return states.whole() if type(states) is ProducerTable else states
