"""The data model: what the Kafka package returns and the pure modules decide on.

Nothing here talks to Kafka or imports a Kafka client, so hanging, lso, check, remedy and the
audit rules can be tested over plain values.

Annotations are evaluated as the classes are made (no ``from __future__ import annotations``): a named
tuple's string annotation is compiled into a ``ForwardRef`` at import (14 of them here), an evaluated
one is not.
"""

import functools
import threading
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import field
from itertools import islice, repeat
from operator import itemgetter, lt
from typing import Any, Generic, NamedTuple, TypeVar, Union

from kafkatxn.records import FRESH, FrozenRecord, Record, record  # noqa: F401 - the model's records; others import them from here

T = TypeVar("T")

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
TRANSACTION_STATE_TOPIC = "__transaction_state"


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


# The transaction timeout a coordinator records for a two-phase-commit (KIP-939) producer.
TWO_PHASE_COMMIT_TIMEOUT_MS = 2_147_483_647


@record
class BrokerInfo(FrozenRecord):
    """A broker, as the metadata lists it."""

    id: int
    host: str
    port: int
    rack: str | None = None

    def __init__(self, id: int, host: str, port: int, rack: str | None = None) -> None:
        self.__dict__.update(id=id, host=host, port=port, rack=rack)


# PartitionInfo and ProducerState are named tuples, not frozen dataclasses (a metadata answer at tens of
# thousands of partitions makes as many of each: several times cheaper to make). ``_object_in_json``:
# plain.to_plain shows them as objects, like the other records, not lists.
class PartitionInfo(NamedTuple):
    topic: str
    partition: int
    leader: int  # -1 when the partition has no leader
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    internal: bool = False
    _object_in_json = True

    @property
    def tp(self) -> TopicPartition:
        return tuple.__new__(TopicPartition, (self[0], self[1]))  # type: ignore[type-var]


_TOPIC, _INDEX, _LEADER = itemgetter(0), itemgetter(1), itemgetter(2)  # of a PartitionInfo (or a TopicPartition)

# Each topic's TopicPartitions by index, made once a process and shared by the metadata's routing and
# the wire's readers of the answers that name them (ListOffsets' of topics of 16 partitions or more a
# leader: wire/offsets_layout.py makes smaller ones in C): a named tuple made even in C costs 0.2 us,
# 30,000 a pass, and dict look-ups of the same object stop at its identity. Emptied past this many
# (deleted topics').
KEPT_PARTITIONS_LIMIT = 1_000_000
_kept: dict[str, list[TopicPartition]] = {}
_kept_count = 0
_keeping = threading.Lock()  # the IO thread reads answers while the main thread routes


def kept_topic_partitions(name: str, indexes: Sequence[int]) -> Iterator[TopicPartition]:
    """The TopicPartitions of topic ``name`` at ``indexes`` (partition numbers), the kept ones
    (:data:`KEPT_PARTITIONS_LIMIT`): looked up in C, none made once kept; a topic's every partition
    in order (0 .. n-1, as metadata and most answers name them) is a slice of the kept ones."""
    global _kept_count
    if not indexes:
        return iter(())
    count = len(indexes)
    every = indexes[-1] == count - 1 and indexes[0] == 0 and indexes == _numbers(count)  # no min nor max to find
    known = _kept.get(name)
    if every and known is not None and count <= len(known):
        return iter(known[:count])
    top, least = (count - 1, 0) if every else (max(indexes), min(indexes))
    if known is None or top >= len(known):
        if least < 0 or top >= KEPT_PARTITIONS_LIMIT:  # not partition numbers to keep a table of
            return _made(name, indexes)
        with _keeping:
            if _kept_count + top >= KEPT_PARTITIONS_LIMIT:
                _kept.clear()
                _kept_count = 0
            known = _kept.setdefault(name, [])
            if top >= len(known):
                _kept_count += top + 1 - len(known)
                known.extend(_made(name, range(len(known), top + 1)))
    elif least < 0:
        return _made(name, indexes)
    return iter(known[:count]) if every else map(known.__getitem__, indexes)


_NUMBERS: list[int] = []


