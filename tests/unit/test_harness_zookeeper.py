"""The harness's ZooKeeper mode, without a broker: which mode a version runs in, and the broker
settings that replace KRaft's (the brokers themselves: tests/integration/test_zookeeper_harness.py)."""

from __future__ import annotations

import pytest

from harness import KafkaHarnessError
from harness.zookeeper import broker_properties, metadata_mode


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
