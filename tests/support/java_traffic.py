"""Transactional traffic from Kafka's own Java client (the kafka-clients jar the harness fetched).

``tests/support/java/TxnTraffic.java`` is compiled once per jar directory with ``javac`` (JDK 17+) and
driven by a script of lines (see the Java file): ``init NAME ID``, ``txn NAME``, ``abort NAME``,
``open NAME``, ``close NAME``, ``crash NAME``, ``sleep MS``.
"""

from __future__ import annotations

import shutil
import subprocess
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


def run_script(cluster: KafkaCluster, topic: str, lines: list[str], timeout: float = 300) -> str:
    """Run the script with the Java client; returns its stdout, raises with its output on failure."""
    classes = compiled(cluster)
    libs = cluster.libs_dir
    command = [
        _java(), *TOOL_JVM_OPTIONS, _logging_option(libs, cluster._tools_logging_config(libs)),
        "-cp", f"{classes}:{libs}/*", "TxnTraffic", cluster.bootstrap_servers, topic,
    ]
    done = subprocess.run(command, input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"TxnTraffic failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    return done.stdout
