"""The fact layer's LSO facts (:mod:`kafkatxn.facts`): the one read of the cluster behind ``lso``, its
``--groups``, the group questions of ``diagnose`` and the group pass of ``check --groups`` and the
exporter — each partition's last stable offset (read_committed ListOffsets) and high
watermark (read_uncommitted), the open transactions pinning the LSOs that trail (DescribeProducers
only there, through the one pins sequence :func:`kafkatxn.facts.pins`), and for groups their committed offsets,
the ``__consumer_offsets`` partitions that hold them and what lies below each LSO.

These are the only I/O of the LSO and group questions; the rows and verdicts over a snapshot are pure
(:mod:`kafkatxn.lso`, :mod:`kafkatxn.group_positions`).
"""

from __future__ import annotations

import dataclasses
import time
from itertools import chain, compress, repeat, starmap
from operator import gt, itemgetter
from dataclasses import field
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from kafkatxn import facts, gather
from kafkatxn.errors import NotFoundError
from kafkatxn.facts_probes import ProbeMemo
from kafkatxn.gather import probe_rounds
from kafkatxn.model import FRESH, Missing, Part, Partial, QueryReader, Record, TopicPartition, in_partition_order, record
from kafkatxn.offset_table import OffsetTable
from kafkatxn.validation import compile_regex
from kafkatxn.verdicts import Classification, OpenTransaction, PinVerdict, Verdict, pin_verdict, pinning_transaction
from kafkatxn.verdicts_groups import CONSUMER_OFFSETS_TOPIC, Offsets, may_have_ended, offsets_partition

if TYPE_CHECKING:
    from kafkatxn.kafka import Cluster


# Committed-offset gaps below the LSO up to this many are read to tell markers and aborted records
# from lag; larger gaps count as lag unread.
DEFAULT_PROBE_MAX_GAP = 1000


_SWAPPED = itemgetter(1, 0)  # (LSO, HW) -> (HW, LSO)


def _as_offsets(tps: Iterable[TopicPartition], pairs: Iterable[tuple[int, int]]):
    """``(tp, Offsets(HW, LSO))`` from each ``(LSO, HW)`` pair, in C (a named tuple's own __new__ is a Python step)."""
    return zip(tps, map(tuple.__new__, repeat(Offsets), map(_SWAPPED, pairs)))

# In a group's committed offsets: a partition its members are assigned that it has no commit on.
NO_COMMIT = -1


@record
class LsoSnapshot(Record):
    """Each partition's LSO and HW, the open transactions on those whose LSO trails, and their pins
    (:func:`take_snapshot`)."""

    taken_at_ms: int  # wall clock, for ages
    offsets: Mapping[TopicPartition, Offsets]  # a dict, or the answers' columns (OffsetTable, read-only)
    # Only for partitions whose LSO trails the HW; a partition may hold several open transactions.
    open_transactions: dict[TopicPartition, list[OpenTransaction]] = field(default_factory=dict)
    missing: list[Missing] = field(default_factory=list)
    # The pinning transactions through the one pins sequence (facts.pins), as hanging's scan has
    # every open transaction (facts_scan.Scan.pins): the same fact, of the LSOs that trail.
    pins: facts.Pins = field(default_factory=lambda: facts.Pins({}, 0, None))
    # The partitions of ``offsets`` whose LSO trails the HW, as take_snapshot found them (kept with
    # ``offsets``): the rows look at these few, not 30,000 again. None: not kept, read ``offsets``.
    lagging: list[TopicPartition] | None = None

    def __init__(self, taken_at_ms: int, offsets: Mapping[TopicPartition, Offsets],
                 open_transactions: dict[TopicPartition, list[OpenTransaction]] = FRESH, missing: list[Missing] = FRESH,
                 pins: facts.Pins = FRESH, lagging: list[TopicPartition] | None = None) -> None:
        self.__dict__.update(taken_at_ms=taken_at_ms, offsets=offsets,
                             open_transactions={} if open_transactions is FRESH else open_transactions,
                             missing=[] if missing is FRESH else missing,
                             pins=facts.Pins({}, 0, None) if pins is FRESH else pins,
                             lagging=lagging)

    @property
    def classifications(self) -> dict[tuple[TopicPartition, int], Classification]:
        """Each pinning transaction's classification by (partition, producer id), settled by its
        coordinator's log where the whole rule calls it hanging, as hanging settles it."""
        return self.pins.classifications

    @property
    def max_transaction_timeout_ms(self) -> int | None:
        """Given, or read only when a pinning transaction may hang."""
        return self.pins.max_transaction_timeout_ms

    @property
    def abort_cleanup_interval_ms(self) -> int | None:
        """Read only when a pin is past its own timeout (None: Kafka's default)."""
        return self.pins.abort_cleanup_interval_ms

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