def _numbers(count: int) -> list[int]:
    """``list(range(count))``, sliced from one list kept for the process."""
    if len(_NUMBERS) < count:
        with _keeping:
            _NUMBERS.extend(range(len(_NUMBERS), count))
    return _NUMBERS[:count]


def _made(name: str, indexes: Iterable[int]) -> Iterator[TopicPartition]:
    return map(tuple.__new__, repeat(TopicPartition), zip(repeat(name), indexes))  # type: ignore[arg-type]


def topic_partitions(partitions: Iterable[PartitionInfo]) -> list[TopicPartition]:
    """Each partition's :attr:`PartitionInfo.tp`, the kept ones (:func:`kept_topic_partitions`), a topic's
    run at a time (a named tuple's own ``__new__`` is a Python step): a run's end found by bisection (metadata's
    order) and checked to hold only its topic, in C: half the steps per partition of ``groupby``."""
    parts = partitions if type(partitions) in (list, tuple) else list(partitions)
    names = list(map(_TOPIC, parts))
    indexes = list(map(_INDEX, parts))
    out: list[TopicPartition] = []
    start, count = 0, len(names)
    while start < count:
        name = names[start]
        end = bisect_right(names, name, start)
        if names[start:end].count(name) != end - start:  # not sorted there: this one partition alone
            end = start + 1
        out.extend(kept_topic_partitions(name, indexes[start:end]))
        start = end
    return out


class InTopicOrder(tuple):  # type: ignore[type-arg]
    """PartitionInfos in topic and partition order, each once, with their kept TopicPartitions (``tps``): made a topic
    at a time where a Metadata answer is read (``wire.bodies``), not a partition at a time again (:attr:`ClusterMetadata.tps`)."""

    def __new__(cls, partitions: Iterable["PartitionInfo"], tps: list[TopicPartition] | None = None) -> "InTopicOrder":
        made = super().__new__(cls, partitions)
        made.tps = tps if tps is not None else topic_partitions(made)  # (a copy's are set after: pickle, copy)
        return made


def in_partition_order(partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
    """``partitions`` once each, in topic and partition order: the order a snapshot asks offsets in
    (``facts_lso.take_snapshot``), and ``lso`` sends them ahead in. Deduplicated in the order given
    (metadata's), then sorted: a tenth of sorting a set's hash order (3 against 30 ms at 30,000). A list
    or tuple in that order already (as ``lso`` hands it over) is copied after one pass in C (1.6 ms)."""
    if type(partitions) in (list, tuple) and is_in_partition_order(partitions):  # type: ignore[arg-type]
        return list(partitions)
    return sorted(dict.fromkeys(partitions))


def is_in_partition_order(partitions: Sequence[TopicPartition]) -> bool:
    """Whether ``partitions`` are strictly increasing (no partition twice, and sorted): one pass of comparisons in C."""
    return all(map(lt, partitions, islice(partitions, 1, None)))


@record
class ClusterMetadata(FrozenRecord):
    """The cluster's brokers and partitions, as one metadata answer gives them."""

    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerInfo, ...]
    partitions: tuple[PartitionInfo, ...]
    answered_by: int | None = None  # the broker that answered this metadata request

    def __init__(self, cluster_id: str | None, controller_id: int, brokers: tuple[BrokerInfo, ...],
                 partitions: tuple[PartitionInfo, ...], answered_by: int | None = None) -> None:
        self.__dict__.update(cluster_id=cluster_id, controller_id=controller_id, brokers=brokers, partitions=partitions,
                             answered_by=answered_by)

    def topics(self) -> list[str]:
        return sorted({p.topic for p in self.partitions})

    def broker(self, broker_id: int) -> BrokerInfo | None:
        return next((b for b in self.brokers if b.id == broker_id), None)

    @functools.cached_property
    def tps(self) -> list[TopicPartition]:
        """Each partition's TopicPartition, in :attr:`partitions`' order: made once per metadata answer
        (the selection and the leaders take them, not made again)."""
        return self.partitions.tps if type(self.partitions) is InTopicOrder else topic_partitions(self.partitions)

    @functools.cached_property
    def leaders(self) -> dict[TopicPartition, int]:
        """Leader per partition (-1: none), made once per metadata answer: requests are routed by it
        several times a command, over 10,000s of partitions (made in C: no Python step each)."""
        return dict(zip(self.tps, map(_LEADER, self.partitions)))

    @functools.cached_property
    def transaction_log(self) -> tuple[PartitionInfo, ...]:
        """``__transaction_state``'s partitions in partition order (empty: not in the metadata), found
        once per metadata answer: each id's coordinator is the leader of one of them."""
        return tuple(sorted((p for p in self.partitions if p.topic == TRANSACTION_STATE_TOPIC), key=lambda p: p.partition))


