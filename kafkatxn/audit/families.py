"""Transactional-id families: an id's shape (UUIDs, timestamps, hex runs and numbers masked) and
the framework whose naming the shape matches, with advice. Shared by the auditor and the live
exporter's churn metric; imports neither the auditor's rules nor PySpark.
"""

from __future__ import annotations

import re


_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_ISO_TS = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T _]\d{2}[:\-]?\d{2}(?:[:\-]?\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?")
# Hex runs need a letter and a digit, so words ("facade") and plain numbers are left to the other masks.
_HEX = re.compile(r"(?<![0-9A-Za-z])(?=[0-9a-fA-F]*[a-fA-F])(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{8,}(?![0-9A-Za-z])")
_NUMBER = re.compile(r"\d+")


def family_of(transactional_id: str) -> str:
    """The id's shape: UUIDs, timestamps, hex runs and numbers masked, in that order."""
    text = _UUID.sub("{uuid}", transactional_id)
    text = _ISO_TS.sub("{ts}", text)
    text = _HEX.sub("{hex}", text)
    return _NUMBER.sub("{n}", text)


# Id shapes real frameworks write, as families (family_of masks them this way):
FRAMEWORK_STREAMS = "kafka_streams_eos_v2"  # <application.id>-<process UUID>-<thread index>
FRAMEWORK_FLINK = "flink_kafka_sink"  # <transactionalIdPrefix>-<subtask>-<checkpoint id>
FRAMEWORK_RANDOM = "random_per_run"  # a random id per query, batch or task (common in Spark jobs)
FRAMEWORK_NUMBERED = "numbered"  # <name>-<n>: a per-partition or per-instance set (kafkatxn.spark), or a counter
FRAMEWORK_OTHER = "other"

_STREAMS_SHAPE = re.compile(r".+-\{uuid\}-\{n\}")
_FLINK_SHAPE = re.compile(r".+-\{n\}-\{n\}")
_NUMBERED_SHAPE = re.compile(r"[^{}]+-\{n\}")

ADVICE = {
    FRAMEWORK_STREAMS: "Kafka Streams exactly-once v2 names producers <application.id>-<process UUID>-<thread>; a new "
    "UUID on every start means the instance lost its state directory (state.dir keeps the process id): put state.dir "
    "on a persistent volume (a StatefulSet volume, not emptyDir or /tmp)",
    FRAMEWORK_FLINK: "Flink's KafkaSink names transactions <prefix>-<subtask>-<checkpoint>; the default naming makes "
    "new ids at every checkpoint, each held by the brokers until transactional.id.expiration.ms: use "
    "TransactionNamingStrategy.POOLING (flink-connector-kafka 4.0+), keep transactionalIdPrefix stable, or lower "
    "transactional.id.expiration.ms on the cluster",
    FRAMEWORK_RANDOM: "a random id per query, batch or task fences no zombie and leaves state behind each time: derive "
    "the id from something stable, e.g. kafkatxn.spark.transactional_id (<prefix>-<application>[-<query>]-<partition>) "
    "with a fixed repartition(n)",
    FRAMEWORK_NUMBERED: "the number keeps growing (a run or batch counter?): number ids by partition or instance, a "
    "bounded set that restarts reuse",
    FRAMEWORK_OTHER: "keep one id per application instance across restarts (derive it from the instance, not the run)",
}

# Rough heap cost per entry, for an order of magnitude (JVM object headers, maps, the id string):
# a coordinator's TransactionMetadata per id, and a ProducerStateEntry (with its batch metadata) per
# partition the id wrote to.
STATE_BYTES_PER_ID = 400
STATE_BYTES_PER_PARTITION = 300


def framework_of(family: str) -> str:
    """Which framework's naming a family's shape matches (see FRAMEWORK_*)."""
    if _STREAMS_SHAPE.fullmatch(family):
        return FRAMEWORK_STREAMS
    if _FLINK_SHAPE.fullmatch(family):
        return FRAMEWORK_FLINK
    if "{uuid}" in family or "{hex}" in family:
        return FRAMEWORK_RANDOM
    if _NUMBERED_SHAPE.fullmatch(family):
        return FRAMEWORK_NUMBERED
    return FRAMEWORK_OTHER


def state_bytes(ids: int, partitions: int) -> int:
    return ids * STATE_BYTES_PER_ID + partitions * STATE_BYTES_PER_PARTITION
