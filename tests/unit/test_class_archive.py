"""harness/class_archive.py: the brokers' class archive is used only once a JVM wrote it whole."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.class_archive import ClassArchives, java_major

pytestmark = pytest.mark.skipif(
    (java_major("java") or 0) < 17 or shutil.which("jcmd") is None,
    reason="needs Java 17 or newer with jcmd (scripts/test installs openjdk-17-jdk-headless)",
)


class _Exited:
    """What ClassArchives asks of a JVM's Popen: whether, and how, it ended."""

    def __init__(self, returncode: int | None) -> None:
        self.returncode = returncode
        self.pid = 0

    def poll(self) -> int | None:
        return self.returncode


def _temporary(options: list[str]) -> Path:
    (option,) = options
    assert option.startswith("-XX:ArchiveClassesAtExit=")
    return Path(option.split("=", 1)[1])


def test_the_first_jvm_writes_the_archive_at_exit_and_the_next_ones_map_it_once_it_exited_cleanly(tmp_path):
    archives, libs = ClassArchives(), tmp_path / "kafka-x" / "libs"
    first, writer = archives.options(libs, "java", "tool", at_exit=True)
    jvm = _Exited(None)
    archives.adopt(writer, jvm)
    _temporary(first).write_bytes(b"archive")
    assert archives.options(libs, "java", "tool", at_exit=True) == ([], None)  # still running: no second writer
    jvm.returncode = 143  # SIGTERM, shutdown run: the archive is whole
    (mapped,), _ = archives.options(libs, "java", "tool", at_exit=True)
    assert mapped.startswith("-XX:SharedArchiveFile=")
    assert Path(mapped.split("=", 1)[1]).read_bytes() == b"archive"
    assert not _temporary(first).exists()


def test_an_archive_whose_jvm_was_killed_is_never_used_nor_written_again(tmp_path):
    archives, libs = ClassArchives(), tmp_path / "kafka-x" / "libs"
    first, writer = archives.options(libs, "java", "tool", at_exit=True)
    archives.adopt(writer, _Exited(-9))
    _temporary(first).write_bytes(b"half an arch")
    assert archives.options(libs, "java", "tool", at_exit=True) == ([], None)
    assert list((tmp_path / "kafka-x" / "class-archives").iterdir()) == []


def test_a_broker_records_what_it_loads_and_one_that_ended_before_its_dump_leaves_nothing(tmp_path):
    archives, libs = ClassArchives(), tmp_path / "kafka-x" / "libs"
    options, writer = archives.options(libs, "java", "broker")
    assert options == ["-XX:+RecordDynamicDumpInfo"]  # jcmd VM.cds dynamic_dump writes it once its cluster serves
    archives.adopt(writer, _Exited(-9))
    archives.dump_running()
    assert archives.options(libs, "java", "broker") == ([], None)
    assert list((tmp_path / "kafka-x" / "class-archives").iterdir()) == []


def test_no_java_no_options(tmp_path):
    assert ClassArchives().options(tmp_path / "libs", "no-such-java-binary", "broker") == ([], None)
