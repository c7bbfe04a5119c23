"""LastStableOffsetLag: how far each partition's last stable offset (LSO) trails its high watermark
(HW), which open transaction pins it, and what that means for read_committed consumer groups.

The broker shows the gap only as the JMX gauge ``kafka.cluster:type=Partition,name=LastStableOffsetLag``.
Here it comes from two ListOffsets passes (read_committed gives the LSO, read_uncommitted the HW),
one request per leader each; DescribeProducers only for partitions whose LSO trails the HW.

Snapshot steps (:func:`take_snapshot`, :func:`take_group_snapshot`) are the only I/O; the rest are
pure functions over them (rows, :func:`lso_moved`, :func:`sort_rows`, the exit-code rules).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Iterable, Iterator, Mapping, NamedTuple, Sequence, TypeVar

from kafkatxn import gather, lost_commit
from kafkatxn.gather import probe_rounds  # noqa: F401 - also lso's API (tests, bench)
from kafkatxn.errors import NotFoundError
from kafkatxn.exitcodes import EXIT_CRITICAL, EXIT_OK, EXIT_WARNING, exit_code
from kafkatxn.model import Missing, Part, Partial, QueryReader, TopicPartition
# One definition of each answer, shared with hanging, check, diagnose and the exporter.
from kafkatxn.verdicts import (  # noqa: F401 - also lso's API
    Classification, OpenTransaction, PinVerdict, pin_flags, pin_verdict, pinning_transaction, Verdict,
)
from kafkatxn.verdicts_groups import (
    CONSUMER_OFFSETS_TOPIC, DEFAULT_LAG_THRESHOLD, BlockVerdict, GroupVerdict, Offsets, Severity, block_severity,
    block_verdict, blocked_severity, group_verdict, held_verdict, is_too_old, lag_is_finding, may_have_ended,
    offsets_partition, readable_before_lso, stable_verdict, uncommitted_verdict,
)
from kafkatxn.verdicts_age import best_age_ms, is_overdue, last_write_age_ms, transaction_age, transaction_age_ms

if TYPE_CHECKING:  # capability modules are handed the facade; they do not import it
    from kafkatxn.kafka import Cluster


# Committed-offset gaps below the LSO up to this many are read to tell markers and aborted records
# from lag; larger gaps count as lag unread.
DEFAULT_PROBE_MAX_GAP = 1000

# A pinning transaction older than this makes the finding critical (exit 2). Producers default to a
# 60 s transaction timeout, after which the coordinator aborts; five minutes is well past normal.
DEFAULT_CRITICAL_AGE = "5m"
DEFAULT_CRITICAL_AGE_MS = 5 * 60_000

# In a group's committed offsets: a partition its members are assigned that it has no commit on.
NO_COMMIT = -1


# -- snapshot ----------------------------------------------------------------------------------


@dataclass
class LsoSnapshot:
    taken_at_ms: int  # wall clock, for ages
    offsets: dict[TopicPartition, Offsets]
    # Only for partitions whose LSO trails the HW; a partition may hold several open transactions.
    open_transactions: dict[TopicPartition, list[OpenTransaction]] = field(default_factory=dict)
    missing: list[Missing] = field(default_factory=list)
    # Each pinning transaction's classification by (partition, producer id), settled by its
    # coordinator's log where the whole rule calls it hanging (gather.settle_pins), as hanging settles it.
    classifications: dict[tuple[TopicPartition, int], Classification] = field(default_factory=dict)
    max_transaction_timeout_ms: int | None = None  # read only when a pinning transaction may hang
    abort_cleanup_interval_ms: int | None = None  # read only when one is past its own timeout (None: Kafka's default)

    def pin(self, tp: TopicPartition) -> OpenTransaction | None:
        """The open transaction pinning ``tp``'s LSO (None when its LSO does not trail the HW)."""
        o = self.offsets.get(tp)
        if o is None or o.lag <= 0:
            return None
        return pinning_transaction(self.open_transactions.get(tp, []), o.last_stable_offset)

    def pin_verdict(self, pin: OpenTransaction | None) -> PinVerdict | None:
        """Hanging, lost commit, undetermined or not hanging (:func:`kafkatxn.verdicts.pin_verdict`);
        None without a pinning transaction."""
        if pin is None:
            return None
        return pin_verdict(self.classifications.get((pin.tp, pin.producer_id)), self.taken_at_ms, self.max_transaction_timeout_ms)

    def pin_classification(self, tp: TopicPartition) -> Classification | None:
        """The classification of the transaction pinning ``tp``'s LSO (None: no pin, or not classified)."""
        pin = self.pin(tp)
        return self.classifications.get((tp, pin.producer_id)) if pin is not None else None

    def undetermined_reason(self, pin: OpenTransaction) -> str:
        """Why ``pin``'s verdict is undetermined."""
        c = self.classifications.get((pin.tp, pin.producer_id))
        if c is None:
            return "its coordinator's view was not gathered"
        if c.verdict is not Verdict.UNDETERMINED and self.max_transaction_timeout_ms is None:
            return f"{c.reason}, but transaction.max.timeout.ms could not be read"
        return c.reason


