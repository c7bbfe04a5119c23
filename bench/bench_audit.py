"""Audit throughput: Spark local[2] and a standalone cluster against the single-process scan.

    python bench/bench_audit.py [--records 1000000] [--no-standalone]

Synthesises a captured history (Parquet, the capture's schema) of ``--records`` transaction-log
records: stable per-partition ids with restarts, ids shared by two instances, and a UUID-per-batch
family. The records are encoded with the txnlog encoders and decoded again, as the data source does.
Then it times, on the same data and checking that all give the same result:

* the single-process scan: read the Parquet with pyarrow, ``rules.audit_local`` (the reference);
* ``job.audit`` on ``local[2]`` (session start excluded, reported apart);
* ``spark-submit spark_submit.py --no-live --history DIR`` on a standalone cluster with 1 and with 2 workers
  (1 core each; wall time, driver and executor start included).
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kafkatxn.audit import rules, source  # noqa: E402
from bench import spark_metrics  # noqa: E402
from kafkatxn.kafka.txnlog import decode_record  # noqa: E402
from kafkatxn.kafka.txnlog_encode import encode_key, encode_value_v0, encode_value_v1  # noqa: E402

LOG_PARTITIONS = 50


class Log:
    """Coordinator-shaped records for many ids, encoded and decoded again."""

    def __init__(self, seed: int = 7):
        self.rng = random.Random(seed)
        self.offsets = [0] * LOG_PARTITIONS
        self.rows: list[tuple] = []
        self.pid = 1
        self.t = 1_700_000_000_000

    def write(self, tid: str, pid: int, epoch: int, state: str, parts, start: int, tv: int = 0) -> None:
        p = hash(tid) % LOG_PARTITIONS
        off = self.offsets[p]
        self.offsets[p] += 1
        self.t += 7
        enc = encode_value_v1 if off % 2 else encode_value_v0
        kw = {"client_transaction_version": tv} if enc is encode_value_v1 and tv else {}
        value = enc(producer_id=pid, producer_epoch=epoch, timeout_ms=60_000, state=state, partitions=parts,
                    last_update_timestamp_ms=self.t, start_timestamp_ms=start, **kw)
        r = decode_record(encode_key(tid), value, p, off)
        self.rows.append((r.transactional_id, r.producer_id, r.producer_epoch, r.state, list(r.partitions), r.timeout_ms,
                          r.start_timestamp_ms, r.last_update_timestamp_ms, r.client_transaction_version,
                          r.previous_producer_id, r.next_producer_id, r.next_producer_epoch, r.value_version, r.tombstone,
                          p, off, self.t, source.ROW_RECORD, None))

    def session(self, tid: str, pid: int, epoch: int, txns: int, tv: int = 0) -> int:
        self.write(tid, pid, epoch, "Empty", None, -1)
        for _ in range(txns):
            start = self.t
            parts = [f"out-{self.rng.randrange(12)}"]
            self.write(tid, pid, epoch, "Ongoing", parts, start, tv)
            self.write(tid, pid, epoch, "PrepareCommit", parts, start, tv)
            self.write(tid, pid, epoch, "CompleteCommit", None, start, tv)
        return epoch + 1

    def fence(self, tid: str, pid: int, epoch: int) -> int:
        start = self.t
        self.write(tid, pid, epoch, "Ongoing", ["out-0"], start)
        self.write(tid, pid, epoch + 1, "PrepareAbort", ["out-0"], start, 2)  # what a 4.x broker writes
        self.write(tid, pid, epoch + 1, "CompleteAbort", None, start, 2)
        return epoch + 2


def synthesise(n: int, directory: Path, chunk: int = 1_000_000) -> int:
    """Write ``n`` records as Parquet files of at most ``chunk`` rows (memory stays bounded at 10M records)."""
    log = Log()
    directory.mkdir(parents=True)
    written = files = 0
    while written < n:
        for p in range(64):  # stable ids, restarted now and then
            tid = f"etl-orders-{p}"
            log.session(tid, 10_000 + p, log.rng.randrange(100), txns=20)
        for i in range(4):  # shared ids storming
            tid = f"shared-writer-{i}"
            epoch = 0
            for _ in range(5):
                epoch = log.fence(tid, 20_000 + i, epoch)
                epoch = log.session(tid, 20_000 + i, epoch, txns=1)
        for _ in range(400):  # a new UUID per batch
            log.pid += 1
            log.session(f"ingest-{uuid.UUID(int=log.rng.getrandbits(128))}", 100_000 + log.pid, 0, txns=1)
        if len(log.rows) >= chunk or written + len(log.rows) >= n:
            rows = log.rows[: n - written]
            write_file(rows, directory / f"part-{files:05d}.parquet")
            written += len(rows)
            files += 1
            log.rows = []
    return written


def write_file(rows: list[tuple], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_batches([source.rows_to_batch(rows, source.arrow_schema())])
    pq.write_table(table, path, row_group_size=256 * 1024)


def single_process(directory: Path) -> tuple[float, rules.AuditResult]:
    import pyarrow.parquet as pq

    gc.collect()
    start = time.perf_counter()
    table = pq.read_table(directory, columns=source.RECORD_COLUMNS)
    cols = [table.column(c).to_pylist() for c in source.RECORD_COLUMNS]
    result = rules.audit_local(rules.HistoryRecord(*row) for row in zip(*cols))
    return time.perf_counter() - start, result


def _event_log_conf(directory: Path) -> dict[str, str]:
    directory.mkdir(parents=True, exist_ok=True)
    return {"spark.eventLog.enabled": "true", "spark.eventLog.dir": f"file://{directory}", "spark.eventLog.compress": "false"}


def spark_local(directory: Path, work: Path, partitions: int) -> tuple[float, float, rules.AuditResult, Path]:
    from kafkatxn.audit.job import Inputs, audit, build_session

    events = work / "events-local"
    start = time.perf_counter()
    spark, _ = build_session("local[2]", conf={"spark.sql.shuffle.partitions": str(partitions), **_event_log_conf(events)})
    session_s = time.perf_counter() - start
    audit(spark, Inputs(history=[str(directory)]))  # warm-up: Python workers, JIT
    start = time.perf_counter()
    result = audit(spark, Inputs(history=[str(directory)]))
    elapsed = time.perf_counter() - start
    spark.stop()
    return session_s, elapsed, result, events


def standalone(directory: Path, workers: int, work: Path, partitions: int) -> tuple[float, float, dict, Path]:
    """(spark-submit wall, audit jobs wall from the event log, report, event log directory)."""
    from tests.support.spark_audit import StandaloneCluster

    events = work / f"events-standalone{workers}"
    cluster = StandaloneCluster(work / f"spark{workers}", workers=workers).start()
    try:
        time.sleep(3)  # let the workers register, so the job gets them all
        start = time.perf_counter()
        report = work / f"report{workers}"
        done = cluster.submit("--no-live", "--history", str(directory), "--report", str(report), "-o", "json", timeout=3600,
                              conf={"spark.sql.shuffle.partitions": str(partitions), **_event_log_conf(events)})
        elapsed = time.perf_counter() - start
    finally:
        cluster.stop()
    if done.returncode not in (0, 1, 2):
        raise SystemExit(f"spark-submit failed ({done.returncode}): {done.stdout[-2000:]}{done.stderr[-3000:]}")
    doc = json.loads((report / "report.json").read_text())
    doc.pop("sources")
    _, app = spark_metrics.summarise(events)
    return elapsed, app["all_jobs_ms"] / 1000, doc, events


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--no-standalone", action="store_true")
    ap.add_argument("--partitions", type=int, default=8, help="spark.sql.shuffle.partitions for the Spark runs")
    ap.add_argument("--target", type=float, default=1.5, help="speed-up required of local[2] (at 10M records and more) "
                    "and of 2 standalone workers over 1")
    ap.add_argument("--stages", action="store_true", help="print each run's stage and task metrics")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kafkatxn-bench-audit-"))
    failures: list[str] = []
    try:
        t = time.perf_counter()
        history = work / "history"
        n = synthesise(args.records, history)
        print(f"synthesised and decoded {n:,} records in {time.perf_counter() - t:.1f}s")
        ref_s, ref = single_process(history)
        print(f"single-process scan:  {ref_s:7.2f}s  {n / ref_s:>10,.0f} records/s  (reference)  "
              f"shared={len(ref.shared_ids)} storms={len(ref.init_storms)} unstable={len(ref.unstable_ids)} ids={ref.transactional_ids}")
        session_s, local_s, local, events = spark_local(history, work, args.partitions)
        if local.comparable() != ref.comparable():
            failures.append("Spark local[2] and the single-process scan disagree")
        ratio = ref_s / local_s
        print(f"spark local[2]:       {local_s:7.2f}s  {n / local_s:>10,.0f} records/s  x{ratio:.2f} vs reference "
              f"(session start {session_s:.1f}s not included)")
        if args.stages:
            print(spark_metrics.format_table(*spark_metrics.summarise(events)))
        if n >= 10_000_000 and ratio < args.target:
            failures.append(f"local[2] is x{ratio:.2f} the reference, target x{args.target}")
        if not args.no_standalone:
            jobs_s = {}
            for workers in (1, 2):
                wall, jobs, doc, events = standalone(history, workers, work, args.partitions)
                jobs_s[workers] = jobs
                if doc != ref.comparable():
                    failures.append(f"standalone with {workers} worker(s) disagrees with the reference")
                print(f"standalone {workers} worker(s): {jobs:7.2f}s jobs ({n / jobs:>10,.0f} records/s, x{ref_s / jobs:.2f} vs reference); "
                      f"{wall:.2f}s spark-submit wall with driver and executor start")
                if args.stages:
                    print(spark_metrics.format_table(*spark_metrics.summarise(events)))
            scale = jobs_s[1] / jobs_s[2]
            print(f"2 workers vs 1: x{scale:.2f}")
            if scale < args.target:
                failures.append(f"2 standalone workers are x{scale:.2f} one worker, target x{args.target}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for f in failures:
        print(f"FAILED: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
