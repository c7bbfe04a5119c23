"""Exactly-once from PySpark to Kafka, proven by killing the job (issue 26).

A real Structured Streaming query (local[2], Kafka topic in, Kafka topic out, a checkpoint) runs in a
process of its own (tests/support/spark_eos_job.py) and crashes once at each point that matters, one
point per micro-batch: a Python worker killed mid-task, a task failing after its output was committed,
the driver killed mid-batch (after one task committed), the driver killed after the batch's writes
but before Spark's commit entry. Each run is restarted from the checkpoint until the input is
consumed; a read_committed consumer then counts the output. kafkatxn's writer must give every input
record exactly once; Spark's built-in Kafka sink, crashed the same way, shows its duplicates (the
figures). Then `kafkatxn audit` finds the writer's ids clean, `kafkatxn hanging` finds nothing and
no transaction is left open.

The writer's query runs on for more batches (WRITER_BATCHES) and its driver is also killed at seeded
random moments of them: a seeded batch, and a seeded time into it (a task producing or committing,
Spark's commit entry, the next batch's planning). Every run of the writer's query ends killed or
done: a query that fails on its own (a task failing after a replay) fails the test.

CI runs the reduced form (300 records a batch, RANDOM_KILLS_CI random kills); SPARK_EOS_FULL=1 runs the
full form, 20,000 records a batch (the crash points fall mid-stream in much larger tasks).
SPARK_EOS_RANDOM_KILLS=n sets the random kills (a soak), SPARK_EOS_BATCHES the writer's batches,
SPARK_EOS_SEED the seed (printed by every run, so a failing schedule can be run again).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from confluent_kafka import Consumer, KafkaError, Producer  # noqa: E402

from harness.spark_jars import ensure_spark_kafka_jars  # noqa: E402
from kafkatxn.model import OPEN_TRANSACTION_STATES  # noqa: E402
from tests.support.cli_helpers import run_cli, run_cli_subprocess  # noqa: E402
from tests.support.spark_audit import dedicated_broker  # noqa: E402

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
POINTS = ("worker_mid_task", "task_after_commit", "driver_mid_batch", "driver_after_commit")
FIRST_CRASH_BATCH = 0  # one crash point per batch, from the first
BATCHES = FIRST_CRASH_BATCH + len(POINTS)  # the last crash (the driver, before the commit entry) is replayed by the last run
DRIVER_KILLS = 2  # of the points, those that kill the driver (the others fail a task, which Spark retries)
RANDOM_KILLS_CI = 2
RANDOM_KILLS = int(os.environ.get("SPARK_EOS_RANDOM_KILLS", RANDOM_KILLS_CI))
WRITER_BATCHES = int(os.environ.get("SPARK_EOS_BATCHES", 20))
# A random kill falls up to this long into its batch (past a run's first, a batch here takes 0.5-2 s;
# a kill not yet due when the next batch begins fires then: after the commit entry, before the next plan).
KILL_WINDOW_MS = 2000
RUN_TIMEOUT_S = 240


@pytest.fixture(scope="module")
def broker(kafka_workroot):
    with dedicated_broker(kafka_workroot, "spark-eos") as cluster:
        yield cluster


@pytest.fixture(scope="module")
def jars() -> str:
    return ",".join(str(p) for p in ensure_spark_kafka_jars())


def _produce_input(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(n):
        while True:
            try:
                p.produce(topic, key=str(i).encode(), value=str(i).encode(), partition=0)
                break
            except BufferError:
                p.poll(0.1)
    assert p.flush(30) == 0


def count_committed(bootstrap: str, topic: str, partitions: int, timeout_s: float = 60) -> Counter:
    """Every record of ``topic`` a read_committed consumer sees, by value."""
    from confluent_kafka import TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-counter", "isolation.level": "read_committed",
                  "enable.partition.eof": True, "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen: Counter = Counter()
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout_s
    try:
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"reading {topic} did not reach its end"
            msg = c.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                at_end.add(msg.partition())
                continue
            seen[msg.value().decode()] += 1
    finally:
        c.close()
    return seen


def random_kills(seed: int, kills: int, batches: int) -> dict[int, int]:
    """Batch id -> milliseconds into it: ``kills`` seeded kills among the batches after the crash points."""
    rng = random.Random(seed)
    chosen = sorted(rng.sample(range(BATCHES, batches), kills))
    return {b: rng.randrange(KILL_WINDOW_MS) for b in chosen}


INJECTED = ("injected", "exited unexpectedly")  # the crash points' own task failures: raised, or the worker exiting


def unexpected_task_failures(log: str) -> list[str]:
    """Task failures in a run's log that no crash point caused (a retry would hide them from the exit code)."""
    parts = log.split("Exception in task")[1:]
    return [part[:2000] for part in parts if not any(mark in part[:6000] for mark in INJECTED)]


