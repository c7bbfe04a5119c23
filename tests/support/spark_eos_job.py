"""A Structured Streaming query, Kafka topic in, Kafka topic out, that crashes where it is told.

Run as a process of its own (``python -m tests.support.spark_eos_job ...``, started in a session of
its own so that its process group is the whole driver: this Python, Spark's JVM and its Python
workers) by ``tests/integration/test_spark_exactly_once.py`` and ``bench/bench_spark_writer.py``.
The query reads ``--input`` from the earliest offset, ``--per-batch`` records per micro-batch
(Trigger.AvailableNow), and writes with ``--sink``: ``writer`` (kafkatxn.spark_eos.ExactlyOnceWriter)
or ``builtin`` (Spark's ``format("kafka")`` sink, driven from foreachBatch so the same crash hooks
apply; it is the same KafkaWriter as ``writeStream.format("kafka")``), or ``builtin-stream``
(``writeStream.format("kafka")`` itself, no hooks). Exit 0 once the input is
consumed.

Crash hooks live here, not in the library: a marker file ``<point>@<batch id>`` in ``--markers``
makes the hook at ``point`` fire once in that batch (whoever unlinks the file first fires):

- ``worker_mid_task``: the Python worker writing the batch exits after half of its rows (Spark retries the task;
  for the built-in sink the rows never left the worker: it flushes them to the JVM at the end of a task);
- ``task_after_commit``: the task raises after its output was written (writer: after its transaction committed);
- ``driver_mid_batch``: a task kills the whole driver (SIGKILL to its process group) after its output was written
  (writer: after its commit; built-in: from a timer 0.3 s after the task handed its rows over);
- ``driver_after_commit``: the driver kills itself after the batch was written, before Spark's commit entry.

A marker ``kill@<batch id>`` holding a number of milliseconds kills the driver that long after the
batch began, wherever it then is (a task producing or committing, the batch's commit entry, the next
batch's planning): the crash test's seeded random moments.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from kafkatxn.spark_eos import ExactlyOnceWriter

POINTS = ("worker_mid_task", "task_after_commit", "driver_mid_batch", "driver_after_commit")
SETTLE_S = 1.0
BUILTIN_KILL_DELAY_S = 0.3  # a crashed task's records already handed to a producer get this long to reach the broker


def claim(markers: str, point: str, batch_id: int) -> bool:
    try:
        os.unlink(Path(markers) / f"{point}@{batch_id}")
        return True
    except FileNotFoundError:
        return False


def kill_driver() -> None:
    os.killpg(int(os.environ["EOS_DRIVER_PGID"]), signal.SIGKILL)


_TIMED_KILLS: list[threading.Timer] = []


def overdue_kill() -> None:
    """A timed kill that has not fired by the next batch (or the end of the query) fires now: every
    kill claimed is a kill, whatever the batches' pace."""
    if any(t.is_alive() for t in _TIMED_KILLS):
        print("killing the driver: its timed kill is overdue", flush=True)
        kill_driver()


def arm_timed_kill(markers: str, batch_id: int) -> None:
    """Kill the driver the marker ``kill@<batch id>``'s milliseconds after now (once: the marker goes)."""
    overdue_kill()
    path = Path(markers) / f"kill@{batch_id}"
    try:
        delay_ms = int(path.read_text())
        path.unlink()
    except FileNotFoundError:
        return
    print(f"killing the driver {delay_ms} ms into batch {batch_id}", flush=True)
    timer = threading.Timer(delay_ms / 1000, kill_driver)
    timer.daemon = True
    timer.start()
    _TIMED_KILLS.append(timer)


class CrashingWriter(ExactlyOnceWriter):
    """The library's writer with the test's hooks around its task (pickled to the workers by value)."""

    markers = ""

    def write_task(self, batches: Iterator[Any], batch_id: int) -> Any:
        self._batch = batch_id
        return super().write_task(batches, batch_id)

    def records(self, batches: Any) -> Iterator[tuple[bytes | None, bytes | None]]:
        rows = list(super().records(batches))
        crash = bool(rows) and claim(self.markers, "worker_mid_task", self._batch)
        for i, row in enumerate(rows):
            if crash and i == len(rows) // 2:
                time.sleep(SETTLE_S)
                os._exit(1)
            yield row

    def after_commit(self, outcome: Any) -> None:
        if outcome.skipped or not outcome.records:
            return
        if claim(self.markers, "task_after_commit", self._batch):
            raise RuntimeError("injected: the task fails after its transaction committed")
        if claim(self.markers, "driver_mid_batch", self._batch):
            kill_driver()


