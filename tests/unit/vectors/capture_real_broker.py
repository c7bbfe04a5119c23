"""Capture real __transaction_state records from a broker started by harness/.

    python -m tests.unit.vectors.capture_real_broker 3.9.1 4.3.1 > tests/unit/vectors/real_broker_captures.json

For each Kafka version: one transactional producer (confluent-kafka) commits a transaction on
two partitions, then opens a second one and leaves it Ongoing; every record of the
coordinator's log is then read back raw. "expected" is what kafkatxn decoded at capture time;
the bytes are the broker's.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from harness import KafkaCluster
from kafkatxn.kafka.txnlog import decode_record


def capture(version: str) -> list[dict]:
    records = []
    with tempfile.TemporaryDirectory() as workdir, KafkaCluster(Path(workdir), kafka_version=version) as cluster:
        cluster.create_topic("orders", partitions=3)
        producer = Producer({**cluster.client_config(), "transactional.id": "capture-tx-1", "transaction.timeout.ms": 60000})
        producer.init_transactions(30)
        producer.begin_transaction()
        for partition in (0, 2):
            producer.produce("orders", b"v", partition=partition)
        producer.commit_transaction(30)
        producer.begin_transaction()
        producer.produce("orders", b"v", partition=1)
        producer.flush(10)
        consumer = Consumer({**cluster.client_config(), "group.id": "capture", "enable.auto.commit": False})
        partitions = consumer.list_topics("__transaction_state", timeout=10).topics["__transaction_state"].partitions
        consumer.assign([TopicPartition("__transaction_state", p, 0) for p in partitions])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            record = decode_record(message.key(), message.value(), message.partition(), message.offset())
            expected = dataclasses.asdict(record)
            expected["partitions"] = list(expected["partitions"])
            records.append(
                {
                    "key": message.key().hex(),
                    "value": None if message.value() is None else message.value().hex(),
                    "expected": expected,
                }
            )
        consumer.close()
        producer.abort_transaction(30)
    return records


def main(versions: list[str]) -> None:
    captures = [{"kafka_version": v, "records": capture(v)} for v in versions]
    json.dump({"generator": "tests/unit/vectors/capture_real_broker.py", "captures": captures}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:] or ["4.3.1"])
