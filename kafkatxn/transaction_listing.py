"""Transactions as their coordinators see them (ListTransactions, DescribeTransactions).

:func:`list_transactions` and :func:`describe_transactions` ask the facade (the only I/O); the
filtering and row building below them are pure functions over what came back.

Semantics of the filters, the same whether the brokers or this client apply them:

- ``--min-duration D`` keeps *open* transactions (Ongoing, PrepareCommit, PrepareAbort,
  PrepareEpochFence) that started more than D ago. Brokers also match completed transactions whose
  last transaction started long ago; those have no running duration, so they are dropped.
- ``--pattern REGEX`` must match the whole transactional id, as the broker's filter (Java
  ``Matcher.matches``) does.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Sequence

from kafkatxn import verdicts
from kafkatxn.validation import compile_regex
from kafkatxn.model import Missing, TransactionalId, OPEN_TRANSACTION_STATES, TRANSACTION_STATES, ListTransactionsSupport, TransactionDescription, TransactionListing
from kafkatxn.errors import UsageError
from kafkatxn.gather import in_one_run

if TYPE_CHECKING:  # capability modules are handed the facade; they do not import it
    from kafkatxn.kafka import Cluster

# A transaction is open until its markers are written: these states have a running duration.
OPEN_STATES = OPEN_TRANSACTION_STATES

FOUND = "found"
NOT_FOUND = "not_found"
UNKNOWN = "unknown"  # the coordinator could not be asked


@dataclass(frozen=True)
class TransactionRow:
    """One transactional id from ListTransactions: the columns of ``kafka-transactions.sh list``."""

    transactional_id: str
    coordinator_id: int
    producer_id: int
    state: str


@dataclass(frozen=True)
class TransactionDetailRow:
    """One transactional id from DescribeTransactions: the columns of ``kafka-transactions.sh describe``.

    ``status`` is ``found``, ``not_found`` (the coordinator does not know the id) or ``unknown``
    (the coordinator could not be asked; ``error`` says why).
    """

    transactional_id: str
    status: str
    coordinator_id: int | None
    state: str | None
    producer_id: int | None
    producer_epoch: int | None
    timeout_ms: int | None
    two_phase_commit: bool | None  # KIP-939 (timeout 2147483647 ms): no one times it out; None when not described
    start_time_ms: int | None  # start of the current (or, once completed, the last) transaction
    duration_ms: int | None  # how long the open transaction has run; None unless open
    partitions: tuple[str, ...]  # topic-partition the open transaction has written to
    error: str | None


@dataclass
class TransactionsResult:
    """Rows for a command, what could not be asked (exit 3), and where filters ran (for --debug)."""

    rows: list[TransactionRow] | list[TransactionDetailRow]
    missing: list[Missing] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def not_found(self) -> list[str]:
        return [r.transactional_id for r in self.rows if isinstance(r, TransactionDetailRow) and r.status == NOT_FOUND]


# -- pure functions -----------------------------------------------------------------------------


def normalize_states(states: Iterable[str]) -> list[str]:
    """Canonical spelling of each state (case-insensitive); unknown names are a usage error."""
    by_lower = {s.lower(): s for s in TRANSACTION_STATES}
    out = []
    for raw in states:
        state = by_lower.get(raw.strip().lower())
        if state is None:
            raise UsageError(f"unknown transaction state {raw!r}; use one of {', '.join(TRANSACTION_STATES)}")
        out.append(state)
    return list(dict.fromkeys(out))


def compile_pattern(pattern: str | None) -> re.Pattern[str] | None:
    if pattern is None:
        return None
    return compile_regex(pattern, "--pattern")


def states_to_request(states: Sequence[str], min_duration_ms: int | None) -> list[str]:
    """State filter for the brokers: with a duration filter only open states can match, so ask for those."""
    if min_duration_ms is None:
        return list(states)
    if not states:
        return list(OPEN_STATES)
    open_ones = [s for s in states if s in OPEN_STATES]
    if not open_ones:
        raise UsageError(
            f"--min-duration selects open transactions only ({', '.join(OPEN_STATES)}); "
            f"--state {' '.join(states)} cannot match"
        )
    return open_ones


def running_duration_ms(description: TransactionDescription, now_ms: int) -> int | None:
    """How long an open transaction has been running; None for closed ones or without a start time."""
    if description.state not in OPEN_STATES or description.start_time_ms < 0:
        return None
    return max(now_ms - description.start_time_ms, 0)


def select_listings(
    listings: Iterable[TransactionListing],
    support: ListTransactionsSupport,
    *,
    pattern: str | None = None,
    min_duration_ms: int | None = None,
    descriptions: dict[str, TransactionDescription] | None = None,
    now_ms: int = 0,
) -> list[TransactionListing]:
    """Apply the filters the brokers did not apply (``support`` says which they did)."""
    rx = compile_pattern(pattern) if pattern is not None and not support.pattern_on_broker else None
    descriptions = descriptions or {}
    out = []
    for listing in listings:
        if rx is not None and not rx.fullmatch(listing.transactional_id):
            continue
        if min_duration_ms is not None:
            if listing.state not in OPEN_STATES:
                continue
            if not support.duration_on_broker:
                description = descriptions.get(listing.transactional_id)
                running = running_duration_ms(description, now_ms) if description is not None else None
                # Strictly longer, as the brokers' filter.
                if running is None or running <= min_duration_ms:
                    continue
        out.append(listing)
    return out


def listing_rows(listings: Iterable[TransactionListing]) -> list[TransactionRow]:
    return [
        TransactionRow(t.transactional_id, t.coordinator_id, t.producer_id, t.state)
        for t in sorted(listings, key=lambda t: (t.transactional_id, t.coordinator_id))
    ]


def detail_row(description: TransactionDescription, now_ms: int) -> TransactionDetailRow:
    running = running_duration_ms(description, now_ms)
    partitions = tuple(f"{tp.topic}-{tp.partition}" for tp in sorted(description.partitions))
    return TransactionDetailRow(
        transactional_id=description.transactional_id,
        status=FOUND,
        coordinator_id=description.coordinator_id,
        state=description.state,
        producer_id=description.producer_id,
        producer_epoch=description.producer_epoch,
        timeout_ms=description.timeout_ms,
        two_phase_commit=description.two_phase_commit,
        start_time_ms=description.start_time_ms if description.start_time_ms >= 0 else None,
        duration_ms=running,
        partitions=partitions,
        error=None,
    )


def missing_row(transactional_id: str, status: str, error: str) -> TransactionDetailRow:
    return TransactionDetailRow(transactional_id, status, None, None, None, None, None, None, None, None, (), error)


def detail_rows(
    transactional_ids: Sequence[str],
    found: dict[str, TransactionDescription],
    not_found: dict[str, str],
    missing: Sequence[Missing],
    now_ms: int,
) -> list[TransactionDetailRow]:
    """One row per requested id, in the order asked: found, not found, or unknown (with the reason)."""
    rows = []
    for tid in dict.fromkeys(transactional_ids):
        if tid in found:
            rows.append(detail_row(found[tid], now_ms))
        elif tid in not_found:
            rows.append(missing_row(tid, NOT_FOUND, not_found[tid]))
        else:
            reason = next((str(m) for m in missing if m.subject == TransactionalId(tid)), None) or "its coordinator did not answer"
            rows.append(missing_row(tid, UNKNOWN, reason))
    return rows


# -- snapshot + rows ----------------------------------------------------------------------------


def describe_transactions(cluster: Cluster, transactional_ids: Sequence[str]) -> TransactionsResult:
    """DescribeTransactions for each id at its coordinator; unknown ids get a ``not_found`` row."""
    tids = list(dict.fromkeys(transactional_ids))
    if any(not t for t in tids):
        raise UsageError("empty transactional id")
    described = cluster.describe_transactions(tids)
    rows = detail_rows(tids, described.value.found, described.value.not_found, described.missing, _now_ms())
    return TransactionsResult(rows, list(described.missing))


@in_one_run
def list_transactions(
    cluster: Cluster,
    states: Iterable[str] = (),
    producer_ids: Iterable[int] = (),
    min_duration_ms: int | None = None,
    pattern: str | None = None,
    describe: bool = False,
) -> TransactionsResult:
    """ListTransactions on every broker, filtered; with ``describe``, DescribeTransactions details per id."""
    wanted_states = normalize_states(states)
    compile_pattern(pattern)  # a bad regex is a usage error before anything is sent
    request_states = states_to_request(wanted_states, min_duration_ms)
    listed, support = cluster.list_transactions(
        states=request_states, producer_ids=list(producer_ids), min_duration_ms=min_duration_ms, pattern=pattern
    )
    missing = list(listed.missing)
    notes = _filter_notes(support, pattern, min_duration_ms)
    listings = listed.value
    descriptions: dict[str, TransactionDescription] = {}
    gone: set[str] = set()
    need_descriptions = describe or (min_duration_ms is not None and not support.duration_on_broker)
    candidates: list = []
    if need_descriptions:
        # Only the ids that can still pass the other filters are worth a DescribeTransactions.
        candidates = select_listings(listings, support, pattern=pattern)
        if min_duration_ms is not None:
            candidates = [t for t in candidates if t.state in OPEN_STATES]
    # ListTransactions leaves out, silently, the ids this principal may not DESCRIBE: say so. The
    # probe that tells goes with the ids described.
    described, visibility = cluster.describe_with_visibility([t.transactional_id for t in candidates])
    if candidates:
        descriptions = described.value.found
        missing += described.missing
        gone = set(described.value.not_found)
        if gone:
            notes.append(f"gone between ListTransactions and DescribeTransactions: {', '.join(sorted(gone))}")
    missing += verdicts.hidden_ids(visibility.value, visibility.missing)
    now_ms = _now_ms()
    selected = select_listings(
        listings, support, pattern=pattern, min_duration_ms=min_duration_ms, descriptions=descriptions, now_ms=now_ms
    )
    if not describe:
        return TransactionsResult(listing_rows(selected), missing, notes)
    # Ids that expired since they were listed are simply gone; ids whose coordinator did not answer stay, as unknown.
    kept = [t.transactional_id for t in selected if t.transactional_id not in gone]
    rows = detail_rows(sorted(kept), descriptions, {}, missing, now_ms)
    return TransactionsResult(rows, missing, notes)


def _filter_notes(support: ListTransactionsSupport, pattern: str | None, min_duration_ms: int | None) -> list[str]:
    notes = []
    if min_duration_ms is not None:
        if support.duration_on_broker:
            notes.append("--min-duration filtered by the brokers (ListTransactions v1+)")
        else:
            notes.append(
                "--min-duration filtered on the client from DescribeTransactions start times "
                "(a broker lacks ListTransactions v1)"
            )
    if pattern is not None:
        if support.pattern_on_broker:
            notes.append("--pattern filtered by the brokers (ListTransactions v2+)")
        else:
            notes.append("--pattern filtered on the client (a broker lacks ListTransactions v2)")
    return notes


def _now_ms() -> int:
    return int(time.time() * 1000)