@record
class GroupSnapshot(Record):
    """The groups' committed offsets over an LSO snapshot, with what was probed below the LSOs
    (:func:`take_group_snapshot`)."""

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

    def __init__(self, lso: LsoSnapshot, committed: dict[str, dict[TopicPartition, int]],
                 first_readable: dict[tuple[TopicPartition, int], int | None] = FRESH, missing: list[Missing] = FRESH,
                 log_start: dict[TopicPartition, int] = FRESH, offsets_partitions: dict[str, TopicPartition] = FRESH,
                 unstable: dict[str, frozenset[TopicPartition]] = FRESH) -> None:
        self.__dict__.update(lso=lso, committed=committed,
                             first_readable={} if first_readable is FRESH else first_readable,
                             missing=[] if missing is FRESH else missing,
                             log_start={} if log_start is FRESH else log_start,
                             offsets_partitions={} if offsets_partitions is FRESH else offsets_partitions,
                             unstable={} if unstable is FRESH else unstable)

    def held_at(self, group: str, tp: TopicPartition, unstable: bool) -> TopicPartition:
        """The partition whose open transaction holds ``group`` on ``tp``: its offsets partition
        when its offsets there are unstable, else ``tp`` itself."""
        return self.offsets_partitions.get(group, tp) if unstable else tp


def take_snapshot(
    cluster: Cluster, partitions: Iterable[TopicPartition], known: Mapping[TopicPartition, tuple[int, int]] | None = None,
    max_transaction_timeout_ms: int | None = None, settled: Mapping[tuple[TopicPartition, int], Classification] | None = None,
    again: bool = True, ordered: bool = False, lagging_only: bool = False,
) -> LsoSnapshot:
    """Offsets of ``partitions`` at both isolation levels, and the open transactions where the LSO lags.

    ``known``: ``(LSO, HW)`` pairs just read afresh (:func:`_ask_again`); only the partitions not in
    it are asked for. The pinning transactions their coordinator does not date
    are dated by their first record, and decided hanging or not (``max_transaction_timeout_ms``
    is read from the brokers only when one may hang and it is not given). ``ordered``: ``partitions`` are a
    list in partition order, each once (:func:`kafkatxn.model.in_partition_order`'s, as ``lso`` sends
    their offsets ahead): not checked again (30,000 comparisons). ``lagging_only``: the caller reads the
    offsets of the lagging partitions alone (``lso``'s rows): the answers' columns are kept as they are
    (an :class:`~kafkatxn.offset_table.OffsetTable`), not made a dict of every partition.
    """
    tps = partitions if ordered and type(partitions) is list else in_partition_order(partitions)
    taken_at_ms = int(time.time() * 1000)
    rest: list[TopicPartition] = tps
    offsets: dict[TopicPartition, Offsets] = {}
    if known:  # 30,000 partitions a pass: looked up in C
        pairs_known = known.looked_up(tps) if type(known) is OffsetTable else list(map(known.get, tps))
        rest = [tp for tp, pair in zip(tps, pairs_known) if pair is None] if None in pairs_known else []
        have = [tp for tp, pair in zip(tps, pairs_known) if pair is not None] if rest else tps
        pairs_known = [pair for pair in pairs_known if pair is not None] if rest else pairs_known
        offsets.update(_as_offsets(have, pairs_known))
    missing: list[Missing] = []
    if rest:
        asked = cluster.stable_and_high_offsets(rest, high_first=Offsets)  # made from the answers' columns
        if offsets or not lagging_only and type(asked.value) is OffsetTable:
            offsets.update(asked.value.items())
        else:
            offsets = asked.value  # (lagging_only) usually an OffsetTable: the few that trail found in C
        missing += asked.missing
    # HW > LSO (o.lag > 0), in C
    lagging = offsets.trailing() if isinstance(offsets, OffsetTable) else list(compress(offsets, starmap(gt, offsets.values())))
    before = len(missing)
    open_txns, view = gather.describe_open(cluster, lagging, missing)
    unanswered = {m.subject for m in missing[before:]}
    snapshot = LsoSnapshot(taken_at_ms, offsets, open_txns, missing, lagging=lagging)
    pins = [p for tp in sorted(lagging) if (p := snapshot.pin(tp)) is not None]
    # The one pins sequence (as hanging asks it), every pin dated: lso shows each one's age.
    found = facts.pins(cluster, pins, view, taken_at_ms, max_transaction_timeout_ms, missing, settled, date_all=True, cleanup=True)
    for pin in pins:  # the pins dated by their first records, where the partition lists them
        first = found.classifications[(pin.tp, pin.producer_id)].open_txn.first_record_timestamp_ms
        if first is not None and pin.first_record_timestamp_ms is None:
            t = dataclasses.replace(pin, first_record_timestamp_ms=first)
            open_txns[t.tp] = [t if (o.producer_id, o.start_offset) == (t.producer_id, t.start_offset) else o for o in open_txns[t.tp]]
    snapshot.pins = found
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
    # With those the pins sequence found ended: their partitions' offsets are read again too.
    suspects = [tp for tp in described if may_have_ended(snapshot.pin(tp), c := snapshot.pin_classification(tp))
                or facts.ended_while_asked(c)]
    if not suspects:
        return
    # A partition fetched ahead (its first record dated) was read after the coordinators answered:
    # the LSO that Fetch answered with is the offsets asked again. The rest are asked afresh.
    fresh = cluster.offsets_fetched_ahead(suspects)
    with cluster.afresh():  # whether a transaction ended since: the run's answers will not do
        if rest := [tp for tp in suspects if tp not in fresh]:
            fresh |= cluster.stable_and_high_offsets(rest).value
        moved = {tp: pair for tp, pair in fresh.items() if pair[0] != snapshot.offsets[tp].last_stable_offset}
        if not moved:
            return
        again = take_snapshot(cluster, moved, moved, snapshot.max_transaction_timeout_ms, settled, again=False)
    snapshot.offsets = dict(chain(snapshot.offsets.items(), again.offsets.items()))  # (an OffsetTable is read-only: the run's answers)
    if snapshot.lagging is not None:
        snapshot.lagging = [tp for tp in snapshot.lagging if tp not in moved] + list(again.lagging or ())
    for tp in moved:
        snapshot.open_transactions.pop(tp, None)
    snapshot.open_transactions.update(again.open_transactions)
    kept = snapshot.pins
    snapshot.pins = dataclasses.replace(
        kept,
        classifications={**{key: c for key, c in kept.classifications.items() if key[0] not in moved}, **again.pins.classifications},
        ended=frozenset(key for key in kept.ended if key[0] not in moved) | again.pins.ended,
        settled_by_log=frozenset(key for key in kept.settled_by_log if key[0] not in moved) | again.pins.settled_by_log,
    )
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


