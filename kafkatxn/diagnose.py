"""``kafkatxn diagnose``: why has a read_committed consumer group stopped, and what to do about it.

One report that walks from the symptom to the fix:

1. per group and partition: committed offset, LSO, high watermark, messages behind, and what the
   gap is — real lag, phantom lag (transaction markers and aborted records, which every
   high-watermark lag tool counts) or a block behind an open transaction
   (:func:`kafkatxn.group_positions.group_lags`, with the read_committed probes of small gaps);
2. per pinning transaction: producer id and epoch, transactional id, coordinator state, age, its
   own timeout and when the coordinator will abort it, and the verdict of
   :mod:`kafkatxn.verdicts` (the one rule every command uses: ``is_candidate``, ``classify``,
   ``pinning_transaction``, ``transaction_age_ms``; gathered by :func:`kafkatxn.gather.coordinator_view`);
3. the blast radius: every group and partition the same transaction holds;
4. the next step as a command to copy, with its risk in one line.

As every capability: the fact layer's snapshot (:func:`kafkatxn.facts_lso.take_held_group_snapshot`) is the only I/O; :func:`diagnose` (pure) decides over
the snapshot; the row dataclasses are what the CLI renders (field names are the output keys).
"""

from __future__ import annotations

import shlex
import time
from collections import Counter, defaultdict
from itertools import compress, islice, repeat
from dataclasses import dataclass, field, replace
from operator import attrgetter, is_, lt, ne, or_
from typing import TYPE_CHECKING, Iterator, Sequence

from kafkatxn import (
    defaults, facts, gaps, group_positions, facts_lso, spark_readers, untracked, verdicts,
    verdicts_age, verdicts_groups,
)
from kafkatxn.durations import format_duration_ms, parse_duration_ms
from kafkatxn.exitcodes import EXIT_CRITICAL, EXIT_OK, EXIT_WARNING, Status, exit_code, worst
from kafkatxn.gaps import Gap
from kafkatxn.model import Missing, ProducerState, QueryReader, TopicPartition
from kafkatxn.output import Report
from kafkatxn.plain import RecordColumns
from kafkatxn.diagnose_rows import RISK, Action, GroupSummary, PartitionDiagnosis, PinningTransaction, TxnVerdict
from kafkatxn.verdicts import Classification, OpenTransaction, PinVerdict, Verdict
from kafkatxn.verdicts_groups import GroupVerdict
from kafkatxn.gather import in_one_run

if TYPE_CHECKING:  # capability modules are handed the facade; they do not import it
    from kafkatxn.kafka import Cluster


# A pinning transaction at least this old makes the diagnosis critical: check's --txn-age-crit default.
CRITICAL_AGE_MS = parse_duration_ms(defaults.CHECK_TXN_AGE_CRIT)


def _pin(gs: facts_lso.GroupSnapshot, tp: TopicPartition) -> OpenTransaction | None:
    """The open transaction pinning ``tp``'s LSO (:func:`kafkatxn.verdicts.pinning_transaction`); one
    the pins sequence found ended while asked is no pin."""
    lso_snap = gs.lso
    txns = [t for t in lso_snap.open_transactions.get(tp, [])
            if not facts.ended_while_asked(lso_snap.classifications.get((tp, t.producer_id)))]
    return verdicts.pinning_transaction(txns, lso_snap.offsets[tp].last_stable_offset)


# -- rows ----------------------------------------------------------------------------------------


@dataclass
class Diagnosis:
    taken_at_ms: int
    groups: list[GroupSummary]
    partitions: list[PartitionDiagnosis]
    transactions: list[PinningTransaction]
    max_transaction_timeout_ms: int | None
    missing: list[Missing]
    exit_code: int
    summary: str
    queries: list = field(default_factory=list)  # the Spark queries among the readers (spark_readers.QueryRow)

    def report(self) -> Report:
        facts = {"summary": self.summary, "exit_code": self.exit_code, "taken_at_ms": self.taken_at_ms,
                 "max_transaction_timeout_ms": self.max_transaction_timeout_ms, "missing": [str(m) for m in self.missing]}
        return Report(facts=facts, sections={"groups": self.groups, "partitions": self.partitions, "transactions": self.transactions,
                                                  **({"spark_queries": self.queries} if self.queries else {})})


# -- pure decisions ------------------------------------------------------------------------------


def _holder(tid: str | None, pid: int) -> str:
    return tid if tid is not None else f"producer {pid}"


def _quote(value: str) -> str:
    return shlex.quote(value)