@dataclass
class GroupSnapshot:
    lso: LsoSnapshot
    committed: dict[str, dict[TopicPartition, int]]  # group -> partition -> committed offset (or NO_COMMIT)
    # (partition, start offset) -> offset of the first record a read_committed consumer gets from
    # there, or None when it reached the LSO without one. Only gaps that were probed are present.
    first_readable: dict[tuple[TopicPartition, int], int | None] = field(default_factory=dict)
    missing: list[Missing] = field(default_factory=list)
    # Log start offsets of the partitions some group is assigned but has no commit on.
    log_start: dict[TopicPartition, int] = field(default_factory=dict)
    # Each group's __consumer_offsets partition (where its commits, transactional ones too, are written).
    offsets_partitions: dict[str, TopicPartition] = field(default_factory=dict)
    # Per group, the partitions its stable offset fetch answered UNSTABLE_OFFSET_COMMIT (asked only
    # of groups whose offsets partition holds an open transaction).
    unstable: dict[str, frozenset[TopicPartition]] = field(default_factory=dict)

    def held_at(self, group: str, tp: TopicPartition, unstable: bool) -> TopicPartition:
        """The partition whose open transaction holds ``group`` on ``tp``: its offsets partition
        when its offsets there are unstable, else ``tp`` itself."""
        return self.offsets_partitions.get(group, tp) if unstable else tp


def take_snapshot(
    cluster: Cluster, partitions: Iterable[TopicPartition], known: Mapping[TopicPartition, tuple[int, int]] | None = None,
    max_transaction_timeout_ms: int | None = None, settled: Mapping[tuple[TopicPartition, int], Classification] | None = None,
    again: bool = True,
) -> LsoSnapshot:
    """Offsets of ``partitions`` at both isolation levels, and the open transactions where the LSO lags.

    ``known``: ``(LSO, HW)`` pairs already read in this pass (the exporter's offsets pass); only the
    partitions not in it are asked for. The pinning transactions their coordinator does not date
    are dated by their first record, and decided hanging or not (``max_transaction_timeout_ms``
    is read from the brokers only when one may hang and it is not given).
    """
    tps = sorted(set(partitions))
    taken_at_ms = int(time.time() * 1000)
    known = known or {}
    rest: list[TopicPartition] = []
    offsets: dict[TopicPartition, Offsets] = {}
    for tp in tps:  # 30,000 partitions a scrape: one lookup each
        pair = known.get(tp)
        if pair is None:
            rest.append(tp)
        else:
            offsets[tp] = Offsets(pair[1], pair[0])  # (high_watermark, last_stable_offset) from (LSO, HW)
    missing: list[Missing] = []
    if rest:
        pairs = cluster.stable_and_high_offsets(rest)
        offsets.update({tp: Offsets(high_watermark=hw, last_stable_offset=lso) for tp, (lso, hw) in pairs.value.items()})
        missing += pairs.missing
    lagging = [tp for tp, o in offsets.items() if o.lag > 0]
    before = len(missing)
    open_txns, view = gather.describe_open(cluster, lagging, missing)
    unanswered = {m.subject for m in missing[before:]}
    snapshot = LsoSnapshot(taken_at_ms, offsets, open_txns, missing)
    pins = gather.with_first_records(cluster, [p for tp in sorted(lagging) if (p := snapshot.pin(tp)) is not None], missing)
    for t in pins:
        open_txns[t.tp] = [t if (o.producer_id, o.start_offset) == (t.producer_id, t.start_offset) else o for o in open_txns[t.tp]]
    snapshot.classifications, snapshot.max_transaction_timeout_ms, snapshot.abort_cleanup_interval_ms = gather.settle_pins(
        cluster, pins, view, taken_at_ms, max_transaction_timeout_ms, missing, settled,
    )
    if again:
        if not any(isinstance(subject, Part) for subject in unanswered):  # DescribeProducers was answered
            _ask_again(cluster, snapshot, [tp for tp in lagging if tp not in unanswered], settled)
    return snapshot


def _ask_again(cluster: Cluster, snapshot: LsoSnapshot, described: Sequence[TopicPartition],
               settled: Mapping[tuple[TopicPartition, int], Classification] | None) -> None:
    """A transaction that ended between two requests (:func:`kafkatxn.verdicts_groups.may_have_ended`) is
    asked again, once: those partitions' offsets are read again, and the ones whose LSO moved are
    measured anew (the rest stay as they were: a transaction whose coordinator no longer holds the
    partition and that still pins its LSO is one the verdicts decide)."""
    suspects = [tp for tp in described if may_have_ended(snapshot.pin(tp), snapshot.pin_classification(tp))]
    if not suspects:
        return
    fresh = cluster.stable_and_high_offsets(suspects)
    moved = {tp: pair for tp, pair in fresh.value.items() if pair[0] != snapshot.offsets[tp].last_stable_offset}
    if not moved:
        return
    again = take_snapshot(cluster, moved, moved, snapshot.max_transaction_timeout_ms, settled, again=False)
    snapshot.offsets.update(again.offsets)
    for tp in moved:
        snapshot.open_transactions.pop(tp, None)
    snapshot.open_transactions.update(again.open_transactions)
    snapshot.classifications = {key: c for key, c in snapshot.classifications.items() if key[0] not in moved}
    snapshot.classifications.update(again.classifications)
    snapshot.missing.extend(m for m in again.missing if m not in snapshot.missing)


