"""Spark queries as readers: each checkpoint's position, keyed beside the consumer groups.

A Structured Streaming query keeps its Kafka position in its checkpoint, not in a group
(SPARK-27549). :func:`read_checkpoints` reads each checkpoint (``spark_checkpoint`` parses the files)
into a :class:`SparkQuery`; :func:`reader_positions` turns them into the per-reader committed offsets
``facts_lso.take_group_snapshot`` and ``snapshot.group_samples`` decide on, so one definition decides a
query as it decides a group (``group_positions.group_positions``). A checkpoint that cannot be read, is empty or
is being written is a missing part naming its path, never a position.

Local paths (and ``file://``) are read with plain Python. ``hdfs://``, ``s3a://`` (``s3://``),
``gs://`` and ``abfs://`` go through ``pyarrow.fs`` (the ``[spark]`` extra installs it): it reads
every one of them without a JVM (HDFS through libhdfs), which a one-process command and an
exporter scrape need; Spark's Hadoop FileSystem would start a JVM per command.
"""

from __future__ import annotations

import os
import re
import shlex
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Iterable, Sequence

from kafkatxn import spark_checkpoint as sc
from kafkatxn.model import Missing, Part, QueryReader, TopicPartition

if TYPE_CHECKING:  # capability modules are handed the facade; they do not import it
    from kafkatxn.kafka import Cluster

REMOTE_SCHEMES = ("hdfs", "viewfs", "s3a", "s3", "gs", "abfs", "abfss")
NO_POSITION = -1  # as lso.NO_COMMIT: a partition the query reads that it has no offset on yet
_NAMED = re.compile(r"([A-Za-z0-9_.\-]+)=(.+)")


@dataclass(frozen=True)
class SparkQuery:
    """One query's checkpoint: where it stands and what it is reading now."""

    reader: QueryReader
    committed_batch_id: int | None  # the newest batch with a commit entry; None: none yet
    committed_batch_timestamp_ms: int | None  # when that batch was planned (its batchTimestampMs)
    position: dict[TopicPartition, int]  # per partition the next offset to read (the committed batch's end)
    in_flight_batch_id: int | None  # planned, not committed
    in_flight_end: dict[TopicPartition, int] = field(default_factory=dict)  # the batch in flight's end offsets
    kafka_sources: int = 0
    other_sources: int = 0  # sources that are not Kafka: not read here
    writer: str | None = None  # its exactly-once writer (application/query), when named (--spark-writer)
    writer_read: bool = False  # its ledger was read
    writer_batch_id: int | None = None  # the newest batch a task's ledger entry says was committed


class _Local:
    def list(self, path: str) -> list[str] | None:
        try:
            return os.listdir(path)
        except FileNotFoundError:
            return None

    def read(self, path: str) -> str:
        with open(path, encoding="utf-8", errors="strict") as f:
            return f.read()

    def join(self, *parts: str) -> str:
        return os.path.join(*parts)


class _Arrow:
    """A remote checkpoint through pyarrow's filesystems."""

    def __init__(self, uri: str) -> None:
        try:
            from pyarrow import fs as pafs
        except ImportError:
            raise sc.CheckpointError("reading it needs pyarrow (pip install 'kafkatxn[spark]')") from None
        scheme, rest = uri.split("://", 1)
        # s3a is Hadoop's name for S3; pyarrow's is s3.
        try:
            self.fs, self.root = pafs.FileSystem.from_uri(("s3://" + rest) if scheme == "s3a" else uri)
        except ValueError as exc:  # pyarrow's ArrowInvalid: a location it cannot parse
            raise sc.CheckpointError(f"not a location pyarrow can read: {_first_line(exc)}") from None
        self._pafs = pafs

    def list(self, path: str) -> list[str] | None:
        try:
            infos = self.fs.get_file_info(self._pafs.FileSelector(path, allow_not_found=True))
            return [i.base_name for i in infos] if infos or self.fs.get_file_info(path).type != self._pafs.FileType.NotFound else None
        except UnicodeDecodeError:
            raise
        except ValueError as exc:  # ArrowInvalid: a path the store refuses
            raise sc.CheckpointError(f"cannot be listed: {_first_line(exc)}") from None

    def read(self, path: str) -> str:
        try:
            with self.fs.open_input_stream(path) as f:
                data = f.read()
        except ValueError as exc:
            raise sc.CheckpointError(f"cannot be read: {_first_line(exc)}") from None
        return data.decode("utf-8")

    def join(self, *parts: str) -> str:
        return "/".join(p.rstrip("/") for p in parts)