class ProducerState(NamedTuple):
    """One active producer on one partition, as DescribeProducers reports it."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp_ms: int
    coordinator_epoch: int
    current_txn_start_offset: int  # -1 when the producer has no open transaction
    _object_in_json = True


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


@record
class TransactionListing(FrozenRecord):
    """One transactional id as ListTransactions lists it."""

    transactional_id: str
    producer_id: int
    state: str
    coordinator_id: int

    def __init__(self, transactional_id: str, producer_id: int, state: str, coordinator_id: int) -> None:
        self.__dict__.update(transactional_id=transactional_id, producer_id=producer_id, state=state, coordinator_id=coordinator_id)


@record
class TransactionDescription(FrozenRecord):
    """One transactional id as its coordinator describes it (DescribeTransactions)."""

    transactional_id: str
    coordinator_id: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int  # -1 when no transaction is open
    partitions: frozenset[TopicPartition]

    def __init__(self, transactional_id: str, coordinator_id: int, state: str, producer_id: int, producer_epoch: int,
                 timeout_ms: int, start_time_ms: int, partitions: frozenset[TopicPartition]) -> None:
        self.__dict__.update(transactional_id=transactional_id, coordinator_id=coordinator_id, state=state, producer_id=producer_id,
                             producer_epoch=producer_epoch, timeout_ms=timeout_ms, start_time_ms=start_time_ms, partitions=partitions)

    @property
    def two_phase_commit(self) -> bool:
        """KIP-939: the coordinator records a 2PC producer's timeout as Int.MaxValue; no one times it out."""
        return self.timeout_ms == TWO_PHASE_COMMIT_TIMEOUT_MS


@record
class DescribedTransactions(FrozenRecord):
    """DescribeTransactions by id: what the coordinators described, and the ids they do not know
    (TRANSACTIONAL_ID_NOT_FOUND, with the error name). Ids that could not be asked are ``Missing``."""

    found: dict[str, TransactionDescription] = field(default_factory=dict)
    not_found: dict[str, str] = field(default_factory=dict)

    def __init__(self, found: dict[str, TransactionDescription] = FRESH, not_found: dict[str, str] = FRESH) -> None:
        self.__dict__.update(found={} if found is FRESH else found, not_found={} if not_found is FRESH else not_found)


# Whether ListTransactions shows this principal every transactional id
# (:meth:`kafkatxn.kafka.transactions.TransactionsApi.transactional_id_visibility`).
IDS_ALL = "all"  # the probe id was describable: nothing is left out (see the method for the limits)
IDS_FILTERED = "filtered"  # DESCRIBE on a random id was denied: ids this principal may not describe are left out
IDS_UNKNOWN = "unknown"  # the probe did not answer


@record
class ConfigValue(FrozenRecord):
    """One broker config's value, where it was set, and whether it is Kafka's default."""

    value: str | None
    source: str
    is_default: bool

    def __init__(self, value: str | None, source: str, is_default: bool) -> None:
        self.__dict__.update(value=value, source=source, is_default=is_default)


@record
class BrokerApis(FrozenRecord):
    """A broker's API versions (ApiVersions)."""

    versions: dict[str, tuple[int, int]]  # API name -> (min, max) version
    inferred_version: str  # the newest Kafka release these versions fit, e.g. "4.3"

    def __init__(self, versions: dict[str, tuple[int, int]], inferred_version: str) -> None:
        self.__dict__.update(versions=versions, inferred_version=inferred_version)


@record
class ListTransactionsSupport(FrozenRecord):
    """Which filters the brokers applied themselves (ListTransactions v1: duration, v2: pattern)."""

    duration_on_broker: bool
    pattern_on_broker: bool

    def __init__(self, duration_on_broker: bool, pattern_on_broker: bool) -> None:
        self.__dict__.update(duration_on_broker=duration_on_broker, pattern_on_broker=pattern_on_broker)


