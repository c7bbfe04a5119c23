"""Typed requests and responses of the wire layer.

The facade builds these and reads these; :mod:`kafkatxn.kafka.wire` turns them into kafka-python
protocol objects and back. A fake wire (tests/support) answers the same types from an in-memory
cluster, so the facade's routing, batching and retries run in unit tests unchanged. Error codes
arrive as Kafka's error names (``NOT_LEADER_OR_FOLLOWER``), ``None`` for no error.

Named tuples rather than dataclasses: every command imports this module before its first request,
and a frozen dataclass costs about 0.4 ms to build at import. Made by :mod:`kafkatxn.named_tuples`
(typing's made each of the 53 compile its ``__new__`` and evaluate its annotations: 32 M
instructions, ~9 ms of every start; 7 M so), their annotations left as text. Each is its own type
(the wire picks its encoder by type), so compare them by type first.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import groupby, repeat
from operator import itemgetter
from typing import Any

from kafkatxn.model import BrokerInfo, PartitionInfo, ProducerState, TopicPartition
from kafkatxn.named_tuples import NamedTuple

_TOPIC, _INDEX = itemgetter(0), itemgetter(1)  # of a TopicPartition


class ApiVersions(NamedTuple):
    """The broker's API versions."""


class ApiVersionsResponse(NamedTuple):
    versions: dict[str, tuple[int, int]]  # API name -> (min, max)
    inferred_version: str


class Metadata(NamedTuple):
    """Every topic's partitions and the brokers (to any broker)."""


class MetadataResponse(NamedTuple):
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerInfo, ...]
    partitions: tuple[PartitionInfo, ...]  # unsorted, every partition of every topic


class ListOffsets(NamedTuple):
    """Latest offsets of these partitions at one isolation level (one leader's partitions); with
    ``earliest``, the log start offsets (timestamp -2, EARLIEST) instead."""

    partitions: tuple[TopicPartition, ...]
    read_committed: bool
    earliest: bool = False


# One per partition in a response (two per partition a pass): named tuples, which are made several
# times faster than frozen dataclasses and compare alike.
class PartitionOffset(NamedTuple):
    tp: TopicPartition
    error: str | None
    offset: int


class OffsetColumns(Sequence[PartitionOffset]):
    """An answer's partitions as three columns (their TopicPartitions, error names, offsets), as the
    wire reads them from the bytes: at 30,000 partitions a pass reads 60,000, and a named tuple per
    partition, then taken apart again by the facade, cost more than the rest of reading them. Read as
    rows (iterated, indexed, compared with a tuple of :class:`PartitionOffset`) it is the tuple of
    them; :func:`offset_columns` hands the columns over as they are."""

    __slots__ = ("errors", "offsets", "tps")

    def __init__(self, tps: tuple[TopicPartition, ...], errors: tuple[str | None, ...], offsets: tuple[int, ...]):
        self.tps, self.errors, self.offsets = tps, errors, offsets

    def __len__(self) -> int:
        return len(self.tps)

    def __iter__(self) -> Iterator[PartitionOffset]:
        return map(tuple.__new__, repeat(PartitionOffset), zip(self.tps, self.errors, self.offsets))  # type: ignore[arg-type]

    def __getitem__(self, index: Any) -> Any:
        rows = tuple(self)
        return rows[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (tuple, OffsetColumns)):
            return tuple(self) == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"OffsetColumns({tuple(self)!r})"


class ListOffsetsResponse(NamedTuple):
    partitions: Sequence[PartitionOffset]  # a tuple of PartitionOffset, or the wire's OffsetColumns


def offset_columns(partitions: Sequence[PartitionOffset]) -> tuple[Sequence[TopicPartition], Sequence[str | None], Sequence[int]]:
    """A ListOffsets answer's partitions as (TopicPartitions, error names, offsets): the wire's
    columns as they are, or a tuple of :class:`PartitionOffset` (the fake's, kafka-python's decoding)
    taken apart."""
    if type(partitions) is OffsetColumns:
        return partitions.tps, partitions.errors, partitions.offsets
    if not partitions:
        return (), (), ()
    tps, errors, offsets = zip(*partitions)
    return tps, errors, offsets


