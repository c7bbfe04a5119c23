"""Move partition leaders on a running cluster: each partition's replicas rotated, then a preferred
election, so the first replica of the new order leads (the same replicas: no data moves)."""

from __future__ import annotations

import time
from typing import Iterable


def rotate_leaders(bootstrap: str, topics: Iterable[str], timeout: float = 20) -> dict[tuple[str, int], int]:
    """Rotate the replica order of every partition of ``topics`` and elect the preferred leaders;
    return the partitions the controller elected, with the leader each should have now."""
    from confluent_kafka import ElectionType
    from confluent_kafka import TopicPartition as CkTopicPartition
    from confluent_kafka.admin import AdminClient
    from kafka.admin import KafkaAdminClient
    from kafka.structs import TopicPartition as KTP

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    md = admin.list_topics(timeout=timeout)
    moves = {
        KTP(name, p.id): list(p.replicas[1:]) + [p.replicas[0]]
        for name in topics if name in md.topics
        for p in md.topics[name].partitions.values() if len(p.replicas) > 1
    }
    if not moves:
        return {}
    client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(timeout * 1000))
    try:
        client.alter_partition_reassignments(moves)
    finally:
        client.close()
    time.sleep(0.5)  # same replicas in a new order: the controller applies it at once
    # confluent-kafka's election: kafka-python 3.0.12's elect_leaders sends each TopicPartition's repr
    # as the topic name, so nothing would be elected.
    elected = admin.elect_leaders(ElectionType.PREFERRED, [CkTopicPartition(tp.topic, tp.partition) for tp in moves]).result(timeout)
    done = {(tp.topic, tp.partition) for tp, error in elected.items() if error is None}
    return {(tp.topic, tp.partition): order[0] for tp, order in moves.items() if (tp.topic, tp.partition) in done}


def leaders(bootstrap: str, topics: Iterable[str], timeout: float = 10) -> dict[tuple[str, int], int]:
    """Each partition's leader as the metadata says now."""
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}).list_topics(timeout=timeout)
    return {(name, p.id): p.leader for name in topics if name in md.topics for p in md.topics[name].partitions.values()}