def take_group_snapshot(
    cluster: Cluster,
    groups: Sequence[str] | None = None,
    topics: Sequence[str] | None = None,
    probe_max_gap: int = DEFAULT_PROBE_MAX_GAP,
    max_transaction_timeout_ms: int | None = None,
    readers: Mapping[str, dict[TopicPartition, int]] | None = None, every_group: bool = False,
) -> GroupSnapshot:
    """Committed offsets of ``groups`` (default: every group; none when ``readers`` are given, unless
    ``every_group``) and ``readers`` (Spark queries: spark_readers), the LSO snapshot of their partitions (pins decided with
    ``max_transaction_timeout_ms``, the brokers' when not given), and read_committed probes of small
    gaps between a committed offset and the LSO."""
    named = list(dict.fromkeys(groups or []))
    listed = cluster.list_groups_partial() if named or readers is None or every_group else Partial([])
    if named:
        known = set(listed.value)
        # A name missing from an incomplete list may be coordinated by the broker that did not answer.
        unknown = [g for g in named if g not in known] if not listed.missing else []
        if unknown:
            # ListGroups leaves out, silently, the groups this principal may not DESCRIBE: a group
            # it is refused is not unknown (its committed offsets are then a missing part naming the ACL).
            refused = {m.subject for m in cluster.group_offsets(unknown).missing if m.not_authorized}
            unknown = [g for g in unknown if Part(f"group {g}") not in refused]
        if unknown:
            raise NotFoundError(f"unknown consumer group {', '.join(repr(g) for g in unknown)}")
    else:
        named = listed.value
    # Committed offsets before the LSO: a read_committed consumer's commit cannot pass the LSO of
    # that moment, and the LSO read afterwards can only be larger.
    by_group, missing = committed_offsets(cluster, named, topics)
    by_group.update(readers or {})
    return finish_group_snapshot(cluster, by_group, list(listed.missing) + missing, probe_max_gap,
                                 max_transaction_timeout_ms=max_transaction_timeout_ms)


def committed_offsets(
    cluster: Cluster, groups: Sequence[str], topics: Sequence[str] | None = None
) -> tuple[dict[str, dict[TopicPartition, int]], list[Missing]]:
    """The first step of :func:`take_group_snapshot`: committed offsets per group, on partitions
    that exist (of ``topics`` when given), and ``NO_COMMIT`` on the partitions a Stable group's
    members are assigned without a commit. Read them before the offsets they are compared with."""
    committed = cluster.group_offsets(groups)
    missing = list(committed.missing)
    uncommitted = gather.uncommitted_assignments(cluster, committed.value, groups, missing)
    existing = {p.tp for p in cluster.select_partitions(topics)} if topics else cluster.metadata().leaders.keys()
    # Offsets of deleted topics stay committed until they expire; there is nothing to measure there.
    # Usually every partition exists: a group's dict is then kept as it is (one set comparison, in C).
    by_group = {
        g: offsets if offsets.keys() <= existing else {tp: off for tp, off in offsets.items() if tp in existing}
        for g, offsets in committed.value.items()
    }
    for g, tps in uncommitted.items():
        by_group.setdefault(g, {}).update((tp, NO_COMMIT) for tp in tps if tp in existing)
    return by_group, missing


def finish_group_snapshot(
    cluster: Cluster,
    by_group: dict[str, dict[TopicPartition, int]],
    missing: list[Missing],
    probe_max_gap: int = DEFAULT_PROBE_MAX_GAP,
    known: Mapping[TopicPartition, tuple[int, int]] | None = None,
    max_transaction_timeout_ms: int | None = None,
    settled: Mapping[tuple[TopicPartition, int], Classification] | None = None,
) -> GroupSnapshot:
    """The rest of :func:`take_group_snapshot` after :func:`committed_offsets`: the LSO snapshot of
    the groups' partitions (``known`` pairs, read after the committed offsets, are not asked again;
    ``settled`` pins, decided by the coordinator's log earlier in the command, are not read again)
    and the probes."""
    offsets_of = group_offsets_partitions(cluster, by_group)
    lso = take_snapshot(cluster, set().union(*by_group.values(), offsets_of.values()), known, max_transaction_timeout_ms, settled)
    missing.extend(lso.missing)
    unstable = unstable_offsets(cluster, by_group, offsets_of, lso, missing)
    first_readable: dict[tuple[TopicPartition, int], int | None] = {}
    for starts in probe_rounds(by_group, lso.offsets, probe_max_gap):
        probed = cluster.first_readable_offsets(starts)
        missing.extend(probed.missing)
        first_readable.update({(tp, starts[tp]): off for tp, off in probed.value.items()})
    # Only places without a commit (NO_COMMIT, < 0) need the log start; most groups have none.
    uncommitted = {tp for offsets in by_group.values() if offsets and min(offsets.values()) < 0
                   for tp, c in offsets.items() if c < 0}
    log_start = gather.log_starts(cluster, uncommitted, missing)
    return GroupSnapshot(lso, by_group, first_readable, missing, log_start, offsets_of, unstable)


