"""What ``check`` and the exporter decide on (:class:`ClusterSnapshot`), and how its samples are made
from the fact layer's facts: the partitions' offsets, the scan's pins (:mod:`kafkatxn.facts_scan`,
as ``hanging`` lists them), the coordinators' transactions and where each group stands
(:func:`kafkatxn.group_positions.group_positions` over :mod:`kafkatxn.facts_lso`'s group snapshot,
as ``lso --groups`` and ``diagnose`` have it). Pure: the gathering is
:func:`kafkatxn.facts_cluster.gather_snapshot`'s; deciding (thresholds, metrics) is over the snapshot.
"""

from __future__ import annotations

from dataclasses import field, replace
from itertools import compress, repeat
from operator import is_not, itemgetter, lt, or_, sub
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, NamedTuple, Sequence

from kafkatxn import group_positions, pinning, verdicts, verdicts_age, verdicts_groups
from kafkatxn.model import FRESH, Missing, PartitionInfo, Record, TopicPartition, record
from kafkatxn.partition_columns import PartitionColumns, of_offsets
from kafkatxn.transaction_samples import (  # noqa: F401 - the snapshot's samples, named from here too
    CandidateSample, HangingSample, TransactionSample, UndeterminedSample, UntrackedSample, transaction_sample,
)
from kafkatxn.verdicts_groups import GroupVerdict, group_verdict, readable_before_lso

if TYPE_CHECKING:
    from kafkatxn.facts import Pins
    from kafkatxn.facts_lso import GroupSnapshot

# Every state ListTransactions can report (TRANSACTION_STATES), so absent states are exported as 0
# rather than missing; OPEN_TRANSACTION_STATES have begun and not yet completed.

# The parts of a snapshot whose figures check's perfdata and the exporter publish only when they were
# gathered (ClusterSnapshot.not_gathered): a value that was not gathered is absent, never a 0.
PART_OFFSETS = "offsets"  # LSO lag: the largest, the lagging partitions
PART_PRODUCERS = "producer state"  # active producer ids per broker
PART_VERDICTS = "hanging verdicts"  # hanging and undetermined transactions
PART_TRANSACTION_STATES = "transaction states"  # ListTransactions' count per state
PART_TRANSACTION_AGES = "transaction ages"  # the oldest open transaction
PART_GROUPS = "consumer groups"  # group lag, blocked groups (with --groups)


class PartitionSample(NamedTuple):
    """One scanned partition's offsets. A named tuple: a scrape at 30,000 partitions makes 30,000."""

    topic: str
    partition: int
    leader: int
    high_watermark: int | None  # None when the leader did not answer
    last_stable_offset: int | None

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def lso_lag_messages(self) -> int | None:
        """High watermark minus LSO: what read_committed consumers cannot read yet (the broker's
        LastStableOffsetLag gauge)."""
        hw, lso = self.high_watermark, self.last_stable_offset
        if hw is None or lso is None:
            return None
        # verdicts_groups.Offsets.lag, without an Offsets per partition: clamped at 0 in case a leader moved between.
        return hw - lso if hw > lso else 0


def lso_lags(partitions: Sequence[PartitionSample]) -> list[int | None]:
    """:attr:`PartitionSample.lso_lag_messages` of each partition, column by column (not a property call
    each: 30,000 a check or a scrape): None where its offsets did not arrive, clamped at 0."""
    if type(partitions) is PartitionColumns:  # (partition_samples'): its columns as they are
        if partitions.trailing is not None:  # every partition answered; those whose LSO does not trail lag 0
            lags = [0] * len(partitions)
            for i, high, stable in partitions.trailing:
                lags[i] = high - stable
            return lags
        high, stable = partitions.high, partitions.stable
    else:  # indexed in a comprehension: on Python 3.11 a third of the cost of map(itemgetter)
        high, stable = [p[3] for p in partitions], [p[4] for p in partitions]
    try:
        lags = list(map(sub, high, stable))  # every partition's offsets arrived (usually): in C, no None looked for
    except TypeError:  # a None: a leader that did not answer
        return [None if h is None or s is None else h - s if h > s else 0 for h, s in zip(high, stable)]
    return lags if not lags or min(lags) >= 0 else [max(0, lag) for lag in lags]  # a leader moved between the reads


