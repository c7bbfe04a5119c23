"""Where each consumer group stands on each partition, made once over a group snapshot
(:class:`kafkatxn.facts_lso.GroupSnapshot`): its offsets, the transaction pinning the LSO
(:func:`pin_facts`) and the verdicts of :mod:`kafkatxn.verdicts_groups`. ``lso --groups``' and
``diagnose``'s rows (:func:`group_lags`), ``check --groups`` and the exporter's group series are all
made from these places.
Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import fields
from itertools import compress, repeat
from operator import attrgetter, is_not, itemgetter
from typing import TYPE_CHECKING, Iterator, Sequence

from kafkatxn.model import FrozenRecord, TopicPartition, record
from kafkatxn.named_tuples import NamedTuple  # typing's, without its __new__ compiled as the class is made
from kafkatxn.pinning import NO_PIN, PinFacts, pin_facts
from kafkatxn.plain import RecordColumns
from kafkatxn.verdicts_groups import (
    BLOCKED, CAUGHT_UP, UNKNOWN, WAITING, BlockVerdict, GroupVerdict, Offsets, group_verdict, held_verdict, readable_before_lso,
    stable_verdict, uncommitted_verdict,
)

if TYPE_CHECKING:
    from kafkatxn.facts_lso import GroupSnapshot


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
    # group's __consumer_offsets partition: verdicts_groups.stable_verdict); None otherwise.
    held_at: TopicPartition | None = None


NOT_PROBED = object()  # no probe result for a committed offset (None is a result: no record before the LSO)


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
    blocked, unknown, caught_up = BLOCKED, UNKNOWN, CAUGHT_UP
    place = tuple.__new__  # GroupPlace's own __new__ is a Python function; 100,000 calls
    committed_of = snapshot.committed
    unstable_of = snapshot.unstable
    for group in sorted(committed_of):
        unstable = unstable_of.get(group, ())
        committed_here = committed_of[group]
        # A group's partitions sorted, then their offsets looked up: the order of its items sorted (each
        # partition once), at an eighth of the cost (its (partition, offset) pairs compared as tuples).
        for tp in sorted(committed_here):
            c = committed_here[tp]
            o = get_offsets(tp)
            if o is None:
                continue  # its offsets did not arrive: named in missing
            hw, lso = o  # Offsets(high_watermark, last_stable_offset)
            if c < 0:  # none committed: where it stands is where its auto.offset.reset starts
                readable = None
                verdict = uncommitted_verdict(log_start.get(tp), lso, hw)
                at = log_start.get(tp, lso) if verdict is unknown else lso
                committed = None
            elif c < lso:  # a gap below the LSO: probed when small enough
                probed = first_readable.get((tp, c), NOT_PROBED)
                readable = None if probed is NOT_PROBED else readable_before_lso(probed, lso)  # type: ignore[arg-type]
                verdict = group_verdict(c, lso, hw, readable)
                at = committed = c
            else:
                readable = None
                # group_verdict's first rule taken inline (at or past the HW: caught up): three places in four.
                verdict = caught_up if c >= hw else group_verdict(c, lso, hw, None)
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
            # readable_lag's first rule taken inline (caught up: 0): three places in four are caught up.
            yield place(GroupPlace, (group, tp, committed, o, verdict, readable, lag_to_lso, lag_to_hw,
                                     0 if verdict is caught_up else readable_lag(verdict, committed, lso, lag_to_lso, lag_to_hw),
                                     held))


def readable_lag(verdict: GroupVerdict, committed: int | None, lso: int, lag_to_lso: int, lag_to_hw: int) -> int:
    """What a read_committed consumer still has to read on this partition now.

    Gaps that the probe found hold only markers and aborted records count 0; a group blocked at the
    LSO can read nothing until the transaction ends (0, its block is the finding); a group past the
    LSO (reading uncommitted) has ``HW - committed``; otherwise the gap to the LSO (markers included
    when it was not probed). A group without a commit whose start is unknown: at most the gap
    from the log start to the LSO (``earliest``).
    """
    if verdict is CAUGHT_UP or verdict is BLOCKED or verdict is WAITING:  # module names: read in C, not through the enum
        return 0
    if committed is not None and committed > lso:
        return lag_to_hw
    return lag_to_lso


# -- rows: lso --groups' and diagnose's ------------------------------------------------------


@record
class GroupPosition(FrozenRecord):
    """Where one group stands on one partition: the first columns of every group-lag row."""

    # Where the group stands and what it waits for stay in narrow tables (output.py). Not annotated: a
    # record's annotations are its fields.
    TABLE_KEEPS = ("committed_offset", "last_stable_offset", "high_watermark", "lag_to_lso_messages")

    group: str
    topic: str
    partition: int
    committed_offset: int | None  # None: none committed (the group is assigned the partition)
    last_stable_offset: int
    high_watermark: int

    def __init__(self, group: str, topic: str, partition: int, committed_offset: int | None, last_stable_offset: int,
                 high_watermark: int) -> None:
        self.__dict__.update(group=group, topic=topic, partition=partition, committed_offset=committed_offset,
                             last_stable_offset=last_stable_offset, high_watermark=high_watermark)


@record
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
    txn_overdue: bool | None  # the blocking transaction is past its own timeout and its coordinator's abort (verdicts_age.is_overdue)
    last_write_age_ms: int | None
    # "__consumer_offsets-N" when the transaction holding the group is on its offsets partition (its
    # stable offset fetch answers UNSTABLE_OFFSET_COMMIT here); None when on this partition, or not held.
    blocked_through: str | None
    # What the holding transaction is (verdicts_groups.BlockVerdict): hanging, lost_commit, overdue,
    # past_timeout, untracked, in_flight or undetermined; None when the group is not held.
    txn_verdict: BlockVerdict | None = None

    def __init__(self, group: str, topic: str, partition: int, committed_offset: int | None, last_stable_offset: int,
                 high_watermark: int, lag_to_lso_messages: int, lag_to_hw_messages: int, verdict: GroupVerdict,
                 readable_before_lso: bool | None, producer_id: int | None, transactional_id: str | None,
                 txn_age_ms: int | None, txn_age_source: str | None, txn_hanging: bool | None,
                 txn_lost_commit: bool | None, txn_overdue: bool | None, last_write_age_ms: int | None,
                 blocked_through: str | None, txn_verdict: BlockVerdict | None = None) -> None:
        GroupPosition.__init__(self, group, topic, partition, committed_offset, last_stable_offset, high_watermark)
        self.__dict__.update(lag_to_lso_messages=lag_to_lso_messages, lag_to_hw_messages=lag_to_hw_messages,
                             verdict=verdict, readable_before_lso=readable_before_lso, producer_id=producer_id,
                             transactional_id=transactional_id, txn_age_ms=txn_age_ms, txn_age_source=txn_age_source,
                             txn_hanging=txn_hanging, txn_lost_commit=txn_lost_commit, txn_overdue=txn_overdue,
                             last_write_age_ms=last_write_age_ms, blocked_through=blocked_through,
                             txn_verdict=txn_verdict)


GROUP_LAG_FIELDS = tuple(f.name for f in fields(GroupLag))


def _pin_tail(facts: PinFacts, blocked_through: str | None) -> tuple:
    """A GroupLag row's last fields (producer_id to txn_verdict) from what is known of its pin."""
    pin = facts.pin
    return (pin.producer_id if pin else None, pin.transactional_id if pin else None, facts.age_ms, facts.age_source,
            facts.hanging, facts.lost_commit, facts.overdue, facts.last_write_age_ms, blocked_through, facts.verdict)


