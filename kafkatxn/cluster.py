"""The one place that talks to Kafka.

confluent-kafka (librdkafka) serves metadata, configs, consumer group offsets, read_committed
reads and fencing; kafka-python 3.x serves the KIP-664 APIs librdkafka lacks (DescribeProducers,
ListTransactions, DescribeTransactions, WriteTxnMarkers), ListOffsets (one request per leader, no
per-partition futures) plus ApiVersions and features. Every call shares the deadline of the command (``--timeout``). Calls that fan out to
several brokers send all requests at once and return what arrived, naming what is missing, so a dead
broker costs one deadline, not one per partition.
"""

from __future__ import annotations

import concurrent.futures
import logging
import re
import time
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Iterable, Mapping, NamedTuple, TypeVar

from kafkatxn.config import ConnectionConfig, client_certificate_problem
from kafkatxn.errors import (
    AuthenticationError,
    ClusterError,
    DeadlineExceeded,
    KafkatxnError,
    NotFoundError,
    UnreachableError,
    UnsupportedBrokerError,
    UsageError,
)

log = logging.getLogger("kafkatxn.cluster")

T = TypeVar("T")

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})

# DescribeProducers batches stay below this many partitions, as Kafka's own tool does.
DESCRIBE_PRODUCERS_BATCH = 500

# ListOffsets errors that fresh metadata can cure: UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE,
# NOT_LEADER_OR_FOLLOWER, REPLICA_NOT_AVAILABLE, FENCED/UNKNOWN_LEADER_EPOCH, OFFSET_NOT_AVAILABLE.
_LEADERSHIP_ERROR_CODES = frozenset({3, 5, 6, 9, 74, 75, 78})


# Marks a part of a fan-out answer that did not arrive (its reason is in ``missing``).
_NOT_ARRIVED = object()


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class BrokerInfo:
    id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int  # -1 when the partition has no leader
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    internal: bool = False

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True)
class ClusterMetadata:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerInfo, ...]
    partitions: tuple[PartitionInfo, ...]
    answered_by: int | None = None  # the broker that answered this metadata request

    def topics(self) -> list[str]:
        return sorted({p.topic for p in self.partitions})

    def broker(self, broker_id: int) -> BrokerInfo | None:
        return next((b for b in self.brokers if b.id == broker_id), None)


