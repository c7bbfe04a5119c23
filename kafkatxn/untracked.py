"""What to tell a person about a transaction no coordinator tracks that is not hanging yet.

Such a transaction (:attr:`kafkatxn.verdicts.Verdict.UNTRACKED`) holds its partition's LSO like a
hanging one, but its producer may still end it until its deadline
(:func:`kafkatxn.verdicts.hanging_deadline_ms`): ``abort`` writes its marker from then on, or now when
the operator says so on purpose (``--max-transaction-timeout 0``). A fence cannot end it: the
coordinator it would ask does not track the partition. ``hanging``, ``check``, ``diagnose`` and
``abort`` word it here, so they say the same thing.
"""

from __future__ import annotations

import shlex
import time

from kafkatxn.model import TopicPartition

# What aborting it before its deadline risks, said wherever that is offered.
ABORT_NOW_RISK = (
    "if its producer still adds this partition to its transaction and commits, the aborted records are lost "
    "to read_committed consumers; after its deadline no producer can end it"
)


def clock(ms: int) -> str:
    """Local wall-clock time, as the person's terminal shows it."""
    return time.strftime("%H:%M:%S", time.localtime(ms / 1000))


def abort_command(tp: TopicPartition, start_offset: int, now: bool = False) -> str:
    """The abort that releases it: at its deadline, or ``now`` on purpose."""
    command = f"kafkatxn abort --topic {shlex.quote(tp.topic)} --partition {tp.partition} --start-offset {start_offset}"
    return f"{command} --max-transaction-timeout 0" if now else command


def when(hanging_at_ms: int | None) -> str:
    """``hanging from 21:55:03 unless it ends``."""
    return f"hanging from {clock(hanging_at_ms)} unless it ends" if hanging_at_ms is not None else "hanging soon unless it ends"


def state(hanging_at_ms: int | None) -> str:
    """``not tracked by its coordinator; hanging from 21:55:03 unless it ends``."""
    return f"not tracked by its coordinator; {when(hanging_at_ms)}"


def note(tp: TopicPartition, producer_id: int, start_offset: int, transactional_id: str | None, hanging_at_ms: int | None) -> str:
    """One line for stderr: what it is, when it hangs, and the two ways to abort it."""
    tid = f" ({transactional_id})" if transactional_id else ""
    return (
        f"untracked: producer {producer_id}{tid} on {tp} from offset {start_offset}: {state(hanging_at_ms)}; "
        f"abort it then: {abort_command(tp, start_offset)}; or now, on purpose: {abort_command(tp, start_offset, now=True)} "
        f"(risk: {ABORT_NOW_RISK})"
    )
