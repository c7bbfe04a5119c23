"""The events of ``transactions history`` (kafkatxn/timeline.py), pure: coordinator records written by
tests/support/coordinator.py with Kafka's epoch rules, and hand-made ones for what it does not write."""

from __future__ import annotations

from kafkatxn.txnlog_records import KIND_UNKNOWN_VERSION, TxnLogEntry, TxnLogRecord, UndecodedRecord
from kafkatxn.timeline import (
    ABORTED_BY_CLIENT, COMMITTED, EPOCH_EXHAUSTED, EXPIRED, FENCED, HOUR_MS, INITIALISED, PARTITIONS_ADDED, TIMED_OUT,
    UNKNOWN_RECORD, Timeline, summarize, timeline,
)
from tests.support.coordinator import MIN, S, Coordinator, taking_turns

T0 = 1_700_000_000_000


def events(rows) -> list[tuple[str, tuple[str, ...]]]:
    return [(r.state, r.events) for r in rows]


def test_a_client_on_transaction_version_0_commits_aborts_and_is_fenced_and_timed_out():
    c = Coordinator(tv=0)
    c.init("a", T0)
    c.add("a", T0 + 10, "t-0")
    c.add("a", T0 + 20, "t-1")
    c.commit("a", T0 + 30)
    c.add("a", T0 + 100)
    c.abort("a", T0 + 110)
    c.add("a", T0 + 200)
    c.init("a", T0 + 300)  # another instance: fences the open transaction
    c.add("a", T0 + 400)
    c.time_out("a", T0 + 400 + MIN)
    rows = timeline(c.records)
    assert events(rows) == [
        ("Empty", (INITIALISED,)),
        ("Ongoing", (PARTITIONS_ADDED,)), ("Ongoing", (PARTITIONS_ADDED,)),
        ("PrepareCommit", (COMMITTED,)), ("CompleteCommit", ()),
        ("Ongoing", (PARTITIONS_ADDED,)), ("PrepareAbort", (ABORTED_BY_CLIENT,)), ("CompleteAbort", ()),
        ("Ongoing", (PARTITIONS_ADDED,)), ("PrepareAbort", (FENCED,)), ("CompleteAbort", ()), ("Empty", (INITIALISED,)),
        ("Ongoing", (PARTITIONS_ADDED,)), ("PrepareAbort", (TIMED_OUT,)), ("CompleteAbort", ()),
    ]
    assert rows[2].partitions_added == ("t-1",) and rows[2].partitions == ("t-0", "t-1")
    assert [r.producer_epoch for r in rows if r.state == "Empty"] == [0, 2]  # the fence bumped once, the init again


def test_a_transaction_version_2_client_bumps_its_epoch_at_every_end_without_being_fenced():
    c = Coordinator(tv=2)
    c.init("b", T0)
    for i in range(3):
        c.txn("b", T0 + (i + 1) * S)
    c.add("b", T0 + 10 * S)
    c.abort("b", T0 + 10 * S + 50)
    c.txn("b", T0 + 11 * S)  # its next transaction: the abort was the client's
    rows = timeline(c.records)
    assert [r.producer_epoch for r in rows if r.state == "CompleteCommit"] == [1, 2, 3, 5]
    assert [e for r in rows for e in r.events if e not in (PARTITIONS_ADDED,)] == [
        INITIALISED, COMMITTED, COMMITTED, COMMITTED, ABORTED_BY_CLIENT, COMMITTED,
    ]


def test_a_transaction_version_2_abort_is_a_fence_when_the_fencers_init_follows_it():
    c = Coordinator(tv=2, broker_tv=2)
    c.init("f", T0)
    c.add("f", T0 + 10)
    c.init("f", T0 + S)  # the coordinator aborts (epoch + 1, like a client abort), then the fencer's init
    rows = timeline(c.records)
    assert events(rows)[2:] == [("PrepareAbort", (FENCED,)), ("CompleteAbort", ()), ("Empty", (INITIALISED,))]