@dataclass(frozen=True)
class ProducerState:
    """One active producer on one partition, as DescribeProducers reports it."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp_ms: int
    coordinator_epoch: int
    current_txn_start_offset: int  # -1 when the producer has no open transaction


# Coordinator transaction states (org.apache.kafka.coordinator.transaction.TransactionState), as the
# APIs spell them; the order is the state id the transaction log stores.
TRANSACTION_STATES: tuple[str, ...] = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
)
# A transaction is open (has begun, its markers are not all written) in these states.
OPEN_TRANSACTION_STATES: tuple[str, ...] = ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str
    coordinator_id: int


@dataclass(frozen=True)
class TransactionDescription:
    transactional_id: str
    coordinator_id: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int  # -1 when no transaction is open
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True)
class ConfigValue:
    value: str | None
    source: str
    is_default: bool


@dataclass
class Partial(Generic[T]):
    """A result that may lack parts: ``missing`` names each part that did not arrive, and why."""

    value: T
    missing: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.missing


@dataclass(frozen=True)
class BrokerApis:
    versions: dict[str, tuple[int, int]]  # API name -> (min, max) version
    inferred_version: str  # the newest Kafka release these versions fit, e.g. "4.3"


@dataclass(frozen=True)
class ListTransactionsSupport:
    """Which filters the brokers applied themselves (ListTransactions v1: duration, v2: pattern)."""

    duration_on_broker: bool
    pattern_on_broker: bool


class Cluster:
    """Facade over both Kafka clients for one command run. Use as a context manager."""

    def __init__(self, config: ConnectionConfig):
        self.config = config
        self.deadline = time.monotonic() + config.timeout_s
        self._admin = None
        self._kp = None
        self._metadata: ClusterMetadata | None = None
        self._client_errors: list[Any] = []
        self._api_versions: dict[int, BrokerApis] = {}
        self._connected = False  # a first request succeeded: credentials and TLS are accepted
        self.requests: Counter[str] = Counter()

    # -- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._kp is not None:
            try:
                self._kp.close()
            except Exception:  # closing must never hide the real outcome
                log.debug("closing kafka-python client failed", exc_info=True)
            self._kp = None
        self._admin = None

    def restart_deadline(self, timeout_s: float | None = None) -> None:
        """Start a fresh deadline (the exporter does this once per scrape)."""
        self.deadline = time.monotonic() + (timeout_s if timeout_s is not None else self.config.timeout_s)
        self._metadata = None
        self._api_versions.clear()
        self._client_errors.clear()

    def remaining_s(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise DeadlineExceeded(
                f"timed out after {self.config.timeout_ms / 1000:g}s talking to {self.config.bootstrap_servers} "
                "(raise --timeout or check the cluster)"
            )
        return left

    # -- clients ------------------------------------------------------------------------------

    def _on_client_error(self, err: Any) -> None:
        self._client_errors.append(err)

    def _transport_failure(self) -> str | None:
        from confluent_kafka import KafkaError

        for err in reversed(self._client_errors):
            if err.code() in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE):
                text = _clean(err.str())
                # librdkafka prefixes with the client's name and broker: keep the reason.
                reason = text.rsplit(": ", 1)[-1] if ": " in text else text
                return re.sub(r"\s*\(after \d+ms in state \w+\)", "", reason)
        return None

    def _raise_auth_errors(self) -> None:
        from confluent_kafka import KafkaError

        for err in self._client_errors:
            code = err.code()
            if code in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED):
                raise AuthenticationError(f"authentication failed: {_clean(err.str())}")
            # With TLS 1.3 a broker refuses a client certificate after the client thinks the
            # handshake is done: librdkafka reports that alert as a transport error, and retries it
            # until the deadline. It is as final as a failed handshake.
            if code == KafkaError._SSL or (code == KafkaError._TRANSPORT and _TLS_ALERT.search(err.str())):
                raise self._tls_error(_clean(err.str()))

    def _tls_error(self, text: str) -> AuthenticationError:
        text = re.sub(r"\s*\(after \d+ms in state \w+\)", "", text)
        problem = client_certificate_problem(self.config.settings)
        if problem and _TLS_ALERT.search(text):
            # The broker only says certificate_unknown; the client can say why.
            return AuthenticationError(f"TLS handshake failed: {problem}; the broker refused it ({text})")
        return AuthenticationError(f"TLS handshake failed: {text}")

    @property
    def admin(self):
        if self._admin is None:
            from confluent_kafka import KafkaException
            from confluent_kafka.admin import AdminClient

            try:
                self._admin = AdminClient(self.config.librdkafka(error_cb=self._on_client_error))
            except KafkaException as exc:
                # librdkafka checks its settings when the client is built (e.g. PLAIN without a
                # username): what it refuses there is the user's to fix, before anything is sent.
                if _kafka_error_code(exc) == "_INVALID_ARG":
                    raise UsageError(f"bad client settings: {_clean(exc.args[0].str())}") from None
                raise self._translate(exc, "creating the client") from exc
        return self._admin

    @property
    def kp(self):
        """kafka-python admin client; created on first use, within the deadline."""
        if self._kp is None:
            from kafka.admin import KafkaAdminClient

            # kafka-python retries a refused login or TLS handshake until the deadline and then
            # reports "no brokers": let librdkafka connect first, which names the cause at once.
            md = self.metadata()

            kw = self.config.kafka_python()
            # kafka-python bootstraps from a server picked at random and gives it the whole deadline:
            # one that accepts connections but never answers (a hung broker) took the whole command
            # down. So first the broker that has just answered librdkafka, for a share of the
            # deadline (it may have died since), then the configured servers.
            tries = [kw["bootstrap_servers"]]
            answered = md.broker(md.answered_by) if md.answered_by is not None else None
            if answered is not None:
                host = f"[{answered.host}]" if ":" in answered.host else answered.host
                tries.insert(0, [f"{host}:{answered.port}"])
            request_timeout_ms = kw["request_timeout_ms"]
            for n, servers in enumerate(tries, 1):
                timeout_ms = int(self.remaining_s() * 1000)
                kw["bootstrap_servers"] = servers
                kw["bootstrap_timeout_ms"] = max(timeout_ms if n == len(tries) else min(timeout_ms // 3, 2000), 1)
                kw["request_timeout_ms"] = max(min(request_timeout_ms, timeout_ms), 1)
                try:
                    self._kp = KafkaAdminClient(**kw)
                    break
                except Exception as exc:  # noqa: BLE001 - translated into one line
                    if n == len(tries):
                        raise self._translate(exc, "connecting") from exc
                    log.debug("bootstrap from broker %s failed (%s); trying %s", md.answered_by, exc, tries[-1])
        return self._kp

    def _translate(self, exc: BaseException, what: str) -> KafkatxnError:
        """One clear error for anything either client raised."""
        if isinstance(exc, KafkatxnError):
            return exc
        self._raise_if_auth_in(exc)
        name = type(exc).__name__
        text = _clean(str(exc))
        code = _kafka_error_code(exc)
        if name == "NoBrokersAvailable" or "Unable to bootstrap" in text:
            # kafka-python raises this as a timeout, but the cause is that no broker answered.
            return UnreachableError(
                f"cannot reach any broker at {self.config.bootstrap_servers} within {self.config.timeout_ms / 1000:g}s"
            )
        if code in ("_TRANSPORT", "_ALL_BROKERS_DOWN", "_RESOLVE"):
            if self._admin is not None:
                self._admin.poll(0)
            detail = self._transport_failure() or exc.args[0].str()
            return UnreachableError(f"cannot reach any broker at {self.config.bootstrap_servers}: {detail}")
        if code == "_TIMED_OUT":
            exc = concurrent.futures.TimeoutError()
            name = "Timeout"
        if "Timeout" in name or "timed out" in text.lower() or isinstance(exc, concurrent.futures.TimeoutError):
            unreachable = self._transport_failure()
            if unreachable:
                return UnreachableError(
                    f"cannot reach any broker at {self.config.bootstrap_servers} within "
                    f"{self.config.timeout_ms / 1000:g}s: {unreachable}"
                )
            return DeadlineExceeded(
                f"timed out after {self.config.timeout_ms / 1000:g}s {what} ({self.config.bootstrap_servers}); "
                "check that the cluster is reachable or raise --timeout"
            )
        return ClusterError(f"{what} failed: {name}: {text}" if text else f"{what} failed: {name}")

    def _raise_if_auth_in(self, exc: BaseException) -> None:
        try:
            self._raise_auth_errors()
        except AuthenticationError as auth:
            raise auth from exc
        name = type(exc).__name__
        text = _clean(str(exc))
        if "Authentication" in name or "SASL" in text.upper() and "AUTH" in text.upper():
            raise AuthenticationError(f"authentication failed: {text or name}") from exc
        if "SSL" in name or "CERTIFICATE" in text.upper():
            raise self._tls_error(text or name) from exc

    def _wait(self, future: concurrent.futures.Future, what: str, until: float | None = None) -> Any:
        """Wait for a confluent-kafka future within the deadline, failing fast on auth errors.

        With ``until`` (a monotonic time before the deadline), None once it has passed.
        """
        while True:
            if self._admin is not None:
                self._admin.poll(0)  # serves error_cb, which is how auth and transport errors arrive
            self._raise_auth_errors()
            left = self.remaining_s()
            if until is not None:
                left = min(left, until - time.monotonic())
                if left <= 0:
                    return None
            try:
                return future.result(timeout=min(left, 0.2))
            except concurrent.futures.TimeoutError:
                if time.monotonic() >= self.deadline:
                    raise self._translate(concurrent.futures.TimeoutError(), what) from None

    def _wait_or_note(self, future: concurrent.futures.Future, part: str, missing: list[str]) -> Any:
        """The future's result, or ``_NOT_ARRIVED`` after noting in ``missing`` why ``part`` did not arrive.

        Authentication failures still end the command: they concern every part alike.
        """
        try:
            return self._wait(future, part)
        except DeadlineExceeded:
            missing.append(f"{part}: timed out")
        except AuthenticationError:
            raise
        except Exception as exc:  # noqa: BLE001 - reported per part
            missing.append(f"{part}: {_clean(str(exc))}")
        return _NOT_ARRIVED

    # -- metadata and configs (confluent-kafka) ------------------------------------------------

    def metadata(self, refresh: bool = False) -> ClusterMetadata:
        if self._metadata is not None and not refresh:
            return self._metadata
        from confluent_kafka import KafkaException

        if not self._connected:
            # list_topics blocks (in a thread) until its timeout even when the login was refused at
            # once, and the process cannot exit before it returns. A request with a future fails fast.
            # librdkafka sends DescribeCluster to the broker it takes for the controller, and waits for
            # that one: when it has just died the answer never comes. The probe gets a few seconds;
            # then list_topics, which any broker answers.
            until = time.monotonic() + min(self.remaining_s(), max(1.0, min(self.remaining_s() / 4, 3.0)))
            try:
                answered = self._wait(self.admin.describe_cluster(request_timeout=self.remaining_s()), "connecting", until)
            except KafkaException as exc:
                raise self._translate(exc, "connecting") from exc
            self.requests["DescribeCluster"] += 1
            if answered is None:
                log.debug("no answer to DescribeCluster in time (is the controller librdkafka knows down?); going on")
            self._connected = True
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        future = pool.submit(self.admin.list_topics, timeout=self.remaining_s())
        pool.shutdown(wait=False)
        try:
            md = self._wait(future, "fetching metadata")
        except KafkaException as exc:
            raise self._translate(exc, "fetching metadata") from exc
        self.requests["Metadata"] += 1
        brokers = tuple(sorted((BrokerInfo(b.id, b.host, b.port, None) for b in md.brokers.values()), key=lambda b: b.id))
        partitions = []
        for name, topic in md.topics.items():
            internal = name in INTERNAL_TOPICS
            for p in topic.partitions.values():
                partitions.append(PartitionInfo(name, p.id, p.leader, tuple(p.replicas), tuple(p.isrs), internal))
        partitions.sort(key=lambda p: (p.topic, p.partition))
        self._metadata = ClusterMetadata(md.cluster_id, md.controller_id, brokers, tuple(partitions), md.orig_broker_id)
        return self._metadata

    def describe_cluster(self) -> ClusterMetadata:
        """Metadata plus broker racks (DescribeCluster), which plain metadata does not carry."""
        md = self.metadata()
        try:
            desc = self._wait(self.admin.describe_cluster(request_timeout=self.remaining_s()), "describing the cluster")
        except Exception as exc:  # noqa: BLE001
            raise self._translate(exc, "describing the cluster") from exc
        self.requests["DescribeCluster"] += 1
        brokers = tuple(sorted((BrokerInfo(n.id, n.host, n.port, n.rack) for n in desc.nodes), key=lambda b: b.id))
        controller = desc.controller.id if desc.controller is not None else md.controller_id
        return ClusterMetadata(desc.cluster_id or md.cluster_id, controller, brokers, md.partitions)

    def select_partitions(
        self,
        topics: Iterable[str] | None = None,
        partition: int | None = None,
        include_internal: bool = False,
        topic_pattern: str | None = None,
    ) -> list[PartitionInfo]:
        """Partitions named by the user; unknown topics or partitions raise :class:`NotFoundError`."""
        topics = list(topics or [])
        # What can be judged without the cluster is judged first: a usage error sends nothing.
        if partition is not None and len(topics) != 1:
            raise UsageError("--partition needs exactly one --topic")
        for t in topics:
            check_topic_name(t)
        rx = compile_regex(topic_pattern, "topic") if topic_pattern else None
        md = self.metadata()
        by_topic: dict[str, list[PartitionInfo]] = defaultdict(list)
        for p in md.partitions:
            by_topic[p.topic].append(p)
        if topics:
            unknown = [t for t in topics if t not in by_topic]
            if unknown:
                raise NotFoundError(f"unknown topic {', '.join(repr(t) for t in unknown)}")
            chosen = [p for t in dict.fromkeys(topics) for p in by_topic[t]]
            if partition is not None:
                chosen = [p for p in chosen if p.partition == partition]
                if not chosen:
                    count = len(by_topic[topics[0]])
                    raise NotFoundError(f"topic {topics[0]!r} has no partition {partition} (it has {count}: 0-{count - 1})")
        else:
            chosen = [p for p in md.partitions if include_internal or not p.internal]
        if rx is not None:
            chosen = [p for p in chosen if rx.search(p.topic)]
        return chosen

    def broker_configs(self, names: Iterable[str], broker_ids: Iterable[int] | None = None) -> Partial[dict[int, dict[str, ConfigValue]]]:
        from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType

        wanted = set(names)
        ids = list(broker_ids) if broker_ids is not None else [b.id for b in self.metadata().brokers]
        # librdkafka waits for a broker that is down until the request times out, which would spend
        # the whole deadline on it: ask only brokers that answer ApiVersions (a dead one fails fast).
        reachable = self.api_versions(ids)
        missing: list[str] = list(reachable.missing)
        # One BROKER resource per call: librdkafka refuses more ("Only one ConfigResource of type
        # BROKER is allowed per call"); the calls are still in flight together.
        futures = {}
        for i in ids:
            if i in reachable.value:
                resource = ConfigResource(ResourceType.BROKER, str(i))
                futures.update(self.admin.describe_configs([resource], request_timeout=self.remaining_s()))
        result: dict[int, dict[str, ConfigValue]] = {}
        for resource, future in futures.items():
            broker_id = int(resource.name)
            entries = self._wait_or_note(future, f"broker {broker_id} configs", missing)
            if entries is _NOT_ARRIVED:
                continue
            self.requests["DescribeConfigs"] += 1
            result[broker_id] = {
                name: ConfigValue(entry.value, ConfigSource(entry.source).name.lower(), bool(entry.is_default))
                for name, entry in entries.items()
                if name in wanted
            }
        return Partial(result, missing)

    def topic_configs(self, topics: Iterable[str], names: Iterable[str]) -> dict[str, dict[str, str | None]]:
        from confluent_kafka.admin import ConfigResource, ResourceType

        wanted = set(names)
        futures = self.admin.describe_configs(
            [ConfigResource(ResourceType.TOPIC, t) for t in topics], request_timeout=self.remaining_s()
        )
        out = {}
        for resource, future in futures.items():
            entries = self._wait(future, f"describing configs of topic {resource.name}")
            out[resource.name] = {n: e.value for n, e in entries.items() if n in wanted}
        return out

    # -- offsets (kafka-python) ----------------------------------------------------------------

    def list_offsets(self, partitions: Iterable[TopicPartition], read_committed: bool) -> Partial[dict[TopicPartition, int]]:
        """Latest offset per partition: the high watermark (read_uncommitted) or the LSO (read_committed).

        One ListOffsets request per leader, all in flight together.
        """
        both = self._latest_offsets(partitions, (read_committed,))
        return Partial({tp: offsets[0] for tp, offsets in both.value.items()}, both.missing)

    def stable_and_high_offsets(self, partitions: Iterable[TopicPartition]) -> Partial[dict[TopicPartition, tuple[int, int]]]:
        """``(last stable offset, high watermark)`` per partition in one round trip.

        Each leader gets the read_committed request first, then the read_uncommitted one, on the
        same connection; a broker answers a connection's requests in order and the HW only grows,
        so every pair has LSO <= HW.
        """
        return self._latest_offsets(partitions, (True, False))

    def _latest_offsets(
        self, partitions: Iterable[TopicPartition], levels: tuple[bool, ...]
    ) -> Partial[dict[TopicPartition, tuple[int, ...]]]:
        # kafka-python rather than librdkafka: librdkafka's admin ListOffsets makes a future per
        # partition, which costs ~0.8 s per 10,000 partitions before any Python code runs.
        from kafka.protocol.consumer.offsets import ListOffsetsRequest

        topic_cls = ListOffsetsRequest.ListOffsetsTopic
        partition_cls = topic_cls.ListOffsetsPartition
        tps = list(dict.fromkeys(partitions))
        found: dict[TopicPartition, list[int | None]] = {}
        errors: dict[TopicPartition, str] = {}
        pending = tps
        for attempt in range(2):
            # After a leadership error, one more try with fresh metadata (a leader moved).
            leaders = {p.tp: p.leader for p in self.metadata(refresh=attempt > 0).partitions}
            by_node: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
            for tp in pending:
                leader = leaders.get(tp)
                if leader is None:
                    errors[tp] = "unknown topic or partition"
                elif leader < 0:
                    errors[tp] = "no leader"
                else:
                    by_node[leader][tp.topic].append(tp.partition)
            requests = []
            for node, topics in by_node.items():
                for committed in levels:
                    request = ListOffsetsRequest(
                        replica_id=-1,
                        isolation_level=1 if committed else 0,
                        topics=[
                            topic_cls(name=t, partitions=[partition_cls(partition_index=i, timestamp=-1) for i in ps])
                            for t, ps in topics.items()
                        ],
                        min_version=2 if committed else 1,  # isolation levels came with v2
                    )
                    requests.append((node, request))
            retry: list[TopicPartition] = []
            responses = self._send_all(requests) if requests else []
            for i, resp in enumerate(responses):
                node, level = requests[i][0], i % len(levels)
                failed: list[str] = []
                if not self._check_response(resp, f"broker {node}", failed):
                    for t, ps in by_node[node].items():
                        for pid in ps:
                            errors[TopicPartition(t, pid)] = failed[0]
                    continue
                for topic in resp.topics:
                    for part in topic.partitions:
                        tp = TopicPartition(topic.name, part.partition_index)
                        if part.error_code:
                            errors[tp] = _error_name(part.error_code)
                            if part.error_code in _LEADERSHIP_ERROR_CODES:
                                retry.append(tp)
                        else:
                            found.setdefault(tp, [None] * len(levels))[level] = part.offset
            pending = list(dict.fromkeys(retry))
            if not pending or time.monotonic() >= self.deadline:
                break
            for tp in pending:
                found.pop(tp, None)  # ask again at every level: a pair must come from one leader
        out = {tp: tuple(v) for tp, v in found.items() if None not in v}
        missing = [f"{tp}: {errors.get(tp, 'no answer')}" for tp in tps if tp not in out]
        return Partial(out, missing)  # type: ignore[arg-type]

    # -- consumer groups (confluent-kafka) -----------------------------------------------------

    def list_groups(self) -> list[str]:
        """Every consumer group. Brokers that answer with an error (e.g. COORDINATOR_LOAD_IN_PROGRESS
        right after ``__consumer_offsets`` is created) are asked again within the deadline; a group
        list with a broker missing would make a real group look unknown, so that is an error."""
        while True:
            try:
                result = self._wait(self.admin.list_consumer_groups(request_timeout=self.remaining_s()), "listing groups")
            except KafkatxnError:
                raise
            except Exception as exc:  # noqa: BLE001
                raise self._translate(exc, "listing consumer groups") from exc
            self.requests["ListGroups"] += 1
            if not result.errors:
                return sorted(g.group_id for g in result.valid)
            # KafkaError objects: their str() is a repr; .str() is the message.
            reasons = "; ".join(sorted({_clean(e.str() if hasattr(e, "str") else str(e)) for e in result.errors}))
            if self.deadline - time.monotonic() < 0.5:
                if all(getattr(e, "name", lambda: "")() in ("_TIMED_OUT", "_TRANSPORT", "_ALL_BROKERS_DOWN") for e in result.errors):
                    from confluent_kafka import KafkaException

                    # Nothing answered in time: say so as every other request does (unreachable, deadline).
                    raise self._translate(KafkaException(result.errors[0]), "listing consumer groups")
                raise ClusterError(f"listing consumer groups failed on some brokers: {reasons}")
            log.debug("listing consumer groups: retrying after %s", reasons)
            time.sleep(0.25)

    def group_offsets(self, groups: Iterable[str]) -> Partial[dict[str, dict[TopicPartition, int]]]:
        """Committed offsets per group (offsets < 0 mean nothing committed)."""
        from confluent_kafka import ConsumerGroupTopicPartitions

        out: dict[str, dict[TopicPartition, int]] = {}
        missing: list[str] = []
        # All groups in flight at once (the call takes one group): N groups cost one round trip, not N.
        pending = {
            group: self.admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group)], request_timeout=self.remaining_s()
            )[group]
            for group in dict.fromkeys(groups)
        }
        for group, future in pending.items():
            result = self._wait_or_note(future, f"group {group}", missing)
            if result is _NOT_ARRIVED:
                continue
            out[group] = {
                TopicPartition(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0
            }
        return Partial(out, missing)

    def first_readable_offsets(self, starts: Mapping[TopicPartition, int]) -> Partial[dict[TopicPartition, int | None]]:
        """Per partition, the offset of the first record a read_committed consumer gets from ``starts[tp]``
        on, or None when it reaches the end (the LSO) without one: everything in between is
        transaction markers or aborted records.

        One assign-only consumer (it joins no group and commits nothing); it stops reading a
        partition at its first record, so the cost is the gap, up to one fetch per partition.
        """
        import uuid

        from confluent_kafka import Consumer, KafkaError, TopicPartition as CTP

        pending = {tp: off for tp, off in starts.items()}
        if not pending:
            return Partial({})
        conf = self.config.librdkafka(
            error_cb=self._on_client_error,
            **{
                "group.id": f"kafkatxn-probe-{uuid.uuid4().hex}",  # required by librdkafka, never joined
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",  # a start below the log start: read from there, as the group would
                "fetch.wait.max.ms": 100,
                "max.partition.fetch.bytes": 65536,
                "fetch.max.bytes": 4 * 1024 * 1024,
            },
        )
        consumer = Consumer(conf)
        out: dict[TopicPartition, int | None] = {}
        missing: list[str] = []
        leaders = {p.tp: p.leader for p in self.metadata().partitions}
        self.requests["Fetch"] += len({leaders.get(tp) for tp in pending})  # at least one per leader
        try:
            consumer.assign([CTP(tp.topic, tp.partition, off) for tp, off in pending.items()])
            while pending and time.monotonic() < self.deadline:
                self._raise_auth_errors()
                messages = consumer.consume(num_messages=1000, timeout=min(0.05, max(0.0, self.deadline - time.monotonic())))
                done = []
                for m in messages:
                    tp = TopicPartition(m.topic() or "", m.partition() if m.partition() is not None else -1)
                    if tp not in pending:
                        continue
                    err = m.error()
                    if err is None:
                        if m.offset() < pending[tp]:
                            continue  # the rest of a batch that began before the start
                        out[tp] = m.offset()
                    elif err.code() == KafkaError._PARTITION_EOF:
                        out[tp] = None
                    else:
                        missing.append(f"{tp}: {_clean(err.str())}")
                    del pending[tp]
                    done.append(CTP(tp.topic, tp.partition))
                if done:
                    consumer.pause(done)  # stop fetching what is decided
        except KafkatxnError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise self._translate(exc, "reading partitions") from exc
        finally:
            consumer.close()
        missing.extend(f"{tp}: timed out reading from offset {off}" for tp, off in pending.items())
        return Partial(out, missing)

    # -- kafka-python wire calls ---------------------------------------------------------------

    def _send_all(self, requests: list[tuple[int | None, Any]]) -> list[Any]:
        """Send every request at once; return each response, or the exception it failed with.

        The requests are in flight together (up to kafka-python's in-flight limit per broker), so
        N brokers cost one round trip, and a dead broker costs at most the remaining deadline.
        """
        manager = self.kp._manager
        self.remaining_s()  # raises once the deadline has passed
        # kafka-python fails a send ("Node paused: max_in_flight") beyond this many requests in
        # flight on one connection, so each broker gets its requests in waves of this size.
        window = max(int(manager.config.get("max_in_flight_requests_per_connection", 5)), 1)
        by_node: dict[int | None, list[int]] = defaultdict(list)
        for i, (node_id, _request) in enumerate(requests):
            by_node[node_id].append(i)

        async def run() -> list[Any]:
            results: list[Any] = [None] * len(requests)
            longest = max((len(indexes) for indexes in by_node.values()), default=0)
            for start in range(0, longest, window):
                pending = []
                for indexes in by_node.values():
                    for i in indexes[start : start + window]:
                        node_id, request = requests[i]
                        self.requests[type(request).__name__.removesuffix("Request")] += 1
                        left_ms = max(int((self.deadline - time.monotonic()) * 1000), 1)
                        pending.append((i, manager.send(request, node_id=node_id, request_timeout_ms=left_ms), left_ms))
                for i, fut, left_ms in pending:
                    try:
                        results[i] = await manager.wait_for(fut, left_ms)
                    except Exception as exc:  # noqa: BLE001 - returned to the caller per request
                        results[i] = exc
            return results

        try:
            return manager.run(run)
        except Exception as exc:  # noqa: BLE001
            raise self._translate(exc, "sending requests") from exc

    def _check_response(self, result: Any, where: str, missing: list[str]) -> bool:
        if isinstance(result, BaseException):
            self._raise_if_auth_in(result)
            reason = "timed out" if "Timeout" in type(result).__name__ else _clean(str(result)) or type(result).__name__
            missing.append(f"{where}: {reason}")
            return False
        return True

    def api_versions(self, broker_ids: Iterable[int] | None = None) -> Partial[dict[int, BrokerApis]]:
        from kafka.protocol.api_key import ApiKey
        from kafka.protocol.broker_version_data import infer_broker_version_from_api_versions
        from kafka.protocol.metadata.api_versions import ApiVersionsRequest

        ids = list(broker_ids) if broker_ids is not None else [b.id for b in self.metadata().brokers]
        cached = {i: self._api_versions[i] for i in ids if i in self._api_versions}
        if len(cached) == len(ids):
            return Partial(cached)
        cfg = self.kp._manager.config
        request = ApiVersionsRequest(
            client_software_name=cfg["client_software_name"],
            client_software_version=cfg["client_software_version"],
            min_version=3,
        )
        responses = self._send_all([(i, request) for i in ids])
        out: dict[int, BrokerApis] = {}
        missing: list[str] = []
        for broker_id, resp in zip(ids, responses):
            if not self._check_response(resp, f"broker {broker_id}", missing):
                continue
            versions = {}
            by_key = {}
            for api in resp.api_keys:
                by_key[api.api_key] = (api.min_version, api.max_version)
                try:
                    name = ApiKey(api.api_key).name
                except ValueError:
                    name = f"api_{api.api_key}"
                versions[name] = (api.min_version, api.max_version)
            inferred = ".".join(str(x) for x in infer_broker_version_from_api_versions(by_key))
            out[broker_id] = BrokerApis(versions, inferred)
        self._api_versions.update(out)
        return Partial(out, missing)

    def finalized_features(self) -> dict[str, int]:
        try:
            features = self.kp.describe_features()
        except Exception as exc:  # noqa: BLE001
            raise self._translate(exc, "describing features") from exc
        self.requests["ApiVersions"] += 1
        return {name: f["finalized"][1] for name, f in features.items() if f.get("finalized")}

    def _max_version(self, api_name: str, broker_id: int | None = None) -> int:
        from kafka.protocol.api_key import ApiKey

        data = self.kp._manager.broker_version_data
        key = ApiKey[api_name].value
        versions = data.api_versions.get(key) if data is not None else None
        return versions[1] if versions else -1

    def describe_producers(
        self, partitions: Iterable[TopicPartition], broker_id: int | None = None
    ) -> Partial[dict[TopicPartition, list[ProducerState]]]:
        """DescribeProducers, batched per leader (or sent to ``broker_id``), ≤500 partitions a request."""
        from kafka.protocol.admin.transactions import DescribeProducersRequest

        tps = sorted(set(partitions))
        if not tps:
            return Partial({})
        if self._max_version("DescribeProducers") < 0:
            raise UnsupportedBrokerError("the broker does not support DescribeProducers (needs Apache Kafka 2.8 or newer)")
        missing: list[str] = []
        by_node: dict[int, list[TopicPartition]] = defaultdict(list)
        if broker_id is not None:
            by_node[broker_id] = tps
        else:
            leaders = {p.tp: p.leader for p in self.metadata().partitions}
            for tp in tps:
                leader = leaders.get(tp, -1)
                if leader < 0:
                    missing.append(f"{tp}: no leader")
                else:
                    by_node[leader].append(tp)
        batches: list[tuple[int, list[TopicPartition]]] = []
        for node, node_tps in by_node.items():
            for i in range(0, len(node_tps), DESCRIBE_PRODUCERS_BATCH):
                batches.append((node, node_tps[i : i + DESCRIBE_PRODUCERS_BATCH]))
        requests = []
        for node, batch in batches:
            per_topic: dict[str, list[int]] = defaultdict(list)
            for tp in batch:
                per_topic[tp.topic].append(tp.partition)
            topics = [DescribeProducersRequest.TopicRequest(name=t, partition_indexes=ps) for t, ps in per_topic.items()]
            requests.append((node, DescribeProducersRequest(topics=topics)))
        out: dict[TopicPartition, list[ProducerState]] = {}
        for (node, batch), resp in zip(batches, self._send_all(requests)):
            if not self._check_response(resp, f"broker {node} ({len(batch)} partitions)", missing):
                continue
            for topic in resp.topics:
                for part in topic.partitions:
                    tp = TopicPartition(topic.name, part.partition_index)
                    if part.error_code:
                        missing.append(f"{tp}: {_error_name(part.error_code)}")
                        continue
                    out[tp] = [
                        ProducerState(
                            p.producer_id, p.producer_epoch, p.last_sequence, p.last_timestamp,
                            p.coordinator_epoch, p.current_txn_start_offset,
                        )
                        for p in part.active_producers
                    ]
        return Partial(out, missing)

    def list_transactions(
        self,
        broker_ids: Iterable[int] | None = None,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        min_duration_ms: int | None = None,
        pattern: str | None = None,
    ) -> tuple[Partial[list[TransactionListing]], ListTransactionsSupport]:
        """ListTransactions on every broker (each coordinates a slice of ``__transaction_state``).

        Duration and pattern filters go to the broker when every broker supports them
        (v1 and v2); otherwise they are left to the caller, as the returned support says.
        """
        from kafka.protocol.admin.transactions import ListTransactionsRequest

        ids = list(broker_ids) if broker_ids is not None else [b.id for b in self.metadata().brokers]
        versions = self.api_versions(ids).value
        max_versions = [versions[i].versions.get("ListTransactions", (0, -1))[1] if i in versions else None for i in ids]
        if versions and all(v < 0 for v in max_versions if v is not None):
            raise UnsupportedBrokerError("the brokers do not support ListTransactions (needs Apache Kafka 3.0 or newer)")
        lowest = min((v for i, v in zip(ids, max_versions) if i in versions), default=0)
        support = ListTransactionsSupport(
            duration_on_broker=min_duration_ms is not None and lowest >= 1,
            pattern_on_broker=pattern is not None and lowest >= 2,
        )
        kwargs: dict[str, Any] = {
            "state_filters": list(states),
            "producer_id_filters": list(producer_ids),
            "min_version": 0,
        }
        if support.duration_on_broker:
            kwargs["duration_filter"] = int(min_duration_ms)
            kwargs["min_version"] = 1
        if support.pattern_on_broker:
            kwargs["transactional_id_pattern"] = pattern
            kwargs["min_version"] = 2
        responses = self._send_all([(i, ListTransactionsRequest(**kwargs)) for i in ids])
        out: list[TransactionListing] = []
        missing: list[str] = []
        for broker_id, resp in zip(ids, responses):
            if not self._check_response(resp, f"broker {broker_id}", missing):
                continue
            if resp.error_code:
                missing.append(f"broker {broker_id}: {_error_name(resp.error_code)}")
                continue
            for txn in resp.transaction_states:
                out.append(TransactionListing(txn.transactional_id, txn.producer_id, txn.transaction_state, broker_id))
        out.sort(key=lambda t: t.transactional_id)
        return Partial(out, missing), support

    def find_transaction_coordinators(self, transactional_ids: Iterable[str]) -> Partial[dict[str, int]]:
        from kafka.protocol.metadata import FindCoordinatorRequest

        tids = list(dict.fromkeys(transactional_ids))
        if not tids:
            return Partial({})
        missing: list[str] = []
        out: dict[str, int] = {}
        if self._max_version("FindCoordinator") >= 4:
            requests = [(None, FindCoordinatorRequest(key_type=1, coordinator_keys=tids, min_version=4))]
            (resp,) = self._send_all(requests)
            if not self._check_response(resp, "FindCoordinator", missing):
                return Partial(out, missing)
            for c in resp.coordinators:
                if c.error_code:
                    missing.append(f"transactional id {c.key!r}: {_error_name(c.error_code)}")
                else:
                    out[c.key] = c.node_id
        else:
            requests = [(None, FindCoordinatorRequest(key=t, key_type=1, max_version=3)) for t in tids]
            for tid, resp in zip(tids, self._send_all(requests)):
                if not self._check_response(resp, f"transactional id {tid!r}", missing):
                    continue
                if resp.error_code:
                    missing.append(f"transactional id {tid!r}: {_error_name(resp.error_code)}")
                else:
                    out[tid] = resp.node_id
        return Partial(out, missing)

    def describe_transactions(
        self, transactional_ids: Iterable[str]
    ) -> tuple[dict[str, TransactionDescription], dict[str, str], list[str]]:
        """DescribeTransactions routed to each id's coordinator.

        Returns ``(found, not_found, missing)``: descriptions by id; ids the coordinator does not
        know (TRANSACTIONAL_ID_NOT_FOUND), with the error name; and what could not be asked.
        """
        from kafka.protocol.admin.transactions import DescribeTransactionsRequest

        coordinators = self.find_transaction_coordinators(transactional_ids)
        missing = list(coordinators.missing)
        by_node: dict[int, list[str]] = defaultdict(list)
        for tid, node in coordinators.value.items():
            by_node[node].append(tid)
        nodes = list(by_node)
        responses = self._send_all([(n, DescribeTransactionsRequest(transactional_ids=by_node[n])) for n in nodes])
        found: dict[str, TransactionDescription] = {}
        not_found: dict[str, str] = {}
        for node, resp in zip(nodes, responses):
            if not self._check_response(resp, f"coordinator {node}", missing):
                continue
            for txn in resp.transaction_states:
                if txn.error_code:
                    error = _error_name(txn.error_code)
                    if error == "TRANSACTIONAL_ID_NOT_FOUND":
                        not_found[txn.transactional_id] = error
                    else:
                        missing.append(f"transactional id {txn.transactional_id!r}: {error}")
                    continue
                partitions = frozenset(TopicPartition(t.topic, p) for t in txn.topics for p in t.partitions)
                found[txn.transactional_id] = TransactionDescription(
                    txn.transactional_id, node, txn.transaction_state, txn.producer_id, txn.producer_epoch,
                    txn.transaction_timeout_ms, txn.transaction_start_time_ms, partitions,
                )
        return found, not_found, missing

    def write_abort_marker(
        self, tp: TopicPartition, producer_id: int, producer_epoch: int, coordinator_epoch: int, leader: int
    ) -> str | None:
        """WriteTxnMarkers(ABORT) for one producer on one partition, sent to its leader.

        Returns None on success or the broker's error name.
        """
        from kafka.protocol.producer.transaction import WriteTxnMarkersRequest

        marker_cls = WriteTxnMarkersRequest.WritableTxnMarker
        marker = marker_cls(
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            transaction_result=False,
            topics=[marker_cls.WritableTxnMarkerTopic(name=tp.topic, partition_indexes=[tp.partition])],
            coordinator_epoch=coordinator_epoch,
        )
        (resp,) = self._send_all([(leader, WriteTxnMarkersRequest(markers=[marker]))])
        if isinstance(resp, BaseException):
            self._raise_if_auth_in(resp)
            raise self._translate(resp, f"writing the abort marker to broker {leader}")
        for result in resp.markers:
            for topic in result.topics:
                for part in topic.partitions:
                    if part.error_code:
                        return _error_name(part.error_code)
        return None

    def fence_transactional_id(self, transactional_id: str, transaction_timeout_ms: int) -> None:
        """Bump the epoch of ``transactional_id`` (InitProducerId through a transactional producer).

        The coordinator aborts the id's open transaction and fences its live producer; this returns
        once that abort has completed. Describe the id before and after to see the old and new
        producer id and epoch.
        """
        from confluent_kafka import KafkaException, Producer

        # librdkafka logs fatal errors itself; they reach the user as one translated line instead,
        # and its log lines only with --debug (the NullHandler keeps logging's stderr fallback out).
        librdkafka_log = logging.getLogger("kafkatxn.librdkafka")
        if not librdkafka_log.handlers:
            librdkafka_log.addHandler(logging.NullHandler())
        conf = self.config.librdkafka(
            **{"transactional.id": transactional_id, "transaction.timeout.ms": transaction_timeout_ms, "logger": librdkafka_log}
        )
        # librdkafka refuses a transactional producer whose socket timeout exceeds its transaction timeout.
        conf["socket.timeout.ms"] = min(int(conf["socket.timeout.ms"]), transaction_timeout_ms + 100)
        what = f"fencing transactional id {transactional_id!r}"
        try:
            producer = Producer(conf)
        except KafkaException as exc:
            raise self._translate(exc, what) from exc
        try:
            producer.init_transactions(self.remaining_s())
        except KafkaException as exc:
            raise self._translate(exc, what) from exc
        finally:
            self.requests["InitProducerId"] += 1
            try:
                producer.close()
            except KafkaException:  # a failed producer repeats its fatal error on close
                log.debug("closing the fencing producer failed", exc_info=True)


_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}", re.ASCII)


def check_topic_name(name: str) -> None:
    """Kafka's rule for topic names: a name outside it cannot exist, so asking for one is a usage error."""
    if not _TOPIC_NAME.fullmatch(name) or name in (".", ".."):
        raise UsageError(f"bad topic name {_shorten(name)!r}: topic names are 1-249 characters of A-Z a-z 0-9 . _ -")


def compile_regex(pattern: str, what: str) -> re.Pattern[str]:
    """``pattern`` compiled, or a usage error naming ``what`` (e.g. ``--pattern``). Besides re.error,
    re raises OverflowError (``a{99999999999}``) and RecursionError (deep nesting)."""
    try:
        with warnings.catch_warnings():  # "FutureWarning: Possible nested set" would be a second stderr line
            warnings.simplefilter("ignore", FutureWarning)
            return re.compile(pattern)
    except (re.error, OverflowError, RecursionError) as exc:
        raise UsageError(f"bad {what} regex {_shorten(pattern)!r}: {exc}") from None


def _shorten(text: str, keep: int = 60) -> str:
    return text if len(text) <= keep else f"{text[:keep - 20]}…{text[-10:]}"


def _kafka_error_code(exc: BaseException) -> str | None:
    """The librdkafka error name (e.g. ``_TRANSPORT``) carried by a confluent-kafka exception."""
    arg = exc.args[0] if exc.args else None
    if arg is not None and hasattr(arg, "name") and hasattr(arg, "code"):
        try:
            return arg.name()
        except Exception:  # noqa: BLE001
            return None
    return None


def _error_name(code: int) -> str:
    import kafka.errors as Errors

    cls = Errors.for_code(code)
    name = getattr(cls, "message", None) or cls.__name__
    return str(name)


# A TLS alert from the broker: it refused the handshake (often: our client certificate).
_TLS_ALERT = re.compile(r"SSL alert number \d+|\b(?:sslv3|tlsv1\d?|ssl/tls) alert\b", re.I)

_SECRETISH = re.compile(r"(password|secret)\s*[=:]\s*\S+", re.I)


def _clean(text: str) -> str:
    """One line, without anything that looks like a credential."""
    text = " ".join(str(text).split())
    return _SECRETISH.sub(r"\1=******", text)


def check_client_settings(config: ConnectionConfig) -> None:
    """Raise the usage error a command would meet when it first builds its clients, without waiting
    for anything: librdkafka checks its settings as a client is made, kafka-python's are mapped here."""
    config.kafka_python()
    with Cluster(config) as cluster:
        cluster.admin  # noqa: B018 - building it is the check


def open_cluster(config: ConnectionConfig) -> Cluster:
    return Cluster(config)


def with_cluster(config: ConnectionConfig, fn: Callable[[Cluster], T]) -> T:
    with Cluster(config) as cluster:
        return fn(cluster)
