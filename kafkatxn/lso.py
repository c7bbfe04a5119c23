"""LastStableOffsetLag: how far each partition's last stable offset (LSO) trails its high watermark
(HW), which open transaction pins it, and what that means for read_committed consumer groups.

The broker shows the gap only as the JMX gauge ``kafka.cluster:type=Partition,name=LastStableOffsetLag``.
Here it comes from two ListOffsets passes (read_committed gives the LSO, read_uncommitted the HW),
one request per leader each; DescribeProducers only for partitions whose LSO trails the HW.

The snapshots (:mod:`kafkatxn.facts_lso`) are the only I/O; this module's rows, :func:`lso_moved`,
:func:`sort_rows` and the exit-code rules are pure functions over them, a group's rows over where it
stands (:mod:`kafkatxn.group_positions`).
"""

from __future__ import annotations

import dataclasses
from itertools import compress, repeat, starmap
from operator import attrgetter, ge, is_, is_not, sub
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Sequence, TypeVar

from kafkatxn import lost_commit
from kafkatxn.gather import in_one_run
from kafkatxn.exitcodes import EXIT_CRITICAL, EXIT_OK, EXIT_WARNING, exit_code
from kafkatxn.facts_lso import DEFAULT_PROBE_MAX_GAP, GroupSnapshot, LsoSnapshot, take_group_snapshot, take_snapshot
from kafkatxn.model import FRESH, FrozenRecord, Missing, Record, TopicPartition, record
from kafkatxn.pinning import pin_facts
from kafkatxn.plain import RecordColumns
from kafkatxn.verdicts_age import best_age_ms
from kafkatxn.verdicts_groups import (
    DEFAULT_LAG_THRESHOLD, GroupVerdict, Severity, block_severity, blocked_severity, is_too_old,
    lag_is_finding,
)

if TYPE_CHECKING:  # capability modules are handed the facade; they do not import it
    from kafkatxn.group_positions import GroupLag
    from kafkatxn.kafka import Cluster
    from kafkatxn.verdicts_groups import BlockVerdict


# A pinning transaction older than this makes the finding critical (exit 2). Producers default to a
# 60 s transaction timeout, after which the coordinator aborts; five minutes is well past normal.
DEFAULT_CRITICAL_AGE = "5m"
DEFAULT_CRITICAL_AGE_MS = 5 * 60_000


# -- snapshot ----------------------------------------------------------------------------------


# -- rows --------------------------------------------------------------------------------------


@record
class PartitionLag(FrozenRecord):
    """One partition whose LSO trails its HW, and the open transaction pinning the LSO."""

    # The numbers the lag is read from stay in narrow tables (output.py). Not annotated: a record's
    # annotations are its fields.
    TABLE_KEEPS = ("high_watermark", "last_stable_offset", "lag_messages")

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
    txn_age_ms: int | None  # verdicts_age.transaction_age: None only when it could not be read (see missing)
    txn_age_source: str | None  # coordinator, first_record or last_write (a lower bound)
    # The pinning transaction hangs, by hanging's whole rule and its coordinator's log (verdicts.pin_verdict):
    # None when that is undetermined (a coordinator or its log did not answer), or nothing pins the LSO.
    txn_hanging: bool | None
    # Its coordinator committed it and the partition lost the COMMIT marker (hanging's lost_commit):
    # not hanging; restore it with restore-commit, never abort it. None as txn_hanging.
    txn_lost_commit: bool | None
    last_write_age_ms: int | None  # since the producer's last write to this partition

    def __init__(self, topic: str, partition: int, high_watermark: int, last_stable_offset: int, lag_messages: int,
                 open_transactions: int, producer_id: int | None, producer_epoch: int | None,
                 transactional_id: str | None, txn_start_offset: int | None, txn_age_ms: int | None,
                 txn_age_source: str | None, txn_hanging: bool | None, txn_lost_commit: bool | None,
                 last_write_age_ms: int | None) -> None:
        self.__dict__.update(topic=topic, partition=partition, high_watermark=high_watermark,
                             last_stable_offset=last_stable_offset, lag_messages=lag_messages,
                             open_transactions=open_transactions, producer_id=producer_id,
                             producer_epoch=producer_epoch, transactional_id=transactional_id,
                             txn_start_offset=txn_start_offset, txn_age_ms=txn_age_ms, txn_age_source=txn_age_source,
                             txn_hanging=txn_hanging, txn_lost_commit=txn_lost_commit,
                             last_write_age_ms=last_write_age_ms)