@dataclass
class _Pin:
    producer: ProducerState
    tps: list[TopicPartition] = field(default_factory=list)
    groups: set[str] = field(default_factory=set)
    lso_lag: int = 0


def _bound(max_timeout_ms: int) -> str:
    value = f"{max_timeout_ms // 1000}s" if max_timeout_ms % 1000 == 0 else f"{max_timeout_ms}ms"
    return f" --max-transaction-timeout {value}"


def decide(
    pin: _Pin,
    classifications: Sequence[Classification],
    now_ms: int,
    max_timeout_ms: int,
    groups_arg: str,
    bound: str = "",
    grace_ms: int = verdicts_age.overdue_grace_ms(),
) -> tuple[TxnVerdict, str, Action, str, str | None, int | None, int | None, int | None]:
    """Verdict, reason, action, command, release command, until, age, aborts-at for one pinning producer.

    ``classifications`` are :func:`kafkatxn.verdicts.classify` of each pinned partition.
    """
    p = pin.producer
    found = {c.verdict for c in classifications}
    tid = next((c.transactional_id for c in classifications if c.transactional_id), None)
    d = next((c.description for c in classifications if c.description is not None), None)
    candidate = verdicts.is_candidate(p, now_ms, max_timeout_ms)
    rerun = f"kafkatxn diagnose {groups_arg}".rstrip()
    fence = f"kafkatxn fence {_quote(tid)}" if tid else None
    # The one definition of a transaction's start (and age): as lso, hanging and check have it.
    dated = next((c.transaction for c in classifications if c.transaction.coordinator_start_time_ms is not None), None)
    started = dated.coordinator_start_time_ms if dated is not None else None
    age = a.ms if (a := _age(classifications, now_ms)) else None
    aborts_at = started + d.timeout_ms if started is not None and d is not None and d.state == "Ongoing" else None
    reasons = "; ".join(dict.fromkeys(c.reason for c in classifications))

    # Is it hanging? The one definition lso, check and the exporter use (verdicts.pin_verdict):
    # within transaction.max.timeout.ms of its last write nothing is hanging, tracked or not.
    pinned = {verdicts.pin_verdict(c, now_ms, max_timeout_ms) for c in classifications}
    if not classifications or PinVerdict.UNDETERMINED in pinned:
        why = next((c.reason for c in classifications if c.verdict is Verdict.UNDETERMINED), "no verdict")
        return TxnVerdict.undetermined, why, Action.undecided, f"cannot decide: {why}", None, None, age, aborts_at
    if PinVerdict.LOST_COMMIT in pinned:
        commands = " && ".join(
            f"kafkatxn restore-commit --topic {_quote(c.open_txn.tp.topic)} --partition {c.open_txn.tp.partition} "
            f"--start-offset {p.current_txn_start_offset}{bound}"
            for c in classifications if c.verdict is Verdict.LOST_COMMIT
        )
        return TxnVerdict.lost_commit, reasons, Action.restore_commit, commands, None, None, age, None
    if PinVerdict.HANGING in pinned:
        commands = " && ".join(
            f"kafkatxn abort --topic {_quote(tp.topic)} --partition {tp.partition} --start-offset {p.current_txn_start_offset}{bound}"
            for tp in pin.tps
        )
        return TxnVerdict.hanging, reasons, Action.abort, commands, None, None, age, None
    if PinVerdict.UNTRACKED in pinned:
        # No coordinator tracks it, so a fence cannot end it: abort does, from its deadline (by
        # its producer's own timeout), or now on the operator's word. Before, its producer may still.
        due_at = max(verdicts.hanging_deadline_ms(c, max_timeout_ms) or 0 for c in classifications
                     if verdicts.pin_verdict(c, now_ms, max_timeout_ms) is PinVerdict.UNTRACKED) + 1
        untracked_tps = [c.open_txn.tp for c in classifications if verdicts.pin_verdict(c, now_ms, max_timeout_ms) is PinVerdict.UNTRACKED]
        commands = " && ".join(untracked.abort_command(tp, p.current_txn_start_offset) for tp in untracked_tps)
        now = " && ".join(untracked.abort_command(tp, p.current_txn_start_offset, now=True) for tp in untracked_tps)
        why = f"{reasons}; {untracked.when(due_at)} (its deadline: {verdicts.deadline_source(classifications[0], max_timeout_ms)})"
        return TxnVerdict.untracked, why, Action.abort, commands, now, due_at, age, None
    if found - {Verdict.LONG_RUNNING}:
        # Its coordinator could not say, but written lately: no producer's timeout is longer than
        # transaction.max.timeout.ms, so nothing is decided before then; no fence is offered (it
        # ends only a transaction its coordinator tracks, which is what could not be told).
        ready = p.last_timestamp_ms + max_timeout_ms + 1
        why = (
            f"{reasons}, but its last write is within transaction.max.timeout.ms ({max_timeout_ms} ms): "
            f"not hanging by hanging's rule, which decides from {_clock(ready)}"
        )
        return TxnVerdict.recent, why, Action.wait, rerun, None, ready, age, None
    # Tracked by its coordinator.
    if candidate:
        why = f"idle past transaction.max.timeout.ms ({max_timeout_ms} ms) yet its coordinator still tracks it ({reasons})"
        return TxnVerdict.long_running, why, Action.fence, fence or rerun, None, None, age, aborts_at
    if aborts_at is not None and now_ms >= aborts_at + grace_ms:
        why = f"past its own timeout ({format_duration_ms(d.timeout_ms)}) and not aborted by its coordinator"
        return TxnVerdict.long_running, why, Action.fence, fence or rerun, None, None, age, aborts_at
    if aborts_at is not None and now_ms >= aborts_at:
        # Its coordinator aborts timed-out transactions at its next cleanup: give it that chance.
        why = (f"past its own timeout ({format_duration_ms(d.timeout_ms)}): its coordinator aborts it at its next cleanup, "
               f"by {_clock(aborts_at + grace_ms)}")
        return TxnVerdict.tracked, why, Action.wait, rerun, fence, aborts_at + grace_ms, age, aborts_at
    if aborts_at is None:
        state = d.state if d is not None else "unknown"
        why = f"its coordinator is ending it (state {state})"
        return TxnVerdict.tracked, why, Action.wait, rerun, fence, None, age, None
    why = f"open within its timeout ({format_duration_ms(d.timeout_ms)}): its coordinator aborts it at {_clock(aborts_at)}"
    watch = f"kafkatxn lso --groups {' '.join(spark_readers.reader_option(g, '') for g in sorted(pin.groups))} --watch"
    return TxnVerdict.tracked, why, Action.wait, watch, fence, aborts_at, age, aborts_at