def parse_spec(spec: str) -> tuple[str | None, str]:
    """``NAME=PATH`` or ``PATH``: the query's name (Spark keeps none in the checkpoint) and its checkpoint."""
    m = _NAMED.fullmatch(spec)
    return (m.group(1), m.group(2)) if m else (None, spec)


def _filesystem(path: str) -> tuple[_Local | _Arrow, str]:
    scheme = _scheme(path)
    if scheme in ("", "file"):
        return _Local(), path[len("file://"):] if scheme else path
    if scheme not in REMOTE_SCHEMES:
        raise sc.CheckpointError(f"{scheme}:// is not a filesystem read here ({', '.join(s + '://' for s in REMOTE_SCHEMES)})")
    fs = _Arrow(path)
    return fs, fs.root


def read_checkpoint(spec: str, deadline: float | None = None) -> tuple[SparkQuery | None, list[Missing]]:
    """One query's checkpoint; what cannot be read is a missing part naming the path (and the query None
    when its position cannot be read). A remote one is read within ``deadline`` (``time.monotonic()``),
    the command's: a store that does not answer by then is a missing part too."""
    name, path = parse_spec(spec)
    subject = Part(f"spark checkpoint {path}")
    if deadline is None or _scheme(path) in ("", "file"):
        return _read_checkpoint(name, path, subject)
    return _within(deadline, lambda: _read_checkpoint(name, path, subject), subject)


def _within(deadline: float, read, subject: Part) -> tuple[SparkQuery | None, list[Missing]]:
    """``read()`` in a thread of its own, waited for until ``deadline``: pyarrow's filesystems take no
    deadline of their own. A store that has not answered by then is left to its daemon thread."""
    done: list = []

    def run() -> None:
        try:
            done.append((True, read()))
        except BaseException as exc:  # raised again in the caller's thread
            done.append((False, exc))

    wait_s = max(deadline - time.monotonic(), 0.0)
    reader = threading.Thread(target=run, name="spark-checkpoint-read", daemon=True)
    reader.start()
    reader.join(wait_s)
    if not done:
        return None, [Missing(subject, f"its store did not answer within {wait_s:.1f}s (--timeout)")]
    ok, value = done[0]
    if not ok:
        raise value
    return value


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _scheme(path: str) -> str:
    return path.split("://", 1)[0].lower() if "://" in path else ""


def _read_checkpoint(name: str | None, path: str, subject: Part) -> tuple[SparkQuery | None, list[Missing]]:
    try:
        fs, root = _filesystem(path)
        return _read(fs, root, name, path, subject)
    except sc.CheckpointError as exc:
        return None, [Missing(subject, str(exc))]
    except (OSError, UnicodeDecodeError) as exc:  # unreadable, permission, a remote store that did not answer
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return None, [Missing(subject, f"cannot be read: {reason}")]


