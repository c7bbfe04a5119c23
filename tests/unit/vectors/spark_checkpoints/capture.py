"""Capture real Structured Streaming checkpoints written by one PySpark, as test vectors for
tests/unit/test_spark_checkpoint_vectors.py. Run by hand (not in the suite), from the repository root:

    python3 -m venv /tmp/spark-venv-4.0.5 && /tmp/spark-venv-4.0.5/bin/pip install pyspark==4.0.5
    PYTHONPATH=$PWD nice -n 19 python3 tests/unit/vectors/spark_checkpoints/capture.py /tmp/spark-venv-4.0.5/bin/python

It starts a one-node broker (harness; or --bootstrap), writes records in transactions (one aborted),
and runs in that venv's Python (capture_job.py) queries reading read_committed through Spark's
Kafka connector, twice (more records between), so each has committed batches 0 and 1:
subscribe (two topics), subscribePattern, assign, and subscribe unioned with a text file source (a
source that is not Kafka; on 4.2+ also with both sources named, source evolution on). Derived copies:
batch_in_flight (subscribe without commits/1) and no_commit (Kafka + files with batch 0 planned only).
Each checkpoint's metadata, offsets/, commits/ and sources/ (no .crc, no state/) go to
<spark version>/<shape>/ with expected.json: the read_committed end offsets the broker reported after
each round of writes, which Spark's progress must agree with.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Producer, TopicPartition

HERE = Path(__file__).resolve().parent
MAVEN = "https://repo.maven.apache.org/maven2/org/apache/spark"


def _newest(artifact: str, wanted: str) -> str:
    """The newest release of ``artifact`` on Maven Central of ``wanted``'s line (else of its major
    version) not newer than it: PyPI can be ahead of Central, and Central lacks some patches."""
    with urllib.request.urlopen(f"{MAVEN}/{artifact}/maven-metadata.xml", timeout=30) as r:  # noqa: S310
        releases = [tuple(map(int, v.split("."))) for v in re.findall(r"<version>(\d+\.\d+\.\d+)</version>", r.read().decode())]
    want = tuple(map(int, wanted.split(".")))
    for same in (2, 1):
        fits = [v for v in releases if v[:same] == want[:same] and v <= want]
        if fits:
            return ".".join(map(str, max(fits)))
    raise SystemExit(f"no {artifact} for Spark {wanted} on Maven Central")


def connector_jars(spark_version: str, cache: Path) -> list[Path]:
    """spark-sql-kafka and spark-token-provider-kafka of the line, with kafka-clients and commons-pool2
    from the harness's resolved set (mvn's resolution of some 4.x poms trips over a mirror they name)."""
    from harness.spark_jars import ensure_spark_kafka_jars

    shared = [p for p in ensure_spark_kafka_jars("4.3.0") if p.name.startswith(("kafka-clients", "commons-pool2"))]
    jars = []
    for artifact in ("spark-sql-kafka-0-10_2.13", "spark-token-provider-kafka-0-10_2.13"):
        version = _newest(artifact, spark_version)
        jar = cache / f"{artifact}-{version}.jar"
        urllib.request.urlretrieve(f"{MAVEN}/{artifact}/{version}/{jar.name}", jar)  # noqa: S310
        jars.append(jar)
    return jars + shared


def end_offsets(bootstrap: str, partitions: list[tuple[str, int]]) -> dict[str, int]:
    """read_committed end offsets (the LSO), once every partition's equals its high watermark: a commit
    returns before the coordinator has written its markers, and until then the LSO is still the
    transaction's first offset. With no transaction open, that is where a read_committed reader stops."""
    from confluent_kafka import IsolationLevel
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until its futures are done
    asked = {TopicPartition(t, p): OffsetSpec.latest() for t, p in partitions}
    deadline = time.monotonic() + 60
    while True:
        ends = [{f"{tp.topic}:{tp.partition}": f.result(30).offset for tp, f in
                 admin.list_offsets(asked, isolation_level=level, request_timeout=30).items()}
                for level in (IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED)]
        if ends[0] == ends[1] or time.monotonic() > deadline:
            return ends[0]
        time.sleep(0.2)