def run_until_consumed(args: list[str], workdir: Path, max_runs: int, strict: bool) -> tuple[int, float]:
    """Run the job, restarting it after every crash, until a run ends cleanly; (runs, seconds).
    ``strict``: a run must end killed or done, never failed on its own."""
    started = time.monotonic()
    for run in range(1, max_runs + 1):
        log = workdir / f"run{run}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "tests.support.spark_eos_job", *args], cwd=REPO,
                                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                rc = proc.wait(RUN_TIMEOUT_S)
            finally:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)  # whatever is left of a killed driver (its JVM, workers)
                except ProcessLookupError:
                    pass
        print(f"{args[args.index('--sink') + 1]} run {run}: exit {rc} after {time.monotonic() - started:.1f}s")
        if rc == 0:
            if strict:
                text = log.read_text(errors="replace")
                assert unexpected_task_failures(text) == [], f"run {run}: a task failed on its own (Spark retried it)"
            return run, time.monotonic() - started
        text = log.read_text(errors="replace")
        tail = text[-3000:]
        allowed = (-signal.SIGKILL, 137) if strict else (-signal.SIGKILL, 137, 1)
        assert rc in allowed, f"run {run} failed on its own with {rc}:\n{tail}"
        if strict:
            assert unexpected_task_failures(text) == [], f"run {run}: a task failed on its own (Spark retried it)"
    raise AssertionError(f"the job did not consume its input in {max_runs} runs; last log:\n{tail}")


def crash_and_count(broker, jars: str, sink: str, per_batch: int, workdir: Path, name: str,
                    batches: int = BATCHES, kills: dict[int, int] | None = None) -> dict:
    bootstrap = broker.bootstrap_servers
    kills = kills or {}
    n = per_batch * batches
    source, output = f"{name}-in", f"{name}-out"
    broker.create_topic(source, partitions=1)
    broker.create_topic(output, partitions=2)
    _produce_input(bootstrap, source, n)
    markers = workdir / "markers"
    markers.mkdir(parents=True)
    for i, point in enumerate(POINTS):
        (markers / f"{point}@{FIRST_CRASH_BATCH + i}").touch()
    for batch, delay_ms in kills.items():
        (markers / f"kill@{batch}").write_text(str(delay_ms))
    args = ["--bootstrap", bootstrap, "--input", source, "--output", output, "--sink", sink,
            "--checkpoint", str(workdir / "checkpoint"), "--markers", str(markers), "--per-batch", str(per_batch),
            "--jars", jars, "--application", name, "--ledger-topic", f"{name}-ledger"]
    expected_runs = 1 + DRIVER_KILLS + len(kills)
    runs, seconds = run_until_consumed(args, workdir, expected_runs + 3, strict=sink == "writer")
    left = sorted(p.name for p in markers.iterdir())
    seen = count_committed(bootstrap, output, 2)
    per_point = {}
    for i, point in enumerate(POINTS):
        batch = range((FIRST_CRASH_BATCH + i) * per_batch, (FIRST_CRASH_BATCH + i + 1) * per_batch)
        per_point[point] = sum(seen[str(v)] - 1 for v in batch if seen[str(v)] > 1)
    return {
        "records": n, "runs": runs, "expected_runs": expected_runs, "seconds": seconds, "markers_left": left,
        "per_point": per_point,
        "duplicates": sum(c - 1 for c in seen.values() if c > 1),
        "lost": sum(1 for i in range(n) if seen[str(i)] == 0),
        "unexpected": sorted(set(seen) - {str(i) for i in range(n)}),
    }


