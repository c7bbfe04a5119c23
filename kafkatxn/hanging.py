"""Hanging transactions: open on a partition, unknown to their coordinator, so never completed.

The rule is the partition-side one of KIP-664, as Kafka's ``kafka-transactions.sh find-hanging``
applies it:

1. DescribeProducers over the partitions (one request per leader up to 10,000 partitions, or to one broker);
2. candidates: producers with an open transaction whose last write is older than the maximum
   transaction timeout — the coordinator would have aborted a transaction it tracks by then;
3. map the candidates' producer ids to transactional ids (ListTransactions, producer-id filter);
4. DescribeTransactions; a candidate is **hanging** when no transactional id maps to its producer
   id, the coordinator does not know the id, or the coordinator's transaction does not include the
   partition. Otherwise its coordinator still tracks it: **long-running**, listed separately.

Three verdicts, and only the cluster's positive answer makes one hanging:

- ``hanging``: every coordinator that could own the transactional id answered and none tracks this
  transaction on this partition. "No transactional id for the producer" needs *every*
  ``__transaction_state`` partition to have a leader that answered ListTransactions: KRaft drops a
  dead broker from the metadata's broker list, so "every broker answered" is not enough; and that
  leader to have taken the partition over before it listed (the metadata names a new leader
  before that broker coordinates), so such a producer id is listed again between two probes of
  every leader (:func:`kafkatxn.gather.coordinator_view`);
- ``long_running``: its coordinator tracks it, or is completing it (PrepareCommit/PrepareAbort:
  markers pending, whatever producer id the coordinator now shows), or it is a two-phase-commit
  transaction (KIP-939, timeout ``Integer.MAX_VALUE``), which nobody times out;
- ``undetermined``: anything else, with the typed :class:`Missing` parts that kept it from being
  decided (a ``__transaction_state`` partition, the transactional id, a broker).

Kafka's tool ignores producer epochs, and so does this: a marker with a newer epoch of the same
producer id still closes the partition's transaction (transaction version 2 bumps the epoch at
every commit or abort), so a newer epoch at the coordinator is normal. A coordinator whose
transaction belongs to a *different* producer id writes markers for that id only, so that case is
hanging too (Kafka's tool cannot see it: its producer-id lookup already rules it out, except in a
race).

Steps 1, 3 and 4 are the fact layer's scan (:func:`kafkatxn.facts_scan.take_scan`, over
:func:`~kafkatxn.facts.pins`, the one sequence every command's verdicts go through); deciding is pure, in :mod:`kafkatxn.verdicts`
(:func:`~kafkatxn.verdicts.classify`), the one definition every command uses; this module makes the rows.
"""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import TYPE_CHECKING, Sequence

from kafkatxn import facts_scan, verdicts, verdicts_age
from kafkatxn.gather import in_one_run
from kafkatxn.model import FRESH, FrozenRecord, Missing, Record, TopicPartition, record
from kafkatxn.output import Report
from kafkatxn.verdicts import Classification, Verdict

if TYPE_CHECKING:  # capability modules are handed the facade; they do not import it
    from kafkatxn.kafka import Cluster


# -- rows ---------------------------------------------------------------------------------------


@record
class HangingRow(FrozenRecord):
    """A candidate no coordinator tracks on its partition (hanging), or one whose COMMIT marker was
    lost (``lost_commit``), with its partition's offsets."""

    # Abort takes it: kept in narrow tables (output.py). A row's TABLE_KEEPS is not annotated: a
    # record's annotations are its fields.
    TABLE_KEEPS = ("start_offset",)

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int  # as DescribeProducers reports it; -1 when no marker was ever written
    start_offset: int
    last_timestamp_ms: int
    duration_ms: int  # since the producer's last write, as Kafka's tool measures it
    transactional_id: str | None
    coordinator_id: int | None
    coordinator_state: str | None
    reason: str
    last_stable_offset: int | None
    high_watermark: int | None
    lso_lag_messages: int | None  # high watermark minus LSO: what read_committed consumers cannot read
    holds_lso: bool | None  # this transaction is the one pinning the partition's LSO
    transaction_age_ms: int | None = None  # verdicts_age.transaction_age: since its first record on the partition
    transaction_age_source: str | None = None  # first_record, or last_write (a lower bound) when it could not be read

    def __init__(self, topic: str, partition: int, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                 start_offset: int, last_timestamp_ms: int, duration_ms: int, transactional_id: str | None,
                 coordinator_id: int | None, coordinator_state: str | None, reason: str, last_stable_offset: int | None,
                 high_watermark: int | None, lso_lag_messages: int | None, holds_lso: bool | None,
                 transaction_age_ms: int | None = None, transaction_age_source: str | None = None) -> None:
        self.__dict__.update(topic=topic, partition=partition, producer_id=producer_id, producer_epoch=producer_epoch,
                             coordinator_epoch=coordinator_epoch, start_offset=start_offset,
                             last_timestamp_ms=last_timestamp_ms, duration_ms=duration_ms,
                             transactional_id=transactional_id, coordinator_id=coordinator_id,
                             coordinator_state=coordinator_state, reason=reason, last_stable_offset=last_stable_offset,
                             high_watermark=high_watermark, lso_lag_messages=lso_lag_messages, holds_lso=holds_lso,
                             transaction_age_ms=transaction_age_ms, transaction_age_source=transaction_age_source)


