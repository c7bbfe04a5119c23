"""The exactly-once writer (kafkatxn.spark_eos) against Spark's built-in Kafka sink, same input.

One broker; an input topic of ``--records`` records (2 partitions); the same Structured Streaming
query (tests/support/spark_eos_job.py, local[2], Trigger.AvailableNow, ``--batch`` records a
micro-batch) run once with ``writeStream.format("kafka")`` and once with the writer, each in a
process of its own. Timed from the query's start to its end (the session's start is left out, the
same for both; the writer's ledger topic is made before, as the output topics are). Prints records/s
(and over the batches after the first, which start Spark's Python workers) of each and the ratio; exits 1 when the writer is below
``--target`` (0.7) times the built-in sink. Run it under the broker lock::

    flock /tmp/kafkatxn-brokers.lock python bench/bench_spark_writer.py [--records 1000000 --batch 100000]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness import KafkaCluster  # noqa: E402
from harness.spark_jars import ensure_spark_kafka_jars  # noqa: E402

INPUT_PARTITIONS = 2


def produce(bootstrap: str, topic: str, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.num.messages": 10_000})
    value = b"v" * 100
    for i in range(n):
        while True:
            try:
                p.produce(topic, key=str(i).encode(), value=value)
                break
            except BufferError:
                p.poll(0.1)
    if p.flush(120):
        raise SystemExit("the input did not reach the broker")


def committed_count(bootstrap: str, topic: str, partitions: int) -> int:
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "isolation.level": "read_committed",
                  "enable.partition.eof": True, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    n, ended = 0, set()
    while len(ended) < partitions:
        for msg in c.consume(10_000, 1.0):
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    ended.add(msg.partition())
                continue
            n += 1
    c.close()
    return n


def run_query(sink: str, bootstrap: str, source: str, output: str, batch: int, workdir: Path, jars: str) -> tuple[float, float, str]:
    cmd = [sys.executable, "-m", "tests.support.spark_eos_job", "--bootstrap", bootstrap, "--input", source,
           "--output", output, "--sink", sink, "--checkpoint", str(workdir / f"chk-{sink}"), "--per-batch", str(batch),
           "--jars", jars, "--master", "local[2]", "--application", "bench", "--ledger-topic", "bench-ledger"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    match = re.search(r"done in ([\d.]+)s", proc.stdout)
    batches = re.search(r"batches \(id, rows, ms\): (.*)", proc.stdout)
    if proc.returncode != 0 or not match or not batches:
        raise SystemExit(f"the {sink} query failed ({proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    steady = [b for b in json.loads(batches.group(1)) if b[0] > 0 and b[1] > 0]  # the first batch warms up (Python workers)
    tasks = re.search(r"writer tasks: (\d+), with a new producer: (\d+)", proc.stdout)
    kept = f"; {tasks.group(1)} tasks, {tasks.group(2)} with a new producer (InitProducerId)" if tasks else ""
    return float(match.group(1)), sum(b[1] for b in steady) / (sum(b[2] for b in steady) / 1000 or 1), kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=100_000)
    parser.add_argument("--target", type=float, default=0.7)
    args = parser.parse_args(argv)
    jars = ",".join(str(p) for p in ensure_spark_kafka_jars())
    with tempfile.TemporaryDirectory(prefix="bench-spark-writer-") as tmp:
        workdir = Path(tmp)
        cluster = KafkaCluster(workdir / "kafka", 1, name="bench").start(timeout=120)
        try:
            bootstrap = cluster.bootstrap_servers
            cluster.create_topic("bench-in", partitions=INPUT_PARTITIONS)
            for sink in ("builtin-stream", "writer"):
                cluster.create_topic(f"bench-out-{sink}", partitions=2)
            started = time.monotonic()
            produce(bootstrap, "bench-in", args.records)
            print(f"input: {args.records:,} records in {time.monotonic() - started:.1f}s; batches of {args.batch:,}; local[2]")
            seconds, steady = {}, {}
            for sink in ("builtin-stream", "writer"):
                seconds[sink], steady[sink], kept = run_query(sink, bootstrap, "bench-in", f"bench-out-{sink}", args.batch, workdir, jars)
                print(f"{sink:>15}: {seconds[sink]:7.2f}s  {args.records / seconds[sink]:>10,.0f} records/s; "
                      f"batches after the first: {steady[sink]:>10,.0f} records/s{kept}", flush=True)
            written = committed_count(bootstrap, "bench-out-writer", 2)
        finally:
            cluster.stop()
    ratio = seconds["builtin-stream"] / seconds["writer"]
    print(f"writer / format(kafka) throughput: x{ratio:.2f} (target x{args.target}); batches after the first: "
          f"x{steady['writer'] / steady['builtin-stream']:.2f}; writer output read_committed: {written:,}")
    if written != args.records:
        print(f"the writer wrote {written:,} records, not {args.records:,}")
        return 1
    return 0 if ratio >= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
