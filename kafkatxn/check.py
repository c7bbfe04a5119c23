"""``kafkatxn check``: one pass over the cluster, one status for cron, Nagios/Icinga and runbooks.

Three parts, as every capability has them:

* the **snapshot** (:func:`kafkatxn.facts_cluster.gather_snapshot`, the only I/O), shared with the exporter;
* **pure decisions** over a :class:`ClusterSnapshot` (:func:`evaluate`), with thresholds written as
  monitoring-plugins range expressions (:class:`kafkatxn.monitoring_plugin.Range`);
* the **output**: one plugin line with performance data, then details (:meth:`CheckResult.nagios_text`),
  or a :class:`~kafkatxn.output.Report` for ``-o json``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import field
from itertools import compress
from operator import itemgetter
from typing import Callable, Iterable, Sequence, TypeVar

from kafkatxn import collection, defaults, untracked, verdicts_groups
from kafkatxn.durations import format_duration_ms
from kafkatxn.exitcodes import SEVERITY, Status, worst
from kafkatxn.model import FRESH, FrozenRecord, Record, TopicPartition, record
from kafkatxn.monitoring_plugin import (
    PerfDatum, Range, number_text, duration_seconds, format_perfdata,
)
from kafkatxn.output import Report
from kafkatxn.snapshot import (
    PART_GROUPS, PART_OFFSETS, PART_PRODUCERS, PART_TRANSACTION_AGES, PART_VERDICTS, ClusterSnapshot, GroupSample,
    lso_lags,
)

T = TypeVar("T")  # what a threshold finding is about: a partition, a transaction, a broker, a group's partition

# ------------------------------------------------------------------------------------------------
# Decision
# ------------------------------------------------------------------------------------------------


_LSO_LAG_WARN, _LSO_LAG_CRIT = Range.parse(defaults.CHECK_LSO_LAG_WARN), Range.parse(defaults.CHECK_LSO_LAG_CRIT)
_TXN_AGE_WARN = Range.parse(defaults.CHECK_TXN_AGE_WARN, number=duration_seconds)
_TXN_AGE_CRIT = Range.parse(defaults.CHECK_TXN_AGE_CRIT, number=duration_seconds)


# Records (model.Record), not @dataclass: the three classes' generated methods were ~10 M instructions
# of every check's start, before its first request.
@record
class Thresholds(FrozenRecord):
    """Ranges per figure; None disables that check. Durations are in seconds."""

    lso_lag_warn: Range | None = _LSO_LAG_WARN
    lso_lag_crit: Range | None = _LSO_LAG_CRIT
    txn_age_warn: Range | None = _TXN_AGE_WARN
    txn_age_crit: Range | None = _TXN_AGE_CRIT
    producer_ids_warn: Range | None = None
    producer_ids_crit: Range | None = None
    group_lag_warn: Range | None = None  # read_committed group lag per group and partition (with --groups)
    group_lag_crit: Range | None = None

    def __init__(self, lso_lag_warn: Range | None = _LSO_LAG_WARN, lso_lag_crit: Range | None = _LSO_LAG_CRIT,
                 txn_age_warn: Range | None = _TXN_AGE_WARN, txn_age_crit: Range | None = _TXN_AGE_CRIT,
                 producer_ids_warn: Range | None = None, producer_ids_crit: Range | None = None,
                 group_lag_warn: Range | None = None, group_lag_crit: Range | None = None) -> None:
        self.__dict__.update(lso_lag_warn=lso_lag_warn, lso_lag_crit=lso_lag_crit, txn_age_warn=txn_age_warn,
                             txn_age_crit=txn_age_crit, producer_ids_warn=producer_ids_warn, producer_ids_crit=producer_ids_crit,
                             group_lag_warn=group_lag_warn, group_lag_crit=group_lag_crit)


@record
class Finding(FrozenRecord):
    status: str  # warning, critical or unknown
    # hanging_transaction, lost_commit_marker, undetermined_transaction, untracked_transaction, lso_lag, transaction_age, active_producer_ids,
    # group_blocked, group_waiting, group_undetermined, group_lag, incomplete, unreachable
    kind: str
    subject: str  # partition, transactional id, broker
    value: float | int | None
    threshold: str | None
    message: str

    def __init__(self, status: str, kind: str, subject: str, value: float | int | None, threshold: str | None, message: str) -> None:
        self.__dict__.update(status=status, kind=kind, subject=subject, value=value, threshold=threshold, message=message)


@record
class CheckResult(Record):
    status: Status
    summary: str
    findings: list[Finding]
    perfdata: list[PerfDatum]
    facts: dict[str, object] = field(default_factory=dict)

    def __init__(self, status: Status, summary: str, findings: list[Finding], perfdata: list[PerfDatum],
                 facts: dict[str, object] = FRESH) -> None:
        self.status, self.summary, self.findings, self.perfdata = status, summary, findings, perfdata
        self.facts = {} if facts is FRESH else facts

    @property
    def exit_code(self) -> int:
        return int(self.status)

    def nagios_text(self, max_details: int = 20) -> str:
        """The plugin line (``KAFKATXN STATUS - summary | perfdata``), then one line per finding."""
        line = f"KAFKATXN {self.status.name} - {self.summary}"
        perf = format_perfdata(self.perfdata)
        if perf:
            line += f" | {perf}"
        lines = [line]
        for f in self.findings[:max_details]:
            if f.message == self.summary:
                continue
            lines.append(f"{f.status.upper()}: {f.message}")
        if len(self.findings) > max_details:
            lines.append(f"... and {len(self.findings) - max_details} more (-o json lists them all)")
        return "\n".join(lines) + "\n"

    def report(self) -> Report:
        facts = {"status": self.status.name, "exit_code": self.exit_code, "summary": self.summary, **self.facts}
        facts["perfdata_text"] = format_perfdata(self.perfdata)
        return Report(facts=facts, sections={"findings": self.findings, "perfdata": self.perfdata})


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else plural or word + 's'}"


def evaluate(snapshot: ClusterSnapshot, thresholds: Thresholds = Thresholds()) -> CheckResult:
    """The status of the cluster for these thresholds: a pure function of the snapshot."""
    # Made after the gather's run, whose hundreds of thousands of objects the collector has just taken
    # on: unpaused (kafkatxn.collection, as a run is), the 30,000 lags below start collections that
    # walk them all again.
    collection.pause()
    try:
        return _evaluate(snapshot, thresholds)
    finally:
        collection.resume()


def _evaluate(snapshot: ClusterSnapshot, thresholds: Thresholds) -> CheckResult:
    if not snapshot.up:
        finding = Finding("unknown", "unreachable", "cluster", None, None, snapshot.error or "cluster unreachable")
        return CheckResult(Status.UNKNOWN, snapshot.error or "cluster unreachable", [finding], [],
                           {"cluster_id": None, "up": False})

    findings: list[tuple[Status, Finding]] = []
    summary: list[str] = []

    # Hanging transactions are always critical: no marker will ever come, the LSO never moves. A lost
    # COMMIT marker (committed by its coordinator) is as stuck, and aborting it would drop committed
    # data: restore-commit releases it.
    for samples, kind, what, advice in (
        (snapshot.hanging, "hanging_transaction", "hanging transaction", ""),
        (snapshot.lost_commits, "lost_commit_marker", "lost COMMIT marker", "; restore it with restore-commit, never abort"),
    ):
        for h in samples:
            lag = f", LSO lag {h.lso_lag_messages}" if h.lso_lag_messages is not None else ""
            tid = f" ({h.transactional_id})" if h.transactional_id else ""
            findings.append((Status.CRITICAL, Finding(
                "critical", kind, f"{h.topic}-{h.partition}", h.start_offset, None,
                f"{what} on {h.topic}-{h.partition} from offset {h.start_offset}, producer {h.producer_id}{tid}: "
                f"{h.reason}{lag}{advice}",
            )))
        if samples:
            summary.append(_plural(len(samples), what))

    # Undetermined: a coordinator that could own it did not answer. Unknown, never hanging.
    for u in snapshot.undetermined:
        findings.append((Status.UNKNOWN, Finding(
            "unknown", "undetermined_transaction", f"{u.topic}-{u.partition}", u.start_offset, None,
            f"undetermined transaction on {u.topic}-{u.partition} from offset {u.start_offset}, "
            f"producer {u.producer_id}: {u.reason}",
        )))
    if snapshot.undetermined:
        summary.append(_plural(len(snapshot.undetermined), "undetermined transaction"))

    # Untracked: no coordinator will end it, but its producer still may until its deadline. Never
    # OK (it holds the LSO like a hanging one), not a page before the cluster had its chance.
    for u in snapshot.untracked:
        tid = f" ({u.transactional_id})" if u.transactional_id else ""
        lag = f", LSO lag {u.lso_lag_messages}" if u.lso_lag_messages is not None else ""
        age = f", open {number_text(round(u.age_ms / 1000, 1))}s" if u.age_ms is not None else ""
        findings.append((Status.WARNING, Finding(
            "warning", "untracked_transaction", f"{u.topic}-{u.partition}", u.start_offset, None,
            f"untracked transaction on {u.topic}-{u.partition} from offset {u.start_offset}, producer {u.producer_id}{tid}: "
            f"{untracked.state(u.hanging_at_ms)}{age}{lag}"
            f"; then: {untracked.abort_command(TopicPartition(u.topic, u.partition), u.start_offset)} (kafkatxn hanging says more)",
        )))
    if snapshot.untracked:
        summary.append(_plural(len(snapshot.untracked), "untracked transaction"))

    lags = lso_lags(snapshot.partitions)
    # 30,000 lags hold a handful of distinct values, asked here what is asked of all of them: an int is
    # hashed cheaply, compared with None through both types' comparisons (~200 instructions each).
    distinct = set(lags)
    answered = [lag for lag in lags if lag is not None] if None in distinct else lags  # a leader that did not answer: no lag
    max_lag = max(distinct - {None}, default=0)
    lag_counts = _threshold_findings(
        findings, alerting(snapshot.partitions, lags, thresholds.lso_lag_warn, thresholds.lso_lag_crit, distinct), lambda p: str(p.tp),
        thresholds.lso_lag_warn, thresholds.lso_lag_crit, "lso_lag",
        lambda subject, value, rng: f"{subject}: LSO lag {value} messages ({rng.describe()})",
    )
    for status, rng in lag_counts:
        summary.append(f"{_plural(lag_counts[(status, rng)], 'partition')} with LSO lag {rng.describe()}")

    # Two-phase-commit transactions are not timed out by anyone: their age alone is no finding.
    ages = [(t, snapshot.transaction_age_s(t)) for t in snapshot.open_transactions if not t.two_phase_commit]
    ages = [(t, a) for t, a in ages if a is not None]
    age_counts = _threshold_findings(
        findings, ages, lambda t: t.transactional_id,
        thresholds.txn_age_warn, thresholds.txn_age_crit, "transaction_age",
        lambda subject, value, rng: f"transaction {subject!r} open for {number_text(round(value, 1))}s ({rng.describe()})",
    )
    for status, rng in age_counts:
        summary.append(f"{_plural(age_counts[(status, rng)], 'transaction')} open {rng.describe()}")

    producer_counts = _threshold_findings(
        findings, sorted(snapshot.active_producer_ids.items()), lambda b: f"broker {b}",
        thresholds.producer_ids_warn, thresholds.producer_ids_crit, "active_producer_ids",
        lambda subject, value, rng: f"{subject}: {value} active producer ids ({rng.describe()})",
        largest_first=False,
    )
    for status, rng in producer_counts:
        summary.append(f"{_plural(producer_counts[(status, rng)], 'broker')} with active producer ids {rng.describe()}")

    groups = snapshot.groups
    # stuck: behind a hanging, lost-commit, overdue or too old transaction; each place says which
    blocked_groups: dict[str, list[str]] = defaultdict(list)
    waiting_groups: dict[str, list[str]] = defaultdict(list)  # behind an untracked one, one past its timeout, or an old one
    young: set[str] = set()  # at the LSO of a transaction in flight younger than --txn-age-warn: no finding
    unsure_groups: dict[str, list[str]] = defaultdict(list)  # behind a transaction whose verdict is undetermined
    if groups is not None:
        # The words of a group's findings (below: only groups found here have any); imported here, as
        # check without --groups does not read Spark checkpoints (spark_readers: ~5 ms of every start).
        from kafkatxn.spark_readers import reader_option, reader_words, readers_count

        holders = {(h.topic, h.partition): h for h in (*snapshot.hanging, *snapshot.lost_commits, *snapshot.untracked)}
        for g in held_samples(groups):
            severity = group_block_severity(g, thresholds)
            # Held through its offsets partition: its consumers cannot fetch their committed offsets.
            where = f"{g.topic}-{g.partition}" + (f" (through {g.blocked_through})" if g.blocked_through else "")
            at = g.blocked_through.rsplit("-", 1) if g.blocked_through else (g.topic, g.partition)
            held = holders.get((at[0], int(at[1])))
            if severity is verdicts_groups.Severity.critical:
                blocked_groups[g.group].append(f"{where} ({blocking_words(g, thresholds, held)})")
            elif g.txn_hanging is None:  # whether it is stuck cannot be known: neither critical nor OK
                unsure_groups[g.group].append(where)
            elif severity is verdicts_groups.Severity.warning:
                waiting_groups[g.group].append(f"{where} ({blocking_words(g, thresholds, held)})")
            else:
                young.add(g.group)
        def group_findings(by_group: dict[str, list[str]], status: Status, severity: str, kind: str,
                           says: Callable[[str, str], str], skip: Iterable[str] = ()) -> None:
            # One finding per group (a group already blocked is not also undetermined or waiting).
            for group, where in sorted(by_group.items()):
                if group not in skip:
                    findings.append((status, Finding(severity, kind, group, len(where), None, says(group, ", ".join(where)))))

        group_findings(blocked_groups, Status.CRITICAL, "critical", "group_blocked", lambda group, where: (
            f"{reader_words(group)} blocked on {where} (kafkatxn diagnose {reader_option(group)})"))
        group_findings(unsure_groups, Status.UNKNOWN, "unknown", "group_undetermined", lambda group, where: (
            f"{reader_words(group)} blocked behind a transaction whose verdict is undetermined on {where}: "
            f"whether it is stuck cannot be known (kafkatxn diagnose {reader_option(group)})"), skip=blocked_groups)
        group_findings(waiting_groups, Status.WARNING, "warning", "group_waiting", lambda group, where: (
            f"{reader_words(group)} waits on {where} (kafkatxn diagnose {reader_option(group)})"), skip=blocked_groups)
        if blocked_groups:
            summary.append(readers_count(blocked_groups) + " blocked")
        unsure = set(unsure_groups) - set(blocked_groups)
        if unsure:
            summary.append(readers_count(unsure) + " blocked behind an undetermined transaction")
        waiting = len((set(waiting_groups) | young) - set(blocked_groups))
        warned = set(waiting_groups) - set(blocked_groups)
        if warned:
            summary.append(readers_count(warned) + " waiting on a transaction")
        # Made with only the held places' samples (snapshot.held_group_samples), the snapshot has the largest lag.
        group_lag_max = snapshot.group_lag_max if snapshot.group_lag_max is not None else max(map(_GROUP_LAG, groups), default=0)
        # Without a group lag range no value alerts: the 100,000 pairs are not made to find none.
        group_lags = alerting(groups, list(map(_GROUP_LAG, groups)), thresholds.group_lag_warn, thresholds.group_lag_crit) \
            if thresholds.group_lag_warn or thresholds.group_lag_crit else ()
        group_counts = _threshold_findings(
            findings, group_lags, lambda g: f"{g.group} {g.topic}-{g.partition}",
            thresholds.group_lag_warn, thresholds.group_lag_crit, "group_lag",
            lambda subject, value, rng: f"group {subject}: lag {value} messages ({rng.describe()})",
        )
        for status, rng in group_counts:
            summary.append(f"{_plural(group_counts[(status, rng)], 'group partition')} with lag {rng.describe()}")

    if snapshot.missing:
        for line in snapshot.missing:
            findings.append((Status.UNKNOWN, Finding("unknown", "incomplete", "cluster", None, None, f"incomplete: {line}")))
        if len(snapshot.missing) == 1:
            summary.append(f"incomplete: {snapshot.missing[0]}")
        else:
            summary.append(f"incomplete: {len(snapshot.missing)} parts did not answer (first: {snapshot.missing[0]})")

    status = worst(s for s, _ in findings)
    # The one count hanging gives too: open transactions on the scanned partitions (None: not gathered).
    open_count = snapshot.open_transaction_count
    if not summary:
        opened = _plural(open_count, "open transaction") if open_count is not None else "open transactions unknown"
        summary.append(
            f"{_plural(len(snapshot.partitions), 'partition')}, no hanging transactions, max LSO lag {max_lag}, {opened}"
        )
    oldest = snapshot.oldest_transaction_age_s()
    lagging = len(answered) - answered.count(0)  # lags are never negative (lso_lag_messages)
    # A figure whose part was not gathered is left out (its reason is in ``missing``), never a 0.
    has = snapshot.gathered
    perfdata = [
        *([PerfDatum("hanging_transactions", len(snapshot.hanging), crit="0", min=0),
           PerfDatum("lost_commit_markers", len(snapshot.lost_commits), crit="0", min=0),
           PerfDatum("undetermined_transactions", len(snapshot.undetermined), min=0),
           PerfDatum("untracked_transactions", len(snapshot.untracked), warn="0", min=0)] if has(PART_VERDICTS) else []),
        *([PerfDatum("lso_lag_max", max_lag, warn=_perf(thresholds.lso_lag_warn), crit=_perf(thresholds.lso_lag_crit), min=0),
           PerfDatum("lagging_partitions", lagging, min=0, max=len(snapshot.partitions))] if has(PART_OFFSETS) else []),
        *([PerfDatum("open_transactions", open_count, min=0)] if open_count is not None else []),
        *([PerfDatum("transaction_age_max", round(oldest, 3), "s", _perf(thresholds.txn_age_warn), _perf(thresholds.txn_age_crit), 0)]
          if has(PART_TRANSACTION_AGES) else []),
        *([PerfDatum(
            "active_producer_ids_max", max(snapshot.active_producer_ids.values(), default=0),
            warn=_perf(thresholds.producer_ids_warn), crit=_perf(thresholds.producer_ids_crit), min=0,
        )] if has(PART_PRODUCERS) else []),
        PerfDatum("partitions", len(snapshot.partitions), min=0),
        PerfDatum("missing_parts", len(snapshot.missing), min=0),
    ]
    if groups is not None and has(PART_GROUPS):
        perfdata += [
            PerfDatum("groups_blocked", len(blocked_groups), crit="0", min=0),
            PerfDatum("groups_waiting", waiting, min=0),
            PerfDatum("group_lag_max", group_lag_max,
                      warn=_perf(thresholds.group_lag_warn), crit=_perf(thresholds.group_lag_crit), min=0),
        ]
    facts = {
        "cluster_id": snapshot.cluster_id,
        "up": True,
        "partitions": len(snapshot.partitions),
        "hanging_transactions": len(snapshot.hanging) if has(PART_VERDICTS) else None,
        "lost_commit_markers": len(snapshot.lost_commits) if has(PART_VERDICTS) else None,
        "undetermined_transactions": len(snapshot.undetermined) if has(PART_VERDICTS) else None,
        "untracked_transactions": len(snapshot.untracked) if has(PART_VERDICTS) else None,
        "lso_lag_max_messages": max_lag if has(PART_OFFSETS) else None,
        "lagging_partitions": lagging if has(PART_OFFSETS) else None,
        "open_transactions": open_count,
        "transaction_age_max_ms": int(oldest * 1000) if has(PART_TRANSACTION_AGES) else None,
        "max_transaction_timeout_ms": snapshot.max_transaction_timeout_ms,
        "missing_parts": len(snapshot.missing),
        "gather_duration_ms": int(snapshot.duration_s * 1000),
    }
    if groups is not None and has(PART_GROUPS):
        facts["groups_blocked"] = len(blocked_groups)
        facts["groups_waiting"] = waiting
        facts["group_lag_max_messages"] = group_lag_max
    return CheckResult(status, ", ".join(summary), [f for _, f in findings], perfdata, facts)


_GROUP_LAG = itemgetter(GroupSample._fields.index("lag_messages"))


def alerting(items: Sequence[T], values: Sequence[float | None], warn: Range | None, crit: Range | None,
             distinct: set[float | None] | None = None) -> list[tuple[T, float]]:
    """The ``(item, value)`` pairs, in order, whose value ``warn`` or ``crit`` alerts on (None: no value,
    never alerting): each distinct value decided once, the pairs picked in C, as 30,000 partitions (100,000
    group places) hold a handful of distinct lags, and most of them alert on nothing. ``distinct``: ``set(values)``,
    when the caller has it."""
    ranges = [rng for rng in (crit, warn) if rng is not None]
    alerts = {value for value in (set(values) if distinct is None else distinct)
              if value is not None and any(rng.alerts(value) for rng in ranges)}
    return list(compress(zip(items, values), map(alerts.__contains__, values))) if alerts else []


def held_samples(groups: Sequence[GroupSample]) -> list[GroupSample]:
    """The samples of groups held on their partition (blocked, or waiting), in order."""
    return [g for g in groups if g.blocked or g.waiting]


def _past(g: GroupSample, rng: Range | None) -> bool:
    return rng is not None and g.txn_age_ms is not None and rng.alerts(g.txn_age_ms / 1000)


def group_block_severity(g: GroupSample, thresholds: Thresholds) -> verdicts_groups.Severity:
    """:func:`kafkatxn.verdicts_groups.blocked_severity` of a blocked group: ``--txn-age-crit`` is the
    critical age, ``--txn-age-warn`` the warning one."""
    return verdicts_groups.blocked_severity(g.txn_hanging, g.txn_overdue, _past(g, thresholds.txn_age_crit),
                                     _past(g, thresholds.txn_age_warn), lost_commit=g.txn_lost_commit,
                                     waiting=g.txn_verdict in verdicts_groups.WAITING_BLOCKS)


def blocking_words(g: GroupSample, thresholds: Thresholds, holder: object | None = None) -> str:
    """Which verdict blocks the group here, and the transaction where it is known, for a page."""
    v = g.txn_verdict
    tid = getattr(holder, "transactional_id", None)
    pid = getattr(holder, "producer_id", None)
    who = f" {tid}" if tid else f" producer {pid}" if pid is not None else ""
    age = f", open {format_duration_ms(g.txn_age_ms)}" if g.txn_age_ms is not None else ""
    if g.txn_hanging or v is verdicts_groups.BlockVerdict.hanging:
        return f"hanging transaction{who}{age}; abort releases it"
    if g.txn_lost_commit or v is verdicts_groups.BlockVerdict.lost_commit:
        return f"lost COMMIT marker{who}; restore-commit releases it"
    if g.txn_overdue or v is verdicts_groups.BlockVerdict.overdue:
        return f"overdue transaction{who}{age}: past its own timeout, and its coordinator has not aborted it"
    if v is verdicts_groups.BlockVerdict.untracked:
        at = getattr(holder, "hanging_at_ms", None)
        return f"untracked transaction{who}{age}: {untracked.state(at)}"
    if v is verdicts_groups.BlockVerdict.past_timeout:
        return f"transaction{who} past its own timeout{age}: its coordinator aborts it at its next cleanup"
    if _past(g, thresholds.txn_age_crit):
        return f"old transaction{who}{age} ({thresholds.txn_age_crit.describe()})"
    rng = thresholds.txn_age_warn
    return f"transaction in flight{who}{age}" + (f" ({rng.describe()})" if rng is not None else "")


def _perf(rng: Range | None) -> str:
    return rng.perfdata() if rng is not None else ""


def _threshold_findings(
    findings: list[tuple[Status, Finding]],
    values: Iterable[tuple[T, float]],
    subject_of: Callable[[T], str],
    warn: Range | None,
    crit: Range | None,
    kind: str,
    message: Callable[[str, float, Range], str],
    largest_first: bool = True,
) -> dict[tuple[Status, Range], int]:
    """A finding for each value a threshold alerts on, largest value first unless told to keep the
    order given; counts per (status, range). Each distinct value is decided once and only an
    alerting item is named: 30,000 partitions hold a handful of distinct LSO lags."""
    decided: dict[float, tuple[Status, Range] | None] = {}

    def decide(value: float) -> tuple[Status, Range] | None:
        for status, rng in ((Status.CRITICAL, crit), (Status.WARNING, warn)):
            if rng is not None and rng.alerts(value):
                return status, rng
        return None

    alerting = []
    for item, value in values:
        if value not in decided:
            decided[value] = decide(value)
        if decided[value] is not None:
            alerting.append((item, value))
    if largest_first:
        alerting.sort(key=lambda x: -x[1])  # stable: equal values keep their given order
    counts: dict[tuple[Status, Range], int] = defaultdict(int)
    for item, value in alerting:
        status, rng = decided[value]  # type: ignore[misc]
        subject = subject_of(item)
        findings.append((status, Finding(status.name.lower(), kind, subject, value, rng.text, message(subject, value, rng))))
        counts[(status, rng)] += 1
    return dict(sorted(counts.items(), key=lambda kv: -SEVERITY[kv[0][0]]))


__all__: Sequence[str] = [
    "Range", "PerfDatum", "format_perfdata", "Status", "Thresholds", "Finding", "CheckResult", "evaluate",
]