class DescribeProducers(NamedTuple):
    partitions: tuple[TopicPartition, ...]


class PartitionProducers(NamedTuple):
    tp: TopicPartition
    error: str | None
    producers: tuple[ProducerState, ...] = ()


class DescribeProducersResponse(NamedTuple):
    partitions: Sequence[PartitionProducers]  # a tuple of PartitionProducers, or the wire's ProducerColumns


class ListTransactions(NamedTuple):
    states: tuple[str, ...] = ()
    producer_ids: tuple[int, ...] = ()
    min_duration_ms: int | None = None  # needs v1
    pattern: str | None = None  # needs v2
    purpose: str = ""  # not sent: --debug's name for a listing asked again for a reason (request_label)


class ListedTransaction(NamedTuple):
    transactional_id: str
    producer_id: int
    state: str


class ListTransactionsResponse(NamedTuple):
    error: str | None
    transactions: tuple[ListedTransaction, ...] = ()


class FindTransactionCoordinators(NamedTuple):
    """FindCoordinator for transactional ids: all in one request from v4 on (``batched``)."""

    transactional_ids: tuple[str, ...]
    batched: bool = True


class Coordinator(NamedTuple):
    transactional_id: str
    error: str | None
    node_id: int


class FindTransactionCoordinatorsResponse(NamedTuple):
    coordinators: tuple[Coordinator, ...]


class DescribeTransactions(NamedTuple):
    transactional_ids: tuple[str, ...]
    purpose: str = ""  # not sent: --debug's name for a probe (request_label)


class TransactionState(NamedTuple):
    transactional_id: str
    error: str | None
    state: str = ""
    producer_id: int = -1
    producer_epoch: int = -1
    timeout_ms: int = 0
    start_time_ms: int = -1
    partitions: frozenset[TopicPartition] = frozenset()


class DescribeTransactionsResponse(NamedTuple):
    transactions: tuple[TransactionState, ...]


class WriteAbortMarker(NamedTuple):
    """WriteTxnMarkers with one ABORT marker for one producer on one partition (a COMMIT marker when
    ``commit``: restoring one its coordinator's log shows was lost)."""

    tp: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool = False


class WriteAbortMarkerResponse(NamedTuple):
    error: str | None  # the partition's error, None when the marker was written


# The wire counts each request it sends under this name (the broker's request metric names).
REQUEST_NAMES = {
    ApiVersions: "ApiVersions",
    Metadata: "Metadata",
    ListOffsets: "ListOffsets",
    DescribeProducers: "DescribeProducers",
    ListTransactions: "ListTransactions",
    FindTransactionCoordinators: "FindCoordinator",
    DescribeTransactions: "DescribeTransactions",
    WriteAbortMarker: "WriteTxnMarkers",
}  # consumer groups' requests are added at the end of the file


def by_topic(partitions: Sequence[TopicPartition]) -> dict[str, list[int]]:
    """Partitions grouped as Kafka's requests carry them: topic -> partition numbers (in the order
    given; a topic met again later adds to its first list). A run of one topic's partitions (as the
    facade sends them: 10,000 a per-leader ListOffsets, twice a pass) is taken in C, a Python step
    per run, not per partition."""
    out: dict[str, list[int]] = {}
    for name, run in groupby(partitions, _TOPIC):
        indexes = list(map(_INDEX, run))
        known = out.get(name)
        if known is None:
            out[name] = indexes
        else:
            known += indexes
    return out


# -- wireadmin: broker configs, the cluster's authorized operations, the topic-visibility probe, fencing --


class DescribeConfigs(NamedTuple):
    """DescribeConfigs of one resource: ``broker`` (asked of that broker: only it answers for
    itself) or ``topic``; these config names only (empty: all)."""

    resource_type: str  # "broker" or "topic"
    resource_name: str
    names: tuple[str, ...] = ()


class ConfigEntry(NamedTuple):
    name: str
    value: str | None  # None for a sensitive value
    source: str  # Kafka's ConfigSource, lower case: static_broker_config, dynamic_broker_config, default_config, ...
    is_default: bool


