"""The exporter's metric families over one snapshot (:class:`~kafkatxn.snapshot.ClusterSnapshot`), the
same one ``kafkatxn check`` decides on: pure, no I/O. :func:`metric_families` is what every scrape
and textfile write renders (:mod:`kafkatxn.exporter` gathers and serves; :mod:`kafkatxn.exposition`
writes the text); :class:`ExportOptions` are its cardinality controls.

Names: one ``kafkatxn_`` prefix, base units (``_seconds``, ``_messages``), and no ``cluster`` or
``instance``/``job`` label, which would clash with Prometheus target labels.
"""

from __future__ import annotations

import itertools
import logging
from bisect import bisect_right
from collections import defaultdict
from dataclasses import dataclass
from operator import itemgetter, lt, ne
from typing import Iterable, Sequence

from prometheus_client.core import GaugeMetricFamily, Metric

from kafkatxn import spark_exposition
from kafkatxn.exposition_tables import LabelRows, TableGauge
from kafkatxn.model import OPEN_TRANSACTION_STATES, TRANSACTION_STATES
from kafkatxn.partition_columns import PartitionColumns
from kafkatxn.snapshot import (
    PART_GROUPS, PART_OFFSETS, PART_PRODUCERS, PART_TRANSACTION_AGES, PART_TRANSACTION_STATES, PART_VERDICTS, ClusterSnapshot,
    GroupSample, GroupSamples, lso_lags,
)

log = logging.getLogger("kafkatxn.exporter")


@dataclass(frozen=True)
class ExportOptions:
    """Cardinality controls. The partition scan itself is narrowed by ``topic_regex`` in the gatherer."""

    only_lagging: bool = False  # per-partition series only where the LSO lags the high watermark
    per_topic: bool = False  # per-topic sums instead of per-partition series
    per_group: bool = False  # consumer-group lag: per-group sums only, no per-partition series
    per_family: bool = False  # transactional-id churn per id family instead of cluster-wide


