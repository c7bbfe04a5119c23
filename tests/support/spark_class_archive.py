"""Class data sharing for the suite's Spark drivers: Spark's classes mapped from a dynamic CDS archive.

A test-sized Spark job spends most of its CPU loading, parsing and verifying Spark's classes (a small
local job: about 18 CPU-seconds with the suite's JVM options, 11 with an archive, in a measurement),
and the suite starts dozens of drivers (audits, the exactly-once job, its crash test's restarts).
The xdist controller writes the archive once, in the background, by running a small job with
``-XX:ArchiveClassesAtExit`` (``python -m tests.support.spark_class_archive PATH``); it is moved into
place only when complete. Every driver's options name it from the start: a JVM started before it
exists runs without it (a missing archive is silently ignored under ``-Xshare:auto``), one whose
class path does not fit ignores it; the CDS log is off so neither says so on a command's stderr.
The archive's name carries the Java binary's and pyspark's identity.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness.class_archive import java_major
from harness.jars import cache_root

# Quiet: a driver run by a test must not print that its archive was missing or did not fit.
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
_LOCK_STALE_S = 600


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    candidate = Path(home, "bin", "java") if home else None
    return str(candidate) if candidate is not None and candidate.exists() else shutil.which("java")


def archive_path() -> Path | None:
    """Where the archive for this Java and this pyspark is (or will be); None where the Java is older
    than 17 or there is no pyspark."""
    import importlib.util

    java = _java()
    spec = importlib.util.find_spec("pyspark")
    if java is None or spec is None or spec.origin is None or (java_major(java) or 0) < 17:
        return None
    real = Path(java).resolve()
    jars = Path(spec.origin).parent / "jars"
    try:
        stat = real.stat()
        listing = sorted(p.name for p in jars.iterdir())
    except OSError:
        return None
    identity = hashlib.sha256(f"{real}:{stat.st_size}:{stat.st_mtime_ns}:{listing}".encode()).hexdigest()[:16]
    return cache_root() / "spark-class-archives" / f"spark-driver-{identity}.jsa"


def driver_options(archive: Path | None) -> str:
    return f"-XX:SharedArchiveFile={archive} {_QUIET}" if archive is not None else ""


def start_writing(archive: Path | None, base_options: str) -> subprocess.Popen | None:
    """Start writing ``archive`` in the background unless it exists or another process is writing it."""
    if archive is None or archive.exists():
        return None
    archive.parent.mkdir(parents=True, exist_ok=True)
    lock = archive.with_name(archive.name + ".lock")
    try:
        if lock.stat().st_mtime < time.time() - _LOCK_STALE_S:
            lock.unlink()
    except OSError:
        pass
    try:
        os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return None
    env = {**os.environ, "SPARK_SUBMIT_OPTS": base_options}
    return subprocess.Popen([sys.executable, "-m", "tests.support.spark_class_archive", str(archive)], env=env,
                            cwd=Path(__file__).resolve().parents[2], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def stop_writing(process: subprocess.Popen | None, archive: Path | None) -> None:
    """At the end of the run: a writer still running is stopped (its archive is not kept)."""
    if process is None or archive is None:
        return
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)  # its driver JVM too (a session of its own)
        except ProcessLookupError:
            pass
        process.wait()
    archive.with_name(archive.name + ".lock").unlink(missing_ok=True)


def _write(archive: Path) -> int:
    """Run a small job with ``-XX:ArchiveClassesAtExit`` into a file of its own; move it into place
    once the driver has exited cleanly."""
    temporary = archive.with_name(f"{archive.name}.{os.getpid()}.tmp")
    os.environ["SPARK_SUBMIT_OPTS"] = f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} -XX:ArchiveClassesAtExit={temporary} {_QUIET}"
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    try:
        spark = SparkSession.builder.master("local[2]").appName("class-archive").config("spark.ui.enabled", "false").getOrCreate()
        frame = spark.createDataFrame([(i % 7, f"id-{i}") for i in range(2000)], "k int, v string")
        frame.groupBy("k").count().orderBy("k").collect()
        driver = SparkContext._gateway.proc  # the driver JVM: it writes the archive as it exits
        spark.stop()
        driver.stdin.close()  # pyspark's gateway ends when its Python side closes this pipe
        if driver.wait(timeout=180) == 0 and temporary.exists() and temporary.stat().st_size > 0:
            os.replace(temporary, archive)
            return 0
        return 1
    finally:
        temporary.unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(_write(Path(sys.argv[1])))
