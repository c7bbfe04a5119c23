"""Transactional traffic from Kafka's own Java client (the kafka-clients jar the harness fetched).

``tests/support/java/TxnTraffic.java`` is compiled once per jar directory with ``javac`` (JDK 17+) and
driven by a script of lines (see the Java file): ``timeout MS``, ``init NAME ID``, ``txn NAME [V]``,
``abort NAME [V]``, ``open NAME [V]``, ``commit NAME``, ``close NAME``, ``crash NAME``, ``sleep MS``.
:func:`run_script` runs a whole script; :class:`Session` keeps one JVM for a test that acts on the
cluster between lines (a live producer fenced, a broker restarted under it).
"""

from __future__ import annotations

import queue
import shutil
import subprocess
import threading
from pathlib import Path

from harness.broker import TOOL_JVM_OPTIONS, KafkaCluster, _java, _logging_option

SOURCE = Path(__file__).resolve().parent / "java" / "TxnTraffic.java"


def compiled(cluster: KafkaCluster) -> Path:
    """The directory holding TxnTraffic.class, compiled against the cluster's kafka-clients jar."""
    out = cluster.workdir / "txn-traffic-classes"
    if (out / "TxnTraffic.class").exists():
        return out
    javac = shutil.which("javac")
    if javac is None:
        raise RuntimeError("javac is not on PATH; the Java-client traffic needs a JDK (17+)")
    out.mkdir(parents=True, exist_ok=True)
    jars = sorted(cluster.libs_dir.glob("kafka-clients-*.jar"))
    done = subprocess.run([javac, "-cp", str(jars[0]), "-d", str(out), str(SOURCE)], capture_output=True, text=True, timeout=180)
    if done.returncode != 0:
        raise RuntimeError(f"javac failed:\n{done.stdout}{done.stderr}")
    return out


def _command(cluster: KafkaCluster, topic: str) -> list[str]:
    classes = compiled(cluster)
    libs = cluster.libs_dir
    return [
        _java(), *TOOL_JVM_OPTIONS, _logging_option(libs, cluster._tools_logging_config(libs)),
        "-cp", f"{classes}:{libs}/*", "TxnTraffic", cluster.bootstrap_servers, topic,
    ]


def run_script(cluster: KafkaCluster, topic: str, lines: list[str], timeout: float = 300) -> str:
    """Run the script with the Java client; returns its stdout, raises with its output on failure."""
    done = subprocess.run(_command(cluster, topic), input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"TxnTraffic failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    return done.stdout


class Session:
    """One TxnTraffic JVM taking lines one at a time: :meth:`send` returns its answer ("ok LINE", or
    "fenced NAME" for a fenced ``commit``). Used as a context manager; closing ends the JVM."""

    def __init__(self, cluster: KafkaCluster, topic: str):
        self._process = subprocess.Popen(_command(cluster, topic), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True)
        self._answers: queue.Queue[str | None] = queue.Queue()
        self._stderr: list[str] = []
        threading.Thread(target=self._read, args=(self._process.stdout, self._answers.put), daemon=True).start()
        threading.Thread(target=self._read, args=(self._process.stderr, self._keep_stderr), daemon=True).start()

    def _keep_stderr(self, line: str | None) -> None:
        if line is not None:
            self._stderr.append(line)

    @staticmethod
    def _read(stream, put) -> None:
        for line in stream:
            put(line.rstrip("\n"))
        put(None)

    def send(self, line: str, timeout: float = 90) -> str:
        self._process.stdin.write(line + "\n")
        self._process.stdin.flush()
        try:
            answer = self._answers.get(timeout=timeout)
        except queue.Empty:
            answer = None
        if answer is None:
            raise RuntimeError(f"TxnTraffic gave no answer to {line!r}:\n" + "\n".join(self._stderr[-60:]))
        return answer

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.stdin.close()
            try:
                self._process.wait(30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
