"""``kafkatxn check``: one pass over the cluster, one status for cron, Nagios/Icinga and runbooks.

Three parts, as every capability has them:

* the **snapshot** (:func:`gather_snapshot`, the only I/O): metadata, ListOffsets at both isolation
  levels, DescribeProducers once for every partition (active producer ids per broker, and the
  candidates of the hanging-transaction rule of :mod:`kafkatxn.hanging`), ListTransactions and
  DescribeTransactions. The exporter (:mod:`kafkatxn.exporter`) uses the same snapshot.
* **pure decisions** over a :class:`ClusterSnapshot` (:func:`evaluate`), with thresholds written as
  monitoring-plugins range expressions (:class:`Range`);
* the **output**: one plugin line with performance data, then details (:meth:`CheckResult.nagios_text`),
  or a :class:`~kafkatxn.output.Report` for ``-o json``.
"""

from __future__ import annotations

import enum
import functools
import math
import re
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from kafkatxn.cluster import OPEN_TRANSACTION_STATES, TRANSACTION_STATES, Cluster, TopicPartition, TransactionDescription
from kafkatxn.durations import parse_duration_ms
from kafkatxn.errors import (
    EXIT_CRITICAL,
    EXIT_OK,
    EXIT_UNKNOWN,
    EXIT_WARNING,
    KafkatxnError,
    UsageError,
)
from kafkatxn.output import Report

# ------------------------------------------------------------------------------------------------
# Range expressions (https://www.monitoring-plugins.org/doc/guidelines.html#THRESHOLDFORMAT)
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Range:
    """A monitoring-plugins threshold: alert when the value is outside ``start:end`` (inside with ``@``).

    ``10`` → outside 0..10, ``10:`` → below 10, ``~:10`` → above 10, ``10:20`` → outside 10..20,
    ``@10:20`` → within 10..20 (ends included).
    """

    start: float
    end: float
    inside: bool = False
    text: str = ""  # as written, for perfdata and messages
    start_text: str = "0"
    end_text: str = ""

    @classmethod
    def parse(cls, text: str, number: Callable[[str], float] | None = None, what: str = "threshold") -> "Range":
        """Parse ``text``; ``number`` converts one endpoint (default: a plain number)."""
        convert = number or _plain_number
        raw = str(text).strip()
        if not raw:
            raise UsageError(f"empty {what}; use a range such as 10, 10:, ~:10, 10:20 or @10:20")
        body = raw
        inside = body.startswith("@")
        if inside:
            body = body[1:]
        if ":" in body:
            start_text, end_text = body.split(":", 1)
        else:
            start_text, end_text = "0", body
        try:
            start = -math.inf if start_text == "~" else convert(start_text) if start_text else 0.0
            end = math.inf if end_text == "" and ":" in body else convert(end_text)
        except (ValueError, UsageError):
            raise UsageError(
                f"bad {what} {raw!r}; use a range such as 10, 10:, ~:10, 10:20 or @10:20"
            ) from None
        if start > end:
            raise UsageError(f"bad {what} {raw!r}: the start of the range is above its end")
        return cls(start, end, inside, raw, start_text or "0", end_text)

    def alerts(self, value: float) -> bool:
        """True when ``value`` should raise this threshold's state."""
        within = self.start <= value <= self.end
        return within if self.inside else not within

    def perfdata(self) -> str:
        """The range in perfdata, in the perfdata's unit (durations become seconds)."""
        start = "~" if self.start == -math.inf else _number_text(self.start)
        end = "" if self.end == math.inf else _number_text(self.end)
        prefix = "@" if self.inside else ""
        if not self.inside and self.start == 0 and self.end != math.inf:
            return end
        return f"{prefix}{start}:{end}"

    def describe(self) -> str:
        """For messages: ``> 1000``, ``< 10``, ``outside 10:20``, ``within 10:20``."""
        if self.inside:
            return f"within {self.text.lstrip('@')}"
        if self.end == math.inf:
            return f"< {self.start_text}"
        if self.start == -math.inf or self.start == 0:  # counts and ages are never negative
            return f"> {self.end_text}"
        return f"outside {self.text}"


