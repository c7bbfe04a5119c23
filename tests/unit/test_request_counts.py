"""Requests per command stay O(brokers): the facade over the in-memory cluster (tests/support)."""

from kafkatxn.kafka import protocol as proto
from tests.support.fake_kafka import FakeCluster, KafkaModel


def test_describe_producers_sends_one_request_per_leader_for_thousands_of_partitions():
    model = KafkaModel(brokers=(1, 2, 3))
    tps = [model.add_partition(f"t{i // 100}", i % 100, leader=1 + i % 3) for i in range(3000)]
    cluster = FakeCluster(model)

    answer = cluster.describe_producers(tps)

    assert not answer.missing and set(answer.value) == set(tps)
    sent = [(node, request) for node, request in model.sent if isinstance(request, proto.DescribeProducers)]
    assert sorted(node for node, _ in sent) == [1, 2, 3]
    assert sorted(len(request.partitions) for _, request in sent) == [1000, 1000, 1000]
