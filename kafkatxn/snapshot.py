"""One pass over the cluster that ``check`` and the exporter decide on (:class:`ClusterSnapshot`).

The pass asks the facade for offsets at both isolation levels, producer state, the hanging rule of
:mod:`kafkatxn.hanging`, and the coordinators' transactions. What does not answer becomes a
typed :class:`Missing`; deciding (thresholds, metrics) is pure, over the snapshot.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, NamedTuple, Sequence

from kafkatxn import verdicts, verdicts_age, verdicts_groups
from kafkatxn.errors import DeadlineExceeded, KafkatxnError, UsageError
from kafkatxn.model import OPEN_TRANSACTION_STATES, Missing, Part, TopicPartition, TransactionDescription, TWO_PHASE_COMMIT_TIMEOUT_MS
from kafkatxn.gather import in_one_run

if TYPE_CHECKING:  # capability modules are handed the facade; they do not import it
    from kafkatxn.kafka import Cluster

# The share of the time left that reading the consumer groups' commits may take before the offsets pass.
GROUPS_SHARE = 0.5

# Every state ListTransactions can report (TRANSACTION_STATES), so absent states are exported as 0
# rather than missing; OPEN_TRANSACTION_STATES have begun and not yet completed.

# The parts of a snapshot whose figures check's perfdata and the exporter publish only when they were
# gathered (ClusterSnapshot.not_gathered): a value that was not gathered is absent, never a 0.
PART_OFFSETS = "offsets"  # LSO lag: the largest, the lagging partitions
PART_PRODUCERS = "producer state"  # active producer ids per broker
PART_VERDICTS = "hanging verdicts"  # hanging and undetermined transactions
PART_TRANSACTION_STATES = "transaction states"  # ListTransactions' count per state
PART_TRANSACTION_AGES = "transaction ages"  # the oldest open transaction
PART_GROUPS = "consumer groups"  # group lag, blocked groups (with --groups)


class PartitionSample(NamedTuple):
    """One scanned partition's offsets. A named tuple: a scrape at 30,000 partitions makes 30,000."""

    topic: str
    partition: int
    leader: int
    high_watermark: int | None  # None when the leader did not answer
    last_stable_offset: int | None

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def lso_lag_messages(self) -> int | None:
        """High watermark minus LSO: what read_committed consumers cannot read yet (the broker's
        LastStableOffsetLag gauge)."""
        hw, lso = self.high_watermark, self.last_stable_offset
        if hw is None or lso is None:
            return None
        # verdicts_groups.Offsets.lag, without an Offsets per partition: clamped at 0 in case a leader moved between.
        return hw - lso if hw > lso else 0


@dataclass(frozen=True)
class TransactionSample:
    """A transaction its coordinator has open (DescribeTransactions)."""

    transactional_id: str
    state: str
    producer_id: int
    coordinator_id: int
    start_time_ms: int  # -1 when unknown
    timeout_ms: int
    topics: tuple[str, ...] = ()  # topics the transaction has written to

    @property
    def two_phase_commit(self) -> bool:
        return self.timeout_ms == TWO_PHASE_COMMIT_TIMEOUT_MS


@dataclass(frozen=True)
class CandidateSample:
    """An open transaction past the maximum timeout, as :mod:`kafkatxn.hanging` classified it
    (only the fields check and the exporter need)."""

    topic: str
    partition: int
    producer_id: int
    start_offset: int
    transactional_id: str | None
    reason: str


@dataclass(frozen=True)
class HangingSample(CandidateSample):
    """Hanging: the cluster positively says no coordinator will complete it."""

    lso_lag_messages: int | None = None
    age_ms: int | None = None  # verdicts_age.transaction_age: from its first record (no coordinator dates it)
    age_source: str | None = None


@dataclass(frozen=True)
class UntrackedSample(HangingSample):
    """Not tracked by its coordinator, not past its deadline yet: hanging from ``hanging_at_ms`` unless it ends."""

    hanging_at_ms: int | None = None