class GroupSample(NamedTuple):
    """Transaction-aware lag of one consumer group on one partition (a :func:`kafkatxn.group_positions.group_positions`
    place). A tuple: a scrape at 5,000 groups x 20 partitions holds 100,000 of them."""

    group: str
    topic: str
    partition: int
    lag_messages: int  # what a read_committed consumer still has to read (markers/aborted records left out where probed)
    lag_to_lso_messages: int
    lag_to_hw_messages: int
    blocked: bool  # held by an open transaction not in flight (at its LSO, or through the group's offsets partition)
    # The blocking transaction (when blocked or waiting): its age, whether it hangs, whether it is past its own
    # timeout (kafkatxn.group_positions.GroupLag's). txn_hanging and txn_lost_commit are None when its verdict is undetermined.
    txn_age_ms: int | None = None
    txn_hanging: bool | None = False
    txn_overdue: bool = False
    txn_lost_commit: bool | None = False  # it lost its COMMIT marker: nothing but restore-commit releases the group
    waiting: bool = False  # held by a transaction in flight (verdicts_groups.held_verdict): it reads on at its commit
    blocked_through: str | None = None  # "__consumer_offsets-N": held through its offsets partition (GroupLag's)
    txn_verdict: verdicts_groups.BlockVerdict | None = None  # what the holding transaction is (verdicts_groups.block_verdict); None unless held

    @property
    def stuck(self) -> bool:
        """Blocked behind a transaction that hangs, lost its COMMIT marker or is past its own timeout
        (critical whatever the age threshold)."""
        return self.blocked and verdicts_groups.blocked_severity(
            self.txn_hanging, self.txn_overdue, False, lost_commit=self.txn_lost_commit) is verdicts_groups.Severity.critical


