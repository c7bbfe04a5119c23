"""Gathering: what the commands ask the cluster, in one place and one way.

Each function asks the facade for one kind of fact and returns it with the typed :class:`Missing`
parts that did not answer; none of them decides anything (:mod:`kafkatxn.verdicts` does, over what
they return). The coordinator side of every open transaction (its transactional id and the
coordinator's description) is gathered by :func:`coordinator_view` alone, for ``lso``, ``hanging``,
``check``, the exporter, ``diagnose`` and ``abort``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from kafkatxn import lost_commit, verdicts, verdicts_age
from kafkatxn.errors import ClusterError, KafkatxnError, UnsupportedBrokerError
from kafkatxn.model import (
    Broker, Missing, Part, ProducerState, TopicPartition, TransactionalId, TransactionDescription, TransactionLogHistory,
)
from kafkatxn.verdicts import MAX_TIMEOUT_CONFIG, CoordinatorView, OpenTransaction
from kafkatxn.verdicts_groups import Offsets

if TYPE_CHECKING:  # handed the facade; not imported
    from kafkatxn.kafka import Cluster


@dataclass(frozen=True)
class TransactionConfigs:
    """The brokers' transaction timeouts that verdicts date by (one DescribeConfigs per broker)."""

    max_transaction_timeout_ms: int | None  # the largest transaction.max.timeout.ms
    abort_cleanup_interval_ms: int | None  # the longest cleanup interval: the slowest coordinator's
    missing: tuple[Missing, ...] = ()


def in_one_run(entry):
    """A library entry point (a command's, an exporter scrape's) whose questions share one run of
    answers (:meth:`kafkatxn.kafka.session.Session.one_run`): each key goes down to the brokers once."""

    @functools.wraps(entry)
    def one_run(cluster, *args, **kwargs):
        with cluster.one_run():
            return entry(cluster, *args, **kwargs)

    return one_run


def cluster_transaction_configs(cluster: Cluster) -> TransactionConfigs:
    """The brokers' ``transaction.max.timeout.ms`` and abort cleanup interval, asked together."""
    names = (MAX_TIMEOUT_CONFIG, verdicts_age.ABORT_CLEANUP_INTERVAL_CONFIG)
    configs = cluster.broker_configs(names)
    largest = [verdicts.max_timeout_from_configs(entries[name].value for entries in configs.value.values() if name in entries)
               for name in names]
    return TransactionConfigs(largest[0], largest[1], tuple(configs.missing))


def cluster_max_transaction_timeout(cluster: Cluster) -> tuple[int, list[Missing]]:
    """The brokers' largest ``transaction.max.timeout.ms``, and the brokers that did not say."""
    configs = cluster_transaction_configs(cluster)
    if configs.max_transaction_timeout_ms is None:
        why = "; ".join(map(str, configs.missing)) or "no broker reported it"
        raise ClusterError(f"could not read {MAX_TIMEOUT_CONFIG} from the brokers ({why}); pass --max-transaction-timeout")
    return configs.max_transaction_timeout_ms, list(configs.missing)


def unseen_topics(cluster: Cluster) -> list[Missing]:
    """A scan of the whole cluster cannot say "nothing there" for topics its principal does not see:
    Metadata leaves out, silently, the topics it may not DESCRIBE. Those topics are a missing part
    (the scan is undetermined, exit 3), named with the ACL and the way to a complete answer."""
    if not cluster.topic_list_filtered():  # None (no answer to the probe) is not evidence of a filter
        return []
    return [Missing(Part("topics this principal cannot see"),
                    "not authorized: needs DESCRIBE on Topic * (or name the topics to scan)", acl="DESCRIBE on Topic *")]


