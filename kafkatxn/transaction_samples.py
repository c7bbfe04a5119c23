"""The transactions a :class:`kafkatxn.snapshot.ClusterSnapshot` holds: those their coordinators have
open, and the scan's findings by verdict (hanging, untracked, undetermined), with only the fields
check and the exporter need. Model records (:mod:`kafkatxn.records`): made without generated methods.
"""

from __future__ import annotations

from kafkatxn.model import TWO_PHASE_COMMIT_TIMEOUT_MS, Missing, TransactionDescription
from kafkatxn.records import FrozenRecord, record


@record
class TransactionSample(FrozenRecord):
    """A transaction its coordinator has open (DescribeTransactions)."""

    transactional_id: str
    state: str
    producer_id: int
    coordinator_id: int
    start_time_ms: int  # -1 when unknown
    timeout_ms: int
    topics: tuple[str, ...] = ()  # topics the transaction has written to

    def __init__(self, transactional_id: str, state: str, producer_id: int, coordinator_id: int, start_time_ms: int,
                 timeout_ms: int, topics: tuple[str, ...] = ()) -> None:
        self.__dict__.update(transactional_id=transactional_id, state=state, producer_id=producer_id,
                             coordinator_id=coordinator_id, start_time_ms=start_time_ms, timeout_ms=timeout_ms, topics=topics)

    @property
    def two_phase_commit(self) -> bool:
        return self.timeout_ms == TWO_PHASE_COMMIT_TIMEOUT_MS


@record
class CandidateSample(FrozenRecord):
    """An open transaction past the maximum timeout, as :mod:`kafkatxn.hanging` classified it
    (only the fields check and the exporter need)."""

    topic: str
    partition: int
    producer_id: int
    start_offset: int
    transactional_id: str | None
    reason: str

    def __init__(self, topic: str, partition: int, producer_id: int, start_offset: int, transactional_id: str | None,
                 reason: str) -> None:
        self.__dict__.update(topic=topic, partition=partition, producer_id=producer_id, start_offset=start_offset,
                             transactional_id=transactional_id, reason=reason)


@record
class HangingSample(CandidateSample):
    """Hanging: the cluster positively says no coordinator will complete it."""

    lso_lag_messages: int | None = None
    age_ms: int | None = None  # verdicts_age.transaction_age: from its first record (no coordinator dates it)
    age_source: str | None = None

    def __init__(self, topic: str, partition: int, producer_id: int, start_offset: int, transactional_id: str | None,
                 reason: str, lso_lag_messages: int | None = None, age_ms: int | None = None,
                 age_source: str | None = None) -> None:
        CandidateSample.__init__(self, topic, partition, producer_id, start_offset, transactional_id, reason)
        self.__dict__.update(lso_lag_messages=lso_lag_messages, age_ms=age_ms, age_source=age_source)


@record
class UntrackedSample(HangingSample):
    """Not tracked by its coordinator, not past its deadline yet: hanging from ``hanging_at_ms`` unless it ends."""

    hanging_at_ms: int | None = None

    def __init__(self, topic: str, partition: int, producer_id: int, start_offset: int, transactional_id: str | None,
                 reason: str, lso_lag_messages: int | None = None, age_ms: int | None = None,
                 age_source: str | None = None, hanging_at_ms: int | None = None) -> None:
        HangingSample.__init__(self, topic, partition, producer_id, start_offset, transactional_id, reason,
                               lso_lag_messages, age_ms, age_source)
        self.__dict__["hanging_at_ms"] = hanging_at_ms


@record
class UndeterminedSample(CandidateSample):
    """Undetermined: a coordinator that could own it did not answer."""

    missing: tuple[Missing, ...] = ()  # the typed parts that did not answer

    def __init__(self, topic: str, partition: int, producer_id: int, start_offset: int, transactional_id: str | None,
                 reason: str, missing: tuple[Missing, ...] = ()) -> None:
        CandidateSample.__init__(self, topic, partition, producer_id, start_offset, transactional_id, reason)
        self.__dict__["missing"] = missing


def transaction_sample(d: TransactionDescription) -> TransactionSample:
    return TransactionSample(
        d.transactional_id, d.state, d.producer_id, d.coordinator_id, d.start_time_ms, d.timeout_ms,
        tuple(sorted({tp.topic for tp in d.partitions})),
    )
