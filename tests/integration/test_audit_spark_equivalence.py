"""The Spark job equals the single-process audit on coordinator histories made to cover every rule.

No broker: the histories are the unit tests' (tests/support/coordinator.py), written as a captured
history (Parquet), so the JVM-aggregated path (ids without aborts) and the per-record walk (ids with
aborts or fences) both run, with tombstones, producer-id changes, storms and families.
"""

from __future__ import annotations

import uuid

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from kafkatxn.audit import rules, source  # noqa: E402
from kafkatxn.audit.job import Inputs, audit, build_session  # noqa: E402
from tests.support.coordinator import MIN, S, Coordinator, shared_storm, taking_turns, well_behaved  # noqa: E402

pytestmark = pytest.mark.integration


def _histories() -> list[rules.HistoryRecord]:
    out: list[rules.HistoryRecord] = []
    for tv, broker_tv in [(0, 0), (0, 2), (2, 2)]:
        c = Coordinator(tv, broker_tv=broker_tv)
        v = {(0, 0): "classic", (0, 2): "mixed", (2, 2): "kip"}[(tv, broker_tv)]  # letters: one family each
        shared_storm(c, f"shared-{v}", 0, fences=4)
        taking_turns(c, f"turns-{v}", 10 * MIN, turns=9)
        for i in range(7):  # crash loop, dying mid-transaction
            c.init(f"loop-{v}", 20 * MIN + i * 5 * S)
            c.add(f"loop-{v}", 20 * MIN + i * 5 * S + 100)
        for i in range(6):
            tid = f"batch-{v}-{uuid.UUID(int=i + 1)}"
            c.init(tid, i * MIN)
            c.txn(tid, i * MIN + S)
            if i < 2:
                c.expire(tid, 30 * MIN)  # tombstones
        for p in range(4):
            well_behaved(c, f"good-{v}-{p}", p, runs=3, txns=3, crash_mid_txn=(p == 0))
        c.init(f"aborter-{v}", 0)
        c.add(f"aborter-{v}", S)
        c.abort(f"aborter-{v}", 2 * S)
        c.init(f"timed-{v}", 0)
        c.add(f"timed-{v}", S)
        c.time_out(f"timed-{v}", 3 * MIN)
        c.ids[f"good-{v}-1"]["pid"] += 500  # a new producer id (epoch exhausted)
        c.init(f"good-{v}-1", 40 * MIN)
        # tv offsets the log partitions so the three coordinators' positions do not collide
        out += [r._replace(log_partition=r.log_partition + 3 * (tv + broker_tv)) for r in c.records]
    return out


def _write(records: list[rules.HistoryRecord], directory) -> None:
    import pyarrow.parquet as pq

    rows = [(*r, source.ROW_RECORD, None) for r in records]
    rows = [(*r[:4], list(r[4]), *r[5:]) for r in rows]
    directory.mkdir()
    half = len(rows) // 2
    for i, chunk in enumerate((rows[:half], rows[half:])):
        import pyarrow as pa

        pq.write_table(pa.Table.from_batches([source.rows_to_batch(chunk, source.arrow_schema())]), directory / f"p{i}.parquet")


def test_spark_equals_the_single_process_audit(tmp_path):
    records = _histories()
    reference = rules.audit_local(records)
    assert reference.shared_ids and reference.init_storms and reference.unstable_ids  # the rules all fire
    _write(records, tmp_path / "history")
    spark, created = build_session("local[2]", conf={"spark.sql.shuffle.partitions": "3"})
    try:
        once = audit(spark, Inputs(history=[str(tmp_path / "history")]))
        twice = audit(spark, Inputs(history=[str(tmp_path / "history")] * 2))  # overlapping histories: counted once
    finally:
        if created:
            spark.stop()
    assert once.comparable() == reference.comparable()
    assert twice.comparable() == reference.comparable()