def write(bootstrap: str, txn_id: str, records: dict[tuple[str, int], int], commit: bool = True) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    p.init_transactions(30)
    p.begin_transaction()
    for (t, part), n in records.items():
        for i in range(n):
            p.produce(t, value=f"{t}-{part}-{i}".encode(), partition=part)
    p.flush(30)  # sent before the abort: an aborted transaction that leaves records and markers behind
    p.commit_transaction(30) if commit else p.abort_transaction(30)


def copy_checkpoint(src: Path, dst: Path) -> None:
    shutil.rmtree(dst, ignore_errors=True)
    for f in sorted(src.rglob("*")):
        rel = f.relative_to(src)
        if f.is_file() and not f.name.endswith(".crc") and rel.parts[0] in ("metadata", "offsets", "commits", "sources"):
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, dst / rel)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("python", help="a venv's python holding the PySpark to capture")
    ap.add_argument("--bootstrap", help="a running broker (default: start one with the harness)")
    args = ap.parse_args()
    version = subprocess.check_output([args.python, "-c", "import pyspark; print(pyspark.__version__)"], text=True).strip()
    work = Path(tempfile.mkdtemp(prefix="kafkatxn-capture-"))
    cluster = None
    try:
        if args.bootstrap:
            bootstrap = args.bootstrap
        else:
            from harness import KafkaCluster

            cluster = KafkaCluster(work / "kafka", n_brokers=1, name="capture").start(timeout=120)
            bootstrap = cluster.bootstrap_servers
        prefix = "s" + version.replace(".", "")
        orders, payments = f"{prefix}-orders", f"{prefix}-payments"
        if cluster is not None:
            cluster.create_topic(orders, partitions=2)
            cluster.create_topic(payments, partitions=1)
        else:
            from confluent_kafka.admin import AdminClient, NewTopic

            for f in AdminClient({"bootstrap.servers": bootstrap}).create_topics(
                    [NewTopic(orders, 2, 1), NewTopic(payments, 1, 1)]).values():
                f.result(30)
        all_tps = [(orders, 0), (orders, 1), (payments, 0)]
        text_dir = work / "text"
        text_dir.mkdir()
        (text_dir / "a.txt").write_text("x\ny\n")
        (text_dir / "a2.txt").write_text("w\n")  # two files in batch 0: the file source's log has a line each
        shapes = {
            "subscribe": {"kafka": {"subscribe": f"{orders},{payments}"}, "partitions": all_tps},
            "subscribe_pattern": {"kafka": {"subscribePattern": f"{prefix}-(orders|payments)"}, "partitions": all_tps},
            "assign": {"kafka": {"assign": json.dumps({orders: [1], payments: [0]})}, "partitions": [(orders, 1), (payments, 0)]},
            "kafka_and_files": {"kafka": {"subscribe": orders}, "partitions": [(orders, 0), (orders, 1)], "text_dir": str(text_dir)},
        }
        if tuple(map(int, version.split(".")[:2])) >= (4, 2):
            shapes["named_sources"] = {**shapes["kafka_and_files"], "named": True, "optional": True,
                                       "conf": {"spark.sql.streaming.queryEvolution.enableSourceEvolution": "true"}}
        for name, s in shapes.items():
            s["checkpoint"] = str(work / "ck" / name)
        jars = ",".join(str(p) for p in connector_jars(version, work))
        cfg = {"bootstrap": bootstrap, "jars": jars, "shapes": {k: {x: v for x, v in s.items() if x != "partitions"} for k, s in shapes.items()}}

        write(bootstrap, f"{prefix}-w1", {(orders, 0): 3, (orders, 1): 2, (payments, 0): 4})
        ends = [end_offsets(bootstrap, all_tps)]
        job = subprocess.Popen([args.python, str(HERE / "capture_job.py"), json.dumps(cfg)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
        runs = [json.loads(job.stdout.readline())]
        write(bootstrap, f"{prefix}-w2", {(orders, 0): 1, (payments, 0): 2}, commit=False)  # aborted: markers only
        write(bootstrap, f"{prefix}-w3", {(orders, 0): 2, (orders, 1): 5, (payments, 0): 1})
        (text_dir / "b.txt").write_text("z\n")
        ends.append(end_offsets(bootstrap, all_tps))
        job.stdin.write("go\n")
        job.stdin.flush()
        runs.append(json.loads(job.stdout.readline()))
        if job.wait(300) != 0:
            sys.exit(f"the Spark job failed (exit {job.returncode})")

        out_root = HERE / version
        for name, s in shapes.items():
            if any("error" in r["queries"][name] for r in runs):
                print(f"{name}: not captured: {[r['queries'][name].get('error') for r in runs]}", file=sys.stderr)
                continue
            query_id = runs[1]["queries"][name]["id"]
            assert runs[0]["queries"][name]["id"] == query_id
            mine = [f"{t}:{p}" for t, p in s["partitions"]]
            expected = {"spark_version": version, "query_id": query_id, "committed_batch_id": 1,
                        "position": {k: ends[1][k] for k in mine}, "in_flight_batch_id": None, "in_flight_end": {},
                        "kafka_sources": 1, "other_sources": 1 if "text_dir" in s else 0}
            for run, end in zip(runs, ends):  # Spark's own progress says the same end offsets
                said = run["queries"][name]["end_offsets"][0]
                said = said if isinstance(said, dict) else ast.literal_eval(said)  # JSON text, or a dict's repr (4.0)
                assert {f"{t}:{p}": o for t, ps in said.items() for p, o in ps.items()} == {k: end[k] for k in mine}, (name, said, end)
            copy_checkpoint(Path(s["checkpoint"]), out_root / name)
            (out_root / name / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
            if name == "subscribe":  # the batch in flight: batch 1 planned, its commit not yet written
                flight = out_root / "batch_in_flight"
                copy_checkpoint(Path(s["checkpoint"]), flight)
                (flight / "commits" / "1").unlink()
                (flight / "expected.json").write_text(json.dumps(
                    {**expected, "committed_batch_id": 0, "position": {k: ends[0][k] for k in mine},
                     "in_flight_batch_id": 1, "in_flight_end": {k: ends[1][k] for k in mine}}, indent=1, sort_keys=True) + "\n")
                (flight / "README").write_text("A copy of ../subscribe with commits/1 deleted: batch 1 planned, not committed.\n")
            if name == "kafka_and_files":  # no batch committed yet: the position is the Kafka source's initial offsets
                fresh = out_root / "no_commit"
                copy_checkpoint(Path(s["checkpoint"]), fresh)
                for f in ("commits/0", "commits/1", "offsets/1", "sources/1/1"):
                    (fresh / f).unlink()
                (fresh / "expected.json").write_text(json.dumps(
                    {**expected, "committed_batch_id": None, "in_flight_batch_id": 0, "in_flight_end": {k: ends[0][k] for k in mine},
                     "position": {k: 0 for k in mine}}, indent=1, sort_keys=True) + "\n")
                (fresh / "README").write_text("A copy of ../kafka_and_files with batch 1 and every commit deleted: batch 0 planned, "
                                              "none committed (the position: startingOffsets=earliest on new topics); sources/1/0 is the file source's log (a line per file).\n")
        (out_root / "CAPTURED").write_text(f"PySpark {version} (local[1]); connector jars: {', '.join(Path(j).name for j in jars.split(','))}; "
                                           f"Kafka {cluster.version if cluster else 'at ' + bootstrap}\n")
        print(f"captured {version} into {out_root}", file=sys.stderr)
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
