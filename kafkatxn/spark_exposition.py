"""The exporter's series of the Spark queries among the readers (``--spark-checkpoint``).

A query's places are decided by the group pass (``snapshot.group_samples`` over
``group_positions.group_positions``), the one definition a group's are decided by; here they are published as
series of their own, labelled with the query (name, id, checkpoint) where a group's carry ``group``:
per partition unless ``--per-group``, and the per-query sums always.
"""

from __future__ import annotations

from operator import itemgetter
from typing import TYPE_CHECKING, Sequence

from prometheus_client.core import GaugeMetricFamily, Metric

from kafkatxn.model import QueryReader

if TYPE_CHECKING:
    from kafkatxn.snapshot import ClusterSnapshot, GroupSample

QUERY_LABELS = ["query", "query_id", "checkpoint"]
_GROUP = itemgetter(0)  # GroupSample.group
FIGURES = (
    ("lag_messages", "lag_messages", "What the query's read_committed Kafka source still has to read (markers and aborted "
     "records left out where the gap was probed)."),
    ("lag_to_lso_messages", "lag_to_lso_messages", "Last stable offset minus the query's position (its last committed batch's end)."),
    ("lag_to_high_watermark_messages", "lag_to_hw_messages", "High watermark minus the query's position."),
)


def split(samples: Sequence[GroupSample]) -> tuple[Sequence[GroupSample], list[GroupSample]]:
    """The groups' samples and the queries'."""
    groups = getattr(samples, "group", None)  # snapshot.GroupSamples' column, or each sample's
    if QueryReader not in set(map(type, groups if groups is not None else map(_GROUP, samples))):  # usually none: 400,000 looked at in C
        return samples, []
    queries = [s for s in samples if type(s.group) is QueryReader]
    return [s for s in samples if type(s.group) is not QueryReader], queries


def _labels(reader: QueryReader) -> list[str]:
    return [reader.query_name or reader.query_id or "", reader.query_id or "", reader.checkpoint]


