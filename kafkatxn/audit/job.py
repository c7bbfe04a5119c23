"""The Spark audit job: transaction-log records in, findings out.

Runs wherever a SparkSession comes from: ``local[*]`` by default, a given ``--master``, or the
session ``spark-submit`` sets up. Unchanged under spark-submit, with the options of ``kafkatxn audit``::

    spark-submit --master spark://host:7077 kafkatxn/cli/spark_submit.py --bootstrap-server b:9092 -o json

Stages, each a plain Spark transformation around a pure function of :mod:`kafkatxn.audit.rules`:

1. records (live log and/or captured history) -> ``repartition(transactional_id)``, sorted by log
   position -> ``mapInArrow`` walking each id's history with ``summarize_id`` -> one row per id
   (duplicate log positions, from a history overlapping the live log, are dropped on the way);
2. shared ids: ids whose fence count reaches the threshold -> ``shared_id_finding`` on the driver;
   re-initialisation storms: ids whose inits reach the threshold, with their families' init counts
   (a ``groupBy``) -> ``init_storm_finding`` on the driver;
3. unstable ids and family summaries: id rows ``repartition(family)`` -> ``mapInArrow`` with
   ``unstable_family_finding`` and ``family_summary``;
4. inventory: the declarations travel with stage 1 (each id row says which declarations cover it);
   seen-but-undeclared ids are grouped by family with a ``groupBy``.

:func:`kafkatxn.audit.rules.audit_local` does the same in one process; tests hold the two equal.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from kafkatxn.audit import rules, source
from kafkatxn.audit.rules import AuditParams, AuditResult, Declaration, IdStats
from kafkatxn.errors import ClusterError, NotFoundError, UsageError
# The session and Spark's errors: kept importable from here, where the CLI and tests look for them.
from kafkatxn.audit.spark_session import (  # noqa: F401
    REDACTION_REGEX, SPARK_HINT, SparkMissing, is_kafkatxn_error, build_session, check_python, package_zip, require_pyspark,
    spark_error_line, under_spark_submit,
)

# --------------------------------------------------------------------------------------------
# Schemas from the row dataclasses
# --------------------------------------------------------------------------------------------


def _spark_type(annotation: str) -> Any:
    from pyspark.sql import types as T

    a = annotation.replace(" ", "").replace("|None", "")
    simple = {"int": T.LongType(), "str": T.StringType(), "bool": T.BooleanType(), "float": T.DoubleType()}
    if a in simple:
        return simple[a]
    m = re.fullmatch(r"list\[(\w+)\]", a)
    if m:
        return T.ArrayType(simple[m.group(1)])
    raise TypeError(f"no Spark type for {annotation}")


def spark_schema_of(cls: type) -> Any:
    from pyspark.sql import types as T

    return T.StructType([T.StructField(f.name, _spark_type(str(f.type)), True) for f in dataclasses.fields(cls)])


def _arrow_schema_of(cls: type) -> Any:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(spark_schema_of(cls))


def _to_batch(objs: Sequence[Any], cls: type, schema: Any) -> Any:
    import pyarrow as pa

    names = [f.name for f in dataclasses.fields(cls)]
    arrays = [pa.array([getattr(o, n) for o in objs], type=schema.field(n).type) for n in names]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _from_row(cls: type, row: dict) -> Any:
    return cls(**{f.name: row[f.name] for f in dataclasses.fields(cls)})


# --------------------------------------------------------------------------------------------
# Stages (module-level, so Spark pickles them by reference)
# --------------------------------------------------------------------------------------------

_OUT_BATCH = 4096


def summarize_batches(
    batches: Iterator[Any], params: AuditParams, declarations: list[Declaration] | None
) -> Iterator[Any]:
    """Stage 1: rows sorted by (transactional_id, log position) -> one IdStats row per id."""
    index = rules.InventoryIndex(declarations) if declarations is not None else None
    schema = _arrow_schema_of(IdStats)
    record = rules.HistoryRecord
    summarize = rules.summarize_id
    out: list[IdStats] = []
    current: str | None = None
    group: list[Any] = []
    last_pos: tuple[int, int] | None = None
    # Arrow columns to Python lists one column at a time (C loops), the pruned ones as constants.
    pruned = {"previous_producer_id": -1, "next_producer_id": -1, "next_producer_epoch": -1, "value_version": -1}
    for batch in batches:
        names = batch.schema.names
        n = batch.num_rows
        cols = [batch.column(names.index(c)).to_pylist() if c in names else [pruned[c]] * n for c in source.RECORD_COLUMNS]
        for row in zip(*cols):
            if row[0] != current:
                if group:
                    out.append(summarize(group, params, index))
                    if len(out) >= _OUT_BATCH:
                        yield _to_batch(out, IdStats, schema)
                        out = []
                current, group, last_pos = row[0], [], None
            pos = (row[14], row[15])
            if pos == last_pos:  # the same log position from the history and the live log
                continue
            last_pos = pos
            group.append(record(*row))
    if group:
        out.append(summarize(group, params, index))
    if out:
        yield _to_batch(out, IdStats, schema)


# What the per-id walk reads: the record columns but the four it never looks at (previous and next
# producer id, next epoch, value version), which then cross the shuffle and the Arrow boundary for nothing.
WALK_COLUMNS = [c for c in source.RECORD_COLUMNS
                if c not in ("previous_producer_id", "next_producer_id", "next_producer_epoch", "value_version")]


def id_stats_frame(records: Any, params: AuditParams, declarations: list[Declaration] | None, n: int) -> Any:
    """Stage 1: record rows -> ``repartition(transactional_id)``, sorted by log position -> one IdStats row per id."""
    from pyspark.sql import functions as F

    # Only an Ongoing record's partitions count (the partitions an id wrote to): the rest need not travel.
    ongoing_only = F.when(F.col("state") == "Ongoing", F.col("partitions")).alias("partitions")
    return (
        records.select(*(ongoing_only if c == "partitions" else c for c in WALK_COLUMNS))
        .repartition(n, "transactional_id")
        .sortWithinPartitions("transactional_id", "log_partition", "log_offset")
        .mapInArrow(functools.partial(summarize_batches, params=params, declarations=declarations), spark_schema_of(IdStats))
    )


FAMILY_OUT_DDL = "family string, unstable string, summary string"  # the two as JSON (or null): one pass for both


def family_batches(batches: Iterator[Any], params: AuditParams) -> Iterator[Any]:
    """Stage 3: (family, FamilyMember fields) rows sorted by family -> unstable-family findings and family summaries.

    A family can hold most ids (one UUID per batch: 700k ids in 10M records), and all of it lands in one
    task; so only the fields the family rules read travel, and members are plain tuples.
    """
    import pyarrow as pa

    from kafkatxn.plain import to_plain

    out: list[tuple[str, str | None, str | None]] = []
    current: str | None = None
    members: list[Any] = []

    def decide() -> None:
        if members:
            family = current or ""
            finding = rules.unstable_family_finding(family, members, params)
            summary = rules.family_summary(family, members, params, finding is not None)
            if finding is not None or summary is not None:
                out.append((family, json.dumps(to_plain(finding)) if finding else None, json.dumps(to_plain(summary)) if summary else None))

    member = rules.FamilyMember
    for batch in batches:
        families = batch.column(0).to_pylist()
        fields = [batch.column(i).to_pylist() for i in range(1, batch.num_columns)]
        for family, row in zip(families, zip(*fields)):
            if family != current:
                decide()
                current, members = family, []
            members.append(member(*row))
    decide()
    if out:
        cols = list(zip(*out))
        yield pa.RecordBatch.from_arrays([pa.array(c, type=pa.string()) for c in cols], names=["family", "unstable", "summary"])


# --------------------------------------------------------------------------------------------
# Session and inputs
# --------------------------------------------------------------------------------------------


@dataclass
class Inputs:
    config: Any | None = None  # ConnectionConfig for the live log, None for none
    history: list[str] = field(default_factory=list)

    def describe(self) -> list[str]:
        out = [f"live:{self.config.bootstrap_servers}"] if self.config is not None else []
        return out + [f"history:{h}" for h in self.history]


def live_topic_exists(config: Any) -> bool:
    """False when the cluster has no ``__transaction_state`` yet (no transactional producer ever ran)."""
    from kafkatxn.kafka import Cluster

    with Cluster(config) as cluster:
        try:
            cluster.select_partitions(topics=[source.TOPIC], include_internal=True)
        except NotFoundError:
            return False
    return True


def load_records(spark: Any, inputs: Inputs) -> Any:
    """All rows (every row_kind) of the live log and the histories, as one DataFrame."""
    frames = []
    if inputs.config is not None and live_topic_exists(inputs.config):
        frames.append(spark.read.format(source.FORMAT).options(**source.reader_options(inputs.config)).load())
    for h in inputs.history:
        path = Path(h)
        if not path.is_dir():
            raise UsageError(f"history directory {h} does not exist")
        if not any(p.suffix == ".parquet" for p in path.rglob("*.parquet")):
            continue  # an empty capture: nothing recorded yet
        frames.append(spark.read.schema(source.spark_schema()).parquet(str(path)))
    if not frames:
        return spark.createDataFrame([], source.spark_schema())
    df = frames[0]
    for other in frames[1:]:
        df = df.unionByName(other)
    return df


# --------------------------------------------------------------------------------------------
# The audit
# --------------------------------------------------------------------------------------------


@dataclass
class SparkAudit:
    result: AuditResult
    ids: Any  # DataFrame of IdStats, persisted


def run_audit(spark: Any, records: Any, params: AuditParams = AuditParams(),
              declarations: Sequence[Declaration] | None = None, partitions: int | None = None,
              cache: bool = True) -> SparkAudit:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    decls = list(declarations) if declarations is not None else None
    n = partitions or int(spark.conf.get("spark.sql.shuffle.partitions"))
    if cache:  # read the source (the live log) once for both passes below; Parquet is cheaper to read again
        records = records.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        odd = (
            records.filter(F.col("row_kind") != source.ROW_RECORD)
            .select("row_kind", "log_partition", "log_offset").distinct()
            .groupBy("row_kind").count().collect()
        )
        counts = {r["row_kind"]: r["count"] for r in odd}
        # Duplicate log positions (a history overlapping the live log) are dropped by the walk: it sees
        # each id's records sorted by position, so copies of one record are neighbours.
        rows = records.filter(F.col("row_kind") == source.ROW_RECORD)
        ids = id_stats_frame(rows, params, decls, n).persist(StorageLevel.MEMORY_AND_DISK)
        totals = ids.agg(
            F.count(F.lit(1)).alias("ids"),
            F.sum("records").alias("records"),
            F.min(F.when(F.col("first_seen_ms") >= 0, F.col("first_seen_ms"))).alias("a"),
            F.min(F.when(F.col("last_seen_ms") >= 0, F.col("last_seen_ms"))).alias("b"),
            F.max("first_seen_ms").alias("c"),
            F.max("last_seen_ms").alias("d"),
        ).collect()[0]
    finally:
        records.unpersist()
    shared_rows = ids.filter(F.col("max_fences_in_window") >= params.min_fences).collect()
    shared = sorted(
        (f for f in (rules.shared_id_finding(_from_row(IdStats, r.asDict()), params) for r in shared_rows) if f),
        key=lambda f: f.transactional_id,
    )
    family_rows = (
        ids.select("family", *rules.FamilyMember._fields)
        .repartition(n, "family").sortWithinPartitions("family", "transactional_id")
        .mapInArrow(functools.partial(family_batches, params=params), FAMILY_OUT_DDL)
        .collect()
    )
    unstable = sorted(
        (rules.UnstableFamilyFinding(**json.loads(r["unstable"])) for r in family_rows if r["unstable"]), key=lambda f: f.family
    )
    families = rules.sort_families(rules.FamilySummary(**json.loads(r["summary"])) for r in family_rows if r["summary"])
    storm_rows = [_from_row(IdStats, r.asDict()) for r in ids.filter(F.col("max_inits_in_window") >= params.storm_min_inits).collect()]
    siblings: dict[str, list[int]] = {}
    if storm_rows:
        wanted = sorted({s.family for s in storm_rows})
        siblings = {
            r["family"]: list(r["inits"])
            for r in ids.filter(F.col("family").isin(wanted)).groupBy("family")
            .agg(F.collect_list("max_inits_in_window").alias("inits")).collect()
        }
    storms = sorted(
        (f for f in (rules.init_storm_finding(s, params, siblings.get(s.family)) for s in storm_rows) if f is not None),
        key=lambda f: f.transactional_id,
    )
    inventory: list[rules.InventoryFinding] = []
    if decls is not None:
        matched = {r[0] for r in ids.select(F.explode("declared_by")).distinct().collect()}
        groups = (
            ids.filter(F.size("declared_by") == 0)
            .groupBy("family")
            .agg(
                F.count(F.lit(1)).alias("ids_seen"),
                F.min("first_seen_ms").alias("first_seen_ms"),
                F.max("last_seen_ms").alias("last_seen_ms"),
                F.slice(F.array_sort(F.collect_list("transactional_id")), 1, 3).alias("examples"),
            )
            .collect()
        )
        undeclared = [rules.UndeclaredGroup(g["family"], g["ids_seen"], g["first_seen_ms"], g["last_seen_ms"], list(g["examples"])) for g in groups]
        inventory = rules.inventory_findings(decls, matched, undeclared)
    firsts = [t for t in (totals["a"], totals["b"]) if t is not None]
    result = AuditResult(
        records=int(totals["records"] or 0),
        transactional_ids=int(totals["ids"]),
        unknown_records=int(counts.get(source.ROW_UNKNOWN, 0)),
        corrupt_records=int(counts.get(source.ROW_CORRUPT, 0)),
        first_record_ms=min(firsts) if firsts else -1,
        last_record_ms=max(totals["c"] if totals["c"] is not None else -1, totals["d"] if totals["d"] is not None else -1),
        shared_ids=shared,
        unstable_ids=unstable,
        inventory=inventory,
        init_storms=storms,
        families=families,
    )
    return SparkAudit(result, ids)


def audit(spark: Any, inputs: Inputs, params: AuditParams = AuditParams(),
          declarations: Sequence[Declaration] | None = None, report_dir: str | None = None) -> AuditResult:
    """Load the inputs, run the audit, write the report directory if asked; Spark errors become one line."""
    try:
        records = load_records(spark, inputs)
        done = run_audit(spark, records, params, declarations, cache=inputs.config is not None)
        done.result.sources = inputs.describe()
        if report_dir:
            write_report(spark, done, report_dir)
        done.ids.unpersist()
        return done.result
    except Exception as exc:  # noqa: BLE001 - Spark wraps worker errors in long Java/Python traces
        if is_kafkatxn_error(exc):
            raise
        raise ClusterError(spark_error_line(exc, spark.sparkContext.pythonExec)) from exc


def write_report(spark: Any, done: SparkAudit, report_dir: str) -> None:
    """``report.json`` (the whole result), ``ids/`` (one row per id) and one Parquet directory per finding kind."""
    from kafkatxn.plain import to_plain

    out = Path(report_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(to_plain(done.result), indent=2) + "\n", encoding="utf-8")
    done.ids.write.mode("overwrite").parquet(str(out / "ids"))
    for name, cls, rows in (
        ("shared_ids", rules.SharedIdFinding, done.result.shared_ids),
        ("unstable_ids", rules.UnstableFamilyFinding, done.result.unstable_ids),
        ("inventory", rules.InventoryFinding, done.result.inventory),
        ("init_storms", rules.InitStormFinding, done.result.init_storms),
        ("families", rules.FamilySummary, done.result.families),
    ):
        data = [tuple(getattr(r, f.name) for f in dataclasses.fields(cls)) for r in rows]
        spark.createDataFrame(data, spark_schema_of(cls)).coalesce(1).write.mode("overwrite").parquet(str(out / name))


if __name__ == "__main__":
    # The spark-submit entry moved beside the CLI it runs; say where rather than fail obscurely.
    sys.exit("kafkatxn: error: the spark-submit entry is kafkatxn/cli/spark_submit.py (same options)")