@record
class HeldGroupSnapshot(Record):
    """A group snapshot (its pins classified, settled by the log and dated by the one pins sequence,
    :func:`kafkatxn.facts.pins`) and, where a group is held, the timeouts that date what holds it:
    what ``diagnose`` decides on."""

    taken_at_ms: int
    groups: GroupSnapshot
    max_transaction_timeout_ms: int | None = None
    max_timeout_given: bool = False  # by the caller (--max-transaction-timeout): the suggested abort carries it
    abort_cleanup_interval_ms: int | None = None  # the coordinators' (None: Kafka's default)
    missing: list[Missing] = field(default_factory=list)

    def __init__(self, taken_at_ms: int, groups: GroupSnapshot, max_transaction_timeout_ms: int | None = None,
                 max_timeout_given: bool = False, abort_cleanup_interval_ms: int | None = None,
                 missing: list[Missing] = FRESH) -> None:
        self.__dict__.update(taken_at_ms=taken_at_ms, groups=groups,
                             max_transaction_timeout_ms=max_transaction_timeout_ms, max_timeout_given=max_timeout_given,
                             abort_cleanup_interval_ms=abort_cleanup_interval_ms,
                             missing=[] if missing is FRESH else missing)


def take_held_group_snapshot(
    cluster: Cluster,
    groups: Sequence[str] | None = None,
    topics: Sequence[str] | None = None,
    probe_max_gap: int = DEFAULT_PROBE_MAX_GAP,
    max_transaction_timeout_ms: int | None = None, readers: Mapping[str, dict[TopicPartition, int]] | None = None,
    every_group: bool = False,
) -> HeldGroupSnapshot:
    """:func:`take_group_snapshot`; where a group is held, the brokers' maximum timeout when neither
    given nor read for the pins."""
    snap = take_group_snapshot(cluster, groups, topics, probe_max_gap, max_transaction_timeout_ms, readers, every_group)
    missing = list(snap.missing)
    given = max_transaction_timeout_ms is not None  # 0 too: every idle transaction is checked now
    out = HeldGroupSnapshot(snap.lso.taken_at_ms, snap, missing=missing,
                            max_transaction_timeout_ms=max_transaction_timeout_ms if given else snap.lso.max_transaction_timeout_ms,
                            max_timeout_given=given)
    from kafkatxn import group_positions  # the group pass's: lso without --groups does not import it

    # Where a group is held (blocked or waiting): its partition, or its offsets partition.
    if not any(place.held_at is not None for place in group_positions.group_positions(snap)):
        return out
    out.abort_cleanup_interval_ms = snap.lso.abort_cleanup_interval_ms
    if out.max_transaction_timeout_ms is None:
        configs = gather.cluster_transaction_configs(cluster)
        missing.extend(configs.missing)
        out.abort_cleanup_interval_ms = configs.abort_cleanup_interval_ms
        out.max_transaction_timeout_ms = configs.max_transaction_timeout_ms
        if out.max_transaction_timeout_ms is None:
            out.max_transaction_timeout_ms, _config_missing = gather.cluster_max_transaction_timeout(cluster)  # raises, naming why
    out.taken_at_ms = int(time.time() * 1000)
    return out