def _read(fs: _Local | _Arrow, root: str, name: str | None, path: str, subject: Part) -> tuple[SparkQuery | None, list[Missing]]:
    top = fs.list(root)
    if top is None:
        raise sc.CheckpointError("no such checkpoint directory")
    if "metadata" not in top:
        raise sc.CheckpointError("no metadata file: not a Structured Streaming checkpoint, or its query has not started")
    query_id = sc.parse_metadata(fs.read(fs.join(root, "metadata")))
    reader = QueryReader(name, query_id, path)
    planned = sc.batch_ids(fs.list(fs.join(root, "offsets")) or [])
    committed = sc.batch_ids(fs.list(fs.join(root, "commits")) or [])
    missing: list[Missing] = []
    last_commit = committed[-1] if committed else None
    if last_commit is not None:
        sc.parse_commit_log(fs.read(fs.join(root, "commits", str(last_commit))))  # a damaged one: no position
        if last_commit not in planned:
            raise sc.CheckpointError(f"batch {last_commit} is committed but its offsets file is gone")
        entry = sc.parse_offset_log(fs.read(fs.join(root, "offsets", str(last_commit))))
        kafka = sc.kafka_position(entry)
        position, stamp = kafka.offsets, entry.timestamp_ms
    else:
        if not planned:
            raise sc.CheckpointError("its query has planned no batch yet (no offsets file)")
        kafka = sc.kafka_position(sc.parse_offset_log(fs.read(fs.join(root, "offsets", str(planned[0])))))
        position, stamp = _initial(fs, root), None
    in_flight = planned[-1] if planned and (last_commit is None or planned[-1] > last_commit) else None
    in_flight_end: dict[TopicPartition, int] = {}
    if in_flight is not None:
        try:
            flight = sc.kafka_position(sc.parse_offset_log(fs.read(fs.join(root, "offsets", str(in_flight)))))
            in_flight_end, kafka = flight.offsets, flight
        except (sc.CheckpointError, OSError, UnicodeDecodeError) as exc:
            missing.append(Missing(Part(f"spark checkpoint {fs.join(path, 'offsets', str(in_flight))}"), f"batch in flight: {exc}"))
    if not kafka.sources:
        raise sc.CheckpointError("its query reads no Kafka source")
    query = SparkQuery(reader, last_commit, stamp, position, in_flight, in_flight_end, kafka.sources, kafka.other_sources)
    return query, missing


def _initial(fs: _Local | _Arrow, root: str) -> dict[TopicPartition, int]:
    """Where a query that committed no batch starts: its Kafka sources' initial offsets."""
    out: dict[TopicPartition, int] = {}
    for source in sorted(fs.list(fs.join(root, "sources")) or []):
        if (fs.list(fs.join(root, "sources", source)) or []).count("0"):
            offsets = sc.parse_initial_offsets(fs.read(fs.join(root, "sources", source, "0")))
            for tp, off in (offsets or {}).items():
                out[tp] = min(off, out[tp]) if tp in out else off
    if not out:
        raise sc.CheckpointError("its query has committed no batch and its Kafka sources' initial offsets are not written")
    return out


def read_checkpoints(specs: Iterable[str], deadline: float | None = None) -> tuple[list[SparkQuery], list[Missing]]:
    """Every checkpoint named (``NAME=PATH`` or ``PATH``), in order, remote ones within ``deadline``;
    the missing parts of all."""
    queries: list[SparkQuery] = []
    missing: list[Missing] = []
    for spec in dict.fromkeys(specs):
        query, lost = read_checkpoint(spec, deadline)
        missing += lost
        if query is not None:
            queries.append(query)
    return queries, missing


def reader_positions(cluster: Cluster | None, queries: Sequence[SparkQuery],
                     topics: Sequence[str] | None = None) -> dict[str, dict[TopicPartition, int]]:
    """Per query (its :class:`QueryReader`) the next offset to read on each partition it reads, as
    a group's committed offsets are: ``NO_POSITION`` where it has none (an offset not resolved yet, or a
    partition added to its topics since its last batch, which it reads from the start); partitions of
    topics that no longer exist are left out. ``topics`` keeps only those."""
    existing: set[TopicPartition] | None = None
    if cluster is not None:
        existing = set(cluster.metadata().leaders)
    out: dict[str, dict[TopicPartition, int]] = {}
    for q in queries:
        places = {tp: (off if off >= 0 else NO_POSITION) for tp, off in q.position.items()}
        if existing is not None:
            read = {tp.topic for tp in places}
            places.update((tp, NO_POSITION) for tp in existing if tp.topic in read and tp not in places)
            places = {tp: off for tp, off in places.items() if tp in existing}
        if topics:
            places = {tp: off for tp, off in places.items() if tp.topic in topics}
        out[q.reader] = places
    return out