def coordinator_view(cluster: Cluster, producer_ids: Iterable[int]) -> tuple[CoordinatorView, list[Missing]]:
    """Steps 3 and 4 of the rule for these producer ids; the list names what did not answer.

    ListTransactions goes to every broker in the metadata; which ``__transaction_state``
    partitions that covered is decided from their leaders (:func:`transaction_log_gaps`). When a
    producer id is not listed, whether the principal sees every transactional id is asked too
    (:meth:`~kafkatxn.kafka.transactions.TransactionsApi.transactional_id_visibility`): a filtered
    view leaves that producer id undetermined, never hanging.
    """
    wanted = sorted({pid for pid in producer_ids if pid >= 0})
    md = cluster.metadata()
    asked = [b.id for b in md.brokers]
    tids: dict[int, str] = {}
    list_missing: list[Missing] = []
    unsupported: list[Missing] = []
    if wanted:  # an empty filter would list every transaction
        try:
            listed, _ = cluster.list_transactions(broker_ids=asked, producer_ids=wanted)
        except UnsupportedBrokerError as exc:  # Kafka 2.8: DescribeProducers, but no coordinator to ask
            unsupported = [Missing(verdicts.IDS_PART, str(exc))]
        else:
            list_missing = [m.within("transactional ids") for m in listed.missing]
            tids = {t.producer_id: t.transactional_id for t in listed.value if t.producer_id in set(wanted)}
    silent = {m.subject.id for m in list_missing if isinstance(m.subject, Broker)}
    gaps = unsupported or (verdicts.transaction_log_gaps(md, [b for b in asked if b not in silent]) if wanted else [])
    hidden: tuple[Missing, ...] = ()
    found: dict[str, TransactionDescription] = {}
    not_found: dict[str, str] = {}
    unanswered: dict[str, tuple[Missing, ...]] = {}
    describe_missing: list[Missing] = []
    if not gaps and set(wanted) - set(tids):
        # A producer id not listed: hanging only if the principal sees every transactional id
        # (ListTransactions leaves out those it may not DESCRIBE, and says nothing of it). The
        # probe goes with the ids described.
        described, visibility = cluster.describe_with_visibility(sorted(set(tids.values())))
        hidden = verdicts.hidden_ids(visibility.value, visibility.missing)
    elif tids:
        described = cluster.describe_transactions(sorted(set(tids.values())))
    if tids:
        found, not_found, describe_missing = described.value.found, described.value.not_found, described.missing
        for tid in set(tids.values()):
            if tid not in found and tid not in not_found:
                unanswered[tid] = tuple(described.missing_for(TransactionalId(tid))) or (
                    Missing(TransactionalId(tid), "no answer from its coordinator"),
                )
    view = CoordinatorView(
        transactional_ids=tids,
        ids_missing=tuple(gaps),
        descriptions=found,
        unknown_ids=frozenset(not_found),
        unanswered_ids=unanswered,
        ids_hidden=hidden,
    )
    # The gaps are reported through the verdicts they leave undetermined, not as missing on their own.
    return view, unsupported + list_missing + list(describe_missing)


def describe_open(
    cluster: Cluster, partitions: Sequence[TopicPartition], missing: list[Missing]
) -> tuple[dict[TopicPartition, list[OpenTransaction]], CoordinatorView]:
    """The open transactions on ``partitions`` (DescribeProducers), each with its coordinator's view,
    and that view; what did not answer is appended to ``missing``."""
    if not partitions:
        return {}, CoordinatorView()
    try:
        described = cluster.describe_producers(partitions)
    except UnsupportedBrokerError as exc:  # the lag is still known; only who pins it is not
        missing.append(Missing(Part("open transactions"), str(exc)))
        return {}, CoordinatorView()
    missing.extend(described.missing)
    return _with_view(cluster, described.value, missing)


def _with_view(
    cluster: Cluster, states: Mapping[TopicPartition, Sequence[ProducerState]], missing: list[Missing]
) -> tuple[dict[TopicPartition, list[OpenTransaction]], CoordinatorView]:
    pids = {s.producer_id for ss in states.values() for s in ss if s.current_txn_start_offset >= 0}
    view, view_missing = coordinator_view(cluster, pids)
    missing.extend(view_missing)
    return verdicts.by_partition(verdicts.open_transactions(states, view)), view


def first_record_starts(txns: Iterable[OpenTransaction]) -> dict[TopicPartition, int]:
    """Where :func:`with_first_records` reads: per partition, the start offset of its first
    transaction (the one pinning the LSO) that no coordinator dates."""
    starts: dict[TopicPartition, int] = {}
    for t in txns:
        if verdicts_age.needs_first_record(t) and t.tp not in starts:
            starts[t.tp] = t.start_offset
    return starts


def fetch_ahead(cluster: Cluster, classifications: Iterable[verdicts.Classification]) -> None:
    """The log reads the verdicts of ``classifications`` will make (the first records of those that
    may hang, and their coordinators' log), sent ahead in one Fetch per leader."""
    maybe = [c for c in classifications if c.verdict in (verdicts.Verdict.HANGING, verdicts.Verdict.UNTRACKED)]
    if maybe:
        cluster.fetch_ahead_for_verdicts(first_record_starts(c.transaction for c in maybe),
                                         {c.transactional_id for c in maybe if lost_commit.needs_log(c)})


