"""Checkpoints real Spark versions wrote (tests/unit/vectors/spark_checkpoints, captured by its
capture.py with a Kafka source reading read_committed) read by the reader ``lso --groups
--spark-checkpoint`` uses, into the positions the broker reported when they were written; and every
PySpark line the [spark] extra allows has them."""

from __future__ import annotations

import json
import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from kafkatxn import spark_checkpoint as sc, spark_readers

VECTORS = Path(__file__).resolve().parent / "vectors" / "spark_checkpoints"
REPO = Path(__file__).resolve().parents[2]
CHECKPOINTS = sorted(p.parent for p in VECTORS.glob("*/*/expected.json"))


def _as_dict(offsets) -> dict[str, int]:
    return {f"{tp.topic}:{tp.partition}": off for tp, off in offsets.items()}


@pytest.mark.parametrize("checkpoint", CHECKPOINTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_real_checkpoint_reads_into_the_positions_written(checkpoint: Path):
    expected = json.loads((checkpoint / "expected.json").read_text())
    query, missing = spark_readers.read_checkpoint(f"q={checkpoint}")
    assert missing == []
    assert {
        "spark_version": checkpoint.parent.name,
        "query_id": query.reader.query_id,
        "committed_batch_id": query.committed_batch_id,
        "position": _as_dict(query.position),
        "in_flight_batch_id": query.in_flight_batch_id,
        "in_flight_end": _as_dict(query.in_flight_end),
        "kafka_sources": query.kafka_sources,
        "other_sources": query.other_sources,
    } == expected
    assert isinstance(query.committed_batch_timestamp_ms, int) or query.committed_batch_id is None
    # Every offsets and commits file of it parses (not only the ones the position is read from).
    for batch in sc.batch_ids([p.name for p in (checkpoint / "offsets").iterdir()]):
        sc.parse_offset_log((checkpoint / "offsets" / str(batch)).read_text())
    commits = checkpoint / "commits"  # empty in a query that committed nothing, and git keeps no empty directory
    for batch in sc.batch_ids([p.name for p in commits.iterdir()] if commits.is_dir() else []):
        sc.parse_commit_log((checkpoint / "commits" / str(batch)).read_text())


def _allowed_lines() -> list[str]:
    """The minor lines the [spark] extra's ``pyspark>=X.Y`` allows: from X.Y up to the newest of 4.3 (the
    newest on PyPI when these were captured) and the PySpark installed here (the [test] extra's), so a
    newer line in use without captured checkpoints fails."""
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["spark"]
    (floor,) = [tuple(map(int, m.groups())) for r in extra if (m := re.fullmatch(r"pyspark>=(\d+)\.(\d+)", r))]
    try:
        installed = tuple(int(x) for x in metadata.version("pyspark").split(".")[:2])
    except metadata.PackageNotFoundError:
        installed = (4, 3)
    newest = max((4, 3), installed)
    assert floor[0] == newest[0], "a new major version: list its lines here"
    return [f"{floor[0]}.{m}" for m in range(floor[1], newest[1] + 1)]


def test_every_pyspark_line_the_spark_extra_allows_has_real_checkpoints():
    captured = {".".join(c.parent.name.split(".")[:2]) for c in CHECKPOINTS}
    lines = _allowed_lines()
    assert lines[:4] == ["4.0", "4.1", "4.2", "4.3"]
    assert [v for v in lines if v not in captured] == []
    shapes = {c.name for c in CHECKPOINTS}
    assert {"subscribe", "subscribe_pattern", "assign", "kafka_and_files", "batch_in_flight", "named_sources"} <= shapes
