"""Did the coordinator commit the open transaction a partition holds? One definition, pure, over the
producer state of the partition and the records its transactional id left in ``__transaction_state``.

A partition can hold an open transaction whose COMMIT marker was lost while its coordinator recorded
the commit: an unclean leader election elects a replica that had the records but not the marker, or
the compaction/replication race reported on Kafka 3.9-4.2. The coordinator then describes the id as
``CompleteCommit`` with no partitions, and the hanging rule alone calls the partition's transaction
hanging ("coordinator does not track this partition"): an ABORT marker would then make committed
records disappear for every read_committed consumer. So before a transaction with a known
transactional id is called hanging, :func:`settle` reads what the id's log partition says of it:

- **committed** (a ``PrepareCommit`` of this producer id, of the transaction's epoch, listing this
  partition): :attr:`~kafkatxn.verdicts.Verdict.LOST_COMMIT`: abort refuses, ``kafkatxn
  restore-commit`` writes the COMMIT marker;
- **aborted** (a ``PrepareAbort``), or **never included** (the log reaches back before the
  transaction began and no transaction of its epoch listed this partition): hanging, as the
  coordinators' answers alone say;
- anything else (the log no longer shows how it ended: compacted; both a commit and an abort since
  its first record; records newer than the commit; records that could not be decoded; the log could
  not be read): **undetermined**, because... A marker of either kind is written only when the log
  positively says which one is right.

Which coordinator transactions can hold the open one's records: those of the same producer id whose
data epoch is the partition's (the ``Ongoing`` record's epoch; transaction version 2 bumps the epoch
at ``PrepareCommit``/``PrepareAbort``, and so does a coordinator's timeout abort) and which ended no
earlier than the transaction's first record (its timestamp, when it could be read; clocks of
producer and coordinator are taken to agree within :data:`CLOCK_ALLOWANCE_MS`). What the log holds
of an id is a contiguous tail of its history (the cleaner keeps only the latest record of each key in
the segments it compacted); the tail covers the open transaction when it reaches back to the start
of the producer's epoch (``InitProducerId``'s ``Empty`` record, or an earlier epoch) or to before the
transaction's first record, or when the transaction that committed (or aborted) started before it.
"""

from __future__ import annotations

import dataclasses
import enum
import shlex
from typing import Any, Mapping, Sequence

from kafkatxn.model import (
    TRANSACTION_STATE_TOPIC, FrozenRecord, Missing, Part, TopicPartition, TransactionalId, TransactionLogHistory, record,
)
from kafkatxn.verdicts import Classification, OpenTransaction, Verdict

# How far the producer's clock (record timestamps) and the coordinator's may disagree.
CLOCK_ALLOWANCE_MS = 1_000
PREPARE_STATES = frozenset({"PrepareCommit", "PrepareAbort", "PrepareEpochFence"})
REASON_LOST_COMMIT = "lost COMMIT marker"


class Ending(str, enum.Enum):
    COMMITTED = "committed"
    ABORTED = "aborted"
    NEVER_INCLUDED = "never_included"
    UNKNOWN = "unknown"  # the log does not say: see the reason


@record
class LogEvidence(FrozenRecord):
    """How the coordinator's log says the open transaction ended, and the records that say it."""

    ending: Ending
    reason: str
    log_offsets: tuple[int, ...] = ()

    def __init__(self, ending: Ending, reason: str, log_offsets: tuple[int, ...] = ()) -> None:
        self.__dict__.update(ending=ending, reason=reason, log_offsets=log_offsets)


def _data_epoch(record: Any, opened: Any | None) -> int:
    """The epoch of the records a coordinator record's transaction wrote to its partitions."""
    if record.state == "Ongoing":
        return record.producer_epoch
    if record.state in PREPARE_STATES:
        if opened is not None:
            return opened.producer_epoch
        # The Ongoing record is gone: version 2 bumped the epoch when it prepared.
        return record.producer_epoch - 1 if record.client_transaction_version >= 2 else record.producer_epoch
    return record.producer_epoch


def _clock(ms: int) -> str:
    return f"{ms} ms" if ms >= 0 else "an unknown time"


