"""A Metadata answer kept as columns, a topic at a time (:class:`ColumnMetadata`): each topic's partition
numbers and leaders as the wire unpacked them, its PartitionInfos made only when something reads them.

Between the Metadata answer and the first ListOffsets sent, ``lso`` needs of 30,000 partitions only their
TopicPartitions and leaders: made from these columns, in C, a Python step per topic (not the PartitionInfos
first: ~10 ms of the IO thread's reading, on every command's critical path). Pure, beside the model:
:class:`ColumnMetadata` is a :class:`~kafkatxn.model.ClusterMetadata` (equal to one of the same fields),
whose ``partitions`` are made on first use, in the order and with the TopicPartitions the wire made
them with before (:class:`~kafkatxn.model.InTopicOrder`).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain, compress, repeat
from operator import eq, itemgetter
from typing import Any, NamedTuple

from kafkatxn.leader_map import LeaderMap, LeadersWhenRead
from kafkatxn.model import TRANSACTION_STATE_TOPIC, ClusterMetadata, InTopicOrder, PartitionInfo, TopicPartition, kept_topic_partitions


_REPLICAS = itemgetter(3)  # of a PartitionInfo


class TopicRun(NamedTuple):
    """One topic of a Metadata answer with partitions, in partition order: its partition numbers and
    leaders, and what its PartitionInfos are made from (``made``, or a struct's ``fields`` of ``width`` a
    partition: index, leader, ``replicas`` replica ids, ``isr`` in-sync ids; ``block``: their bytes)."""

    name: str
    indexes: tuple[int, ...]
    leaders: tuple[int, ...]
    internal: bool
    made: tuple[PartitionInfo, ...] | None = None
    fields: tuple[int, ...] | None = None
    width: int = 0
    replicas: int = 0
    isr: int = 0
    block: bytes = b""


class MetadataColumns:
    """A Metadata answer's topics as :class:`TopicRun`\\ s, in topic order, each topic once (how the wire
    reads Kafka's answers): what ``MetadataResponse.partitions`` holds where the wire read it so."""

    __slots__ = ("runs",)

    def __init__(self, runs: list[TopicRun]):
        self.runs = runs

    def __eq__(self, other: object) -> bool:
        return type(other) is MetadataColumns and self.runs == other.runs

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"MetadataColumns({len(self.runs)} topics)"


# A broker id -> the one-broker list (id,): the replica (and in-sync) list of every partition of one
# replica it leads, shared (30,000 partitions of one replica: 60,000 tuples not made). As many as brokers.
_ONE_BROKER: dict[int, tuple[int]] = {}


def _broker_lists(fields: tuple, first: int, n: int, width: int, count: int) -> list[tuple[int, ...]]:
    """Each partition's list of ``n`` broker ids, from the columns ``first`` .. ``first + n - 1`` of a
    topic's unpacked ``fields`` (``width`` a partition); those of one broker are shared tuples."""
    if n == 0:
        return [()] * count
    if n > 1:
        return list(zip(*(fields[k::width] for k in range(first, first + n))))
    ids = fields[first::width]
    try:
        return list(map(_ONE_BROKER.__getitem__, ids))
    except KeyError:
        _ONE_BROKER.update((i, (i,)) for i in set(ids))
        return list(map(_ONE_BROKER.__getitem__, ids))


def _made_from_fields(run: TopicRun) -> tuple[PartitionInfo, ...]:
    fields, width, replicas, isr, count = run.fields, run.width, run.replicas, run.isr, len(run.indexes)
    replica_ids = _broker_lists(fields, 2, replicas, width, count)
    if isr == replicas and replicas and all(fields[2 + k :: width] == fields[2 + replicas + k :: width] for k in range(replicas)):
        isr_ids = replica_ids  # every replica in sync (as usual): the same tuples
    else:
        isr_ids = _broker_lists(fields, 2 + replicas, isr, width, count)
    # a named tuple's own __new__ is a Python function: made in C (as wire.names.made)
    return tuple(map(tuple.__new__, repeat(PartitionInfo), zip(
        repeat(run.name), run.indexes, run.leaders, replica_ids, isr_ids, repeat(run.internal))))  # type: ignore[arg-type]


# The PartitionInfos made of the last answer's topics, by the topic's name and its partitions' bytes: the
# exporter asks every scrape, and a topic's partitions are usually what they were, byte for byte (the
# brokers answer with their topics in orders of their own). Those bytes again are those PartitionInfos
# again (named tuples of ints and tuples: immutable, shared). Only the last answer's are kept.
_MADE_TOPICS: list[dict[tuple[str, bytes], tuple[PartitionInfo, ...]]] = [{}]
_making = threading.Lock()


