"""Consumer groups read over the wire on 3 real brokers: many groups cost a few requests per
coordinator (ListGroups, OffsetFetch and DescribeGroups batched), the answers equal the commits made
with librdkafka's admin API, and the group path builds no librdkafka client.

The commits compared with come from the client that made them, never from kafkatxn.
"""

from __future__ import annotations

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition as CTP
from confluent_kafka.admin import AdminClient

from harness.scenarios import create_topic, unique
from kafkatxn.config import ConnectionConfig
from kafkatxn.kafka import Cluster
from kafkatxn.model import TopicPartition
from tests.support.groups import commit

pytestmark = pytest.mark.integration

GROUPS = 30


def test_many_groups_cost_a_few_requests_per_coordinator_and_no_librdkafka_client(kafka_cluster3):
    bootstrap = kafka_cluster3.bootstrap_servers
    topic = unique("groups-wire")
    create_topic(bootstrap, topic, partitions=3)
    tps = [TopicPartition(topic, p) for p in range(3)]
    made = {unique("groups-wire-g"): {tp: 1 + i % 5 + tp.partition for tp in tps[: 1 + i % 3]} for i in range(GROUPS)}
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    # Twice, the same offsets: Kafka 4's coordinator answers ListGroups and OffsetFetch from what its
    # log has committed, and the last commit of a __consumer_offsets partition was seen to stay out
    # of both (librdkafka's list too) until something else is written there.
    for _ in range(2):
        for group, offsets in made.items():
            request = [ConsumerGroupTopicPartitions(group, [CTP(tp.topic, tp.partition, off) for tp, off in offsets.items()])]
            commit(lambda request=request, group=group: admin.alter_consumer_group_offsets(request, request_timeout=20)[group].result(30))

    with Cluster(ConnectionConfig(bootstrap_servers=bootstrap, timeout_ms=20_000)) as cluster:
        listed = cluster.list_groups_partial()
        # A group a broker does not list (see above) is placed with FindCoordinator.
        unlisted = set(made) - set(listed.value)
        assert not listed.missing and len(unlisted) < GROUPS // 2, unlisted
        offsets = cluster.group_offsets(sorted(made))
        assert not offsets.missing and offsets.value == made
        assigned = cluster.group_assignments(sorted(made))
        assert not assigned.missing and assigned.value == {}  # committed with no member: Empty, no settled assignment
        starts = cluster.log_start_offsets(tps)
        assert not starts.missing and starts.value == {tp: 0 for tp in tps}
        # Each broker lists the groups it coordinates: FindCoordinator only for those it did not
        # list, all in one request; one OffsetFetch per coordinator (3 brokers), not one or more per
        # group. ListGroups (v4+) lists each group Empty: only the groups it did not list are
        # described (one DescribeGroups per coordinator), the answer the same.
        counts = cluster.requests
        assert (counts["ListGroups"], counts["FindCoordinator"]) == (3, 1 if unlisted else 0), counts
        assert 1 <= counts["OffsetFetch"] <= 3, counts
        assert (1 <= counts["DescribeGroups"] <= 3) if unlisted else counts["DescribeGroups"] == 0, counts
        assert cluster._admin is None  # the group path needs no librdkafka admin client

        unknown = unique("groups-wire-none")
        named = cluster.group_offsets([unknown, sorted(made)[0]])
        assert named.value == {unknown: {}, sorted(made)[0]: made[sorted(made)[0]]} and not named.missing
        assert counts["FindCoordinator"] == (2 if unlisted else 1)  # the unknown name, placed in one request