FULL = bool(os.environ.get("SPARK_EOS_FULL"))


def _check_and_show(result: dict, sink: str, figures: dict, strict: bool = False) -> None:
    for point, dups in result["per_point"].items():
        figures[f"spark eos: {sink} duplicates after {point}"] = dups
    figures[f"spark eos: {sink} totals"] = (
        f"{result['records']} records, {result['duplicates']} duplicates, {result['lost']} lost, "
        f"{result['runs']} runs, {result['seconds']:.1f}s")
    assert result["markers_left"] == [], f"crash points that never fired: {result['markers_left']}"
    if strict:  # every kill ended a run, and no run ended otherwise
        assert result["runs"] == result["expected_runs"], result
    assert result["unexpected"] == []
    assert result["lost"] == 0


def _exactly_once_then_audit(broker, jars, tmp_path, figures, unique_name, per_batch, capsys) -> None:
    seed = int(os.environ.get("SPARK_EOS_SEED") or random.randrange(2**32))
    kills = random_kills(seed, RANDOM_KILLS, WRITER_BATCHES)
    print(f"spark eos: seed {seed} (SPARK_EOS_SEED={seed} SPARK_EOS_RANDOM_KILLS={RANDOM_KILLS} "
          f"SPARK_EOS_BATCHES={WRITER_BATCHES} runs it again); kills (batch: ms into it): {kills}")
    figures["spark eos: random kills of the writer's driver"] = f"seed {seed}, {kills}"
    ours = crash_and_count(broker, jars, "writer", per_batch, tmp_path / "writer", f"{unique_name[:40]}-w",
                           WRITER_BATCHES, kills)
    theirs = crash_and_count(broker, jars, "builtin", per_batch, tmp_path / "builtin", f"{unique_name[:40]}-b")
    _check_and_show(ours, "kafkatxn writer", figures, strict=True)
    _check_and_show(theirs, "format(kafka)", figures)
    assert ours["duplicates"] == 0, f"the writer duplicated records: {ours['per_point']}"
    # The crashes bite: the built-in sink, crashed the same way, writes replayed batches twice.
    assert theirs["duplicates"] > 0, theirs

    # The auditor agrees: the writer's ids are stable and unique, and nothing hangs.
    started = time.monotonic()
    audited = run_cli_subprocess("--bootstrap-server", broker.bootstrap_servers, "audit", "--master", "local[2]",
                                 "-o", "json", timeout=180)
    figures["spark eos: audit seconds"] = round(time.monotonic() - started, 1)
    assert audited.code == 0, audited.stdout + audited.stderr
    report = json.loads(audited.stdout)
    assert report_findings(report) == {}, report
    assert report["transactional_ids"] == 2, report  # the writer's two tasks, one stable id each; nothing else is transactional
    hanging = run_cli(capsys, "--bootstrap-server", broker.bootstrap_servers, "hanging", "-o", "json")
    assert hanging.code == 0, hanging.stdout + hanging.stderr
    found = json.loads(hanging.stdout)
    assert found["hanging"] == [] and found["undetermined"] == [], found
    # Every killed attempt's transaction was completed by the next attempt's InitProducerId.
    listed = run_cli(capsys, "--bootstrap-server", broker.bootstrap_servers, "transactions", "list",
                     *(a for state in OPEN_TRANSACTION_STATES for a in ("--state", state)), "-o", "json")
    assert listed.code == 0 and not json.loads(listed.stdout or "[]"), listed.stdout + listed.stderr


def report_findings(report: dict) -> dict:
    """The audit report's non-empty finding lists (shared ids, storms, unstable ids, inventory)."""
    kinds = ("shared_ids", "init_storms", "unstable_ids", "inventory")
    return {k: report[k] for k in kinds if report.get(k)}


def test_the_writer_writes_every_record_once_through_every_crash(broker, jars, tmp_path, figures, unique_name, capsys):
    _exactly_once_then_audit(broker, jars, tmp_path, figures, unique_name, 20_000 if FULL else 300, capsys)