def _plain_number(text: str) -> float:
    value = float(text)
    if math.isnan(value):  # every comparison with NaN is false: the threshold would always alert
        raise ValueError("not a number")
    return value


def duration_seconds(text: str) -> float:
    """A range endpoint given as a duration (``90s``, ``15m``, bare number = seconds), in seconds."""
    return parse_duration_ms(text) / 1000


def parse_count_range(text: str | None, what: str) -> Range | None:
    return None if text is None or str(text).strip().lower() in ("", "none", "off") else Range.parse(text, what=what)


def parse_duration_range(text: str | None, what: str) -> Range | None:
    if text is None or str(text).strip().lower() in ("", "none", "off"):
        return None
    return Range.parse(text, number=duration_seconds, what=what)


def _number_text(value: float | int) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".")
    return str(value)


# ------------------------------------------------------------------------------------------------
# Performance data
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PerfDatum:
    """One ``'label'=value[UOM];warn;crit;min;max`` item."""

    label: str
    value: float | int
    uom: str = ""
    warn: str = ""  # a range expression in the perfdata's unit, or empty
    crit: str = ""
    min: float | int | None = None
    max: float | int | None = None

    def format(self) -> str:
        label = self.label.replace("'", "''")
        if re.search(r"[\s'=]", self.label):
            label = f"'{label}'"
        fields = [
            f"{label}={_number_text(self.value)}{self.uom}",
            self.warn,
            self.crit,
            "" if self.min is None else _number_text(self.min),
            "" if self.max is None else _number_text(self.max),
        ]
        return ";".join(fields).rstrip(";")


def format_perfdata(items: Iterable[PerfDatum]) -> str:
    return " ".join(item.format() for item in items)


# ------------------------------------------------------------------------------------------------
# Snapshot
# ------------------------------------------------------------------------------------------------

# Every state ListTransactions can report (TRANSACTION_STATES), so absent states are exported as 0
# rather than missing; OPEN_TRANSACTION_STATES have begun and not yet completed.


@dataclass(frozen=True)
class PartitionSample:
    topic: str
    partition: int
    leader: int
    high_watermark: int | None  # None when the leader did not answer
    last_stable_offset: int | None

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @functools.cached_property  # read several times per partition per scrape; 10,000s of partitions
    def lso_lag_messages(self) -> int | None:
        """High watermark minus LSO: what read_committed consumers cannot read yet (the broker's
        LastStableOffsetLag gauge)."""
        from kafkatxn.lso import Offsets

        if self.high_watermark is None or self.last_stable_offset is None:
            return None
        return Offsets(self.high_watermark, self.last_stable_offset).lag


@dataclass(frozen=True)
class TransactionSample:
    """A transaction its coordinator has open (DescribeTransactions)."""

    transactional_id: str
    state: str
    producer_id: int
    coordinator_id: int
    start_time_ms: int  # -1 when unknown
    timeout_ms: int
    topics: tuple[str, ...] = ()  # topics the transaction has written to


@dataclass(frozen=True)
class HangingSample:
    """A hanging transaction as :mod:`kafkatxn.hanging` classifies it (only the fields check needs)."""

    topic: str
    partition: int
    producer_id: int
    start_offset: int
    transactional_id: str | None
    reason: str
    lso_lag_messages: int | None = None


