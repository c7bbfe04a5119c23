"""A PySpark data source (Spark 4 Python Data Source API) for the ``__transaction_state`` topic.

Spark's own Kafka source filters internal topics out, so the log is read here: one Spark partition
per log partition, each read by a confluent-kafka consumer *assigned* to it (no group membership,
nothing committed) from its start, or a given offset, up to the end offset captured when the read
was planned. Batch and streaming::

    from kafkatxn.audit.source import register, reader_options
    register(spark)
    opts = reader_options(config)              # from ConnectionConfig.librdkafka()
    df = spark.read.format("kafkatxn_txnlog").options(**opts).load()
    spark.readStream.format("kafkatxn_txnlog").options(**opts).load()   # see capture.py

Rows carry the decoder's columns plus ``record_timestamp_ms`` (the Kafka record timestamp: the only
time a tombstone has), ``row_kind`` and ``error``. Records the decoder cannot read are not dropped
silently: the reader yields them as undecoded records, which come through as rows of kind
``unknown_version`` (a key or value version this decoder does not know) or ``corrupt`` (with the
decoder's one-line reason in ``error``), their decoded columns null. A plain
``groupBy("row_kind").count()`` counts them, in batch and in a captured history alike; the audit
reads only ``row_kind = 'record'``. (Accumulators would not survive into a captured history and
Python data sources cannot update them anyway.)

Options: ``kafka.<librdkafka key>`` for every connection setting (``reader_options`` builds them),
``topic`` (default ``__transaction_state``), ``startingOffsets`` (``earliest``, ``latest`` or JSON
``{"0": 42}``), ``timeoutMs`` (planning and per-partition read deadline, default 60000),
``maxRecordsPerBatch`` (Arrow batch size, default 10000).

Secrets: connection options stay in the reader (pickled to the Python workers, never logged); the
job sets ``spark.sql.redaction.options.regex`` so plans and the UI mask them; error messages pass
through :func:`kafkatxn.redact.redact` with the secrets registered in the worker process.

Planning (end offsets, partition count) goes through the :class:`kafkatxn.kafka.Cluster` facade.
The partition reads themselves run on executors, outside any command's facade, through the one
reader of the log (:func:`kafkatxn.kafka.log_reader.read_transaction_log`, which a one-process
command uses too): its own consumer with the same settings and a deadline, the one other place that
reads Kafka.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

from kafkatxn.kafka.txnlog import TOPIC
from kafkatxn.txnlog_records import KIND_CORRUPT, KIND_RECORD, KIND_UNKNOWN_VERSION, TxnLogEntry, UndecodedRecord

FORMAT = "kafkatxn_txnlog"
OPTION_PREFIX = "kafka."
EARLIEST = -2  # librdkafka's OFFSET_BEGINNING
DEFAULT_TIMEOUT_MS = 60_000
DEFAULT_BATCH = 10_000

ROW_RECORD = KIND_RECORD
ROW_UNKNOWN = KIND_UNKNOWN_VERSION
ROW_CORRUPT = KIND_CORRUPT

SCHEMA_DDL = (
    "transactional_id string, producer_id long, producer_epoch int, state string, partitions array<string>, "
    "timeout_ms int, start_timestamp_ms long, last_update_timestamp_ms long, client_transaction_version int, "
    "previous_producer_id long, next_producer_id long, next_producer_epoch int, value_version int, "
    "tombstone boolean, log_partition int, log_offset long, record_timestamp_ms long, row_kind string, error string"
)
COLUMNS = [part.strip().split(" ")[0] for part in SCHEMA_DDL.split(", ")]
RECORD_COLUMNS = COLUMNS[: COLUMNS.index("row_kind")]  # the HistoryRecord fields, in order

def reader_options(config: Any, **extra: Any) -> dict[str, str]:
    """Data source options for a :class:`kafkatxn.config.ConnectionConfig` (all strings, as Spark wants)."""
    from kafkatxn.kafka.log_reader import needs_wire

    # A cluster librdkafka cannot log in to (GSSAPI): the settings as given, which the executors read over Fetch.
    conf = {"bootstrap.servers": config.bootstrap_servers, **config.settings} if needs_wire(config.settings) else config.librdkafka()
    conf.pop("logger", None)
    conf.pop("error_cb", None)
    opts = {f"{OPTION_PREFIX}{k}": str(v) for k, v in conf.items()}
    opts["timeoutMs"] = str(max(int(config.timeout_ms), 1000))
    opts.update({k: str(v) for k, v in extra.items()})
    return opts


def _kafka_conf(options: Any) -> dict[str, Any]:
    conf = {k[len(OPTION_PREFIX):]: v for k, v in options.items() if k.lower().startswith(OPTION_PREFIX)}
    if "bootstrap.servers" not in conf:
        raise ValueError(f"option {OPTION_PREFIX}bootstrap.servers is required")
    return conf


def _register_secrets(conf: dict[str, Any]) -> None:
    from kafkatxn.config import is_secret
    from kafkatxn.redact import register_secret

    for key, value in conf.items():
        if is_secret(key):
            register_secret(str(value))


def parse_starting_offsets(text: str | None, partitions: list[int], ends: dict[int, int]) -> dict[int, int]:
    """Start offset per log partition: EARLIEST, an end offset (``latest``), or the given ones."""
    text = (text or "earliest").strip()
    if text == "earliest":
        return {p: EARLIEST for p in partitions}
    if text == "latest":
        return {p: ends.get(p, 0) for p in partitions}
    try:
        given = {int(k): int(v) for k, v in json.loads(text).items()}
    except (ValueError, AttributeError, TypeError):
        raise ValueError("startingOffsets must be 'earliest', 'latest' or JSON like {\"0\": 42}") from None
    return {p: given.get(p, EARLIEST) for p in partitions}


# --------------------------------------------------------------------------------------------
# Reading one log partition (runs on executors)
# --------------------------------------------------------------------------------------------


def read_partition_rows(
    conf: dict[str, Any], topic: str, partition: int, start: int, end: int, timeout_ms: int, batch_size: int = DEFAULT_BATCH
) -> Iterator[list[tuple]]:
    """Rows (tuples in COLUMNS order) of ``topic``-``partition`` from ``start`` up to ``end`` (exclusive), in chunks."""
    from kafkatxn.kafka.log_reader import read_transaction_log

    _register_secrets(conf)
    for chunk in read_transaction_log(
        conf, [partition], start_offsets={partition: start}, end_offsets={partition: end}, timeout_ms=timeout_ms,
        batch_size=batch_size, topic=topic,
    ):  # fmt: skip
        yield [entry_row(e) for e in chunk]


_NULLS_AFTER_ID = (None,) * 13


def entry_row(entry: TxnLogEntry) -> tuple:
    """One read record as a row: the decoded columns (null for a record not decoded), its position and kind."""
    r, timestamp_ms = entry
    if type(r) is UndecodedRecord:
        return (None, *_NULLS_AFTER_ID, r.log_partition, r.log_offset, timestamp_ms, r.kind, r.error)
    return (
        r.transactional_id, r.producer_id, r.producer_epoch, r.state, list(r.partitions), r.timeout_ms,
        r.start_timestamp_ms, r.last_update_timestamp_ms, r.client_transaction_version, r.previous_producer_id,
        r.next_producer_id, r.next_producer_epoch, r.value_version, r.tombstone, r.log_partition, r.log_offset,
        timestamp_ms, ROW_RECORD, None,
    )  # fmt: skip


def rows_to_batch(rows: list[tuple], arrow_schema: Any) -> Any:
    import pyarrow as pa

    columns = list(zip(*rows))
    return pa.RecordBatch.from_arrays(
        [pa.array(col, type=f.type) for col, f in zip(columns, arrow_schema)], schema=arrow_schema
    )


_SPARK_TYPES = {"string": "StringType", "long": "LongType", "int": "IntegerType", "boolean": "BooleanType"}


def spark_schema() -> Any:
    """SCHEMA_DDL as a StructType, built without a SparkContext (workers have none)."""
    from pyspark.sql import types as T

    out = []
    for part in SCHEMA_DDL.split(", "):
        name, typ = part.strip().split(" ")
        if typ.startswith("array<"):
            dtype = T.ArrayType(getattr(T, _SPARK_TYPES[typ[6:-1]])())
        else:
            dtype = getattr(T, _SPARK_TYPES[typ])()
        out.append(T.StructField(name, dtype, True))
    return T.StructType(out)


def arrow_schema() -> Any:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(spark_schema())


# --------------------------------------------------------------------------------------------
# Planning (runs in the driver's Python worker) and the Spark classes
# --------------------------------------------------------------------------------------------


def plan_end_offsets(options: Any) -> dict[int, int]:
    """End offset (high watermark) of every partition of the topic, through the facade."""
    from kafkatxn.kafka import Cluster
    from kafkatxn.model import TopicPartition
    from kafkatxn.config import ConnectionConfig

    conf = _kafka_conf(options)
    _register_secrets(conf)
    topic = options.get("topic", TOPIC)
    servers = conf.pop("bootstrap.servers")
    conf.pop("client.id", None)
    timeout_ms = int(options.get("timeoutMs", DEFAULT_TIMEOUT_MS))
    settings = {k: str(v) for k, v in conf.items()}
    config = ConnectionConfig(servers, settings, timeout_ms)
    with Cluster(config) as cluster:
        parts = cluster.select_partitions(topics=[topic], include_internal=True)
        offsets = cluster.list_offsets([TopicPartition(topic, p.partition) for p in parts], read_committed=False)
        if offsets.missing:
            raise RuntimeError(f"end offsets of {topic} incomplete: {'; '.join(offsets.missing[:3])}")
        return {tp.partition: off for tp, off in offsets.value.items()}


try:  # pyspark is optional: the module imports without it, the classes need it
    from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
except ImportError:  # pragma: no cover - exercised only without pyspark
    DataSource = DataSourceReader = DataSourceStreamReader = object  # type: ignore[misc,assignment]

    class InputPartition:  # type: ignore[no-redef]
        def __init__(self, value: Any) -> None:
            self.value = value


class LogPartition(InputPartition):
    def __init__(self, partition: int, start: int, end: int):
        super().__init__(partition)
        self.partition = partition
        self.start = start
        self.end = end


class _Reading:
    """What the batch and the stream reader share: the options and reading one partition."""

    def __init__(self, options: Any):
        self.options = dict(options)
        self.topic = self.options.get("topic", TOPIC)
        self.timeout_ms = int(self.options.get("timeoutMs", DEFAULT_TIMEOUT_MS))
        self.batch_size = int(self.options.get("maxRecordsPerBatch", DEFAULT_BATCH))

    def read(self, partition: LogPartition) -> Iterator[Any]:
        schema = arrow_schema()
        conf = _kafka_conf(self.options)
        for rows in read_partition_rows(
            conf, self.topic, partition.partition, partition.start, partition.end, self.timeout_ms, self.batch_size
        ):
            yield rows_to_batch(rows, schema)


class TxnLogReader(_Reading, DataSourceReader):  # type: ignore[misc]
    def partitions(self) -> list[LogPartition]:
        ends = plan_end_offsets(self.options)
        starts = parse_starting_offsets(self.options.get("startingOffsets"), sorted(ends), ends)
        # Empty partitions still get a (no-op) task: the plan has one Spark partition per log partition.
        return [LogPartition(p, starts[p], ends[p]) for p in sorted(ends)]


class TxnLogStreamReader(_Reading, DataSourceStreamReader):  # type: ignore[misc]
    """Offsets are ``{"<partition>": next offset}``; -2 means the partition's beginning."""

    def initialOffset(self) -> dict:
        ends = plan_end_offsets(self.options)
        starts = parse_starting_offsets(self.options.get("startingOffsets"), sorted(ends), ends)
        return {str(p): o for p, o in starts.items()}

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        ends = plan_end_offsets(self.options)
        return {str(p): o for p, o in ends.items()}

    def partitions(self, start: dict, end: dict) -> list[LogPartition]:
        out = []
        for key in sorted(end, key=int):
            s, e = int(start.get(key, EARLIEST)), int(end[key])
            if e > 0 and (s == EARLIEST or s < e):
                out.append(LogPartition(int(key), s, e))
        return out

    def commit(self, end: dict) -> None:  # nothing to commit: offsets live in Spark's checkpoint
        return None


class TxnLogDataSource(DataSource):  # type: ignore[misc]
    """``spark.read.format("kafkatxn_txnlog")``: the cluster's transaction log, decoded."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> Any:
        return spark_schema()

    def reader(self, schema: Any) -> TxnLogReader:
        return TxnLogReader(self.options)

    def streamReader(self, schema: Any) -> TxnLogStreamReader:
        return TxnLogStreamReader(self.options)


def register(spark: Any) -> None:
    spark.dataSource.register(TxnLogDataSource)