@record
class ClusterSnapshot(Record):
    """Everything check and the exporter decide on, from one pass over the cluster."""

    taken_at_ms: int
    duration_s: float = 0.0
    error: str | None = None  # set when nothing could be read (unreachable, auth, deadline)
    cluster_id: str | None = None
    brokers: tuple[int, ...] = ()  # registered in metadata
    replica_brokers: tuple[int, ...] = ()  # named as a replica of some partition (may be down)
    partitions: Sequence[PartitionSample] = ()  # a tuple, or partition_samples' columns (read as the tuple)
    transaction_states: dict[str, int] = field(default_factory=dict)  # ListTransactions counts by state
    open_transactions: tuple[TransactionSample, ...] = ()
    active_producer_ids: dict[int, int] = field(default_factory=dict)  # leader broker -> distinct producer ids
    # Open transactions on the scanned partitions, per partition (verdicts.open_transactions over
    # their producer state: the count hanging gives too); None when producer state did not arrive.
    open_transaction_count: int | None = None
    hanging: tuple[HangingSample, ...] = ()
    undetermined: tuple[UndeterminedSample, ...] = ()  # neither hanging nor shown to be tracked
    # Committed by their coordinator, the partition's COMMIT marker lost (kafkatxn.lost_commit): as
    # stuck as a hanging one, but released by restore-commit, never by abort.
    lost_commits: tuple[HangingSample, ...] = ()
    # Not tracked by their coordinator and not past their deadline: hanging then, unless they end.
    untracked: tuple[UntrackedSample, ...] = ()
    max_transaction_timeout_ms: int | None = None
    missing: tuple[Missing, ...] = ()  # parts that did not answer
    transactional_ids: tuple[str, ...] | None = None  # every id ListTransactions returned; None unless all answered
    groups: Sequence[GroupSample] | None = None  # None when group lag was not gathered (group_samples': GroupSamples)
    # Set when ``groups`` holds only the held places' samples (snapshot.held_group_samples: check
    # --groups without a group lag threshold): the largest lag_messages of every place.
    group_lag_max: int | None = None
    spark_queries: tuple = ()  # the Spark queries among the readers (spark_readers.QueryRow), with their writers
    not_gathered: frozenset[str] = frozenset()  # PART_* whose figures are absent (why: ``missing``)

    def __init__(
        self, taken_at_ms: int, duration_s: float = 0.0, error: str | None = None, cluster_id: str | None = None,
        brokers: tuple[int, ...] = (), replica_brokers: tuple[int, ...] = (), partitions: Sequence[PartitionSample] = (),
        transaction_states: dict[str, int] = FRESH, open_transactions: tuple[TransactionSample, ...] = (),
        active_producer_ids: dict[int, int] = FRESH, open_transaction_count: int | None = None,
        hanging: tuple[HangingSample, ...] = (), undetermined: tuple[UndeterminedSample, ...] = (),
        lost_commits: tuple[HangingSample, ...] = (), untracked: tuple[UntrackedSample, ...] = (),
        max_transaction_timeout_ms: int | None = None, missing: tuple[Missing, ...] = (),
        transactional_ids: tuple[str, ...] | None = None, groups: Sequence[GroupSample] | None = None,
        group_lag_max: int | None = None, spark_queries: tuple = (), not_gathered: frozenset[str] = frozenset(),
    ) -> None:
        self.__dict__.update(
            taken_at_ms=taken_at_ms, duration_s=duration_s, error=error, cluster_id=cluster_id, brokers=brokers,
            replica_brokers=replica_brokers, partitions=partitions,
            transaction_states={} if transaction_states is FRESH else transaction_states,
            open_transactions=open_transactions,
            active_producer_ids={} if active_producer_ids is FRESH else active_producer_ids,
            open_transaction_count=open_transaction_count, hanging=hanging, undetermined=undetermined,
            lost_commits=lost_commits, untracked=untracked, max_transaction_timeout_ms=max_transaction_timeout_ms,
            missing=missing, transactional_ids=transactional_ids, groups=groups, group_lag_max=group_lag_max,
            spark_queries=spark_queries, not_gathered=not_gathered,
        )

    @property
    def up(self) -> bool:
        return self.error is None

    def gathered(self, part: str) -> bool:
        return part not in self.not_gathered

    def group_stuck(self, sample: GroupSample) -> bool | None:
        """Whether the group is stuck on this partition; None when that cannot be known: it is
        blocked and the pinning transaction's verdict is undetermined (by the group pass or by the
        scan's), or whether it is past its own timeout needs the coordinator's answer this cluster
        did not give (Kafka before 3.0, a coordinator that did not answer). A group that is not
        blocked is not stuck."""
        if not sample.blocked or sample.stuck:
            return sample.stuck
        if sample.txn_hanging is None:
            return None
        undetermined = {(u.topic, u.partition) for u in self.undetermined}
        if (sample.topic, sample.partition) in undetermined or not self.gathered(PART_VERDICTS) \
                or not self.gathered(PART_TRANSACTION_STATES):
            return None
        return False

    def broker_up(self) -> dict[int, bool]:
        """Every broker known from metadata or replica lists: up when registered in metadata."""
        registered = set(self.brokers)
        return {b: b in registered for b in sorted(registered | set(self.replica_brokers))}

    def transaction_age_s(self, txn: TransactionSample) -> float | None:
        age_ms = verdicts_age.coordinator_age_ms(txn.start_time_ms, self.taken_at_ms)
        return age_ms / 1000 if age_ms is not None else None

    def oldest_transaction_age_s(self) -> float:
        """The oldest open transaction: those their coordinators have open, and the hanging ones (no
        coordinator has them: dated by their first record). Two-phase-commit transactions (KIP-939)
        are left out: no one times them out, their age is no alarm."""
        ages = [a for a in (self.transaction_age_s(t) for t in self.open_transactions if not t.two_phase_commit) if a is not None]
        ages += [h.age_ms / 1000 for h in self.hanging + self.lost_commits + self.untracked if h.age_ms is not None]
        return max(ages, default=0.0)


def partition_samples(selected: Sequence[PartitionInfo], tps: Sequence[TopicPartition],
                      offsets: Mapping[TopicPartition, tuple[int, int]]) -> Sequence[PartitionSample]:
    """A sample per scanned partition (``selected``, whose ``tps`` are given: not made again) from its
    ``(LSO, HW)`` pair, both None where its leader did not answer. 30,000 a scrape: held as columns
    (:func:`kafkatxn.partition_columns.of_offsets`: from a whole round's table, made only when read)."""
    return of_offsets(PartitionSample, selected, tps, offsets)




@record
class VerdictSamples(Record):
    """The scan's transactions that are findings, by verdict (:func:`verdict_samples`)."""

    hanging: tuple[HangingSample, ...] = ()
    lost_commits: tuple[HangingSample, ...] = ()
    untracked: tuple[UntrackedSample, ...] = ()
    undetermined: tuple[UndeterminedSample, ...] = ()

    def __init__(self, hanging: tuple[HangingSample, ...] = (), lost_commits: tuple[HangingSample, ...] = (),
                 untracked: tuple[UntrackedSample, ...] = (), undetermined: tuple[UndeterminedSample, ...] = ()) -> None:
        self.__dict__.update(hanging=hanging, lost_commits=lost_commits, untracked=untracked, undetermined=undetermined)


