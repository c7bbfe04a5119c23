"""Where a consumer group stands on a partition (caught up, lagging, blocked, waiting, unknown) and
how bad a block is: pure, over what was gathered and the open-transaction verdicts of
:mod:`kafkatxn.verdicts`. A verdict module: it imports only :mod:`kafkatxn.model`, the other verdict
modules and the standard library, as tests/unit/test_layering.py checks.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from kafkatxn.verdicts import Classification, OpenTransaction, PinVerdict, Verdict, coordinator_partition
from kafkatxn.verdicts_age import is_overdue, is_past_timeout


class GroupVerdict(str, enum.Enum):
    caught_up = "caught_up"
    lagging = "lagging"
    blocked = "blocked"
    unknown = "unknown"  # no committed offset, and where it starts depends on its auto.offset.reset
    # Held as blocked is, by a transaction in flight (:func:`held_verdict`): it reads on at its commit.
    waiting = "waiting"


# The verdicts as module names: on Python 3.11 an enum member read through its class (``GroupVerdict.lagging``)
# takes ~160 ns, a module name ~15 ns, and a scrape at 5,000 groups x 20 partitions decides 25,000 lagging
# places with group_verdict and group_positions.readable_lag (a few reads each: ~25 ms of CPU a scrape).
CAUGHT_UP, LAGGING, BLOCKED = GroupVerdict.caught_up, GroupVerdict.lagging, GroupVerdict.blocked
UNKNOWN, WAITING = GroupVerdict.unknown, GroupVerdict.waiting


class Offsets(NamedTuple):
    """A partition's offsets from one leader. A tuple: a pass over 30,000 partitions makes one each."""

    high_watermark: int
    last_stable_offset: int

    @property
    def lag(self) -> int:
        # The LSO is read before the HW, so LSO <= HW; clamp anyway in case a leader moved between.
        return max(0, self.high_watermark - self.last_stable_offset)


def group_verdict(committed: int, lso: int, hw: int, readable_before_lso: bool | None) -> GroupVerdict:
    """Where a group stands on a partition, for a read_committed consumer (c = committed, l = LSO, h = HW; l <= h).

    1. ``c >= h``: **caught_up**, nothing left to read (c > h only after records were deleted).
    2. ``c == l < h``: **blocked**. The next offset is the first record of an open transaction:
       the consumer cannot move until that transaction ends, however long it takes.
    3. ``l < c < h``: **lagging**. The group has read past the LSO, so it reads uncommitted
       records (read_uncommitted); what is left is ``h - c``.
    4. ``c < l``: offsets between the commit and the LSO. They may hold nothing a read_committed
       consumer returns: commit/abort markers (the "lag of 1" after every transaction when a
       consumer commits the offset after its last record) and aborted records. The probe
       (``readable_before_lso``) reads the gap with a read_committed consumer:

       - False (only markers and aborted records): the consumer stands, in effect, at the LSO,
         so as in 1/2: **caught_up** when ``l == h``, **blocked** when ``l < h``.
       - True: **lagging**, there are records to read.
       - None (gap not probed: larger than the probe limit, or the probe failed): **lagging**,
         the gap counts as lag.

    The committed offset does not say which isolation level the group reads with. A
    read_uncommitted group at ``c == l < h`` is reported blocked although it would read on.
    """
    if committed >= hw:
        return CAUGHT_UP
    if committed == lso:
        return BLOCKED
    if committed > lso:
        return LAGGING
    if readable_before_lso is False:
        return CAUGHT_UP if lso == hw else BLOCKED
    return LAGGING


class Severity(str, enum.Enum):
    ok = "ok"
    warning = "warning"
    critical = "critical"


def is_too_old(age_ms: int | None, critical_age_ms: int | None) -> bool:
    return critical_age_ms is not None and age_ms is not None and age_ms >= critical_age_ms


def blocked_severity(hanging: bool | None, overdue: bool, too_old: bool, old: bool = True, lost_commit: bool | None = False,
                     waiting: bool = False) -> Severity:
    """How bad a group blocked behind an open transaction is: **critical** only when that
    transaction is hanging, lost its COMMIT marker (nothing releases it but ``restore-commit``),
    is overdue (past its own timeout and its coordinator's chance to abort it, :func:`is_overdue`),
    or is older than the critical age (``too_old``); **warning** when ``waiting`` on something that
    is not in flight any more (no coordinator tracks it yet, :attr:`BlockVerdict.untracked`, or it is
    past its own timeout, :attr:`BlockVerdict.past_timeout`), or when ``old`` (past a warning age,
    where the command has one); otherwise a transaction in flight within its timeout is **ok**,
    whatever moment the sample caught: a consumer keeping up with a producer that commits every
    100 ms sits at the LSO in many samples. An undetermined verdict (None) is no reason for
    critical: the caller says it cannot be known."""
    if hanging or lost_commit or overdue or too_old:
        return Severity.critical
    return Severity.warning if old or waiting else Severity.ok


class BlockVerdict(str, enum.Enum):
    """What the transaction blocking a reader is, in the one word every row, page and alert names."""

    hanging = "hanging"  # no coordinator will ever end it (abort releases it)
    lost_commit = "lost_commit"  # committed by its coordinator, the COMMIT marker lost (restore-commit releases it)
    overdue = "overdue"  # tracked, past its own timeout and its coordinator's abort interval (fence releases it)
    past_timeout = "past_timeout"  # tracked, past its own timeout: its coordinator aborts it at its next cleanup
    untracked = "untracked"  # no coordinator tracks it: hanging from its deadline unless it ends first
    in_flight = "in_flight"  # tracked (or within the maximum timeout) and within its timeout: its producer ends it
    undetermined = "undetermined"  # the cluster could not say