@dataclass(frozen=True)
class UndeterminedSample(CandidateSample):
    """Undetermined: a coordinator that could own it did not answer."""

    missing: tuple[Missing, ...] = ()  # the typed parts that did not answer


class GroupSample(NamedTuple):
    """Transaction-aware lag of one consumer group on one partition (a :func:`kafkatxn.group_positions.group_positions`
    place). A tuple: a scrape at 5,000 groups x 20 partitions holds 100,000 of them."""

    group: str
    topic: str
    partition: int
    lag_messages: int  # what a read_committed consumer still has to read (markers/aborted records left out where probed)
    lag_to_lso_messages: int
    lag_to_hw_messages: int
    blocked: bool  # held by an open transaction not in flight (at its LSO, or through the group's offsets partition)
    # The blocking transaction (when blocked or waiting): its age, whether it hangs, whether it is past its own
    # timeout (kafkatxn.group_positions.GroupLag's). txn_hanging and txn_lost_commit are None when its verdict is undetermined.
    txn_age_ms: int | None = None
    txn_hanging: bool | None = False
    txn_overdue: bool = False
    txn_lost_commit: bool | None = False  # it lost its COMMIT marker: nothing but restore-commit releases the group
    waiting: bool = False  # held by a transaction in flight (verdicts_groups.held_verdict): it reads on at its commit
    blocked_through: str | None = None  # "__consumer_offsets-N": held through its offsets partition (GroupLag's)
    txn_verdict: verdicts_groups.BlockVerdict | None = None  # what the holding transaction is (verdicts_groups.block_verdict); None unless held

    @property
    def stuck(self) -> bool:
        """Blocked behind a transaction that hangs, lost its COMMIT marker or is past its own timeout
        (critical whatever the age threshold)."""
        return self.blocked and verdicts_groups.blocked_severity(
            self.txn_hanging, self.txn_overdue, False, lost_commit=self.txn_lost_commit) is verdicts_groups.Severity.critical