class DescribeConfigsResponse(NamedTuple):
    error: str | None  # the resource's error (CLUSTER_AUTHORIZATION_FAILED, ...)
    entries: tuple[ConfigEntry, ...] = ()


class ClusterOperations(NamedTuple):
    """The operations this principal may perform on the Cluster resource: DescribeCluster with
    include_cluster_authorized_operations (Kafka 2.8+)."""


class MetadataClusterOperations(NamedTuple):
    """The same, from Metadata v8-10 with include_cluster_authorized_operations (brokers before
    DescribeCluster; Metadata v11 dropped the field)."""


class ClusterOperationsResponse(NamedTuple):
    error: str | None
    operations: frozenset[str] | None = None  # AclOperation names (DESCRIBE, CLUSTER_ACTION, ...); None: not said


class TopicMetadata(NamedTuple):
    """Metadata of one topic, never creating it: the topic-visibility probe reads only its error."""

    topic: str


class TopicMetadataResponse(NamedTuple):
    error: str | None  # TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC, or None


class InitProducerId(NamedTuple):
    """InitProducerId for a transactional id, at its coordinator: bumps the epoch, aborting the id's
    open transaction (what a transactional producer's init_transactions sends)."""

    transactional_id: str
    transaction_timeout_ms: int


class InitProducerIdResponse(NamedTuple):
    error: str | None
    producer_id: int = -1
    producer_epoch: int = -1


REQUEST_NAMES.update({
    DescribeConfigs: "DescribeConfigs",
    ClusterOperations: "DescribeCluster",
    MetadataClusterOperations: "Metadata",
    TopicMetadata: "Metadata",
    InitProducerId: "InitProducerId",
})


# -- Fetch (wirelog): records from given offsets, one request per leader ---------------------------


class FetchOffset(NamedTuple):
    tp: TopicPartition
    offset: int
    max_bytes: int | None = None  # this partition's limit, when not the request's partition_max_bytes


class Fetch(NamedTuple):
    """Records of one leader's partitions, each from its offset, at one isolation level (read_committed:
    up to the last stable offset). ``max_wait_ms`` 0 answers at once; more lets the broker wait for
    new records (a follow)."""

    partitions: tuple[FetchOffset, ...]
    read_committed: bool
    max_bytes: int = 4 * 1024 * 1024  # the whole response
    partition_max_bytes: int = 1024 * 1024  # each partition's (the broker still sends one whole first batch)
    max_wait_ms: int = 0