@dataclass(frozen=True)
class QueryRow:
    """One Spark query among the readers: which query, where its checkpoint stands, and its status
    (the worst of its partitions' verdicts, as a group's)."""

    TABLE_KEEPS: ClassVar[tuple[str, ...]] = ("reader", "committed_batch_id", "checkpoint")  # narrow tables keep them (output.py)

    reader: str  # spark:<name or id>: the "group" of its partition rows
    status: str | None  # caught_up, waiting, lagging, unknown or blocked; None when none of its partitions was measured
    committed_batch_id: int | None
    in_flight_batch_id: int | None
    query_id: str | None
    checkpoint: str
    query_name: str | None  # None: not given (Spark keeps none in the checkpoint)
    committed_batch_timestamp_ms: int | None
    in_flight_end_offsets: str | None  # "topic-partition@offset, ..." of the batch in flight
    kafka_sources: int
    other_sources: int
    # Where it writes through kafkatxn's exactly-once writer (--spark-writer): the newest batch a task's
    # ledger entry says was committed, and how that stands with the checkpoint's committed batch.
    writer: str | None = None  # application/query, as the writer's ledger keys name it
    writer_batch_id: int | None = None
    writer_state: str | None = None  # in_step, ahead, behind (below); None without a writer or its ledger


# How the writer's ledger stands with the checkpoint (``writer_state``). Spark writes a batch's commit
# entry after its foreachBatch returned, so the writer is never behind a healthy checkpoint.
#   in_step: the ledger's last batch is the checkpoint's last committed batch;
#   ahead: the writer committed a batch the checkpoint has not: Spark replays it and the writer skips it;
#   behind: the checkpoint committed batches the writer's ledger does not have: their output is missing (a bug).


@dataclass(frozen=True)
class WriterSpec:
    """``NAME=APPLICATION/QUERY[@LEDGER_TOPIC]``: the exactly-once writer of the query named NAME."""

    query_name: str
    application: str
    query: str | None
    ledger_topic: str

    @property
    def writer(self) -> str:
        return f"{self.application}/{self.query or ''}"


DEFAULT_LEDGER_TOPIC = "kafkatxn-spark-ledger"  # spark_eos's default (not imported: it loads pyspark)


def parse_writer(spec: str) -> WriterSpec:
    m = re.fullmatch(r"([A-Za-z0-9_.\-]+)=([^/@]+)/([^/@]*)(?:@(.+))?", spec)
    if m is None:
        raise ValueError(f"--spark-writer {spec!r}: expected NAME=APPLICATION/QUERY[@LEDGER_TOPIC]")
    return WriterSpec(m.group(1), m.group(2), m.group(3) or None, m.group(4) or DEFAULT_LEDGER_TOPIC)


def writer_state(committed_batch_id: int | None, writer_batch_id: int | None) -> str | None:
    if writer_batch_id is None:
        return None if committed_batch_id is None else "behind"
    if committed_batch_id is None or writer_batch_id > committed_batch_id:
        return "ahead"
    return "in_step" if writer_batch_id == committed_batch_id else "behind"


def with_writers(cluster: Cluster, queries: Sequence[SparkQuery], specs: Sequence[WriterSpec]) -> tuple[list[SparkQuery], list[Missing]]:
    """``queries`` with their exactly-once writers' ledgers read (a query named by a spec): the newest
    batch a task's entry says was committed; a ledger that could not be read is a missing part."""
    from dataclasses import replace

    by_name = {s.query_name: s for s in specs}
    out, missing = [], []
    for q in queries:
        spec = by_name.get(q.reader.query_name or "")
        if spec is None:
            out.append(q)
            continue
        read = cluster.writer_batches(spec.ledger_topic, spec.application, spec.query)
        missing += read.missing
        out.append(replace(q, writer=spec.writer, writer_read=not read.missing,
                           writer_batch_id=max(read.value.values(), default=None)))
    return out, missing


STATUS_ORDER = ("blocked", "lagging", "unknown", "waiting", "caught_up")