def query_lag(snapshot: ClusterSnapshot, samples: Sequence[GroupSample], per_partition: bool = True) -> list[Metric]:
    """``kafkatxn_spark_query_*``: per query, topic and partition (``per_partition``), per query summed,
    and its checkpoint's and its writer's batches."""
    out: list[Metric] = batches(snapshot)
    if not samples:
        return out
    stuck_of = [snapshot.group_stuck(s) if s.blocked else False for s in samples]
    if per_partition:
        place = [*QUERY_LABELS, "topic", "partition"]
        families = [GaugeMetricFamily(f"kafkatxn_spark_query_{name}", doc, labels=place) for name, _f, doc in FIGURES]
        blocked = GaugeMetricFamily("kafkatxn_spark_query_blocked", "1 while the query is held by an open transaction not in "
                                    "flight at a last stable offset it pins.", labels=place)
        stuck = GaugeMetricFamily("kafkatxn_spark_query_stuck", "1 while the query is blocked behind a hanging transaction, "
                                  "one that lost its COMMIT marker or one past its own timeout (no series when unknown).", labels=place)
        blocked_by = GaugeMetricFamily("kafkatxn_spark_query_blocked_by", "1 per place where the query is blocked, labelled "
                                       "with what blocks it (as kafkatxn_group_blocked_by).", labels=[*place, "verdict"])
        for s, is_stuck in zip(samples, stuck_of):
            labels = [*_labels(s.group), s.topic, str(s.partition)]
            for family, (_name, field, _doc) in zip(families, FIGURES):
                family.add_metric(labels, getattr(s, field))
            blocked.add_metric(labels, 1 if s.blocked else 0)
            if is_stuck is not None:
                stuck.add_metric(labels, 1 if is_stuck else 0)
            if s.blocked:
                blocked_by.add_metric([*labels, s.txn_verdict.value if s.txn_verdict is not None else "undetermined"], 1)
        out += [*families, blocked, stuck, blocked_by]
    sums: dict[QueryReader, list[int]] = {}
    unknown: set[QueryReader] = set()
    for s, is_stuck in zip(samples, stuck_of):
        acc = sums.setdefault(s.group, [0] * (len(FIGURES) + 3))
        for j, (_name, field, _doc) in enumerate(FIGURES):
            acc[j] += getattr(s, field)
        acc[-3] += 1 if s.blocked else 0
        acc[-2] += 1 if is_stuck else 0
        acc[-1] += 1 if s.waiting else 0
        if is_stuck is None:
            unknown.add(s.group)
    summed = [GaugeMetricFamily(f"kafkatxn_spark_query_summed_{name}", f"Sum over the query's partitions. {doc}",
                                labels=QUERY_LABELS) for name, _f, doc in FIGURES]
    blocked_parts = GaugeMetricFamily("kafkatxn_spark_query_blocked_partitions", "Partitions where the query is blocked.",
                                      labels=QUERY_LABELS)
    stuck_parts = GaugeMetricFamily("kafkatxn_spark_query_stuck_partitions", "Partitions where the query is stuck (blocked "
                                    "behind a hanging, lost-commit or overdue transaction); no series when unknown.", labels=QUERY_LABELS)
    waiting_parts = GaugeMetricFamily("kafkatxn_spark_query_waiting_partitions", "Partitions where the query waits on a "
                                      "transaction in flight.", labels=QUERY_LABELS)
    for reader in sorted(sums):
        acc, labels = sums[reader], _labels(reader)
        for j, family in enumerate(summed):
            family.add_metric(labels, acc[j])
        blocked_parts.add_metric(labels, acc[-3])
        if reader not in unknown or acc[-2]:
            stuck_parts.add_metric(labels, acc[-2])
        waiting_parts.add_metric(labels, acc[-1])
    out += [*summed, blocked_parts, stuck_parts, waiting_parts]
    out.append(GaugeMetricFamily("kafkatxn_spark_queries_blocked", "Spark queries blocked on at least one partition.",
                                 value=sum(1 for v in sums.values() if v[-3])))
    return out


def batches(snapshot: ClusterSnapshot) -> list[Metric]:
    """Per query: its checkpoint's last committed batch and the one in flight, and where it writes through
    kafkatxn's exactly-once writer, the last batch the writer's ledger says was committed."""
    rows = snapshot.spark_queries
    if not rows:
        return []
    committed = GaugeMetricFamily("kafkatxn_spark_query_committed_batch_id", "The last batch the query's checkpoint "
                                  "committed (commits/N); no series before its first.", labels=QUERY_LABELS)
    in_flight = GaugeMetricFamily("kafkatxn_spark_query_in_flight_batch_id", "A batch the query planned (offsets/N) "
                                  "and has not committed; no series when none is.", labels=QUERY_LABELS)
    writer = GaugeMetricFamily("kafkatxn_spark_query_writer_batch_id", "The last batch the query's exactly-once writer's "
                               "ledger says was committed (--spark-writer): ahead of the checkpoint is a replay about to be "
                               "skipped, behind it is lost output.", labels=[*QUERY_LABELS, "writer"])
    behind = GaugeMetricFamily("kafkatxn_spark_query_writer_behind", "1 while the writer's ledger is behind the "
                               "checkpoint's last committed batch (their output is missing).", labels=[*QUERY_LABELS, "writer"])
    for r in rows:
        labels = [r.query_name or r.query_id or "", r.query_id or "", r.checkpoint]
        if r.committed_batch_id is not None:
            committed.add_metric(labels, r.committed_batch_id)
        if r.in_flight_batch_id is not None:
            in_flight.add_metric(labels, r.in_flight_batch_id)
        if r.writer is not None and r.writer_state is not None:
            if r.writer_batch_id is not None:
                writer.add_metric([*labels, r.writer], r.writer_batch_id)
            behind.add_metric([*labels, r.writer], 1 if r.writer_state == "behind" else 0)
    return [committed, in_flight, writer, behind]
