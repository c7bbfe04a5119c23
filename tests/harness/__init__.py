"""Test harness: real Apache Kafka brokers (KRaft) started from Maven Central jars."""

from .broker import KafkaCluster, KafkaHarnessError, Listener, new_kafka_uuid
from .jars import default_kafka_version, ensure_kafka_jars

__all__ = [
    "KafkaCluster",
    "KafkaHarnessError",
    "Listener",
    "default_kafka_version",
    "ensure_kafka_jars",
    "new_kafka_uuid",
]
