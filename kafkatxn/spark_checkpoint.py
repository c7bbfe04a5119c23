"""A Structured Streaming checkpoint, read as Spark writes it: where a query stands on Kafka.

Spark's Kafka source commits nothing to Kafka (SPARK-27549): a query's position is in its
checkpoint. Pure: every function here takes a file's text and returns what it says, or raises
:class:`CheckpointError` with the reason in words. Reading the files is ``spark_readers``'.

The files (Spark 3.x and 4.x):

- ``metadata``: ``{"id":"<query id>"}`` (one JSON line).
- ``offsets/<batch id>`` (``OffsetSeqLog``): a version line, ``v1`` or ``v2``; a metadata line
  (``OffsetSeqMetadata`` JSON, possibly empty); then per source its end offset for the batch: in v1
  one line per source in the query's source order, in v2 (Spark 4.3, sources named with source
  evolution on; 4.2 writes v1 for them) ``<source name>:<offset>``; ``-`` is a source
  without an offset. A Kafka source's offset (``KafkaSourceOffset``) is
  ``{"topic":{"0":23,"1":-1}}``, whichever of subscribe, subscribePattern and assign chose the topics.
- ``commits/<batch id>`` (``CommitLog``): ``v1`` or ``v2`` (state checkpoint format 2), then a JSON line.
- ``sources/<n>/0`` (``sources/<name>/0`` for a named source, Spark 4.2+): the Kafka source's initial
  offsets, a zero byte (Spark 2.1 compatibility), ``v1`` and the same JSON: where a query that has
  committed no batch starts. A file source keeps its log of files there (``v1``, a JSON line per file).

A batch is planned when its offsets file is written and done when its commit file is: the newest
commit's offsets are where the query stands (the next batch reads from there); a newer offsets file is
the batch in flight.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from kafkatxn.model import TopicPartition

OFFSET_LOG_VERSIONS = (1, 2)  # OffsetSeqLog: v1 positional sources, v2 named sources (Spark 4.3)
COMMIT_LOG_VERSIONS = (1, 2)  # CommitLog: v2 with the state checkpoint format 2 (Spark 4.0)
NO_OFFSET = "-"  # OffsetSeqLog.SERIALIZED_VOID_OFFSET
_VERSION = re.compile(r"v(\d+)")
_BATCH_FILE = re.compile(r"\d+")


class CheckpointError(ValueError):
    """A checkpoint file that cannot be read as Spark writes it; the message says why, in words."""


@dataclass(frozen=True)
class OffsetLogEntry:
    """One ``offsets/<batch id>`` file."""

    version: int
    metadata: dict[str, Any]
    sources: tuple[tuple[str, Any], ...]  # (source id, its offset's JSON value or None), in file order

    @property
    def timestamp_ms(self) -> int | None:
        value = self.metadata.get("batchTimestampMs")
        return value if isinstance(value, int) else None


@dataclass(frozen=True)
class KafkaPosition:
    """The Kafka sources' offsets in one file: per partition the next offset to read."""

    offsets: dict[TopicPartition, int] = field(default_factory=dict)
    sources: int = 0  # Kafka sources among the query's sources
    other_sources: int = 0  # sources that are not Kafka (files, rate, Delta, ...): not read here


def batch_ids(names: list[str]) -> list[int]:
    """The batch ids among a log directory's file names (Spark's temporary ``.N.<uuid>.tmp`` and
    checksum ``.N.crc`` files are not batches), in order."""
    return sorted(int(n) for n in names if _BATCH_FILE.fullmatch(n))


def _version(line: str, known: tuple[int, ...], what: str) -> int:
    m = _VERSION.fullmatch(line.strip())
    if m is None:
        raise CheckpointError(f"its {what} starts with {line.strip()[:40]!r}, not a version line (v1, v2)")
    version = int(m.group(1))
    if version not in known:
        raise CheckpointError(f"its {what} is version v{version}, newer than the versions read here "
                              f"({', '.join(f'v{v}' for v in known)}): written by a newer Spark")
    return version


def _json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise CheckpointError(f"its {what} is not complete JSON (truncated, or being written)") from None


def _lines(text: str, what: str) -> list[str]:
    if not text.strip():
        raise CheckpointError(f"its {what} is empty (being written, or truncated)")
    return text.split("\n")