def with_first_records(cluster: Cluster, txns: Iterable[OpenTransaction], missing: list[Missing]) -> list[OpenTransaction]:
    """``txns``, those without a coordinator start dated by the timestamp of the partition's first
    record of the transaction (the batch at its start offset, read_uncommitted). What could not be
    read keeps DescribeProducers' last timestamp, a lower bound, and is named in ``missing``."""
    txns = list(txns)
    starts = first_record_starts(txns)
    if not starts:
        return txns
    try:
        read = cluster.first_record_timestamps(starts)
    except KafkatxnError as exc:
        missing.append(Missing(Part("transaction ages"), f"could not read the transactions' first records: {exc}"))
        return txns
    missing.extend(m.within("transaction ages (DescribeProducers' last timestamp used, a lower bound)") for m in read.missing)
    return [
        dataclasses.replace(t, first_record_timestamp_ms=read.value[t.tp])
        if t.tp in read.value and starts.get(t.tp) == t.start_offset and verdicts_age.needs_first_record(t) else t
        for t in txns
    ]


def transaction_logs(
    cluster: Cluster, classifications: Iterable[verdicts.Classification]
) -> tuple[dict[str, TransactionLogHistory], list[Missing]]:
    """What ``__transaction_state`` holds of the ids whose verdict it decides (:func:`kafkatxn.lost_commit.needs_log`),
    and the ids whose log partition could not be read."""
    tids = {c.transactional_id for c in classifications if lost_commit.needs_log(c)}
    if not tids:
        return {}, []
    try:
        read = cluster.transaction_log_histories(tids)
    except KafkatxnError as exc:
        return {}, [Missing(Part(verdicts.TRANSACTION_STATE_TOPIC), str(exc))]
    return read.value, list(read.missing)


def settle_by_transaction_log(
    cluster: Cluster, classifications: Sequence[verdicts.Classification], missing: list[Missing]
) -> list[verdicts.Classification]:
    """``classifications``, the hanging ones of known ids decided again with what their coordinator's
    log says (:func:`kafkatxn.lost_commit.settle`: a lost COMMIT marker, or undetermined when the log
    cannot tell); the transactions are dated by their first records first. Log partitions that
    could not be read are reported through the verdicts they leave undetermined."""
    needing = [c for c in classifications if lost_commit.needs_log(c)]
    if not needing:
        return list(classifications)
    dated = {(t.tp, t.producer_id): t for t in with_first_records(cluster, [c.transaction for c in needing], missing)}
    histories, unread = transaction_logs(cluster, needing)
    # The first records read here stay on the transactions: callers dating them do not read them again.
    return [
        dataclasses.replace(c, open_txn=dataclasses.replace(c.open_txn, first_record_timestamp_ms=d.first_record_timestamp_ms))
        if (d := dated.get((c.open_txn.tp, c.open_txn.producer_id))) is not None and d.first_record_timestamp_ms is not None
        else c
        for c in lost_commit.settle_all(classifications, histories, unread, dated)
    ]