def metric_families(
    snapshot: ClusterSnapshot, options: ExportOptions = ExportOptions(), snapshot_age_s: float = 0.0
) -> list[Metric]:
    """The metrics for one snapshot. Cluster-wide figures are always there, so alerts keep working
    whatever the cardinality options; ``kafkatxn_up`` is 0 and little else when nothing was read."""
    def gauge(name: str, doc: str, value: float | None = None, labels: Iterable[str] | None = None) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, doc, value=value, labels=list(labels) if labels is not None else None)

    out: list[Metric] = [
        gauge("kafkatxn_up", "1 when the cluster answered the last gather, 0 when it could not be reached.",
              1 if snapshot.up else 0),
        gauge("kafkatxn_scrape_duration_seconds", "Wall time of the gather behind these metrics.", snapshot.duration_s),
        gauge("kafkatxn_snapshot_age_seconds", "Age of the cached snapshot served (0 when gathered for this scrape).",
              max(snapshot_age_s, 0.0)),
        gauge("kafkatxn_scrape_incomplete", "1 when some part of the cluster did not answer (see kafkatxn_scrape_missing_parts).",
              1 if snapshot.missing or not snapshot.up else 0),
        gauge("kafkatxn_scrape_missing_parts", "Number of parts (brokers, partitions, requests) that did not answer.",
              len(snapshot.missing)),
    ]
    if not snapshot.up:
        return out
    # A figure whose part was not gathered has no series (never a 0); this says which parts those are.
    has = snapshot.gathered
    not_gathered = gauge("kafkatxn_scrape_part_missing", "1 for each part of the gather that did not arrive: its "
                         "figures have no series in this scrape (the reason is logged with the missing parts).", labels=["part"])
    for part in sorted(snapshot.not_gathered):
        not_gathered.add_metric([part], 1)
    out.append(not_gathered)

    brokers = gauge("kafkatxn_broker_up", "1 for a broker registered in metadata, 0 for one only named as a replica.",
                    labels=["broker"])
    for broker_id, up in snapshot.broker_up().items():
        brokers.add_metric([str(broker_id)], 1 if up else 0)
    out.append(brokers)

    partition_lags = lso_lags(snapshot.partitions)
    lags = [lag for lag in partition_lags if lag is not None] if None in partition_lags else partition_lags
    out.append(gauge("kafkatxn_partitions", "Partitions scanned (after --topic-regex).", len(snapshot.partitions)))
    if has(PART_OFFSETS):
        out += [
            gauge("kafkatxn_lso_lag_max_messages", "Largest high watermark minus last stable offset over the partitions scanned.",
                  max(lags, default=0)),
            gauge("kafkatxn_lagging_partitions", "Partitions whose last stable offset is behind the high watermark.",
                  len(lags) - lags.count(0)),  # the lags are at least 0
        ]

    if options.per_topic:
        out += _per_topic(snapshot, options)
    else:
        out += _per_partition(snapshot, options, partition_lags)

    states = gauge("kafkatxn_transactions", "Transactional ids per coordinator state (ListTransactions).", labels=["state"])
    for state in sorted(set(TRANSACTION_STATES) | set(snapshot.transaction_states)) if has(PART_TRANSACTION_STATES) else ():
        states.add_metric([state], snapshot.transaction_states.get(state, 0))
    out.append(states)
    if has(PART_TRANSACTION_AGES):
        out.append(gauge(
            "kafkatxn_transaction_oldest_age_seconds",
            f"Age of the oldest open transaction ({', '.join(sorted(OPEN_TRANSACTION_STATES))} at its coordinator, or "
            "hanging or untracked: dated by its first record); 0 when none.",
            snapshot.oldest_transaction_age_s(),
        ))
    if snapshot.open_transaction_count is not None:
        out.append(gauge("kafkatxn_open_transactions", "Open transactions on the partitions scanned (DescribeProducers): "
                         "the count hanging and check give.", snapshot.open_transaction_count))
    if has(PART_VERDICTS):
        out.append(gauge(
            "kafkatxn_hanging_transactions",
            "Open transactions on partitions that their coordinator does not track (never completed; the LSO is stuck).",
            len(snapshot.hanging),
        ))
        out.append(gauge(
            "kafkatxn_lost_commit_markers",
            "Open transactions their coordinator's log shows committed: the partition lost the COMMIT marker "
            "(restore-commit releases them; aborting would drop committed data).",
            len(snapshot.lost_commits),
        ))
        out.append(gauge(
            "kafkatxn_untracked_transactions",
            "Open transactions their coordinator does not track, not yet past their deadline (their producer's own "
            "transaction timeout since their last write): hanging then unless they end. They hold the LSO meanwhile.",
            len(snapshot.untracked),
        ))
        until = GaugeMetricFamily(
            "kafkatxn_untracked_transaction_seconds_until_hanging",
            "Per untracked transaction: seconds until it counts as hanging (0 once due), unless it ends first.",
            labels=["topic", "partition", "transactional_id"])
        for u in snapshot.untracked:
            if u.hanging_at_ms is not None:
                until.add_metric([u.topic, str(u.partition), u.transactional_id or ""],
                                 max(u.hanging_at_ms - snapshot.taken_at_ms, 0) / 1000)
        out.append(until)
        out.append(gauge(
            "kafkatxn_undetermined_transactions",
            "Open transactions past the maximum timeout that could not be decided: a coordinator that could own "
            "their transactional id did not answer (not counted as hanging).",
            len(snapshot.undetermined),
        ))
    if snapshot.max_transaction_timeout_ms is not None:
        out.append(gauge("kafkatxn_max_transaction_timeout_seconds",
                         "The brokers' transaction.max.timeout.ms, the age past which an open transaction is checked for hanging.",
                         snapshot.max_transaction_timeout_ms / 1000))
    if snapshot.groups is not None and has(PART_GROUPS):  # the Spark queries among the readers have series of their own
        group_samples, query_samples = spark_exposition.split(snapshot.groups)
        out += _group_lag(snapshot, options, group_samples) + spark_exposition.query_lag(snapshot, query_samples, not options.per_group)
    producers = gauge("kafkatxn_active_producer_ids",
                      "Distinct producer ids with state on the partitions each broker leads (producer-state memory).",
                      labels=["broker"])
    for broker_id, count in sorted(snapshot.active_producer_ids.items()) if has(PART_PRODUCERS) else ():
        producers.add_metric([str(broker_id)], count)
    out.append(producers)
    return out


