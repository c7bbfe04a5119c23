"""Class data sharing for the brokers' JVMs (and the storage formatter's): Kafka's and Scala's classes
mapped from a dynamic CDS archive.

A broker JVM spends much of its start-up CPU loading, parsing and verifying classes, and the suite
starts brokers by the hundred: 4.5-4.7 CPU-seconds to serve became 2.6-3.2 with an archive in a
measurement. The first broker of a Kafka version that a process launches on this Java records what
it loads (-XX:+RecordDynamicDumpInfo) and, once its cluster serves, writes the archive (jcmd VM.cds
dynamic_dump: a session cluster's broker may live to the end of the run); a formatter writes its own
as it exits (-XX:ArchiveClassesAtExit). The later JVMs map it (-XX:SharedArchiveFile). An archive is
written under a name of its own and moved into place only when complete; one that does not fit
(another Java, another class path) is ignored by the JVM (-Xshare:auto), only its speed-up lost,
which is why its name carries the Java binary's identity.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

# A JVM ending on SIGTERM runs its shutdown (and the archive's writing) and exits with 128 + 15.
_CLEAN_EXITS = (0, 143)


@dataclass
class _Writer:
    archive: Path
    temporary: Path
    java: str
    at_exit: bool
    process: subprocess.Popen | None = None


class ClassArchives:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._writers: list[_Writer] = []
        self._tried: set[Path] = set()

    def options(self, libs_dir: Path, java: str, role: str, at_exit: bool = False) -> tuple[list[str], _Writer | None]:
        """The options for one more JVM of `role` (its main class's) of `libs_dir` on `java`, and the
        writer to give adopt() with its process."""
        archive = _archive_path(libs_dir, java, role)
        if archive is None:
            return [], None
        with self._lock:
            self._settle()
            if archive.exists():
                return [f"-XX:SharedArchiveFile={archive}"], None
            if archive in self._tried:  # being written by this process's first JVM, or that failed: not again
                return [], None
            self._tried.add(archive)
            temporary = archive.with_name(f"{archive.name}.{uuid.uuid4().hex[:8]}.tmp")
            at_exit = at_exit or _jcmd(java) is None
            writer = _Writer(archive, temporary, java, at_exit)
            self._writers.append(writer)
            return [f"-XX:ArchiveClassesAtExit={temporary}" if at_exit else "-XX:+RecordDynamicDumpInfo"], writer

    def adopt(self, writer: _Writer | None, process: subprocess.Popen) -> None:
        if writer is not None:
            writer.process = process

    def dump_running(self) -> None:
        """Write the archives of the running JVMs that record what they load (their cluster serves)."""
        with self._lock:
            for writer in [w for w in self._writers if not w.at_exit and w.process is not None]:
                self._writers.remove(writer)
                jcmd = _jcmd(writer.java)
                if jcmd is None or writer.process.poll() is not None:
                    continue
                try:
                    done = subprocess.run([jcmd, str(writer.process.pid), "VM.cds", "dynamic_dump", str(writer.temporary)],
                                          capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
                except (OSError, subprocess.TimeoutExpired):
                    done = None
                self._keep(writer, done is not None and done.returncode == 0)

    def settle(self) -> None:
        """Move the archives of the JVMs that wrote theirs at exit, cleanly, into place; drop the others'."""
        with self._lock:
            self._settle()

    def _settle(self) -> None:
        for writer in list(self._writers):
            if writer.process is None or writer.process.poll() is None:
                continue
            self._writers.remove(writer)
            self._keep(writer, writer.at_exit and writer.process.returncode in _CLEAN_EXITS)

    @staticmethod
    def _keep(writer: _Writer, complete: bool) -> None:
        if complete and writer.temporary.exists() and writer.temporary.stat().st_size > 0:
            os.replace(writer.temporary, writer.archive)
        else:
            writer.temporary.unlink(missing_ok=True)


def _jcmd(java: str) -> str | None:
    binary = shutil.which(java)
    beside = Path(binary).resolve().parent / "jcmd" if binary else None
    return str(beside) if beside is not None and beside.exists() else shutil.which("jcmd")


def java_major(java: str) -> int | None:
    """The feature release of `java` (17 for 17.0.15), from its home's release file; None if unknown."""
    binary = shutil.which(java)
    if binary is None:
        return None
    try:
        release = (Path(binary).resolve().parent.parent / "release").read_text()
        return int(release.split('JAVA_VERSION="', 1)[1].split(".", 1)[0].split('"', 1)[0])
    except (OSError, IndexError, ValueError):
        return None


def _archive_path(libs_dir: Path, java: str, role: str) -> Path | None:
    """None where the Java is older than 17 (no RecordDynamicDumpInfo, no VM.cds) or unknown."""
    if (java_major(java) or 0) < 17:
        return None
    real = Path(shutil.which(java) or java).resolve()
    stat = real.stat()
    identity = hashlib.sha256(f"{real}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    directory = Path(libs_dir).parent / "class-archives"
    directory.mkdir(parents=True, exist_ok=True)
    for left in directory.glob("*.tmp"):  # of a process that ended before its JVM did (an hour is ample)
        try:
            if left.stat().st_mtime < time.time() - 3600:
                left.unlink()
        except OSError:
            pass
    return directory / f"{role}-{identity}.jsa"
