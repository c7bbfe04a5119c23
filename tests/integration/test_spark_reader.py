"""A real Structured Streaming query (local[2], Spark's Kafka connector) reading read_committed is a
reader kafkatxn sees: healthy, it is never paged; behind a hanging transaction it stalls, `diagnose
--spark-checkpoint` names the transaction and the command, and running that command lets the query's
next batch read the records behind the LSO. A damaged checkpoint is one line, exit 3, nothing changed.

One query serves the whole scenario (starting Spark dominates the time)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from harness import hanging_maker as hm  # noqa: E402
from harness.spark_jars import ensure_spark_kafka_jars  # noqa: E402
from kafkatxn.model import TopicPartition  # noqa: E402
from kafkatxn.spark_readers import read_checkpoint  # noqa: E402
from tests.support.cli_helpers import run_cli  # noqa: E402

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def broker(kafka_hanging):
    return kafka_hanging


def batches(out: Path) -> list[dict]:
    return [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []


def read_values(out: Path) -> list[str]:
    return [v for b in batches(out) for v in b["values"]]


def wait_for(what: str, condition, timeout_s: float, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            tail = log.read_text()[-3000:] if log is not None and log.exists() else ""
            pytest.fail(f"{what}: not within {timeout_s:.0f} s\n{tail}")
        time.sleep(0.3)


def committed_position(spec: str, tp: TopicPartition) -> int | None:
    """Where the query's checkpoint says it stands on ``tp`` (its committed batch's end), as the commands read it."""
    query, _missing = read_checkpoint(spec)
    return None if query is None else query.position.get(tp)


def show(capsys, line: str) -> None:
    with capsys.disabled():  # the transcript, shown with -s
        print(line + "\n")


def cli(capsys, *args: str):
    result = run_cli(capsys, *args)
    with capsys.disabled():  # the transcript, shown with -s
        print(f"$ kafkatxn {shlex.join(args)}\n{result.stdout}{result.stderr}(exit {result.code})\n")
    return result


def test_a_stalled_query_is_diagnosed_and_the_command_unblocks_it(broker, unique_name, tmp_path, capsys):
    bootstrap = broker.bootstrap_servers
    topic = broker.create_topic(unique_name[:100], partitions=1)
    tp = TopicPartition(topic, 0)
    hm.write_committed(bootstrap, tp, [b"a0", b"a1", b"a2"], f"{topic}-before")
    ck, out, stop, log = tmp_path / "checkpoint", tmp_path / "batches.jsonl", tmp_path / "stop", tmp_path / "spark.log"
    jars = ",".join(str(p) for p in ensure_spark_kafka_jars())
    with log.open("w") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.spark_reader_job", "--bootstrap", bootstrap, "--input", topic,
             "--checkpoint", str(ck), "--out", str(out), "--stop", str(stop), "--jars", jars, "--name", "orders-etl"],
            cwd=REPO, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "PYTHONPATH": str(REPO)})
    spec = f"orders-etl={ck}"
    try:
        wait_for("the query reads the committed records", lambda: read_values(out) == ["a0", "a1", "a2"], 120, log)
        # Spark writes a batch's commit entry after its sink ran: until then the checkpoint says the query
        # is still at its start, with the batch in flight (CI: committed 0, lagging, read between the two).
        wait_for("the query commits that batch", lambda: committed_position(spec, tp) == 4, 60, log)
        # Healthy: caught up, never paged.
        only = ("--topic-regex", f"^{topic}$")  # the shared broker holds other tests' hanging transactions
        healthy = cli(capsys, "-b", bootstrap, "check", *only, "--spark-checkpoint", spec)
        assert healthy.code == 0, healthy.stdout
        rows = json.loads(cli(capsys, "-b", bootstrap, "-o", "json", "lso", "--groups", "--spark-checkpoint", spec).stdout)
        assert [(r["group"], r["committed_offset"], r["verdict"]) for r in rows] == [("spark:orders-etl", 4, "caught_up")]

        made = hm.make_hanging_transaction(bootstrap, f"{topic}-hanging", topic, 0)
        hm.write_committed(bootstrap, tp, [b"b0", b"b1"], f"{topic}-after")  # behind the hanging one: past the LSO
        seen = len(batches(out))
        # Hanging by hanging's rule once transaction.max.timeout.ms (10 s here) has passed since its write.
        time.sleep(hm.HANGING_BROKER_MAX_TIMEOUT_MS / 1000 + 1)
        assert read_values(out) == ["a0", "a1", "a2"] and len(batches(out)) == seen  # stalled: no batch, no record
        show(capsys, f"-- the query stalled: {len(batches(out))} batch(es) with records, values {read_values(out)}, "
                     f"LSO {hm.end_offset(bootstrap, tp, True)}, HW {hm.end_offset(bootstrap, tp, False)} --")

        paged = cli(capsys, "-b", bootstrap, "check", *only, "--spark-checkpoint", spec)
        assert paged.code == 2 and "Spark query 'orders-etl'" in paged.stdout and f"--spark-checkpoint {spec}" in paged.stdout
        assert "1 Spark query blocked" in paged.stdout.splitlines()[0]
        diagnosed = cli(capsys, "-b", bootstrap, "diagnose", "--spark-checkpoint", spec)
        assert diagnosed.code == 2
        as_json = json.loads(cli(capsys, "-b", bootstrap, "-o", "json", "diagnose", "--spark-checkpoint", spec).stdout)
        (t,) = as_json["transactions"]
        assert t["verdict"] == "hanging" and t["transactional_id"] == made.transactional_id
        assert t["command"] == f"kafkatxn abort --topic {topic} --partition 0 --start-offset {made.start_offset}"
        assert t["command"] in diagnosed.stdout and t["groups"] == ["spark:orders-etl"]
        (q,) = as_json["spark_queries"]
        assert (q["query_name"], q["checkpoint"], q["status"]) == ("orders-etl", str(ck), "blocked")
        assert q["query_id"] == json.loads((ck / "metadata").read_text())["id"]

        # A damaged copy of the checkpoint: one line, exit 3, nothing changed.
        damaged = tmp_path / "damaged"
        shutil.copytree(ck, damaged)
        last = max((p for p in (damaged / "commits").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
        offsets_file = damaged / "offsets" / last.name
        offsets_file.write_text(offsets_file.read_text()[:-7])
        before = {p: p.read_bytes() for p in damaged.rglob("*") if p.is_file()}
        lso_before = (hm.end_offset(bootstrap, tp, True), hm.end_offset(bootstrap, tp, False))
        broken = cli(capsys, "-b", bootstrap, "diagnose", "--spark-checkpoint", str(damaged))
        assert broken.code == 3 and len(broken.stderr.strip().splitlines()) == 1, broken.stderr
        assert broken.stdout == "", broken.stdout  # the one line is all
        assert str(offsets_file.parent.parent) in broken.stderr and "not complete JSON" in broken.stderr
        assert {p: p.read_bytes() for p in damaged.rglob("*") if p.is_file()} == before
        assert (hm.end_offset(bootstrap, tp, True), hm.end_offset(bootstrap, tp, False)) == lso_before

        # The command diagnose printed, as printed (with --yes: no terminal here; its audit log in the test's directory).
        fixed = cli(capsys, "-b", bootstrap, *shlex.split(t["command"])[1:], "--yes", "--audit-log", str(tmp_path / "audit.jsonl"))
        assert fixed.code == 0, fixed.stdout + fixed.stderr
        wait_for("the query's next batch reads the records behind the LSO",
                 lambda: read_values(out) == ["a0", "a1", "a2", "b0", "b1"], 60, log)
        assert len(batches(out)) > seen
        show(capsys, f"-- the query's next batch: {len(batches(out))} batch(es) with records, values {read_values(out)}, "
                     f"LSO {hm.end_offset(bootstrap, tp, True)}, HW {hm.end_offset(bootstrap, tp, False)} --")
        after = cli(capsys, "-b", bootstrap, "check", *only, "--spark-checkpoint", spec)
        assert after.code == 0, after.stdout
    finally:
        stop.touch()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_the_writers_ledger_is_read_committed_per_task(broker, unique_name):
    """The ledger as spark_eos writes it (key <application>/<query>/<task>, value {"batch": N}, in
    transactions): an aborted entry and another writer's keys do not count, a tombstone removes a task."""
    from confluent_kafka import Producer

    from kafkatxn.config import ConnectionConfig
    from kafkatxn.kafka import Cluster

    bootstrap = broker.bootstrap_servers
    ledger = broker.create_topic(f"{unique_name[:80]}-ledger", partitions=2)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{ledger}-w", "transaction.timeout.ms": 10_000,
                         "log_level": 0})
    producer.init_transactions(30)

    def transaction(entries: list[tuple[str, int | None]], commit: bool = True) -> None:
        producer.begin_transaction()
        for key, batch in entries:  # a task's entries on one partition, as the writer keeps them (task % partitions)
            producer.produce(ledger, key=key, value=None if batch is None else json.dumps({"batch": batch}),
                             partition=int(key.rsplit("/", 1)[1]) % 2)
        producer.commit_transaction(30) if commit else producer.abort_transaction(30)

    transaction([("app/main/0", 4), ("app/main/1", 4), ("app/other/0", 9)])
    transaction([("app/main/0", 5), ("app/main/1", 5)])
    transaction([("app/main/0", 6), ("app/main/1", 6)], commit=False)  # aborted: not committed by the writer
    transaction([("app/main/2", 3), ("app/main/2", None)])  # a retired task's tombstone
    with Cluster(ConnectionConfig(bootstrap, timeout_ms=20_000)) as cluster:
        read = cluster.writer_batches(ledger, "app", "main")
        assert read.missing == [] and read.value == {0: 5, 1: 5}
        gone = cluster.writer_batches(f"{ledger}-none", "app", "main")
        assert gone.value == {} and "does not exist" in gone.missing[0].reason
