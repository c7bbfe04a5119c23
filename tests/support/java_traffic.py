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


def compile_java(source: Path, classpath: str, out: Path, needed_by: str) -> Path:
    """``out``, holding ``source`` compiled against ``classpath`` with ``javac`` (once: kept there)."""
    if (out / f"{source.stem}.class").exists():
        return out
    javac = shutil.which("javac")
    if javac is None:
        raise RuntimeError(f"javac is not on PATH; {needed_by} needs a JDK (17+)")
    out.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([javac, "-cp", classpath, "-d", str(out), str(source)], capture_output=True, text=True, timeout=180)
    if done.returncode != 0:
        raise RuntimeError(f"javac failed:\n{done.stdout}{done.stderr}")
    return out


def compiled(cluster: KafkaCluster) -> Path:
    """The directory holding TxnTraffic.class, compiled against the cluster's kafka-clients jar."""
    jars = sorted(cluster.libs_dir.glob("kafka-clients-*.jar"))
    return compile_java(SOURCE, str(jars[0]), cluster.workdir / "txn-traffic-classes", "the Java-client traffic")


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


def read_lines(stream, put) -> None:
    """Each line of a JVM's ``stream`` to ``put``, then None when it ends (a reader thread's work)."""
    for line in stream:
        put(line.rstrip("\n"))
    put(None)


def end_by_stdin(process: subprocess.Popen, timeout: float) -> None:
    """Close the JVM's standard input (its signal to finish) and wait for it; killed after ``timeout``."""
    if process.poll() is None:
        process.stdin.close()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class Session:
    """One TxnTraffic JVM taking lines one at a time: :meth:`send` returns its answer ("ok LINE", or
    "fenced NAME" for a fenced ``commit``). Used as a context manager; closing ends the JVM."""

    def __init__(self, cluster: KafkaCluster, topic: str):
        self._process = subprocess.Popen(_command(cluster, topic), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True)
        self._answers: queue.Queue[str | None] = queue.Queue()
        self._stderr: list[str] = []
        threading.Thread(target=read_lines, args=(self._process.stdout, self._answers.put), daemon=True).start()
        threading.Thread(target=read_lines, args=(self._process.stderr, self._keep_stderr), daemon=True).start()

    def _keep_stderr(self, line: str | None) -> None:
        if line is not None:
            self._stderr.append(line)

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
        end_by_stdin(self._process, 30)

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