_WATCHED: dict[str, type] = {}


def _watched(name: str) -> type:
    """``WatchedPartitionLag`` or ``WatchedGroupLag``: a row of ``lso --watch``, with ``lso_moved``.
    Made when first asked for (``kafkatxn.lso.WatchedPartitionLag``, module ``__getattr__``): a
    ``WatchedGroupLag`` is a ``group_positions.GroupLag``, a module ``lso`` without ``--groups`` does not import."""
    if not _WATCHED:
        from kafkatxn.group_positions import GroupLag

        @record
        class WatchedPartitionLag(PartitionLag):
            lso_moved: bool | None = None  # since the previous sample; None on the first sample of the partition

            def __init__(self, topic: str, partition: int, high_watermark: int, last_stable_offset: int,
                         lag_messages: int, open_transactions: int, producer_id: int | None,
                         producer_epoch: int | None, transactional_id: str | None, txn_start_offset: int | None,
                         txn_age_ms: int | None, txn_age_source: str | None, txn_hanging: bool | None,
                         txn_lost_commit: bool | None, last_write_age_ms: int | None,
                         lso_moved: bool | None = None) -> None:
                PartitionLag.__init__(self, topic, partition, high_watermark, last_stable_offset, lag_messages,
                                      open_transactions, producer_id, producer_epoch, transactional_id,
                                      txn_start_offset, txn_age_ms, txn_age_source, txn_hanging, txn_lost_commit,
                                      last_write_age_ms)
                self.__dict__["lso_moved"] = lso_moved

        @record
        class WatchedGroupLag(GroupLag):
            lso_moved: bool | None = None

            def __init__(self, group: str, topic: str, partition: int, committed_offset: int | None,
                         last_stable_offset: int, high_watermark: int, lag_to_lso_messages: int,
                         lag_to_hw_messages: int, verdict: GroupVerdict, readable_before_lso: bool | None,
                         producer_id: int | None, transactional_id: str | None, txn_age_ms: int | None,
                         txn_age_source: str | None, txn_hanging: bool | None, txn_lost_commit: bool | None,
                         txn_overdue: bool | None, last_write_age_ms: int | None, blocked_through: str | None,
                         txn_verdict: BlockVerdict | None = None, lso_moved: bool | None = None) -> None:
                GroupLag.__init__(self, group, topic, partition, committed_offset, last_stable_offset, high_watermark,
                                  lag_to_lso_messages, lag_to_hw_messages, verdict, readable_before_lso, producer_id,
                                  transactional_id, txn_age_ms, txn_age_source, txn_hanging, txn_lost_commit,
                                  txn_overdue, last_write_age_ms, blocked_through, txn_verdict)
                self.__dict__["lso_moved"] = lso_moved

        for made in (WatchedPartitionLag, WatchedGroupLag):
            made.__qualname__ = made.__name__  # as defined at the module's top level
            _WATCHED[made.__name__] = made
    return _WATCHED[name]


