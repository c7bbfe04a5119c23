"""The harness's ZooKeeper mode, without a broker: which mode a version runs in, and the broker
settings that replace KRaft's (the brokers themselves: tests/integration/test_zookeeper_harness.py)."""

from __future__ import annotations

import logging

import pytest

from harness import KafkaCluster, KafkaHarnessError
from harness.broker import _Node
from harness.zookeeper import broker_properties, expired_at_startup, metadata_mode


def test_mode_follows_the_request_then_the_environment_then_the_release(monkeypatch):
    monkeypatch.delenv("KAFKA_METADATA_MODE", raising=False)
    assert [metadata_mode(v) for v in ("2.8.2", "3.9.1", "4.3.1")] == ["zookeeper", "kraft", "kraft"]
    assert metadata_mode("3.9.1", "zookeeper") == "zookeeper"
    monkeypatch.setenv("KAFKA_METADATA_MODE", "zookeeper")
    assert metadata_mode("3.9.1") == "zookeeper" and metadata_mode("3.9.1", "kraft") == "kraft"
    with pytest.raises(KafkaHarnessError, match="no ZooKeeper mode"):
        metadata_mode("4.3.1")
    with pytest.raises(KafkaHarnessError, match="ZooKeeper mode only"):
        metadata_mode("2.8.2", "kraft")
    with pytest.raises(KafkaHarnessError, match="must be one of"):
        metadata_mode("3.9.1", "zk")