def group_offsets_partitions(cluster: Cluster, groups: Iterable[str]) -> dict[str, TopicPartition]:
    """Each group's ``__consumer_offsets`` partition (:func:`kafkatxn.verdicts_groups.offsets_partition`);
    none when the topic is not in the metadata (not created, or not visible to this principal)."""
    count = sum(1 for p in cluster.metadata().partitions if p.topic == CONSUMER_OFFSETS_TOPIC)
    if not count:
        return {}
    return {g: TopicPartition(CONSUMER_OFFSETS_TOPIC, offsets_partition(g, count)) for g in groups if not isinstance(g, QueryReader)}


def unstable_offsets(
    cluster: Cluster, by_group: Mapping[str, Mapping[TopicPartition, int]], offsets_of: Mapping[str, TopicPartition],
    lso: LsoSnapshot, missing: list[Missing],
) -> dict[str, frozenset[TopicPartition]]:
    """The stable offset fetch (as read_committed consumers make it) of the groups whose offsets
    partition holds an open transaction now (its LSO trails its HW), or of every group when the
    offsets partitions are not known; a group whose coordinator did not answer is named in ``missing``."""
    def open_there(group: str) -> bool:
        tp = offsets_of.get(group)
        o = lso.offsets.get(tp) if tp is not None else None
        return o is not None and o.lag > 0

    asked = {g: tps for g, tps in by_group.items() if tps and not isinstance(g, QueryReader) and (not offsets_of or open_there(g))}
    if not asked:
        return {}
    fetched = cluster.unstable_offsets(asked)
    missing.extend(m.within("stable offset fetch") for m in fetched.missing)
    return {g: tps for g, tps in fetched.value.items() if tps}


# -- rows --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionLag:
    """One partition whose LSO trails its HW, and the open transaction pinning the LSO."""

    # The numbers the lag is read from stay in narrow tables (output.py).
    TABLE_KEEPS: ClassVar[tuple[str, ...]] = ("high_watermark", "last_stable_offset", "lag_messages")

    topic: str
    partition: int
    high_watermark: int
    last_stable_offset: int
    lag_messages: int  # HW - LSO: offsets a read_committed consumer cannot read yet (markers included)
    open_transactions: int  # open transactions on the partition; the earliest one pins the LSO
    producer_id: int | None
    producer_epoch: int | None
    transactional_id: str | None  # None when no coordinator maps the producer id (e.g. hanging)
    txn_start_offset: int | None
    txn_age_ms: int | None  # verdicts.transaction_age: None only when it could not be read (see missing)
    txn_age_source: str | None  # coordinator, first_record or last_write (a lower bound)
    # The pinning transaction hangs, by hanging's whole rule and its coordinator's log (verdicts.pin_verdict):
    # None when that is undetermined (a coordinator or its log did not answer), or nothing pins the LSO.
    txn_hanging: bool | None
    # Its coordinator committed it and the partition lost the COMMIT marker (hanging's lost_commit):
    # not hanging; restore it with restore-commit, never abort it. None as txn_hanging.
    txn_lost_commit: bool | None
    last_write_age_ms: int | None  # since the producer's last write to this partition


@dataclass(frozen=True)
class WatchedPartitionLag(PartitionLag):
    lso_moved: bool | None = None  # since the previous sample; None on the first sample of the partition


@dataclass(frozen=True)
class GroupPosition:
    """Where one group stands on one partition: the first columns of every group-lag row."""

    # Where the group stands and what it waits for stay in narrow tables (output.py).
    TABLE_KEEPS: ClassVar[tuple[str, ...]] = ("committed_offset", "last_stable_offset", "high_watermark", "lag_to_lso_messages")

    group: str
    topic: str
    partition: int
    committed_offset: int | None  # None: none committed (the group is assigned the partition)
    last_stable_offset: int
    high_watermark: int