@dataclass
class ClusterSnapshot:
    """Everything check and the exporter decide on, from one pass over the cluster."""

    taken_at_ms: int
    duration_s: float = 0.0
    error: str | None = None  # set when nothing could be read (unreachable, auth, deadline)
    cluster_id: str | None = None
    brokers: tuple[int, ...] = ()  # registered in metadata
    replica_brokers: tuple[int, ...] = ()  # named as a replica of some partition (may be down)
    partitions: tuple[PartitionSample, ...] = ()
    transaction_states: dict[str, int] = field(default_factory=dict)  # ListTransactions counts by state
    open_transactions: tuple[TransactionSample, ...] = ()
    active_producer_ids: dict[int, int] = field(default_factory=dict)  # leader broker -> distinct producer ids
    hanging: tuple[HangingSample, ...] = ()
    max_transaction_timeout_ms: int | None = None
    missing: tuple[str, ...] = ()  # parts that did not answer, one line each
    transactional_ids: tuple[str, ...] | None = None  # every id ListTransactions returned; None unless all answered

    @property
    def up(self) -> bool:
        return self.error is None

    def broker_up(self) -> dict[int, bool]:
        """Every broker known from metadata or replica lists: up when registered in metadata."""
        registered = set(self.brokers)
        return {b: b in registered for b in sorted(registered | set(self.replica_brokers))}

    def transaction_age_s(self, txn: TransactionSample) -> float | None:
        if txn.start_time_ms < 0:
            return None
        return max(self.taken_at_ms - txn.start_time_ms, 0) / 1000

    def oldest_transaction_age_s(self) -> float:
        ages = [a for a in (self.transaction_age_s(t) for t in self.open_transactions) if a is not None]
        return max(ages, default=0.0)


def _hanging_samples(cluster: Cluster, states, now_ms: int, max_timeout_ms: int, lso: dict, hw: dict, missing: list[str]):
    """The hanging rule of :mod:`kafkatxn.hanging` over producer states already described."""
    from kafkatxn import hanging

    candidates = hanging.find_candidates(states, now_ms, max_timeout_ms)
    if not candidates:
        return ()
    view, view_missing = hanging.coordinator_view(cluster, {c.producer.producer_id for c in candidates})
    missing.extend(view_missing)
    out = []
    for c in hanging.classify_all(candidates, view):
        if c.verdict is hanging.Verdict.HANGING:
            row = hanging.hanging_row(c, now_ms, lso, hw)
            out.append(
                HangingSample(row.topic, row.partition, row.producer_id, row.start_offset,
                              row.transactional_id, row.reason, row.lso_lag_messages)
            )
        elif c.verdict is hanging.Verdict.UNDETERMINED:
            missing.append(f"{c.open_txn.tp} producer {c.open_txn.producer.producer_id}: {c.reason}")
    return tuple(out)