def _clock(ms: int) -> str:
    """Local wall-clock time for sentences (tables format their own columns)."""
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(ms / 1000))


def _age(classifications: Sequence[Classification], now_ms: int) -> verdicts_age.TransactionAge | None:
    """Its coordinator's age (:func:`verdicts_age.transaction_age`), else the oldest of its partitions' first records."""
    ages = [a for c in classifications if (a := verdicts_age.transaction_age(c.transaction, now_ms))]
    return max(ages, key=lambda a: (a.source == verdicts_age.AGE_FROM_COORDINATOR, a.ms), default=None)


def _held_at(gs: facts_lso.GroupSnapshot, r: group_positions.GroupLag) -> TopicPartition:
    """The partition whose open transaction holds the row's group: the row's own, or its offsets partition."""
    tp = TopicPartition(r.topic, r.partition)
    return gs.held_at(r.group, tp, r.blocked_through is not None)


def diagnose(snapshot: facts_lso.HeldGroupSnapshot, groups_arg: str = "", critical_age_ms: int | None = CRITICAL_AGE_MS,
             lag_threshold: int = verdicts_groups.DEFAULT_LAG_THRESHOLD) -> Diagnosis:
    """Decide over ``snapshot``; ``groups_arg`` names the groups as the user did (for commands to copy)."""
    gs = snapshot.groups
    now = snapshot.taken_at_ms
    # Held as columns (plain.RecordColumns); each row's read_committed lag as group_positions found it.
    rows, read_committed_lags = group_positions.group_lag_columns(gs)
    max_timeout = snapshot.max_transaction_timeout_ms

    # Pinning producers, and what each holds: from the rows held (blocked or waiting), found in C.
    pins: dict[int, _Pin] = {}
    pin_of: dict[TopicPartition, ProducerState] = {}
    held_at: dict[tuple[str, TopicPartition], TopicPartition] = {}
    for r in rows.fields(_where_either(rows.column("verdict"), GroupVerdict.blocked, GroupVerdict.waiting)):
        tp = _held_at(gs, r)
        held_at[(r.group, TopicPartition(r.topic, r.partition))] = tp
        pinning = _pin(gs, tp)
        if pinning is None:
            continue
        state = pinning.producer
        pin_of[tp] = state
        entry = pins.setdefault(state.producer_id, _Pin(state))
        if tp not in entry.tps:
            entry.tps.append(tp)
            o = gs.lso.offsets[tp]
            entry.lso_lag += o.lag
        entry.groups.add(r.group)

    transactions: list[PinningTransaction] = []
    holder_of: dict[int, str] = {}
    for pid, pin in sorted(pins.items()):
        # What the pins sequence found of each (classified, settled by the log, dated): as lso has it.
        classifications = [c for tp in pin.tps if (c := gs.lso.classifications.get((tp, pid))) is not None]
        verdict, reason, action, command, release, until, age, aborts_at = decide(
            pin, classifications, now, max_timeout if max_timeout is not None else 0, groups_arg,
            # abort decides hanging by the same rule: with the threshold this diagnosis used
            _bound(max_timeout) if snapshot.max_timeout_given and max_timeout is not None else "",
            verdicts_age.overdue_grace_ms(snapshot.abort_cleanup_interval_ms),
        )
        tid = next((c.transactional_id for c in classifications if c.transactional_id), None)
        d = next((c.description for c in classifications if c.description is not None), None)
        holder_of[pid] = _holder(tid, pid)
        p = pin.producer
        transactions.append(
            PinningTransaction(
                producer_id=pid,
                producer_epoch=p.producer_epoch,
                transactional_id=tid,
                coordinator_id=d.coordinator_id if d else None,
                coordinator_state=d.state if d else None,
                verdict=verdict,
                reason=reason,
                age_ms=age,
                age_source=a.source if (a := _age(classifications, now)) else None,
                overdue=any(verdicts_age.is_overdue(c.transaction, now, snapshot.abort_cleanup_interval_ms) for c in classifications),
                last_write_age_ms=max(0, now - p.last_timestamp_ms) if p.last_timestamp_ms >= 0 else None,
                transaction_timeout_ms=d.timeout_ms if d else None,
                aborts_at_ms=aborts_at,
                partitions=tuple(f"{tp}@{pin_of[tp].current_txn_start_offset}" for tp in sorted(pin.tps)),
                groups=tuple(sorted(pin.groups)),
                lso_lag_messages=pin.lso_lag,
                action=action,
                command=command,
                release_command=release,
                until_ms=until,
                risk=RISK[action],
                release_risk=(untracked.ABORT_NOW_RISK if verdict is TxnVerdict.untracked else RISK[Action.fence]) if release else None,
            )
        )

    tid_of = {t.producer_id: t.transactional_id for t in transactions}
    # gaps.py's rules over the rows' columns; only the rows they need read (as named tuples of their fields).
    gap_column = gaps.gap_column(rows.column("verdict"), rows.column("lag_to_hw_messages"))
    holders: list[str | None] = [None] * len(gap_column)
    producer_ids: list[int | None] = [None] * len(gap_column)
    transactional_ids: list[str | None] = [None] * len(gap_column)
    held = list(_where_either(gap_column, Gap.blocked, Gap.waiting))
    for i, r in zip(held, rows.fields(held)):  # the few held: who holds each
        tp = TopicPartition(r.topic, r.partition)
        state = pin_of.get(held_at.get((r.group, tp), tp))
        if state is None:
            continue
        holder = holder_of.get(state.producer_id)
        holders[i] = f"{holder} (producer {state.producer_id})" if holder and not holder.startswith("producer") else holder
        producer_ids[i], transactional_ids[i] = state.producer_id, tid_of.get(state.producer_id)
    # 100,000 rows at 5,000 groups: held as columns, the group-lag rows' own columns shared.
    same = ("group", "topic", "partition", "committed_offset", "last_stable_offset", "high_watermark", "lag_to_lso_messages",
            "lag_to_hw_messages", "verdict")
    partitions = RecordColumns(PartitionDiagnosis, {
        **{name: rows.column(name) for name in same}, "lag_messages": read_committed_lags, "gap": gap_column,
        "explanation": gaps.explain_column(rows, gap_column, holders), "producer_id": producer_ids,
        "transactional_id": transactional_ids,
    })

    summaries = group_summaries(partitions, holder_of)
    code, undetermined = _findings(partitions, transactions, critical_age_ms, lag_threshold)
    summary = _summary(summaries, transactions)
    return Diagnosis(
        now, summaries, partitions, transactions, max_timeout, list(snapshot.missing),
        exit_code(code, snapshot.missing, undetermined), summary,
    )