@dataclass(frozen=True)
class GroupLag(GroupPosition):
    """Transaction-aware lag of one group on one partition (see :func:`group_verdict`)."""

    lag_to_lso_messages: int  # LSO - committed: what a read_committed consumer could read (markers included)
    lag_to_hw_messages: int  # HW - committed: what every other lag tool reports
    # (none committed: measured from the log start when the verdict is unknown, else from the LSO)
    verdict: GroupVerdict
    readable_before_lso: bool | None  # probe result for committed < LSO; None when not probed
    producer_id: int | None  # the transaction pinning the LSO, when the verdict is blocked
    transactional_id: str | None
    txn_age_ms: int | None
    txn_age_source: str | None  # coordinator, first_record or last_write (a lower bound)
    txn_hanging: bool | None  # the blocking transaction hangs (as PartitionLag's: None when undetermined)
    txn_lost_commit: bool | None  # it lost its COMMIT marker: the group is stuck until restore-commit
    txn_overdue: bool | None  # the blocking transaction is past its own timeout and its coordinator's abort (verdicts.is_overdue)
    last_write_age_ms: int | None
    # "__consumer_offsets-N" when the transaction holding the group is on its offsets partition (its
    # stable offset fetch answers UNSTABLE_OFFSET_COMMIT here); None when on this partition, or not held.
    blocked_through: str | None
    # What the holding transaction is (verdicts.BlockVerdict): hanging, lost_commit, overdue,
    # past_timeout, untracked, in_flight or undetermined; None when the group is not held.
    txn_verdict: BlockVerdict | None = None


@dataclass(frozen=True)
class WatchedGroupLag(GroupLag):
    lso_moved: bool | None = None


def partition_lags(snapshot: LsoSnapshot, min_lag: int = 1) -> list[PartitionLag]:
    """A row per partition with ``lag_messages >= min_lag``, in topic and partition order."""
    rows = []
    for tp in sorted(snapshot.offsets):
        o = snapshot.offsets[tp]
        if o.lag < min_lag:
            continue
        txns = snapshot.open_transactions.get(tp, []) if o.lag > 0 else []
        facts = pin_facts(snapshot, tp)
        pin = facts.pin
        rows.append(
            PartitionLag(
                topic=tp.topic,
                partition=tp.partition,
                high_watermark=o.high_watermark,
                last_stable_offset=o.last_stable_offset,
                lag_messages=o.lag,
                open_transactions=len(txns),
                producer_id=pin.producer_id if pin else None,
                producer_epoch=pin.producer_epoch if pin else None,
                transactional_id=pin.transactional_id if pin else None,
                txn_start_offset=pin.start_offset if pin else None,
                txn_age_ms=facts.age_ms,
                txn_age_source=facts.age_source,
                txn_hanging=facts.hanging,
                txn_lost_commit=facts.lost_commit,
                last_write_age_ms=facts.last_write_age_ms,
            )
        )
    return rows


class GroupPlace(NamedTuple):
    """Where one group stands on one partition (:func:`group_positions`): the facts every group-lag row
    is made of, whichever command makes it. A tuple: a scrape at 5,000 groups makes 100,000 of them."""

    group: str
    tp: TopicPartition
    committed_offset: int | None  # None: none committed (the group is assigned the partition)
    offsets: Offsets
    verdict: GroupVerdict
    readable_before_lso: bool | None  # probe result for committed < LSO; None when not probed
    lag_to_lso_messages: int
    lag_to_hw_messages: int
    read_committed_lag: int  # readable_lag of the above
    # Blocked or waiting: the partition whose open transaction holds it (the row's own, or the
    # group's __consumer_offsets partition: verdicts.stable_verdict); None otherwise.
    held_at: TopicPartition | None = None


@dataclass(frozen=True)
class PinFacts:
    """What is known of the transaction pinning a partition's LSO (all None without a pin)."""

    pin: OpenTransaction | None
    age_ms: int | None
    age_source: str | None
    hanging: bool | None  # by hanging's whole rule and its coordinator's log; None when undetermined
    lost_commit: bool | None  # it lost its COMMIT marker (restore-commit releases it); None when undetermined
    overdue: bool | None  # past its own timeout and its coordinator's chance to abort it (verdicts.is_overdue)
    last_write_age_ms: int | None
    verdict: BlockVerdict | None = None  # what it is, in the one word every page names (verdicts.block_verdict)


NO_PIN = PinFacts(None, None, None, None, None, None, None)
NOT_PROBED = object()  # no probe result for a committed offset (None is a result: no record before the LSO)


def pin_facts(snapshot: LsoSnapshot, tp: TopicPartition) -> PinFacts:
    """The transaction pinning ``tp``'s LSO and what the verdicts say of it, at the snapshot's time."""
    pin = snapshot.pin(tp)
    if pin is None:
        return NO_PIN
    now = snapshot.taken_at_ms
    age = transaction_age(pin, now)
    pinned = snapshot.pin_verdict(pin)
    hanging, lost_commit = pin_flags(pinned)
    cleanup = snapshot.abort_cleanup_interval_ms
    return PinFacts(pin, age.ms if age else None, age.source if age else None, hanging, lost_commit,
                    is_overdue(pin, now, cleanup), last_write_age_ms(pin, now), block_verdict(pinned, pin, now, cleanup))


