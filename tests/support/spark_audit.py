"""What the Spark audit's tests and its benchmark share: a broker whose transaction log holds only
one module's traffic, a local SparkSession for a test module, and a standalone Spark cluster (master
and workers on loopback) to spark-submit the audit to."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from harness import KafkaCluster
from kafkatxn.audit.job import build_session, package_zip

REPO = Path(__file__).resolve().parents[2]


@contextmanager
def dedicated_broker(workroot: Path, name: str) -> Iterator[KafkaCluster]:
    """A broker of its own (3 transaction-log partitions), so the log holds only the module's traffic."""
    cluster = KafkaCluster(
        workroot / f"{name}-{uuid.uuid4().hex[:6]}", n_brokers=1, name=name,
        broker_config={"transaction.state.log.num.partitions": "3"},
    )
    cluster.start(timeout=120)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def spark():
    session, created = build_session("local[2]", conf={"spark.sql.shuffle.partitions": "4"})
    yield session
    if created:
        session.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _wait_for_port(port: int, proc: subprocess.Popen, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not listen on {port} within {timeout}s")


class StandaloneCluster:
    """A Spark master and ``workers`` workers (1 core, 1 GiB each) started with spark-class on loopback."""

    def __init__(self, workdir: Path, workers: int = 1):
        self.workdir = workdir
        self.port = _free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen] = []
        self.n_workers = workers

    def env(self) -> dict:
        home = _spark_home()
        return {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
                "SPARK_WORKER_DIR": str(self.workdir / "work"), "SPARK_LOG_DIR": str(self.workdir / "logs")}

    def _spawn(self, *args: str, log: str) -> subprocess.Popen:
        spark_class = _spark_home() / "bin" / "spark-class"
        out = open(self.workdir / log, "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen([str(spark_class), *args], stdout=out, stderr=subprocess.STDOUT, env=self.env(), start_new_session=True)
        self.procs.append(proc)
        return proc

    def start(self) -> "StandaloneCluster":
        self.workdir.mkdir(parents=True, exist_ok=True)
        master = self._spawn("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.port),
                             "--webui-port", "0", log="master.log")
        _wait_for_port(self.port, master, "spark master")
        for i in range(self.n_workers):
            self._spawn("org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1", "--cores", "1",
                        "--memory", "1g", "--webui-port", "0", "--work-dir", str(self.workdir / f"work{i}"), log=f"worker{i}.log")
        return self

    def submit(self, *args: str, timeout: float = 240, conf: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        submit = _spark_home() / "bin" / "spark-submit"
        confs = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4", "spark.pyspark.python": sys.executable,
                 "spark.pyspark.driver.python": sys.executable, **(conf or {})}
        cmd = [str(submit), "--master", self.url, *(x for k, v in confs.items() for x in ("--conf", f"{k}={v}")),
               "--py-files", package_zip(self.workdir), str(REPO / "kafkatxn" / "cli" / "spark_submit.py"), *args]
        return subprocess.run(cmd, capture_output=True, text=True, env=self.env(), timeout=timeout)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