def _where_either(column: Sequence, first: object, second: object) -> Iterator[int]:
    """The indices of ``column`` holding ``first`` or ``second`` (by identity), found in C."""
    return compress(range(len(column)), map(or_, map(is_, column, repeat(first)), map(is_, column, repeat(second))))


def _column(partitions: Sequence[PartitionDiagnosis], name: str) -> Sequence:
    """Every row's ``name``: the column itself of rows held as columns."""
    return partitions.column(name) if type(partitions) is RecordColumns else list(map(attrgetter(name), partitions))


def _group_spans(groups: Sequence[str]) -> list[tuple[str, range | list[int]]]:
    """Each group of ``groups`` (a column) in sorted order, with the positions of its rows: the runs
    of equal names where each group's rows are one run in sorted order (as group_positions makes
    them: found in C), else gathered one by one."""
    n = len(groups)
    starts = [0, *compress(range(1, n), map(ne, islice(groups, 1, None), groups))] if n else []
    names = [groups[i] for i in starts]
    if all(map(lt, names, islice(names, 1, None))):
        return [(name, range(start, stop)) for name, start, stop in zip(names, starts, [*starts[1:], n])]
    by_group: dict[str, list[int]] = defaultdict(list)
    for i, group in enumerate(groups):
        by_group[group].append(i)
    return [(group, by_group[group]) for group in sorted(by_group)]


