"""One fake Kafka cluster for unit tests: an in-memory model behind the real facade.

    model = KafkaModel(brokers=(1, 2))
    model.add_partition("orders", 0, leader=1)
    model.producers[TopicPartition("orders", 0)] = [ProducerState(...)]
    cluster = FakeCluster(model)          # kafkatxn.kafka.Cluster with a FakeWire
    cluster.stable_and_high_offsets(...)  # the facade's own routing, batching and retries run

The wire side (ListOffsets, DescribeProducers, ListTransactions, FindCoordinator,
DescribeTransactions, WriteTxnMarkers, ApiVersions, DescribeConfigs, DescribeCluster, InitProducerId)
is answered by :class:`FakeWire` from the model, request by request, so unit tests exercise the
facade's code paths. Metadata (which the real facade reads over the wire) and the confluent-kafka
side (groups, read_committed probes) are answered by :class:`FakeCluster`'s overrides of those facade methods, from the same
DescribeTransactions, WriteTxnMarkers, ApiVersions, and the consumer groups' ListGroups,
OffsetFetch and DescribeGroups) is answered by :class:`FakeWire` from the model,
request by request, so unit tests exercise the facade's code paths. Metadata (which the real
facade reads over the wire) and the confluent-kafka side (configs, read_committed probes,
fencing) are answered by :class:`FakeCluster`'s overrides of those facade methods, from the same
model: the facade's own metadata decoding is covered by the integration tests, not here. Faults are set on the model:

- ``down`` brokers stay registered (listed in metadata) but every request to them times out;
  all brokers down makes metadata raise UnreachableError;
- ``timeouts[broker]`` names the requests that time out on that broker only (``ListOffsets``,
  ``ListTransactions``, ``DescribeConfigs``...);
- ``partition_errors[(broker, tp)]`` queues errors, one per request touching the partition there;
- ``leader_moves`` change leaders at the second metadata request;
- ``transaction_errors[id]`` is the error the id's coordinator answers DescribeTransactions with
  (a list: one error per request, then the real answer, as a coordinator loading its log);
- ``listing_errors[broker]`` is the error that broker answers ListTransactions with;
- ``describable`` filters the transactional ids the principal may DESCRIBE (ListTransactions leaves
  the others out silently, as Kafka does); ``denied_topics[request]`` answers TOPIC_AUTHORIZATION_FAILED;
- ``marker_error`` refuses WriteTxnMarkers; ``api_versions`` sets what the brokers support;
- ``groups`` (committed offsets) and ``assignments`` (Stable groups' partitions) are served by each
  group's coordinator (``group_coordinators``); ``denied_groups`` are refused (GROUP_AUTHORIZATION_FAILED)
  and left out of ListGroups; ``group_errors``/``group_listing_errors`` queue errors;
- ``transaction_log_by_id[id]`` is what ``__transaction_state`` holds of an id (``TxnLogRecord`` in log
  order); an id not there reads as the start of its producers' epochs (InitProducerId's ``Empty``)
  and nothing after: no transaction ever included the partition, so hanging stays hanging;
  ``transaction_log_denied`` refuses READ on the log.

Markers and fences change the model as a broker would (LSO, high watermark). ``model.sent`` holds
every wire request; ``FakeCluster.calls`` every facade call by name.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable

from kafkatxn.config import ConnectionConfig
from kafkatxn.errors import UnreachableError
from kafkatxn.kafka import Cluster
from kafkatxn.kafka import protocol as proto
from kafkatxn.model import (
    BrokerInfo,
    ClusterMetadata,
    Missing,
    Partial,
    PartitionInfo,
    ProducerState,
    TopicPartition,
    TransactionalId,
    TransactionDescription,
    TransactionLogHistory,
)

MAX_TIMEOUT_CONFIG = "transaction.max.timeout.ms"


@dataclass
class KafkaModel:
    """What the brokers know. Offsets are ``[lso, hw]`` per partition."""

    brokers: tuple[int, ...] = (1,)
    cluster_id: str = "fake-cluster"
    partitions: dict[TopicPartition, PartitionInfo] = field(default_factory=dict)
    offsets: dict[TopicPartition, list[int]] = field(default_factory=dict)
    producers: dict[TopicPartition, list[ProducerState]] = field(default_factory=dict)
    transactions: dict[str, TransactionDescription] = field(default_factory=dict)
    # Listed by ListTransactions but not described (e.g. expired in between); defaults to ``transactions``.
    listings: list[tuple[str, int, str]] | None = None
    coordinators: dict[str, int] = field(default_factory=dict)  # id -> coordinator, for ids with no description
    max_timeouts: dict[int, str] = field(default_factory=dict)  # broker -> transaction.max.timeout.ms
    groups: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)
    assignments: dict[str, set[TopicPartition]] = field(default_factory=dict)  # Stable groups' members' partitions
    log_starts: dict[TopicPartition, int] = field(default_factory=dict)  # log start offsets (default 0)
    down: set[int] = field(default_factory=set)  # brokers whose requests time out
    unregistered: set[int] = field(default_factory=set)  # brokers left out of the metadata (stop_broker)
    timeouts: dict[int, set[str]] = field(default_factory=dict)  # broker -> request names (ListTransactions) that time out there
    partition_errors: dict[tuple[int, TopicPartition], list[str]] = field(default_factory=dict)  # (node, tp) -> errors, one per request
    connected: set[int] = field(default_factory=set)  # brokers with an open wire connection (known API versions)
    leader_moves: dict[TopicPartition, int] = field(default_factory=dict)  # applied after the first metadata request
    api_versions: dict[str, tuple[int, int]] = field(default_factory=lambda: dict(DEFAULT_APIS))
    sent: list[tuple[int | None, Any]] = field(default_factory=list)  # every wire request, in order
    marker_error: str | None = None
    transaction_errors: dict[str, str | list[str]] = field(default_factory=dict)  # id -> error(s) DescribeTransactions answers
    listing_errors: dict[int, str] = field(default_factory=dict)  # broker -> error it answers ListTransactions with
    # __transaction_state partition -> its records (TxnLogRecord/UndecodedRecord), read by read_log_partition
    transaction_log: dict[int, list[Any]] = field(default_factory=dict)
    transaction_log_error: str | None = None  # the Kafka error reading the log meets (TOPIC_AUTHORIZATION_FAILED)
    # The principal may DESCRIBE only the ids this accepts (None: every id): ListTransactions leaves
    # the others out, FindCoordinator and DescribeTransactions answer TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
    describable: Callable[[str], bool] | None = None
    # Errors the principal gets per topic: DescribeProducers (READ) and ListOffsets (DESCRIBE).
    denied_topics: dict[str, set[str]] = field(default_factory=dict)  # request name -> topics
    cluster_operations: set[str] = field(default_factory=lambda: {"DESCRIBE", "DESCRIBE_CONFIGS"})  # DescribeCluster's authorized operations
    denied_groups: set[str] = field(default_factory=set)  # groups the principal may not DESCRIBE
    listed_stateless: set[str] = field(default_factory=set)  # groups ListGroups lists with no state (a broker before v4)
    topics_filtered: bool | None = False  # whether Metadata leaves out topics the principal may not DESCRIBE
    # Record timestamps by partition and offset (a transaction's first record); an offset not here
    # reads as the timestamp of the last write of the producer whose transaction starts there.
    record_timestamps: dict[TopicPartition, dict[int, int]] = field(default_factory=dict)
    transaction_log_by_id: dict[str, list[Any]] = field(default_factory=dict)  # id -> TxnLogRecords, log order
    transaction_log_denied: bool = False
    # wireadmin: what InitProducerId answers before it succeeds, one per request (CONCURRENT_TRANSACTIONS...)
    init_producer_id_errors: list[str] = field(default_factory=list)
    configs_denied: set[int] = field(default_factory=set)  # brokers answering DescribeConfigs CLUSTER_AUTHORIZATION_FAILED
    # Fetch (wirelog): each partition's record batches (protocol.FetchedBatch, in offset order), the
    # aborted transactions in them (producer id, first offset, its ABORT marker's offset), and how many
    # batches one Fetch returns of a partition (paging).
    batches: dict[TopicPartition, list[Any]] = field(default_factory=dict)
    aborted: dict[TopicPartition, list[tuple[int, int, int]]] = field(default_factory=dict)
    batches_per_fetch: int = 1000
    # Consumer groups on the wire: a group's coordinator (default: fixed by its name), queued errors
    # per (request name, group) (``("OffsetFetch", "g")``, one per request naming it) and per broker
    # for ListGroups, and groups that are not consumer groups (protocol type, e.g. "connect").
    group_coordinators: dict[str, int] = field(default_factory=dict)
    group_errors: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    group_listing_errors: dict[int, list[str]] = field(default_factory=dict)
    group_protocol_types: dict[str, str] = field(default_factory=dict)
    # KIP-848 consumer groups (ListGroups v5's type "consumer"): ConsumerGroupDescribe describes them,
    # DescribeGroups answers them GROUP_ID_NOT_FOUND ("not a classic group", as Kafka 4's coordinator);
    # ConsumerGroupDescribe answers every other group so ("not a consumer group"). ``group_states``: a
    # group's state where it is not Stable (assigned) or Empty ("Reconciling", "PreparingRebalance").
    consumer_groups: set[str] = field(default_factory=set)
    # Kafka Streams applications on the streams protocol (KIP-1071): ListGroups lists them with protocol
    # type and type "streams"; StreamsGroupDescribe describes them (``assignments``: the partitions their
    # active tasks read), DescribeGroups and ConsumerGroupDescribe answer them GROUP_ID_NOT_FOUND.
    streams_groups: set[str] = field(default_factory=set)
    group_states: dict[str, str] = field(default_factory=dict)
    # group -> partitions with a transactional offset commit pending: a stable OffsetFetch answers
    # UNSTABLE_OFFSET_COMMIT there (KIP-447).
    pending_offsets: dict[str, set[TopicPartition]] = field(default_factory=dict)
    # (broker, __transaction_state partition) -> how many more coordinator requests (ListTransactions,
    # DescribeTransactions) that broker answers before taking over the partition the metadata already
    # names it leader of: its listings leave the partition's ids out, DescribeTransactions answers
    # NOT_COORDINATOR (a KRaft broker that has not applied the leader change yet).
    not_taken_over: dict[tuple[int, int], int] = field(default_factory=dict)

    def group_coordinator(self, group: str) -> int:
        if group in self.group_coordinators:
            return self.group_coordinators[group]
        return self.brokers[zlib.crc32(group.encode()) % len(self.brokers)]

    def group_error(self, request_name: str, group: str, node: int) -> str | None:
        """The error ``node`` answers for ``group``: queued, refused, or not its coordinator."""
        queued = self.group_errors.get((request_name, group))
        if queued:
            return queued.pop(0)
        if group in self.denied_groups:
            return "GROUP_AUTHORIZATION_FAILED"
        return None if self.group_coordinator(group) == node else "NOT_COORDINATOR"

    def may_describe(self, transactional_id: str) -> bool:
        return self.describable is None or self.describable(transactional_id)

    def add_partition(self, topic: str, partition: int, leader: int = 1, replicas: Iterable[int] | None = None,
                      lso: int = 0, hw: int | None = None) -> TopicPartition:
        tp = TopicPartition(topic, partition)
        reps = tuple(replicas) if replicas is not None else (leader,)
        self.partitions[tp] = PartitionInfo(topic, partition, leader, reps, reps, topic.startswith("__"))
        self.offsets[tp] = [lso, lso if hw is None else hw]
        self.producers.setdefault(tp, [])
        return tp

    def leader(self, tp: TopicPartition) -> int:
        return self.partitions[tp].leader

    def add_transaction_log(self, leaders: Iterable[int]) -> list[TopicPartition]:
        """``__transaction_state`` with one partition per leader (-1: no leader); the coordinator of an
        id is then the leader of its partition, as Kafka hashes it."""
        return [self.add_partition("__transaction_state", n, leader=leader, replicas=(leader,) if leader >= 0 else ())
                for n, leader in enumerate(leaders)]

    def stop_broker(self, broker: int) -> None:
        """The broker is gone: its requests time out, KRaft drops it from the metadata, and the
        partitions it was the only replica of have no leader."""
        self.down.add(broker)
        self.unregistered.add(broker)
        for tp, p in self.partitions.items():
            if p.leader == broker and set(p.replicas) <= {broker}:
                self.partitions[tp] = p._replace(leader=-1, isr=())

    def log_partition(self, transactional_id: str) -> int | None:
        log = sum(1 for p in self.partitions.values() if p.topic == "__transaction_state")
        if not log:
            return None
        from kafkatxn.verdicts import coordinator_partition

        return coordinator_partition(transactional_id, log)

    def taken_over(self, node: int, transactional_id: str) -> bool:
        """Whether ``node`` coordinates the id's log partition yet (see ``not_taken_over``)."""
        return self.not_taken_over.get((node, self.log_partition(transactional_id)), 0) <= 0

    def coordinator_request(self, node: int) -> None:
        for key in [k for k in self.not_taken_over if k[0] == node]:
            self.not_taken_over[key] -= 1

    def coordinator(self, transactional_id: str) -> int:
        """The id's coordinator; an unknown id's is fixed by its name (str hash() changes per run)."""
        if transactional_id in self.coordinators:
            return self.coordinators[transactional_id]
        d = self.transactions.get(transactional_id)
        if d is not None:
            return d.coordinator_id
        log = sorted(p.partition for p in self.partitions.values() if p.topic == "__transaction_state")
        if log:
            from kafkatxn.verdicts import coordinator_partition

            return self.partitions[TopicPartition("__transaction_state", coordinator_partition(transactional_id, len(log)))].leader
        return self.brokers[zlib.crc32(transactional_id.encode()) % len(self.brokers)]

    def close_transaction(self, tp: TopicPartition, producer_id: int) -> None:
        """A marker on ``tp`` for ``producer_id``: the open transaction ends and the LSO moves on."""
        self.producers[tp] = [
            p._replace(current_txn_start_offset=-1) if p.producer_id == producer_id else p for p in self.producers[tp]
        ]
        still = [p.current_txn_start_offset for p in self.producers[tp] if p.current_txn_start_offset >= 0]
        if tp.topic == "__consumer_offsets":  # the marker settles the offset commits pending there
            from kafkatxn.verdicts_groups import offsets_partition

            count = sum(1 for p in self.partitions if p.topic == tp.topic)
            for group in [g for g in self.pending_offsets if offsets_partition(g, count) == tp.partition]:
                del self.pending_offsets[group]
        self.offsets[tp][1] += 1  # the marker itself
        self.offsets[tp][0] = min(still) if still else self.offsets[tp][1]