def _per_partition(snapshot: ClusterSnapshot, options: ExportOptions, lags: list[int | None]) -> list[Metric]:
    # 3 series per partition, 90,000 at 30,000 partitions: rows of one label table the three share,
    # made column by column (PartitionSample is a tuple), not a step per partition and column.
    # ``lags``: snapshot.lso_lags of the snapshot's partitions.
    partitions = snapshot.partitions
    if type(partitions) is PartitionColumns:  # (the gather's): its columns as they are, no sample made per partition
        infos = partitions.partitions  # a sample begins as its PartitionInfo does: topic, partition
        topics, numbers = list(map(itemgetter(0), infos)), list(map(itemgetter(1), infos))
        high, stable = partitions.high, partitions.stable  # read, never written
    else:
        topics = list(map(itemgetter(0), partitions))
        numbers = list(map(itemgetter(1), partitions))
        high = list(map(itemgetter(3), partitions))
        stable = list(map(itemgetter(4), partitions))
    # A partition whose offsets did not arrive has no lag series, and an absent series alerts on
    # nothing: name it instead. Only missing partitions get a series, so the cost follows the outage.
    missing = GaugeMetricFamily("kafkatxn_partition_offsets_missing",
                                "1 for a scanned partition whose offsets did not arrive (its lag series is absent).",
                                labels=["topic", "partition"])
    unanswered = None in lags
    for i in itertools.compress(range(len(lags)), [lag is None for lag in lags]) if unanswered else ():
        missing.add_metric([topics[i], str(numbers[i])], 1)
    if unanswered or options.only_lagging:  # else every partition has its series
        keep = [lag is not None and (lag != 0 or not options.only_lagging) for lag in lags]
        if not all(keep):
            topics, numbers, high, stable, lags = (list(itertools.compress(column, keep)) for column in (topics, numbers, high, stable, lags))
    texts = {n: str(n) for n in set(numbers)}  # a partition number's text made once
    rows = LabelRows(["topic", "partition"], [topics, list(map(texts.__getitem__, numbers))])
    hw = TableGauge("kafkatxn_partition_high_watermark", "High watermark (read_uncommitted end offset).", rows)
    lso = TableGauge("kafkatxn_partition_last_stable_offset", "Last stable offset (read_committed end offset).", rows)
    lag = TableGauge("kafkatxn_partition_lso_lag_messages",
                     "High watermark minus last stable offset: records read_committed consumers cannot read yet.", rows)
    hw.values, lso.values, lag.values = high, stable, lags
    return [hw, lso, lag, missing]


def _per_topic(snapshot: ClusterSnapshot, options: ExportOptions) -> list[Metric]:
    lag_sum: dict[str, int] = defaultdict(int)
    lag_max: dict[str, int] = defaultdict(int)
    lagging: dict[str, int] = defaultdict(int)
    unanswered: dict[str, int] = defaultdict(int)
    for p in snapshot.partitions:
        value = p.lso_lag_messages
        if value is None:
            unanswered[p.topic] += 1
            continue
        lag_sum[p.topic] += value
        lag_max[p.topic] = max(lag_max[p.topic], value)
        lagging[p.topic] += 1 if value > 0 else 0
    total = GaugeMetricFamily("kafkatxn_topic_lso_lag_messages", "Sum over the topic's partitions of high watermark minus LSO.",
                              labels=["topic"])
    largest = GaugeMetricFamily("kafkatxn_topic_lso_lag_max_messages", "Largest partition LSO lag in the topic.", labels=["topic"])
    count = GaugeMetricFamily("kafkatxn_topic_lagging_partitions", "Partitions of the topic whose LSO is behind the high watermark.",
                              labels=["topic"])
    for topic in sorted(lag_sum):
        if options.only_lagging and lagging[topic] == 0:
            continue
        total.add_metric([topic], lag_sum[topic])
        largest.add_metric([topic], lag_max[topic])
        count.add_metric([topic], lagging[topic])
    missing = GaugeMetricFamily("kafkatxn_topic_offsets_missing_partitions",
                                "Partitions of the topic whose offsets did not arrive (left out of its sums).", labels=["topic"])
    for topic in sorted(unanswered):
        missing.add_metric([topic], unanswered[topic])
    return [total, largest, count, missing]


