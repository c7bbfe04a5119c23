"""Helpers for Spark pipelines that write to Kafka transactionally.

A transactional id must stay the same when an application instance restarts (so the new producer
fences its own zombie) and must differ between instances that run at the same time (or they fence
each other). In Spark the unit that writes is a *task*, and the stable thing about a task across
restarts and micro-batches is its partition id, given a fixed number of partitions. So::

    <prefix>-<application>[-<query>]-<partition id>

with the partition count fixed by a ``repartition(n)`` before writing: a bounded set of ``n`` ids,
the same after every restart, one per concurrently running task. Two anti-patterns this replaces:
one ``transactional.id`` set on the driver and used by every executor (a shared id: tasks fence each
other), and a fresh UUID per task or batch (unstable ids: no zombie fencing, and every id pins broker
state until ``transactional.id.expiration.ms``). ``kafkatxn audit`` reports both; the writer below
is reported clean.

Example (``foreachBatch``; ``foreach_partition_writer`` suits batch jobs too)::

    from kafkatxn.spark import foreach_batch_writer

    writer = foreach_batch_writer(
        {"bootstrap.servers": "broker:9092"}, topic="orders-out",
        prefix="etl", application="orders-enricher", query="main", partitions=8,
    )
    (spark.readStream.format("kafka")...load()
        .selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value")
        .writeStream.foreachBatch(writer).option("checkpointLocation", "/chk/orders").start())

Each micro-batch is repartitioned to ``partitions`` tasks; task *p* writes its rows in one
transaction as ``etl-orders-enricher-main-p``. A replayed batch (after a failure) writes again: the
transaction makes each task's output atomic, and downstream ``read_committed`` consumers never see
a failed attempt, but exactly-once across replays needs the ledger of
:class:`kafkatxn.spark_eos.ExactlyOnceWriter` (a task skips a batch it already committed). Speculative execution would run two attempts of one task with the same id at
once: the later fences the earlier, which is the point, but leave ``spark.speculation`` off to
avoid the churn.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable, Mapping

_ID_PART = re.compile(r"^[A-Za-z0-9._\-]+$")
DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000


def transactional_id(prefix: str, application: str, partition_id: int, *, query: str | None = None, partitions: int | None = None) -> str:
    """``<prefix>-<application>[-<query>]-<partition id>``: stable across restarts, unique per task.

    ``partitions`` (the fixed partition count) bounds the set: a partition id outside it is an error,
    because it means the pipeline is not repartitioned to a fixed count and ids would multiply.
    """
    parts = [prefix, application] + ([query] if query else [])
    for name, value in zip(("prefix", "application", "query"), parts):
        if not value or not _ID_PART.match(value):
            raise ValueError(f"{name} must be non-empty and use only letters, digits, '.', '_' and '-': {value!r}")
    if partition_id < 0:
        raise ValueError(f"partition id must not be negative: {partition_id}")
    if partitions is not None and partition_id >= partitions:
        raise ValueError(f"partition id {partition_id} is outside the fixed {partitions} partitions; repartition({partitions}) first")
    return "-".join(parts + [str(partition_id)])


def task_transactional_id(prefix: str, application: str, *, query: str | None = None, partitions: int | None = None) -> str:
    """The id for the Spark task this runs in (``TaskContext.partitionId()``); call it on executors."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        raise RuntimeError("task_transactional_id must run inside a Spark task (foreachPartition, mapPartitions)")
    return transactional_id(prefix, application, ctx.partitionId(), query=query, partitions=partitions)


def write_partition(
    rows: Iterable[Any],
    producer_config: Mapping[str, Any],
    topic: str,
    transactional_id_: str,
    *,
    key_column: str = "key",
    value_column: str = "value",
    timeout_s: float = 60.0,
) -> int:
    """Write one partition's rows in one transaction as ``transactional_id_``; returns the count.

    InitProducerId first: it fences a zombie of this same task (an earlier attempt or run) and
    aborts whatever that one left open.
    """
    from kafkatxn.kafka.transactional_writer import write_in_one_transaction

    conf = dict(producer_config)
    conf.setdefault("transaction.timeout.ms", DEFAULT_TRANSACTION_TIMEOUT_MS)

    def records() -> Iterable[tuple[bytes | None, bytes | None]]:
        for row in rows:
            d = row.asDict() if hasattr(row, "asDict") else dict(row)
            key, value = d.get(key_column), d.get(value_column)
            yield (key.encode() if isinstance(key, str) else key, value.encode() if isinstance(value, str) else value)

    return write_in_one_transaction(conf, transactional_id_, topic, records(), timeout_s)


def foreach_partition_writer(
    producer_config: Mapping[str, Any], topic: str, *, prefix: str, application: str,
    query: str | None = None, partitions: int, **kw: Any,
) -> Callable[[Iterable[Any]], None]:
    """A function for ``df.repartition(partitions).foreachPartition(...)``."""
    config = dict(producer_config)

    def write(rows: Iterable[Any]) -> None:
        tid = task_transactional_id(prefix, application, query=query, partitions=partitions)
        write_partition(rows, config, topic, tid, **kw)

    return write


def foreach_batch_writer(
    producer_config: Mapping[str, Any], topic: str, *, prefix: str, application: str,
    query: str | None = None, partitions: int, **kw: Any,
) -> Callable[[Any, int], None]:
    """A function for ``writeStream.foreachBatch(...)``: every batch, the same ``partitions`` ids."""
    write = foreach_partition_writer(
        producer_config, topic, prefix=prefix, application=application, query=query, partitions=partitions, **kw
    )

    def each_batch(df: Any, batch_id: int) -> None:
        df.repartition(partitions).foreachPartition(write)

    return each_batch

