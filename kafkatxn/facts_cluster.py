"""The fact layer's pass over the whole cluster that ``check`` and the exporter decide on
(:func:`gather_snapshot`, a :class:`kafkatxn.snapshot.ClusterSnapshot`).

It asks the facts the other commands ask, each where they are defined, in the order that lets one
answer serve several: the groups' committed offsets (:mod:`kafkatxn.facts_lso`, as ``lso --groups``
reads them: before the offsets they are compared with); one round trip per leader with ListOffsets
at both isolation levels and DescribeProducers; the coordinators' transactions (ListTransactions,
DescribeTransactions with the visibility probe: what the scan asks next is answered from them); the
scan ``hanging`` lists (:func:`kafkatxn.facts_scan.scan_of`: a :class:`~kafkatxn.facts_scan.Scan`,
every open transaction through the one pins sequence) over the producer states that round trip
brought; and the group
pass over the same offsets (:func:`kafkatxn.facts_lso.finish_group_snapshot`, as ``lso --groups``).
Each part that does not answer becomes a typed :class:`Missing` and leaves its figures
``not_gathered``; the samples are made from these facts by :mod:`kafkatxn.snapshot` (pure).
"""

from __future__ import annotations

import time
from collections import Counter
from itertools import chain, compress
from operator import itemgetter
from typing import TYPE_CHECKING, Callable, Sequence, TypeVar

from kafkatxn import gather, snapshot as samples, verdicts
from kafkatxn.errors import DeadlineExceeded, KafkatxnError, UsageError
from kafkatxn.gather import in_one_run
from kafkatxn.metadata_columns import ColumnMetadata
from kafkatxn.model import OPEN_TRANSACTION_STATES, Missing, Part, PartitionInfo, TopicPartition, topic_partitions
from kafkatxn.producer_table import open_states
from kafkatxn.snapshot import (
    PART_GROUPS, PART_OFFSETS, PART_PRODUCERS, PART_TRANSACTION_AGES, PART_TRANSACTION_STATES, PART_VERDICTS,
    ClusterSnapshot,
)

if TYPE_CHECKING:  # handed the facade; not imported
    from kafkatxn import facts_lso, facts_scan
    from kafkatxn.kafka import Cluster

# The share of the time left that reading the consumer groups' commits may take before the offsets pass.
GROUPS_SHARE = 0.5

T = TypeVar("T")


_REPLICAS = itemgetter(3)  # of a PartitionInfo


