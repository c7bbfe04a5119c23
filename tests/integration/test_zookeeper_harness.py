"""The harness's ZooKeeper mode (harness/zookeeper.py) on Kafka 3.9.x, the last line that has it: the
cluster really runs on its own ZooKeeper, serves transactions as Kafka's own tool sees them, and a
killed broker comes back (its old registration expires first). ``ZOOKEEPER_KAFKA_VERSION`` picks
another 3.x release."""

from __future__ import annotations

import os

import pytest

from harness import KafkaCluster
from harness.scenarios import create_topic, run_transaction, unique
from tests.support.cli_helpers import run_cli_subprocess

pytestmark = pytest.mark.integration

VERSION = os.environ.get("ZOOKEEPER_KAFKA_VERSION", "3.9.1")


def test_a_zookeeper_mode_cluster_serves_transactions_and_survives_a_killed_broker(kafka_workroot):
    cluster = KafkaCluster(kafka_workroot / unique("zk"), n_brokers=2, kafka_version=VERSION,
                           metadata_mode="zookeeper", name="zk")
    with cluster:
        properties = cluster.node_dir(1).joinpath("server.properties").read_text()
        assert f"zookeeper.connect={cluster.zookeeper.connect}" in properties and "process.roles" not in properties
        assert cluster.zookeeper.registered(1) and cluster.zookeeper.registered(2)
        bootstrap = cluster.bootstrap_servers
        topic = unique("zk-orders")
        create_topic(bootstrap, topic, partitions=2, replication_factor=2)
        opened = run_transaction(bootstrap, topic, [0, 1], "open")
        try:
            ours = run_cli_subprocess("transactions", "list", "-b", bootstrap, "--timeout", "20s", "-o", "json",
                                      "--state", "Ongoing")
            assert ours.code == 0, ours.stderr
            theirs = cluster.run_tool("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", bootstrap, "list")
            assert theirs.returncode == 0, theirs.stderr
            assert opened.transactional_id in ours.stdout and opened.transactional_id in theirs.stdout
            version = run_cli_subprocess("cluster", "-b", bootstrap, "--timeout", "20s", "-o", "json")
            assert f'"kafka_version": "{VERSION.rsplit(".", 1)[0]}"' in version.stdout
        finally:
            opened.abort()

        cluster.kill_broker(2)  # its ZooKeeper session outlives it by a few seconds
        assert cluster.zookeeper.registered(2)
        cluster.start_broker(2)  # waits for the old registration to expire, then for the broker to serve
        assert cluster.running_broker_ids() == [1, 2] and cluster.zookeeper.registered(2)
    assert not cluster.zookeeper.running
