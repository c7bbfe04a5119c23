"""What librdkafka used to serve and the wire serves now, through the real facade over the fake wire:
broker configs (DescribeConfigs), the cluster's description and authorized operations, the
topic-visibility probe and fencing (FindCoordinator + InitProducerId).

The fake wire answers each request from the model (tests/support/fake_kafka.py); the routing, the
per-broker budget, the retries and the error lines are the facade's own.
"""

from __future__ import annotations

import time

import pytest

from kafkatxn.errors import ClusterError
from kafkatxn.kafka import facade
from kafkatxn.kafka import markers
from kafkatxn.kafka import protocol as proto
from kafkatxn.model import Broker, BrokerInfo, ConfigValue, TopicPartition, TransactionDescription
from tests.support.fake_kafka import MAX_TIMEOUT_CONFIG, FakeCluster, KafkaModel

ORDERS = TopicPartition("orders", 0)


def sent(model, kind):
    return [(node, r) for node, r in model.sent if isinstance(r, kind)]


# -- DescribeConfigs ------------------------------------------------------------------------------


def test_broker_configs_ask_each_broker_for_its_own_in_one_round_trip_and_name_who_did_not_answer():
    model = KafkaModel(brokers=(1, 2, 3))
    model.max_timeouts = {1: "120000"}
    model.configs_denied = {2}
    model.timeouts[3] = {"DescribeConfigs"}
    got = FakeCluster(model, timeout_s=4).broker_configs([MAX_TIMEOUT_CONFIG])
    assert sorted((node, r.resource_name, r.names) for node, r in sent(model, proto.DescribeConfigs)) == [
        (1, "1", (MAX_TIMEOUT_CONFIG,)), (2, "2", (MAX_TIMEOUT_CONFIG,)), (3, "3", (MAX_TIMEOUT_CONFIG,)),
    ]
    assert got.value == {1: {MAX_TIMEOUT_CONFIG: ConfigValue("120000", "static_broker_config", False)}}
    assert [(m.subject, m.reason) for m in got.missing] == [
        (Broker(2), "not authorized: needs DESCRIBE_CONFIGS on Cluster"), (Broker(3), "timed out"),
    ]
    assert got.missing[0].not_authorized and not got.missing[1].not_authorized
    assert sent(model, proto.ApiVersions) == []  # no probe first: the request itself finds a dead broker


def test_a_broker_silent_before_its_configs_are_asked_costs_nothing_more():
    model = KafkaModel(brokers=(1, 2))
    model.timeouts[2] = {"ApiVersions"}
    cluster = FakeCluster(model)
    facade.Cluster.api_versions(cluster, [1, 2])  # broker 2 uses up its share here
    got = cluster.broker_configs([MAX_TIMEOUT_CONFIG])
    assert [node for node, _r in sent(model, proto.DescribeConfigs)] == [1]
    assert set(got.value) == {1} and [m.subject for m in got.missing] == [Broker(2)]


# -- the cluster: description, authorized operations, topic visibility ---------------------------


def test_describe_cluster_is_the_metadata_with_its_racks_and_controller():
    model = KafkaModel(brokers=(1, 2))
    cluster = FakeCluster(model)
    described = cluster.describe_cluster()
    assert described.brokers == (BrokerInfo(1, "127.0.0.1", 9091), BrokerInfo(2, "127.0.0.1", 9092))
    assert described.controller_id == 1 and described.cluster_id == "fake-cluster"


def test_cluster_operations_come_from_describe_cluster_or_from_metadata_on_older_brokers():
    model = KafkaModel(brokers=(1,), cluster_operations={"DESCRIBE", "CLUSTER_ACTION"})
    assert FakeCluster(model).cluster_authorized_operations() == {"DESCRIBE", "CLUSTER_ACTION"}
    assert [type(r) for _n, r in model.sent] == [proto.ClusterOperations]
    del model.api_versions["DescribeCluster"]  # before Kafka 2.8
    model.api_versions["Metadata"] = (0, 9)
    model.sent.clear()
    assert FakeCluster(model).cluster_authorized_operations() == {"DESCRIBE", "CLUSTER_ACTION"}
    assert [type(r) for _n, r in model.sent] == [proto.MetadataClusterOperations]
    model.api_versions["Metadata"] = (0, 7)  # neither says: no operations claimed
    model.sent.clear()
    assert FakeCluster(model).cluster_authorized_operations() == set() and model.sent == []


@pytest.mark.parametrize("filtered", [True, False])
def test_the_topic_visibility_probe_is_one_topics_metadata_on_the_wire(filtered):
    model = KafkaModel(brokers=(1,), topics_filtered=filtered)
    cluster = FakeCluster(model)
    assert cluster.topic_list_filtered() is filtered
    ((_node, probe),) = sent(model, proto.TopicMetadata)
    assert probe.topic.startswith("~kafkatxn-visibility-probe-")


def test_a_topic_visibility_probe_without_an_answer_is_none_and_asked_again():
    model = KafkaModel(brokers=(1,), topics_filtered=None)  # the fake wire: the probe times out
    cluster = FakeCluster(model, timeout_s=4)
    assert cluster.topic_list_filtered() is None
    model.topics_filtered = True
    cluster.restart_deadline()  # the next scrape
    assert cluster.topic_list_filtered() is True
    assert len(sent(model, proto.TopicMetadata)) == 2


