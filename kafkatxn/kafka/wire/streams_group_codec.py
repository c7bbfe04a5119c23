"""StreamsGroupDescribe (API key 89, KIP-1071): how a Kafka Streams application's group on the streams
rebalance protocol (ListGroups lists it with protocol type ``streams``) is described; DescribeGroups
and ConsumerGroupDescribe both answer such a group GROUP_ID_NOT_FOUND.

Written and read here (:mod:`.describe_codec`; kafka-python 3.0 has the key, no class), at version 0
only, the version Kafka 4.2 made generally available (4.4 has 0-1; v1 adds the topology's description,
which is not needed): the layout is Kafka 4.4's own (its generated ``StreamsGroupDescribeResponseData``
schema; KIP-1071's early-access releases answered in others, which are read as errors, never guessed).

The answer is the typed :class:`~kafkatxn.kafka.protocol.DescribeGroupsResponse`, as for the other
describe APIs: per group its error, state and the partitions its members' active tasks read now. An
active task is a sub-topology at a partition number: it reads that partition of each of the
sub-topology's source topics and repartition source topics (the topology in the same answer). Standby
and warm-up tasks read changelogs, not the application's input; the target assignment is what members
are to be given, not what they hold.
"""

from __future__ import annotations

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka.wire.describe_codec import Reader, describe_codecs
from kafkatxn.kafka.wire.names import error_name
from kafkatxn.model import TopicPartition

API_KEY = 89
MIN_VERSION = MAX_VERSION = 0
STREAMS = "streams"


def _strings(r: Reader) -> list[str]:
    return [s for s in (r.string() for _ in range(r.count())) if s is not None]


def _key_values(r: Reader) -> None:
    for _ in range(r.count()):
        r.string()
        r.string()
        r.tagged_fields()


def _topic_infos(r: Reader) -> list[str]:
    """TopicInfo structs (Name, Partitions, ReplicationFactor, TopicConfigs): their names."""
    names = []
    for _ in range(r.count()):
        name = r.string()
        r.int32()  # Partitions
        r.int16()  # ReplicationFactor
        _key_values(r)  # TopicConfigs
        r.tagged_fields()
        if name is not None:
            names.append(name)
    return names


def _topology(r: Reader) -> dict[str, list[str]]:
    """The nullable Topology (Epoch, Subtopologies): each sub-topology's input topics (source topics
    and repartition source topics); none when null."""
    if r.int8() < 0:
        return {}
    r.int32()  # Epoch
    inputs: dict[str, list[str]] = {}
    for _ in range(r.count()):  # Subtopologies (nullable: none)
        subtopology = r.string() or ""
        sources = _strings(r)  # SourceTopics
        _strings(r)  # RepartitionSinkTopics: written, not read
        _topic_infos(r)  # StateChangelogTopics
        sources += _topic_infos(r)  # RepartitionSourceTopics
        r.tagged_fields()
        inputs[subtopology] = sources
    r.tagged_fields()
    return inputs


def _task_ids(r: Reader) -> list[tuple[str, list[int]]]:
    out = []
    for _ in range(r.count()):
        subtopology = r.string() or ""
        partitions = [r.int32() for _ in range(r.count())]
        r.tagged_fields()
        out.append((subtopology, partitions))
    return out


def _assignment(r: Reader) -> list[tuple[str, list[int]]]:
    """An Assignment (ActiveTasks, StandbyTasks, WarmupTasks): its active tasks."""
    active = _task_ids(r)
    _task_ids(r)  # StandbyTasks
    _task_ids(r)  # WarmupTasks
    r.tagged_fields()
    return active


def _task_offsets(r: Reader) -> None:
    for _ in range(r.count()):
        r.string()  # SubtopologyId
        r.int32()  # Partition
        r.int64()  # Offset
        r.tagged_fields()


def _member(r: Reader) -> list[tuple[str, list[int]]]:
    """A Member: its current active tasks."""
    r.string()  # MemberId
    r.int32()  # MemberEpoch
    r.string()  # InstanceId
    r.string()  # RackId
    r.string()  # ClientId
    r.string()  # ClientHost
    r.int32()  # TopologyEpoch
    r.string()  # ProcessId
    if r.int8() >= 0:  # UserEndpoint (nullable): Host, Port (uint16)
        r.string()
        r.int16()
        r.tagged_fields()
    _key_values(r)  # ClientTags
    _task_offsets(r)  # TaskOffsets
    _task_offsets(r)  # TaskEndOffsets
    active = _assignment(r)  # Assignment: what the member holds now
    _assignment(r)  # TargetAssignment: what it is to be given
    r.int8()  # IsClassic
    r.tagged_fields()
    return active


def _group(r: Reader) -> p.DescribedGroup:
    error = error_name(r.int16())
    r.string()  # ErrorMessage
    group_id = r.string() or ""
    state = r.string() or ""
    r.int32()  # GroupEpoch
    r.int32()  # AssignmentEpoch
    inputs = _topology(r)
    tasks = [task for _ in range(r.count()) for task in _member(r)]
    r.int32()  # AuthorizedOperations (not asked for)
    r.tagged_fields()
    if error:
        return p.DescribedGroup(group_id, error)
    assigned = frozenset(TopicPartition(topic, partition) for subtopology, partitions in tasks
                         for topic in inputs.get(subtopology, ()) for partition in partitions)
    return p.DescribedGroup(group_id, None, state, STREAMS, assigned)


def read_answer(data: memoryview, version: int) -> tuple[p.DescribeGroupsResponse, int]:
    """The answer's body: the typed answer and its throttle time. ValueError when the bytes are not
    such an answer (cut short, or bytes left over)."""
    if version != MIN_VERSION:
        raise ValueError(f"StreamsGroupDescribe v{version} is not read here")
    r = Reader(data, "StreamsGroupDescribe")
    throttle_ms = r.int32()
    groups = tuple(_group(r) for _ in range(r.count()))
    r.tagged_fields()
    r.end()
    return p.DescribeGroupsResponse(groups), throttle_ms


CODECS = describe_codecs(p.StreamsGroupDescribe, "StreamsGroupDescribe", API_KEY, (MIN_VERSION, MAX_VERSION), read_answer)