class _Pass:
    """One pass's ``missing`` parts and ``not_gathered`` figures, and the step that turns a part's
    failure into them (a usage error is raised)."""

    def __init__(self, cluster: Cluster, snap: ClusterSnapshot):
        self.cluster, self.snap = cluster, snap
        self.missing: list[Missing] = []
        self.not_gathered: set[str] = set()
        self.offsets: dict[TopicPartition, tuple[int, int]] = {}  # the offsets pass's (LSO, HW) pairs: the group pass takes them

    def step(self, what: str, fn: Callable[[], T]) -> T | None:
        try:
            return fn()
        except UsageError:
            raise
        except KafkatxnError as exc:
            self.missing.append(Missing(Part(what), str(exc)))
            return None

    def committed_offsets(self, groups: bool, group_regex: str | None, spark_checkpoints: Sequence[str],
                          spark_writers: Sequence) -> tuple[tuple[dict, list[Missing]] | None, tuple]:
        """The groups' (and Spark queries') committed offsets, before the offsets pass (no second
        ListOffsets pass over their partitions). Listing groups waits for every broker: with one
        down it would take the whole deadline, so it gets half of what is left."""
        from kafkatxn import facts_lso, spark_readers

        cluster = self.cluster
        share_s = max(cluster.deadline - time.monotonic(), 0.0) * GROUPS_SHARE
        committed = None  # the groups' are kept when the Spark queries' fail after them
        try:
            with cluster.deadline_within(share_s):
                committed = facts_lso.committed_offsets_matching(cluster, group_regex) if groups else ({}, [])
                return spark_readers.with_queries(cluster, committed, spark_checkpoints, spark_writers)
        except UsageError:
            raise
        except DeadlineExceeded:
            self.missing.append(Missing(Part("consumer groups"), f"no answer within {share_s:.1f}s (half the time left, "
                                                                 "the rest kept for the partitions' offsets)"))
        except KafkatxnError as exc:
            self.missing.append(Missing(Part("consumer groups"), str(exc)))
        return committed, ()

    def offsets_and_producers(self, selected: Sequence[PartitionInfo], tps: list[TopicPartition]):
        """Both isolation levels in one round trip per leader (LSO <= HW within each pair), with the
        DescribeProducers requests in the same round trip: the partitions' samples, and the
        ``(LSO, HW)`` pairs and producer states the later steps take."""
        both = self.step("offsets", lambda: self.cluster.offsets_and_producers(tps))
        pairs, described = both if both is not None else (None, None)
        offsets = self.offsets = pairs.value if pairs is not None else {}
        self.missing.extend(m.within("offsets") for m in (pairs.missing if pairs is not None else []))
        self.snap.partitions = samples.partition_samples(selected, tps, offsets)
        if tps and not offsets:
            self.not_gathered.add(PART_OFFSETS)
        return offsets, described

    def transactions(self, described, selected: Sequence[PartitionInfo], topic_regex: str | None) -> None:
        """Every transaction the coordinators hold, first: the scan asks them of the producer ids it
        finds, and is answered from this listing (one ListTransactions a broker)."""
        snap, cluster = self.snap, self.cluster
        listed = self.step("transactions", lambda: cluster.list_transactions()[0])
        if listed is None:
            self.not_gathered |= {PART_TRANSACTION_STATES, PART_TRANSACTION_AGES}
            return
        self.missing.extend(m.within("transactions") for m in listed.missing)
        snap.transaction_states = dict(Counter(t.state for t in listed.value))
        if not listed.missing:
            snap.transactional_ids = tuple(t.transactional_id for t in listed.value)
        open_ids = sorted({t.transactional_id for t in listed.value if t.state in OPEN_TRANSACTION_STATES})
        # The ids of the producers DescribeProducers shows in a transaction ride along too, whatever
        # their coordinator's state: the scan asks about them, and is answered from this.
        # (The partitions without a transaction open, most of 30,000, left out in C.)
        held = open_states(described.value).values() if described is not None else ()
        pinning = {s.producer_id for states in compress(held, held) for s in states if s.current_txn_start_offset >= 0}
        asked_ids = sorted(set(open_ids) | {t.transactional_id for t in listed.value if t.producer_id in pinning})
        if not asked_ids:
            return
        if described is not None:  # the scan's first log probes (a producer id not listed) go with these requests
            gather.probes_ahead(cluster, pinning)
        # The visibility probe rides along: the scan needs it when a producer id is not listed.
        descriptions = self.step("open transactions", lambda: cluster.describe_with_visibility(asked_ids)[0])
        if descriptions is None:
            self.not_gathered.add(PART_TRANSACTION_AGES)
            return
        self.missing.extend(m.within("transactions") for m in descriptions.missing)
        scanned_topics = {p.topic for p in selected} if topic_regex is not None else set()  # (30,000 partitions' topics)
        snap.open_transactions = tuple(
            samples.transaction_sample(d) for d in descriptions.value.found.values()
            if d.state in OPEN_TRANSACTION_STATES
            # With --topic-regex, ages count only for transactions on the topics chosen.
            and (topic_regex is None or any(tp.topic in scanned_topics for tp in d.partitions))
        )

    def scan(self, tps: list[TopicPartition], described, offsets, max_transaction_timeout_ms: int | None,
             clock: Callable[[], float]) -> facts_scan.Scan | None:
        """The producer states (asked on their own when they did not come with the offsets:
        DescribeProducers unsupported, its error the part's reason, or the offsets' round trip
        failed as a whole), then the scan ``hanging`` lists (:func:`kafkatxn.facts_scan.scan_of`)."""
        from kafkatxn import facts, facts_scan

        snap, cluster = self.snap, self.cluster
        produced = self.step(
            "producer state",
            lambda: facts.producer_states(cluster, tps, with_transactional_ids=False, described=described),
        )
        if produced is None:
            self.not_gathered |= {PART_PRODUCERS, PART_VERDICTS}
            return None
        self.missing.extend(m.within("producer state") for m in produced.missing)
        snap.open_transaction_count = verdicts.open_transaction_count(open_states(produced.states))
        snap.active_producer_ids = facts.active_producer_ids(produced)
        timeout = self.step("transaction.max.timeout.ms", lambda: facts_scan.scan_timeout(cluster, max_transaction_timeout_ms))
        if timeout is None:
            self.not_gathered.add(PART_VERDICTS)
            return None
        timeout_ms, source, config_missing = timeout
        self.missing.extend(config_missing)
        snap.max_transaction_timeout_ms = timeout_ms
        now_ms = int(clock() * 1000)
        scan = self.step("hanging transactions",
                         lambda: facts_scan.scan_of(cluster, tps, produced, timeout_ms, source, self.missing, now_ms))
        if scan is None:
            self.not_gathered.add(PART_VERDICTS)
            return None
        made = samples.verdict_samples(scan.pins, offsets)
        snap.hanging, snap.lost_commits, snap.untracked, snap.undetermined = (
            made.hanging, made.lost_commits, made.untracked, made.undetermined)
        return scan

    def groups(self, committed: tuple[dict, list[Missing]] | None, queries: tuple, scanned: set[str] | None,
               settled: dict, memo: facts_lso.ProbeMemo | None = None, held_only: bool = False) -> None:
        """Where each group stands, from its committed offsets and the offsets pass's pairs (the
        run's answers, not read again), the pins the scan ``settled`` taken as they are. ``held_only``:
        the held places' samples and the largest lag (:func:`kafkatxn.snapshot.held_group_samples`)."""
        from kafkatxn import spark_readers

        snap = self.snap
        made = None
        if committed is not None:
            made = self.step("consumer groups", lambda: self._group_samples(committed, scanned, settled, memo, held_only and not queries))
        snap.groups = made if made is not None else ()
        snap.spark_queries = tuple(spark_readers.query_rows(queries, snap.groups)) if queries else ()
        if made is None:
            self.not_gathered.add(PART_GROUPS)

    def _group_samples(self, committed: tuple[dict, list[Missing]], scanned: set[str] | None, settled: dict,
                       memo: facts_lso.ProbeMemo | None, held_only: bool):
        from kafkatxn import facts_lso

        by_group, group_missing = committed
        if not by_group and not group_missing:
            return ()
        groups = facts_lso.finish_group_snapshot(self.cluster, by_group, list(group_missing),
                                                 max_transaction_timeout_ms=self.snap.max_transaction_timeout_ms, settled=settled,
                                                 memo=memo, pairs=self.offsets)
        self.missing.extend(m.within("group lag") for m in groups.missing)
        if held_only:
            held, self.snap.group_lag_max = samples.held_group_samples(groups, scanned)
            return held
        return samples.group_samples(groups, scanned)