# -- fencing: FindCoordinator + InitProducerId at the coordinator -----------------------------------


def open_transaction(model: KafkaModel, tid: str, coordinator: int) -> None:
    model.add_partition("orders", 0, leader=1, lso=10, hw=20)
    model.transactions[tid] = TransactionDescription(tid, coordinator, "Ongoing", 7, 3, 60_000, 1, frozenset({ORDERS}))


def test_fence_sends_init_producer_id_to_the_ids_coordinator_and_returns_once_the_abort_completed():
    model = KafkaModel(brokers=(1, 2))
    open_transaction(model, "app-1", coordinator=2)
    model.init_producer_id_errors = ["CONCURRENT_TRANSACTIONS", "CONCURRENT_TRANSACTIONS", "COORDINATOR_LOAD_IN_PROGRESS"]
    cluster = FakeCluster(model)
    retried = cluster.fence_transactional_id_retrying("app-1", 60_000)
    assert retried == ["CONCURRENT_TRANSACTIONS", "CONCURRENT_TRANSACTIONS", "COORDINATOR_LOAD_IN_PROGRESS"]
    inits = sent(model, proto.InitProducerId)
    assert [(node, r.transactional_id, r.transaction_timeout_ms) for node, r in inits] == [(2, "app-1", 60_000)] * 4
    assert model.offsets[ORDERS][0] == model.offsets[ORDERS][1]  # aborted: the LSO reached the end
    assert model.transactions["app-1"].producer_epoch == 5
    assert cluster.requests["InitProducerId"] == 4


def test_fence_finds_a_coordinator_that_moved_again():
    model = KafkaModel(brokers=(1, 2))
    open_transaction(model, "app-1", coordinator=2)
    model.coordinators["app-1"] = 1  # FindCoordinator names broker 1 first ...
    cluster = FakeCluster(model)
    original = cluster._send_all

    def moved_after_first_init(requests):
        answers = original(requests)
        if any(isinstance(r, proto.InitProducerId) for _n, r in requests):
            model.coordinators.pop("app-1", None)  # ... which answers NOT_COORDINATOR; then it names 2
        return answers

    cluster._send_all = moved_after_first_init
    assert cluster.fence_transactional_id_retrying("app-1", 60_000) == ["NOT_COORDINATOR"]
    assert [node for node, _r in sent(model, proto.InitProducerId)] == [1, 2]
    assert len(sent(model, proto.FindTransactionCoordinators)) == 2


def test_fence_not_authorized_names_the_acl_and_is_not_retried():
    model = KafkaModel(brokers=(1,))
    open_transaction(model, "app-1", coordinator=1)
    model.init_producer_id_errors = ["TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "CONCURRENT_TRANSACTIONS"]
    with pytest.raises(ClusterError) as refused:
        FakeCluster(model).fence_transactional_id_retrying("app-1", 60_000)
    assert str(refused.value) == "fencing transactional id 'app-1' failed: not authorized: needs WRITE on TransactionalId app-1"
    assert model.init_producer_id_errors == ["CONCURRENT_TRANSACTIONS"]


def test_a_coordinator_busy_until_the_deadline_ends_the_fence_within_it():
    model = KafkaModel(brokers=(1,))
    open_transaction(model, "app-1", coordinator=1)
    model.init_producer_id_errors = ["CONCURRENT_TRANSACTIONS"] * 1000
    started = time.monotonic()
    with pytest.raises(ClusterError) as busy:
        FakeCluster(model, timeout_s=2).fence_transactional_id_retrying("app-1", 60_000)
    assert time.monotonic() - started < 2
    assert str(busy.value) == "fencing transactional id 'app-1' failed: coordinator 1 answered CONCURRENT_TRANSACTIONS"
    assert model.offsets[ORDERS][0] == 10  # nothing aborted


def test_fence_with_a_timeout_over_the_brokers_maximum_says_which_setting():
    model = KafkaModel(brokers=(1,))
    open_transaction(model, "app-1", coordinator=1)
    model.init_producer_id_errors = ["INVALID_TRANSACTION_TIMEOUT"]
    with pytest.raises(ClusterError, match="larger than the brokers' transaction.max.timeout.ms"):
        FakeCluster(model).fence_transactional_id_retrying("app-1", 60_000_000)


def test_a_broker_newer_than_kafka_pythons_newest_release_is_that_release_or_newer():
    from kafka.protocol.broker_version_data import BROKER_API_VERSIONS

    from kafkatxn.kafka.wire.metadata_codec import _api_versions_response

    newest = max(BROKER_API_VERSIONS)
    known = dict(BROKER_API_VERSIONS[newest])
    name = ".".join(map(str, newest))
    assert _api_versions_response(known).inferred_version == name
    newer = {**known, 0: (known[0][0], known[0][1] + 1)}  # one more Produce version than that release
    assert _api_versions_response(newer).inferred_version == f"{name}+"