def query_rows(queries: Sequence[SparkQuery], places: Iterable[object] = ()) -> list[QueryRow]:
    """A row per query; ``places``: rows with ``group`` and ``verdict`` (its partitions), for its status."""
    verdicts: dict[str, set[str]] = {}
    for p in places:
        verdicts.setdefault(str(getattr(p, "group")), set()).add(_status(p))
    rows = []
    for q in queries:
        found = verdicts.get(str(q.reader), set())
        rows.append(QueryRow(
            reader=str(q.reader), status=next((s for s in STATUS_ORDER if s in found), None),
            committed_batch_id=q.committed_batch_id, in_flight_batch_id=q.in_flight_batch_id, query_id=q.reader.query_id,
            checkpoint=q.reader.checkpoint, query_name=q.reader.query_name, committed_batch_timestamp_ms=q.committed_batch_timestamp_ms,
            in_flight_end_offsets=", ".join(f"{tp}@{off}" for tp, off in sorted(q.in_flight_end.items()))
            if q.in_flight_batch_id is not None else None,
            kafka_sources=q.kafka_sources, other_sources=q.other_sources, writer=q.writer, writer_batch_id=q.writer_batch_id,
            writer_state=writer_state(q.committed_batch_id, q.writer_batch_id) if q.writer_read else None,
        ))
    return rows


def _status(place: object) -> str:
    """A place's verdict: a row's own, or a scrape's GroupSample's (blocked, waiting, lagging, caught up)."""
    verdict = getattr(place, "verdict", None)
    if verdict is not None:
        return str(getattr(verdict, "value", verdict))
    if getattr(place, "blocked"):
        return "blocked"
    return "waiting" if getattr(place, "waiting") else "lagging" if getattr(place, "lag_messages") > 0 else "caught_up"


def query_notes(queries: Sequence[SparkQuery]) -> list[str]:
    """One line per query for commands whose rows name it by its label only (lso --groups)."""
    out = []
    for r in query_rows(queries):
        batch = f"batch {r.committed_batch_id} committed" if r.committed_batch_id is not None else "no batch committed"
        flight = f", batch {r.in_flight_batch_id} in flight (to {r.in_flight_end_offsets})" if r.in_flight_batch_id is not None else ""
        out.append(f"{r.reader} is query {r.query_id} (checkpoint {r.checkpoint}): {batch}{flight}")
    return out


def reader_words(reader: str) -> str:
    """A reader as a page names it: a group by its name, a query by its name, id and checkpoint."""
    if isinstance(reader, QueryReader):
        return f"Spark query {reader.query_name or reader.query_id!r} (id {reader.query_id}, checkpoint {reader.checkpoint})"
    return f"consumer group {reader!r}"


def readers_count(readers: Iterable[str]) -> str:
    """``2 consumer groups``, ``1 Spark query``, ``1 consumer group and 1 Spark query``: for a summary."""
    readers = list(readers)
    queries = sum(1 for r in readers if isinstance(r, QueryReader))
    counts = ((len(readers) - queries, "consumer group", "consumer groups"), (queries, "Spark query", "Spark queries"))
    return " and ".join(f"{n} {one if n == 1 else many}" for n, one, many in counts if n) or "0 consumer groups"


def reader_option(reader: str, group_flag: str = "--group ") -> str:
    """How a command names a reader: ``--group G`` (``lso --groups G``: ``group_flag=""``), or
    ``--spark-checkpoint [NAME=]PATH``."""
    if isinstance(reader, QueryReader):
        spec = f"{reader.query_name}={reader.checkpoint}" if reader.query_name else reader.checkpoint
        return f"--spark-checkpoint {shlex.quote(spec)}"
    return f"{group_flag}{shlex.quote(reader)}"


def with_queries(cluster: Cluster, committed: tuple[dict, list[Missing]], specs: Sequence[str],
                 writers: Sequence[WriterSpec] = ()) -> tuple[tuple[dict, list[Missing]], list[SparkQuery]]:
    """A group pass's committed offsets (``facts_lso.committed_offsets_matching``) with the Spark queries of
    ``specs`` beside the groups (the checkpoints and writers' ledgers that could not be read among the
    missing parts), and the queries, their writers' last batches in ``writer_batches``."""
    if not specs:
        return committed, []
    queries, unread = read_checkpoints(specs, cluster.deadline)
    queries, ledgers_unread = with_writers(cluster, queries, writers)
    unread += ledgers_unread
    by_group, missing = committed
    return ({**by_group, **reader_positions(cluster, queries)}, [*missing, *unread]), queries
