"""An exactly-once writer from Spark to Kafka: replays of a batch never duplicate its output.

Spark's Kafka sink (``format("kafka")``) is at-least-once: nothing ties its writes to the
checkpoint, so a batch Spark replays (a retried task, a driver that died after the batch was
written but before its commit entry reached the checkpoint) is written again. This writer closes
the gap with a **ledger**, a compacted Kafka topic holding, per writing task, the last batch it
committed::

    from kafkatxn.spark_eos import ExactlyOnceWriter

    writer = ExactlyOnceWriter(
        {"bootstrap.servers": "broker:9092"}, "orders-enriched",
        application="orders-enricher", query="main", partitions=8,   # ledger: kafkatxn-spark-ledger
    )
    (spark.readStream.format("kafka")...load()
        .selectExpr("key", "value")                 # binary or string columns
        .writeStream.foreachBatch(writer)
        .option("checkpointLocation", "/chk/orders-enricher").start())

    writer.write_batch(df, batch_id=20240501)       # a batch job: a stable, increasing batch id per run

Each batch is repartitioned to ``partitions`` tasks **by a deterministic key** (``partition_by``,
by default the key column), so a replay of batch B gives task *p* the same rows. Task *p*, as the
transactional id ``<prefix>-<application>[-<query>]-<p>`` (:func:`kafkatxn.spark.transactional_id`):

1. calls InitProducerId, which fences every earlier attempt of task *p* (a retry, a speculative copy,
   the previous run's zombie) and completes whatever transaction that attempt left;
2. reads its ledger entry ``<application>/<query>/<p>`` with ``read_committed``; if the entry says
   batch B (or later) is committed, the task skips B before it produces anything: its rows of B stay
   written once;
3. otherwise writes its rows and the entry = B in one transaction, and commits.

Spark reuses its Python workers, and a worker keeps task *p*'s producer for the next batch: no
InitProducerId, and no ledger read (while it is not fenced, the entry it read after its
InitProducerId or committed since is the ledger's; fenced, it can commit nothing). A kept producer's
transaction waits for its ledger entry's delivery before taking a row, so a fence is found first and
the task goes through 1 to 3 with a new producer (:func:`kafkatxn.kafka.ledger.write_batch_once`). A
producer whose transaction was aborted is never kept.

**Guarantees.** Every row of a batch reaches ``read_committed`` consumers exactly once, whatever
fails and however often Spark replays the batch, provided: the source is replayable and a replay
gives the same rows per batch (Kafka's source with a checkpoint does); the query keeps its
checkpoint (a new checkpoint restarts batch ids at 0: give it a new ``query`` name); ``partitions``
and ``partition_by`` stay fixed for the life of the checkpoint (changing them moves rows between
tasks, so a replay of the batch in flight could write some twice or skip some); batch ids only grow.
Consumers reading ``read_uncommitted`` may see aborted attempts. Speculative or retried attempts of
one task share its id and fence each other: that is the design (one of them commits); leave
``spark.speculation`` off to avoid wasted work. The guarantee is per batch and task; records are
not de-duplicated by content (the same input record twice in the source is two output records).

**Ledger retention.** The ledger holds one live entry per (application, query, partition), a few
hundred bytes each; compaction keeps the latest of each key forever. Never give it
``cleanup.policy=delete`` or ``compact,delete`` with a retention shorter than the life of the
checkpoint: an entry that disappears makes the next replay of its batch write again. Entries of a
retired query can be deleted with a tombstone per key once its checkpoint is gone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping, Sequence

from kafkatxn.spark import DEFAULT_TRANSACTION_TIMEOUT_MS, transactional_id

DEFAULT_LEDGER_TOPIC = "kafkatxn-spark-ledger"
DEFAULT_PREFIX = "eos"
RESULT_SCHEMA = "partition INT, batch_id LONG, records LONG, skipped BOOLEAN, committed_batch LONG, transactional_id STRING, new_producer BOOLEAN"
_TOPIC = re.compile(r"^[A-Za-z0-9._\-]{1,249}$")


@dataclass(frozen=True)
class BatchResult:
    """What one batch's tasks did: rows written, and the tasks that skipped a batch already committed."""

    batch_id: int
    records: int
    tasks: int
    skipped_tasks: tuple[int, ...]
    new_producers: int = 0  # tasks that built a producer (InitProducerId); the others used their worker's kept one


def _as_bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return str(value).encode()


def _column_bytes(column: Any) -> list:
    """An Arrow column as bytes values: binary and string columns by Arrow itself (no Python call
    per value), others value by value."""
    import pyarrow as pa

    kind = column.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        column, kind = column.cast(pa.large_binary() if pa.types.is_large_string(kind) else pa.binary()), None
    if kind is None or pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return column.to_pylist()
    return [_as_bytes(v) for v in column.to_pylist()]