@in_one_run
def gather_snapshot(
    cluster: Cluster,
    topic_regex: str | None = None,
    max_transaction_timeout_ms: int | None = None,
    clock: Callable[[], float] = time.time,
    groups: bool = False,
    group_regex: str | None = None,
    spark_checkpoints: Sequence[str] = (),
    spark_writers: Sequence = (),
    probe_memo: facts_lso.ProbeMemo | None = None,
    held_groups_only: bool = False,
) -> ClusterSnapshot:
    """One pass over the cluster. Unreachable, auth and deadline failures become ``error``; parts
    that did not answer become ``missing``. Usage errors (a bad regex) are raised. With ``groups``,
    also the transaction-aware lag of the consumer groups ``group_regex`` matches, and of the Spark
    queries of ``spark_checkpoints`` (the group pass with only them when not ``groups``). ``probe_memo``:
    the probes' answers kept from the last gather of this cluster (:class:`kafkatxn.facts_probes.ProbeMemo`:
    the exporter's). ``held_groups_only``: the groups' samples of the places held only, and the largest lag
    (``ClusterSnapshot.group_lag_max``): what ``check --groups`` decides on without a group lag threshold."""
    started = time.monotonic()
    taken_at_ms = int(clock() * 1000)
    try:
        md = cluster.metadata()
        # Internal topics too: a hanging transaction on __consumer_offsets stalls transactional
        # offset commits just as one on a data topic stalls consumers. Every partition of a metadata
        # read as columns: its own TopicPartitions and leaders, no PartitionInfo made before the
        # first request (as lso's).
        columns = not topic_regex and type(md) is ColumnMetadata
        selected = md.every_partition() if columns else cluster.select_partitions(include_internal=True, topic_pattern=topic_regex)
    except UsageError:
        raise
    except KafkatxnError as exc:
        return ClusterSnapshot(taken_at_ms, time.monotonic() - started, error=str(exc))
    replicas = md.replica_ids() if columns else set(chain.from_iterable(map(_REPLICAS, md.partitions)))  # in C
    snap = ClusterSnapshot(taken_at_ms, cluster_id=md.cluster_id, brokers=tuple(b.id for b in md.brokers),
                           replica_brokers=tuple(sorted(replicas)))
    run = _Pass(cluster, snap)
    if topic_regex and not selected:
        # A typo in the regex must not turn into a check that is always OK.
        run.missing.append(Missing(Part("--topic-regex"), f"no topic matches {topic_regex!r}"))
    unseen_at = len(run.missing)  # the topics this principal cannot see are named here, asked below
    # Every partition of columns: its TopicPartitions made after the first round is sent, while the brokers answer.
    tps = None if columns else topic_partitions(selected)
    grouped = groups or bool(spark_checkpoints)
    committed, queries = run.committed_offsets(groups, group_regex, spark_checkpoints, spark_writers) if grouped else (None, ())
    memo = probe_memo.for_cluster(md.cluster_id) if probe_memo is not None and grouped else None
    if memo is not None and committed is not None:  # the group pass's log starts go with the offsets' round trip
        from kafkatxn import facts_lso

        try:
            facts_lso.log_starts_ahead(cluster, committed[0], memo)
        except KafkatxnError:
            pass  # not sent ahead: the group pass asks them itself, and meets what this met
    # Two questions that need only the metadata go down with the offsets' round trip, after its
    # requests on each connection, instead of a round trip each: the topic-visibility probe and the
    # listing of every transaction (which the scan reads after DescribeProducers' answers all the same).
    if not topic_regex:
        cluster.topic_list_filtered_ahead()
    cluster.list_transactions_ahead()
    # That round begun now, with them: while the brokers answer, the log's readers (which settle a hanging
    # transaction, at the end) are imported, and the transaction log's partitions found (its probes route by them).
    cluster.offsets_and_producers_ahead(tps)
    if tps is None:
        tps = md.tps
    cluster.will_read_log_while_waiting()
    if cluster.answers_pending():
        md.transaction_log  # noqa: B018 - made and kept by the metadata
        # The scan's facts, imported now (not before the round: ~7 ms of check's stretch to its first request).
        from kafkatxn import facts, facts_scan  # noqa: F401
    offsets, described = run.offsets_and_producers(selected, tps)
    if described is not None and max_transaction_timeout_ms is None:
        # The scan reads the brokers' timeouts next, whatever the coordinators say: with their round,
        # not one of its own after it.
        gather.transaction_configs_ahead(cluster)
    if not topic_regex:
        run.missing[unseen_at:unseen_at] = gather.unseen_topics(cluster)
    run.transactions(described, selected, topic_regex)
    found = run.scan(tps, described, offsets, max_transaction_timeout_ms, clock)
    if grouped:
        # Pins the scan settled by the coordinator's log: the group pass takes them as they are.
        run.groups(committed, queries, {p.topic for p in selected} if topic_regex else None,
                   found.pins.settled() if found is not None else {},
                   memo, held_groups_only)
    if PART_VERDICTS in run.not_gathered:  # the oldest may be a hanging one, which only the verdicts find
        run.not_gathered.add(PART_TRANSACTION_AGES)
    snap.not_gathered = frozenset(run.not_gathered)
    snap.missing = tuple(run.missing)
    snap.duration_s = time.monotonic() - started
    return snap