@record
class UntrackedRow(HangingRow):
    """Open on a partition no coordinator tracks it on, not yet past its deadline
    (:func:`kafkatxn.verdicts.hanging_deadline_ms`): hanging from ``hanging_at_ms`` unless it ends."""

    TABLE_KEEPS = ("start_offset", "hanging_at_ms")  # abort takes the offset, then

    hanging_at_ms: int | None = None
    hanging_in_ms: int | None = None
    deadline: str | None = None  # which timeout dates it: its producer's own, or the maximum

    def __init__(self, topic: str, partition: int, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                 start_offset: int, last_timestamp_ms: int, duration_ms: int, transactional_id: str | None,
                 coordinator_id: int | None, coordinator_state: str | None, reason: str, last_stable_offset: int | None,
                 high_watermark: int | None, lso_lag_messages: int | None, holds_lso: bool | None,
                 transaction_age_ms: int | None = None, transaction_age_source: str | None = None,
                 hanging_at_ms: int | None = None, hanging_in_ms: int | None = None,
                 deadline: str | None = None) -> None:
        HangingRow.__init__(self, topic, partition, producer_id, producer_epoch, coordinator_epoch, start_offset,
                            last_timestamp_ms, duration_ms, transactional_id, coordinator_id, coordinator_state, reason,
                            last_stable_offset, high_watermark, lso_lag_messages, holds_lso, transaction_age_ms,
                            transaction_age_source)
        self.__dict__.update(hanging_at_ms=hanging_at_ms, hanging_in_ms=hanging_in_ms, deadline=deadline)


@record
class _CandidateColumns(FrozenRecord):
    """The first columns of the long-running and undetermined rows."""

    TABLE_KEEPS = ("start_offset",)

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    start_offset: int
    last_timestamp_ms: int
    duration_ms: int
    transactional_id: str | None

    def __init__(self, topic: str, partition: int, producer_id: int, producer_epoch: int, start_offset: int,
                 last_timestamp_ms: int, duration_ms: int, transactional_id: str | None) -> None:
        self.__dict__.update(topic=topic, partition=partition, producer_id=producer_id, producer_epoch=producer_epoch,
                             start_offset=start_offset, last_timestamp_ms=last_timestamp_ms, duration_ms=duration_ms,
                             transactional_id=transactional_id)


@record
class LongRunningRow(_CandidateColumns):
    """A candidate its coordinator still tracks or is completing, or a two-phase-commit one: long-running."""

    coordinator_id: int | None
    coordinator_state: str | None
    transaction_timeout_ms: int | None
    transaction_age_ms: int | None  # since the coordinator started the transaction
    last_stable_offset: int | None
    high_watermark: int | None
    lso_lag_messages: int | None
    reason: str = ""
    two_phase_commit: bool = False  # KIP-939: no one times it out; an external manager commits or aborts it

    def __init__(self, topic: str, partition: int, producer_id: int, producer_epoch: int, start_offset: int,
                 last_timestamp_ms: int, duration_ms: int, transactional_id: str | None, coordinator_id: int | None,
                 coordinator_state: str | None, transaction_timeout_ms: int | None, transaction_age_ms: int | None,
                 last_stable_offset: int | None, high_watermark: int | None, lso_lag_messages: int | None,
                 reason: str = "", two_phase_commit: bool = False) -> None:
        self.__dict__.update(topic=topic, partition=partition, producer_id=producer_id, producer_epoch=producer_epoch,
                             start_offset=start_offset, last_timestamp_ms=last_timestamp_ms, duration_ms=duration_ms,
                             transactional_id=transactional_id, coordinator_id=coordinator_id,
                             coordinator_state=coordinator_state, transaction_timeout_ms=transaction_timeout_ms,
                             transaction_age_ms=transaction_age_ms, last_stable_offset=last_stable_offset,
                             high_watermark=high_watermark, lso_lag_messages=lso_lag_messages, reason=reason,
                             two_phase_commit=two_phase_commit)


