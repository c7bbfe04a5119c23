"""Gathering: what the commands ask the cluster, in one place and one way.

Each function asks the facade for one kind of fact and returns it with the typed :class:`Missing`
parts that did not answer; none of them decides anything (:mod:`kafkatxn.verdicts` does, over what
they return). The coordinator side of every open transaction (its transactional id and the
coordinator's description) is gathered by :func:`coordinator_view` alone, for ``lso``, ``hanging``,
``check``, the exporter, ``diagnose`` and ``abort``; the pieces here are put together in one order,
for every command, by :mod:`kafkatxn.facts` (:func:`kafkatxn.facts.pins`).
"""

from __future__ import annotations

import dataclasses
import functools
from operator import attrgetter
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from kafkatxn import lost_commit, verdicts, verdicts_age
from kafkatxn.errors import ClusterError, KafkatxnError, UnsupportedBrokerError
from kafkatxn.model import (
    IDS_FILTERED, Broker, FrozenRecord, Missing, Part, ProducerState, TopicPartition, TransactionalId, TransactionDescription,
    TransactionLogHistory, record,
)
from kafkatxn.verdicts import MAX_TIMEOUT_CONFIG, CoordinatorView, OpenTransaction
from kafkatxn.verdicts_groups import Offsets

if TYPE_CHECKING:  # handed the facade; not imported
    from kafkatxn.kafka import Cluster


@record
class TransactionConfigs(FrozenRecord):
    """The brokers' transaction timeouts that verdicts date by (one DescribeConfigs per broker)."""

    max_transaction_timeout_ms: int | None  # the largest transaction.max.timeout.ms
    abort_cleanup_interval_ms: int | None  # the longest cleanup interval: the slowest coordinator's
    missing: tuple[Missing, ...] = ()

    def __init__(self, max_transaction_timeout_ms: int | None, abort_cleanup_interval_ms: int | None,
                 missing: tuple[Missing, ...] = ()) -> None:
        self.__dict__.update(max_transaction_timeout_ms=max_transaction_timeout_ms,
                             abort_cleanup_interval_ms=abort_cleanup_interval_ms, missing=missing)


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


def transaction_configs_ahead(cluster: Cluster) -> None:
    """What :func:`cluster_transaction_configs` asks, sent with the next round (``Session.send_ahead``)."""
    cluster.broker_configs_ahead((MAX_TIMEOUT_CONFIG, verdicts_age.ABORT_CLEANUP_INTERVAL_CONFIG))


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
    tids, list_missing, unsupported, gaps = _first_listing(cluster, md, asked, wanted)
    filtered = False
    unlisted = _to_list_again(wanted, tids, gaps)
    if unlisted:
        relisted, gaps, filtered = _listed_between_probes(cluster, md, asked, unlisted)
        tids.update(relisted)
    hidden: tuple[Missing, ...] = ()
    found: dict[str, TransactionDescription] = {}
    not_found: dict[str, str] = {}
    unanswered: dict[str, tuple[Missing, ...]] = {}
    describe_missing: list[Missing] = []
    if filtered:
        hidden = verdicts.hidden_ids(IDS_FILTERED)
        described = cluster.describe_transactions(sorted(set(tids.values())))
    elif not gaps and set(wanted) - set(tids):
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


def _first_listing(cluster: Cluster, md, asked: list[int], wanted: list[int]) -> tuple[dict[int, str], list[Missing], list[Missing], list[Missing]]:
    """The transactional ids the coordinators list for ``wanted`` producer ids, the brokers that did
    not answer, the listing's being unsupported, and the log partitions it leaves undecided."""
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
    return tids, list_missing, unsupported, gaps


def _to_list_again(wanted: list[int], tids: Mapping[int, str], gaps: list[Missing]) -> list[int]:
    """The producer ids :func:`_listed_between_probes` lists again: those the first listing did not
    name, when it covered every ``__transaction_state`` partition (with a gap they stay undetermined)."""
    return [] if gaps else sorted(set(wanted) - set(tids))


def _log_leaders(md) -> dict[int, int]:
    """Each ``__transaction_state`` partition's leader, as the metadata names it: whom the log probes ask."""
    return {p.partition: p.leader for p in md.transaction_log}