class FetchedRecord(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


class FetchedBatch(NamedTuple):
    base_offset: int
    last_offset: int
    producer_id: int  # -1: none (a plain producer's, or an old message format)
    producer_epoch: int
    is_transactional: bool
    control: str | None  # a control batch's marker: COMMIT or ABORT (TYPE_n for another type); None for data
    # A control batch's are its marker records. The wire decodes a plain batch's records when first
    # read (kafkatxn.kafka.wire.fetch.BatchRecords); one it cannot read raises UnreadableRecords then.
    records: Sequence[FetchedRecord]
    record_count: int = -1  # as the batch's header says; -1 when not known (message formats 0 and 1)

    @property
    def is_control(self) -> bool:
        return self.control is not None

    @property
    def gapless(self) -> bool:
        """Holds a record at every offset from its first to its last (compaction removed none): the first
        record at or after an offset in it is known from the header, without reading any."""
        return self.record_count == self.last_offset - self.base_offset + 1


class UnreadableRecords(Exception):
    """A record batch the client cannot read (corrupt): that partition's answer, never the command's end."""


class AbortedTransaction(NamedTuple):
    producer_id: int
    first_offset: int


class FetchedPartition(NamedTuple):
    tp: TopicPartition
    error: str | None
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: tuple[AbortedTransaction, ...] = ()  # read_committed only
    batches: tuple[FetchedBatch, ...] = ()


class FetchResponse(NamedTuple):
    error: str | None  # the whole request's (v7+), None when each partition says its own
    partitions: tuple[FetchedPartition, ...]


REQUEST_NAMES[Fetch] = "Fetch"


class ListOffsetsAt(NamedTuple):
    """ListOffsets by time: per partition the offset of the first record at or after ``timestamp_ms``
    (-1 when none is that recent), or the log start offset with ``EARLIEST``."""

    partitions: tuple[TopicPartition, ...]
    timestamp_ms: int


EARLIEST = -2  # ListOffsetsAt's timestamp for the log start offset


REQUEST_NAMES[ListOffsetsAt] = "ListOffsets"


# -- consumer groups (kafka/groups.py, wire/groups_codec.py) ----------------------------------------------


class ListGroups(NamedTuple):
    """The groups one broker coordinates (ListGroups is answered by each broker for its own)."""


class ListedGroup(NamedTuple):
    group_id: str
    protocol_type: str  # "consumer" for consumer groups, "" for those that only commit offsets
    state: str = ""  # "Empty", "Stable", ... (ListGroups v4+); "" when the broker's version does not say
    group_type: str = ""  # "classic" or "consumer" (KIP-848; ListGroups v5+); "" when the broker's version does not say


class ListGroupsResponse(NamedTuple):
    error: str | None
    groups: tuple[ListedGroup, ...] = ()


class FindGroupCoordinators(NamedTuple):
    """FindCoordinator for consumer groups (key type 0): all in one request from v4 on (``batched``)."""

    group_ids: tuple[str, ...]
    batched: bool = True


class GroupCoordinator(NamedTuple):
    group_id: str
    error: str | None
    node_id: int


class FindGroupCoordinatorsResponse(NamedTuple):
    coordinators: tuple[GroupCoordinator, ...]


class OffsetFetch(NamedTuple):
    """Every committed offset of these groups (one coordinator's): all in one request from v8 on
    (``batched``), one group per request before. With ``stable`` (the partitions to ask, one tuple
    per group): those partitions only, with ``require_stable`` (v7+), as a read_committed consumer
    asks them (KIP-447): a partition with a transactional offset commit pending answers
    UNSTABLE_OFFSET_COMMIT."""

    group_ids: tuple[str, ...]
    batched: bool = True
    stable: tuple[tuple[TopicPartition, ...], ...] = ()


class GroupOffsets(NamedTuple):
    group_id: str
    error: str | None
    offsets: dict[TopicPartition, int]  # committed offsets (partitions without one are left out)
    unstable: frozenset[TopicPartition] = frozenset()  # asked with require_stable: UNSTABLE_OFFSET_COMMIT


class OffsetFetchResponse(NamedTuple):
    groups: tuple[GroupOffsets, ...]


class DescribeGroups(NamedTuple):
    """These groups' state and members (one coordinator's groups, one request)."""

    group_ids: tuple[str, ...]


class DescribedGroup(NamedTuple):
    group_id: str
    error: str | None
    state: str = ""  # "Stable", "Empty", "PreparingRebalance", "Dead", ...
    protocol_type: str = ""
    assigned: frozenset[TopicPartition] = frozenset()  # every member's assigned partitions (streams: its active tasks' input)


class DescribeGroupsResponse(NamedTuple):
    groups: tuple[DescribedGroup, ...]


class ConsumerGroupDescribe(NamedTuple):
    """These KIP-848 consumer groups' state and members' assignments (ConsumerGroupDescribe, API 69:
    ListGroups v5+ types them ``consumer``; one coordinator's groups, one request). Answered as a
    :class:`DescribeGroupsResponse`, each group's ``assigned`` its members' current assignments."""

    group_ids: tuple[str, ...]


class StreamsGroupDescribe(NamedTuple):
    """These Kafka Streams groups' state and the partitions their members' active tasks read
    (StreamsGroupDescribe, API 89, KIP-1071: ListGroups lists them with protocol type ``streams``).
    Answered as a :class:`DescribeGroupsResponse`."""

    group_ids: tuple[str, ...]


REQUEST_NAMES.update({
    ListGroups: "ListGroups",
    FindGroupCoordinators: "FindCoordinator",
    OffsetFetch: "OffsetFetch",
    DescribeGroups: "DescribeGroups",
    ConsumerGroupDescribe: "ConsumerGroupDescribe",
    StreamsGroupDescribe: "StreamsGroupDescribe",
})
