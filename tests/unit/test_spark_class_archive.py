"""tests/support/spark_class_archive.py: the Spark drivers' class archive is written once, by one
process, and a driver never says on its stderr that the archive was missing or did not fit."""

from __future__ import annotations

import subprocess
import shutil

import pytest

from harness.class_archive import java_major
from tests.support import spark_class_archive

needs_java17 = pytest.mark.skipif((java_major("java") or 0) < 17, reason="needs Java 17 or newer (scripts/test installs it)")


def test_no_archive_no_options():
    assert spark_class_archive.driver_options(None) == ""


def test_an_older_java_gets_no_archive(monkeypatch):
    monkeypatch.setattr(spark_class_archive, "java_major", lambda java: 11)
    assert spark_class_archive.archive_path() is None


def test_an_archive_that_exists_or_is_being_written_is_not_written_again(tmp_path, monkeypatch):
    started: list = []
    monkeypatch.setattr(spark_class_archive.subprocess, "Popen", lambda *a, **k: started.append(a) or "writer")
    archive = tmp_path / "a" / "spark-driver-x.jsa"
    assert spark_class_archive.start_writing(archive, "") == "writer"
    assert spark_class_archive.start_writing(archive, "") is None  # its lock is held
    archive.write_bytes(b"x")
    (tmp_path / "a" / "spark-driver-x.jsa.lock").unlink()
    assert spark_class_archive.start_writing(archive, "") is None  # it exists
    assert len(started) == 1


@needs_java17
@pytest.mark.skipif(shutil.which("javac") is None or shutil.which("jar") is None, reason="needs a JDK: javac and jar (scripts/test installs openjdk-17-jdk-headless)")
def test_a_missing_or_unfitting_archive_is_silent(tmp_path):
    """A driver started before the archive exists, or on another class path, runs without a word
    (without the quiet options, the one that does not fit prints a warning on stdout)."""
    (tmp_path / "Hello.java").write_text("public class Hello { public static void main(String[] a) {} }")
    subprocess.run([shutil.which("javac"), "-d", str(tmp_path / "classes"), str(tmp_path / "Hello.java")], check=True, timeout=120)
    jar = tmp_path / "hello.jar"  # CDS takes no class path directory that has files
    subprocess.run([shutil.which("jar"), "cf", str(jar), "-C", str(tmp_path / "classes"), "."], check=True, timeout=120)
    elsewhere = tmp_path / "elsewhere.jsa"
    subprocess.run([shutil.which("java"), f"-XX:ArchiveClassesAtExit={elsewhere}", "-cp", str(jar), "Hello"],
                   check=True, capture_output=True, timeout=120)
    assert elsewhere.exists()
    for archive in (tmp_path / "missing.jsa", elsewhere):
        run = subprocess.run([shutil.which("java"), "-Xshare:auto", *spark_class_archive.driver_options(archive).split(), "-version"],
                             capture_output=True, text=True, timeout=60)
        assert run.returncode == 0
        assert "cds" not in (run.stdout + run.stderr).lower(), run.stdout + run.stderr
