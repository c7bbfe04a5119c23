"""An exactly-once Kafka Streams application on the streams rebalance protocol (KIP-1071), from Kafka's
own kafka-streams jar: ``tests/support/java/StreamsEos.java``, compiled once per jar directory with
``javac`` against org.apache.kafka:kafka-streams (and its dependencies) fetched from Maven at the
cluster's Kafka version. :class:`StreamsApp` runs it until closed."""

from __future__ import annotations

import queue
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from harness.broker import TOOL_JVM_OPTIONS, KafkaCluster, _java
from harness.jars import ensure_artifact_jars

SOURCE = Path(__file__).resolve().parent / "java" / "StreamsEos.java"


def streams_libs(cluster: KafkaCluster) -> Path:
    """kafka-streams and its runtime dependencies at the cluster's Kafka version (fetched once)."""
    version = next(cluster.libs_dir.glob("kafka-clients-*.jar")).stem.removeprefix("kafka-clients-")
    return ensure_artifact_jars("org.apache.kafka", "kafka-streams", version)


def compiled(cluster: KafkaCluster, libs: Path) -> Path:
    out = cluster.workdir / "streams-eos-classes"
    if (out / "StreamsEos.class").exists():
        return out
    javac = shutil.which("javac")
    if javac is None:
        raise RuntimeError("javac is not on PATH; the Kafka Streams application needs a JDK (17+)")
    out.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([javac, "-cp", f"{libs}/*", "-d", str(out), str(SOURCE)], capture_output=True, text=True, timeout=180)
    if done.returncode != 0:
        raise RuntimeError(f"javac failed:\n{done.stdout}{done.stderr}")
    return out


class StreamsApp:
    """The application ``application_id`` copying ``source`` to ``sink``; :meth:`wait_for` its state
    ("RUNNING"). A context manager: closing its standard input closes it."""

    def __init__(self, cluster: KafkaCluster, application_id: str, source: str, sink: str):
        libs = streams_libs(cluster)
        classes = compiled(cluster, libs)
        self._state_dir = tempfile.mkdtemp(prefix="streams-eos-", dir=cluster.workdir)
        self._process = subprocess.Popen(
            [_java(), *TOOL_JVM_OPTIONS, "-cp", f"{classes}:{libs}/*", "StreamsEos",
             cluster.bootstrap_servers, application_id, source, sink, self._state_dir],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._read, args=(self._process.stdout, self._lines.put), daemon=True).start()
        threading.Thread(target=self._read, args=(self._process.stderr, self.stderr.append), daemon=True).start()

    @staticmethod
    def _read(stream, put) -> None:
        for line in stream:
            put(line.rstrip("\n"))
        put(None)

    def wait_for(self, state: str, timeout: float = 90) -> None:
        while True:
            try:
                line = self._lines.get(timeout=timeout)
            except queue.Empty:
                line = None
            if line is None or line in ("state ERROR", "state PENDING_ERROR"):
                raise RuntimeError(f"the Streams application did not reach {state} ({line}):\n"
                                   + "\n".join(str(s) for s in self.stderr[-60:]))
            if line == f"state {state}":
                return

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.stdin.close()
            try:
                self._process.wait(45)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        shutil.rmtree(self._state_dir, ignore_errors=True)

    def __enter__(self) -> "StreamsApp":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
