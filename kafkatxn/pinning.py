"""The transaction pinning a partition's LSO and what the verdicts say of it (:func:`pin_facts`), at a
snapshot's time: the facts of ``lso``'s rows, and of every group row held behind it
(:mod:`kafkatxn.group_positions`, which ``lso`` without ``--groups`` does not import).
Pure: no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkatxn.model import FrozenRecord, record
from kafkatxn.verdicts import OpenTransaction, pin_flags
from kafkatxn.verdicts_age import is_overdue, last_write_age_ms, transaction_age
from kafkatxn.verdicts_groups import BlockVerdict, block_verdict

if TYPE_CHECKING:
    from kafkatxn.facts_lso import LsoSnapshot
    from kafkatxn.model import TopicPartition


@record
class PinFacts(FrozenRecord):
    """What is known of the transaction pinning a partition's LSO (all None without a pin)."""

    pin: OpenTransaction | None
    age_ms: int | None
    age_source: str | None
    hanging: bool | None  # by hanging's whole rule and its coordinator's log; None when undetermined
    lost_commit: bool | None  # it lost its COMMIT marker (restore-commit releases it); None when undetermined
    overdue: bool | None  # past its own timeout and its coordinator's chance to abort it (verdicts_age.is_overdue)
    last_write_age_ms: int | None
    verdict: BlockVerdict | None = None  # what it is, in the one word every page names (verdicts.block_verdict)

    def __init__(self, pin: OpenTransaction | None, age_ms: int | None, age_source: str | None, hanging: bool | None,
                 lost_commit: bool | None, overdue: bool | None, last_write_age_ms: int | None,
                 verdict: BlockVerdict | None = None) -> None:
        self.__dict__.update(pin=pin, age_ms=age_ms, age_source=age_source, hanging=hanging, lost_commit=lost_commit,
                             overdue=overdue, last_write_age_ms=last_write_age_ms, verdict=verdict)


NO_PIN = PinFacts(None, None, None, None, None, None, None)


def pin_facts(snapshot: LsoSnapshot, tp: TopicPartition) -> PinFacts:
    """The transaction pinning ``tp``'s LSO and what the verdicts say of it, at the snapshot's time."""
    pin = snapshot.pin(tp)
    if pin is None:
        return NO_PIN
    now = snapshot.taken_at_ms
    age = transaction_age(pin, now)
    pinned = snapshot.pin_verdict(pin)
    hanging, lost_commit = pin_flags(pinned)
    cleanup = snapshot.abort_cleanup_interval_ms
    return PinFacts(pin, age.ms if age else None, age.source if age else None, hanging, lost_commit,
                    is_overdue(pin, now, cleanup), last_write_age_ms(pin, now), block_verdict(pinned, pin, now, cleanup))