def group_summaries(partitions: Sequence[PartitionDiagnosis], holder_of: dict[int, str]) -> list[GroupSummary]:
    columns = [_column(partitions, name) for name in ("verdict", "gap", "lag_messages", "lag_to_hw_messages", "producer_id")]
    out = []
    blocked_, lagging_, waiting_, unknown_ = GroupVerdict.blocked, GroupVerdict.lagging, GroupVerdict.waiting, GroupVerdict.unknown
    for group, at in _group_spans(_column(partitions, "group")):
        # A group's partitions read a column at a time, counted per verdict in C: 100,000 rows at 5,000 groups.
        if type(at) is range:
            verdicts, gaps, lags, to_hw, producers = (column[at.start:at.stop] for column in columns)
        else:
            verdicts, gaps, lags, to_hw, producers = ([column[i] for i in at] for column in columns)
        counts = Counter(verdicts)
        blocked, lagging, waiting = counts[blocked_], counts[lagging_], counts[waiting_]
        status = "blocked" if blocked else "lagging" if lagging else "unknown" if counts[unknown_] else "waiting" if waiting else "caught_up"
        out.append(
            GroupSummary(
                group=group,
                status=status,
                partitions=len(verdicts),
                blocked_partitions=blocked,
                lagging_partitions=lagging,
                lag_messages=sum(lags),
                lag_to_hw_messages=sum(to_hw),
                phantom_messages=sum(h for h, g in zip(to_hw, gaps) if g is Gap.phantom) if Gap.phantom in gaps else 0,
                pinned_by=tuple(sorted({holder_of.get(pid, f"producer {pid}") for v, pid in zip(verdicts, producers)
                                        if (v is blocked_ or v is waiting_) and pid is not None}))
                if blocked or waiting else (),
            )
        )
    return out


def _findings(partitions: Sequence[PartitionDiagnosis], transactions: Sequence[PinningTransaction], critical_age_ms: int | None,
              lag_threshold: int = verdicts_groups.DEFAULT_LAG_THRESHOLD) -> tuple[int, bool]:
    """0 nothing blocked, waiting on a transaction in flight, or lagging by less than
    ``lag_threshold`` (:func:`verdicts_groups.lag_is_finding`); 1 lagging by more, blocked, or of unknown
    start; 2 blocked (or waiting) by a hanging, overdue or too old transaction
    (:func:`verdicts_groups.blocked_severity`); undetermined when a pinning transaction could not be
    decided, or a blocked partition's transaction was not found."""
    code = EXIT_OK
    verdicts = _column(partitions, "verdict")
    found = set(verdicts)  # the verdicts present, in C; a lagging partition is a finding by its lag
    lagging = GroupVerdict.lagging
    # Whether one lagging partition lags enough: the largest lag of them (found in C) does, as
    # lag_is_finding grows with the lag.
    if GroupVerdict.blocked in found or GroupVerdict.unknown in found or (lagging in found and verdicts_groups.lag_is_finding(
            lagging, max(compress(_column(partitions, "lag_messages"), map(is_, verdicts, repeat(lagging)))), lag_threshold)):
        code = EXIT_WARNING
    if any(
        verdicts_groups.blocked_severity(t.verdict is TxnVerdict.hanging, t.overdue, verdicts_groups.is_too_old(t.age_ms, critical_age_ms),
                                 lost_commit=t.verdict is TxnVerdict.lost_commit)
        is verdicts_groups.Severity.critical
        for t in transactions
    ):
        code = EXIT_CRITICAL
    # A blocked partition whose transaction was not found (no producer id): looked for in C.
    undetermined = any(t.verdict is TxnVerdict.undetermined for t in transactions) or (GroupVerdict.blocked in found and any(
        map(is_, compress(_column(partitions, "producer_id"), map(is_, _column(partitions, "gap"), repeat(Gap.blocked))), repeat(None))
    ))
    return code, undetermined