# The blocks that are no page yet but never "OK": the reader waits on something no producer is ending now.
WAITING_BLOCKS = frozenset({BlockVerdict.untracked, BlockVerdict.past_timeout})


def block_verdict(pin: PinVerdict | None, txn: OpenTransaction | None, now_ms: int,
                  abort_cleanup_interval_ms: int | None = None) -> BlockVerdict | None:
    """The blocking transaction's verdict from its :func:`pin_verdict` and its own timeout (None: no
    blocking transaction)."""
    if pin is None:
        return None
    if pin is PinVerdict.UNDETERMINED:
        return BlockVerdict.undetermined
    if pin is PinVerdict.HANGING:
        return BlockVerdict.hanging
    if pin is PinVerdict.LOST_COMMIT:
        return BlockVerdict.lost_commit
    if pin is PinVerdict.UNTRACKED:
        return BlockVerdict.untracked
    if is_overdue(txn, now_ms, abort_cleanup_interval_ms):
        return BlockVerdict.overdue
    if is_past_timeout(txn, now_ms):
        return BlockVerdict.past_timeout
    return BlockVerdict.in_flight


def block_severity(verdict: BlockVerdict | None, too_old: bool, old: bool = True) -> Severity:
    """:func:`blocked_severity` of a :class:`BlockVerdict`."""
    return blocked_severity(
        None if verdict is BlockVerdict.undetermined else verdict is BlockVerdict.hanging,
        verdict is BlockVerdict.overdue, too_old, old,
        lost_commit=None if verdict is BlockVerdict.undetermined else verdict is BlockVerdict.lost_commit,
        waiting=verdict in WAITING_BLOCKS,
    )


def readable_before_lso(first_readable: int | None, lso: int) -> bool:
    """Whether the probe found a record below the snapshot's LSO (the LSO may have moved since)."""
    return first_readable is not None and first_readable < lso


def uncommitted_verdict(log_start: int | None, lso: int, hw: int) -> GroupVerdict:
    """Where a read_committed group stands on a partition it is assigned but has no committed offset on.

    The broker does not know the consumer's ``auto.offset.reset``. Both starts are known, though:
    ``earliest`` is the log start offset, ``latest`` is what ListOffsets answers a read_committed
    consumer, the LSO. When the log starts at (or past) the LSO, both starts are at or behind it:

    - ``l < h``: **blocked** whatever the setting: the first record is the open transaction's.
    - ``l == h``: **caught_up**: there is nothing to read from either start.

    Otherwise (the log start below the LSO, or not known) **unknown**: ``latest`` waits at the LSO,
    ``earliest`` has records to read first.
    """
    if log_start is None or log_start < lso:
        return UNKNOWN
    return CAUGHT_UP if lso >= hw else BLOCKED


CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
# A read_committed group's lag below this many messages on a partition changes no exit code: the
# same figure as check's --lso-lag-warn. A consumer committing every second (auto.commit.interval.ms
# 1 s) of a partition taking under 1,000 records a second always trails by less.
DEFAULT_LAG_THRESHOLD = 1000


def offsets_partition(group: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition holding a group's commits, whose leader is its coordinator:
    ``Utils.abs(groupId.hashCode) % partitions`` (GroupMetadataManager.partitionFor), the rule
    :func:`coordinator_partition` applies to transactional ids."""
    return coordinator_partition(group, partitions)


def stable_verdict(verdict: GroupVerdict, unstable: bool) -> GroupVerdict:
    """A group blocked through its offsets partition: where its stable offset fetch (``require_stable``,
    as a read_committed consumer asks, KIP-447) answers UNSTABLE_OFFSET_COMMIT on a partition, a
    transactional offset commit (``sendOffsetsToTransaction``) is open on the group's
    ``__consumer_offsets`` partition: its consumers cannot learn where to start, whatever the
    partition's offsets say, until that transaction ends. **blocked** there; elsewhere ``verdict``."""
    return BLOCKED if unstable else verdict


def in_flight(classification: Classification | None, now_ms: int) -> bool:
    """A transaction in flight: its coordinator tracks it (so it completes it, or aborts it at its
    timeout), not as a two-phase-commit one (no one times those out), and it is not past its own timeout."""
    return (
        classification is not None
        and classification.verdict is Verdict.LONG_RUNNING
        and not classification.two_phase_commit
        and not is_past_timeout(classification.transaction, now_ms)
    )


def held_verdict(classification: Classification | None, now_ms: int) -> GroupVerdict:
    """A group held by an open transaction (blocked at its LSO, or through its offsets partition):
    **waiting** while that transaction is :func:`in_flight` (a healthy pipeline sits there between
    commits), otherwise **blocked** (hanging, lost commit, overdue, undetermined, not tracked, or
    the transaction was not found)."""
    return WAITING if in_flight(classification, now_ms) else BLOCKED


def lag_is_finding(verdict: GroupVerdict, lag_messages: int, threshold: int = DEFAULT_LAG_THRESHOLD) -> bool:
    """Whether a lagging group's read_committed lag counts as a finding (a warning): at least
    ``threshold`` messages. Less is what a consumer committing every second leaves behind."""
    return verdict is LAGGING and lag_messages >= threshold


def may_have_ended(pin: OpenTransaction | None, classification: Classification | None) -> bool:
    """Whether what was read of a lagging partition may be a transaction that ended between two
    requests, to be asked again once: nothing open was described (it ended after ListOffsets), or
    the coordinator describes the pinning producer with a transaction that no longer holds the
    partition (it ended after DescribeProducers). A hanging transaction looks like the second: the
    offsets asked again tell them apart (its LSO does not move)."""
    if pin is None:
        return True
    c = classification
    return (c is not None and c.verdict is not Verdict.LONG_RUNNING and c.description is not None
            and c.description.producer_id == pin.producer_id)