def test_a_held_abort_waits_for_the_next_record_and_a_late_init_is_not_its_cause():
    c = Coordinator(tv=2)
    c.init("h", T0)
    c.add("h", T0 + 10)
    c.abort("h", T0 + 20)
    t = Timeline()
    shown = t.feed(c.records)
    assert [r.state for r in shown] == ["Empty", "Ongoing"]  # the abort's cause is not known yet
    c.records.clear()
    c.init("h", T0 + 5 * MIN)  # minutes later: a restart, not the abort's cause
    shown = t.feed(c.records)
    assert events(shown) == [("PrepareAbort", (ABORTED_BY_CLIENT,)), ("CompleteAbort", ()), ("Empty", (INITIALISED,))]
    assert t.flush() == []


def test_an_exhausted_epoch_rotates_the_producer_id_at_an_end_and_at_an_init():
    def rec(state, pid, epoch, offset, next_pid=-1, tv=2):
        return TxnLogRecord("x", pid, epoch, state, ("t-0",) if state in ("Ongoing", "PrepareCommit") else (), 60_000,
                            T0, T0 + offset, tv, -1, next_pid, -1, 1, False, 0, offset)

    rows = timeline([
        rec("Ongoing", 7, 32766, 0), rec("PrepareCommit", 7, 32767, 1, next_pid=8), rec("CompleteCommit", 8, 0, 2),
        rec("CompleteCommit", 9, 32766, 3, tv=0), rec("Empty", 10, 0, 4, tv=0),
    ])
    assert [r.events for r in rows] == [(PARTITIONS_ADDED,), (COMMITTED, EPOCH_EXHAUSTED), (), (), (INITIALISED, EPOCH_EXHAUSTED)]


def test_an_unknown_record_is_shown_and_a_tombstone_is_an_expiry():
    c = Coordinator(tv=0)
    c.init("e", T0)
    c.expire("e", T0 + MIN)
    entries = [TxnLogEntry(r, r.record_timestamp_ms) for r in c.records] + [TxnLogEntry(UndecodedRecord(KIND_UNKNOWN_VERSION, 2, 9), T0)]
    rows = timeline(entries)
    assert [(r.transactional_id, r.events) for r in rows] == [("e", (INITIALISED,)), ("e", (EXPIRED,)), ("", (UNKNOWN_RECORD,))]
    assert rows[1].time_ms == T0 + MIN


def test_diagnose_says_two_instances_share_an_id_that_fences_and_commits_by_turns():
    c = Coordinator(tv=0)
    for i in range(7):  # A and B take turns; each init fences the other's open transaction
        t = T0 + i * MIN
        c.init("s", t)
        c.txn("s", t + S)
        c.add("s", t + 2 * S)
    rows = timeline(c.records)
    line = summarize("s", rows, T0 + 10 * MIN).line
    assert line.startswith("initialised 7 times in the last hour by alternating producers: two instances share this id")
    assert "committed 7 times today" in line


def test_diagnose_counts_timeouts_today_and_only_today():
    c = Coordinator(tv=0)
    for i, t in enumerate((T0, T0 + 20 * HOUR_MS, T0 + 21 * HOUR_MS, T0 + 22 * HOUR_MS)):
        c.init("t", t)
        c.add("t", t + S)
        c.time_out("t", t + S + MIN)
    s = summarize("t", timeline(c.records), T0 + 25 * HOUR_MS)
    assert "timed out and aborted by the coordinator 3 times today" in s.line and s.timeouts_last_day == 3
    assert s.line.endswith("no commit today")


def test_instances_taking_turns_without_open_transactions_are_not_said_to_fence():
    c = Coordinator(tv=0)
    taking_turns(c, "q", T0, 4)
    s = summarize("q", timeline(c.records), T0 + MIN)
    assert s.fences_last_hour == 0
    assert s.line.startswith("initialised 4 times in the last hour, committing in between: restarts, or instances taking turns")
