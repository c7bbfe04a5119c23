"""The fact layer's log history (:mod:`kafkatxn.facts`): what happened to transactional ids, from
their coordinator's log, for ``kafkatxn transactions history`` and ``diagnose``'s history line.

Gather: the ``__transaction_state`` partitions that own the ids (``abs(hashCode(id)) % partitions``,
the count from the cluster's metadata), each read in this process by the one reader of the log
(:mod:`kafkatxn.kafka.log_reader`, the facade's ``read_log_partition``), no Spark. Decide: the rows and
events of :mod:`kafkatxn.timeline` (pure). A partition that could not be read is a typed
``Missing`` (an ACL it needs named), so the command exits 3; the other ids are still shown.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

from kafkatxn.kafka.txnlog import TOPIC
from kafkatxn.verdicts import coordinator_partition
from kafkatxn.txnlog_records import DecodeCounts
from kafkatxn.model import Missing, Part
from kafkatxn.timeline import HistoryRow, HistorySummary, Timeline, summarize

if TYPE_CHECKING:
    from kafkatxn.kafka.facade import Cluster

READ_ACL = f"READ on Topic {TOPIC}"


@dataclass
class LogPlan:
    """Which log partitions to read, and which records of them are wanted."""

    topic: str
    partition_count: int
    partitions: list[int]
    transactional_ids: list[str] | None  # exact ids (records of others are skipped undecoded), or
    pattern: str | None  # a regex the id must match in full
    wanted: Callable[[str], bool]


@dataclass
class HistoryResult:
    rows: list[HistoryRow]
    missing: list[Missing]
    not_found: list[str]  # asked ids with no record read
    counts: DecodeCounts
    plan: LogPlan | None
    next_offsets: dict[int, int] = field(default_factory=dict)  # where --follow goes on
    timeline: Timeline = field(default_factory=Timeline)


def _log_partition_count(cluster: Cluster, topic: str) -> int | None:
    return sum(1 for p in cluster.metadata().partitions if p.topic == topic) or None


def plan(cluster: Cluster, transactional_ids: Sequence[str], pattern: str | None, topic: str = TOPIC) -> tuple[LogPlan | None, list[Missing]]:
    """The partitions owning ``transactional_ids``, and those of the ids the coordinators list that
    ``pattern`` matches (ListTransactions; an id they no longer hold is still shown when its
    partition is read for another)."""
    count = _log_partition_count(cluster, topic)
    if count is None:
        return None, [Missing(Part(topic), f"not in the cluster's metadata: no transaction was started yet, or the principal needs DESCRIBE on Topic {topic}", acl=f"DESCRIBE on Topic {topic}")]
    missing: list[Missing] = []
    ids = list(dict.fromkeys(transactional_ids))
    regex = re.compile(pattern) if pattern is not None else None
    listed: list[str] = []
    if regex is not None:
        found, _support = cluster.list_transactions(pattern=pattern)
        missing.extend(found.missing)
        listed = [t.transactional_id for t in found.value if regex.fullmatch(t.transactional_id)]
    parts = sorted({coordinator_partition(t, count) for t in [*ids, *listed]})
    exact = set(ids)

    def wanted(tid: str) -> bool:
        return tid in exact or (regex is not None and regex.fullmatch(tid) is not None)

    return LogPlan(topic, count, parts, ids if regex is None else None, pattern, wanted), missing


def _missing(topic: str, partition: int, exc: Exception) -> Missing:
    from kafkatxn.kafka.client_errors import part_missing

    code = getattr(exc, "code", None)
    subject = Part(f"{topic}-{partition}")
    if code is not None:
        missing = part_missing(subject, code, READ_ACL)
        if missing.acl:
            return missing
    return Missing(subject, str(exc), what="transaction log")


def read_history(
    cluster: Cluster,
    transactional_ids: Sequence[str] = (),
    pattern: str | None = None,
    since_ms: int | None = None,
    topic: str = TOPIC,
    now_ms: int | None = None,
    timeout_s: float | None = None,
) -> HistoryResult:
    """Each id's rows, id after id in the order asked (a pattern's in name order), each in log order."""
    log_plan, missing = plan(cluster, transactional_ids, pattern, topic)
    counts = DecodeCounts()
    result = HistoryResult([], missing, [], counts, log_plan)
    if log_plan is None:
        return result
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    start = now - since_ms if since_ms is not None else None
    entries = []
    for p in log_plan.partitions:
        try:
            for chunk in cluster.read_log_partition(
                p, start_time_ms=start, topic=topic, transactional_ids=log_plan.transactional_ids,
                counts=counts, next_offsets=result.next_offsets, timeout_s=timeout_s,
            ):
                entries.extend(chunk)
        except (RuntimeError, TimeoutError) as exc:
            result.missing.append(_missing(topic, p, exc))
            result.next_offsets.pop(p, None)
    rows = [r for r in result.timeline.feed(entries) if not r.transactional_id or log_plan.wanted(r.transactional_id)]
    rows += [r for r in result.timeline.flush() if log_plan.wanted(r.transactional_id)]
    result.rows = order(rows, transactional_ids)
    seen = {r.transactional_id for r in rows}
    result.not_found = [t for t in dict.fromkeys(transactional_ids)
                        if t not in seen and coordinator_partition(t, log_plan.partition_count) in result.next_offsets]
    return result


def order(rows: Sequence[HistoryRow], transactional_ids: Sequence[str] = ()) -> list[HistoryRow]:
    """Id after id (those asked by name first, in that order; then by name), each in log order;
    records nobody could decode last."""
    rank = {t: i for i, t in enumerate(dict.fromkeys(transactional_ids))}
    return sorted(rows, key=lambda r: (not r.transactional_id, rank.get(r.transactional_id, len(rank)), r.transactional_id,
                                       r.log_partition, r.log_offset))


def follow(cluster: Cluster, result: HistoryResult, stop: Callable[[], bool] | None = None) -> Iterator[list[HistoryRow]]:
    """Rows of records written after ``result`` was read, as they come (one list per poll, maybe empty).
    Raises RuntimeError (one line) when the log cannot be read any more."""
    log_plan = result.plan
    if log_plan is None or not result.next_offsets:
        return
    for chunk in cluster.follow_log_partitions(
        result.next_offsets, topic=log_plan.topic, transactional_ids=log_plan.transactional_ids,
        counts=result.counts, stop=stop,
    ):
        yield [r for r in result.timeline.feed(chunk) if not r.transactional_id or log_plan.wanted(r.transactional_id)]


def summaries(cluster: Cluster, transactional_ids: Sequence[str], now_ms: int) -> tuple[dict[str, HistorySummary], str | None]:
    """diagnose's line per id over the last day of its log, or (``{}``, why) when the log could not be read.
    It takes at most half the time diagnose has left: a log it cannot read quickly leaves the history
    undetermined, not diagnose's answer."""
    from kafkatxn.timeline import DAY_MS

    try:
        result = read_history(cluster, transactional_ids, since_ms=DAY_MS, now_ms=now_ms, timeout_s=cluster.remaining_s() / 2)
    except Exception as exc:  # noqa: BLE001 - diagnose goes on without its history (the facade words its errors)
        return {}, str(exc)
    if result.missing:
        return {}, "; ".join(f"{m.subject}: {m.reason}" for m in result.missing)
    by_id: dict[str, list[HistoryRow]] = {t: [] for t in transactional_ids}
    for r in result.rows:
        if r.transactional_id in by_id:
            by_id[r.transactional_id].append(r)
    return {t: summarize(t, rows, now_ms) for t, rows in by_id.items()}, None


def evidence(summary: HistorySummary) -> dict:
    """diagnose's ``history_evidence``: the counts behind the line."""
    from dataclasses import asdict

    return {k: v for k, v in asdict(summary).items() if k not in ("line", "transactional_id")}