def gather_snapshot(
    cluster: Cluster,
    topic_regex: str | None = None,
    max_transaction_timeout_ms: int | None = None,
    clock: Callable[[], float] = time.time,
) -> ClusterSnapshot:
    """One pass over the cluster. Unreachable, auth and deadline failures become ``error``; parts
    that did not answer become ``missing``. Usage errors (a bad regex) are raised."""
    from kafkatxn import hanging, producers

    started = time.monotonic()
    taken_at_ms = int(clock() * 1000)
    missing: list[str] = []
    try:
        md = cluster.metadata()
        # Internal topics too: a hanging transaction on __consumer_offsets stalls transactional
        # offset commits just as one on a data topic stalls consumers.
        selected = cluster.select_partitions(include_internal=True, topic_pattern=topic_regex)
    except UsageError:
        raise
    except KafkatxnError as exc:
        return ClusterSnapshot(taken_at_ms, time.monotonic() - started, error=str(exc))

    if topic_regex and not selected:
        # A typo in the regex must not turn into a check that is always OK.
        missing.append(f"no topic matches --topic-regex {topic_regex!r}")
    tps = [p.tp for p in selected]
    snapshot = ClusterSnapshot(
        taken_at_ms,
        cluster_id=md.cluster_id,
        brokers=tuple(b.id for b in md.brokers),
        replica_brokers=tuple(sorted({r for p in md.partitions for r in p.replicas})),
    )

    def step(what: str, fn: Callable[[], object]) -> object | None:
        try:
            return fn()
        except UsageError:
            raise
        except KafkatxnError as exc:
            missing.append(f"{what}: {exc}")
            return None

    # Both isolation levels in one round trip per leader (LSO <= HW within each pair).
    pairs = step("offsets", lambda: cluster.stable_and_high_offsets(tps))
    offsets = pairs.value if pairs is not None else {}
    missing += [f"offsets {m}" for m in (pairs.missing if pairs is not None else [])]
    lso = {tp: pair[0] for tp, pair in offsets.items()}
    hw = {tp: pair[1] for tp, pair in offsets.items()}
    samples = []
    for p in selected:
        pair = offsets.get(TopicPartition(p.topic, p.partition))
        samples.append(PartitionSample(p.topic, p.partition, p.leader, *((pair[1], pair[0]) if pair else (None, None))))
    snapshot.partitions = tuple(samples)

    produced = step(
        "producer state", lambda: producers.snapshot_producers(cluster, tps, with_transactional_ids=False)
    )
    if produced is not None:
        missing += [f"producer state {m}" for m in produced.missing]
        snapshot.active_producer_ids = {
            row.broker_id: row.active_producer_ids for row in producers.summarize(produced) if row.scope == "broker"
        }
        timeout_ms = max_transaction_timeout_ms
        if timeout_ms is None:
            found = step("transaction.max.timeout.ms", lambda: hanging.cluster_max_transaction_timeout(cluster))
            if found is not None:
                timeout_ms, config_missing = found
                missing += config_missing
        snapshot.max_transaction_timeout_ms = timeout_ms
        if timeout_ms is not None:
            now_ms = int(clock() * 1000)
            result = step(
                "hanging transactions",
                lambda: _hanging_samples(cluster, produced.states, now_ms, timeout_ms, lso, hw, missing),
            )
            snapshot.hanging = result or ()

    listed = step("transactions", lambda: cluster.list_transactions()[0])
    if listed is not None:
        missing += [f"transactions {m}" for m in listed.missing]
        snapshot.transaction_states = dict(Counter(t.state for t in listed.value))
        if not listed.missing:
            snapshot.transactional_ids = tuple(t.transactional_id for t in listed.value)
        open_ids = sorted({t.transactional_id for t in listed.value if t.state in OPEN_TRANSACTION_STATES})
        if open_ids:
            described = step("open transactions", lambda: cluster.describe_transactions(open_ids))
            if described is not None:
                found_txns, _gone, describe_missing = described
                missing += [f"transactions {m}" for m in describe_missing]
                scanned_topics = {p.topic for p in selected}
                snapshot.open_transactions = tuple(
                    _transaction_sample(d) for d in found_txns.values()
                    if d.state in OPEN_TRANSACTION_STATES
                    # With --topic-regex, ages count only for transactions on the topics chosen.
                    and (topic_regex is None or any(tp.topic in scanned_topics for tp in d.partitions))
                )

    snapshot.missing = tuple(missing)
    snapshot.duration_s = time.monotonic() - started
    return snapshot


def _transaction_sample(d: TransactionDescription) -> TransactionSample:
    return TransactionSample(
        d.transactional_id, d.state, d.producer_id, d.coordinator_id, d.start_time_ms, d.timeout_ms,
        tuple(sorted({tp.topic for tp in d.partitions})),
    )


# ------------------------------------------------------------------------------------------------
# Decision
# ------------------------------------------------------------------------------------------------


class Status(enum.IntEnum):
    OK = EXIT_OK
    WARNING = EXIT_WARNING
    CRITICAL = EXIT_CRITICAL
    UNKNOWN = EXIT_UNKNOWN


# A confirmed critical finding pages even when part of the cluster did not answer; a partial view
# outranks warnings because what is missing may hide something critical.
_SEVERITY = {Status.OK: 0, Status.WARNING: 1, Status.UNKNOWN: 2, Status.CRITICAL: 3}


def worst(statuses: Iterable[Status]) -> Status:
    return max(statuses, key=_SEVERITY.__getitem__, default=Status.OK)


@dataclass(frozen=True)
class Thresholds:
    """Ranges per figure; None disables that check. Durations are in seconds."""

    lso_lag_warn: Range | None = Range.parse("1000")
    lso_lag_crit: Range | None = Range.parse("10000")
    txn_age_warn: Range | None = Range.parse("5m", number=duration_seconds)
    txn_age_crit: Range | None = Range.parse("15m", number=duration_seconds)
    producer_ids_warn: Range | None = None
    producer_ids_crit: Range | None = None