def committed_offsets_matching(cluster: Cluster, group_regex: str | None) -> tuple[dict, list[Missing]]:
    """:func:`committed_offsets` of the groups ``group_regex`` matches (searched; every group without
    it): the group pass of ``check --groups`` and the exporter, taken before their offsets pass."""
    listed = cluster.list_groups_partial()  # a broker that did not list its groups: named, the rest go on
    names = listed.value
    missing = list(listed.missing)
    if group_regex:
        pattern = compile_regex(group_regex, "--group-regex")
        names = [g for g in names if pattern.search(g)]
        if not names:
            # A typo in the regex must not turn into a check that is always OK (as --topic-regex).
            missing.append(Missing(Part("--group-regex"), f"no consumer group matches {group_regex!r}"))
    if not names:
        return {}, missing
    committed, more = committed_offsets(cluster, names)
    return committed, missing + more


def committed_offsets(
    cluster: Cluster, groups: Sequence[str], topics: Sequence[str] | None = None
) -> tuple[dict[str, dict[TopicPartition, int]], list[Missing]]:
    """The first step of :func:`take_group_snapshot`: committed offsets per group, on partitions
    that exist (of ``topics`` when given), and ``NO_COMMIT`` on the partitions a Stable group's
    members are assigned without a commit. Read them before the offsets they are compared with."""
    # The members' assignments go down with the commits' OffsetFetch, read after it at each coordinator.
    cluster.group_assignments_ahead(groups)
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
    max_transaction_timeout_ms: int | None = None,
    settled: Mapping[tuple[TopicPartition, int], Classification] | None = None,
    memo: ProbeMemo | None = None, pairs: Mapping[TopicPartition, tuple[int, int]] | None = None,
) -> GroupSnapshot:
    """The rest of :func:`take_group_snapshot` after :func:`committed_offsets`: the LSO snapshot of
    the groups' partitions (offsets the run read after the committed offsets are its answers, or the
    ``(LSO, HW)`` ``pairs`` given; ``settled`` pins, decided by the coordinator's log earlier in the
    command, are not read again) and the probes (those ``memo`` still knows the answer of are not read
    again: the exporter's)."""
    offsets_of = group_offsets_partitions(cluster, by_group)
    # The groups' partitions in the order their commits came (a group's are a topic's, in a row):
    # take_snapshot sorts them, and runs sort in a tenth of a set's hash order (100,000 partitions).
    wanted = dict.fromkeys(chain.from_iterable(by_group.values()))
    wanted.update(dict.fromkeys(offsets_of.values()))
    lso = take_snapshot(cluster, wanted, pairs, max_transaction_timeout_ms, settled)
    missing.extend(lso.missing)
    unstable = unstable_offsets(cluster, by_group, offsets_of, lso, missing)
    rounds = probe_rounds(by_group, lso.offsets, probe_max_gap)
    # Only places without a commit (NO_COMMIT, < 0) need the log start; most groups have none. The
    # probe answers ``memo`` kept that found a record need it too: asked in the same ListOffsets, every
    # one kept (those whose offsets moved are probed again, their log start unread), as
    # log_starts_ahead sent it with the offsets' round trip.
    uncommitted = uncommitted_partitions(by_group)
    checked: dict[TopicPartition, None] = {}
    if memo is not None:
        memo.to_check(rounds, lso.offsets)  # the kept answers still valid, for memo.answers
        checked = dict.fromkeys(tp for tp in memo.recorded() if tp not in uncommitted)
    asked_starts: list[Missing] = []
    # Every round of probes after the first goes with it, and the first with the log starts when they are
    # asked (the memo decides per round what it asks): the same requests, in one round trip.
    for starts in (rounds if uncommitted else rounds[1:]) if memo is None else ():
        cluster.first_readable_offsets_ahead(starts)
    log_start = gather.log_starts(cluster, [*sorted(uncommitted), *checked], asked_starts)
    # A kept answer's log start that did not arrive is no missing part: that gap is probed again.
    missing.extend(m for m in asked_starts if m.subject not in checked)
    first_readable: dict[tuple[TopicPartition, int], int | None] = {}
    for starts in rounds:
        known = memo.answers(starts, lso.offsets, log_start) if memo is not None else {}
        asked = {tp: c for tp, c in starts.items() if tp not in known} if known else starts
        probed = cluster.first_readable_offsets(asked) if asked else Partial({})
        missing.extend(probed.missing)
        first_readable.update({(tp, starts[tp]): off for tp, off in probed.value.items()})
        first_readable.update({(tp, starts[tp]): off for tp, off in known.items()})
        if memo is not None:
            memo.probed(asked, probed.value, lso.offsets)
    if memo is not None:
        memo.gathered()
    if checked:
        log_start = {tp: start for tp, start in log_start.items() if tp in uncommitted}
    return GroupSnapshot(lso, by_group, first_readable, missing, log_start, offsets_of, unstable)