def group_positions(snapshot: GroupSnapshot, min_lag: int = 0) -> Iterator[GroupPlace]:
    """Per group and partition with a committed offset, or assigned without one (see
    :func:`kafkatxn.verdicts_groups.uncommitted_verdict`), in group, topic and partition order: where it stands.
    Places with ``lag_to_lso_messages < min_lag`` are left out unless blocked (a blocked group has no
    LSO lag, and is the finding) or unknown. The one definition behind :func:`group_lags` and the
    exporter's and check's group samples; 100,000 places a scrape at 5,000 groups, so kept lean.
    A place held by an open transaction (at its LSO, or through the group's offsets partition) is
    **waiting** or **blocked** by :func:`kafkatxn.verdicts_groups.held_verdict` of that transaction."""
    offsets = snapshot.lso.offsets
    get_offsets = offsets.get
    first_readable = snapshot.first_readable
    log_start = snapshot.log_start
    blocked, unknown = GroupVerdict.blocked, GroupVerdict.unknown
    place = tuple.__new__  # GroupPlace's own __new__ is a Python function; 100,000 calls
    committed_of = snapshot.committed
    for group in sorted(committed_of):
        unstable = snapshot.unstable.get(group, ())
        for tp, c in sorted(committed_of[group].items()):
            o = get_offsets(tp)
            if o is None:
                continue  # its offsets did not arrive: named in missing
            hw, lso = o  # Offsets(high_watermark, last_stable_offset)
            if c < 0:  # none committed: where it stands is where its auto.offset.reset starts
                readable = None
                verdict = uncommitted_verdict(log_start.get(tp), lso, hw)
                at = log_start.get(tp, lso) if verdict is unknown else lso
                committed = None
            else:
                probed = first_readable.get((tp, c), NOT_PROBED) if c < lso else NOT_PROBED
                readable = None if probed is NOT_PROBED else readable_before_lso(probed, lso)  # type: ignore[arg-type]
                verdict = group_verdict(c, lso, hw, readable)
                at = committed = c
            held = None
            if unstable and tp in unstable:
                verdict = stable_verdict(verdict, True)
            if verdict is blocked:
                held = snapshot.held_at(group, tp, tp in unstable)
                verdict = held_verdict(snapshot.lso.pin_classification(held), snapshot.lso.taken_at_ms)
            lag_to_lso = lso - at if lso > at else 0
            if lag_to_lso < min_lag and verdict is not blocked and verdict is not unknown:
                continue
            lag_to_hw = hw - at if hw > at else 0
            yield place(GroupPlace, (group, tp, committed, o, verdict, readable, lag_to_lso, lag_to_hw,
                                     readable_lag(verdict, committed, lso, lag_to_lso, lag_to_hw), held))


def group_lags(snapshot: GroupSnapshot, min_lag: int = 0) -> list[GroupLag]:
    """A row per :func:`group_positions` place, with the transaction holding the group where it is
    blocked or waiting."""
    rows = []
    for place in group_positions(snapshot, min_lag):
        held = place.held_at
        facts = pin_facts(snapshot.lso, held) if held is not None else NO_PIN
        pin = facts.pin
        rows.append(
            GroupLag(
                group=place.group,
                topic=place.tp.topic,
                partition=place.tp.partition,
                committed_offset=place.committed_offset,
                last_stable_offset=place.offsets.last_stable_offset,
                high_watermark=place.offsets.high_watermark,
                lag_to_lso_messages=place.lag_to_lso_messages,
                lag_to_hw_messages=place.lag_to_hw_messages,
                verdict=place.verdict,
                readable_before_lso=place.readable_before_lso,
                producer_id=pin.producer_id if pin else None,
                transactional_id=pin.transactional_id if pin else None,
                txn_age_ms=facts.age_ms,
                txn_age_source=facts.age_source,
                txn_hanging=facts.hanging,
                txn_lost_commit=facts.lost_commit,
                txn_overdue=facts.overdue,
                last_write_age_ms=facts.last_write_age_ms,
                blocked_through=str(held) if held is not None and held != place.tp else None,
                txn_verdict=facts.verdict,
            )
        )
    return rows


def readable_lag(verdict: GroupVerdict, committed: int | None, lso: int, lag_to_lso: int, lag_to_hw: int) -> int:
    """What a read_committed consumer still has to read on this partition now.

    Gaps that the probe found hold only markers and aborted records count 0; a group blocked at the
    LSO can read nothing until the transaction ends (0, its block is the finding); a group past the
    LSO (reading uncommitted) has ``HW - committed``; otherwise the gap to the LSO (markers included
    when it was not probed). A group without a commit whose start is unknown: at most the gap
    from the log start to the LSO (``earliest``).
    """
    if verdict is GroupVerdict.caught_up or verdict is GroupVerdict.blocked or verdict is GroupVerdict.waiting:
        return 0
    if committed is not None and committed > lso:
        return lag_to_hw
    return lag_to_lso