@dataclass(frozen=True)
class Finding:
    status: str  # warning, critical or unknown
    kind: str  # hanging_transaction, lso_lag, transaction_age, active_producer_ids, incomplete, unreachable
    subject: str  # partition, transactional id, broker
    value: float | int | None
    threshold: str | None
    message: str


@dataclass
class CheckResult:
    status: Status
    summary: str
    findings: list[Finding]
    perfdata: list[PerfDatum]
    facts: dict[str, object] = field(default_factory=dict)

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
    if not snapshot.up:
        finding = Finding("unknown", "unreachable", "cluster", None, None, snapshot.error or "cluster unreachable")
        return CheckResult(Status.UNKNOWN, snapshot.error or "cluster unreachable", [finding], [],
                           {"cluster_id": None, "up": False})

    findings: list[tuple[Status, Finding]] = []
    summary: list[str] = []

    # Hanging transactions are always critical: no marker will ever come, the LSO never moves.
    for h in snapshot.hanging:
        lag = f", LSO lag {h.lso_lag_messages}" if h.lso_lag_messages is not None else ""
        tid = f" ({h.transactional_id})" if h.transactional_id else ""
        findings.append((Status.CRITICAL, Finding(
            "critical", "hanging_transaction", f"{h.topic}-{h.partition}", h.start_offset, None,
            f"hanging transaction on {h.topic}-{h.partition} from offset {h.start_offset}, "
            f"producer {h.producer_id}{tid}: {h.reason}{lag}",
        )))
    if snapshot.hanging:
        summary.append(_plural(len(snapshot.hanging), "hanging transaction"))

    lags = [(p, p.lso_lag_messages) for p in snapshot.partitions if p.lso_lag_messages is not None]
    max_lag = max((lag for _, lag in lags), default=0)
    lag_counts = _threshold_findings(
        findings, ((str(p.tp), lag) for p, lag in sorted(lags, key=lambda x: -x[1])),
        thresholds.lso_lag_warn, thresholds.lso_lag_crit, "lso_lag",
        lambda subject, value, rng: f"{subject}: LSO lag {value} messages ({rng.describe()})",
    )
    for status, rng in lag_counts:
        summary.append(f"{_plural(lag_counts[(status, rng)], 'partition')} with LSO lag {rng.describe()}")

    ages = [(t, snapshot.transaction_age_s(t)) for t in snapshot.open_transactions]
    ages = [(t, a) for t, a in ages if a is not None]
    age_counts = _threshold_findings(
        findings, ((t.transactional_id, a) for t, a in sorted(ages, key=lambda x: -x[1])),
        thresholds.txn_age_warn, thresholds.txn_age_crit, "transaction_age",
        lambda subject, value, rng: f"transaction {subject!r} open for {_number_text(round(value, 1))}s ({rng.describe()})",
    )
    for status, rng in age_counts:
        summary.append(f"{_plural(age_counts[(status, rng)], 'transaction')} open {rng.describe()}")

    producer_counts = _threshold_findings(
        findings, ((f"broker {b}", n) for b, n in sorted(snapshot.active_producer_ids.items())),
        thresholds.producer_ids_warn, thresholds.producer_ids_crit, "active_producer_ids",
        lambda subject, value, rng: f"{subject}: {value} active producer ids ({rng.describe()})",
    )
    for status, rng in producer_counts:
        summary.append(f"{_plural(producer_counts[(status, rng)], 'broker')} with active producer ids {rng.describe()}")

    if snapshot.missing:
        for line in snapshot.missing:
            findings.append((Status.UNKNOWN, Finding("unknown", "incomplete", "cluster", None, None, f"incomplete: {line}")))
        if len(snapshot.missing) == 1:
            summary.append(f"incomplete: {snapshot.missing[0]}")
        else:
            summary.append(f"incomplete: {len(snapshot.missing)} parts did not answer (first: {snapshot.missing[0]})")

    status = worst(s for s, _ in findings)
    open_count = sum(snapshot.transaction_states.get(s, 0) for s in OPEN_TRANSACTION_STATES)
    if not summary:
        summary.append(
            f"{_plural(len(snapshot.partitions), 'partition')}, no hanging transactions, max LSO lag {max_lag}, "
            f"{_plural(open_count, 'open transaction')}"
        )
    oldest = snapshot.oldest_transaction_age_s()
    lagging = sum(1 for _, lag in lags if lag > 0)
    perfdata = [
        PerfDatum("hanging_transactions", len(snapshot.hanging), crit="0", min=0),
        PerfDatum("lso_lag_max", max_lag, warn=_perf(thresholds.lso_lag_warn), crit=_perf(thresholds.lso_lag_crit), min=0),
        PerfDatum("lagging_partitions", lagging, min=0, max=len(snapshot.partitions)),
        PerfDatum("open_transactions", open_count, min=0),
        PerfDatum("transaction_age_max", round(oldest, 3), "s", _perf(thresholds.txn_age_warn), _perf(thresholds.txn_age_crit), 0),
        PerfDatum(
            "active_producer_ids_max", max(snapshot.active_producer_ids.values(), default=0),
            warn=_perf(thresholds.producer_ids_warn), crit=_perf(thresholds.producer_ids_crit), min=0,
        ),
        PerfDatum("partitions", len(snapshot.partitions), min=0),
        PerfDatum("missing_parts", len(snapshot.missing), min=0),
    ]
    facts = {
        "cluster_id": snapshot.cluster_id,
        "up": True,
        "partitions": len(snapshot.partitions),
        "hanging_transactions": len(snapshot.hanging),
        "lso_lag_max_messages": max_lag,
        "lagging_partitions": lagging,
        "open_transactions": open_count,
        "transaction_age_max_ms": int(oldest * 1000),
        "max_transaction_timeout_ms": snapshot.max_transaction_timeout_ms,
        "missing_parts": len(snapshot.missing),
        "gather_duration_ms": int(snapshot.duration_s * 1000),
    }
    return CheckResult(status, ", ".join(summary), [f for _, f in findings], perfdata, facts)


