"""The facade: the one object commands use to ask Kafka anything.

The wire layer (:mod:`kafkatxn.kafka.wire`, kafka-python) serves metadata, the KIP-664 APIs,
ListOffsets and ApiVersions; confluent-kafka (librdkafka), built only when a command needs it,
serves configs, broker racks, consumer group offsets, read_committed reads and fencing. The facade routes requests to leaders and coordinators,
batches them, retries what fresh metadata can cure, and returns :class:`Partial` answers whose
``missing`` names each part that did not arrive as a typed :class:`Missing`. Every call shares
the deadline of the command (``--timeout``); a dead broker costs one deadline, not one per part.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import time
from collections import Counter, defaultdict
from typing import Any, Iterable, Mapping, Sequence

from kafkatxn.config import ConnectionConfig
from kafkatxn.config import check_settings_as_librdkafka
from kafkatxn.errors import (
    AuthenticationError,
    ClusterError,
    DeadlineExceeded,
    KafkatxnError,
    NotFoundError,
    UnsupportedBrokerError,
    UsageError,
)
from kafkatxn.kafka import protocol as proto
from kafkatxn.kafka.errors import ErrorTranslator, clean, kafka_error_code
from kafkatxn.kafka.wire import Wire
from kafkatxn.model import (
    INTERNAL_TOPICS,
    Broker,
    BrokerApis,
    BrokerInfo,
    ClusterMetadata,
    ConfigValue,
    DescribedTransactions,
    ListTransactionsSupport,
    Missing,
    Part,
    Partial,
    PartitionInfo,
    ProducerState,
    Subject,
    TopicPartition,
    TransactionalId,
    TransactionDescription,
    TransactionListing,
)
from kafkatxn.validation import check_topic_name, compile_regex

log = logging.getLogger("kafkatxn.cluster")

# DescribeProducers: one request per leader up to this many partitions. Kafka's own tool sends
# 500 a request: 60 requests at 30,000 partitions, where one per leader makes 3 (bench/bench_scale.py).
DESCRIBE_PRODUCERS_BATCH = 10_000

# ListOffsets errors that fresh metadata can cure (a leader moved or is being elected).
LEADERSHIP_ERRORS = frozenset({
    "UNKNOWN_TOPIC_OR_PARTITION", "LEADER_NOT_AVAILABLE", "NOT_LEADER_OR_FOLLOWER", "REPLICA_NOT_AVAILABLE",
    "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH", "OFFSET_NOT_AVAILABLE",
})

# Marks a part of a fan-out answer that did not arrive (its reason is in ``missing``).
_NOT_ARRIVED = object()


class Cluster:
    """Facade over both Kafka clients for one command run. Use as a context manager."""

    def __init__(self, config: ConnectionConfig, wire: Wire | None = None):
        self.config = config
        self.deadline = time.monotonic() + config.timeout_s
        self._admin = None
        self._wire = wire
        self._metadata: ClusterMetadata | None = None
        self._api_versions: dict[int, BrokerApis] = {}
        self.errors = ErrorTranslator(config, poll=self._poll)
        self.requests: Counter[str] = Counter()

    # -- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._wire is not None:
            try:
                self._wire.close()
            except Exception:  # closing must never hide the real outcome
                log.debug("closing kafka-python client failed", exc_info=True)
            self._wire = None
        self._admin = None

    def restart_deadline(self, timeout_s: float | None = None) -> None:
        """Start a fresh deadline (the exporter does this once per scrape, abort after a prompt)."""
        self.deadline = time.monotonic() + (timeout_s if timeout_s is not None else self.config.timeout_s)
        self._metadata = None
        self._api_versions.clear()
        self.errors.client_errors.clear()

    @contextlib.contextmanager
    def deadline_within(self, seconds: float):
        """Calls in the block end within ``seconds`` (DeadlineExceeded), the rest of the deadline
        being kept for what comes after them."""
        outer = self.deadline
        self.deadline = min(outer, time.monotonic() + seconds)
        try:
            yield
        finally:
            self.deadline = outer

    def remaining_s(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self.errors.deadline_exceeded()
        return left

    # -- clients ------------------------------------------------------------------------------

    def _poll(self) -> None:
        if self._admin is not None:
            self._admin.poll(0)

    @property
    def admin(self):
        if self._admin is None:
            from confluent_kafka import KafkaException
            from confluent_kafka.admin import AdminClient

            try:
                self._admin = AdminClient(self.config.librdkafka(error_cb=self.errors.on_client_error))
            except KafkaException as exc:
                # librdkafka checks its settings when the client is built (e.g. PLAIN without a
                # username): what it refuses there is the user's to fix, before anything is sent.
                if kafka_error_code(exc) == "_INVALID_ARG":
                    raise UsageError(f"bad client settings: {clean(exc.args[0].str())}") from None
                raise self.errors.translate(exc, "creating the client") from exc
        return self._admin

    @property
    def wire(self) -> Wire:
        """The kafka-python side: bootstrapped on first use, within the deadline, with the metadata.

        One connection to a bootstrap server carries the login, the Metadata and then the requests
        to that broker; a refused login or TLS handshake ends the command at once. A command that
        needs only the wire (``lso``, ``hanging``, ``producers``, ``transactions``) never builds
        the confluent-kafka client, nor imports it.
        """
        if self._wire is None:
            settings = self.config.kafka_python()
            # What librdkafka would refuse as a client is built, refused before anything is sent.
            check_settings_as_librdkafka(self.config.settings)
            try:
                wire, md, answered = Wire.bootstrap(settings, int(self.remaining_s() * 1000), settings["request_timeout_ms"])
            except Exception as exc:  # noqa: BLE001 - translated into one line
                raise self.errors.translate(exc, "connecting") from exc
            self._wire = wire
            self.requests["Metadata"] += 1
            self._metadata = _cluster_metadata(md, answered)
        return self._wire

    def _send_all(self, requests: Sequence[tuple[int | None, Any]]) -> list[Any]:
        """Every request in flight at once; each typed response, or the exception it failed with."""
        wire = self.wire
        self.remaining_s()  # raises once the deadline has passed

        def count(name: str) -> None:
            self.requests[name] += 1

        try:
            return wire.send_all(list(requests), self.deadline, count)
        except Exception as exc:  # noqa: BLE001
            raise self.errors.translate(exc, "sending requests") from exc

    def _arrived(self, result: Any, subject: Subject, missing: list[Missing]) -> bool:
        """True for a response; for an exception, note ``subject`` as missing (auth errors end the command)."""
        if isinstance(result, BaseException):
            missing.append(Missing(subject, self.errors.reason(result)))
            return False
        return True

    def _wait(self, future: concurrent.futures.Future, what: str, until: float | None = None) -> Any:
        """Wait for a confluent-kafka future within the deadline, failing fast on auth errors.

        With ``until`` (a monotonic time before the deadline), None once it has passed.
        """
        while True:
            self._poll()  # serves error_cb, which is how auth and transport errors arrive
            self.errors.raise_auth_errors()
            left = self.remaining_s()
            if until is not None:
                left = min(left, until - time.monotonic())
                if left <= 0:
                    return None
            try:
                return future.result(timeout=min(left, 0.2))
            except concurrent.futures.TimeoutError:
                if time.monotonic() >= self.deadline:
                    raise self.errors.translate(concurrent.futures.TimeoutError(), what) from None

    def _wait_or_note(self, future: concurrent.futures.Future, subject: Subject, missing: list[Missing]) -> Any:
        """The future's result, or ``_NOT_ARRIVED`` after noting in ``missing`` why ``subject`` did not arrive.

        Authentication failures still end the command: they concern every part alike.
        """
        try:
            return self._wait(future, str(subject))
        except DeadlineExceeded:
            missing.append(Missing(subject, "timed out"))
        except AuthenticationError:
            raise
        except Exception as exc:  # noqa: BLE001 - reported per part
            missing.append(Missing(subject, clean(str(exc))))
        return _NOT_ARRIVED

    # -- metadata (wire) and configs (confluent-kafka) -------------------------------------------

    def metadata(self, refresh: bool = False) -> ClusterMetadata:
        """Brokers and every topic's partitions (one Metadata request through the wire)."""
        if self._metadata is not None and not refresh:
            return self._metadata
        if self._wire is None:
            self.wire  # noqa: B018 - the bootstrap brings fresh metadata
            if self._metadata is not None:
                return self._metadata
        (resp,) = self._send_all([(None, proto.Metadata())])
        if isinstance(resp, BaseException):
            self.errors.raise_if_auth_in(resp)
            raise self.errors.translate(resp, "fetching metadata")
        self._metadata = _cluster_metadata(resp, None)
        return self._metadata

    def describe_cluster(self) -> ClusterMetadata:
        """Metadata plus broker racks (DescribeCluster), which plain metadata does not carry."""
        md = self.metadata()
        try:
            desc = self._wait(self.admin.describe_cluster(request_timeout=self.remaining_s()), "describing the cluster")
        except Exception as exc:  # noqa: BLE001
            raise self.errors.translate(exc, "describing the cluster") from exc
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
        missing: list[Missing] = list(reachable.missing)
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
            entries = self._wait_or_note(future, Broker(broker_id), missing)
            if entries is _NOT_ARRIVED:
                continue
            self.requests["DescribeConfigs"] += 1
            result[broker_id] = {
                name: ConfigValue(entry.value, ConfigSource(entry.source).name.lower(), bool(entry.is_default))
                for name, entry in entries.items()
                if name in wanted
            }
        return Partial(result, missing)

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
                raise self.errors.translate(exc, "listing consumer groups") from exc
            self.requests["ListGroups"] += 1
            if not result.errors:
                return sorted(g.group_id for g in result.valid)
            # KafkaError objects: their str() is a repr; .str() is the message.
            reasons = "; ".join(sorted({clean(e.str() if hasattr(e, "str") else str(e)) for e in result.errors}))
            if self.deadline - time.monotonic() < 0.5:
                if all(getattr(e, "name", lambda: "")() in ("_TIMED_OUT", "_TRANSPORT", "_ALL_BROKERS_DOWN") for e in result.errors):
                    from confluent_kafka import KafkaException

                    # Nothing answered in time: say so as every other request does (unreachable, deadline).
                    raise self.errors.translate(KafkaException(result.errors[0]), "listing consumer groups")
                raise ClusterError(f"listing consumer groups failed on some brokers: {reasons}")
            log.debug("listing consumer groups: retrying after %s", reasons)
            time.sleep(0.25)

    def group_offsets(self, groups: Iterable[str]) -> Partial[dict[str, dict[TopicPartition, int]]]:
        """Committed offsets per group (offsets < 0 mean nothing committed)."""
        from confluent_kafka import ConsumerGroupTopicPartitions

        out: dict[str, dict[TopicPartition, int]] = {}
        missing: list[Missing] = []
        # All groups in flight at once (the call takes one group): N groups cost one round trip, not N.
        pending = {
            group: self.admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group)], request_timeout=self.remaining_s()
            )[group]
            for group in dict.fromkeys(groups)
        }
        for group, future in pending.items():
            result = self._wait_or_note(future, Part(f"group {group}"), missing)
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
            error_cb=self.errors.on_client_error,
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
        missing: list[Missing] = []
        leaders = self.metadata().leaders
        self.requests["Fetch"] += len({leaders.get(tp) for tp in pending})  # at least one per leader
        try:
            consumer.assign([CTP(tp.topic, tp.partition, off) for tp, off in pending.items()])
            while pending and time.monotonic() < self.deadline:
                self.errors.raise_auth_errors()
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
                        missing.append(Missing(tp, clean(err.str())))
                    del pending[tp]
                    done.append(CTP(tp.topic, tp.partition))
                if done:
                    consumer.pause(done)  # stop fetching what is decided
        except KafkatxnError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise self.errors.translate(exc, "reading partitions") from exc
        finally:
            consumer.close()
        missing.extend(Missing(tp, f"timed out reading from offset {off}") for tp, off in pending.items())
        return Partial(out, missing)

    # -- offsets (wire) ------------------------------------------------------------------------

    def list_offsets(self, partitions: Iterable[TopicPartition], read_committed: bool) -> Partial[dict[TopicPartition, int]]:
        """Latest offset per partition: the high watermark (read_uncommitted) or the LSO (read_committed).

        One ListOffsets request per leader, all in flight together.
        """
        both = self._latest_offsets(partitions, (read_committed,))[0]
        return Partial({tp: offsets[0] for tp, offsets in both.value.items()}, both.missing)

    def stable_and_high_offsets(self, partitions: Iterable[TopicPartition]) -> Partial[dict[TopicPartition, tuple[int, int]]]:
        """``(last stable offset, high watermark)`` per partition in one round trip.

        Each leader gets the read_committed request first, then the read_uncommitted one, on the
        same connection; a broker answers a connection's requests in order and the HW only grows,
        so every pair has LSO <= HW.
        """
        return self._latest_offsets(partitions, (True, False))[0]  # type: ignore[return-value]

    def offsets_and_producers(
        self, partitions: Iterable[TopicPartition]
    ) -> tuple[Partial[dict[TopicPartition, tuple[int, int]]], Partial[dict[TopicPartition, list[ProducerState]]] | None]:
        """:meth:`stable_and_high_offsets` and :meth:`describe_producers` of the same partitions, the
        DescribeProducers requests sent with the first ListOffsets ones: a leader works on its
        DescribeProducers while the client decodes its ListOffsets answers, instead of a round trip
        after them (``check`` and the exporter need both). The producers are None when the brokers
        do not support DescribeProducers; ask :meth:`describe_producers` then, for its error."""
        tps = list(dict.fromkeys(partitions))
        if self.wire.max_version("DescribeProducers") < 0:
            return self.stable_and_high_offsets(tps), None
        producer_requests, producers_missing = self._producer_requests(sorted(tps), None)
        pairs, responses = self._latest_offsets(tps, (True, False), producer_requests)
        return pairs, self._producer_answers(producer_requests, responses, producers_missing)  # type: ignore[return-value]

    def _latest_offsets(
        self, partitions: Iterable[TopicPartition], levels: tuple[bool, ...], also: Sequence[tuple[int, Any]] = ()
    ) -> tuple[Partial[dict[TopicPartition, tuple[int, ...]]], list[Any]]:
        """The offsets at ``levels``, and the answers to ``also``: other requests sent in the first
        round trip, after the ListOffsets ones."""
        tps = list(dict.fromkeys(partitions))
        also_answers: list[Any] = []
        found: dict[TopicPartition, list[int | None]] = {}
        errors: dict[TopicPartition, str] = {}
        pending = tps
        for attempt in range(2):
            # After a leadership error, one more try with fresh metadata (a leader moved).
            leaders = self.metadata(refresh=attempt > 0).leaders
            by_node: dict[int, list[TopicPartition]] = defaultdict(list)
            for tp in pending:
                leader = leaders.get(tp)
                if leader is None:
                    errors[tp] = "unknown topic or partition"
                elif leader < 0:
                    errors[tp] = "no leader"
                else:
                    by_node[leader].append(tp)
            requests = [
                (node, proto.ListOffsets(tuple(node_tps), committed)) for node, node_tps in by_node.items() for committed in levels
            ]
            retry: list[TopicPartition] = []
            extra = list(also) if attempt == 0 else []
            responses = self._send_all(requests + extra) if requests or extra else []
            if extra:
                responses, also_answers = responses[: len(requests)], responses[len(requests) :]
            for i, resp in enumerate(responses):
                node, level = requests[i][0], i % len(levels)
                failed: list[Missing] = []
                if not self._arrived(resp, Broker(node), failed):
                    for tp in by_node[node]:
                        errors[tp] = str(failed[0])
                    continue
                for part in resp.partitions:
                    if part.error:
                        errors[part.tp] = part.error
                        if part.error in LEADERSHIP_ERRORS:
                            retry.append(part.tp)
                    else:
                        found.setdefault(part.tp, [None] * len(levels))[level] = part.offset
            pending = list(dict.fromkeys(retry))
            if not pending or time.monotonic() >= self.deadline:
                break
            for tp in pending:
                found.pop(tp, None)  # ask again at every level: a pair must come from one leader
        out = {tp: tuple(v) for tp, v in found.items() if None not in v}
        missing = [Missing(tp, errors.get(tp, "no answer")) for tp in tps if tp not in out]
        return Partial(out, missing), also_answers  # type: ignore[arg-type]

    # -- producers and transactions (wire) -----------------------------------------------------

    def api_versions(self, broker_ids: Iterable[int] | None = None, probe: bool = True) -> Partial[dict[int, BrokerApis]]:
        """API versions per broker. ``probe=False``: a broker with an open connection is not asked
        again, its versions are the ones it gave when that connection was made (one request less;
        a probe is what tells a broker that stopped answering from one that answers)."""
        ids = list(broker_ids) if broker_ids is not None else [b.id for b in self.metadata().brokers]
        out = {i: self._api_versions[i] for i in ids if i in self._api_versions}
        if not probe:  # not cached: a later probe (broker_configs) still asks
            for i in ids:
                known = self.wire.known_api_versions(i) if i not in out else None
                if known is not None:
                    out[i] = BrokerApis(known.versions, known.inferred_version)
        asked = [i for i in ids if i not in out]
        if not asked:
            return Partial(out)
        responses = self._send_all([(i, proto.ApiVersions()) for i in asked])
        missing: list[Missing] = []
        for broker_id, resp in zip(asked, responses):
            if self._arrived(resp, Broker(broker_id), missing):
                out[broker_id] = self._api_versions[broker_id] = BrokerApis(resp.versions, resp.inferred_version)
        return Partial({i: out[i] for i in ids if i in out}, missing)

    def finalized_features(self) -> dict[str, int]:
        try:
            features = self.wire.finalized_features()
        except KafkatxnError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise self.errors.translate(exc, "describing features") from exc
        self.requests["ApiVersions"] += 1
        return features

    def describe_producers(
        self, partitions: Iterable[TopicPartition], broker_id: int | None = None
    ) -> Partial[dict[TopicPartition, list[ProducerState]]]:
        """DescribeProducers, batched per leader (or sent to ``broker_id``), ≤10,000 partitions a request."""
        # dict.fromkeys keeps the order given: partitions usually come sorted (metadata order), and
        # sorting a sorted run is linear where sorting a set of 30,000 costs 40 ms.
        tps = sorted(dict.fromkeys(partitions))
        if not tps:
            return Partial({})
        if self.wire.max_version("DescribeProducers") < 0:
            raise UnsupportedBrokerError("the broker does not support DescribeProducers (needs Apache Kafka 2.8 or newer)")
        requests, missing = self._producer_requests(tps, broker_id)
        return self._producer_answers(requests, self._send_all(requests), missing)

    def _producer_requests(
        self, tps: list[TopicPartition], broker_id: int | None
    ) -> tuple[list[tuple[int, proto.DescribeProducers]], list[Missing]]:
        missing: list[Missing] = []
        by_node: dict[int, list[TopicPartition]] = defaultdict(list)
        if broker_id is not None:
            by_node[broker_id] = tps
        else:
            leaders = self.metadata().leaders
            for tp in tps:
                leader = leaders.get(tp, -1)
                if leader < 0:
                    missing.append(Missing(tp, "no leader"))
                else:
                    by_node[leader].append(tp)
        requests = [
            (node, proto.DescribeProducers(tuple(node_tps[i : i + DESCRIBE_PRODUCERS_BATCH])))
            for node, node_tps in by_node.items()
            for i in range(0, len(node_tps), DESCRIBE_PRODUCERS_BATCH)
        ]
        return requests, missing

    def _producer_answers(
        self, requests: list[tuple[int, proto.DescribeProducers]], responses: list[Any], missing: list[Missing]
    ) -> Partial[dict[TopicPartition, list[ProducerState]]]:
        out: dict[TopicPartition, list[ProducerState]] = {}
        for (node, request), resp in zip(requests, responses):
            if not self._arrived(resp, Broker(node), missing):
                # Each partition of the batch is missing, by name: verdicts look partitions up.
                reason = f"{missing.pop().reason} (broker {node})"
                missing.extend(Missing(tp, reason) for tp in request.partitions)
                continue
            for part in resp.partitions:
                if part.error:
                    missing.append(Missing(part.tp, part.error))
                else:
                    out[part.tp] = list(part.producers)
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
        ids = list(broker_ids) if broker_ids is not None else [b.id for b in self.metadata().brokers]
        versions = self.api_versions(ids, probe=False).value  # ListTransactions itself finds a dead broker
        max_versions = [versions[i].versions.get("ListTransactions", (0, -1))[1] if i in versions else None for i in ids]
        if versions and all(v < 0 for v in max_versions if v is not None):
            raise UnsupportedBrokerError("the brokers do not support ListTransactions (needs Apache Kafka 3.0 or newer)")
        lowest = min((v for i, v in zip(ids, max_versions) if i in versions), default=0)
        support = ListTransactionsSupport(
            duration_on_broker=min_duration_ms is not None and lowest >= 1,
            pattern_on_broker=pattern is not None and lowest >= 2,
        )
        request = proto.ListTransactions(
            tuple(states), tuple(producer_ids),
            int(min_duration_ms) if support.duration_on_broker and min_duration_ms is not None else None,
            pattern if support.pattern_on_broker else None,
        )
        out: list[TransactionListing] = []
        missing: list[Missing] = []
        for broker_id, resp in zip(ids, self._send_all([(i, request) for i in ids])):
            if not self._arrived(resp, Broker(broker_id), missing):
                continue
            if resp.error:
                missing.append(Missing(Broker(broker_id), resp.error))
                continue
            out.extend(TransactionListing(t.transactional_id, t.producer_id, t.state, broker_id) for t in resp.transactions)
        out.sort(key=lambda t: t.transactional_id)
        return Partial(out, missing), support

    def find_transaction_coordinators(self, transactional_ids: Iterable[str]) -> Partial[dict[str, int]]:
        tids = list(dict.fromkeys(transactional_ids))
        if not tids:
            return Partial({})
        missing: list[Missing] = []
        out: dict[str, int] = {}
        if self.wire.max_version("FindCoordinator") >= 4:
            requests = [(None, proto.FindTransactionCoordinators(tuple(tids)))]
        else:
            requests = [(None, proto.FindTransactionCoordinators((t,), batched=False)) for t in tids]
        for (_node, request), resp in zip(requests, self._send_all(requests)):
            if not self._arrived(resp, TransactionalId(request.transactional_ids[0]), missing):
                reason = missing.pop().reason
                missing.extend(Missing(TransactionalId(t), f"FindCoordinator: {reason}") for t in request.transactional_ids)
                continue
            for c in resp.coordinators:
                if c.error:
                    missing.append(Missing(TransactionalId(c.transactional_id), c.error))
                else:
                    out[c.transactional_id] = c.node_id
        return Partial(out, missing)

    def describe_transactions(self, transactional_ids: Iterable[str]) -> Partial[DescribedTransactions]:
        """DescribeTransactions routed to each id's coordinator: what was described, the ids the
        coordinator does not know (TRANSACTIONAL_ID_NOT_FOUND), and as ``missing`` the ids that
        could not be asked."""
        coordinators = self.find_transaction_coordinators(transactional_ids)
        missing = list(coordinators.missing)
        by_node: dict[int, list[str]] = defaultdict(list)
        for tid, node in coordinators.value.items():
            by_node[node].append(tid)
        requests = [(node, proto.DescribeTransactions(tuple(ids))) for node, ids in by_node.items()]
        result = DescribedTransactions()
        for (node, request), resp in zip(requests, self._send_all(requests)):
            if not self._arrived(resp, Broker(node), missing):
                reason = f"coordinator {node}: {missing.pop().reason}"
                missing.extend(Missing(TransactionalId(t), reason) for t in request.transactional_ids)
                continue
            for txn in resp.transactions:
                if txn.error == "TRANSACTIONAL_ID_NOT_FOUND":
                    result.not_found[txn.transactional_id] = txn.error
                elif txn.error:
                    missing.append(Missing(TransactionalId(txn.transactional_id), txn.error))
                else:
                    result.found[txn.transactional_id] = TransactionDescription(
                        txn.transactional_id, node, txn.state, txn.producer_id, txn.producer_epoch,
                        txn.timeout_ms, txn.start_time_ms, txn.partitions,
                    )
        return Partial(result, missing)

    def write_abort_marker(
        self, tp: TopicPartition, producer_id: int, producer_epoch: int, coordinator_epoch: int, leader: int
    ) -> str | None:
        """WriteTxnMarkers(ABORT) for one producer on one partition, sent to its leader.

        Returns None on success or the broker's error name.
        """
        (resp,) = self._send_all([(leader, proto.WriteAbortMarker(tp, producer_id, producer_epoch, coordinator_epoch))])
        if isinstance(resp, BaseException):
            self.errors.raise_if_auth_in(resp)
            raise self.errors.translate(resp, f"writing the abort marker to broker {leader}")
        return resp.error

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
            raise self.errors.translate(exc, what) from exc
        try:
            producer.init_transactions(self.remaining_s())
        except KafkaException as exc:
            raise self.errors.translate(exc, what) from exc
        finally:
            self.requests["InitProducerId"] += 1
            try:
                producer.close()
            except KafkaException:  # a failed producer repeats its fatal error on close
                log.debug("closing the fencing producer failed", exc_info=True)


def _cluster_metadata(md: proto.MetadataResponse, answered_by: int | None) -> ClusterMetadata:
    partitions = tuple(sorted(md.partitions, key=lambda p: (p.topic, p.partition)))
    return ClusterMetadata(md.cluster_id, md.controller_id, md.brokers, partitions, answered_by)


def check_client_settings(config: ConnectionConfig) -> None:
    """Raise the usage error a command would meet when it first builds its clients, without waiting
    for anything: librdkafka checks its settings as a client is made, kafka-python's are mapped here."""
    config.kafka_python()
    with Cluster(config) as cluster:
        cluster.admin  # noqa: B018 - building it is the check