def read_committed_lag(row: GroupLag) -> int:
    """:func:`readable_lag` of a row."""
    return readable_lag(row.verdict, row.committed_offset, row.last_stable_offset, row.lag_to_lso_messages, row.lag_to_hw_messages)


# -- watching ----------------------------------------------------------------------------------


def lso_moved(previous: LsoSnapshot | None, current: LsoSnapshot) -> dict[TopicPartition, bool | None]:
    """Per partition of ``current``: did its LSO change since ``previous``? None when not seen before."""
    before = previous.offsets if previous is not None else {}
    return {
        tp: (o.last_stable_offset != before[tp].last_stable_offset) if tp in before else None
        for tp, o in current.offsets.items()
    }


R = TypeVar("R", PartitionLag, GroupLag)


def with_movement(rows: Sequence[R], moved: Mapping[TopicPartition, bool | None]) -> list:
    """The rows as their watched variant, with ``lso_moved`` filled in."""
    out = []
    for row in rows:
        watched = WatchedGroupLag if isinstance(row, GroupLag) else WatchedPartitionLag
        values = {f.name: getattr(row, f.name) for f in dataclasses.fields(row)}
        out.append(watched(**values, lso_moved=moved.get(TopicPartition(row.topic, row.partition))))
    return out


# -- ordering and findings ---------------------------------------------------------------------


def sort_rows(rows: Sequence[R], sort: str | None = None, top: int | None = None) -> list[R]:
    """Largest lag (``lag``) or oldest pinning transaction (``age``) first; ``top`` keeps the first K.

    Without ``sort`` the rows keep their order. Ties keep topic and partition order.
    """
    out = list(rows)
    if sort == "lag":
        out.sort(key=lambda r: -(r.lag_messages if isinstance(r, PartitionLag) else r.lag_to_lso_messages))
    elif sort == "age":
        # Rows without a known age go last.
        out.sort(key=lambda r: -(best_age_ms(r.txn_age_ms, r.last_write_age_ms) or -1))
    elif sort is not None:
        raise ValueError(f"unknown sort key {sort!r}")
    return out[:top] if top is not None else out


def blocked_row_severity(row: GroupLag, critical_age_ms: int | None) -> Severity:
    """:func:`kafkatxn.verdicts_groups.blocked_severity` of a blocked row (the one answer check, diagnose
    and the exporter give too)."""
    too_old = is_too_old(row.txn_age_ms, critical_age_ms)
    if row.txn_verdict is not None:
        return block_severity(row.txn_verdict, too_old, old=False)
    return blocked_severity(row.txn_hanging, bool(row.txn_overdue), too_old, old=False, lost_commit=row.txn_lost_commit)


def partitions_exit_code(rows: Iterable[PartitionLag], critical_age_ms: int | None = DEFAULT_CRITICAL_AGE_MS) -> int:
    """0 no LSO lag among the rows; 1 some (a warning: every open transaction makes some);
    2 a partition pinned by a transaction at least ``critical_age_ms`` old."""
    code = EXIT_OK
    for r in rows:
        if r.lag_messages <= 0:
            continue
        if is_too_old(best_age_ms(r.txn_age_ms, r.last_write_age_ms), critical_age_ms):
            return EXIT_CRITICAL
        code = EXIT_WARNING
    return code


def groups_exit_code(rows: Iterable[GroupLag], critical_age_ms: int | None = DEFAULT_CRITICAL_AGE_MS,
                     lag_threshold: int = DEFAULT_LAG_THRESHOLD) -> int:
    """0 every row caught up, waiting on a transaction in flight, or lagging by less than
    ``lag_threshold`` messages (:func:`kafkatxn.verdicts_groups.lag_is_finding`); 1 a group blocked, of
    unknown start, or lagging by more; 2 a group blocked (or waiting) behind a transaction that
    hangs, lost its COMMIT marker, is past its own timeout, or is at least ``critical_age_ms`` old.
    (A block behind a transaction whose verdict is undetermined is :func:`undetermined_pins`.)"""
    code = EXIT_OK
    for r in rows:
        verdict = r.verdict
        if verdict is GroupVerdict.caught_up:
            continue
        if verdict is GroupVerdict.blocked or verdict is GroupVerdict.waiting:
            if blocked_row_severity(r, critical_age_ms) is Severity.critical:
                return EXIT_CRITICAL
            if verdict is GroupVerdict.waiting:
                continue
        elif verdict is GroupVerdict.lagging and not lag_is_finding(verdict, read_committed_lag(r), lag_threshold):
            continue
        code = EXIT_WARNING
    return code


def offsets_hints(rows: Iterable[GroupLag]) -> list[str]:
    """For each group blocked through its offsets partition, what holds it and where the fix is."""
    out: dict[str, str] = {}
    for r in rows:
        if r.verdict is GroupVerdict.blocked and r.blocked_through and r.group not in out:
            who = f"producer {r.producer_id}" + (f" ({r.transactional_id})" if r.transactional_id else "") \
                if r.producer_id is not None else "a transaction not found (it may just have ended)"
            out[r.group] = (f"group {r.group!r} cannot fetch its committed offsets (UNSTABLE_OFFSET_COMMIT): {who} has a "
                            f"transactional offset commit open on {r.blocked_through}; the fix: kafkatxn diagnose --group {r.group}")
    return list(out.values())