DEFAULT_APIS = {
    "ListOffsets": (1, 8), "FindCoordinator": (0, 6), "DescribeProducers": (0, 0), "ListTransactions": (0, 2),
    "DescribeTransactions": (0, 0), "WriteTxnMarkers": (0, 1),
    "DescribeCluster": (0, 1), "DescribeConfigs": (1, 4), "InitProducerId": (0, 5),  # wireadmin
    "ListGroups": (0, 5), "OffsetFetch": (1, 9), "DescribeGroups": (0, 5), "ConsumerGroupDescribe": (0, 1),
    "StreamsGroupDescribe": (0, 1),
}


class WireTimeout(Exception):
    """What kafka-python raises for a request that got no answer in time."""

    def __init__(self, node: int | None):
        super().__init__(f"request to node {node} timed out")


class FakeWire:
    """Answers the typed requests of :mod:`kafkatxn.kafka.protocol` from a :class:`KafkaModel`."""

    def __init__(self, model: KafkaModel):
        self.model = model

    def close(self) -> None:
        pass

    def max_version(self, api_name: str) -> int:
        return self.model.api_versions.get(api_name, (0, -1))[1]

    def learn_brokers(self, brokers) -> None:
        pass  # every broker of the model can be asked

    def finalized_features(self) -> dict[str, int]:
        return {"transaction.version": 2, "metadata.version": 27}

    def known_api_versions(self, node: int):
        """Brokers in ``model.connected`` have an open connection that gave their versions."""
        if node in self.model.connected and node not in self.model.down:
            return proto.ApiVersionsResponse(dict(self.model.api_versions), "4.3")
        return None

    def send_all(self, requests, deadline: float, count=lambda name: None) -> list[Any]:
        out = []
        for node, request in requests:
            count(proto.REQUEST_NAMES[type(request)])
            self.model.sent.append((node, request))
            if node in self.model.down or proto.REQUEST_NAMES[type(request)] in self.model.timeouts.get(node, ()):
                out.append(WireTimeout(node))
                continue
            out.append(getattr(self, "_" + type(request).__name__)(node, request))
        return out

    def begin_send_all(self, requests, deadline: float, count=lambda name: None):
        """:meth:`send_all` begun: the model answers at once (as of now), its end returns the answers."""
        self.begun = getattr(self, "begun", 0) + 1
        from kafkatxn.kafka.wire.client import Begun

        out = self.send_all(requests, deadline, count)
        return Begun(lambda: getattr(self, "answered_at_once", True), lambda: out)

    def _error(self, node: int, tp: TopicPartition, any_replica: bool = False) -> str | None:
        """The partition's error at ``node``: only the leader answers, or any replica (DescribeProducers)."""
        if tp not in self.model.partitions:
            return "UNKNOWN_TOPIC_OR_PARTITION"
        queued = self.model.partition_errors.get((node, tp))
        if queued:
            return queued.pop(0)
        serves = node in self.model.partitions[tp].replicas if any_replica else self.model.leader(tp) == node
        return None if serves else "NOT_LEADER_OR_FOLLOWER"

    def _denied(self, request_name: str, tp: TopicPartition) -> str | None:
        return "TOPIC_AUTHORIZATION_FAILED" if tp.topic in self.model.denied_topics.get(request_name, ()) else None

    def _Metadata(self, node, request):
        """What the real facade's metadata path reads (FakeCluster answers ``metadata()`` itself)."""
        self.metadata_requests = getattr(self, "metadata_requests", 0) + 1
        if self.metadata_requests > 1 and self.model.leader_moves:
            for tp, leader in self.model.leader_moves.items():
                self.model.partitions[tp] = self.model.partitions[tp]._replace(leader=leader)
            self.model.leader_moves.clear()
        brokers = tuple(BrokerInfo(b, "127.0.0.1", 9090 + b) for b in self.model.brokers if b not in self.model.unregistered)
        live = [b for b in self.model.brokers if b not in self.model.down]
        return proto.MetadataResponse(self.model.cluster_id, live[0] if live else -1, brokers, tuple(self.model.partitions.values()))

    def _ApiVersions(self, node, request):
        return proto.ApiVersionsResponse(dict(self.model.api_versions), "4.3")

    def _ListOffsets(self, node, request):
        parts = []
        for tp in request.partitions:
            error = self._denied("ListOffsets", tp) or self._error(node, tp)
            if error:
                offset = -1
            elif request.earliest:
                offset = self.model.log_starts.get(tp, 0)
            else:
                offset = self.model.offsets[tp][0 if request.read_committed else 1]
            parts.append(proto.PartitionOffset(tp, error, offset))
        return proto.ListOffsetsResponse(tuple(parts))

    def _DescribeProducers(self, node, request):
        parts = []
        for tp in request.partitions:
            error = self._denied("DescribeProducers", tp) or self._error(node, tp, any_replica=True)
            parts.append(proto.PartitionProducers(tp, error, () if error else tuple(self.model.producers.get(tp, []))))
        return proto.DescribeProducersResponse(tuple(parts))

    def _ListTransactions(self, node, request):
        if node in self.model.listing_errors:
            return proto.ListTransactionsResponse(self.model.listing_errors[node])
        listings = self.model.listings
        if listings is None:
            listings = [(d.transactional_id, d.producer_id, d.state) for d in self.model.transactions.values()]
        rows = [
            proto.ListedTransaction(tid, pid, state)
            for tid, pid, state in listings
            if self.model.coordinator(tid) == node and self.model.taken_over(node, tid)
            and self.model.may_describe(tid)
            and (not request.producer_ids or pid in request.producer_ids)
            and (not request.states or state in request.states)
        ]
        self.model.coordinator_request(node)
        return proto.ListTransactionsResponse(None, tuple(sorted(rows, key=lambda r: r.transactional_id)))

    def _FindTransactionCoordinators(self, node, request):
        def answer(t: str) -> proto.Coordinator:
            if not self.model.may_describe(t):
                return proto.Coordinator(t, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", -1)
            coordinator = self.model.coordinator(t)
            if coordinator < 0:  # its log partition has no leader (KafkaApis.getCoordinator)
                return proto.Coordinator(t, "COORDINATOR_NOT_AVAILABLE", -1)
            return proto.Coordinator(t, None, coordinator)

        return proto.FindTransactionCoordinatorsResponse(tuple(answer(t) for t in request.transactional_ids))

    def _DescribeTransactions(self, node, request):
        out = []
        for tid in request.transactional_ids:
            d = self.model.transactions.get(tid)
            if not self.model.may_describe(tid):
                out.append(proto.TransactionState(tid, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"))
            elif tid in self.model.transaction_errors:
                error = self.model.transaction_errors[tid]
                if isinstance(error, list):  # queued: one per request
                    error = error.pop(0)
                    if not self.model.transaction_errors[tid]:
                        del self.model.transaction_errors[tid]
                out.append(proto.TransactionState(tid, error))
            elif (d.coordinator_id if d is not None else self.model.coordinator(tid)) != node or not self.model.taken_over(node, tid):
                out.append(proto.TransactionState(tid, "NOT_COORDINATOR"))
            elif d is None:
                out.append(proto.TransactionState(tid, "TRANSACTIONAL_ID_NOT_FOUND"))
            else:
                out.append(proto.TransactionState(
                    tid, None, d.state, d.producer_id, d.producer_epoch, d.timeout_ms, d.start_time_ms, d.partitions
                ))
        self.model.coordinator_request(node)
        return proto.DescribeTransactionsResponse(tuple(out))

    def _WriteAbortMarker(self, node, request):
        error = self.model.marker_error or self._error(node, request.tp)
        if error is None:
            self.model.close_transaction(request.tp, request.producer_id)
        return proto.WriteAbortMarkerResponse(error)

    # -- wireadmin: DescribeConfigs, the cluster's authorized operations, the topic probe, InitProducerId --

    def _DescribeConfigs(self, node, request):
        if request.resource_type != "broker" or request.resource_name != str(node):
            return proto.DescribeConfigsResponse("INVALID_REQUEST")  # a broker answers for itself only
        if node in self.model.configs_denied:
            return proto.DescribeConfigsResponse("CLUSTER_AUTHORIZATION_FAILED")
        entries = []
        if MAX_TIMEOUT_CONFIG in request.names or not request.names:
            value = self.model.max_timeouts.get(node)
            entries.append(proto.ConfigEntry(MAX_TIMEOUT_CONFIG, value or "900000", "static_broker_config" if value else "default_config",
                                             value is None))
        return proto.DescribeConfigsResponse(None, tuple(entries))

    def _ClusterOperations(self, node, request):
        return proto.ClusterOperationsResponse(None, frozenset(self.model.cluster_operations))

    _MetadataClusterOperations = _ClusterOperations

    def _TopicMetadata(self, node, request):
        filtered = self.model.topics_filtered
        if filtered is None:
            return WireTimeout(node)
        return proto.TopicMetadataResponse("TOPIC_AUTHORIZATION_FAILED" if filtered else "INVALID_TOPIC")

    def _InitProducerId(self, node, request):
        """As the coordinator does: abort the id's open transaction (its markers move the LSO), bump the epoch."""
        tid, m = request.transactional_id, self.model
        d = m.transactions.get(tid)
        if (d.coordinator_id if d is not None else m.coordinator(tid)) != node:  # FindCoordinator may be behind
            return proto.InitProducerIdResponse("NOT_COORDINATOR")
        if m.init_producer_id_errors:
            return proto.InitProducerIdResponse(m.init_producer_id_errors.pop(0))
        if d is None:
            m.transactions[tid] = TransactionDescription(tid, node, "Empty", 99, 0, request.transaction_timeout_ms, -1, frozenset())
            return proto.InitProducerIdResponse(None, 99, 0)
        for tp in d.partitions:
            m.close_transaction(tp, d.producer_id)
        m.transactions[tid] = replace(d, state="Empty", producer_epoch=d.producer_epoch + 2, partitions=frozenset(), start_time_ms=-1)
        return proto.InitProducerIdResponse(None, d.producer_id, d.producer_epoch + 2)
    def _Fetch(self, node, request):
        """``model.batches`` from each offset up to the HW (the LSO read_committed), as a broker answers:
        the batch holding the offset first, the aborted transactions overlapping what is returned."""
        parts = []
        for f in request.partitions:
            tp = f.tp
            error = self._denied("Fetch", tp) or self._error(node, tp)
            start, (lso, hw) = self.model.log_starts.get(tp, 0), self.model.offsets.get(tp, [0, 0])
            if error is None and not start <= f.offset <= hw:
                error = "OFFSET_OUT_OF_RANGE"
            if error:
                parts.append(proto.FetchedPartition(tp, error))
                continue
            end = lso if request.read_committed else hw
            sent = [b for b in self.model.batches.get(tp, []) if b.last_offset >= f.offset and b.base_offset < end]
            sent = sent[: self.model.batches_per_fetch]
            upper = sent[-1].last_offset if sent else f.offset
            aborted = tuple(proto.AbortedTransaction(pid, first) for pid, first, marker in self.model.aborted.get(tp, [])
                            if request.read_committed and first <= upper and marker >= f.offset)
            parts.append(proto.FetchedPartition(tp, None, hw, lso, start, aborted, tuple(sent)))
        return proto.FetchResponse(None, tuple(parts))

    def _ListOffsetsAt(self, node, request):
        parts = []
        for tp in request.partitions:
            error = self._denied("ListOffsets", tp) or self._error(node, tp)
            if error:
                parts.append(proto.PartitionOffset(tp, error, -1))
            elif request.timestamp_ms == proto.EARLIEST:
                parts.append(proto.PartitionOffset(tp, None, self.model.log_starts.get(tp, 0)))
            elif request.timestamp_ms == -1:  # LATEST
                parts.append(proto.PartitionOffset(tp, None, self.model.offsets[tp][1]))
            else:
                found = [r.offset for b in self.model.batches.get(tp, []) if not b.is_control for r in b.records
                         if r.timestamp >= request.timestamp_ms]
                parts.append(proto.PartitionOffset(tp, None, found[0] if found else -1))
        return proto.ListOffsetsResponse(tuple(parts))
    # -- consumer groups ---------------------------------------------------------------------------

    def _groups_known(self) -> set[str]:
        return set(self.model.groups) | set(self.model.assignments)

    def _ListGroups(self, node, request):
        """The groups ``node`` coordinates; those the principal may not DESCRIBE are left out."""
        queued = self.model.group_listing_errors.get(node)
        if queued:
            return proto.ListGroupsResponse(queued.pop(0))
        # Each group's state as Kafka lists it from v4 on (as _DescribeGroups has it; none for the
        # groups in listed_stateless: a broker before v4); its type (v5): classic, or consumer (KIP-848).
        return proto.ListGroupsResponse(None, tuple(
            proto.ListedGroup(g, "streams" if g in self.model.streams_groups else self.model.group_protocol_types.get(g, "consumer"),
                              *(("", "") if g in self.model.listed_stateless else (self._state(g), self._type(g))))
            for g in sorted(self._groups_known() - self.model.denied_groups) if self.model.group_coordinator(g) == node
        ))

    def _type(self, g: str) -> str:
        return "streams" if g in self.model.streams_groups else "consumer" if g in self.model.consumer_groups else "classic"

    def _state(self, g: str) -> str:
        return self.model.group_states.get(g) or ("Stable" if g in self.model.assignments else "Empty")

    def _FindGroupCoordinators(self, node, request):
        out = []
        for g in request.group_ids:
            queued = self.model.group_errors.get(("FindCoordinator", g))
            error = queued.pop(0) if queued else ("GROUP_AUTHORIZATION_FAILED" if g in self.model.denied_groups else None)
            out.append(proto.GroupCoordinator(g, error, -1 if error else self.model.group_coordinator(g)))
        return proto.FindGroupCoordinatorsResponse(tuple(out))

    def _OffsetFetch(self, node, request):
        """Every committed offset of each group; an unknown group has none (no error, as Kafka). A
        stable fetch: the partitions asked, UNSTABLE_OFFSET_COMMIT where a commit is pending."""
        if request.stable:
            out = []
            for g, asked in zip(request.group_ids, request.stable):
                error = self.model.group_error("OffsetFetch", g, node)
                pending = set(asked) & self.model.pending_offsets.get(g, set())
                committed = {tp: o for tp, o in self.model.groups.get(g, {}).items() if tp in asked and tp not in pending}
                out.append(proto.GroupOffsets(g, error, {} if error else committed, frozenset() if error else frozenset(pending)))
            return proto.OffsetFetchResponse(tuple(out))
        return proto.OffsetFetchResponse(tuple(
            proto.GroupOffsets(g, error, {} if error else dict(self.model.groups.get(g, {})))
            for g in request.group_ids
            for error in [self.model.group_error("OffsetFetch", g, node)]
        ))

    def _DescribeGroups(self, node, request):
        """Groups in ``assignments`` are Stable with those partitions; others Empty, unknown ones Dead;
        a KIP-848 consumer group GROUP_ID_NOT_FOUND."""
        out = []
        for g in request.group_ids:
            error = self.model.group_error("DescribeGroups", g, node) or ("GROUP_ID_NOT_FOUND" if g in self.model.consumer_groups | self.model.streams_groups else None)
            if error:
                out.append(proto.DescribedGroup(g, error))
            elif g in self.model.assignments:
                out.append(proto.DescribedGroup(g, None, self._state(g), "consumer", frozenset(self.model.assignments[g])))
            else:
                out.append(proto.DescribedGroup(g, None, self._state(g) if g in self.model.groups else "Dead", "consumer"))
        return proto.DescribeGroupsResponse(tuple(out))

    def _ConsumerGroupDescribe(self, node, request):
        """KIP-848 consumer groups: as :meth:`_DescribeGroups` describes the classic ones (their members'
        current assignments); any other group, or one unknown, GROUP_ID_NOT_FOUND."""
        return self._described_kind(node, request, "ConsumerGroupDescribe", self.model.consumer_groups, "consumer")

    def _StreamsGroupDescribe(self, node, request):
        """Kafka Streams groups, as :meth:`_ConsumerGroupDescribe` describes KIP-848's."""
        return self._described_kind(node, request, "StreamsGroupDescribe", self.model.streams_groups, "streams")

    def _described_kind(self, node, request, api: str, of_kind: set[str], protocol_type: str):
        """The groups of ``of_kind`` described by ``api`` (their state and members' assignments); any other
        group, or one unknown, GROUP_ID_NOT_FOUND."""
        out = []
        for g in request.group_ids:
            error = self.model.group_error(api, g, node)
            if error is None and (g not in of_kind or g not in self._groups_known()):
                error = "GROUP_ID_NOT_FOUND"
            if error:
                out.append(proto.DescribedGroup(g, error))
            else:
                out.append(proto.DescribedGroup(g, None, self._state(g), protocol_type, frozenset(self.model.assignments.get(g, ()))))
        return proto.DescribeGroupsResponse(tuple(out))

class FakeCluster(Cluster):
    """The real facade over a :class:`KafkaModel`: wire requests go to a :class:`FakeWire`; metadata
    and the confluent-kafka side are answered here. ``calls`` records each facade call by name."""

    def __init__(self, model: KafkaModel, timeout_s: float = 30):
        super().__init__(ConnectionConfig(bootstrap_servers="fake:9092", timeout_ms=int(timeout_s * 1000)), wire=FakeWire(model))
        self.model = model
        self.calls: list[tuple] = []
        self._metadata_requests = 0
        self.before_action: Callable[[], None] = lambda: None  # runs as a marker or a fence goes out

    def close(self) -> None:
        pass  # the same fake serves several commands in a test

    def called(self, name: str) -> list[tuple]:
        return [c for c in self.calls if c[0] == name]

    # -- metadata and the confluent-kafka side ---------------------------------------------------

    def metadata(self, refresh: bool = False) -> ClusterMetadata:
        self.calls.append(("metadata", refresh))
        if self._metadata_requests and self.model.leader_moves:
            for tp, leader in self.model.leader_moves.items():
                self.model.partitions[tp] = self.model.partitions[tp]._replace(leader=leader)
            self.model.leader_moves.clear()
        self._metadata_requests += 1
        if self.model.down >= set(self.model.brokers):
            raise UnreachableError(f"cannot reach any broker at {self.config.bootstrap_servers} within {self.config.timeout_s:g}s")
        # A broker that is down but still registered is listed; its requests time out.
        brokers = tuple(BrokerInfo(b, "127.0.0.1", 9090 + b) for b in self.model.brokers if b not in self.model.unregistered)
        live = [b for b in self.model.brokers if b not in self.model.down]
        return ClusterMetadata(
            self.model.cluster_id, live[0] if live else -1, brokers, tuple(sorted(self.model.partitions.values(), key=lambda p: p.tp)), None
        )

    def read_log_partition(self, partition, *, start_time_ms=None, topic="__transaction_state", transactional_ids=None,
                           counts=None, next_offsets=None, timeout_s=None):
        """The model's log partition, as the real reader yields it (kafkatxn/kafka/log_reader.py)."""
        from kafkatxn.txnlog_records import TxnLogEntry
        from kafkatxn.kafka.log_fetch import LogReadError

        self.calls.append(("read_log_partition", partition))
        if self.model.transaction_log_error:
            raise LogReadError(f"reading {topic}-{partition} failed: {self.model.transaction_log_error}", self.model.transaction_log_error)
        records = self.model.transaction_log.get(partition, [])
        chosen = [r for r in records if (transactional_ids is None or getattr(r, "transactional_id", None) in transactional_ids
                                         or not hasattr(r, "transactional_id"))
                  and (start_time_ms is None or getattr(r, "last_update_timestamp_ms", 0) >= start_time_ms)]
        for r in chosen:
            if counts is not None:
                counts.count(r)
        if next_offsets is not None:
            next_offsets[partition] = len(records)
        yield [TxnLogEntry(r, getattr(r, "last_update_timestamp_ms", -1)) for r in chosen]

    def follow_log_partitions(self, start_offsets, **kwargs):
        return iter(())

    def broker_configs(self, names, broker_ids=None):
        self.calls.append(("broker_configs",))
        return super().broker_configs(names, broker_ids)  # DescribeConfigs on the fake wire

    def describe_with_visibility(self, transactional_ids):
        self.calls.append(("transactional_id_visibility",))  # the probe, whatever else is described with it
        return super().describe_with_visibility(transactional_ids)

    def list_groups(self) -> list[str]:
        self.calls.append(("list_groups",))
        return super().list_groups()

    def group_offsets(self, groups):
        groups = list(groups)
        self.calls.append(("group_offsets", tuple(groups)))
        return super().group_offsets(groups)

    def group_assignments(self, groups):
        groups = list(groups)
        self.calls.append(("group_assignments", tuple(groups)))
        return super().group_assignments(groups)

    def log_start_offsets(self, partitions):
        partitions = list(partitions)
        self.calls.append(("log_start_offsets", tuple(partitions)))
        return super().log_start_offsets(partitions)

    def first_readable_offsets_ahead(self, starts):
        pass  # the probes are answered from the model (first_readable_offsets below), not over the wire

    def first_readable_offsets(self, starts):
        self.calls.append(("first_readable_offsets", dict(starts)))
        # Records below the LSO are readable; nothing in this model is aborted.
        return Partial({tp: (off if off < self.model.offsets[tp][0] else None) for tp, off in starts.items()})

    def first_record_timestamps(self, starts):
        self.calls.append(("first_record_timestamps", dict(starts)))
        out, missing = {}, []
        for tp, off in starts.items():
            known = self.model.record_timestamps.get(tp, {})
            last = [p.last_timestamp_ms for p in self.model.producers.get(tp, []) if p.current_txn_start_offset == off]
            if off in known or last:
                out[tp] = known.get(off, last[0] if last else -1)
            else:
                missing.append(Missing(tp, f"no record at offset {off} (deleted or compacted)"))
        return Partial(out, missing)

    def transaction_log_histories(self, transactional_ids) -> Partial[dict[str, TransactionLogHistory]]:
        from kafkatxn.txnlog_records import TxnLogRecord

        tids = sorted(set(transactional_ids))
        self.calls.append(("transaction_log_histories", tuple(tids)))
        if self.model.transaction_log_denied:
            why = "__transaction_state-0 not read: not authorized: needs READ on Topic __transaction_state"
            return Partial({}, [Missing(TransactionalId(t), why, acl="READ on Topic __transaction_state") for t in tids])
        listings = self.model.listings
        if listings is None:
            listings = [(d.transactional_id, d.producer_id, d.state) for d in self.model.transactions.values()]
        out = {}
        for tid in tids:
            records = self.model.transaction_log_by_id.get(tid)
            if records is None:
                pids = {pid for t, pid, _state in listings if t == tid}
                epochs = sorted({(s.producer_id, s.producer_epoch) for ss in self.model.producers.values() for s in ss if s.producer_id in pids})
                records = [TxnLogRecord(tid, pid, epoch, "Empty") for pid, epoch in epochs]
            out[tid] = TransactionLogHistory(tid, 0, tuple(records))
        return Partial(out)

    def fence_transactional_id(self, transactional_id: str, transaction_timeout_ms: int) -> None:
        self.calls.append(("fence", transactional_id, transaction_timeout_ms))
        self.before_action()
        return super().fence_transactional_id(transactional_id, transaction_timeout_ms)  # FindCoordinator + InitProducerId

    # -- wire side, recorded --------------------------------------------------------------------

    def describe_producers(self, partitions, broker_id=None):
        partitions = list(partitions)
        self.calls.append(("describe_producers", sorted(partitions), broker_id))
        return super().describe_producers(partitions, broker_id)

    def list_transactions(self, broker_ids=None, states=(), producer_ids=(), min_duration_ms=None, pattern=None, purpose=""):
        self.calls.append(("list_transactions", list(states), list(producer_ids), min_duration_ms, pattern))
        return super().list_transactions(broker_ids, states, producer_ids, min_duration_ms, pattern, **({"purpose": purpose} if purpose else {}))

    def write_abort_marker(self, tp, producer_id, producer_epoch, coordinator_epoch, leader, commit=False):
        name = "write_commit_marker" if commit else "write_abort_marker"
        self.calls.append((name, tp, producer_id, producer_epoch, coordinator_epoch, leader))
        self.before_action()
        return super().write_abort_marker(tp, producer_id, producer_epoch, coordinator_epoch, leader, commit)

    def describe_transactions(self, transactional_ids):
        transactional_ids = list(transactional_ids)
        self.calls.append(("describe_transactions", transactional_ids))
        return super().describe_transactions(transactional_ids)

    def _send_all(self, requests):
        for _node, request in requests:
            self.calls.append((type(request).__name__,))
        return super()._send_all(requests)


def as_columns(md):
    """``md`` as the wire reads a Metadata answer: a ColumnMetadata of its topics' runs."""
    from itertools import groupby

    from kafkatxn.metadata_columns import ColumnMetadata, MetadataColumns, TopicRun

    runs = [TopicRun(name, tuple(p.partition for p in made), tuple(p.leader for p in made), made[0].internal, made)
            for name, made in ((name, tuple(run)) for name, run in groupby(md.partitions, key=lambda p: p.topic))]
    return ColumnMetadata(md.cluster_id, md.controller_id, md.brokers, MetadataColumns(runs), md.answered_by)