@dataclass
class ClusterSnapshot:
    """Everything check and the exporter decide on, from one pass over the cluster."""

    taken_at_ms: int
    duration_s: float = 0.0
    error: str | None = None  # set when nothing could be read (unreachable, auth, deadline)
    cluster_id: str | None = None
    brokers: tuple[int, ...] = ()  # registered in metadata
    replica_brokers: tuple[int, ...] = ()  # named as a replica of some partition (may be down)
    partitions: tuple[PartitionSample, ...] = ()
    transaction_states: dict[str, int] = field(default_factory=dict)  # ListTransactions counts by state
    open_transactions: tuple[TransactionSample, ...] = ()
    active_producer_ids: dict[int, int] = field(default_factory=dict)  # leader broker -> distinct producer ids
    # Open transactions on the scanned partitions, per partition (verdicts.open_transactions over
    # their producer state: the count hanging gives too); None when producer state did not arrive.
    open_transaction_count: int | None = None
    hanging: tuple[HangingSample, ...] = ()
    undetermined: tuple[UndeterminedSample, ...] = ()  # neither hanging nor shown to be tracked
    # Committed by their coordinator, the partition's COMMIT marker lost (kafkatxn.lost_commit): as
    # stuck as a hanging one, but released by restore-commit, never by abort.
    lost_commits: tuple[HangingSample, ...] = ()
    # Not tracked by their coordinator and not past their deadline: hanging then, unless they end.
    untracked: tuple[UntrackedSample, ...] = ()
    max_transaction_timeout_ms: int | None = None
    missing: tuple[Missing, ...] = ()  # parts that did not answer
    transactional_ids: tuple[str, ...] | None = None  # every id ListTransactions returned; None unless all answered
    groups: tuple[GroupSample, ...] | None = None  # None when group lag was not gathered
    spark_queries: tuple = ()  # the Spark queries among the readers (spark_readers.QueryRow), with their writers
    not_gathered: frozenset[str] = frozenset()  # PART_* whose figures are absent (why: ``missing``)

    @property
    def up(self) -> bool:
        return self.error is None

    def gathered(self, part: str) -> bool:
        return part not in self.not_gathered

    def group_stuck(self, sample: GroupSample) -> bool | None:
        """Whether the group is stuck on this partition; None when that cannot be known: it is
        blocked and the pinning transaction's verdict is undetermined (by the group pass or by the
        scan's), or whether it is past its own timeout needs the coordinator's answer this cluster
        did not give (Kafka before 3.0, a coordinator that did not answer). A group that is not
        blocked is not stuck."""
        if not sample.blocked or sample.stuck:
            return sample.stuck
        if sample.txn_hanging is None:
            return None
        undetermined = {(u.topic, u.partition) for u in self.undetermined}
        if (sample.topic, sample.partition) in undetermined or not self.gathered(PART_VERDICTS) \
                or not self.gathered(PART_TRANSACTION_STATES):
            return None
        return False

    def broker_up(self) -> dict[int, bool]:
        """Every broker known from metadata or replica lists: up when registered in metadata."""
        registered = set(self.brokers)
        return {b: b in registered for b in sorted(registered | set(self.replica_brokers))}

    def transaction_age_s(self, txn: TransactionSample) -> float | None:
        age_ms = verdicts_age.coordinator_age_ms(txn.start_time_ms, self.taken_at_ms)
        return age_ms / 1000 if age_ms is not None else None

    def oldest_transaction_age_s(self) -> float:
        """The oldest open transaction: those their coordinators have open, and the hanging ones (no
        coordinator has them: dated by their first record). Two-phase-commit transactions (KIP-939)
        are left out: no one times them out, their age is no alarm."""
        ages = [a for a in (self.transaction_age_s(t) for t in self.open_transactions if not t.two_phase_commit) if a is not None]
        ages += [h.age_ms / 1000 for h in self.hanging + self.lost_commits + self.untracked if h.age_ms is not None]
        return max(ages, default=0.0)


def _hanging_samples(cluster: Cluster, states, now_ms: int, max_timeout_ms: int, lso: dict, hw: dict, missing: list[Missing],
                     undetermined: list[UndeterminedSample], lost_commits: list[HangingSample], settled: dict,
                     untracked: list[UntrackedSample]):
    """The one pins sequence (:func:`kafkatxn.facts.scan`, as ``hanging`` asks it) over producer states
    already described; what it settled goes into ``settled`` for the group pass."""
    from kafkatxn import facts

    found = facts.scan(cluster, states, now_ms, max_timeout_ms, missing)
    settled.update(found.settled())
    out = []
    for c in [*found.due(), *found.untracked()]:
        if c.verdict in (verdicts.Verdict.HANGING, verdicts.Verdict.LOST_COMMIT, verdicts.Verdict.UNTRACKED):
            tp = c.open_txn.tp
            lag = max(hw[tp] - lso[tp], 0) if tp in lso and tp in hw else None
            age = verdicts_age.transaction_age(c.transaction, now_ms)
            fields = (tp.topic, tp.partition, c.open_txn.producer_id, c.open_txn.start_offset,
                      c.transactional_id, c.reason, lag, age.ms if age else None, age.source if age else None)
            if c.verdict is verdicts.Verdict.UNTRACKED:
                untracked.append(UntrackedSample(*fields, hanging_at_ms=c.hanging_at_ms))
            else:
                (out if c.verdict is verdicts.Verdict.HANGING else lost_commits).append(HangingSample(*fields))
        elif c.verdict is verdicts.Verdict.UNDETERMINED:
            p = c.open_txn.producer
            undetermined.append(UndeterminedSample(
                c.open_txn.tp.topic, c.open_txn.tp.partition, p.producer_id, p.current_txn_start_offset,
                c.transactional_id, c.reason, c.missing,
            ))
    return tuple(out)