def undetermined_pins(snapshot: LsoSnapshot, rows: Iterable[PartitionLag | GroupLag]) -> list[Missing]:
    """The pinning (or blocking) transactions of ``rows`` whose verdict is undetermined, one per
    partition, as the parts that did not answer: the answer is undetermined (exit 3) unless a
    critical finding stands, never a reassuring "not hanging"."""
    out: dict[TopicPartition, Missing] = {}
    for r in rows:
        tp = TopicPartition(r.topic, r.partition)
        if r.producer_id is None or r.txn_hanging is not None or tp in out:
            continue
        pin = snapshot.pin(tp)
        if pin is not None:
            out[tp] = Missing(tp, f"producer {pin.producer_id}: {snapshot.undetermined_reason(pin)}", "hanging verdict")
    return list(out.values())


def restore_hints(snapshot: LsoSnapshot, rows: Iterable[PartitionLag | GroupLag]) -> list[str]:
    """For each pinning transaction of ``rows`` that lost its COMMIT marker, the command that
    releases it: ``restore-commit``, never ``abort`` (which would drop committed records)."""
    out: dict[TopicPartition, str] = {}
    for r in rows:
        tp = TopicPartition(r.topic, r.partition)
        if r.txn_lost_commit and tp not in out and (pin := snapshot.pin(tp)) is not None:
            out[tp] = lost_commit.restore_note(tp, pin.producer_id, pin.start_offset)
    return list(out.values())


# -- one call per command ----------------------------------------------------------------------


@dataclass
class LsoReport:
    """What ``kafkatxn lso`` shows: rows (their watched variant when watching), and how it ends."""

    rows: list
    snapshot: LsoSnapshot  # the reference for the next sample's lso_moved
    missing: list[Missing]
    exit_code: int
    hints: list[str] = field(default_factory=list)  # the next step for a lost COMMIT marker (restore_hints)
    measured: int | None = None  # group partitions measured before --min-lag and --top (groups only)


def partition_report(
    cluster: Cluster,
    topics: Sequence[str] | None = None,
    min_lag: int = 1,
    sort: str | None = "lag",
    top: int | None = None,
    critical_age_ms: int | None = DEFAULT_CRITICAL_AGE_MS,
    watching: bool = False,
    previous: LsoSnapshot | None = None,
) -> LsoReport:
    """Partitions with LSO lag >= ``min_lag`` (all non-internal topics unless ``topics``)."""
    snapshot = take_snapshot(cluster, [p.tp for p in cluster.select_partitions(topics)])
    rows = partition_lags(snapshot, min_lag)
    code = partitions_exit_code(rows, critical_age_ms)
    return _report(rows, snapshot, snapshot.missing, code, sort, top, watching, previous)


def group_report(
    cluster: Cluster,
    groups: Sequence[str] | None = None,
    topics: Sequence[str] | None = None,
    min_lag: int = 0,
    sort: str | None = None,
    top: int | None = None,
    critical_age_ms: int | None = DEFAULT_CRITICAL_AGE_MS,
    probe_max_gap: int = DEFAULT_PROBE_MAX_GAP,
    watching: bool = False,
    previous: LsoSnapshot | None = None,
    lag_threshold: int = DEFAULT_LAG_THRESHOLD,
    readers: Mapping[str, dict[TopicPartition, int]] | None = None, every_group: bool = False,
) -> LsoReport:
    """Transaction-aware lag of ``groups`` (and ``readers``: take_group_snapshot) on the partitions they committed
    offsets for or, without a commit, are assigned."""
    snapshot = take_group_snapshot(cluster, groups, topics, probe_max_gap, readers=readers, every_group=every_group)
    rows = group_lags(snapshot, min_lag)
    code = groups_exit_code(rows, critical_age_ms, lag_threshold)
    report = _report(rows, snapshot.lso, snapshot.missing, code, sort, top, watching, previous)
    report.hints += offsets_hints(rows)
    report.measured = sum(len(offsets) for offsets in snapshot.committed.values())
    return report


def _report(
    rows: list, snapshot: LsoSnapshot, missing: list[Missing], findings_code: int, sort: str | None, top: int | None,
    watching: bool, previous: LsoSnapshot | None,
) -> LsoReport:
    # Over every row: rows left out by --top still count.
    missing = list(missing) + undetermined_pins(snapshot, rows)
    hints = restore_hints(snapshot, rows)
    rows = sort_rows(rows, sort, top)
    if watching:
        rows = with_movement(rows, lso_moved(previous, snapshot))
    return LsoReport(rows, snapshot, missing, exit_code(findings_code, missing), hints)