GROUP_FIGURES = (
    ("lag_messages", "lag_messages",
     "What a read_committed consumer still has to read: transaction markers and aborted records left out where the gap was probed."),
    ("lag_to_lso_messages", "lag_to_lso_messages", "Last stable offset minus the committed offset (markers included)."),
    ("lag_to_high_watermark_messages", "lag_to_hw_messages",
     "High watermark minus the committed offset: the lag high-watermark tools report (phantom lag included)."),
)


def _group_lag(snapshot: ClusterSnapshot, options: ExportOptions, samples: Sequence[GroupSample]) -> list[Metric]:
    """Transaction-aware consumer-group lag: per group, topic and partition (unless ``per_group``),
    and per-group sums, which stay whatever the cardinality options."""
    # 100,000 samples at 5,000 groups x 20 partitions, as columns (snapshot.GroupSamples, as the group
    # pass makes them): each family's values are a column, and only the few places held (blocked or
    # waiting) are samples, looked at one by one.
    made = GroupSamples.of(samples)
    groups = made.group
    n = len(groups)
    held = made.held
    rows_held = made.held_rows()
    blocked_rows = [i for i in rows_held if held[i].blocked]
    waiting_rows = [i for i in rows_held if held[i].waiting]
    columns = {"lag_messages": made.lag, "lag_to_lso_messages": made.lag_to_lso, "lag_to_hw_messages": made.lag_to_hw}
    stuck_of = {i: snapshot.group_stuck(held[i]) for i in blocked_rows}  # True, False, or None (cannot be known)
    out: list[Metric] = []
    if not options.per_group:
        # A partition number's text made once (a few hundred distinct), not once per sample.
        texts = {p: str(p) for p in set(made.partition)}
        rows = LabelRows(["group", "topic", "partition"], [groups, made.topic, list(map(texts.__getitem__, made.partition))])
        for name, field, doc in GROUP_FIGURES:
            family = TableGauge(f"kafkatxn_group_{name}", doc, rows)
            family.values = columns[field]
            out.append(family)
        blocked = TableGauge("kafkatxn_group_blocked",
                             "1 while the group is held by an open transaction not in flight: at a last stable offset it pins, or "
                             "through the group's __consumer_offsets partition (UNSTABLE_OFFSET_COMMIT).", rows)
        blocked.values = [0] * n
        stuck = TableGauge("kafkatxn_group_stuck", "1 while the group is blocked behind a hanging transaction, one that "
                           "lost its COMMIT marker or one past its own timeout (check --groups' critical, whatever the age "
                           "threshold).", rows)
        stuck.values = [0] * n
        for i, is_stuck in stuck_of.items():
            blocked.values[i] = 1
            stuck.values[i] = None if is_stuck is None else 1 if is_stuck else 0  # unknown: no series, never a reassuring 0
        # Which verdict blocks each blocked place, so an alert names it (few places: only the blocked).
        blocked_by = GaugeMetricFamily(
            "kafkatxn_group_blocked_by",
            "1 per place where the group is blocked, labelled with what blocks it: hanging, lost_commit, overdue "
            "(past its own timeout and its coordinator's abort), past_timeout, untracked (hanging from its deadline "
            "unless it ends), in_flight or undetermined.", labels=["group", "topic", "partition", "verdict"])
        for i in blocked_rows:
            verdict = held[i].txn_verdict
            blocked_by.add_metric([groups[i], held[i].topic, str(held[i].partition),
                                   verdict.value if verdict is not None else "undetermined"], 1)
        out += [blocked, stuck, blocked_by]
    ordered, summed = _per_group_sums(groups, [columns[field] for _name, field, _doc in GROUP_FIGURES],
                                      [blocked_rows, [i for i, is_stuck in stuck_of.items() if is_stuck], waiting_rows])
    blocked_sums, stuck_sums, waiting_sums = summed[len(GROUP_FIGURES):]
    stuck_known = None not in stuck_of.values()
    by_group = LabelRows(["group"], [ordered])
    for (name, _field, doc), values in zip(GROUP_FIGURES, summed):
        family = TableGauge(f"kafkatxn_group_summed_{name}", f"Sum over the group's partitions. {doc}", by_group)
        family.values = values
        out.append(family)
    blocked_partitions = TableGauge("kafkatxn_group_blocked_partitions",
                                    "Partitions where the group is blocked (kafkatxn_group_blocked).", by_group)
    blocked_partitions.values = blocked_sums
    out.append(blocked_partitions)
    # Held by a transaction in flight (tracked by its coordinator, within its timeout): no alarm, a count.
    waiting_partitions = TableGauge("kafkatxn_group_waiting_partitions", "Partitions where the group waits on a "
                                    "transaction in flight (tracked by its coordinator, within its own timeout).", by_group)
    waiting_partitions.values = waiting_sums
    out.append(waiting_partitions)
    out.append(GaugeMetricFamily("kafkatxn_groups_blocked", "Consumer groups blocked on at least one partition.",
                                 value=len(blocked_sums) - blocked_sums.count(0)))
    out.append(GaugeMetricFamily("kafkatxn_groups_waiting", "Consumer groups waiting on a transaction in flight on "
                                 "some partition, and blocked on none.",
                                 value=sum(1 for w, b in zip(waiting_sums, blocked_sums) if w and not b)))
    if stuck_known:
        out.append(GaugeMetricFamily("kafkatxn_groups_stuck", "Consumer groups blocked behind a hanging, lost-commit or overdue "
                                     "transaction on at least one partition.", value=len(stuck_sums) - stuck_sums.count(0)))
    return out