def _perf(rng: Range | None) -> str:
    return rng.perfdata() if rng is not None else ""


def _threshold_findings(
    findings: list[tuple[Status, Finding]],
    values: Iterable[tuple[str, float]],
    warn: Range | None,
    crit: Range | None,
    kind: str,
    message: Callable[[str, float, Range], str],
) -> dict[tuple[Status, Range], int]:
    """A finding for each value a threshold alerts on (critical first); counts per (status, range)."""
    counts: dict[tuple[Status, Range], int] = defaultdict(int)
    for subject, value in values:
        for status, rng in ((Status.CRITICAL, crit), (Status.WARNING, warn)):
            if rng is not None and rng.alerts(value):
                findings.append((status, Finding(status.name.lower(), kind, subject, value, rng.text, message(subject, value, rng))))
                counts[(status, rng)] += 1
                break
    return dict(sorted(counts.items(), key=lambda kv: -_SEVERITY[kv[0][0]]))


def thresholds_from_options(
    lso_lag_warn: str | None,
    lso_lag_crit: str | None,
    txn_age_warn: str | None,
    txn_age_crit: str | None,
    producer_ids_warn: str | None,
    producer_ids_crit: str | None,
) -> Thresholds:
    """Thresholds from command-line texts; ``none``/``off`` disables one."""
    return Thresholds(
        lso_lag_warn=parse_count_range(lso_lag_warn, "--lso-lag-warn"),
        lso_lag_crit=parse_count_range(lso_lag_crit, "--lso-lag-crit"),
        txn_age_warn=parse_duration_range(txn_age_warn, "--txn-age-warn"),
        txn_age_crit=parse_duration_range(txn_age_crit, "--txn-age-crit"),
        producer_ids_warn=parse_count_range(producer_ids_warn, "--producer-ids-warn"),
        producer_ids_crit=parse_count_range(producer_ids_crit, "--producer-ids-crit"),
    )


__all__: Sequence[str] = [
    "Range", "PerfDatum", "format_perfdata", "ClusterSnapshot", "PartitionSample", "TransactionSample",
    "HangingSample", "gather_snapshot", "Status", "Thresholds", "Finding", "CheckResult", "evaluate",
    "thresholds_from_options",
]