def verdict_samples(found: Pins, offsets: Mapping[TopicPartition, tuple[int, int]]) -> VerdictSamples:
    """The scan's pins (:func:`kafkatxn.facts.scan`, as ``hanging`` lists them: past their deadline,
    and untracked) as samples, with their partition's ``(LSO, HW)`` from ``offsets``."""
    now_ms = found.now_ms
    hanging: list[HangingSample] = []
    lost: list[HangingSample] = []
    untracked: list[UntrackedSample] = []
    undetermined: list[UndeterminedSample] = []
    for c in [*found.due(), *found.untracked()]:
        if c.verdict in (verdicts.Verdict.HANGING, verdicts.Verdict.LOST_COMMIT, verdicts.Verdict.UNTRACKED):
            tp = c.open_txn.tp
            pair = offsets.get(tp)
            lag = max(pair[1] - pair[0], 0) if pair is not None else None
            age = verdicts_age.transaction_age(c.transaction, now_ms)
            fields = (tp.topic, tp.partition, c.open_txn.producer_id, c.open_txn.start_offset,
                      c.transactional_id, c.reason, lag, age.ms if age else None, age.source if age else None)
            if c.verdict is verdicts.Verdict.UNTRACKED:
                untracked.append(UntrackedSample(*fields, hanging_at_ms=c.hanging_at_ms))
            else:
                (hanging if c.verdict is verdicts.Verdict.HANGING else lost).append(HangingSample(*fields))
        elif c.verdict is verdicts.Verdict.UNDETERMINED:
            p = c.open_txn.producer
            undetermined.append(UndeterminedSample(
                c.open_txn.tp.topic, c.open_txn.tp.partition, p.producer_id, p.current_txn_start_offset,
                c.transactional_id, c.reason, c.missing,
            ))
    return VerdictSamples(tuple(hanging), tuple(lost), tuple(untracked), tuple(undetermined))


def group_samples(snap: GroupSnapshot, topics: set[str] | None) -> GroupSamples:
    """Where each group stands on each partition of ``topics`` (every one when None), as
    ``lso --groups`` has it (:func:`kafkatxn.group_positions.group_positions`, the pinning transaction's
    facts by :func:`kafkatxn.pinning.pin_facts`): as columns (:class:`GroupSamples`); only the
    places held (blocked or waiting) are samples.

    The places' columns are made for every place at once, in C (100,000 at 5,000 groups x 20
    partitions): a commit at or past both its partition's offsets is caught up there (no lag, never
    held: three places in four), and of the rest, those lagging (past the LSO, or below it with records
    or an unread gap before it) and those caught up past a gap of markers are told apart by
    :func:`_lag_at`, which calls the rules ``group_positions`` calls, a step each. What is left (none
    committed, held at the LSO or past a gap of markers, of a group whose stable offset fetch found
    unstable offsets) is placed by ``group_positions`` itself (over the snapshot with only them) and
    taken in at its rows."""
    committed = snap.committed
    group_column: list = []
    tps: list[TopicPartition] = []
    commits: list[int] = []
    for group in sorted(committed):
        mine = committed[group]
        ordered = sorted(mine if topics is None else (tp for tp in mine if tp.topic in topics), key=_PARTITION)
        # By partition, then stably by topic: (topic, partition) order, ints and a group's few topics
        # compared rather than tuples (5,000 sorts a scrape at 5,000 groups: 102 -> 75 M instructions).
        ordered.sort(key=_TOPIC)
        if ordered:
            group_column += repeat(group, len(ordered))
            tps += ordered
            commits += map(mine.__getitem__, ordered)
    found = list(map(snap.lso.offsets.get, tps))
    if None in found:  # a partition whose offsets did not arrive is no place (group_positions passes it over)
        keep = list(map(is_not, found, repeat(None)))
        group_column, tps, commits, found = (list(compress(column, keep)) for column in (group_column, tps, commits, found))
    hw, lso = list(map(_HIGH_WATERMARK, found)), list(map(_LSO, found))
    lag_to_lso = [o - c if o > c else 0 for o, c in zip(lso, commits)]  # the offset minus the commit, at least 0
    lag_to_hw = [o - c if o > c else 0 for o, c in zip(hw, commits)]
    lag = list(lag_to_lso)
    # Both lags 0 and a commit: caught up (lag 0, not held), unless the group's offsets are unstable.
    look = list(compress(range(len(tps)), map(or_, lag_to_lso, lag_to_hw)))
    if (commits and min(commits) < 0) or snap.unstable:
        unstable = snap.unstable
        look = sorted({*look, *(i for i, c in enumerate(commits) if c < 0), *(i for i, g in enumerate(group_column) if g in unstable)})
    placed: list[int] = []  # the rows group_positions places, in order
    rest: dict = {}
    lag_at = _lag_at(snap)
    for i in look:
        at = lag_at(group_column[i], tps[i], commits[i], hw[i], lso[i], lag_to_lso[i], lag_to_hw[i])
        if at is None:
            placed.append(i)
            rest.setdefault(group_column[i], {})[tps[i]] = commits[i]
        else:
            lag[i] = at
    held: dict[int, GroupSample] = {}
    for i, place in zip(placed, group_positions.group_positions(replace(snap, committed=rest))):
        lag_to_lso[i], lag_to_hw[i], lag[i] = place[6], place[7], place[8]
        if place[9] is not None:  # held_at: blocked or waiting
            held[i] = _held_sample(snap, place)
    return GroupSamples(group_column, list(map(_TOPIC, tps)), list(map(_PARTITION, tps)), lag, lag_to_lso, lag_to_hw, held)