def _per_group_sums(groups: list[str], columns: list[list[int]], flagged: list[list[int]]) -> tuple[list[str], list[list[int]]]:
    """The groups in order, and per group each column's sum over its rows and each ``flagged`` list's
    count of its rows (row numbers, ascending). A group's rows come one after another
    (group_positions' order): each run of them is summed as a slice, in C, not
    100,000 rows one by one; a group met again later adds to its sums all the same."""
    n = len(groups)
    starts = [0, *itertools.compress(range(1, n), map(ne, itertools.islice(groups, 1, None), groups))] if n else []
    runs_of = list(map(slice, starts, starts[1:] + [n])) if n else []
    # Each run's slice summed in C: half the time of running sums taken apart (a few thousand runs of tens of rows).
    sums = [list(map(sum, map(column.__getitem__, runs_of))) for column in columns]
    for rows in flagged:
        counts = [0] * len(starts)
        for i in rows:
            counts[bisect_right(starts, i) - 1] += 1
        sums.append(counts)
    runs = list(map(groups.__getitem__, starts))
    if len(set(runs)) == len(runs):  # each group one run: put in order (usually already)
        if all(map(lt, runs, itertools.islice(runs, 1, None))):
            return runs, sums
        order = sorted(range(len(runs)), key=runs.__getitem__)
        return list(map(runs.__getitem__, order)), [list(map(column.__getitem__, order)) for column in sums]
    merged: dict[str, list[int]] = {}
    for k, group in enumerate(runs):
        acc = merged.get(group)
        if acc is None:
            merged[group] = [column[k] for column in sums]
        else:
            for j, column in enumerate(sums):
                acc[j] += column[k]
    ordered = sorted(merged)
    return ordered, [[merged[group][j] for group in ordered] for j in range(len(sums))]
