"""Every kafkatxn command, run against the ``kafka_secure`` broker, with a check of its answer.

Shared by tests/integration/test_security.py (commands x security modes x file styles, and refused
logins) and tests/integration/test_secrets.py (every command with --debug, searched for secrets).

The traffic is made over the broker's PLAINTEXT listener (harness/scenarios.py); kafkatxn then reads it
through SASL_SSL or mTLS, so each check compares what came through the secure listener with what the
scenario knows it wrote.
"""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from confluent_kafka import Consumer, KafkaException, TopicPartition

from harness.scenarios import InspectScenario, inspect_scenario, run_transaction
from harness.security import SecureKafka

TIMEOUT = "20s"
CLIENT_TIMEOUT_S = 30

# Every command of the CLI that talks to a cluster. `audit` runs Spark; `exporter` serves until stopped.
COMMANDS = (
    "cluster",
    "producers",
    "transactions list",
    "transactions describe",
    "lso",
    "lso --groups",
    "hanging",
    "abort",
    "fence",
    "check",
    "exporter",
    "audit",
)
QUICK_COMMANDS = tuple(c for c in COMMANDS if c not in ("exporter", "audit"))
# `audit` needs PySpark (the test extra has it); without it the rest still runs.
HAVE_PYSPARK = importlib.util.find_spec("pyspark") is not None


@dataclass
class Traffic:
    secure: SecureKafka
    scenario: InspectScenario
    group: str  # committed at the open transaction's first offset on partition 2: blocked behind it
    fence_target: str  # a known transactional id, fenced for real by every `fence` run

    @property
    def topic(self) -> str:
        return self.scenario.topic

    def close(self) -> None:
        self.scenario.close()


def make_traffic(secure: SecureKafka) -> Traffic:
    plain = secure.plaintext_bootstrap
    scenario = inspect_scenario(plain, prefix="secure")
    group = f"{scenario.topic}-group"
    blocked_at = scenario.open.start_offset(next(tp for tp in scenario.open.partitions if tp.partition == 2))
    _commit(plain, group, TopicPartition(scenario.topic, 2, blocked_at))
    fence_target = f"{scenario.topic}-fence-target"
    run_transaction(plain, scenario.topic, [0], "committed", fence_target)
    return Traffic(secure, scenario, group, fence_target)


