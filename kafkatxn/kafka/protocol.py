"""Typed requests and responses of the wire layer.

The facade builds these and reads these; :mod:`kafkatxn.kafka.wire` turns them into kafka-python
protocol objects and back. A fake wire (tests/support) answers the same types from an in-memory
cluster, so the facade's routing, batching and retries run in unit tests unchanged. Error codes
arrive as Kafka's error names (``NOT_LEADER_OR_FOLLOWER``), ``None`` for no error.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kafkatxn.model import BrokerInfo, PartitionInfo, ProducerState, TopicPartition


@dataclass(frozen=True)
class ApiVersions:
    pass


@dataclass(frozen=True)
class ApiVersionsResponse:
    versions: dict[str, tuple[int, int]]  # API name -> (min, max)
    inferred_version: str


@dataclass(frozen=True)
class Metadata:
    """Every topic's partitions and the brokers (to any broker)."""


@dataclass(frozen=True)
class MetadataResponse:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerInfo, ...]
    partitions: tuple[PartitionInfo, ...]  # unsorted, every partition of every topic


@dataclass(frozen=True)
class ListOffsets:
    """Latest offsets of these partitions at one isolation level (one leader's partitions)."""

    partitions: tuple[TopicPartition, ...]
    read_committed: bool


@dataclass(frozen=True)
class PartitionOffset:
    tp: TopicPartition
    error: str | None
    offset: int


@dataclass(frozen=True)
class ListOffsetsResponse:
    partitions: tuple[PartitionOffset, ...]


@dataclass(frozen=True)
class DescribeProducers:
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class PartitionProducers:
    tp: TopicPartition
    error: str | None
    producers: tuple[ProducerState, ...] = ()


@dataclass(frozen=True)
class DescribeProducersResponse:
    partitions: tuple[PartitionProducers, ...]


@dataclass(frozen=True)
class ListTransactions:
    states: tuple[str, ...] = ()
    producer_ids: tuple[int, ...] = ()
    min_duration_ms: int | None = None  # needs v1
    pattern: str | None = None  # needs v2


@dataclass(frozen=True)
class ListedTransaction:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True)
class ListTransactionsResponse:
    error: str | None
    transactions: tuple[ListedTransaction, ...] = ()


@dataclass(frozen=True)
class FindTransactionCoordinators:
    """FindCoordinator for transactional ids: all in one request from v4 on (``batched``)."""

    transactional_ids: tuple[str, ...]
    batched: bool = True


@dataclass(frozen=True)
class Coordinator:
    transactional_id: str
    error: str | None
    node_id: int


@dataclass(frozen=True)
class FindTransactionCoordinatorsResponse:
    coordinators: tuple[Coordinator, ...]


@dataclass(frozen=True)
class DescribeTransactions:
    transactional_ids: tuple[str, ...]


@dataclass(frozen=True)
class TransactionState:
    transactional_id: str
    error: str | None
    state: str = ""
    producer_id: int = -1
    producer_epoch: int = -1
    timeout_ms: int = 0
    start_time_ms: int = -1
    partitions: frozenset[TopicPartition] = field(default_factory=frozenset)


@dataclass(frozen=True)
class DescribeTransactionsResponse:
    transactions: tuple[TransactionState, ...]


@dataclass(frozen=True)
class WriteAbortMarker:
    """WriteTxnMarkers with one ABORT marker for one producer on one partition."""

    tp: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int


@dataclass(frozen=True)
class WriteAbortMarkerResponse:
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
}
