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
    client = _kafka_python_admin(bootstrap, timeout)
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


def wait_for_full_isr(bootstrap: str, topics: Iterable[str], timeout: float = 60) -> None:
    """Return once every partition of ``topics`` has all its replicas in sync: a broker just
    started again is a replica a preferred election may not choose before it has caught up."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    names = list(topics)
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(timeout=10)
        parts = [p for n in names if n in md.topics for p in md.topics[n].partitions.values()]
        if parts and all(set(p.isrs) == set(p.replicas) for p in parts):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"replicas of {names} not all in sync after {timeout} s")
        time.sleep(0.3)


def _kafka_python_admin(bootstrap: str, timeout: float):
    """kafka-python's admin client (confluent-kafka has no partition reassignment) from the first
    server that answers: its bootstrap gives up on a stopped broker instead of trying the next."""
    from kafka.admin import KafkaAdminClient

    last: Exception | None = None
    for server in bootstrap.split(","):
        try:
            return KafkaAdminClient(bootstrap_servers=server, request_timeout_ms=int(timeout * 1000))
        except Exception as exc:  # noqa: BLE001 - the next server
            last = exc
    assert last is not None
    raise last