@record
class UndeterminedRow(_CandidateColumns):
    """A candidate the cluster could not decide: neither hanging nor shown to be tracked."""

    reason: str
    missing: list[str]  # the parts that did not answer (a __transaction_state partition, an id, a broker)

    def __init__(self, topic: str, partition: int, producer_id: int, producer_epoch: int, start_offset: int,
                 last_timestamp_ms: int, duration_ms: int, transactional_id: str | None, reason: str,
                 missing: list[str]) -> None:
        self.__dict__.update(topic=topic, partition=partition, producer_id=producer_id, producer_epoch=producer_epoch,
                             start_offset=start_offset, last_timestamp_ms=last_timestamp_ms, duration_ms=duration_ms,
                             transactional_id=transactional_id, reason=reason, missing=missing)


def undetermined_row(c: Classification, now_ms: int) -> UndeterminedRow:
    return UndeterminedRow(**_candidate_fields(c, now_ms), reason=c.reason, missing=[str(m) for m in c.missing])


def _lag(tp: TopicPartition, lso: dict[TopicPartition, int], hw: dict[TopicPartition, int]) -> int | None:
    if tp in lso and tp in hw:
        return max(hw[tp] - lso[tp], 0)
    return None


def _candidate_fields(c: Classification, now_ms: int) -> dict:
    """The partition and the producer's open transaction: the columns of every verdict's row."""
    p = c.open_txn.producer
    return dict(
        topic=c.open_txn.tp.topic,
        partition=c.open_txn.tp.partition,
        producer_id=p.producer_id,
        producer_epoch=p.producer_epoch,
        start_offset=p.current_txn_start_offset,
        last_timestamp_ms=p.last_timestamp_ms,
        duration_ms=max(now_ms - p.last_timestamp_ms, 0),
        transactional_id=c.transactional_id,
    )


def _row_fields(c: Classification, now_ms: int, lso: dict[TopicPartition, int], hw: dict[TopicPartition, int]) -> dict:
    """The candidate's columns, its coordinator's view and the partition's LSO."""
    tp = c.open_txn.tp
    d = c.description
    return dict(
        **_candidate_fields(c, now_ms),
        coordinator_id=d.coordinator_id if d else None,
        coordinator_state=d.state if d else None,
        reason=c.reason,
        last_stable_offset=lso.get(tp),
        high_watermark=hw.get(tp),
        lso_lag_messages=_lag(tp, lso, hw),
    )


def hanging_row(c: Classification, now_ms: int, lso: dict[TopicPartition, int], hw: dict[TopicPartition, int]) -> HangingRow:
    """``c`` as :func:`kafkatxn.facts.pins` gives it: dated by its first record where no coordinator dates it."""
    p = c.open_txn.producer
    tp = c.open_txn.tp
    age = verdicts_age.transaction_age(c.transaction, now_ms)
    return HangingRow(
        **_row_fields(c, now_ms, lso, hw),
        coordinator_epoch=p.coordinator_epoch,
        holds_lso=(lso[tp] == p.current_txn_start_offset) if tp in lso else None,
        transaction_age_ms=age.ms if age else None,
        transaction_age_source=age.source if age else None,
    )


def untracked_row(
    c: Classification, now_ms: int, lso: dict[TopicPartition, int], hw: dict[TopicPartition, int],
    max_transaction_timeout_ms: int | None,
) -> UntrackedRow:
    row = hanging_row(c, now_ms, lso, hw)
    values = {f.name: getattr(row, f.name) for f in dataclasses.fields(HangingRow)}
    at = c.hanging_at_ms
    return UntrackedRow(**values, hanging_at_ms=at, hanging_in_ms=max(at - now_ms, 0) if at is not None else None,
                        deadline=verdicts.deadline_source(c, max_transaction_timeout_ms))


def long_running_row(
    c: Classification, now_ms: int, lso: dict[TopicPartition, int], hw: dict[TopicPartition, int]
) -> LongRunningRow:
    d = c.description
    return LongRunningRow(
        **_row_fields(c, now_ms, lso, hw),
        transaction_timeout_ms=d.timeout_ms if d else None,
        transaction_age_ms=verdicts_age.transaction_age_ms(c.transaction, now_ms),
        two_phase_commit=c.two_phase_commit,
    )


# -- snapshot -----------------------------------------------------------------------------------