# A row's last fields when the group is not held: no pinning transaction, nothing it is held through.
_NOT_HELD = _pin_tail(NO_PIN, None)
_TAIL_FIELDS = GROUP_LAG_FIELDS[-len(_NOT_HELD):]
_TOPIC, _PARTITION = attrgetter("topic"), attrgetter("partition")
_HW, _LSO = itemgetter(0), itemgetter(1)  # of Offsets(high_watermark, last_stable_offset)


def group_lag_columns(snapshot: GroupSnapshot, min_lag: int = 0) -> tuple[RecordColumns, Sequence[int]]:
    """:func:`group_lags`' rows, and each one's :func:`read_committed_lag` (what :func:`group_positions`
    found, in the same order)."""
    places = list(group_positions(snapshot, min_lag))
    # One sequence per field of the places, turned over in C: no object, no Python step per row.
    group, tp, committed, offsets, verdict, readable, lag_to_lso, lag_to_hw, lag, held = zip(*places) if places else ((),) * 10
    tail: dict[str, list] = {name: [value] * len(places) for name, value in zip(_TAIL_FIELDS, _NOT_HELD)}
    held_tail: dict[tuple[TopicPartition, TopicPartition], tuple] = {}  # (held at, the row's) -> its last fields
    # The few places held (blocked or waiting), found in C: the transaction holding each.
    for i in compress(range(len(places)), map(is_not, held, repeat(None))):
        at, row_tp = held[i], tp[i]
        last = held_tail.get((at, row_tp))
        if last is None:
            last = held_tail[(at, row_tp)] = _pin_tail(pin_facts(snapshot.lso, at), str(at) if at != row_tp else None)
        for name, value in zip(_TAIL_FIELDS, last):
            tail[name][i] = value
    columns = {
        "group": group, "topic": list(map(_TOPIC, tp)), "partition": list(map(_PARTITION, tp)), "committed_offset": committed,
        "last_stable_offset": list(map(_LSO, offsets)), "high_watermark": list(map(_HW, offsets)),
        "lag_to_lso_messages": lag_to_lso, "lag_to_hw_messages": lag_to_hw, "verdict": verdict, "readable_before_lso": readable,
        **tail,
    }
    return RecordColumns(GroupLag, columns), lag


def group_lags(snapshot: GroupSnapshot, min_lag: int = 0) -> RecordColumns:
    """A row per :func:`group_positions` place, with the transaction holding the group where it is
    blocked or waiting: held as columns (:class:`kafkatxn.plain.RecordColumns`; 100,000 rows at 5,000
    groups), read as the list of :class:`GroupLag` rows."""
    return group_lag_columns(snapshot, min_lag)[0]


def read_committed_lag(row: GroupLag) -> int:
    """:func:`readable_lag` of a row."""
    return readable_lag(row.verdict, row.committed_offset, row.last_stable_offset, row.lag_to_lso_messages, row.lag_to_hw_messages)