def _lag_at(snap: GroupSnapshot) -> Callable[..., int | None]:
    """The read_committed lag of a place :func:`kafkatxn.group_positions.group_positions` finds not held,
    decided by the same rules it calls (``group_verdict`` over the probe's answer, ``readable_lag``): None
    for a place it must place itself (none committed, a group with unstable offsets, a held one)."""
    unstable, first_readable = snap.unstable, snap.first_readable
    blocked, not_probed = GroupVerdict.blocked, group_positions.NOT_PROBED
    readable_lag = group_positions.readable_lag

    def lag_at(group: str, tp: TopicPartition, c: int, hw: int, lso: int, lag_to_lso: int, lag_to_hw: int) -> int | None:
        if c < 0 or group in unstable:
            return None
        # A gap below the LSO is read by the probe's answer, as group_positions reads it.
        probed = first_readable.get((tp, c), not_probed) if c < lso else not_probed
        verdict = group_verdict(c, lso, hw, None if probed is not_probed else readable_before_lso(probed, lso))
        return None if verdict is blocked else readable_lag(verdict, c, lso, lag_to_lso, lag_to_hw)

    return lag_at
_TOPIC, _PARTITION = itemgetter(0), itemgetter(1)  # of a TopicPartition
# A sample's fields after the lags when it is not held (GroupSample's defaults, blocked False).
_NOT_HELD = (False, *GroupSample._field_defaults.values())


class GroupSamples(Sequence[GroupSample]):
    """:func:`group_samples`' samples as columns: the group, topic, partition and three lags of every
    place, and the whole sample of the few places held (blocked or waiting), by row. The exporter reads
    the columns (100,000 places at 5,000 groups: no 14-field sample made per place, nor taken apart
    again per family); read as rows (iterated, indexed, compared with a tuple of :class:`GroupSample`)
    it is the tuple of the samples."""

    __slots__ = ("group", "held", "lag", "lag_to_hw", "lag_to_lso", "partition", "topic")

    def __init__(self, group: list, topic: list[str], partition: list[int], lag: list[int], lag_to_lso: list[int],
                 lag_to_hw: list[int], held: dict[int, GroupSample]):
        self.group, self.topic, self.partition = group, topic, partition
        self.lag, self.lag_to_lso, self.lag_to_hw, self.held = lag, lag_to_lso, lag_to_hw, held

    @classmethod
    def of(cls, samples: Sequence[GroupSample]) -> GroupSamples:
        """``samples`` as columns (as they are when they already are): every sample not as
        :func:`group_samples` makes a place not held is kept whole."""
        if type(samples) is GroupSamples:
            return samples
        columns = [list(map(itemgetter(i), samples)) for i in range(6)]
        tail = len(_NOT_HELD)
        return cls(*columns, {i: s for i, s in enumerate(samples) if s[-tail:] != _NOT_HELD})

    def __len__(self) -> int:
        return len(self.group)

    def __iter__(self) -> Iterator[GroupSample]:
        rows = map(tuple.__new__, repeat(GroupSample), zip(self.group, self.topic, self.partition, self.lag, self.lag_to_lso,
                                                            self.lag_to_hw, *map(repeat, _NOT_HELD)))
        if not self.held:
            return rows  # type: ignore[return-value]
        made = list(rows)
        for i, sample in self.held.items():
            made[i] = sample
        return iter(made)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, int):
            n = len(self.group)
            i = index + n if index < 0 else index
            if not 0 <= i < n:
                raise IndexError(index)
            held = self.held.get(i)
            return held if held is not None else tuple.__new__(GroupSample, (
                self.group[i], self.topic[i], self.partition[i], self.lag[i], self.lag_to_lso[i], self.lag_to_hw[i], *_NOT_HELD))
        return tuple(self)[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (tuple, GroupSamples)):
            return tuple(self) == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"GroupSamples({tuple(self)!r})"

    def held_rows(self) -> list[int]:
        """The rows of the places held (blocked or waiting), in order."""
        return sorted(self.held)


