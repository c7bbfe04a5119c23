"""ConsumerGroupDescribe (API key 69, KIP-848): how a consumer group of the new protocol (ListGroups
v5+ types it ``consumer``) is described; DescribeGroups answers such a group GROUP_ID_NOT_FOUND
("not a classic group"), as Kafka's ``kafka-consumer-groups.sh`` knows (it describes consumer-type
groups with this API, classic ones with DescribeGroups).

kafka-python 3.0 has this API's key but no class for it: the request is written and the answer read
here (:mod:`.describe_codec`), from Apache Kafka's ConsumerGroupDescribeRequest.json /
ConsumerGroupDescribeResponse.json (versions 0-1; v1, KIP-1099, adds each member's MemberType to the
answer and nothing to the request).

The answer is the typed :class:`~kafkatxn.kafka.protocol.DescribeGroupsResponse`, as DescribeGroups'
is: per group its error, state and the partitions its members are assigned now (each member's
``Assignment``, not its ``TargetAssignment``: what it owns, not what it will be given).
"""

from __future__ import annotations

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka.wire.describe_codec import Reader, describe_codecs
from kafkatxn.kafka.wire.names import error_name
from kafkatxn.model import TopicPartition

API_KEY = 69
# The versions this module writes and reads (the request's validVersions); the connection picks the
# highest the broker also has, as for every request.
MIN_VERSION, MAX_VERSION = 0, 1
MEMBER_TYPE_VERSION = 1  # the answer's Member.MemberType (int8), after TargetAssignment
CONSUMER = "consumer"


def _assignment(r: Reader, into: set[TopicPartition] | None) -> None:
    """An Assignment: TopicPartitions (TopicId, TopicName, Partitions), its tagged fields; the
    partitions added to ``into`` (None: read past)."""
    for _ in range(r.count()):
        r.skip_uuid()
        topic = r.string()
        partitions = [r.int32() for _ in range(r.count())]
        r.tagged_fields()
        if into is not None and topic is not None:
            into.update(TopicPartition(topic, i) for i in partitions)
    r.tagged_fields()


def _member(r: Reader, version: int, assigned: set[TopicPartition]) -> None:
    r.string()  # MemberId
    r.string()  # InstanceId
    r.string()  # RackId
    r.int32()  # MemberEpoch
    r.string()  # ClientId
    r.string()  # ClientHost
    for _ in range(r.count()):  # SubscribedTopicNames
        r.string()
    r.string()  # SubscribedTopicRegex
    _assignment(r, assigned)  # Assignment: what the member owns now
    _assignment(r, None)  # TargetAssignment: what it is to be given, not what it has
    if version >= MEMBER_TYPE_VERSION:
        r.int8()  # MemberType
    r.tagged_fields()


def _group(r: Reader, version: int) -> p.DescribedGroup:
    error = error_name(r.int16())
    r.string()  # ErrorMessage: words; the error's name is what the facade reads
    group_id = r.string() or ""
    state = r.string() or ""
    r.int32()  # GroupEpoch
    r.int32()  # AssignmentEpoch
    r.string()  # AssignorName
    assigned: set[TopicPartition] = set()
    for _ in range(r.count()):
        _member(r, version, assigned)
    r.int32()  # AuthorizedOperations (not asked for)
    r.tagged_fields()
    if error:
        return p.DescribedGroup(group_id, error)
    return p.DescribedGroup(group_id, None, state, CONSUMER, frozenset(assigned))


def read_answer(data: memoryview, version: int) -> tuple[p.DescribeGroupsResponse, int]:
    """The answer's body at ``version``: the typed answer and its throttle time. ValueError when the
    bytes are not such an answer (cut short, or bytes left over)."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"ConsumerGroupDescribe v{version} is not read here")
    r = Reader(data, "ConsumerGroupDescribe")
    throttle_ms = r.int32()
    groups = tuple(_group(r, version) for _ in range(r.count()))
    r.tagged_fields()
    r.end()
    return p.DescribeGroupsResponse(groups), throttle_ms


CODECS = describe_codecs(p.ConsumerGroupDescribe, "ConsumerGroupDescribe", API_KEY, (MIN_VERSION, MAX_VERSION), read_answer)
