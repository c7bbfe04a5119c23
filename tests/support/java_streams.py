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
from tests.support.java_traffic import compile_java, end_by_stdin, read_lines

SOURCE = Path(__file__).resolve().parent / "java" / "StreamsEos.java"


def streams_libs(cluster: KafkaCluster) -> Path:
    """kafka-streams and its runtime dependencies at the cluster's Kafka version (fetched once)."""
    version = next(cluster.libs_dir.glob("kafka-clients-*.jar")).stem.removeprefix("kafka-clients-")
    return ensure_artifact_jars("org.apache.kafka", "kafka-streams", version)


class StreamsApp:
    """The application ``application_id`` copying ``source`` to ``sink``; :meth:`wait_for` its state
    ("RUNNING"). A context manager: closing its standard input closes it."""

    def __init__(self, cluster: KafkaCluster, application_id: str, source: str, sink: str):
        libs = streams_libs(cluster)
        classes = compile_java(SOURCE, f"{libs}/*", cluster.workdir / "streams-eos-classes", "the Kafka Streams application")
        self._state_dir = tempfile.mkdtemp(prefix="streams-eos-", dir=cluster.workdir)
        self._process = subprocess.Popen(
            [_java(), *TOOL_JVM_OPTIONS, "-cp", f"{classes}:{libs}/*", "StreamsEos",
             cluster.bootstrap_servers, application_id, source, sink, self._state_dir],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=read_lines, args=(self._process.stdout, self._lines.put), daemon=True).start()
        threading.Thread(target=read_lines, args=(self._process.stderr, self.stderr.append), daemon=True).start()

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
        end_by_stdin(self._process, 45)
        shutil.rmtree(self._state_dir, ignore_errors=True)

    def __enter__(self) -> "StreamsApp":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