def held_group_samples(snap: GroupSnapshot, topics: set[str] | None) -> tuple[tuple[GroupSample, ...], int]:
    """Of :func:`group_samples`, what ``check --groups`` decides on when no group lag threshold, metrics
    file or Spark query needs every place: the samples of the places held (blocked or waiting), in the
    same order, and the largest read_committed lag of them all (``lag_messages``; 0 without a place).
    The 100,000 places of 5,000 groups are looked over in C, not made into samples; only the places
    behind their high watermark are placed (:func:`_behind`)."""
    places = group_positions.group_positions(_behind(snap))
    kept = list(places) if topics is None else [p for p in places if p[1].topic in topics]
    held = compress(kept, map(is_not, map(_HELD_AT, kept), repeat(None)))
    return tuple(_held_sample(snap, place) for place in held), max(map(_READ_COMMITTED_LAG, kept), default=0)


def _behind(snap: GroupSnapshot) -> GroupSnapshot:
    """``snap`` with only the commits :func:`kafkatxn.group_positions.group_positions` can find held or
    lagging: those below their partition's high watermark (or none: NO_COMMIT), and every commit of a
    group whose stable offset fetch found unstable offsets. A commit at or past the high watermark of
    a group without is caught up there (its read_committed lag 0, never held), and a partition whose
    offsets did not arrive is no place at all: both are left out, each group's in C (three places in
    four at 5,000 groups x 20 partitions), the places left in the same order."""
    offsets = snap.lso.offsets
    hw_of = dict(zip(offsets, map(_HIGH_WATERMARK, offsets.values()))).get
    unstable = snap.unstable
    committed: dict[str, dict[TopicPartition, int]] = {}
    for group, commits in snap.committed.items():
        if group in unstable:
            committed[group] = commits
            continue
        behind = dict(compress(commits.items(), map(lt, commits.values(), map(hw_of, commits, repeat(_NO_OFFSETS)))))
        if behind:
            committed[group] = behind
    return replace(snap, committed=committed)


_HIGH_WATERMARK, _LSO = itemgetter(0), itemgetter(1)  # of verdicts_groups.Offsets(high_watermark, last_stable_offset)
_NO_OFFSETS = float("-inf")  # a partition without offsets: no commit is below it (group_positions passes it over)
_HELD_AT = itemgetter(group_positions.GroupPlace._fields.index("held_at"))
_READ_COMMITTED_LAG = itemgetter(group_positions.GroupPlace._fields.index("read_committed_lag"))


def _held_sample(snap: GroupSnapshot, place: group_positions.GroupPlace) -> GroupSample:
    """The sample of a place held (blocked or waiting), with what is known of the transaction holding it."""
    group, tp, _committed, _offsets, verdict, _readable, lag_to_lso, lag_to_hw, lag, held = place
    facts = pinning.pin_facts(snap.lso, held)
    pinned = facts.pin is not None  # its blocking transaction was found
    # The blocking transaction's verdict as lso gives it (None: undetermined).
    waiting = verdict is verdicts_groups.GroupVerdict.waiting
    return GroupSample(group, tp.topic, tp.partition, lag, lag_to_lso, lag_to_hw, not waiting, facts.age_ms,
                       facts.hanging if pinned else False, bool(facts.overdue), facts.lost_commit if pinned else False,
                       waiting, str(held) if held != tp else None, facts.verdict)
