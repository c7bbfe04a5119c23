"""Consumer groups: ListGroups (each broker its own groups), FindCoordinator for groups, OffsetFetch
and DescribeGroups (all of a coordinator's groups in one request where the broker allows it)."""

from __future__ import annotations

from typing import Any

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka.wire.names import error_name
from kafkatxn.kafka.wire.transactions_codec import coordinators, find_coordinator
from kafkatxn.model import TopicPartition

GROUP_KEY_TYPE = 0
# OffsetFetch v10 names topics by id, not by name: the batched form stays at v8-v9.
OFFSET_FETCH_BATCHED = (8, 9)
# One group per request: a null topic list (every committed offset) needs v2.
OFFSET_FETCH_SINGLE = (2, 7)
# require_stable (KIP-447), which read_committed consumers set: v7+.
OFFSET_FETCH_STABLE = 7
UNSTABLE_OFFSET_COMMIT = "UNSTABLE_OFFSET_COMMIT"
# ListGroups answers each group's state from v4 on.
LIST_GROUPS_STATE = 4
LIST_GROUPS_TYPE = 5


def _list_groups(_wire: Any, _request: p.ListGroups) -> Any:
    from kafka.protocol.admin.groups import ListGroupsRequest

    return ListGroupsRequest(states_filter=[], types_filter=[])


def _decode_list_groups(_request: p.ListGroups, resp: Any) -> p.ListGroupsResponse:
    # GroupState is v4+ (KIP-518): an older answer says no state (""), never one guessed.
    # GroupType (classic or consumer: KIP-848) is v5+.
    version = resp.version
    return p.ListGroupsResponse(error_name(resp.error_code), tuple(
        p.ListedGroup(g.group_id, g.protocol_type or "", (g.group_state or "") if version >= LIST_GROUPS_STATE else "",
                      (g.group_type or "") if version >= LIST_GROUPS_TYPE else "")
        for g in resp.groups
    ))


def _find_group_coordinators(_wire: Any, request: p.FindGroupCoordinators) -> Any:
    return find_coordinator(request.group_ids, GROUP_KEY_TYPE, request.batched)


def _decode_find_group_coordinators(request: p.FindGroupCoordinators, resp: Any) -> p.FindGroupCoordinatorsResponse:
    return p.FindGroupCoordinatorsResponse(
        tuple(p.GroupCoordinator(*c) for c in coordinators(request.group_ids, request.batched, resp))
    )


def _topics(partitions: tuple[TopicPartition, ...], topic_cls: Any) -> list[Any] | None:
    """The request's topics for these partitions (None: every committed offset)."""
    if not partitions:
        return None
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return [topic_cls(name=t, partition_indexes=ps) for t, ps in by_topic.items()]


def _offset_fetch(_wire: Any, request: p.OffsetFetch) -> Any:
    from kafka.protocol.consumer.group import OffsetFetchRequest

    stable = bool(request.stable)
    asked = request.stable or ((),) * len(request.group_ids)
    if request.batched:
        group_cls = OffsetFetchRequest.OffsetFetchRequestGroup
        return OffsetFetchRequest(
            groups=[group_cls(group_id=g, topics=_topics(tps, group_cls.OffsetFetchRequestTopics))
                    for g, tps in zip(request.group_ids, asked)], require_stable=stable,
            min_version=OFFSET_FETCH_BATCHED[0], max_version=OFFSET_FETCH_BATCHED[1],
        )
    (group,) = request.group_ids
    return OffsetFetchRequest(
        group_id=group, topics=_topics(asked[0], OffsetFetchRequest.OffsetFetchRequestTopic), require_stable=stable,
        min_version=OFFSET_FETCH_STABLE if stable else OFFSET_FETCH_SINGLE[0], max_version=OFFSET_FETCH_SINGLE[1],
    )


def _committed(topics: Any) -> dict[TopicPartition, int]:
    """The committed offsets in an answer's topics (a partition without one answers -1)."""
    return {
        TopicPartition(t.name, part.partition_index): part.committed_offset
        for t in topics
        for part in t.partitions
        if part.committed_offset >= 0 and not part.error_code
    }


def _unstable(topics: Any) -> frozenset[TopicPartition]:
    """The partitions answered UNSTABLE_OFFSET_COMMIT (asked with require_stable)."""
    return frozenset(
        TopicPartition(t.name, part.partition_index)
        for t in topics
        for part in t.partitions
        if part.error_code and error_name(part.error_code) == UNSTABLE_OFFSET_COMMIT
    )


def _group_offsets(group: str, error_code: int, topics: Any, asked: tuple[TopicPartition, ...]) -> p.GroupOffsets:
    error = error_name(error_code)
    if error == UNSTABLE_OFFSET_COMMIT:  # said of the group as a whole: of every partition asked
        return p.GroupOffsets(group, None, {}, frozenset(asked))
    return p.GroupOffsets(group, error, _committed(topics), _unstable(topics))


def _decode_offset_fetch(request: p.OffsetFetch, resp: Any) -> p.OffsetFetchResponse:
    asked = dict(zip(request.group_ids, request.stable)) if request.stable else {}
    if request.batched:
        return p.OffsetFetchResponse(tuple(
            _group_offsets(g.group_id, g.error_code, g.topics, asked.get(g.group_id, ())) for g in resp.groups
        ))
    (group,) = request.group_ids
    return p.OffsetFetchResponse((_group_offsets(group, resp.error_code, resp.topics, asked.get(group, ())),))


def _describe_groups(_wire: Any, request: p.DescribeGroups) -> Any:
    from kafka.protocol.admin.groups import DescribeGroupsRequest

    return DescribeGroupsRequest(groups=list(request.group_ids), include_authorized_operations=False)


def _assigned(group: Any) -> frozenset[TopicPartition]:
    """Every member's partitions, from the consumer protocol's assignment bytes."""
    if group.protocol_type != "consumer":
        return frozenset()
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

    out: set[TopicPartition] = set()
    for member in group.members:
        raw = member.member_assignment
        if not raw:
            continue  # a member that has not been assigned yet
        assignment = raw if not isinstance(raw, (bytes, bytearray, memoryview)) else ConsumerProtocolAssignment.decode(bytes(raw))
        out.update(TopicPartition(t.topic, i) for t in assignment.assigned_partitions for i in t.partitions)
    return frozenset(out)


def _described(group: Any) -> p.DescribedGroup:
    error = error_name(group.error_code)
    if error:
        return p.DescribedGroup(group.group_id, error)
    try:
        assigned = _assigned(group)
    except Exception:  # noqa: BLE001 - a member's bytes this client cannot read: the group's assignment is unknown
        return p.DescribedGroup(group.group_id, "undecodable member assignment", group.group_state, group.protocol_type)
    return p.DescribedGroup(group.group_id, None, group.group_state, group.protocol_type, assigned)


def _decode_describe_groups(_request: p.DescribeGroups, resp: Any) -> p.DescribeGroupsResponse:
    return p.DescribeGroupsResponse(tuple(_described(g) for g in resp.groups))


CODECS = {
    p.ListGroups: (_list_groups, _decode_list_groups),
    p.FindGroupCoordinators: (_find_group_coordinators, _decode_find_group_coordinators),
    p.OffsetFetch: (_offset_fetch, _decode_offset_fetch),
    p.DescribeGroups: (_describe_groups, _decode_describe_groups),
}