def _commit(bootstrap: str, group: str, offset: TopicPartition) -> None:
    """Commit like a read_committed application would (assign, commit); the group then lists as Empty."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while True:
            try:
                consumer.commit(offsets=[offset], asynchronous=False)
                return
            except KafkaException:
                # NOT_COORDINATOR while a new broker loads its offsets topic: librdkafka does not retry it.
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        consumer.close()


@dataclass
class Run:
    command: str
    argv: list[str]
    code: int
    stdout: str
    stderr: str
    seconds: float
    extra: str = ""  # the exporter's /metrics body

    def output(self) -> str:
        return self.stdout + self.stderr + self.extra

    def describe(self) -> str:
        return (
            f"`kafkatxn {' '.join(self.argv)}` exit {self.code} after {self.seconds:.1f}s\n"
            f"stdout: {self.stdout[:1500]!r}\nstderr: {self.stderr[-1500:]!r}"
        )


def command_argv(command: str, traffic: Traffic, workdir: Path) -> list[str]:
    """The arguments after the connection options for ``command`` (cheap invocations on the scenario)."""
    audit_log = str(workdir / "audit.jsonl")
    return {
        "cluster": ["cluster"],
        "producers": ["producers", "-t", traffic.topic],
        "transactions list": ["transactions", "list"],
        "transactions describe": ["transactions", "describe", traffic.scenario.open.transactional_id],
        # --critical-age 1h: the exit code must not depend on how long the session has been running.
        "lso": ["lso", "-t", traffic.topic, "--critical-age", "1h"],
        "lso --groups": ["lso", "--groups", traffic.group, "-t", traffic.topic, "--critical-age", "1h"],
        "hanging": ["hanging"],
        # Nothing hangs on this broker: the real (not --dry-run) path ends in "nothing to abort".
        "abort": ["abort", "--all-hanging", "--yes", "--audit-log", audit_log],
        "fence": ["fence", traffic.fence_target, "--yes", "--audit-log", audit_log],
        "check": ["check", "--txn-age-warn", "1h", "--txn-age-crit", "2h", "--textfile", str(workdir / "kafkatxn.prom")],
        "exporter": ["exporter", "--listen", "127.0.0.1:0", "--scrape-timeout", "15s"],
        "audit": ["audit", "--master", "local[1]", "--report", str(workdir / "audit-report")],
    }[command]


def connection_args(bootstrap: str, properties_file: Path, *extra: str) -> list[str]:
    return ["-b", bootstrap, "-c", str(properties_file), "--timeout", TIMEOUT, "-o", "json", *extra]


def run_kafkatxn(command: str, argv: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None,
                 timeout: float = 90) -> Run:
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "kafkatxn", *argv], capture_output=True, text=True, timeout=timeout,
        env={**os.environ, **(env or {})}, cwd=cwd, stdin=subprocess.DEVNULL,
    )
    return Run(command, argv, proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started)


def run_exporter(argv: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None) -> Run:
    """Start the exporter, scrape /metrics once, stop it with SIGTERM."""
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkatxn", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **(env or {})}, cwd=cwd, stdin=subprocess.DEVNULL,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def drain() -> None:
        for line in proc.stderr:  # type: ignore[union-attr]
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    stderr: list[str] = []
    body = ""
    try:
        deadline = time.monotonic() + 30
        url = None
        while url is None and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=0.2)
            except queue.Empty:
                continue
            if line is None:
                break
            stderr.append(line)
            if "serving http://" in line:
                url = line.split("serving ", 1)[1].strip()
        if url is not None:
            try:
                body = urllib.request.urlopen(url, timeout=30).read().decode()
            except urllib.error.HTTPError as refused:  # a failed scrape is this run's answer, not the test's crash
                body = f"HTTP {refused.code}: {refused.read().decode(errors='replace')[:1500]}"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        reader.join(5)
        stdout = proc.stdout.read() if proc.stdout else ""  # type: ignore[union-attr]
        while True:
            try:
                line = lines.get_nowait()
            except queue.Empty:
                break
            if line is not None:
                stderr.append(line)
    return Run("exporter", argv, code, stdout, "".join(stderr), time.monotonic() - started, extra=body)


def run_command(command: str, traffic: Traffic, bootstrap: str, properties_file: Path, workdir: Path,
                *extra: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> Run:
    workdir.mkdir(parents=True, exist_ok=True)
    argv = command_argv(command, traffic, workdir) + connection_args(bootstrap, properties_file, *extra)
    if command == "exporter":
        return run_exporter(argv, env=env, cwd=cwd)
    return run_kafkatxn(command, argv, env=env, cwd=cwd, timeout=180 if command == "audit" else 90)


# -- what each command must answer ---------------------------------------------------------------


def _json(run: Run):
    return json.loads(run.stdout)


def _check_cluster(run: Run, traffic: Traffic, bootstrap: str) -> None:
    doc = _json(run)
    assert run.code == 0
    assert doc["cluster_id"] == traffic.secure.cluster.cluster_id  # type: ignore[attr-defined]
    # Brokers are listed with the port of the listener the client came in on.
    assert [b["port"] for b in doc["brokers"]] == [int(bootstrap.rsplit(":", 1)[1])]


def _check_producers(run: Run, traffic: Traffic, bootstrap: str) -> None:
    rows = _json(run)
    assert run.code == 0
    open_rows = {r["partition"] for r in rows if r["transactional_id"] == traffic.scenario.open.transactional_id}
    assert open_rows == {2, 3}, rows
    assert any(r["producer_id"] == traffic.scenario.idempotent.producer_id for r in rows)


def _check_transactions_list(run: Run, traffic: Traffic, bootstrap: str) -> None:
    rows = {r["transactional_id"]: r for r in _json(run)}
    assert run.code == 0
    assert rows[traffic.scenario.open.transactional_id]["state"] == "Ongoing"
    assert traffic.scenario.committed.transactional_id in rows


def _check_transactions_describe(run: Run, traffic: Traffic, bootstrap: str) -> None:
    (row,) = _json(run)
    assert run.code == 0
    assert (row["state"], row["producer_id"]) == ("Ongoing", traffic.scenario.open.producer_id)


def _check_lso(run: Run, traffic: Traffic, bootstrap: str) -> None:
    rows = _json(run)
    assert run.code == 1  # LSO lag, pinned by a transaction younger than --critical-age
    assert {(r["partition"], r["transactional_id"], r["lag_messages"]) for r in rows} == {
        (2, traffic.scenario.open.transactional_id, 2), (3, traffic.scenario.open.transactional_id, 2)
    }


def _check_lso_groups(run: Run, traffic: Traffic, bootstrap: str) -> None:
    rows = _json(run)
    # The group waits behind the open transaction, in flight within its timeout: quiet (exit 0), and named.
    assert run.code == 0
    held = [r for r in rows if r["partition"] == 2]
    assert held and held[0]["group"] == traffic.group, rows
    assert (held[0]["verdict"], held[0]["txn_verdict"]) == ("waiting", "in_flight"), held
    assert held[0]["transactional_id"] == traffic.scenario.open.transactional_id, held


def _check_hanging(run: Run, traffic: Traffic, bootstrap: str) -> None:
    doc = _json(run)
    assert run.code == 0
    assert doc["hanging_count"] == 0 and doc["open_transactions"] >= 1, doc


def _check_abort(run: Run, traffic: Traffic, bootstrap: str) -> None:
    assert run.code == 0
    assert _json(run) == []  # nothing hangs: nothing to abort


def _check_fence(run: Run, traffic: Traffic, bootstrap: str) -> None:
    (row,) = _json(run)
    assert run.code == 0
    assert row["transactional_id"] == traffic.fence_target
    assert row["producer_epoch_after"] is not None and row["producer_epoch_before"] is not None, row
    assert (row["producer_id_after"], row["producer_epoch_after"]) > (row["producer_id_before"], row["producer_epoch_before"]), row


def _check_check(run: Run, traffic: Traffic, bootstrap: str) -> None:
    doc = _json(run)
    assert run.code == 0
    assert (doc["status"], doc["up"], doc["missing_parts"]) == ("OK", True, 0), doc
    assert doc["open_transactions"] >= 1


def _check_exporter(run: Run, traffic: Traffic, bootstrap: str) -> None:
    assert run.code == 0
    metrics = dict(
        line.rsplit(" ", 1) for line in run.extra.splitlines() if line and not line.startswith("#")
    )
    assert metrics.get("kafkatxn_up") == "1.0", run.extra[:2000]
    lag = f'kafkatxn_partition_lso_lag_messages{{partition="2",topic="{traffic.topic}"}}'
    assert float(metrics.get(lag, "nan")) == 2.0, [k for k in metrics if "lso_lag" in k][:20]


def _check_audit(run: Run, traffic: Traffic, bootstrap: str) -> None:
    doc = _json(run)
    assert run.code in (0, 1, 2), run.code  # findings depend on the traffic; 3 would mean it could not read
    assert doc["sources"] == [f"live:{bootstrap}"]
    assert doc["records"] > 0 and doc["transactional_ids"] >= 3, doc


CHECKS: dict[str, Callable[[Run, Traffic, str], None]] = {
    "cluster": _check_cluster,
    "producers": _check_producers,
    "transactions list": _check_transactions_list,
    "transactions describe": _check_transactions_describe,
    "lso": _check_lso,
    "lso --groups": _check_lso_groups,
    "hanging": _check_hanging,
    "abort": _check_abort,
    "fence": _check_fence,
    "check": _check_check,
    "exporter": _check_exporter,
    "audit": _check_audit,
}


def problem(run: Run, traffic: Traffic, bootstrap: str) -> str | None:
    """None when ``run`` gave the answer the scenario calls for, else what went wrong."""
    try:
        CHECKS[run.command](run, traffic, bootstrap)
    except Exception as exc:  # noqa: BLE001 - reported with the run
        return f"{run.command}: {type(exc).__name__}: {exc}\n{run.describe()}"
    return None
