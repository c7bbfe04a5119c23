"""The rows ``kafkatxn diagnose`` shows and the words it decides in (what :mod:`kafkatxn.diagnose` makes)."""

from __future__ import annotations

import enum

from kafkatxn.group_positions import GroupPosition
from kafkatxn.gaps import Gap
from kafkatxn.model import FrozenRecord, record
from kafkatxn.verdicts_groups import GroupVerdict


class TxnVerdict(str, enum.Enum):
    """The pinning transaction, as :mod:`kafkatxn.hanging` decides it."""

    hanging = "hanging"  # its coordinator does not track it: nothing will ever end it
    long_running = "long_running"  # tracked, but past its own timeout or idle past transaction.max.timeout.ms
    tracked = "tracked"  # tracked and within its timeout: the coordinator ends it by then
    undetermined = "undetermined"  # the coordinators could not say
    recent = "recent"  # its coordinator could not say, but it wrote within transaction.max.timeout.ms
    untracked = "untracked"  # not tracked by its coordinator, not past its deadline: hanging then unless it ends
    lost_commit = "lost_commit"  # its coordinator committed it; the partition lost the COMMIT marker (kafkatxn.lost_commit)


class Action(str, enum.Enum):
    wait = "wait"
    fence = "fence"
    abort = "abort"
    restore_commit = "restore_commit"
    undecided = "undecided"


RISK = {
    Action.wait: "nothing changes: the group stays blocked until then, unless the producer commits or aborts first",
    Action.fence: "aborts the open transaction and fences its producer: its next send fails (ProducerFenced), "
    "the application must recreate it; the aborted records are lost to read_committed consumers",
    Action.abort: "writes an ABORT marker: read_committed consumers skip the transaction's records for good "
    "(no coordinator would ever complete it)",
    Action.restore_commit: "writes the COMMIT marker its coordinator's log shows was lost: read_committed consumers "
    "read the transaction's records (an ABORT marker would make committed records disappear)",
    Action.undecided: "acting blind could abort a transaction its coordinator is about to commit; "
    "bring the coordinator back first",
}


@record
class GroupSummary(FrozenRecord):
    """One group: where it stands overall."""

    group: str
    status: str  # caught_up, waiting, unknown, lagging or blocked (the worst of its partitions)
    partitions: int
    blocked_partitions: int
    lagging_partitions: int
    lag_messages: int  # what a read_committed consumer still has to read (markers and aborted records left out where probed)
    lag_to_hw_messages: int  # what high-watermark lag tools report
    phantom_messages: int  # markers and aborted records counted by those tools, found by probing
    pinned_by: tuple[str, ...]  # transactional ids (or "producer N") holding it

    def __init__(self, group: str, status: str, partitions: int, blocked_partitions: int, lagging_partitions: int,
                 lag_messages: int, lag_to_hw_messages: int, phantom_messages: int, pinned_by: tuple[str, ...]) -> None:
        self.__dict__.update(group=group, status=status, partitions=partitions, blocked_partitions=blocked_partitions,
                             lagging_partitions=lagging_partitions, lag_messages=lag_messages,
                             lag_to_hw_messages=lag_to_hw_messages, phantom_messages=phantom_messages,
                             pinned_by=pinned_by)


@record
class PartitionDiagnosis(GroupPosition):
    """One group on one partition."""

    lag_messages: int
    lag_to_lso_messages: int
    lag_to_hw_messages: int
    verdict: GroupVerdict
    gap: Gap
    explanation: str
    producer_id: int | None  # the transaction blocking it
    transactional_id: str | None

    def __init__(self, group: str, topic: str, partition: int, committed_offset: int | None, last_stable_offset: int,
                 high_watermark: int, lag_messages: int, lag_to_lso_messages: int, lag_to_hw_messages: int,
                 verdict: GroupVerdict, gap: Gap, explanation: str, producer_id: int | None,
                 transactional_id: str | None) -> None:
        self.__dict__.update(group=group, topic=topic, partition=partition, committed_offset=committed_offset,
                             last_stable_offset=last_stable_offset, high_watermark=high_watermark,
                             lag_messages=lag_messages, lag_to_lso_messages=lag_to_lso_messages,
                             lag_to_hw_messages=lag_to_hw_messages, verdict=verdict, gap=gap, explanation=explanation,
                             producer_id=producer_id, transactional_id=transactional_id)


@record
class PinningTransaction(FrozenRecord):
    """An open transaction that holds some group, what its coordinator says, and what to do."""

    producer_id: int
    producer_epoch: int
    transactional_id: str | None
    coordinator_id: int | None
    coordinator_state: str | None
    verdict: TxnVerdict
    reason: str
    age_ms: int | None  # verdicts_age.transaction_age: its coordinator's start, else its first record (see age_source)
    age_source: str | None  # coordinator, first_record or last_write (a lower bound)
    overdue: bool  # past its own timeout (verdicts_age.is_overdue)
    last_write_age_ms: int | None  # since its producer last wrote to a pinned partition
    transaction_timeout_ms: int | None
    aborts_at_ms: int | None  # when the coordinator aborts it (start + timeout), if it will
    partitions: tuple[str, ...]  # blast radius: "topic-partition@start_offset" it pins
    groups: tuple[str, ...]  # blast radius: groups it blocks
    lso_lag_messages: int  # summed over its partitions: HW - LSO
    action: Action
    command: str  # the next step, to copy
    release_command: str | None  # releases the groups now (with the risk below), when the next step is to wait
    until_ms: int | None  # with action wait: when to expect the release
    risk: str
    history: str | None = None  # its id's history in a line (kafkatxn/facts_history.py), or "undetermined: why"
    history_evidence: dict | None = None  # the counts behind it (timeline.HistorySummary)
    release_risk: str | None = None  # what the release command risks (release_command)

    def __init__(self, producer_id: int, producer_epoch: int, transactional_id: str | None, coordinator_id: int | None,
                 coordinator_state: str | None, verdict: TxnVerdict, reason: str, age_ms: int | None,
                 age_source: str | None, overdue: bool, last_write_age_ms: int | None,
                 transaction_timeout_ms: int | None, aborts_at_ms: int | None, partitions: tuple[str, ...],
                 groups: tuple[str, ...], lso_lag_messages: int, action: Action, command: str,
                 release_command: str | None, until_ms: int | None, risk: str, history: str | None = None,
                 history_evidence: dict | None = None, release_risk: str | None = None) -> None:
        self.__dict__.update(producer_id=producer_id, producer_epoch=producer_epoch, transactional_id=transactional_id,
                             coordinator_id=coordinator_id, coordinator_state=coordinator_state, verdict=verdict,
                             reason=reason, age_ms=age_ms, age_source=age_source, overdue=overdue,
                             last_write_age_ms=last_write_age_ms, transaction_timeout_ms=transaction_timeout_ms,
                             aborts_at_ms=aborts_at_ms, partitions=partitions, groups=groups,
                             lso_lag_messages=lso_lag_messages, action=action, command=command,
                             release_command=release_command, until_ms=until_ms, risk=risk, history=history,
                             history_evidence=history_evidence, release_risk=release_risk)
