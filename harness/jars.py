"""Fetch Apache Kafka's jars from Maven Central into a cache outside the repo.

The broker, its storage tool and Kafka's CLI tools (kafka-tools) all run from
one flat directory of jars, resolved once per version with Maven.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

DEFAULT_KAFKA_VERSION = "4.4.0"
SCALA_VERSION = "2.13"

# Written last, so a directory without it is a fetch that was interrupted.
_COMPLETE_MARKER = "FETCH_COMPLETE"

_POM_TEMPLATE = """\
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kafkatxn.harness</groupId>
  <artifactId>kafka-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
{dependencies}
  </dependencies>
</project>
"""

_DEPENDENCY_TEMPLATE = """\
    <dependency>
      <groupId>{group}</groupId>
      <artifactId>{artifact}</artifactId>
      <version>{version}</version>
    </dependency>"""


class JarFetchError(RuntimeError):
    pass


def default_kafka_version() -> str:
    return os.environ.get("KAFKA_VERSION") or DEFAULT_KAFKA_VERSION


def cache_root() -> Path:
    configured = os.environ.get("KAFKATXN_CACHE")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "kafkatxn"


def ensure_kafka_jars(version: str | None = None) -> Path:
    """Return the directory holding every runtime jar of Kafka `version`, fetching it if needed."""
    version = version or default_kafka_version()
    return _cached_libs(f"kafka-{version}", lambda libs_dir: _fetch(version, libs_dir))


def ensure_artifact_jars(group: str, artifact: str, version: str) -> Path:
    """Return the directory holding one Maven artifact's jars and its runtime dependencies, fetched once
    (e.g. the OIDC provider the OAUTHBEARER tests run)."""

    def fetch(libs_dir: Path) -> None:
        with tempfile.TemporaryDirectory(prefix="kafkatxn-jars-") as scratch:
            staging = Path(scratch) / "libs"
            _copy_dependencies(Path(scratch) / "project", [(group, artifact, version)], staging)
            shutil.move(str(staging), libs_dir)

    return _cached_libs(f"{artifact}-{version}", fetch)


def _cached_libs(name: str, fetch) -> Path:
    version_dir = cache_root() / name
    libs_dir = version_dir / "libs"
    if (version_dir / _COMPLETE_MARKER).exists():
        return libs_dir

    version_dir.mkdir(parents=True, exist_ok=True)
    # Parallel test runs share the cache: only one of them fetches.
    with _exclusive_lock(version_dir / ".lock"):
        if (version_dir / _COMPLETE_MARKER).exists():
            return libs_dir
        shutil.rmtree(libs_dir, ignore_errors=True)
        if shutil.which("mvn") is None:
            raise JarFetchError(f"mvn is not on PATH; it is needed to fetch {name}'s jars from Maven Central")
        fetch(libs_dir)
        (version_dir / _COMPLETE_MARKER).write_text(f"fetched {time.strftime('%Y-%m-%dT%H:%M:%S')}\n")
    return libs_dir


def log4j_flavour(libs_dir: Path) -> str:
    """Which logging backend the broker in `libs_dir` uses: "log4j2" (Kafka 4.x) or "reload4j" (3.x)."""
    if any(libs_dir.glob("reload4j-*.jar")) or any(libs_dir.glob("log4j-1.*.jar")):
        return "reload4j"
    return "log4j2"


def _fetch(version: str, libs_dir: Path) -> None:
    if shutil.which("mvn") is None:
        raise JarFetchError("mvn is not on PATH; it is needed to fetch Kafka's jars from Maven Central")
    with tempfile.TemporaryDirectory(prefix="kafkatxn-jars-") as scratch:
        staging = Path(scratch) / "libs"
        _copy_dependencies(
            Path(scratch) / "kafka",
            [("org.apache.kafka", f"kafka_{SCALA_VERSION}", version), ("org.apache.kafka", "kafka-tools", version)],
            staging,
        )
        _add_slf4j_binding(Path(scratch) / "binding", staging)
        libs_dir.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(staging), libs_dir)


def _add_slf4j_binding(project_dir: Path, staging: Path) -> None:
    """Kafka 4.x ships log4j2 but leaves the slf4j binding to the distribution; without one the
    broker logs nothing. Kafka 3.x already brings slf4j-reload4j, 2.x slf4j-log4j12."""
    bindings = ("slf4j-reload4j-*.jar", "slf4j-log4j12-*.jar", "log4j-slf4j*-impl-*.jar")
    if any(any(staging.glob(binding)) for binding in bindings):
        return
    log4j_core_version = _jar_version(staging, "log4j-core")
    if log4j_core_version is None:
        raise JarFetchError(f"no slf4j binding and no log4j-core in {staging}; cannot route broker logs")
    # slf4j-api 1.7.x pairs with log4j-slf4j-impl; slf4j 2.x would need log4j-slf4j2-impl.
    slf4j_version = _jar_version(staging, "slf4j-api") or "1.7"
    binding = "log4j-slf4j2-impl" if slf4j_version.startswith("2.") else "log4j-slf4j-impl"
    _copy_dependencies(project_dir, [("org.apache.logging.log4j", binding, log4j_core_version)], staging)


def _copy_dependencies(project_dir: Path, artifacts: list[tuple[str, str, str]], output_dir: Path) -> None:
    project_dir.mkdir(parents=True)
    dependencies = "\n".join(
        _DEPENDENCY_TEMPLATE.format(group=group, artifact=artifact, version=version)
        for group, artifact, version in artifacts
    )
    (project_dir / "pom.xml").write_text(_POM_TEMPLATE.format(dependencies=dependencies))
    result = subprocess.run(
        [
            "mvn", "-q", "-B",
            "dependency:copy-dependencies",
            f"-DoutputDirectory={output_dir}",
            "-DincludeScope=runtime",
        ],
        cwd=project_dir,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        wanted = ", ".join(":".join(a) for a in artifacts)
        raise JarFetchError(f"mvn could not fetch {wanted}:\n{result.stdout[-4000:]}{result.stderr[-4000:]}")


def _jar_version(libs_dir: Path, artifact: str) -> str | None:
    pattern = re.compile(rf"^{re.escape(artifact)}-(\d[\w.\-]*)\.jar$")
    for jar in libs_dir.iterdir():
        match = pattern.match(jar.name)
        if match:
            return match.group(1)
    return None


@contextmanager
def _exclusive_lock(path: Path) -> Iterator[None]:
    with open(path, "w") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)