def _summary(groups: Sequence[GroupSummary], transactions: Sequence[PinningTransaction]) -> str:
    if not groups:
        return "no committed offsets to diagnose"
    counts = defaultdict(int)
    for g in groups:
        counts[g.status] += 1
    parts = [f"{counts[s]} {s.replace('_', ' ')}" for s in ("blocked", "lagging", "unknown", "waiting", "caught_up") if counts[s]]
    queries = sum(1 for g in groups if isinstance(g.group, QueryReader))
    counts = ((len(groups) - queries, "group", "groups"), (queries, "Spark query", "Spark queries"))
    text = " and ".join(f"{n} {one if n == 1 else many}" for n, one, many in counts if n) + ": " + ", ".join(parts)
    if transactions:
        held = ", ".join(f"{t.transactional_id or f'producer {t.producer_id}'} ({t.verdict.value})" for t in transactions)
        text += f"; held by {held}"
    return text


@in_one_run
def run(
    cluster: Cluster,
    groups: Sequence[str] | None = None,
    topics: Sequence[str] | None = None,
    probe_max_gap: int = facts_lso.DEFAULT_PROBE_MAX_GAP,
    max_transaction_timeout_ms: int | None = None,
    lag_threshold: int = verdicts_groups.DEFAULT_LAG_THRESHOLD,
    spark_checkpoints: Sequence[str] = (),
    every_group: bool = False,
    spark_writers: Sequence[spark_readers.WriterSpec] = (),
) -> Diagnosis:
    """Snapshot and decide: what ``kafkatxn diagnose`` shows; the Spark queries of ``spark_checkpoints``
    beside the groups named (or every group with ``every_group``: facts_lso.take_group_snapshot)."""
    queries, unread = spark_readers.read_checkpoints(spark_checkpoints, cluster.deadline)  # before the offsets they are compared with
    queries, ledgers_unread = spark_readers.with_writers(cluster, queries, spark_writers)  # the ledger: after the checkpoint
    unread += ledgers_unread
    readers = spark_readers.reader_positions(cluster, queries, topics) if spark_checkpoints else None
    snapshot = facts_lso.take_held_group_snapshot(cluster, groups, topics, probe_max_gap, max_transaction_timeout_ms, readers, every_group)
    snapshot.missing[:0] = unread
    args = " ".join([f"--group {_quote(g)}" for g in groups or []] + [f"--spark-checkpoint {_quote(c)}" for c in spark_checkpoints if not every_group])
    args += "".join(f" --topic {_quote(t)}" for t in topics or [])
    result = with_history(cluster, diagnose(snapshot, args.strip(), lag_threshold=lag_threshold))
    # No query among the readers: no row to look at (100,000 at 5,000 groups).
    result.queries = spark_readers.query_rows(queries, result.partitions if queries else ())
    # A writer whose ledger is behind its checkpoint lost output: a finding (one ahead is a replay about to be skipped).
    if any(q.writer_state == "behind" for q in result.queries):
        result.exit_code = int(worst([Status(result.exit_code), Status.WARNING]))
    return result


def with_history(cluster: Cluster, d: Diagnosis) -> Diagnosis:
    """Each pinning transaction's history from its coordinator's log; undetermined (and why) when the
    log cannot be read, which changes no verdict and no exit code."""
    from kafkatxn import facts_history

    tids = sorted({t.transactional_id for t in d.transactions if t.transactional_id})
    if tids:
        found, why = facts_history.summaries(cluster, tids, d.taken_at_ms)
        d.transactions = [
            replace(t, history=found[t.transactional_id].line, history_evidence=facts_history.evidence(found[t.transactional_id]))
            if t.transactional_id in found else replace(t, history=f"undetermined: {why}") if t.transactional_id else t
            for t in d.transactions
        ]
    return d