def ending(txn: OpenTransaction, history: TransactionLogHistory) -> LogEvidence:
    """How the coordinator ended ``txn`` (this producer's open transaction on this partition), by
    ``history`` (the records of its transactional id, in log order)."""
    where = f"{TRANSACTION_STATE_TOPIC}-{history.log_partition}"
    if history.undecoded:
        return LogEvidence(Ending.UNKNOWN, f"{history.undecoded} records of {where} could not be decoded (a newer "
                                           f"broker's format?); any of them may be this transaction's end")
    pid, epoch, part = txn.producer_id, txn.producer_epoch, str(txn.tp)
    first = txn.first_record_timestamp_ms if txn.first_record_timestamp_ms is not None and txn.first_record_timestamp_ms >= 0 else None
    endings: list[Any] = []
    opened: Any | None = None
    began = False  # the tail reaches back to the start of this epoch, or before the transaction's first record
    for r in history.records:
        if first is not None and 0 <= r.last_update_timestamp_ms < first - CLOCK_ALLOWANCE_MS:
            began = True
        if r.tombstone or r.producer_id != pid:
            opened = None
            continue
        data = _data_epoch(r, opened)
        began = began or data < epoch or (r.state == "Empty" and r.producer_epoch == epoch)
        if r.state in PREPARE_STATES and data == epoch and part in r.partitions:
            endings.append(r)
        opened = r if r.state == "Ongoing" else None
    # Transactions that ended before the open transaction's first record hold none of its records.
    relevant = [r for r in endings if first is None or r.last_update_timestamp_ms < 0
                or r.last_update_timestamp_ms >= first - CLOCK_ALLOWANCE_MS]
    offsets = tuple(r.log_offset for r in relevant)
    who = f"producer {pid} epoch {epoch}"
    if not relevant:
        if began:
            return LogEvidence(Ending.NEVER_INCLUDED, f"its coordinator's log ({where}) shows no transaction of {who} "
                                                      f"with {part} in it since its first record: never included")
        return LogEvidence(Ending.UNKNOWN, f"its coordinator's log ({where}) no longer shows how {who}'s transaction on {part} "
                                           "ended (compacted away)")
    committed = [r for r in relevant if r.state == "PrepareCommit"]
    if committed and len(committed) < len(relevant):
        return LogEvidence(Ending.UNKNOWN, f"its coordinator's log ({where}) shows both commits and aborts of {who} with {part} "
                                           "in them since its first record: no one marker is right", offsets)
    started = relevant[0].start_timestamp_ms
    if not began and (first is None or started < 0 or started > first + CLOCK_ALLOWANCE_MS):
        return LogEvidence(Ending.UNKNOWN, f"its coordinator's log ({where}) no longer reaches back to where {who}'s transaction "
                                           f"on {part} began (compacted away): an earlier end may be missing", offsets)
    last = relevant[-1]
    written_after = last.last_update_timestamp_ms >= 0 and txn.last_timestamp_ms > last.last_update_timestamp_ms + CLOCK_ALLOWANCE_MS
    if committed and written_after:
        return LogEvidence(Ending.UNKNOWN, f"{part} has records of {who} written after its coordinator committed "
                                          f"(at {_clock(last.last_update_timestamp_ms)}): not all of them were committed", offsets)
    if committed:
        return LogEvidence(Ending.COMMITTED, f"its coordinator committed it (PrepareCommit at {where} offset {last.log_offset}) "
                                             f"but {part} never got the COMMIT marker; `kafkatxn restore-commit` writes it", offsets)
    return LogEvidence(Ending.ABORTED, f"its coordinator aborted it (PrepareAbort at {where} offset {last.log_offset})", offsets)


def needs_log(c: Classification) -> bool:
    """Whether ``c`` is decided by its coordinator's log too: a hanging verdict for a known id (an
    id the coordinator committed is described with no partitions, as a hanging one is)."""
    return c.verdict is Verdict.HANGING and c.transactional_id is not None


def settle(c: Classification, history: TransactionLogHistory | None, unread: Sequence[Missing] = (),
           dated: OpenTransaction | None = None) -> Classification:
    """``c`` with what the coordinator's log says (:func:`ending`); ``history`` None when the log
    could not be read (``unread`` says why). ``dated``: the transaction with its first record's
    timestamp. Verdicts other than hanging for a known id are returned as they are."""
    if not needs_log(c):
        return c
    if history is None:
        why = "; ".join(m.reason for m in unread) or "no answer"
        gaps = tuple(unread) or (Missing(TopicPartition(TRANSACTION_STATE_TOPIC, -1), why),)
        return dataclasses.replace(c, verdict=Verdict.UNDETERMINED, missing=gaps, reason=(
            f"{c.reason}, but its coordinator's log could not be read ({why}): whether it committed "
            "(a lost COMMIT marker) is not known"))
    txn = dated if dated is not None else c.open_txn
    evidence = ending(txn, history)
    if evidence.ending is Ending.COMMITTED:
        return dataclasses.replace(c, verdict=Verdict.LOST_COMMIT, reason=f"{REASON_LOST_COMMIT}: {evidence.reason}")
    if evidence.ending is Ending.UNKNOWN:
        log_tp = TopicPartition(TRANSACTION_STATE_TOPIC, history.log_partition)
        return dataclasses.replace(c, verdict=Verdict.UNDETERMINED, reason=f"{c.reason}, but {evidence.reason}",
                                   missing=(Missing(log_tp, evidence.reason),))
    return c  # the log shows an abort, or never this partition: hanging, as the coordinator's view said



def restore_note(tp: TopicPartition, producer_id: int, start_offset: int) -> str:
    """What to tell the person about a lost COMMIT marker: restore it, never abort it (``hanging``,
    ``lso``)."""
    return (f"lost COMMIT marker: producer {producer_id} on {tp} from offset {start_offset}: do not abort it; restore it: "
            f"kafkatxn restore-commit --topic {shlex.quote(tp.topic)} --partition {tp.partition} --start-offset {start_offset}")


def settle_all(
    classifications: Sequence[Classification], histories: Mapping[str, TransactionLogHistory], unread: Sequence[Missing] = (),
    dated: Mapping[tuple[TopicPartition, int], OpenTransaction] | None = None,
) -> list[Classification]:
    """:func:`settle` for each of ``classifications``: ``histories`` by transactional id, ``unread``
    the ids (or the log) that could not be read, ``dated`` the transactions with their first records'
    timestamps by (partition, producer id)."""
    whole_log = Part(TRANSACTION_STATE_TOPIC)
    out = []
    for c in classifications:
        if not needs_log(c):
            out.append(c)
            continue
        why = [m for m in unread if m.subject in (TransactionalId(c.transactional_id), whole_log)]
        out.append(settle(c, histories.get(c.transactional_id), why, (dated or {}).get((c.open_txn.tp, c.open_txn.producer_id))))
    return out