def settle_pins(
    cluster: Cluster, pins: Iterable[OpenTransaction], view: CoordinatorView, now_ms: int,
    max_transaction_timeout_ms: int | None, missing: list[Missing],
    settled: Mapping[tuple[TopicPartition, int], verdicts.Classification] | None = None,
) -> tuple[dict[tuple[TopicPartition, int], verdicts.Classification], int | None, int | None]:
    """Each pinning transaction's classification by ``(partition, producer id)``, the ones past
    their deadline (:func:`kafkatxn.verdicts.is_due`) settled by their coordinator's log as ``hanging``
    settles them (:func:`settle_by_transaction_log`: a lost COMMIT marker, or undetermined when the
    log cannot tell), the untracked ones not yet due asked again (:func:`still_open`: one that ended
    between the two answers is no pin); decide with :func:`kafkatxn.verdicts.pin_verdict`. And the
    maximum timeout used: read from the brokers (like the log) only when a pin is not shown to be
    tracked and none was given, so pins their coordinators track cost no request; and the
    coordinators' abort cleanup interval where it was read (None: Kafka's default applies). ``settled``: what
    an earlier pass of the same command settled by the log (the snapshot's hanging pass); the same
    transaction is not read again."""
    pins = list(pins)
    classified = [verdicts.classify(t, view) for t in pins]
    tracked = all(c.verdict is verdicts.Verdict.LONG_RUNNING for c in classified)
    cleanup_ms = None
    # The brokers' configs only where a verdict needs them: a pin not shown to be tracked (its
    # deadline), or one past its own timeout (when its coordinator's abort is late).
    if (not tracked and max_transaction_timeout_ms is None) or any(verdicts_age.is_past_timeout(t, now_ms) for t in pins):
        try:
            configs = cluster_transaction_configs(cluster)
        except KafkatxnError as exc:
            configs = TransactionConfigs(None, None, (Missing(Part(MAX_TIMEOUT_CONFIG), str(exc)),))
        missing.extend(configs.missing)
        cleanup_ms = configs.abort_cleanup_interval_ms
        if max_transaction_timeout_ms is None:
            max_transaction_timeout_ms = configs.max_transaction_timeout_ms
            if max_transaction_timeout_ms is None and not configs.missing:
                missing.append(Missing(Part(MAX_TIMEOUT_CONFIG), "no broker reported it; pass --max-transaction-timeout"))
    if tracked:
        return {_pin_key(c): c for c in classified}, max_transaction_timeout_ms, cleanup_ms
    timeout = max_transaction_timeout_ms
    # A transaction its coordinator does not track is asked about once more while young, or when its
    # coordinator has just ended one of its producer's; the hanging pass of the command asked those already.
    untracked = [c for c in classified if c.verdict is verdicts.Verdict.HANGING
                 and (verdicts.is_due(c, now_ms, timeout) is False or verdicts.may_have_just_ended(c))]
    asked = {_pin_key(c) for c in untracked if (e := (settled or {}).get(_pin_key(c))) is not None
             and e.verdict in (verdicts.Verdict.UNTRACKED, verdicts.Verdict.HANGING) and _same_transaction(e.open_txn, c.open_txn)}
    ended = still_open(cluster, [c for c in untracked if _pin_key(c) not in asked], missing)
    classified = [_ended(c) if _pin_key(c) in ended else c for c in classified]
    # The log is read for the transactions past their deadline only, as hanging reads it.
    candidates = [c for c in classified if c.verdict is not verdicts.Verdict.LONG_RUNNING and verdicts.is_due(c, now_ms, timeout)]
    known: dict[tuple[TopicPartition, int], verdicts.Classification] = {}
    fresh = []
    for c in candidates:
        earlier = (settled or {}).get(_pin_key(c))
        if earlier is not None and lost_commit.needs_log(c) and _same_transaction(earlier.open_txn, c.open_txn):
            known[_pin_key(c)] = earlier
        else:
            fresh.append(c)
    known.update({_pin_key(c): c for c in settle_by_transaction_log(cluster, fresh, missing)})
    classified = [known.get(_pin_key(c), c) for c in classified]
    return {_pin_key(c): c for c in classified}, max_transaction_timeout_ms, cleanup_ms


REASON_ENDED = "ended while it was being asked about (its partition no longer shows it open)"


def ended_while_asked(c: verdicts.Classification | None) -> bool:
    """Whether :func:`still_open` found ``c``'s transaction ended between DescribeProducers and now."""
    return c is not None and c.reason == REASON_ENDED


def _ended(c: verdicts.Classification) -> verdicts.Classification:
    # Not hanging, nor anything to act on: its producer ended it between DescribeProducers and the
    # coordinators' answer. Reported as its coordinator's (LONG_RUNNING: someone completed it).
    return dataclasses.replace(c, verdict=verdicts.Verdict.LONG_RUNNING, reason=REASON_ENDED)


def still_open(cluster: Cluster, untracked: Sequence[verdicts.Classification], missing: list[Missing]) -> set[tuple[TopicPartition, int]]:
    """Of transactions the coordinators do not track, the ``(partition, producer id)`` of those that
    ended since DescribeProducers showed them: asked once more, after the coordinators answered. A
    coordinator forgets a transaction's partitions, and starts its producer's next transaction, only
    after the markers of the last one are written, so one still open at the same offset now was
    open, untracked, when its coordinator answered. One that could not be asked again stays as it is.

    The Fetch that dates them (:func:`fetch_ahead`, sent after the coordinators answered) answers
    first: its LSO past the start offset means the transaction ended; at the start offset, that it
    is still open. Only a partition pinned lower by another transaction is described again."""
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


def _pin_key(c: verdicts.Classification) -> tuple[TopicPartition, int]:
    return c.open_txn.tp, c.open_txn.producer_id


def _same_transaction(a: OpenTransaction, b: OpenTransaction) -> bool:
    return (a.start_offset, a.producer_epoch) == (b.start_offset, b.producer_epoch)