# -- what did not arrive -----------------------------------------------------------------------


@record
class Broker(FrozenRecord):
    """A broker as the subject of a missing part."""

    id: int

    def __init__(self, id: int) -> None:
        self.__dict__["id"] = id

    def __str__(self) -> str:
        return f"broker {self.id}"


@record
class TransactionalId(FrozenRecord):
    """A transactional id as the subject of a missing part."""

    id: str

    def __init__(self, id: str) -> None:
        self.__dict__["id"] = id

    def __str__(self) -> str:
        return f"transactional id {self.id!r}"


@record
class Part(FrozenRecord):
    """Any other part of an answer (a step, a group, a config), named in words."""

    name: str

    def __init__(self, name: str) -> None:
        self.__dict__["name"] = name

    def __str__(self) -> str:
        return self.name


Subject = Union[TopicPartition, Broker, TransactionalId, Part]


class QueryReader(str):
    """A reader that is not a consumer group: a Spark query, keyed beside the groups by its label
    (``spark:<name>``, or ``spark:<id>`` unnamed). It has no ``__consumer_offsets`` partition and no group API."""

    query_name: str | None
    query_id: str | None
    checkpoint: str

    def __new__(cls, query_name: str | None, query_id: str | None, checkpoint: str) -> "QueryReader":
        self = super().__new__(cls, f"spark:{query_name or query_id or checkpoint}")
        self.query_name, self.query_id, self.checkpoint = query_name, query_id, checkpoint
        return self

    def __reduce__(self) -> tuple:  # copies and pickles keep what the query is, not only its label
        return (QueryReader, (self.query_name, self.query_id, self.checkpoint))


@record
class TransactionLogHistory(FrozenRecord):
    """What ``__transaction_state`` still holds of one transactional id: its records in log order
    (``kafkatxn.txnlog_records.TxnLogRecord``), a contiguous tail of the id's history (the
    cleaner keeps only a key's latest record in the segments it compacted), and how many records of
    its log partition could not be decoded (any of them may be this id's)."""

    transactional_id: str
    log_partition: int
    records: tuple[Any, ...] = ()
    undecoded: int = 0

    def __init__(self, transactional_id: str, log_partition: int, records: tuple[Any, ...] = (), undecoded: int = 0) -> None:
        self.__dict__.update(transactional_id=transactional_id, log_partition=log_partition, records=records, undecoded=undecoded)


@record
class Missing(FrozenRecord):
    """A part of a fan-out answer that did not arrive, and why. Verdicts compare ``subject``
    (a typed value), never the text: a missing ``t-10`` is not ``t-1``."""

    subject: Subject
    reason: str
    what: str = ""  # which request it was part of ("offsets", "producer state"), for the message
    # Set when the principal was not authorized: the ACL that would let it see this part
    # ("READ on Topic orders"); its ``reason`` then says "not authorized: needs ...".
    acl: str = ""

    def __init__(self, subject: Subject, reason: str, what: str = "", acl: str = "") -> None:
        self.__dict__.update(subject=subject, reason=reason, what=what, acl=acl)

    def __str__(self) -> str:
        return f"{self.what} {self.subject}: {self.reason}" if self.what else f"{self.subject}: {self.reason}"

    def within(self, what: str) -> "Missing":
        """The same part, named as part of ``what`` (e.g. ``offsets t-0: no leader``)."""
        return Missing(self.subject, self.reason, f"{what} {self.what}".strip() if self.what else what, self.acl)

    @property
    def not_authorized(self) -> bool:
        return bool(self.acl)


@record
class Partial(Record, Generic[T]):
    """A result that may lack parts: ``missing`` names each part that did not arrive, and why."""

    value: T
    missing: list[Missing] = field(default_factory=list)

    def __init__(self, value: T, missing: list[Missing] = FRESH) -> None:
        self.value = value
        self.missing = [] if missing is FRESH else missing

    @property
    def complete(self) -> bool:
        return not self.missing

    def missing_for(self, subject: Subject) -> list[Missing]:
        return [m for m in self.missing if m.subject == subject]

