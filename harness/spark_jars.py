"""Fetch Spark's Kafka connector (spark-sql-kafka-0-10) for the installed PySpark from Maven Central.

PySpark's wheel carries Spark's own jars but not the Kafka source and sink; the exactly-once
writer's tests and benchmark read a Kafka topic with ``format("kafka")`` and compare the writer with
Spark's built-in Kafka sink, so they need the connector and its runtime dependencies (kafka-clients,
spark-token-provider-kafka, commons-pool2). Resolved once per version into the harness's cache.

The connector of PySpark's own version is taken when Maven Central has it; PyPI can be ahead of
Maven (PySpark 4.3.0 was on PyPI before its connector reached Central), and then the newest
released connector of the same major version not newer than PySpark is taken, and said on stderr.
Jars PySpark already ships (scala-library, hadoop, slf4j, …) are left out, so one copy of each
class is on the classpath.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from .jars import SCALA_VERSION, JarFetchError, _copy_dependencies, _exclusive_lock, cache_root

_COMPLETE_MARKER = "FETCH_COMPLETE"
_ARTIFACT = f"spark-sql-kafka-0-10_{SCALA_VERSION}"
_METADATA_URL = f"https://repo.maven.apache.org/maven2/org/apache/spark/{_ARTIFACT}/maven-metadata.xml"
_JAR_NAME = re.compile(r"^(?P<artifact>.+?)-\d[\w.\-]*\.jar$")


def pyspark_version() -> str:
    import pyspark

    return pyspark.__version__


def _release(version: str) -> tuple[int, ...] | None:
    return tuple(int(x) for x in version.split(".")) if re.fullmatch(r"\d+(\.\d+)*", version) else None


def closest_release(wanted: str, published: list[str]) -> str | None:
    """The newest published release with ``wanted``'s major version and not newer than it (no previews)."""
    target = _release(wanted)
    if target is None:
        return None
    candidates = [r for r in (_release(v) for v in published) if r and r[0] == target[0] and r <= target]
    return ".".join(map(str, max(candidates))) if candidates else None


def _published_versions() -> list[str]:
    with urllib.request.urlopen(_METADATA_URL, timeout=30) as response:  # noqa: S310 - a fixed https URL
        return re.findall(r"<version>([^<]+)</version>", response.read().decode())


def _pyspark_jar_artifacts() -> set[str]:
    import pyspark

    jars = Path(pyspark.__file__).resolve().parent / "jars"
    return {m.group("artifact") for m in (_JAR_NAME.match(p.name) for p in jars.glob("*.jar")) if m}


def ensure_spark_kafka_jars(version: str | None = None) -> list[Path]:
    """The connector's jars for Spark ``version`` (default: the installed PySpark's), fetched if needed."""
    version = version or pyspark_version()
    version_dir = cache_root() / f"spark-sql-kafka-{version}"
    libs_dir = version_dir / "libs"
    if not (version_dir / _COMPLETE_MARKER).exists():
        version_dir.mkdir(parents=True, exist_ok=True)
        with _exclusive_lock(version_dir / ".lock"):
            if not (version_dir / _COMPLETE_MARKER).exists():
                _fetch(version, libs_dir)
                (version_dir / _COMPLETE_MARKER).write_text(f"fetched {time.strftime('%Y-%m-%dT%H:%M:%S')}\n")
    return sorted(libs_dir.glob("*.jar"))


def _fetch(version: str, libs_dir: Path) -> None:
    if shutil.which("mvn") is None:
        raise JarFetchError("mvn is not on PATH; it is needed to fetch Spark's Kafka connector from Maven Central")
    shutil.rmtree(libs_dir, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="kafkatxn-spark-jars-") as scratch:
        staging = Path(scratch) / "libs"
        try:
            _copy_dependencies(Path(scratch) / "exact", [("org.apache.spark", _ARTIFACT, version)], staging)
        except JarFetchError:
            fallback = closest_release(version, _published_versions())
            if fallback is None:
                raise
            print(f"harness: {_ARTIFACT} {version} is not on Maven Central; using {fallback}", file=sys.stderr)
            shutil.rmtree(staging, ignore_errors=True)
            _copy_dependencies(Path(scratch) / "fallback", [("org.apache.spark", _ARTIFACT, fallback)], staging)
        shipped = _pyspark_jar_artifacts()
        for jar in staging.glob("*.jar"):
            match = _JAR_NAME.match(jar.name)
            if match and match.group("artifact") in shipped and not match.group("artifact").startswith("spark-sql-kafka"):
                jar.unlink()
        libs_dir.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(staging), libs_dir)


def spark_jars_conf(version: str | None = None) -> dict[str, str]:
    """``spark.jars`` for a local session that reads and writes Kafka with Spark's connector."""
    return {"spark.jars": ",".join(str(p) for p in ensure_spark_kafka_jars(version))}


if __name__ == "__main__":  # python -m harness.spark_jars: fetch into the cache (scripts/test does)
    started = time.monotonic()
    jars = ensure_spark_kafka_jars()
    print(f"Spark's Kafka connector for PySpark {pyspark_version()}: {len(jars)} jars ({time.monotonic() - started:.1f} s)", file=sys.stderr)