def test_broker_properties_drop_the_controller_and_point_at_zookeeper():
    kraft = {
        "process.roles": "broker,controller", "node.id": "2", "controller.quorum.voters": "2@127.0.0.1:9",
        "controller.listener.names": "CONTROLLER",
        "listeners": "PLAINTEXT://127.0.0.1:1,SASL_SSL://127.0.0.1:2,CONTROLLER://127.0.0.1:3",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
        "log.dirs": "/d", "broker.session.timeout.ms": "3000",
    }
    zk = broker_properties(kraft, 2, "127.0.0.1:2181", "CONTROLLER")
    assert zk["listeners"] == "PLAINTEXT://127.0.0.1:1,SASL_SSL://127.0.0.1:2"
    assert zk["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL"
    assert (zk["broker.id"], zk["zookeeper.connect"], zk["log.dirs"]) == ("2", "127.0.0.1:2181", "/d")
    assert not {"process.roles", "node.id", "controller.quorum.voters", "controller.listener.names",
                "broker.session.timeout.ms"} & set(zk)


# What a restarted broker wrote in CI (Kafka 3.9.1, ZooKeeper mode, test_faults, session 55):
# its JVM stalled past the client's read timeout while starting, and KafkaServer.startup gave up.
EXPIRED_STARTING = """\
[2026-11-30 03:03:18,972] WARN Client session timed out, have not heard from server in 4092ms for session id 0x1000087ab220006 (org.apache.zookeeper.ClientCnxn)
[2026-11-30 03:03:21,097] INFO [ZooKeeperClient Kafka server] Session expired. (kafka.zookeeper.ZooKeeperClient)
[2026-11-30 03:03:21,277] ERROR [KafkaServer id=3] Fatal error during KafkaServer startup. Prepare to shutdown (kafka.server.KafkaServer)
org.apache.zookeeper.KeeperException$SessionExpiredException: KeeperErrorCode = Session expired for /feature
	at org.apache.zookeeper.KeeperException.create(KeeperException.java:134)
[2026-11-30 03:03:21,893] ERROR Exiting Kafka due to fatal exception during startup. (kafka.Kafka$)
org.apache.zookeeper.KeeperException$SessionExpiredException: KeeperErrorCode = Session expired for /feature
"""
# Expired, then a new session, and died of something else: starting again would not help.
OTHER_FATAL = """\
[2026-11-30 03:03:21,097] INFO [ZooKeeperClient Kafka server] Session expired. (kafka.zookeeper.ZooKeeperClient)
[2026-11-30 03:03:22,277] ERROR [KafkaServer id=3] Fatal error during KafkaServer startup. Prepare to shutdown (kafka.server.KafkaServer)
kafka.common.InconsistentClusterIdException: The Cluster ID x doesn't match stored clusterId Some(y) in meta.properties.
"""
STARTED = "[2026-11-30 03:03:25,000] INFO [KafkaServer id=3] started (kafka.server.KafkaServer)\n"


def test_a_broker_is_started_again_only_when_it_died_starting_of_an_expired_session():
    assert expired_at_startup(EXPIRED_STARTING)
    assert not expired_at_startup(OTHER_FATAL)
    # A session that expired once started is renewed by the broker itself: nothing died.
    assert not expired_at_startup(EXPIRED_STARTING.split("[2026-11-30 03:03:21,277]")[0] + STARTED)
    assert not expired_at_startup("")


class _Exited:
    returncode = 1

    def poll(self):
        return 1


class _Running:
    returncode = None

    def poll(self):
        return None


def _cluster_whose_node_died(tmp_path, monkeypatch, mode: str, again: str | None):
    """A one-node cluster whose node died writing EXPIRED_STARTING; each start again writes ``again``
    (None: it runs). Returns the cluster and the list of starts again."""
    monkeypatch.setattr(KafkaCluster, "libs_dir", property(lambda self: tmp_path))
    cluster = KafkaCluster(tmp_path, kafka_version="3.9.1", metadata_mode=mode, name="zk-unit")
    node = _Node(1, tmp_path / "zk-unit-1", {"PLAINTEXT": 1})
    node.directory.mkdir()
    node.server_log.write_text("[2026-11-30 03:01:00,000] INFO an earlier start (kafka.server.KafkaServer)\n")
    node.log_start = node.server_log.stat().st_size
    with open(node.server_log, "a") as log:
        log.write(EXPIRED_STARTING)
    node.process = _Exited()
    cluster._nodes = {1: node}
    if cluster.zookeeper is not None:
        monkeypatch.setattr(cluster.zookeeper, "registered", lambda broker_id: False)
    launches = []

    def launch(node, libs_dir):
        launches.append(node.node_id)
        node.log_start = node.server_log.stat().st_size
        with open(node.server_log, "a") as log:
            log.write(again or STARTED)
        node.process = _Exited() if again else _Running()

    def each_serves(node_ids, deadline):  # the broker's answers, here: whether it is alive
        cluster._check_alive(deadline, "node 1 to listen")

    monkeypatch.setattr(cluster, "_launch", launch)
    monkeypatch.setattr(cluster, "_wait_until_each_serves", each_serves)
    return cluster, launches


def test_a_zookeeper_mode_node_that_died_starting_of_an_expired_session_is_started_again(tmp_path, monkeypatch, caplog):
    cluster, launches = _cluster_whose_node_died(tmp_path, monkeypatch, "zookeeper", again=None)
    with caplog.at_level(logging.WARNING, logger="harness.broker"):
        cluster._wait_until_serving([1], deadline=float("inf"))
    assert launches == [1]
    assert "node 1 died starting, its ZooKeeper session expired: starting it again (1 of 2)" in caplog.text


def test_starting_again_is_bounded_and_only_for_what_may_help(tmp_path, monkeypatch):
    cluster, launches = _cluster_whose_node_died(tmp_path, monkeypatch, "zookeeper", again=EXPIRED_STARTING)
    with pytest.raises(KafkaHarnessError, match="node 1 .exit code 1. exited while waiting for node 1 to listen"):
        cluster._wait_until_serving([1], deadline=float("inf"))
    assert launches == [1, 1]
    (tmp_path / "other").mkdir()
    cluster, launches = _cluster_whose_node_died(tmp_path / "other", monkeypatch, "zookeeper", again=None)
    with open(cluster._nodes[1].server_log, "a") as log:
        log.write(OTHER_FATAL)  # this start's last words: another cause
    with pytest.raises(KafkaHarnessError, match="exited while waiting"):
        cluster._wait_until_serving([1], deadline=float("inf"))
    assert launches == []


def test_a_kraft_node_is_never_started_again(tmp_path, monkeypatch):
    cluster, launches = _cluster_whose_node_died(tmp_path, monkeypatch, "kraft", again=None)
    with pytest.raises(KafkaHarnessError, match="exited while waiting"):
        cluster._wait_until_serving([1], deadline=float("inf"))
    assert launches == []