def made_partitions(runs: list[TopicRun], keep: bool = True) -> list[tuple[PartitionInfo, ...]]:
    """Each run's PartitionInfos; with ``keep``, the runs' made ones are the next answer's to take."""
    kept, made = _MADE_TOPICS[0], {}
    out = []
    for run in runs:
        if run.made is not None:
            out.append(run.made)
            continue
        key = (run.name, run.block)
        infos = kept.get(key)
        if infos is None:
            infos = _made_from_fields(run)
        made[key] = infos
        out.append(infos)
    if keep:
        with _making:
            _MADE_TOPICS[0] = made
    return out


class ColumnMetadata(ClusterMetadata):
    """A :class:`ClusterMetadata` whose partitions are a Metadata answer's :class:`MetadataColumns`: its
    ``partitions`` made on first use; its TopicPartitions, leaders and ``lso``'s selection
    (:meth:`data_partitions`) made from the columns, a topic at a time."""

    def __init__(self, cluster_id: str | None, controller_id: int, brokers: tuple, columns: MetadataColumns,
                 answered_by: int | None = None) -> None:
        self.__dict__.update(cluster_id=cluster_id, controller_id=controller_id, brokers=brokers, columns=columns,
                             answered_by=answered_by)

    def __eq__(self, other: object) -> bool:  # equal to the ClusterMetadata of the same fields
        if isinstance(other, ClusterMetadata):
            return self._VALUES(self) == other._VALUES(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._VALUES(self))

    @functools.cached_property
    def partitions(self) -> InTopicOrder:  # type: ignore[override]
        return InTopicOrder(chain.from_iterable(made_partitions(self.columns.runs)), self.tps)

    @functools.cached_property
    def tps(self) -> list[TopicPartition]:
        # a topic's every partition as a list (0 .. n-1, as most are): a slice of the kept ones
        return list(chain.from_iterable(kept_topic_partitions(run.name, list(run.indexes)) for run in self.columns.runs))

    @functools.cached_property
    def leaders(self) -> dict[TopicPartition, int]:
        # A few partitions are looked up in their topic's run; the dict of them all is made only when it is
        # read whole (``lso`` routes the few that lag: a dict of 30,000 was ~12 ms of its CPU).
        made = LeadersWhenRead()
        made.metadata = self
        return made

    def _filled_leaders(self, leaders: "LeaderMap") -> None:
        dict.update(leaders, zip(self.tps, chain.from_iterable(run.leaders for run in self.columns.runs)))

    @functools.cached_property
    def _run_by_topic(self) -> dict[str, TopicRun]:
        return {run.name: run for run in self.columns.runs}

    @functools.cached_property
    def transaction_log(self) -> tuple[PartitionInfo, ...]:
        runs = [run for run in self.columns.runs if run.name == TRANSACTION_STATE_TOPIC]
        return made_partitions(runs, keep=False)[0] if runs else ()

    def topics(self) -> list[str]:
        return [run.name for run in self.columns.runs]

    def replica_ids(self) -> set[int]:
        """Every broker id in a partition's replica list, from the columns: a Python step per topic, none
        per partition (``check``'s replica brokers, before its first ListOffsets: no PartitionInfo made)."""
        ids: set[int] = set()
        for run in self.columns.runs:
            if run.made is not None:
                ids.update(chain.from_iterable(map(_REPLICAS, run.made)))
            else:
                for k in range(run.replicas):
                    ids.update(run.fields[2 + k :: run.width])  # type: ignore[index]
        return ids

    def every_partition(self) -> "PartitionsWhenRead":
        """Every partition (internal topics' too), each topic's in order, as :attr:`partitions`: their
        PartitionInfos made when first read, their count known before (:class:`PartitionsWhenRead`)."""
        return PartitionsWhenRead(self)

    def data_partitions(self) -> tuple[list[TopicPartition], list[int]]:
        """The TopicPartitions of every topic but the internal ones, in partition order, and beside them
        their leaders (-1: none): slices of :attr:`tps`, a topic at a time. The same list each call
        (its caller's to copy), so :meth:`data_by_leader` knows it."""
        return self._data_partitions

    @functools.cached_property
    def _data_partitions(self) -> tuple[list[TopicPartition], list[int]]:
        tps, at, picked, leaders = self.tps, 0, [], []
        for run in self.columns.runs:
            count = len(run.indexes)
            if not run.internal:
                picked += tps[at : at + count]
                leaders += run.leaders
            at += count
        return picked, leaders

    def data_runs_by_leader(self, silent: Mapping[int, object]) -> dict[int, "LeaderRuns"] | None:
        """:meth:`data_partitions` by leader as each leader's topics' runs (:func:`leader_runs`), before any
        TopicPartition is made: what ``lso``'s ListOffsets name, sent from these the moment the metadata is
        read (``Cluster.data_offsets_ahead``). The same objects each call."""
        grouped = self._data_runs
        if grouped is None or any(node in silent for node in grouped):
            return None
        return grouped

    @functools.cached_property
    def _data_runs(self) -> dict[int, "LeaderRuns"] | None:
        runs = [run for run in self.columns.runs if not run.internal]
        return leader_runs(list(chain.from_iterable(run.leaders for run in runs)), runs, {})

    def data_by_leader(self, silent: Mapping[int, object]) -> dict[int, "LedPartitions"] | None:
        """:meth:`data_partitions` by leader, each leader's the one its requests are written from
        (:func:`led_partitions` of :meth:`data_runs_by_leader`'s)."""
        grouped = self.data_runs_by_leader(silent)
        return None if grouped is None else {node: led_partitions(self._data_partitions[0], led) for node, led in grouped.items()}

    def all_runs_by_leader(self, silent: Mapping[int, object]) -> dict[int, "LeaderRuns"] | None:
        """Every partition (:attr:`tps`) by leader as each leader's topics' runs (:func:`leader_runs`), before
        any TopicPartition is made: what ``check``'s first round (ListOffsets and DescribeProducers) is written
        from, sent the moment the metadata is read (``Cluster.offsets_and_producers_ahead``). The same objects
        each call."""
        grouped = self._all_runs
        if grouped is None or any(node in silent for node in grouped):
            return None
        return grouped

    @functools.cached_property
    def _all_runs(self) -> dict[int, "LeaderRuns"] | None:
        return leader_runs(self._leader_column, self.columns.runs, {})

    def all_by_leader(self, silent: Mapping[int, object]) -> dict[int, "LedPartitions"] | None:
        """Every partition (:attr:`tps`) by leader (as ``session.group_by_leader_column`` groups them: each
        leader's in partition order, the leaders in the order they first lead one; None where a partition has
        no leader to ask, none or ``silent``), each leader's the one its requests are written from
        (:func:`led_partitions` of :meth:`all_runs_by_leader`'s)."""
        grouped = self.all_runs_by_leader(silent)
        return None if grouped is None else {node: led_partitions(self.tps, led) for node, led in grouped.items()}

    @functools.cached_property
    def _leader_column(self) -> list[int]:
        return list(chain.from_iterable(run.leaders for run in self.columns.runs))


