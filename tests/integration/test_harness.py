"""The harness itself: real brokers start fast, serve clients and transactions, and go away cleanly."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource, ResourceType

from harness import KafkaCluster, ensure_kafka_jars

STARTUP_LIMIT_SECONDS = 30


def test_single_broker_starts_within_limit(kafka_factory, record_property):
    fetch_started = time.monotonic()
    ensure_kafka_jars()  # a first fetch is not part of the broker's startup
    fetch_seconds = time.monotonic() - fetch_started

    started = time.monotonic()
    cluster = kafka_factory()
    startup_seconds = time.monotonic() - started

    print(f"\njars ready in {fetch_seconds:.1f} s; Kafka {cluster.version} single broker ready in {startup_seconds:.1f} s")
    record_property("single_broker_startup_seconds", round(startup_seconds, 2))
    assert startup_seconds < STARTUP_LIMIT_SECONDS
    assert cluster.broker_ids == [1]
    assert cluster.bootstrap_servers.startswith("127.0.0.1:")


def test_produce_and_consume(kafka, unique_name):
    topic = kafka.create_topic(unique_name)
    producer = Producer(kafka.client_config())
    producer.produce(topic, key=b"k", value=b"hello")
    assert producer.flush(10) == 0

    assert _consume_values(kafka, topic, expected=1) == [b"hello"]


def test_brokers_cpu_counts_the_work_of_answering(kafka, unique_name):
    """What bench_scale reads around a command: the brokers' JVMs' CPU, which answering requests adds to."""
    topic = kafka.create_topic(unique_name, partitions=50)
    before = kafka.brokers_cpu_s()
    producer = Producer(kafka.client_config())
    for i in range(2000):
        producer.produce(topic, value=b"x" * 100, partition=i % 50)
    assert producer.flush(10) == 0
    assert len(_consume_values(kafka, topic, expected=2000)) == 2000
    after = kafka.brokers_cpu_s()
    assert after > before > 0


def test_transactional_producer_commits_and_aborts(kafka, unique_name):
    topic = kafka.create_topic(unique_name, partitions=2)
    producer = Producer({**kafka.client_config(), "transactional.id": unique_name})
    producer.init_transactions(30)

    producer.begin_transaction()
    producer.produce(topic, value=b"aborted")
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"committed")
    producer.commit_transaction(30)

    assert _consume_values(kafka, topic, expected=1, **{"isolation.level": "read_committed"}) == [b"committed"]


def test_factory_applies_broker_settings(kafka_factory, kafka):
    setting = "transaction.partition.verification.enable"
    custom = kafka_factory(**{setting: "false"})

    assert _broker_setting(custom, setting) == "false"
    assert _broker_setting(kafka, setting) == "true"  # the default, so the override above is real


@pytest.mark.cluster3
def test_three_broker_cluster(kafka_cluster3, unique_name):
    print(f"\nKafka {kafka_cluster3.version} three brokers ready in {kafka_cluster3.startup_seconds:.1f} s")
    assert len(kafka_cluster3.bootstrap_servers.split(",")) == 3
    metadata = kafka_cluster3.admin_client().list_topics(timeout=10)
    assert set(metadata.brokers) == {1, 2, 3}

    topic = kafka_cluster3.create_topic(unique_name, partitions=3, replication_factor=3)
    partitions = kafka_cluster3.admin_client().list_topics(topic, timeout=10).topics[topic].partitions
    assert len(partitions) == 3
    for partition in partitions.values():
        assert sorted(partition.replicas) == [1, 2, 3]
        assert sorted(partition.isrs) == [1, 2, 3]


def test_restarted_broker_keeps_its_data(kafka_factory, unique_name):
    cluster = kafka_factory()
    topic = cluster.create_topic(unique_name)
    producer = Producer(cluster.client_config())
    producer.produce(topic, value=b"before the crash")
    assert producer.flush(10) == 0
    del producer  # else it keeps logging refused connections while the node is down

    cluster.kill_broker(1)
    assert cluster.running_broker_ids() == []
    cluster.start_broker(1)

    # With a single node, nothing but its own log directory can hold the record.
    assert _consume_values(cluster, topic, expected=1) == [b"before the crash"]


@pytest.mark.cluster3
def test_killed_broker_rejoins_cluster(kafka_factory, unique_name):
    cluster = kafka_factory(n_brokers=3)
    topic = cluster.create_topic(unique_name, replication_factor=3)

    cluster.kill_broker(3)
    assert cluster.running_broker_ids() == [1, 2]
    producer = Producer({**cluster.client_config(), "acks": "all"})
    producer.produce(topic, value=b"written by two of three")
    assert producer.flush(30) == 0  # min ISR is 1 for ordinary topics
    del producer
    # Until its session expires the controller still counts node 3 and may make it a new topic's
    # leader, which then never comes up; wait until the cluster has fenced it.
    _wait_for(lambda: _registered_brokers(cluster) == [1, 2], timeout=30, what="node 3 fenced")
    cluster.create_topic(f"{unique_name}-while-down", replication_factor=2)

    cluster.start_broker(3)
    assert cluster.running_broker_ids() == [1, 2, 3]
    _wait_for(lambda: _isr(cluster, topic) == [1, 2, 3], timeout=60, what="node 3 back in the ISR")


def test_stop_leaves_no_java_process(kafka_factory):
    cluster = kafka_factory(n_brokers=3)
    assert len(_java_processes_under(cluster.workdir)) == 3

    started = time.monotonic()
    cluster.stop()
    print(f"\nthree brokers stopped in {time.monotonic() - started:.1f} s")

    assert cluster.running_broker_ids() == []
    assert _java_processes_under(cluster.workdir) == []
    cluster.stop()  # idempotent


def test_run_tool_uses_kafka_tools(kafka, unique_name):
    producer = Producer({**kafka.client_config(), "transactional.id": unique_name})
    producer.init_transactions(30)

    result = kafka.run_tool(
        "org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", kafka.bootstrap_servers, "list"
    )

    assert result.returncode == 0, result.stderr
    assert unique_name in result.stdout


# -- helpers ---------------------------------------------------------------------------------


def _consume_values(cluster: KafkaCluster, topic: str, expected: int, timeout: float = 30, **settings) -> list[bytes]:
    """Read every partition of `topic` from the start; assigned, so no consumer group is involved."""
    consumer = Consumer({**cluster.client_config(), "group.id": f"{topic}-reader", "enable.auto.commit": False, **settings})
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING) for partition in partitions])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(values) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            values.append(message.value())
        # Anything beyond `expected` (e.g. an aborted record leaking through) must show up too.
        extra = consumer.poll(1.0)
        if extra is not None and extra.error() is None:
            values.append(extra.value())
    finally:
        consumer.close()
    return values


def _broker_setting(cluster: KafkaCluster, name: str) -> str:
    resource = ConfigResource(ResourceType.BROKER, str(cluster.broker_ids[0]))
    configs = cluster.admin_client().describe_configs([resource])[resource].result(10)
    return configs[name].value


def _registered_brokers(cluster: KafkaCluster) -> list[int]:
    return sorted(cluster.admin_client().list_topics(timeout=10).brokers)


def _isr(cluster: KafkaCluster, topic: str) -> list[int]:
    partition = cluster.admin_client().list_topics(topic, timeout=10).topics[topic].partitions[0]
    return sorted(partition.isrs)


def _wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.5)


def _java_processes_under(directory: Path) -> list[int]:
    """Pids of processes whose command line mentions `directory` (the cluster's own JVMs)."""
    marker = str(directory).encode()
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            arguments = cmdline.read_bytes()
        except OSError:
            continue  # exited while we looked
        if marker in arguments and b"java" in arguments:
            pids.append(int(cmdline.parent.name))
    return pids