@record
class HangingResult(Record):
    """What ``hanging`` found, by verdict, and of what it scanned."""

    hanging: list[HangingRow]
    long_running: list[LongRunningRow]
    max_transaction_timeout_ms: int
    max_transaction_timeout_source: str
    partitions_scanned: int
    open_transactions: int
    candidates: int
    missing: list[Missing] = field(default_factory=list)
    classifications: list[Classification] = field(default_factory=list)
    undetermined: list[UndeterminedRow] = field(default_factory=list)
    # Committed by their coordinator, the COMMIT marker lost (kafkatxn.lost_commit): restore it, never abort.
    lost_commit: list[HangingRow] = field(default_factory=list)
    # Not tracked by their coordinator, not past their deadline yet: hanging then unless they end.
    untracked: list[UntrackedRow] = field(default_factory=list)
    untracked_classifications: list[Classification] = field(default_factory=list)

    def __init__(self, hanging: list[HangingRow], long_running: list[LongRunningRow], max_transaction_timeout_ms: int,
                 max_transaction_timeout_source: str, partitions_scanned: int, open_transactions: int, candidates: int,
                 missing: list[Missing] = FRESH, classifications: list[Classification] = FRESH,
                 undetermined: list[UndeterminedRow] = FRESH, lost_commit: list[HangingRow] = FRESH,
                 untracked: list[UntrackedRow] = FRESH,
                 untracked_classifications: list[Classification] = FRESH) -> None:
        self.__dict__.update(hanging=hanging, long_running=long_running,
                             max_transaction_timeout_ms=max_transaction_timeout_ms,
                             max_transaction_timeout_source=max_transaction_timeout_source,
                             partitions_scanned=partitions_scanned, open_transactions=open_transactions,
                             candidates=candidates, missing=[] if missing is FRESH else missing,
                             classifications=[] if classifications is FRESH else classifications,
                             undetermined=[] if undetermined is FRESH else undetermined,
                             lost_commit=[] if lost_commit is FRESH else lost_commit,
                             untracked=[] if untracked is FRESH else untracked,
                             untracked_classifications=[] if untracked_classifications is FRESH else untracked_classifications)

    def report(self) -> Report:
        facts = {
            "max_transaction_timeout_ms": self.max_transaction_timeout_ms,
            "max_transaction_timeout_source": self.max_transaction_timeout_source,
            "partitions_scanned": self.partitions_scanned,
            "open_transactions": self.open_transactions,
            "candidates": self.candidates,
            "hanging_count": len(self.hanging),
            "long_running_count": len(self.long_running),
            "undetermined_count": len(self.undetermined),
            "lost_commit_count": len(self.lost_commit),
            "untracked_count": len(self.untracked),
        }
        sections: dict[str, list] = {"hanging": self.hanging, "long_running": self.long_running, "undetermined": self.undetermined}
        if self.lost_commit:
            sections["lost_commit"] = self.lost_commit
        if self.untracked:
            sections["untracked"] = self.untracked
        return Report(facts=facts, sections=sections)


@in_one_run
def find_hanging(
    cluster: Cluster,
    broker_id: int | None = None,
    topics: Sequence[str] | None = None,
    partition: int | None = None,
    max_transaction_timeout_ms: int | None = None,
    partitions: list[TopicPartition] | None = None,
) -> HangingResult:
    """The rows of the fact layer's scan (:func:`kafkatxn.facts_scan.take_scan`; ``partitions``: its
    selection, made by the caller in this run), with the offsets of the partitions they name."""
    scan = facts_scan.take_scan(cluster, broker_id, topics, partition, max_transaction_timeout_ms, partitions)
    missing = list(scan.missing)
    now_ms, max_transaction_timeout_ms = scan.now_ms, scan.max_transaction_timeout_ms
    classifications, untracked = scan.due(), scan.untracked()
    affected = sorted({c.open_txn.tp for c in [*classifications, *untracked] if c.verdict is not Verdict.UNDETERMINED})
    lso: dict[TopicPartition, int] = {}
    hw: dict[TopicPartition, int] = {}
    if affected:
        # Both isolation levels in one round trip per leader (LSO <= HW within each pair).
        pairs = cluster.stable_and_high_offsets(affected)
        lso = {tp: pair[0] for tp, pair in pairs.value.items()}
        hw = {tp: pair[1] for tp, pair in pairs.value.items()}
        missing += [m.within("offsets") for m in pairs.missing]

    def rows(verdict: Verdict) -> list[HangingRow]:
        return [hanging_row(c, now_ms, lso, hw) for c in classifications if c.verdict is verdict]

    return HangingResult(
        hanging=rows(Verdict.HANGING),
        long_running=[long_running_row(c, now_ms, lso, hw) for c in classifications if c.verdict is Verdict.LONG_RUNNING],
        max_transaction_timeout_ms=max_transaction_timeout_ms,
        max_transaction_timeout_source=scan.max_transaction_timeout_source,
        partitions_scanned=len(scan.partitions),
        open_transactions=len(scan.pins.classifications),
        candidates=len(classifications),
        missing=missing,
        classifications=classifications,
        undetermined=[undetermined_row(c, now_ms) for c in classifications if c.verdict is Verdict.UNDETERMINED],
        lost_commit=rows(Verdict.LOST_COMMIT),
        untracked=[untracked_row(c, now_ms, lso, hw, max_transaction_timeout_ms) for c in untracked],
        untracked_classifications=untracked,
    )