def uncommitted_partitions(by_group: Mapping[str, Mapping[TopicPartition, int]]) -> set[TopicPartition]:
    """The partitions some group is assigned without a commit (NO_COMMIT): where it starts needs the log start."""
    return {tp for offsets in by_group.values() if offsets and min(offsets.values()) < 0 for tp, c in offsets.items() if c < 0}


def log_starts_ahead(cluster: Cluster, by_group: Mapping[str, Mapping[TopicPartition, int]], memo: ProbeMemo) -> None:
    """The log starts :func:`finish_group_snapshot` of ``by_group`` with ``memo`` will ask (the partitions
    without a commit, and those a kept probe answer found a record on), sent with the next round trip
    (the offsets' one: the exporter's), whose call then takes them instead of a round trip of its own."""
    cluster.log_start_offsets_ahead([*uncommitted_partitions(by_group), *memo.recorded()])


def group_offsets_partitions(cluster: Cluster, groups: Iterable[str]) -> dict[str, TopicPartition]:
    """Each group's ``__consumer_offsets`` partition (:func:`kafkatxn.verdicts_groups.offsets_partition`);
    none when the topic is not in the metadata (not created, or not visible to this principal). Each
    group's is kept per partition count (:data:`_OFFSETS_PARTITIONS`): the exporter's scrapes ask the
    same groups' every time (Java's string hash of 5,000 names: 15 ms a scrape)."""
    count = sum(1 for p in cluster.metadata().partitions if p.topic == CONSUMER_OFFSETS_TOPIC)
    if not count:
        return {}
    kept = _OFFSETS_PARTITIONS.get(count)
    if kept is None or len(kept) > _KEPT_GROUPS:  # a partition count not seen, or too many groups kept
        _OFFSETS_PARTITIONS.clear()
        kept = _OFFSETS_PARTITIONS[count] = {}
    out = {g: kept.get(g) for g in groups if not isinstance(g, QueryReader)}
    if None in out.values():
        for g, tp in out.items():
            if tp is None:
                out[g] = kept[g] = TopicPartition(CONSUMER_OFFSETS_TOPIC, offsets_partition(g, count))
    return out


# __consumer_offsets partition count -> group -> its offsets partition (group_offsets_partitions'),
# dropped past _KEPT_GROUPS names (group names come and go over an exporter's days).
_OFFSETS_PARTITIONS: dict[int, dict[str, TopicPartition]] = {}
_KEPT_GROUPS = 200_000


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