def parse_offset_log(text: str) -> OffsetLogEntry:
    """An ``offsets/<batch id>`` file."""
    lines = _lines(text, "offset file")
    version = _version(lines[0], OFFSET_LOG_VERSIONS, "offset file")
    if len(lines) < 2:
        raise CheckpointError("its offset file ends after the version line (truncated, or being written)")
    meta_line = lines[1].strip()
    metadata = _json(meta_line, "offset file's metadata") if meta_line else {}
    if not isinstance(metadata, dict):
        raise CheckpointError("its offset file's metadata is not a JSON object")
    sources: list[tuple[str, Any]] = []
    for i, line in enumerate(lines[2:]):
        if version == 2:
            source_id, colon, line = line.partition(":")
            if not colon:
                raise CheckpointError(f"its offset file's line {i + 3} is not <source id>:<offset> (truncated?)")
        else:
            source_id = str(i)
        line = line.strip()
        sources.append((source_id, None if line == NO_OFFSET else _json(line, f"offset file's line {i + 3}")))
    if not sources:
        raise CheckpointError("its offset file names no source's offset (truncated, or being written)")
    return OffsetLogEntry(version, metadata, tuple(sources))


def parse_commit_log(text: str) -> int:
    """A ``commits/<batch id>`` file: its version (its JSON, a watermark and state ids, says nothing of Kafka)."""
    lines = _lines(text, "commit file")
    version = _version(lines[0], COMMIT_LOG_VERSIONS, "commit file")
    if len(lines) > 1 and lines[1].strip():
        _json(lines[1].strip(), "commit file's metadata")
    return version


def parse_metadata(text: str) -> str:
    """The ``metadata`` file: the query's id."""
    value = _json(text.strip() or "null", "metadata file")
    if not isinstance(value, dict) or not isinstance(value.get("id"), str):
        raise CheckpointError("its metadata file holds no query id")
    return value["id"]


def is_kafka_offset(value: Any) -> bool:
    """A ``KafkaSourceOffset``'s JSON: topic -> partition number (a string) -> offset."""
    return isinstance(value, dict) and all(
        isinstance(t, str) and isinstance(ps, dict)
        and all(isinstance(p, str) and p.isdigit() and isinstance(o, int) and not isinstance(o, bool) for p, o in ps.items())
        for t, ps in value.items()
    )


def kafka_offsets(value: Any) -> dict[TopicPartition, int]:
    """A Kafka source offset as partition -> offset (negative: earliest/latest, not yet resolved)."""
    return {TopicPartition(t, int(p)): o for t, ps in value.items() for p, o in ps.items()}


def kafka_position(entry: OffsetLogEntry) -> KafkaPosition:
    """The Kafka sources' end offsets of a batch (a topic read by two sources: the lower offset, the
    one both have passed). A Kafka source without an offset yet counts as one, with no partitions."""
    offsets: dict[TopicPartition, int] = {}
    kafka = other = 0
    for _source_id, value in entry.sources:
        if value is None or is_kafka_offset(value):
            # An empty source (``-``) is counted with the Kafka ones only when it can be nothing else:
            # a query whose only sources are Kafka. It has no partition to show either way.
            kafka += value is not None
            for tp, off in (kafka_offsets(value) if value is not None else {}).items():
                offsets[tp] = min(off, offsets[tp]) if tp in offsets else off
        else:
            other += 1
    return KafkaPosition(offsets, kafka, other)


def parse_initial_offsets(text: str) -> dict[TopicPartition, int] | None:
    """A ``sources/<n>/0`` file: a Kafka source's initial offsets (one JSON line), or None when the source
    is not Kafka (a file source keeps its log here: a JSON line per file it read in batch 0)."""
    text = text.lstrip("\x00")
    lines = _lines(text, "initial offsets file")
    _version(lines[0], (1,), "initial offsets file")
    body = [line.strip() for line in lines[1:] if line.strip()]
    if not body:
        raise CheckpointError("its initial offsets file ends after the version line (truncated, or being written)")
    if len(body) > 1:
        return None
    value = _json(body[0], "initial offsets file")
    return kafka_offsets(value) if is_kafka_offset(value) else None