def builtin_passthrough(markers: str, batch_id: int):
    """A pass-through in the sink's own stage, so a crash here is a crash of the sink's task."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        whole = list(batches)
        rows = sum(b.num_rows for b in whole)
        mid = rows and claim(markers, "worker_mid_task", batch_id)
        if mid:
            first = whole[0].slice(0, max(1, whole[0].num_rows // 2))
            yield first
            time.sleep(SETTLE_S)
            os._exit(1)
        yield from whole
        if rows and claim(markers, "task_after_commit", batch_id):
            time.sleep(SETTLE_S)
            raise RuntimeError("injected: the task fails after its output was written")
        if rows and claim(markers, "driver_mid_batch", batch_id):
            # A Python worker's rows reach the JVM (and the sink) only when it flushes its output, at the
            # end of the task: kill the driver from a timer, just after the rows were handed over.
            threading.Timer(BUILTIN_KILL_DELAY_S, kill_driver).start()

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--sink", choices=("writer", "builtin", "builtin-stream"), required=True)
    parser.add_argument("--markers", default="")
    parser.add_argument("--per-batch", type=int, required=True)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--application", default="eos-test")
    parser.add_argument("--ledger-topic", default="kafkatxn-spark-ledger")
    parser.add_argument("--jars", required=True, help="comma-separated: Spark's Kafka connector and its dependencies")
    parser.add_argument("--master", default="local[2,4]")  # 2 cores; a task may fail 3 times and be retried
    args = parser.parse_args(argv)

    os.environ["EOS_DRIVER_PGID"] = str(os.getpgid(0))  # inherited by the JVM and its Python workers
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(args.master).appName(f"eos-{args.sink}")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", str(args.partitions)).config("spark.jars", args.jars)
             .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    source = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", args.bootstrap)
              .option("subscribe", args.input).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", str(args.per_batch)).option("failOnDataLoss", "true").load()
              .selectExpr("key", "value"))

    tasks = [0, 0]  # the writer's tasks, and those that built a producer (InitProducerId)
    if args.sink == "writer":
        CrashingWriter.markers = args.markers
        writer = CrashingWriter({"bootstrap.servers": args.bootstrap, "linger.ms": 20}, args.output, application=args.application,
                                query=args.sink, partitions=args.partitions, ledger_topic=args.ledger_topic)
        writer.markers = args.markers

        def each_batch(df: Any, batch_id: int) -> None:
            if args.markers:
                arm_timed_kill(args.markers, batch_id)
            result = writer(df, batch_id)
            tasks[0] += result.tasks
            tasks[1] += result.new_producers
            if args.markers and claim(args.markers, "driver_after_commit", batch_id):
                kill_driver()
    else:
        def each_batch(df: Any, batch_id: int) -> None:
            if args.markers:
                arm_timed_kill(args.markers, batch_id)
            out = df.mapInArrow(builtin_passthrough(args.markers, batch_id), df.schema) if args.markers else df
            out.write.format("kafka").option("kafka.bootstrap.servers", args.bootstrap).option("topic", args.output).save()
            if args.markers and claim(args.markers, "driver_after_commit", batch_id):
                kill_driver()

    if args.sink == "writer":
        writer.ledger_partitions()  # set-up (the ledger topic), like the output topic made beforehand
    started = time.monotonic()
    if args.sink == "builtin-stream":  # Spark's own streaming Kafka sink (no crash hooks): the benchmark's reference
        stream = source.writeStream.format("kafka").option("kafka.bootstrap.servers", args.bootstrap).option("topic", args.output)
    else:
        stream = source.writeStream.foreachBatch(each_batch)
    query = stream.option("checkpointLocation", args.checkpoint).trigger(availableNow=True).start()
    query.awaitTermination()
    overdue_kill()
    print(f"done in {time.monotonic() - started:.2f}s", flush=True)
    batches = [(p["batchId"], p["numInputRows"], p["durationMs"].get("triggerExecution", 0)) for p in query.recentProgress]
    print("batches (id, rows, ms): " + json.dumps(batches), flush=True)
    if args.sink == "writer":
        print(f"writer tasks: {tasks[0]}, with a new producer: {tasks[1]}", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
