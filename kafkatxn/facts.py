"""The fact layer: what every command and the exporter scrape ask of the cluster, by name.

Each fact is gathered by one function here (over :mod:`kafkatxn.gather`'s requests and the facade)
and returned with the typed :class:`Missing` parts that did not answer; a command asks for the facts
it needs and nothing more, and inside one run (:func:`kafkatxn.gather.in_one_run`) a fact asked
twice is answered from the run. The facts:

- the partitions a command scans (:func:`partitions_for_broker` narrows them to a broker's);
- the producer states on them (:func:`producer_states`: DescribeProducers, and the transactional
  ids where a command shows them);
- the **pins** (:func:`pins`): the one sequence every verdict on an open transaction goes through —
  classify by the coordinators' view (:func:`kafkatxn.verdicts.classify`), ask again those no
  coordinator tracks (one that ended meanwhile is no pin), settle the ones past their deadline by
  the coordinator's log (a lost COMMIT marker is not hanging), and date them by their first records.
  ``hanging``, ``check`` and the exporter ask it of every open transaction they scan (:func:`scan`);
  ``lso``, its ``--groups`` and ``diagnose`` of the transactions pinning an LSO
  (:func:`kafkatxn.facts_lso.take_snapshot`).

The LSO and group facts are :mod:`kafkatxn.facts_lso`'s, what the coordinators' log holds of
transactional ids :mod:`kafkatxn.facts_history`'s. Nothing here decides: the verdicts over these
facts are :mod:`kafkatxn.verdicts`'.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import field
from itertools import compress, repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Sequence

from kafkatxn import gather, lost_commit, verdicts, verdicts_age
from kafkatxn.errors import KafkatxnError, NotFoundError, UnsupportedBrokerError
from kafkatxn.model import (
    FRESH, Missing, Part, Partial, PartitionInfo, ProducerState, Record, TopicPartition, record, topic_partitions,
)
from kafkatxn.producer_table import ProducerTable, held_states, open_states
from kafkatxn.verdicts import MAX_TIMEOUT_CONFIG, Classification, CoordinatorView, OpenTransaction, Verdict

if TYPE_CHECKING:  # handed the facade; not imported
    from kafkatxn.kafka import Cluster

PinKey = tuple[TopicPartition, int]  # (partition, producer id)


# -- producer states --------------------------------------------------------------------------------


@record
class ProducerStates(Record):
    """What DescribeProducers (and ListTransactions for the ids) returned, at ``taken_at_ms``."""

    taken_at_ms: int
    states: dict[TopicPartition, list[ProducerState]]
    reported_by: Mapping[TopicPartition, int]  # broker asked for each partition
    transactional_ids: dict[int, str] = field(default_factory=dict)  # producer id -> transactional id
    missing: list[Missing] = field(default_factory=list)

    def __init__(self, taken_at_ms: int, states: dict[TopicPartition, list[ProducerState]],
                 reported_by: Mapping[TopicPartition, int], transactional_ids: dict[int, str] = FRESH,
                 missing: list[Missing] = FRESH) -> None:
        self.__dict__.update(taken_at_ms=taken_at_ms, states=states, reported_by=reported_by,
                             transactional_ids={} if transactional_ids is FRESH else transactional_ids,
                             missing=[] if missing is FRESH else missing)


def selected_partitions(
    cluster: Cluster,
    topics: Sequence[str] | None = None,
    partition: int | None = None,
    broker_id: int | None = None,
    include_internal: bool = False,
) -> list[TopicPartition]:
    """The partitions options choose: the named ``topics`` (one ``partition`` of one), or every one; with
    ``broker_id``, only those it holds a replica of (it can describe no others), as Kafka's tools select
    them. A whole cluster's are the metadata's own TopicPartitions (:meth:`Cluster.select_topic_partitions`),
    none made again. ``producers`` and the scan ``hanging`` lists select with this."""
    if broker_id is None:
        return cluster.select_topic_partitions(topics, partition, include_internal=include_internal)
    chosen = cluster.select_partitions(topics=topics, partition=partition, include_internal=include_internal)
    return topic_partitions(partitions_for_broker(chosen, broker_id, (b.id for b in cluster.metadata().brokers)))


def partitions_for_broker(partitions: Iterable[PartitionInfo], broker_id: int, known_brokers: Iterable[int]) -> list[PartitionInfo]:
    """The partitions of which ``broker_id`` holds a replica; an unknown broker raises :class:`NotFoundError`."""
    known = sorted(set(known_brokers))
    if broker_id not in known:
        raise NotFoundError(f"unknown broker id {broker_id} (brokers: {', '.join(map(str, known))})")
    return [p for p in partitions if broker_id in p.replicas]


def transactional_ids_for(cluster: Cluster, producer_ids: Iterable[int], missing: list[Missing] | None = None) -> dict[int, str]:
    """Transactional id of each producer id the coordinators know (ListTransactions with a producer-id filter).

    Idempotent producers, and producer ids whose transactional id expired or moved to a new producer
    id, are absent. Brokers that did not answer are appended to ``missing`` when given.
    """
    wanted = sorted({pid for pid in producer_ids if pid >= 0})
    if not wanted:
        return {}  # an empty filter would list every transaction
    try:
        listed, _ = cluster.list_transactions(producer_ids=wanted)
    except UnsupportedBrokerError as exc:  # Kafka 2.8: producer state, but no ListTransactions to name its ids
        if missing is None:
            raise
        missing.append(Missing(Part("transactional ids"), str(exc)))
        return {}
    if missing is not None:
        missing.extend(m.within("transactional ids") for m in listed.missing)
    return {t.producer_id: t.transactional_id for t in listed.value if t.producer_id in set(wanted)}


def producer_states(
    cluster: Cluster,
    partitions: Iterable[PartitionInfo | TopicPartition],
    broker_id: int | None = None,
    with_transactional_ids: bool = True,
    described: Partial[dict[TopicPartition, list[ProducerState]]] | None = None,
) -> ProducerStates:
    """DescribeProducers for ``partitions``, batched per leader, or all sent to ``broker_id``;
    ``described``: their answer, already asked for (``Cluster.offsets_and_producers``)."""
    if described is None:
        # (put in partition order, each once, by the facade, which leaves a metadata's every partition as it is)
        described = cluster.describe_producers(_topic_partitions(partitions), broker_id=broker_id)
    if broker_id is not None:
        reported_by: Mapping[TopicPartition, int] = dict.fromkeys(described.value, broker_id)
    else:
        reported_by = ReportedByLeaders(described.value, cluster.metadata().leaders)
    missing = list(described.missing)
    tids: dict[int, str] = {}
    if with_transactional_ids:
        pids = {s.producer_id for states in described.value.values() for s in states}
        tids = transactional_ids_for(cluster, pids, missing)
    return ProducerStates(int(time.time() * 1000), described.value, reported_by, tids, missing)


class ReportedByLeaders(Mapping[TopicPartition, int]):
    """The broker that reported each described partition's producers: its leader (-1: none), looked up
    when asked. A scan's 30,000 partitions, a few with producers, and the few asked: no dict of them
    all (~20 M instructions of every check)."""

    __slots__ = ("_described", "leaders")

    def __init__(self, described: Mapping[TopicPartition, object], leaders: Mapping[TopicPartition, int]) -> None:
        self._described, self.leaders = described, leaders

    def __getitem__(self, tp: TopicPartition) -> int:
        if tp not in self._described:
            raise KeyError(tp)
        return self.leaders.get(tp, -1)

    def get(self, tp: TopicPartition, default: int | None = None) -> int | None:  # type: ignore[override]
        return self.leaders.get(tp, -1) if tp in self._described else default

    def __contains__(self, tp: object) -> bool:
        return tp in self._described

    def __iter__(self):
        return iter(self._described)

    def __len__(self) -> int:
        return len(self._described)


def reporter_of(reported_by: Mapping[TopicPartition, int]) -> Callable[[TopicPartition, int], int]:
    """The broker that reported a described partition, as ``reported_by.get`` says it: a partition's leader
    looked up in C where ``reported_by`` is :class:`ReportedByLeaders` (for a partition it described, which
    every caller asks about), not through its ``get``."""
    return reported_by.leaders.get if isinstance(reported_by, ReportedByLeaders) else reported_by.get


def _topic_partitions(partitions: Iterable[PartitionInfo | TopicPartition]) -> list[TopicPartition]:
    """``partitions`` as TopicPartitions: as they are when they are (a scan's, 30,000 and more), made
    in C from PartitionInfos, one at a time only from other pairs."""
    items = list(partitions)
    kinds = set(map(type, items))
    if kinds <= {TopicPartition}:
        return items  # type: ignore[return-value]
    if kinds <= {PartitionInfo}:
        return topic_partitions(items)  # type: ignore[arg-type]
    return [p.tp if isinstance(p, PartitionInfo) else TopicPartition(*p) for p in items]


def active_producer_ids(facts: ProducerStates) -> dict[int, int]:
    """Per reporting broker, the distinct producer ids it holds state for."""
    states, reported_by = facts.states, facts.reported_by
    if type(states) is ProducerTable and isinstance(reported_by, ReportedByLeaders):
        # A whole round's table knows them: the brokers that answered, each for the partitions it leads, and
        # the producer ids of each answer, read in C (every partition has state where producers are idempotent).
        by_reporter = states.producer_ids_by_reporter(reported_by.leaders)
        if by_reporter is not None:
            return {b: len(found) for b, found in by_reporter.items()}
    # Otherwise the brokers found in one pass in C, the producer ids read only where there are any.
    ids: dict[int, set[int]] = {b: set() for b in sorted(set(map(reporter_of(reported_by), states, repeat(-1))))}
    held = held_states(states)
    for tp in compress(held, held.values()):
        ids[reported_by.get(tp, -1)].update(map(_PRODUCER_ID, held[tp]))
    return {b: len(found) for b, found in ids.items()}


_PRODUCER_ID = itemgetter(0)  # of a ProducerState (a named tuple)


# -- pins: classify, ask again, settle by the log, date -----------------------------------------------


REASON_ENDED = "ended while it was being asked about (its partition no longer shows it open)"


@record
class Pins(Record):
    """What :func:`pins` found of a set of open transactions, each by ``(partition, producer id)``."""

    # Every transaction asked about, classified by the one rule; the ones past their deadline settled
    # by their coordinator's log; those that ended while asked marked so (:func:`ended_while_asked`);
    # those dated by their first record carry its timestamp.
    classifications: dict[PinKey, Classification]
    now_ms: int
    max_transaction_timeout_ms: int | None  # given, or read from the brokers when a verdict needed it
    abort_cleanup_interval_ms: int | None = None  # read only when asked for (None: Kafka's default)
    ended: frozenset[PinKey] = frozenset()
    settled_by_log: frozenset[PinKey] = frozenset()  # the ones the log was read for (or taken from ``settled``)

    def __init__(self, classifications: dict[PinKey, Classification], now_ms: int,
                 max_transaction_timeout_ms: int | None, abort_cleanup_interval_ms: int | None = None,
                 ended: frozenset[PinKey] = frozenset(), settled_by_log: frozenset[PinKey] = frozenset()) -> None:
        self.__dict__.update(classifications=classifications, now_ms=now_ms,
                             max_transaction_timeout_ms=max_transaction_timeout_ms,
                             abort_cleanup_interval_ms=abort_cleanup_interval_ms, ended=ended,
                             settled_by_log=settled_by_log)

    def due(self) -> list[Classification]:
        """Past their deadline (:func:`kafkatxn.verdicts.is_due`), in the order asked: ``hanging``'s candidates."""
        return [c for key, c in self.classifications.items()
                if key not in self.ended and verdicts.is_due(c, self.now_ms, self.max_transaction_timeout_ms)]

    def untracked(self) -> list[Classification]:
        """No coordinator tracks them and they are not past their deadline: :attr:`Verdict.UNTRACKED`,
        with the moment they hang (:func:`kafkatxn.verdicts.with_deadline`)."""
        timeout = self.max_transaction_timeout_ms
        return [verdicts.with_deadline(c, self.now_ms, timeout) for key, c in self.classifications.items()
                if key not in self.ended and c.verdict is Verdict.HANGING and verdicts.is_due(c, self.now_ms, timeout) is False]

    def settled(self) -> dict[PinKey, Classification]:
        """What a later pass of the same command takes as it is (``settled`` of :func:`pins`): the
        ones settled by the log, and the untracked ones asked again."""
        out = {key: self.classifications[key] for key in self.settled_by_log}
        out.update({_pin_key(c): c for c in self.untracked()})
        return out


def ended_while_asked(c: Classification | None) -> bool:
    """Whether :func:`pins` found ``c``'s transaction ended between DescribeProducers and now."""
    return c is not None and c.reason == REASON_ENDED


def pins(
    cluster: Cluster, txns: Iterable[OpenTransaction], view: CoordinatorView, now_ms: int,
    max_transaction_timeout_ms: int | None, missing: list[Missing],
    settled: Mapping[PinKey, Classification] | None = None, date_all: bool = False, cleanup: bool = False,
) -> Pins:
    """The one sequence from open transactions to their verdicts' facts (``hanging``, ``check``, the
    exporter, ``lso`` and ``diagnose``), in this order:

    1. classify each by the coordinators' ``view`` (:func:`kafkatxn.verdicts.classify`), and send
       ahead the reads the verdicts make next (:func:`kafkatxn.gather.fetch_ahead`);
    2. with ``date_all`` (``lso`` shows every pin's age), date each by its first record where no
       coordinator dates it;
    3. the brokers' maximum timeout, when not given and a verdict needs it (one not shown to be
       tracked), and with ``cleanup`` the coordinators' abort cleanup interval when one is past its
       own timeout: read once, only then, so pins their coordinators track cost no request;
    4. ask again those no coordinator tracks, young or just ended by their coordinator (:func:`still_open`):
       one that ended between the two answers is no pin; without ``date_all``, date the ones still
       classified hanging (and only those) by their first records;
    5. settle the ones past their deadline by their coordinator's log
       (:func:`kafkatxn.gather.settle_by_transaction_log`: a lost COMMIT marker, or undetermined when
       the log cannot tell).

    ``settled``: what an earlier pass of the same command settled (the snapshot's scan, for its group
    pass); the same transaction is not asked again nor its log read again. What did not answer is
    appended to ``missing``."""
    classified = verdicts.classify_all(txns, view)
    timeout, cleanup_ms = max_transaction_timeout_ms, None
    tracked = all(c.verdict is Verdict.LONG_RUNNING for c in classified)
    configs_needed = (not tracked and timeout is None) or (
        cleanup and any(verdicts_age.is_past_timeout(c.transaction, now_ms) for c in classified))
    if configs_needed:  # known from the classification already: asked with the reads sent ahead below
        gather.transaction_configs_ahead(cluster)
    gather.fetch_ahead(cluster, classified)
    if date_all:
        classified = _date(cluster, classified, missing)
    if configs_needed:
        try:
            configs = gather.cluster_transaction_configs(cluster)
        except KafkatxnError as exc:
            configs = gather.TransactionConfigs(None, None, (Missing(Part(MAX_TIMEOUT_CONFIG), str(exc)),))
        missing.extend(configs.missing)
        cleanup_ms = configs.abort_cleanup_interval_ms
        if timeout is None:
            timeout = configs.max_transaction_timeout_ms
            if timeout is None and not configs.missing:
                missing.append(Missing(Part(MAX_TIMEOUT_CONFIG), "no broker reported it; pass --max-transaction-timeout"))
    by_key = {_pin_key(c): c for c in classified}
    if tracked:
        return Pins(by_key, now_ms, timeout, cleanup_ms)
    earlier = settled or {}
    # A transaction its coordinator does not track is asked about once more while young, or when its
    # coordinator has just ended one of its producer's; an earlier pass of the command asked those already.
    untracked = [c for c in classified if c.verdict is Verdict.HANGING
                 and (verdicts.is_due(c, now_ms, timeout) is False or verdicts.may_have_just_ended(c))]
    asked = {_pin_key(c) for c in untracked if (e := earlier.get(_pin_key(c))) is not None
             and e.verdict in (Verdict.UNTRACKED, Verdict.HANGING) and _same_transaction(e.open_txn, c.open_txn)}
    ended = still_open(cluster, [c for c in untracked if _pin_key(c) not in asked], missing)
    for key in ended:
        by_key[key] = _ended(by_key[key])
    if not date_all:  # the ones classified hanging that did not end meanwhile
        by_key.update({_pin_key(c): c for c in _date(cluster, [c for c in by_key.values() if c.verdict is Verdict.HANGING], missing)})
    # The log is read for the transactions past their deadline only.
    due = [c for c in by_key.values() if lost_commit.needs_log(c) and verdicts.is_due(c, now_ms, timeout)]
    known = {_pin_key(c): e for c in due if (e := earlier.get(_pin_key(c))) is not None
             and lost_commit.needs_log(c) and _same_transaction(e.open_txn, c.open_txn)}
    fresh = [c for c in due if _pin_key(c) not in known]
    known.update({_pin_key(c): c for c in gather.settle_by_transaction_log(cluster, fresh, missing)})
    by_key.update(known)
    return Pins(by_key, now_ms, timeout, cleanup_ms, frozenset(ended), frozenset(known))


def scan(cluster: Cluster, states: Mapping[TopicPartition, Sequence[ProducerState]], now_ms: int, max_transaction_timeout_ms: int,
         missing: list[Missing]) -> Pins:
    """Every open transaction in described producer ``states`` (``hanging``'s scan, and ``check``'s
    and the exporter's), with its coordinator's view (:func:`kafkatxn.gather.coordinator_view`),
    through :func:`pins`."""
    all_open = verdicts.open_transactions(open_states(states))
    view = CoordinatorView()
    if all_open:
        view, view_missing = gather.coordinator_view(cluster, {t.producer_id for t in all_open})
        missing.extend(view_missing)
    return pins(cluster, all_open, view, now_ms, max_transaction_timeout_ms, missing)


def still_open(cluster: Cluster, untracked: Sequence[Classification], missing: list[Missing]) -> set[PinKey]:
    """Of transactions the coordinators do not track, the ``(partition, producer id)`` of those that
    ended since DescribeProducers showed them: asked once more, after the coordinators answered. A
    coordinator forgets a transaction's partitions, and starts its producer's next transaction, only
    after the markers of the last one are written, so one still open at the same offset now was
    open, untracked, when its coordinator answered. One that could not be asked again stays as it is.

    The Fetch that dates them (:func:`kafkatxn.gather.fetch_ahead`, sent after the coordinators
    answered) answers first: its LSO past the start offset means the transaction ended; at the start
    offset, that it is still open. Only a partition pinned lower by another transaction is described again."""
    if not untracked:
        return set()
    fetched = cluster.offsets_fetched_ahead({c.open_txn.tp for c in untracked})
    ended = {_pin_key(c) for c in untracked if c.open_txn.tp in fetched and fetched[c.open_txn.tp][0] > c.open_txn.start_offset}
    untracked = [c for c in untracked if c.open_txn.tp not in fetched or fetched[c.open_txn.tp][0] < c.open_txn.start_offset]
    if not untracked:
        return ended
    try:
        with cluster.afresh():  # the question is whether it ended since: the run's answer will not do
            described = cluster.describe_producers(sorted({c.open_txn.tp for c in untracked}))
    except KafkatxnError as exc:
        missing.append(Missing(Part("open transactions"), f"could not ask again whether they ended: {exc}"))
        return ended
    for c in untracked:
        states = described.value.get(c.open_txn.tp)
        if states is None:
            continue
        if not any(s.producer_id == c.open_txn.producer_id and s.current_txn_start_offset == c.open_txn.start_offset
                   for s in states):
            ended.add(_pin_key(c))
    return ended


def _date(cluster: Cluster, classified: Sequence[Classification], missing: list[Missing]) -> list[Classification]:
    """``classified``, the transactions no coordinator dates dated by their first records
    (:func:`kafkatxn.gather.with_first_records`)."""
    dated = gather.with_first_records(cluster, [c.transaction for c in classified], missing)
    return [c if d.first_record_timestamp_ms is None or c.open_txn.first_record_timestamp_ms is not None
            else dataclasses.replace(c, open_txn=dataclasses.replace(c.open_txn, first_record_timestamp_ms=d.first_record_timestamp_ms))
            for c, d in zip(classified, dated)]


def _ended(c: Classification) -> Classification:
    # Not hanging, nor anything to act on: its producer ended it between DescribeProducers and the
    # coordinators' answer. Reported as its coordinator's (LONG_RUNNING: someone completed it).
    return dataclasses.replace(c, verdict=Verdict.LONG_RUNNING, reason=REASON_ENDED)


def _pin_key(c: Classification) -> PinKey:
    return c.open_txn.tp, c.open_txn.producer_id


def _same_transaction(a: OpenTransaction, b: OpenTransaction) -> bool:
    return (a.start_offset, a.producer_epoch) == (b.start_offset, b.producer_epoch)