def probes_ahead(cluster: Cluster, producer_ids: Iterable[int]) -> None:
    """The first log probes :func:`coordinator_view` will send for ``producer_ids`` (producer ids no
    listing names: :func:`_listed_between_probes`), sent with the next round instead of a round of
    their own (``Session.send_ahead``); nothing when it will not probe. Their order is kept: the
    listing between the probes goes down only once these have answered. The listing it decides
    from is this run's (asked here if the run has none, as the view would ask it next). It raises
    nothing: a failure here is the view's to meet and name."""
    wanted = sorted({pid for pid in producer_ids if pid >= 0})
    if not wanted:
        return
    try:
        md = cluster.metadata()
        asked = [b.id for b in md.brokers]
        tids, _list_missing, _unsupported, gaps = _first_listing(cluster, md, asked, wanted)
    except KafkatxnError:
        return
    unlisted = _to_list_again(wanted, tids, gaps)
    if not unlisted or cluster.remembered("ListedBetweenProbes", [tuple(unlisted)])[0]:
        return
    cluster.loaded_log_partitions_ahead(_log_leaders(md), PROBE_BEFORE)


def _listed_between_probes(cluster: Cluster, md, asked: list[int], unlisted: list[int]) -> tuple[dict[int, str], list[Missing], bool]:
    """Producer ids no listing named, listed again between two probes of every ``__transaction_state``
    partition's leader (:meth:`~kafkatxn.kafka.transactions.TransactionsApi.loaded_log_partitions`):
    the ids found, the log partitions that leave the others undecided, and whether the probes were
    refused (the principal may not describe every id: the view is filtered).

    "No transactional id" needs every partition coordinated, loaded, by the broker that listed it,
    from before its listing to after it: a broker the metadata already names leader lists none of the
    partition's ids, and says nothing of it, until it has taken the partition over (seen under a
    frozen broker, as its partitions moved). Asked only when a producer id was not listed, so a
    cluster without hanging transactions pays nothing for it; once a run."""
    key = tuple(unlisted)
    kept, _ = cluster.remembered("ListedBetweenProbes", [key])
    if kept:
        return kept[key]
    leaders = _log_leaders(md)
    with cluster.afresh():
        before = cluster.loaded_log_partitions(leaders, PROBE_BEFORE)
        if before.missing:
            listed, after = None, before
        else:
            listed, _ = cluster.list_transactions(broker_ids=asked, producer_ids=unlisted, purpose=LISTED_BETWEEN_PROBES)
            after = cluster.loaded_log_partitions(leaders, PROBE_AFTER)
    refused = [m for m in (*before.missing, *after.missing) if m.not_authorized]
    if refused:  # as the visibility probe reasons: an id no ACL names was refused
        result: tuple[dict[int, str], list[Missing], bool] = ({}, [], True)
    elif listed is None:
        result = ({}, list(before.missing), False)
    else:
        silent = {m.subject.id for m in listed.missing if isinstance(m.subject, Broker)}
        gaps = [*verdicts.transaction_log_gaps(md, [b for b in asked if b not in silent]), *after.missing]
        wanted = set(unlisted)
        result = ({t.producer_id: t.transactional_id for t in listed.value if t.producer_id in wanted}, gaps, False)
    cluster.remember("ListedBetweenProbes", {key: result})
    return result


# --debug's names of the confirming requests (tests/integration/test_request_counts.py counts them apart).
PROBE_BEFORE, PROBE_AFTER = "log probe before listing", "log probe after listing"
LISTED_BETWEEN_PROBES = "listed between log probes"


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
    tps = sorted(dict.fromkeys(partitions))  # given in order (a group pass's), the sort is one pass
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
    # Each partition's LSO looked up once (400,000 group-partitions at 20,000 groups x 20 partitions
    # over 100,000 partitions); a partition without offsets has none (-1 - max_gap: never probed).
    lso = dict(zip(offsets, map(attrgetter("last_stable_offset"), offsets.values())))
    lso_of, none = lso.get, -1 - max_gap
    first: dict[TopicPartition, int] = {}  # a partition's first start found; most have only one
    more: dict[TopicPartition, set[int]] = {}  # every start of the partitions with several
    for group_offsets in committed.values():
        for tp, c in group_offsets.items():
            if c >= 0 and 0 < lso_of(tp, none) - c <= max_gap:
                was = first.setdefault(tp, c)
                if was != c:
                    more.setdefault(tp, {was}).add(c)
    rounds: list[dict[TopicPartition, int]] = []
    # Sorted by partition; the order the commits came in is a topic's partitions in a row (fast to sort).
    for tp in sorted(first):
        offs = more.get(tp)
        if offs is None:
            if not rounds:
                rounds.append({})
            rounds[0][tp] = first[tp]
            continue
        for i, c in enumerate(sorted(offs)):
            if len(rounds) <= i:
                rounds.append({})
            rounds[i][tp] = c
    return rounds