@dataclass
class Scan:
    """Every open transaction of a producer-state snapshot, the candidates (past their deadline,
    :func:`kafkatxn.verdicts.is_due`), their verdicts, and the untracked ones not due yet."""

    open_transactions: list[OpenTransaction]
    candidates: list[OpenTransaction]
    classifications: list[verdicts.Classification]
    missing: list[Missing]
    untracked: list[verdicts.Classification] = dataclasses.field(default_factory=list)  # Verdict.UNTRACKED


def classify_open_transactions(
    cluster: Cluster, states: dict[TopicPartition, list[ProducerState]], now_ms: int, max_transaction_timeout_ms: int
) -> Scan:
    """Steps 2 to 4 of the rule over described producer states (``hanging``, ``check`` and the exporter):
    every open transaction is classified (one no coordinator tracks may be due before the maximum
    timeout, by its producer's own), the candidates are those past their deadline, and the untracked
    ones not due yet are asked again (:func:`still_open`) and returned as :attr:`Verdict.UNTRACKED`."""
    all_open = verdicts.open_transactions(states)
    if not all_open:
        return Scan(all_open, [], [], [])
    view, missing = coordinator_view(cluster, {t.producer_id for t in all_open})
    classified = verdicts.classify_all(all_open, view)
    due = [c for c in classified if verdicts.is_due(c, now_ms, max_transaction_timeout_ms)]
    waiting = [verdicts.with_deadline(c, now_ms, max_transaction_timeout_ms) for c in classified
               if c.verdict is verdicts.Verdict.HANGING and verdicts.is_due(c, now_ms, max_transaction_timeout_ms) is False]
    # Due or not, one its coordinator does not track may have ended since DescribeProducers: a
    # coordinator aborts a timed-out transaction by writing the markers, then forgets the partitions.
    # The Fetch that dates them (and reads their coordinators' log) says so, sent now.
    fetch_ahead(cluster, classified)
    ended = still_open(cluster, waiting + [c for c in due if c.verdict is verdicts.Verdict.HANGING and verdicts.may_have_just_ended(c)],
                       missing)
    due = [c for c in due if _pin_key(c) not in ended]
    untracked = [c for c in waiting if _pin_key(c) not in ended]
    return Scan(all_open, [c.open_txn for c in due], due, missing, untracked)


def uncommitted_assignments(
    cluster: Cluster, committed: Mapping[str, Mapping[TopicPartition, int]], groups: Sequence[str], missing: list[Missing]
) -> dict[str, list[TopicPartition]]:
    """Per Stable group, the partitions its members are assigned with no committed offset there;
    groups that did not answer are appended to ``missing`` (once: their offsets may be missing too)."""
    assigned = cluster.group_assignments(groups)
    noted = {m.subject for m in missing}
    missing.extend(m for m in assigned.missing if m.subject not in noted)
    out = {g: sorted(tp for tp in tps if tp not in committed.get(g, {})) for g, tps in assigned.value.items()}
    return {g: tps for g, tps in out.items() if tps}


def log_starts(cluster: Cluster, partitions: Iterable[TopicPartition], missing: list[Missing]) -> dict[TopicPartition, int]:
    """The log start offsets of ``partitions`` (none asked when there are none); what did not answer
    is appended to ``missing``."""
    tps = sorted(set(partitions))
    if not tps:
        return {}
    starts = cluster.log_start_offsets(tps)
    missing.extend(starts.missing)
    return dict(starts.value)


# Which read_committed probes a group snapshot makes (pure: what to ask, not what it means).
def probe_rounds(
    committed: Mapping[str, Mapping[TopicPartition, int]], offsets: Mapping[TopicPartition, Offsets], max_gap: int
) -> list[dict[TopicPartition, int]]:
    """Start offsets to probe, in rounds of at most one start per partition (a consumer reads a
    partition from one place at a time); usually a single round."""
    starts: dict[TopicPartition, set[int]] = defaultdict(set)
    for group_offsets in committed.values():
        for tp, c in group_offsets.items():
            o = offsets.get(tp)
            if o is not None and c >= 0 and 0 < o.last_stable_offset - c <= max_gap:
                starts[tp].add(c)
    rounds: list[dict[TopicPartition, int]] = []
    for tp, offs in sorted(starts.items()):
        for i, c in enumerate(sorted(offs)):
            if len(rounds) <= i:
                rounds.append({})
            rounds[i][tp] = c
    return rounds
