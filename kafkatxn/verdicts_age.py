"""How old an open transaction is, and when it is past its own timeout or overdue: pure, over what
was gathered (:class:`kafkatxn.verdicts.OpenTransaction`). One of the verdict modules beside
:mod:`kafkatxn.verdicts`: it imports only :mod:`kafkatxn.model` and the standard library (and the
other verdict modules), as tests/unit/test_layering.py checks.
"""

from __future__ import annotations

from kafkatxn.model import FrozenRecord, record
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kafkatxn.verdicts import OpenTransaction

# How often a coordinator looks for transactions past their own timeout and aborts them.
ABORT_CLEANUP_INTERVAL_CONFIG = "transaction.abort.timed.out.transaction.cleanup.interval.ms"
DEFAULT_ABORT_CLEANUP_INTERVAL_MS = 10_000  # Kafka's default
# After a transaction's own timeout and one cleanup interval, the time its coordinator's abort
# markers may take to land before the transaction counts as overdue (critical).
OVERDUE_MARGIN_MS = 5_000

# Where a transaction's age comes from, best first (``txn_age_source`` in the rows).
AGE_FROM_COORDINATOR = "coordinator"  # the coordinator's start time of this transaction on this partition
AGE_FROM_FIRST_RECORD = "first_record"  # the timestamp of the partition's first record of the transaction
AGE_FROM_LAST_WRITE = "last_write"  # DescribeProducers' last timestamp: a lower bound (the first record was not read)


@record  # a frozen dataclass whose methods are not compiled as it is made: model.Record
class TransactionAge(FrozenRecord):
    """How old a transaction is, and where that was read (:func:`transaction_age`)."""

    ms: int
    source: str  # AGE_FROM_*

    def __init__(self, ms: int, source: str) -> None:
        self.__dict__.update(ms=ms, source=source)


def transaction_age(txn: OpenTransaction | None, now_ms: int) -> TransactionAge | None:
    """How old an open transaction is: since its coordinator started it where the coordinator
    describes it as open on this partition; otherwise since the partition's first record of it
    (hanging transactions have no coordinator start); otherwise since the producer's last write, a
    lower bound. None only when none of them is known."""
    if txn is None:
        return None
    started = txn.coordinator_start_time_ms
    if started is not None:
        return TransactionAge(max(now_ms - started, 0), AGE_FROM_COORDINATOR)
    if txn.first_record_timestamp_ms is not None and txn.first_record_timestamp_ms >= 0:
        return TransactionAge(max(now_ms - txn.first_record_timestamp_ms, 0), AGE_FROM_FIRST_RECORD)
    if txn.last_timestamp_ms >= 0:
        return TransactionAge(max(now_ms - txn.last_timestamp_ms, 0), AGE_FROM_LAST_WRITE)
    return None


def transaction_age_ms(txn: OpenTransaction | None, now_ms: int) -> int | None:
    """The one age of an open transaction (:func:`transaction_age`), in milliseconds."""
    age = transaction_age(txn, now_ms)
    return age.ms if age is not None else None


def needs_first_record(txn: OpenTransaction) -> bool:
    """Whether the transaction's age has to be read from its first record (no coordinator start)."""
    return txn.coordinator_start_time_ms is None and txn.first_record_timestamp_ms is None


def overdue_grace_ms(abort_cleanup_interval_ms: int | None = None) -> int:
    """How long past its own timeout a tracked transaction is left to its coordinator: one abort
    cleanup interval (the brokers', Kafka's default where not read) and a margin for the markers."""
    interval = abort_cleanup_interval_ms if abort_cleanup_interval_ms is not None else DEFAULT_ABORT_CLEANUP_INTERVAL_MS
    return interval + OVERDUE_MARGIN_MS


def is_past_timeout(txn: OpenTransaction | None, now_ms: int) -> bool:
    """Past its own timeout: the coordinator tracks it as open here and it is older than the
    transaction timeout its producer set (two-phase-commit transactions have none). Its
    coordinator aborts it at its next cleanup: a warning, not yet a page."""
    if txn is None or txn.coordinator_start_time_ms is None or txn.description is None:
        return False
    d = txn.description
    return not d.two_phase_commit and now_ms - txn.coordinator_start_time_ms > d.timeout_ms


def is_overdue(txn: OpenTransaction | None, now_ms: int, abort_cleanup_interval_ms: int | None = None) -> bool:
    """Overdue: past its own timeout by more than :func:`overdue_grace_ms`, so its coordinator had
    its chance to abort it and did not (critical)."""
    return is_past_timeout(txn, now_ms - overdue_grace_ms(abort_cleanup_interval_ms))


def last_write_age_ms(txn: OpenTransaction | None, now_ms: int) -> int | None:
    """Since the producer's last write to the partition."""
    if txn is None or txn.last_timestamp_ms < 0:
        return None
    return max(0, now_ms - txn.last_timestamp_ms)


def best_age_ms(txn_age_ms: int | None, last_write_age_ms: int | None) -> int | None:
    """The transaction's age where the coordinator knows it, else the age of its last write (a lower bound)."""
    return txn_age_ms if txn_age_ms is not None else last_write_age_ms


def coordinator_age_ms(start_time_ms: int, now_ms: int) -> int | None:
    """A transaction's age by its coordinator's start time (-1: none open): check's and the
    exporter's transaction ages, and :func:`transaction_age_ms` once the start is this partition's."""
    return max(now_ms - start_time_ms, 0) if start_time_ms >= 0 else None