def committed_group_offsets(cluster: Cluster, group_regex: str | None) -> tuple[dict, list[Missing]]:
    """Committed offsets of the groups ``group_regex`` matches (searched; every group without it):
    the first step of :func:`group_samples`, taken before the offsets pass (a commit cannot pass
    the LSO of its moment, and the LSO read afterwards can only be larger)."""
    from kafkatxn import facts_lso
    from kafkatxn.validation import compile_regex

    listed = cluster.list_groups_partial()  # a broker that did not list its groups: named, the rest go on
    names = listed.value
    missing = list(listed.missing)
    if group_regex:
        pattern = compile_regex(group_regex, "--group-regex")
        names = [g for g in names if pattern.search(g)]
        if not names:
            # A typo in the regex must not turn into a check that is always OK (as --topic-regex).
            missing.append(Missing(Part("--group-regex"), f"no consumer group matches {group_regex!r}"))
    if not names:
        return {}, missing
    committed, more = facts_lso.committed_offsets(cluster, names)
    return committed, missing + more


def group_samples(
    cluster: Cluster, committed: tuple[dict, list[Missing]], topics: set[str] | None, missing: list[Missing],
    max_transaction_timeout_ms: int | None = None, settled: dict | None = None,
) -> tuple[GroupSample, ...]:
    """Group lag from ``committed`` (:func:`committed_group_offsets`) on ``topics``; the offsets pass's
    (LSO, HW) pairs are the run's answers (not read again), and the pins the hanging pass ``settled``
    are taken as they are."""
    from kafkatxn import group_positions, facts_lso, verdicts_groups

    by_group, group_missing = committed
    if not by_group and not group_missing:
        return ()
    snap = facts_lso.finish_group_snapshot(cluster, by_group, list(group_missing),
                                           max_transaction_timeout_ms=max_transaction_timeout_ms, settled=settled)
    missing.extend(m.within("group lag") for m in snap.missing)
    samples = []
    append, sample = samples.append, tuple.__new__  # 100,000 a scrape
    for group, tp, _committed, _offsets, verdict, _readable, lag_to_lso, lag_to_hw, lag, held in group_positions.group_positions(snap):
        topic, partition = tp
        if topics is not None and topic not in topics:
            continue
        if held is not None:  # blocked or waiting
            facts = group_positions.pin_facts(snap.lso, held)
            pinned = facts.pin is not None  # its blocking transaction was found
            # The blocking transaction's verdict as lso gives it (None: undetermined).
            waiting = verdict is verdicts_groups.GroupVerdict.waiting
            append(GroupSample(group, topic, partition, lag, lag_to_lso, lag_to_hw, not waiting, facts.age_ms,
                               facts.hanging if pinned else False, bool(facts.overdue), facts.lost_commit if pinned else False,
                               waiting, str(held) if held != tp else None, facts.verdict))
        else:  # GroupSample(group, topic, partition, lag, lag_to_lso, lag_to_hw, False), without its Python __new__
            append(sample(GroupSample, (group, topic, partition, lag, lag_to_lso, lag_to_hw, False, None, False, False, False,
                                        False, None, None)))
    return tuple(samples)


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
) -> ClusterSnapshot:
    """One pass over the cluster. Unreachable, auth and deadline failures become ``error``; parts
    that did not answer become ``missing``. Usage errors (a bad regex) are raised. With ``groups``,
    also the transaction-aware lag of the consumer groups ``group_regex`` matches, and of the Spark
    queries of ``spark_checkpoints`` (the group pass with only them when not ``groups``)."""
    from kafkatxn import facts, gather, spark_readers

    started = time.monotonic()
    taken_at_ms = int(clock() * 1000)
    missing: list[Missing] = []
    try:
        md = cluster.metadata()
        # Internal topics too: a hanging transaction on __consumer_offsets stalls transactional
        # offset commits just as one on a data topic stalls consumers.
        selected = cluster.select_partitions(include_internal=True, topic_pattern=topic_regex)
    except UsageError:
        raise
    except KafkatxnError as exc:
        return ClusterSnapshot(taken_at_ms, time.monotonic() - started, error=str(exc))

    not_gathered: set[str] = set()
    if topic_regex and not selected:
        # A typo in the regex must not turn into a check that is always OK.
        missing.append(Missing(Part("--topic-regex"), f"no topic matches {topic_regex!r}"))
    if not topic_regex:
        missing += gather.unseen_topics(cluster)
    tps = [p.tp for p in selected]
    snapshot = ClusterSnapshot(
        taken_at_ms,
        cluster_id=md.cluster_id,
        brokers=tuple(b.id for b in md.brokers),
        replica_brokers=tuple(sorted({r for p in md.partitions for r in p.replicas})),
    )

    def step(what: str, fn: Callable[[], object]) -> object | None:
        try:
            return fn()
        except UsageError:
            raise
        except KafkatxnError as exc:
            missing.append(Missing(Part(what), str(exc)))
            return None

    # Group lag compares committed offsets with the LSO: the commits are read first, and the
    # offsets pass below then serves both (no second ListOffsets pass over the groups' partitions).
    # Listing groups waits for every broker: with one down it would take the whole deadline, so it
    # gets half of what is left and the offsets pass the rest.
    committed, queries = None, ()
    if groups or spark_checkpoints:
        share_s = max(cluster.deadline - time.monotonic(), 0.0) * GROUPS_SHARE
        try:
            with cluster.deadline_within(share_s):
                committed = committed_group_offsets(cluster, group_regex) if groups else ({}, [])
                committed, queries = spark_readers.with_queries(cluster, committed, spark_checkpoints, spark_writers)
        except UsageError:
            raise
        except DeadlineExceeded:
            missing.append(Missing(Part("consumer groups"), f"no answer within {share_s:.1f}s (half the time left, "
                                                            "the rest kept for the partitions' offsets)"))
        except KafkatxnError as exc:
            missing.append(Missing(Part("consumer groups"), str(exc)))

    # Both isolation levels in one round trip per leader (LSO <= HW within each pair), with the
    # DescribeProducers requests in the same round trip.
    both = step("offsets", lambda: cluster.offsets_and_producers(tps))
    pairs, described = both if both is not None else (None, None)
    offsets = pairs.value if pairs is not None else {}
    missing += [m.within("offsets") for m in (pairs.missing if pairs is not None else [])]
    lso = {tp: pair[0] for tp, pair in offsets.items()}
    hw = {tp: pair[1] for tp, pair in offsets.items()}
    samples = []
    for p, tp in zip(selected, tps):
        pair = offsets.get(tp)
        samples.append(PartitionSample(p.topic, p.partition, p.leader, *((pair[1], pair[0]) if pair else (None, None))))
    snapshot.partitions = tuple(samples)
    if tps and not offsets:
        not_gathered.add(PART_OFFSETS)

    # Every transaction the coordinators hold, first: the hanging pass below asks them of the
    # producer ids it finds, and is answered from this listing (one ListTransactions a broker).
    listed = step("transactions", lambda: cluster.list_transactions()[0])
    if listed is None:
        not_gathered |= {PART_TRANSACTION_STATES, PART_TRANSACTION_AGES}
    else:
        missing += [m.within("transactions") for m in listed.missing]
        snapshot.transaction_states = dict(Counter(t.state for t in listed.value))
        if not listed.missing:
            snapshot.transactional_ids = tuple(t.transactional_id for t in listed.value)
        open_ids = sorted({t.transactional_id for t in listed.value if t.state in OPEN_TRANSACTION_STATES})
        # The ids of the producers DescribeProducers shows in a transaction ride along too, whatever
        # their coordinator's state: the hanging pass asks about them, and is answered from this.
        pinning = {s.producer_id for states in (described.value.values() if described is not None else ())
                   for s in states if s.current_txn_start_offset >= 0}
        asked_ids = sorted(set(open_ids) | {t.transactional_id for t in listed.value if t.producer_id in pinning})
        if asked_ids:
            # The visibility probe rides along: the hanging pass needs it when a producer id is not listed.
            descriptions = step("open transactions", lambda: cluster.describe_with_visibility(asked_ids)[0])
            if descriptions is None:
                not_gathered.add(PART_TRANSACTION_AGES)
            else:
                found_txns = descriptions.value.found
                missing += [m.within("transactions") for m in descriptions.missing]
                scanned_topics = {p.topic for p in selected}
                snapshot.open_transactions = tuple(
                    _transaction_sample(d) for d in found_txns.values()
                    if d.state in OPEN_TRANSACTION_STATES
                    # With --topic-regex, ages count only for transactions on the topics chosen.
                    and (topic_regex is None or any(tp.topic in scanned_topics for tp in d.partitions))
                )

    # Pins the hanging pass settles by the coordinator's log: the group pass takes them as they are.
    settled: dict[tuple[TopicPartition, int], verdicts.Classification] = {}

    # Asked for on their own when they did not come with the offsets (DescribeProducers unsupported:
    # its error is the part's reason; or the offsets' round trip failed as a whole).
    produced = step(
        "producer state",
        lambda: facts.producer_states(cluster, tps, with_transactional_ids=False, described=described),
    )
    if produced is None:
        not_gathered |= {PART_PRODUCERS, PART_VERDICTS}
    else:
        missing += [m.within("producer state") for m in produced.missing]
        snapshot.open_transaction_count = verdicts.open_transaction_count(produced.states)
        snapshot.active_producer_ids = facts.active_producer_ids(produced)
        timeout_ms = max_transaction_timeout_ms
        if timeout_ms is None:
            found = step("transaction.max.timeout.ms", lambda: gather.cluster_max_transaction_timeout(cluster))
            if found is not None:
                timeout_ms, config_missing = found
                missing += config_missing
        snapshot.max_transaction_timeout_ms = timeout_ms
        if timeout_ms is not None:
            now_ms = int(clock() * 1000)
            undetermined: list[UndeterminedSample] = []
            lost_commits: list[HangingSample] = []
            untracked: list[UntrackedSample] = []
            result = step(
                "hanging transactions",
                lambda: _hanging_samples(cluster, produced.states, now_ms, timeout_ms, lso, hw, missing, undetermined, lost_commits,
                                         settled, untracked),
            )
            snapshot.hanging = result or ()
            snapshot.undetermined = tuple(undetermined)
            snapshot.lost_commits = tuple(lost_commits)
            snapshot.untracked = tuple(untracked)
            if result is None:
                not_gathered.add(PART_VERDICTS)
        else:
            not_gathered.add(PART_VERDICTS)

    if groups or spark_checkpoints:
        scanned = {p.topic for p in selected} if topic_regex else None
        gathered = None
        if committed is not None:
            gathered = step("consumer groups", lambda: group_samples(
                cluster, committed, scanned, missing, snapshot.max_transaction_timeout_ms, settled))
        snapshot.groups = gathered if gathered is not None else ()
        snapshot.spark_queries = tuple(spark_readers.query_rows(queries, snapshot.groups)) if queries else ()
        if gathered is None:
            not_gathered.add(PART_GROUPS)

    if PART_VERDICTS in not_gathered:  # the oldest may be a hanging one, which only the verdicts find
        not_gathered.add(PART_TRANSACTION_AGES)
    snapshot.not_gathered = frozenset(not_gathered)
    snapshot.missing = tuple(missing)
    snapshot.duration_s = time.monotonic() - started
    return snapshot


def _transaction_sample(d: TransactionDescription) -> TransactionSample:
    return TransactionSample(
        d.transactional_id, d.state, d.producer_id, d.coordinator_id, d.start_time_ms, d.timeout_ms,
        tuple(sorted({tp.topic for tp in d.partitions})),
    )
