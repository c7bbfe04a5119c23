"""Broker harness: real Apache Kafka brokers (KRaft, or ZooKeeper mode: zookeeper.py) started from Maven Central jars, for the tests,
bench/ and the demo (scripts/demo.py); outside the test tree and the wheel."""

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