class PartitionsWhenRead(Sequence):  # type: ignore[type-arg]
    """A :class:`ColumnMetadata`'s :attr:`~ColumnMetadata.partitions`, made only when an item is read: a
    ``check`` at 30,000 partitions reads them where a partition alerts, after its offsets, not before its
    first request (~20 ms of PartitionInfos made on the main thread, ``lso`` makes none). Equal to a
    tuple or list of the same PartitionInfos."""

    __slots__ = ("metadata",)

    def __init__(self, metadata: ColumnMetadata) -> None:
        self.metadata = metadata

    def __len__(self) -> int:
        return len(self.metadata.tps)

    def __getitem__(self, index: Any) -> Any:
        return self.metadata.partitions[index]

    def __iter__(self) -> Iterator[PartitionInfo]:
        return iter(self.metadata.partitions)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PartitionsWhenRead):
            other = other.metadata.partitions
        return isinstance(other, (tuple, list)) and tuple(self.metadata.partitions) == tuple(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PartitionsWhenRead({len(self)} partitions)"


def leader_runs(leaders: list[int], runs: list[TopicRun], silent: Mapping[int, object]) -> dict[int, "LeaderRuns"] | None:
    """The partitions of ``runs`` by leader (``leaders``, beside them: the leaders in the order they first
    lead one) as each leader's topics' runs (:class:`LeaderRuns`), no TopicPartition made; None where a
    partition has no leader to ask (none, or ``silent``). Picked in C by a mask per leader: the leaders'
    column as bytes, one byte a partition, translated to 1 where that leader leads."""
    try:  # broker ids under 256 (no -1): the column as it is, its leaders those of its bytes, found in C
        column: bytes | None = bytes(leaders)
        absent = _ALL_BYTES.translate(None, column)
        nodes = dict.fromkeys(sorted((node for node in range(256) if node not in absent), key=lambda node: column.index(node)))
    except ValueError:
        column, nodes = None, dict.fromkeys(leaders)
    if any(node < 0 or node in silent for node in nodes):
        return None
    out = {}
    for node in nodes:
        mask = column.translate(_picking(node)) if column is not None else bytes(map(eq, leaders, repeat(node)))
        led: list[tuple[str, tuple[int, ...]]] = []
        at = 0
        for run in runs:
            count = len(run.indexes)
            indexes = tuple(compress(run.indexes, mask[at : at + count]))
            if indexes:
                led.append((run.name, indexes))
            at += count
        out[node] = LeaderRuns(led, mask)
    return out


def led_partitions(tps: list[TopicPartition], led: "LeaderRuns") -> "LedPartitions":
    """A leader's :class:`LedPartitions` of ``tps`` (the partitions its mask was made over), picked in C,
    its requests written from ``led`` (:attr:`LedPartitions.written`: sent before they were made)."""
    out = LedPartitions(compress(tps, led.mask))
    out.runs = list(led.runs)
    out.written = led
    return out


_ALL_BYTES = bytes(range(256))


@functools.lru_cache(maxsize=None)
def _picking(code: int) -> bytes:
    """A ``bytes.translate`` table: ``code`` to 1, every other byte to 0."""
    return bytes(i == code for i in range(256))


class LedPartitions(list):  # type: ignore[type-arg]
    """A leader's TopicPartitions in partition order, with ``runs``: each topic's name and partition numbers
    among them, in that order (what a request body names: ``wire.bodies`` writes it from them); ``written``:
    the :class:`LeaderRuns` of the same partitions its ListOffsets name (sent before these were made)."""

    def __init__(self, partitions: Iterable[TopicPartition] = ()) -> None:
        super().__init__(partitions)
        self.runs: list[tuple[str, tuple[int, ...]]] = []
        self.written: LeaderRuns | None = None


class LeaderRuns(Sequence):  # type: ignore[type-arg]
    """A leader's partitions as its topics' ``runs`` (each topic's name and partition numbers, in partition
    order) and the ``mask`` that picked them (None: a batch of them, :meth:`batches`), before any
    TopicPartition is made: the partitions of ``lso``'s ListOffsets and ``check``'s first round, sent the
    moment the metadata is read, whose 30,000 TopicPartitions are made while the brokers answer (~10 ms,
    on the critical path before). ``wire.bodies`` writes a body from the runs, the
    wire reads the answer's partitions from its bytes; a request of these is equal (and hashed) by this
    object's identity, so the call that takes its answer makes its request of the same object
    (:attr:`LedPartitions.written`). Read as a sequence: its TopicPartitions, the kept ones, made then."""

    __slots__ = ("runs", "mask", "_count", "_made", "_batches")

    def __init__(self, runs: list[tuple[str, tuple[int, ...]]], mask: bytes | None) -> None:
        self.runs, self.mask, self._count, self._made = runs, mask, sum(len(indexes) for _, indexes in runs), None
        self._batches: tuple[int, list[LeaderRuns]] | None = None

    def batches(self, size: int) -> list["LeaderRuns"]:
        """These partitions in requests of at most ``size`` (a leader's DescribeProducers), each of its
        topics' runs cut where a batch ends (this object itself when it is one): the same objects each
        call, so the call that takes a round's answers makes the requests sent ahead of it."""
        kept = self._batches
        if kept is None or kept[0] != size:
            out = [self]
            if self._count > size:
                out, cut, room = [], [], size
                for name, indexes in self.runs:
                    while len(indexes) > room:  # the batch ends within this topic
                        if room:
                            cut.append((name, indexes[:room]))
                        out.append(LeaderRuns(cut, None))
                        indexes, cut, room = indexes[room:], [], size
                    if indexes:
                        cut.append((name, indexes))
                        room -= len(indexes)
                if cut:
                    out.append(LeaderRuns(cut, None))
            kept = self._batches = (size, out)
        return kept[1]

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: Any) -> Any:
        return self._partitions()[index]

    def __iter__(self) -> Iterator[TopicPartition]:
        return iter(self._partitions())

    def _partitions(self) -> tuple[TopicPartition, ...]:
        made = self._made
        if made is None:
            made = self._made = tuple(chain.from_iterable(kept_topic_partitions(name, indexes) for name, indexes in self.runs))
        return made

    def __repr__(self) -> str:
        return f"LeaderRuns({len(self.runs)} topics, {self._count} partitions)"


ColumnMetadata._FIELDS = ClusterMetadata._FIELDS  # its fields are ClusterMetadata's (repr, dataclasses.fields)
ColumnMetadata._VALUES = ClusterMetadata._VALUES

