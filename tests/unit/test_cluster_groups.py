"""Cluster.list_groups: a broker answering with an error must not make a group look unknown."""

from __future__ import annotations

import concurrent.futures
from types import SimpleNamespace

import pytest

from kafkatxn.kafka import Cluster
from kafkatxn.config import ConnectionConfig
from kafkatxn.errors import ClusterError


class FakeAdmin:
    """confluent-kafka's AdminClient.list_consumer_groups, answering a future per call.

    Kept at this layer on purpose: the code under test is Cluster.list_groups itself (its retry on
    broker errors and its deadline), which tests/support/fake_kafka.FakeCluster replaces with an
    answer from its model, because the confluent-kafka side has no typed wire to fake below it.
    """

    def __init__(self, answers):
        self.answers = list(answers)
        self.calls = 0

    def poll(self, timeout):
        return 0

    def list_consumer_groups(self, request_timeout):
        self.calls += 1
        valid, errors = self.answers[min(self.calls, len(self.answers)) - 1]
        future = concurrent.futures.Future()
        future.set_result(SimpleNamespace(valid=[SimpleNamespace(group_id=g) for g in valid], errors=errors))
        return future


def cluster_with(admin, timeout_ms=5000):
    cluster = Cluster(ConnectionConfig("127.0.0.1:1", timeout_ms=timeout_ms))
    cluster._admin = admin
    return cluster


def test_errors_are_asked_again_until_every_broker_answers():
    admin = FakeAdmin([(["a"], ["COORDINATOR_LOAD_IN_PROGRESS"]), (["b", "a"], [])])
    assert cluster_with(admin).list_groups() == ["a", "b"]
    assert admin.calls == 2


def test_errors_that_persist_are_an_error_not_a_short_list():
    admin = FakeAdmin([(["a"], ["COORDINATOR_NOT_AVAILABLE"])])
    with pytest.raises(ClusterError, match="COORDINATOR_NOT_AVAILABLE"):
        cluster_with(admin, timeout_ms=1200).list_groups()


def test_a_broker_that_never_lists_its_groups_is_a_named_missing_part_not_the_end_of_the_command():
    """The nemesis: one broker killed made `lso --groups` fail whole ("cannot reach any broker")
    although the others had listed their groups."""
    admin = FakeAdmin([(["a", "b"], ["COORDINATOR_NOT_AVAILABLE"])])
    listed = cluster_with(admin, timeout_ms=1200).list_groups_partial()
    assert listed.value == ["a", "b"]
    assert [str(m.subject) for m in listed.missing] == ["consumer groups"] and "COORDINATOR_NOT_AVAILABLE" in listed.missing[0].reason


def test_the_brokers_whose_groups_are_missing_are_named():
    """CI's nemesis: with broker 2 killed, `lso --groups` said only "some brokers did not list
    theirs: Local: Timed out"; the reader (and the nemesis) could not tell whose groups were left out."""
    from kafkatxn.kafka.session import BrokerSilent
    from kafkatxn.model import BrokerInfo, ClusterMetadata

    admin = FakeAdmin([(["a"], ["Local: Timed out"])])
    cluster = cluster_with(admin, timeout_ms=1200)
    brokers = tuple(BrokerInfo(i, "127.0.0.1", 9000 + i) for i in (1, 2, 3))
    cluster.metadata = lambda: ClusterMetadata("c", 1, brokers, ())
    probed = []

    def send_all(requests):
        probed.extend(node for node, _ in requests)
        return [BrokerSilent(node, 1.0) if node == 2 else object() for node, _ in requests]

    cluster._send_all = send_all
    listed = cluster.list_groups_partial()
    assert listed.value == ["a"] and probed == [1, 2, 3]
    (missing,) = listed.missing
    assert "broker 2" in missing.reason and "broker 1" not in missing.reason and "broker 3" not in missing.reason


def test_when_every_broker_answers_the_probe_the_reason_stays_general():
    from kafkatxn.model import BrokerInfo, ClusterMetadata

    admin = FakeAdmin([(["a"], ["COORDINATOR_NOT_AVAILABLE"])])
    cluster = cluster_with(admin, timeout_ms=1200)
    cluster.metadata = lambda: ClusterMetadata("c", 1, (BrokerInfo(1, "h", 1),), ())
    cluster._send_all = lambda requests: [object() for _ in requests]
    (missing,) = cluster.list_groups_partial().missing
    assert "COORDINATOR_NOT_AVAILABLE" in missing.reason and "broker" in missing.reason