class ExactlyOnceWriter:
    """``writeStream.foreachBatch(writer)``, or ``writer.write_batch(df, batch_id)`` in a batch job."""

    def __init__(
        self,
        producer_config: Mapping[str, Any],
        topic: str,
        *,
        application: str,
        partitions: int,
        query: str | None = None,
        prefix: str = DEFAULT_PREFIX,
        ledger_topic: str = DEFAULT_LEDGER_TOPIC,
        create_ledger: bool = True,
        key_column: str = "key",
        value_column: str = "value",
        partition_by: Sequence[str] | None = None,
        timeout_s: float = 60.0,
    ):
        if partitions < 1:
            raise ValueError(f"partitions must be at least 1: {partitions}")
        for name, value in (("topic", topic), ("ledger_topic", ledger_topic)):
            if not _TOPIC.match(value):
                raise ValueError(f"{name} is not a valid Kafka topic name: {value!r}")
        transactional_id(prefix, application, 0, query=query)  # checks the name parts once, on the driver
        self.producer_config = dict(producer_config)
        self.producer_config.setdefault("transaction.timeout.ms", DEFAULT_TRANSACTION_TIMEOUT_MS)
        self.topic, self.application, self.query, self.prefix = topic, application, query, prefix
        self.partitions, self.ledger_topic, self.create_ledger = partitions, ledger_topic, create_ledger
        self.key_column, self.value_column = key_column, value_column
        self.partition_by = tuple(partition_by or (key_column,))
        self.timeout_s = timeout_s
        self._ledger_partitions: int | None = None

    # -- the driver ---------------------------------------------------------------------------------

    def __call__(self, df: Any, batch_id: int) -> BatchResult:
        return self.write_batch(df, batch_id)

    def ledger_partitions(self) -> int:
        """The ledger topic's partition count (created with ``partitions`` partitions if absent)."""
        if self._ledger_partitions is None:
            from kafkatxn.kafka.ledger import ensure_ledger_topic

            if self.create_ledger:
                self._ledger_partitions = ensure_ledger_topic(self.producer_config, self.ledger_topic, self.partitions, self.timeout_s)
            else:
                self._ledger_partitions = ensure_ledger_topic_exists(self.producer_config, self.ledger_topic, self.timeout_s)
        return self._ledger_partitions

    def write_batch(self, df: Any, batch_id: int) -> BatchResult:
        """Write ``df`` as batch ``batch_id``: each of the ``partitions`` tasks at most once."""
        if batch_id < 0:
            raise ValueError(f"batch id must not be negative: {batch_id}")
        self.ledger_partitions()
        from pyspark.sql.functions import col

        rows = df.repartition(self.partitions, *(col(c) for c in self.partition_by)).select(self.key_column, self.value_column)
        results = rows.mapInArrow(self.task_function(batch_id), RESULT_SCHEMA).collect()
        return BatchResult(batch_id, sum(r["records"] for r in results), len(results),
                           tuple(sorted(r["partition"] for r in results if r["skipped"])),
                           sum(1 for r in results if r["new_producer"]))

    # -- the executors ------------------------------------------------------------------------------

    def ledger_key(self, partition_id: int) -> str:
        return f"{self.application}/{self.query or ''}/{partition_id}"

    def task_function(self, batch_id: int) -> Any:
        """The function ``mapInArrow`` runs in each task (pickled with this writer)."""

        def run(batches: Iterator[Any]) -> Iterator[Any]:
            yield self.write_task(batches, batch_id)

        return run

    def write_task(self, batches: Iterator[Any], batch_id: int) -> Any:
        """Task *p*'s part of batch ``batch_id``; returns one result row as an Arrow record batch."""
        import pyarrow as pa
        from pyspark import TaskContext

        from kafkatxn.kafka.ledger import LedgerSlot, write_batch_once

        ctx = TaskContext.get()
        if ctx is None:
            raise RuntimeError("the exactly-once writer's task must run inside a Spark task")
        p = ctx.partitionId()
        tid = transactional_id(self.prefix, self.application, p, query=self.query, partitions=self.partitions)
        slot = LedgerSlot(self.ledger_topic, p % (self._ledger_partitions or self.partitions), self.ledger_key(p))
        entry = {"application": self.application, "query": self.query, "partition": p}
        outcome = write_batch_once(self.producer_config, tid, self.topic, self.records(batches), slot, batch_id, self.timeout_s, entry)
        self.after_commit(outcome)
        return pa.RecordBatch.from_pylist(
            [{"partition": p, "batch_id": batch_id, "records": outcome.records, "skipped": outcome.skipped,
              "committed_batch": outcome.committed_batch, "transactional_id": tid, "new_producer": outcome.new_producer}],
            schema=pa.schema([("partition", pa.int32()), ("batch_id", pa.int64()), ("records", pa.int64()),
                              ("skipped", pa.bool_()), ("committed_batch", pa.int64()), ("transactional_id", pa.string()),
                              ("new_producer", pa.bool_())]),
        )

    def records(self, batches: Iterable[Any]) -> Iterator[tuple[bytes | None, bytes | None]]:
        """(key, value) pairs of a task's Arrow batches; strings are written as UTF-8."""
        for batch in batches:
            yield from zip(_column_bytes(batch.column(0)), _column_bytes(batch.column(1)))

    def after_commit(self, outcome: Any) -> None:
        """Called in the task after its transaction committed (or the batch was skipped); does nothing.
        A subclass may log or count here."""


def ensure_ledger_topic_exists(config: Mapping[str, Any], topic: str, timeout_s: float) -> int:
    """The partition count of a ledger topic the writer was told to use and not to create."""
    from kafkatxn.kafka.ledger import ledger_partition_count

    count = ledger_partition_count(config, topic, timeout_s)
    if not count:
        raise RuntimeError(f"the ledger topic {topic} does not exist: create it (compacted) or let the writer create it")
    return count