def __getattr__(name: str) -> type:  # PEP 562
    if name in ("WatchedPartitionLag", "WatchedGroupLag"):
        return _watched(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def partition_lags(snapshot: LsoSnapshot, min_lag: int = 1) -> list[PartitionLag]:
    """A row per partition with ``lag_messages >= min_lag``, in topic and partition order."""
    rows = []
    offsets = snapshot.offsets
    # Sorted after the filter: of 30,000 partitions, the few that lag (o.lag >= min_lag: HW - LSO >=
    # min_lag, every partition when min_lag is 0 or less, as the lag is never below 0); of those the
    # snapshot found lagging when it kept them, else found in C.
    if min_lag <= 0:
        found: Iterable[TopicPartition] = offsets
    elif snapshot.lagging is not None:
        found = [tp for tp in snapshot.lagging if offsets[tp].lag >= min_lag]
    else:
        found = compress(offsets, map(ge, starmap(sub, offsets.values()), repeat(min_lag)))
    for tp in sorted(found):
        o = offsets[tp]
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


# -- watching ----------------------------------------------------------------------------------


def lso_moved(previous: LsoSnapshot | None, current: LsoSnapshot) -> dict[TopicPartition, bool | None]:
    """Per partition of ``current``: did its LSO change since ``previous``? None when not seen before."""
    before = previous.offsets if previous is not None else {}
    return {
        tp: (o.last_stable_offset != before[tp].last_stable_offset) if tp in before else None
        for tp, o in current.offsets.items()
    }


R = TypeVar("R", "PartitionLag", "GroupLag")  # GroupLag: group_positions, imported for --groups only


def with_movement(rows: Sequence[R], moved: Mapping[TopicPartition, bool | None]) -> list:
    """The rows as their watched variant, with ``lso_moved`` filled in."""
    from kafkatxn.group_positions import GroupLag

    out = []
    for row in rows:
        watched = _watched("WatchedGroupLag" if isinstance(row, GroupLag) else "WatchedPartitionLag")
        values = {f.name: getattr(row, f.name) for f in dataclasses.fields(row)}
        out.append(watched(**values, lso_moved=moved.get(TopicPartition(row.topic, row.partition))))
    return out


# -- ordering and findings ---------------------------------------------------------------------


def sort_rows(rows: Sequence[R], sort: str | None = None, top: int | None = None) -> list[R]:
    """Largest lag (``lag``) or oldest pinning transaction (``age``) first; ``top`` keeps the first K.

    Without ``sort`` the rows keep their order (rows held as columns stay so). Ties keep topic and partition order.
    """
    if sort is None and type(rows) is RecordColumns:
        return rows[:top] if top is not None else rows  # type: ignore[return-value]
    out = list(rows)
    if sort == "lag":
        out.sort(key=lambda r: -(r.lag_messages if isinstance(r, PartitionLag) else r.lag_to_lso_messages))
    elif sort == "age":
        # Rows without a known age go last.
        out.sort(key=lambda r: -(best_age_ms(r.txn_age_ms, r.last_write_age_ms) or -1))
    elif sort is not None:
        raise ValueError(f"unknown sort key {sort!r}")
    return out[:top] if top is not None else out


def _listed(rows: Iterable[R]) -> Sequence[R]:
    """``rows`` as a sequence, to be walked more than once."""
    return rows if isinstance(rows, (list, tuple)) else list(rows)


def _rows_where(rows: Iterable[R], name: str, test: Callable[[object, object], object] | None = None,
                value: object = None) -> Iterable[R]:
    """The rows whose field ``name`` passes ``test(field, value)`` (its truth when None), in order,
    found in C: caught-up rows, most of 100,000, are not looked at one by one. Rows held as columns
    (:class:`kafkatxn.plain.RecordColumns`) are read from the column; only the rows found are made,
    as read-only views of their fields (:meth:`~kafkatxn.plain.RecordColumns.fields`)."""
    if type(rows) is RecordColumns:
        column = rows.column(name)
        found = compress(range(len(column)), column if test is None else map(test, column, repeat(value)))
        return rows.fields(found)
    rows = _listed(rows)
    values = map(attrgetter(name), rows)
    return compress(rows, values if test is None else map(test, values, repeat(value)))


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
    from kafkatxn.group_positions import read_committed_lag  # the group rows' module: lso --groups only

    code = EXIT_OK
    # Caught-up rows (most of 100,000) decide nothing: left out in C, not looked at one by one.
    for r in _rows_where(rows, "verdict", is_not, GroupVerdict.caught_up):
        verdict = r.verdict
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
    for r in _rows_where(rows, "verdict", is_, GroupVerdict.blocked):
        if r.blocked_through and r.group not in out:
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
    # The rows with a pinning transaction (a few of 100,000 group rows), found in C.
    for r in _rows_where(rows, "producer_id", is_not, None):
        if r.txn_hanging is not None:
            continue
        tp = TopicPartition(r.topic, r.partition)
        if tp in out:
            continue
        pin = snapshot.pin(tp)
        if pin is not None:
            out[tp] = Missing(tp, f"producer {pin.producer_id}: {snapshot.undetermined_reason(pin)}", "hanging verdict")
    return list(out.values())


def restore_hints(snapshot: LsoSnapshot, rows: Iterable[PartitionLag | GroupLag]) -> list[str]:
    """For each pinning transaction of ``rows`` that lost its COMMIT marker, the command that
    releases it: ``restore-commit``, never ``abort`` (which would drop committed records)."""
    out: dict[TopicPartition, str] = {}
    for r in _rows_where(rows, "txn_lost_commit"):  # the rows behind a lost COMMIT marker, found in C
        tp = TopicPartition(r.topic, r.partition)
        if tp not in out and (pin := snapshot.pin(tp)) is not None:
            out[tp] = lost_commit.restore_note(tp, pin.producer_id, pin.start_offset)
    return list(out.values())


# -- one call per command ----------------------------------------------------------------------


@record
class LsoReport(Record):
    """What ``kafkatxn lso`` shows: rows (their watched variant when watching), and how it ends."""

    rows: list
    snapshot: LsoSnapshot  # the reference for the next sample's lso_moved
    missing: list[Missing]
    exit_code: int
    hints: list[str] = dataclasses.field(default_factory=list)  # the next step for a lost COMMIT marker (restore_hints)
    measured: int | None = None  # group partitions measured before --min-lag and --top (groups only)

    def __init__(self, rows: list, snapshot: LsoSnapshot, missing: list[Missing], exit_code: int,
                 hints: list[str] = FRESH, measured: int | None = None) -> None:
        self.__dict__.update(rows=rows, snapshot=snapshot, missing=missing, exit_code=exit_code,
                             hints=[] if hints is FRESH else hints, measured=measured)


@in_one_run
def partition_report(
    cluster: Cluster,
    topics: Sequence[str] | None = None,
    min_lag: int = 1,
    sort: str | None = "lag",
    top: int | None = None,
    critical_age_ms: int | None = DEFAULT_CRITICAL_AGE_MS,
    watching: bool = False,
    previous: LsoSnapshot | None = None,
    partitions: Sequence[TopicPartition] | None = None,
) -> LsoReport:
    """Partitions with LSO lag >= ``min_lag`` (all non-internal topics unless ``topics``; ``partitions``:
    those, chosen by the caller in this run, in partition order and each once: ``model.in_partition_order``'s)."""
    if partitions is None:
        partitions = cluster.select_in_partition_order(topics)[0]
    # Rows of the lagging partitions only (min_lag >= 1), not compared with the previous sample: their offsets
    # are all the rows read, the answers' columns kept as they are. Otherwise every partition's are read.
    snapshot = take_snapshot(cluster, partitions, ordered=True, lagging_only=min_lag > 0 and not watching)
    rows = partition_lags(snapshot, min_lag)
    code = partitions_exit_code(rows, critical_age_ms)
    return _report(rows, snapshot, snapshot.missing, code, sort, top, watching, previous)


@in_one_run
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
    from kafkatxn.group_positions import group_lags  # the group rows: lso alone does not import them

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
