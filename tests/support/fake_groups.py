"""A fake cluster of consumer groups for the unit tests of the group wire (test_cluster_groups) and
of KIP-848 groups (test_consumer_groups_kip848): one place that says what such a model holds."""

from __future__ import annotations

from kafkatxn.model import TopicPartition
from tests.support.fake_kafka import KafkaModel

O0, O1, P0 = TopicPartition("orders", 0), TopicPartition("orders", 1), TopicPartition("payments", 0)


def model_with_groups(consumer=(), brokers=(1, 2), **coordinators: int) -> KafkaModel:
    """One group per keyword, coordinated by that broker, with a commit on orders-0; those named in
    ``consumer`` are KIP-848 consumer groups."""
    model = KafkaModel(brokers=brokers)
    model.add_partition("orders", 0, leader=brokers[0], lso=10, hw=10)
    model.add_partition("orders", 1, leader=brokers[-1], lso=10, hw=10)
    model.add_partition("payments", 0, leader=brokers[0], lso=5, hw=5)
    for group, node in coordinators.items():
        model.groups[group] = {O0: 3}
        model.group_coordinators[group] = node
    model.consumer_groups = set(consumer)
    return model
