"""Consumer groups: ListGroups (each broker its own groups), FindCoordinator for groups, OffsetFetch
and DescribeGroups (all of a coordinator's groups in one request where the broker allows it)."""

from __future__ import annotations

from typing import Any

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka.wire.names import error_name
from kafkatxn.kafka.wire.transactions import coordinators, find_coordinator
from kafkatxn.model import TopicPartition

GROUP_KEY_TYPE = 0
# OffsetFetch v10 names topics by id, not by name: the batched form stays at v8-v9.
OFFSET_FETCH_BATCHED = (8, 9)
# One group per request: a null topic list (every committed offset) needs v2.
OFFSET_FETCH_SINGLE = (2, 7)


def _list_groups(_wire: Any, _request: p.ListGroups) -> Any:
    from kafka.protocol.admin.groups import ListGroupsRequest

    return ListGroupsRequest(states_filter=[], types_filter=[])


def _decode_list_groups(_request: p.ListGroups, resp: Any) -> p.ListGroupsResponse:
    return p.ListGroupsResponse(
        error_name(resp.error_code), tuple(p.ListedGroup(g.group_id, g.protocol_type or "") for g in resp.groups)
    )


def _find_group_coordinators(_wire: Any, request: p.FindGroupCoordinators) -> Any:
    return find_coordinator(request.group_ids, GROUP_KEY_TYPE, request.batched)


def _decode_find_group_coordinators(request: p.FindGroupCoordinators, resp: Any) -> p.FindGroupCoordinatorsResponse:
    return p.FindGroupCoordinatorsResponse(
        tuple(p.GroupCoordinator(*c) for c in coordinators(request.group_ids, request.batched, resp))
    )


def _offset_fetch(_wire: Any, request: p.OffsetFetch) -> Any:
    from kafka.protocol.consumer import OffsetFetchRequest

    if request.batched:
        group_cls = OffsetFetchRequest.OffsetFetchRequestGroup
        return OffsetFetchRequest(
            groups=[group_cls(group_id=g, topics=None) for g in request.group_ids], require_stable=False,
            min_version=OFFSET_FETCH_BATCHED[0], max_version=OFFSET_FETCH_BATCHED[1],
        )
    (group,) = request.group_ids
    return OffsetFetchRequest(
        group_id=group, topics=None, require_stable=False,
        min_version=OFFSET_FETCH_SINGLE[0], max_version=OFFSET_FETCH_SINGLE[1],
    )


def _committed(topics: Any) -> dict[TopicPartition, int]:
    """The committed offsets in an answer's topics (a partition without one answers -1)."""
    return {
        TopicPartition(t.name, part.partition_index): part.committed_offset
        for t in topics
        for part in t.partitions
        if part.committed_offset >= 0 and not part.error_code
    }


def _decode_offset_fetch(request: p.OffsetFetch, resp: Any) -> p.OffsetFetchResponse:
    if request.batched:
        return p.OffsetFetchResponse(tuple(
            p.GroupOffsets(g.group_id, error_name(g.error_code), _committed(g.topics)) for g in resp.groups
        ))
    (group,) = request.group_ids
    return p.OffsetFetchResponse((p.GroupOffsets(group, error_name(resp.error_code), _committed(resp.topics)),))


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
