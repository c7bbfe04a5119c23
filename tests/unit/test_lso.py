"""LSO lag rules, group verdicts, watch comparison and exit codes, without a broker."""

from __future__ import annotations

import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from tests.support import fake_kafka
from tests.support.fake_kafka import KafkaModel

from kafkatxn import exitcodes, gather, lso, facts_lso, verdicts, verdicts_groups
from kafkatxn.group_positions import group_lags
from kafkatxn.cli import lso_cmd
from kafkatxn.model import Broker, ProducerState, TopicPartition, TransactionDescription
from kafkatxn.errors import DeadlineExceeded
from kafkatxn.verdicts_groups import GroupVerdict
from kafkatxn.verdicts_groups import Offsets
from kafkatxn.verdicts import OpenTransaction

TP0 = TopicPartition("orders", 0)
TP1 = TopicPartition("orders", 1)
TP2 = TopicPartition("payments", 0)
NOW = 1_700_000_000_000


def txn(pid, start, last_ts=NOW - 1_000, tid=None, started=None, epoch=0, tp=TP0):
    """An open transaction on ``tp``; ``started``: the coordinator describes it as open there since then."""
    state = ProducerState(pid, epoch, 0, last_ts, 0, start)
    described = None
    if started is not None:
        described = TransactionDescription(tid or f"tid-{pid}", 1, "Ongoing", pid, epoch, 60_000, started, frozenset([tp]))
    return OpenTransaction(tp, state, tid, described)


def snap(offsets, open_txns=None, taken_at_ms=NOW):
    return facts_lso.LsoSnapshot(taken_at_ms, {tp: Offsets(hw, l) for tp, (l, hw) in offsets.items()}, open_txns or {})


# -- group verdict --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "committed, lso_, hw, readable, expected",
    [
        # Nothing left at all.
        (10, 10, 10, None, GroupVerdict.caught_up),
        # Beyond the HW (records deleted, offsets reset later).
        (12, 10, 10, None, GroupVerdict.caught_up),
        # At the LSO, which an open transaction holds below the HW.
        (7, 7, 10, None, GroupVerdict.blocked),
        # Past the LSO: reads uncommitted records, still has some to go.
        (8, 7, 10, None, GroupVerdict.lagging),
        # Below the LSO, gap not probed: counts as lag.
        (5, 10, 10, None, GroupVerdict.lagging),
        # Below the LSO, only the commit marker / aborted records in between, nothing open.
        (9, 10, 10, False, GroupVerdict.caught_up),
        # Below the LSO, only markers in between, then an open transaction.
        (5, 7, 10, False, GroupVerdict.blocked),
        # Below the LSO with records to read.
        (5, 10, 10, True, GroupVerdict.lagging),
        (5, 7, 10, True, GroupVerdict.lagging),
    ],
)
def test_group_verdict(committed, lso_, hw, readable, expected):
    assert verdicts_groups.group_verdict(committed, lso_, hw, readable) is expected


def test_readable_before_lso_ignores_records_the_lso_passed_later():
    # The probe ran after the snapshot; a record at or above the snapshot's LSO does not count.
    assert verdicts_groups.readable_before_lso(9, 10) is True
    assert verdicts_groups.readable_before_lso(10, 10) is False
    assert verdicts_groups.readable_before_lso(None, 10) is False


# -- partition rows -------------------------------------------------------------------------------


def test_pinning_transaction_is_the_one_starting_at_the_lso():
    a, b = txn(1, 40), txn(2, 25)
    assert verdicts.pinning_transaction([a, b], 25) is b
    # LSO moved between the requests: the earliest open transaction pins it now.
    assert verdicts.pinning_transaction([a, b], 20) is b
    assert verdicts.pinning_transaction([], 20) is None


def test_partition_lags_rows_pinning_transaction_and_ages():
    s = snap(
        {TP0: (100, 130), TP1: (50, 50), TP2: (7, 8)},
        {
            TP0: [txn(11, 100, last_ts=NOW - 2_000, tid="etl-1", started=NOW - 60_000), txn(12, 120, tid="etl-2")],
            TP2: [txn(13, 7, last_ts=NOW - 500, tp=TP2)],  # coordinator does not track it: no start time
        },
    )
    rows = lso.partition_lags(s)
    assert [(r.topic, r.partition, r.lag_messages) for r in rows] == [("orders", 0, 30), ("payments", 0, 1)]
    orders = rows[0]
    assert (orders.high_watermark, orders.last_stable_offset) == (130, 100)
    assert (orders.producer_id, orders.transactional_id, orders.txn_start_offset) == (11, "etl-1", 100)
    assert orders.open_transactions == 2
    assert orders.txn_age_ms == 60_000
    assert orders.last_write_age_ms == 2_000
    payments = rows[1]
    # Its coordinator does not date it and its first record was not read: the last write, a lower bound.
    assert (payments.txn_age_ms, payments.txn_age_source) == (500, "last_write") and payments.last_write_age_ms == 500
    assert payments.transactional_id is None


def test_partition_lags_min_lag():
    s = snap({TP0: (100, 130), TP1: (50, 50), TP2: (7, 8)})
    assert [r.lag_messages for r in lso.partition_lags(s, min_lag=2)] == [30]
    assert [r.lag_messages for r in lso.partition_lags(s, min_lag=0)] == [30, 0, 1]
    # Lag without a known transaction (it ended between the requests) is still a row.
    assert lso.partition_lags(s)[0].producer_id is None


def test_partition_lags_of_the_lagging_partitions_the_snapshot_kept():
    s = snap({TP0: (100, 130), TP1: (50, 50), TP2: (7, 8)})
    kept = snap({TP0: (100, 130), TP1: (50, 50), TP2: (7, 8)})
    kept.lagging = [TP2, TP0]  # as take_snapshot finds them: HW > LSO
    for min_lag in (0, 1, 2, 31):
        assert lso.partition_lags(kept, min_lag) == lso.partition_lags(s, min_lag)
    kept.lagging = [TP2]  # only those are looked at: the snapshot keeps them with its offsets
    assert [r.partition for r in lso.partition_lags(kept)] == [0] and lso.partition_lags(kept)[0].topic == "payments"


def test_lag_never_negative():
    assert Offsets(high_watermark=5, last_stable_offset=6).lag == 0


# -- group rows -----------------------------------------------------------------------------------


def group_snap(offsets, committed, first_readable=None, open_txns=None):
    return facts_lso.GroupSnapshot(snap(offsets, open_txns), committed, first_readable or {})


def test_group_lags_joins_probe_and_pinning_transaction():
    s = group_snap(
        {TP0: (100, 130), TP1: (60, 60), TP2: (40, 40)},
        {"billing": {TP0: 98, TP1: 59, TP2: 10}},
        first_readable={(TP0, 98): None, (TP1, 59): None, (TP2, 10): 10},
        open_txns={TP0: [txn(21, 100, tid="etl", started=NOW - 9_000)]},
    )
    rows = {(r.topic, r.partition): r for r in group_lags(s)}
    blocked = rows[("orders", 0)]
    assert blocked.verdict is GroupVerdict.blocked
    assert (blocked.lag_to_lso_messages, blocked.lag_to_hw_messages) == (2, 32)
    assert blocked.readable_before_lso is False
    assert (blocked.producer_id, blocked.transactional_id, blocked.txn_age_ms) == (21, "etl", 9_000)
    caught_up = rows[("orders", 1)]
    assert caught_up.verdict is GroupVerdict.caught_up
    assert caught_up.lag_to_hw_messages == 1  # the phantom lag every other tool reports
    assert caught_up.producer_id is None
    lagging = rows[("payments", 0)]
    assert lagging.verdict is GroupVerdict.lagging and lagging.readable_before_lso is True


def test_group_lags_without_probe_counts_the_gap_as_lag():
    s = group_snap({TP0: (60, 60)}, {"g": {TP0: 59}})
    (row,) = group_lags(s)
    assert row.verdict is GroupVerdict.lagging and row.readable_before_lso is None


def test_group_lags_min_lag_keeps_blocked_rows():
    s = group_snap({TP0: (100, 130), TP1: (60, 70), TP2: (40, 40)}, {"g": {TP0: 100, TP1: 55, TP2: 40}})
    rows = group_lags(s, min_lag=3)
    assert [(r.partition, r.topic, r.verdict) for r in rows] == [
        (0, "orders", GroupVerdict.blocked),
        (1, "orders", GroupVerdict.lagging),
    ]


def test_group_lags_skips_partitions_without_offsets():
    s = group_snap({TP0: (5, 5)}, {"g": {TP0: 5, TP1: 3}})
    assert [r.partition for r in group_lags(s)] == [0]


def test_probe_rounds_only_small_gaps_and_one_start_per_partition_a_round():
    offsets = {TP0: Offsets(130, 100), TP1: Offsets(60, 60), TP2: Offsets(5000, 5000)}
    committed = {"a": {TP0: 98, TP1: 60, TP2: 1}, "b": {TP0: 90}, "c": {TP0: 98}}
    rounds = gather.probe_rounds(committed, offsets, max_gap=1000)
    assert rounds == [{TP0: 90}, {TP0: 98}]
    assert gather.probe_rounds(committed, offsets, max_gap=0) == []
    assert gather.probe_rounds(committed, offsets, max_gap=10_000)[0] == {TP0: 90, TP2: 1}


# -- watching -------------------------------------------------------------------------------------


def test_lso_moved_compares_two_snapshots():
    before = snap({TP0: (100, 130), TP1: (60, 60)})
    after = snap({TP0: (100, 140), TP1: (61, 61), TP2: (0, 3)})
    assert lso.lso_moved(before, after) == {TP0: False, TP1: True, TP2: None}
    assert lso.lso_moved(None, after) == {TP0: None, TP1: None, TP2: None}


def test_with_movement_adds_the_column_to_both_row_kinds():
    moved = {TP0: False}
    (prow,) = lso.with_movement(lso.partition_lags(snap({TP0: (1, 3)})), moved)
    assert isinstance(prow, lso.WatchedPartitionLag) and prow.lso_moved is False and prow.lag_messages == 2
    (grow,) = lso.with_movement(group_lags(group_snap({TP0: (1, 3)}, {"g": {TP0: 1}})), {TP0: True})
    assert isinstance(grow, lso.WatchedGroupLag) and grow.lso_moved is True and grow.verdict is GroupVerdict.blocked


def sample(code, snapshot=None):
    return lso_cmd.Sample([], lso.PartitionLag, code, [], snapshot or snap({}), "")


def test_watch_loop_passes_the_previous_good_snapshot_and_keeps_going_after_errors():
    snapshots = [snap({TP0: (i, 10)}) for i in range(3)]
    calls, shown, sleeps = [], [], []
    results = iter([sample(1, snapshots[0]), DeadlineExceeded("timed out"), sample(0, snapshots[2])])

    def take(previous):
        calls.append(previous)
        result = next(results)
        if isinstance(result, Exception):
            raise result
        return result

    code = lso_cmd.watch_loop(take, lambda n, s, e: shown.append((n, e)), 2.0, samples=3, sleep=sleeps.append, clock=lambda: 0.0)
    assert calls == [None, snapshots[0], snapshots[0]]
    assert shown == [(1, None), (2, "timed out"), (3, None)]
    assert sleeps == [2.0, 2.0]  # no sleep after the last sample
    assert code == 0


def test_watch_loop_stops_on_ctrl_c_with_the_last_code():
    def take(previous):
        if previous is not None:
            raise KeyboardInterrupt
        return sample(2)

    assert lso_cmd.watch_loop(take, lambda *a: None, 0.0, sleep=lambda s: None) == 2


def test_watch_frame_clears_a_terminal_and_not_a_pipe():
    ctx = SimpleNamespace(output="table", no_headers=False, wide=False)
    rows = lso.with_movement(lso.partition_lags(snap({TP0: (1, 3)})), {TP0: False})
    s = lso_cmd.Sample(rows, lso.WatchedPartitionLag, 1, [], snap({}), "none", ["kafkatxn: incomplete answer: x"])
    tty = lso_cmd._frame(ctx, 4, 2000, s, None, is_tty=True)
    assert tty.startswith(lso_cmd.CLEAR_SCREEN) and "sample 4" in tty and "lso_moved" in tty and "incomplete" in tty
    piped = lso_cmd._frame(ctx, 4, 2000, s, None, is_tty=False)
    assert lso_cmd.CLEAR_SCREEN not in piped and piped.startswith("# ") and "incomplete" not in piped
    jsonl = lso_cmd._frame(SimpleNamespace(output="jsonl", no_headers=False, wide=False), 4, 2000, s, None, is_tty=False)
    assert jsonl.startswith('{"topic":"orders"') and '"lso_moved":false' in jsonl


# -- ordering and exit codes ----------------------------------------------------------------------


def test_sort_by_lag_and_age_and_top():
    s = snap(
        {TP0: (0, 5), TP1: (0, 50), TP2: (0, 20)},
        {TP0: [txn(1, 0, started=NOW - 90_000)], TP1: [txn(2, 0, last_ts=NOW - 10, tp=TP1)], TP2: [txn(3, 0, last_ts=-1, tp=TP2)]},
    )
    rows = lso.partition_lags(s)
    assert [r.partition for r in lso.sort_rows(rows, "lag")] == [1, 0, 0]
    assert [r.topic for r in lso.sort_rows(rows, "lag")] == ["orders", "payments", "orders"]
    by_age = lso.sort_rows(rows, "age")
    assert [r.producer_id for r in by_age] == [1, 2, 3]  # unknown age last
    assert len(lso.sort_rows(rows, "lag", top=2)) == 2
    assert lso.sort_rows(rows) == rows


def test_partitions_exit_code():
    young = snap({TP0: (0, 5)}, {TP0: [txn(1, 0, started=NOW - 1_000)]})
    old = snap({TP0: (0, 5)}, {TP0: [txn(1, 0, started=NOW - 600_000)]})
    hanging = snap({TP0: (0, 5)}, {TP0: [txn(1, 0, last_ts=NOW - 600_000)]})  # no coordinator start time
    assert lso.partitions_exit_code(lso.partition_lags(snap({TP0: (5, 5)}), min_lag=0)) == 0
    assert lso.partitions_exit_code(lso.partition_lags(young)) == 1
    assert lso.partitions_exit_code(lso.partition_lags(old)) == 2
    assert lso.partitions_exit_code(lso.partition_lags(hanging)) == 2
    assert lso.partitions_exit_code(lso.partition_lags(old), critical_age_ms=None) == 1


def test_groups_exit_code():
    open_old = {TP0: [txn(1, 10, started=NOW - 600_000)]}
    assert lso.groups_exit_code(group_lags(group_snap({TP0: (10, 10)}, {"g": {TP0: 10}}))) == 0
    # Lagging by 7: below the default --lag-threshold, no finding; from the threshold on, a warning.
    assert lso.groups_exit_code(group_lags(group_snap({TP0: (10, 10)}, {"g": {TP0: 3}}))) == 0
    assert lso.groups_exit_code(group_lags(group_snap({TP0: (10, 10)}, {"g": {TP0: 3}})), lag_threshold=7) == 1
    assert lso.groups_exit_code(group_lags(group_snap({TP0: (10, 12)}, {"g": {TP0: 10}}))) == 1
    assert lso.groups_exit_code(group_lags(group_snap({TP0: (10, 12)}, {"g": {TP0: 10}}, open_txns=open_old))) == 2
    # Lagging behind an old transaction is not blocked: still a warning.
    assert lso.groups_exit_code(group_lags(group_snap({TP0: (10, 12)}, {"g": {TP0: 4}}, open_txns=open_old)), lag_threshold=6) == 1
    # Rows handed over once only (a generator): the same answers.
    rows = group_lags(group_snap({TP0: (10, 12)}, {"g": {TP0: 10}, "h": {TP0: 12}}, open_txns=open_old))
    assert lso.groups_exit_code(iter(rows)) == lso.groups_exit_code(rows) == 2
    snapshot = group_snap({TP0: (10, 12)}, {}, open_txns=open_old).lso
    assert lso.undetermined_pins(snapshot, iter(rows)) == lso.undetermined_pins(snapshot, rows)
    assert lso.offsets_hints(iter(rows)) == lso.offsets_hints(rows) and lso.restore_hints(snapshot, iter(rows)) == []


def test_incomplete_answers_exit_3_unless_critical():
    assert exitcodes.exit_code(0, ["x: timed out"]) == 3
    assert exitcodes.exit_code(1, ["x: timed out"]) == 3
    assert exitcodes.exit_code(2, ["x: timed out"]) == 2
    assert exitcodes.exit_code(1, []) == 1


# -- snapshot over a fake cluster -----------------------------------------------------------------


def snapshot_cluster(pairs, producers, descriptions=(), silent=()):
    """Broker 1 leads the partitions of ``pairs`` (tp -> (lso, hw)); broker 2 leads ``silent`` and
    does not answer ListOffsets."""
    model = KafkaModel(brokers=(1, 2))
    for tp, (lso_, hw) in pairs.items():
        model.add_partition(tp.topic, tp.partition, leader=1, lso=lso_, hw=hw)
    for tp in silent:
        model.add_partition(tp.topic, tp.partition, leader=2)
    model.timeouts[2] = {"ListOffsets"}
    model.producers.update(producers)
    model.transactions = {d.transactional_id: d for d in descriptions}
    return fake_kafka.FakeCluster(model)


def producer(pid, start, last_ts=NOW):
    return ProducerState(pid, 3, 10, last_ts, 1, start)


def description(tid, pid, partitions, state="Ongoing", start=NOW - 5_000):
    return TransactionDescription(tid, 1, state, pid, 3, 60_000, start, frozenset(partitions))


def test_snapshot_describes_only_lagging_partitions_and_trusts_only_matching_coordinator_state():
    gone = TopicPartition("gone", 0)
    cluster = snapshot_cluster(
        pairs={TP0: (100, 130), TP1: (60, 60), TP2: (5, 9)},
        producers={TP0: [producer(7, 100), producer(8, -1)], TP2: [producer(9, 5)]},
        descriptions=[
            description("etl-7", 7, [TP0]),
            # The coordinator's transaction does not include payments-0: hanging there, no start time.
            description("etl-9", 9, [TP0]),
        ],
        silent=[gone],
    )
    s = facts_lso.take_snapshot(cluster, [TP0, TP1, TP2, gone])
    assert cluster.called("describe_producers") == [("describe_producers", [TP0, TP2], None)]
    # Broker 2 used up its share on ListOffsets: it is silent for the rest of the command, so its
    # slice of the transaction log and its configs are not asked (and named) instead of costing a second wait.
    assert [(m.subject, m.what) for m in s.missing] == [(gone, ""), (Broker(2), "transactional ids"), (Broker(2), "")]
    assert all("timed out" in m.reason for m in s.missing)
    assert [type(request).__name__ for node, request in cluster.model.sent if node == 2] == ["ListOffsets"] * 2  # one round trip
    (on_tp0,), (on_tp2,) = s.open_transactions[TP0], s.open_transactions[TP2]
    assert (on_tp0.producer, on_tp0.transactional_id, on_tp0.coordinator_start_time_ms) == (producer(7, 100), "etl-7", NOW - 5_000)
    assert (on_tp2.producer, on_tp2.transactional_id, on_tp2.coordinator_start_time_ms) == (producer(9, 5), "etl-9", None)


def test_partition_report_counts_rows_that_top_leaves_out():
    now = int(time.time() * 1000)  # the snapshot takes the wall clock
    cluster = snapshot_cluster(
        pairs={TP0: (100, 130), TP1: (60, 61)},
        producers={TP0: [producer(7, 100, last_ts=now)], TP1: [producer(8, 60, last_ts=now - 3_600_000)]},
    )
    report = lso.partition_report(cluster, top=1, watching=True)
    (row,) = report.rows
    assert (row.partition, row.lag_messages, row.lso_moved) == (0, 30, None)
    assert row.last_write_age_ms < lso.DEFAULT_CRITICAL_AGE_MS
    assert report.exit_code == 2  # the hour-old transaction on orders-1 is not shown, but counts


def test_the_log_and_the_maximum_timeout_are_read_only_for_pins_that_may_hang():
    """The pinning transactions' verdicts are hanging's, settled by the coordinator's log; pins their
    coordinators track cost no request more, and the log is read only for those idle past the maximum timeout."""
    now = int(time.time() * 1000)

    def cluster_with(last_ts: int, tracked: bool) -> fake_kafka.FakeCluster:
        model = KafkaModel(brokers=(1,))
        model.add_transaction_log([1])
        model.add_partition("orders", 0, leader=1, lso=100, hw=130)
        model.producers[TP0] = [producer(7, 100, last_ts=last_ts)]
        # Untracked: its coordinator's transaction has another partition (hanging's "does not track this partition").
        model.transactions = {"etl-7": description("etl-7", 7, [TP0] if tracked else [TP1], start=now - 5_000)}
        model.max_timeouts = {1: "900000"}
        return fake_kafka.FakeCluster(model)

    def asked(cluster) -> tuple[int, int]:
        return len(cluster.called("broker_configs")), len(cluster.called("transaction_log_histories"))

    for last_ts, tracked, expected_asks, hanging in (
        (now, True, (0, 0), False),  # tracked: nothing more asked
        (now - 3_600_000, True, (0, 0), False),
        (now, False, (1, 0), False),  # untracked but written within the maximum timeout: not hanging, no log read
        (now - 3_600_000, False, (1, 1), True),  # idle past it: settled by the log (which shows no commit: hanging)
    ):
        cluster = cluster_with(last_ts, tracked)
        (row,) = lso.partition_report(cluster).rows
        assert (asked(cluster), row.txn_hanging, row.txn_lost_commit) == (expected_asks, hanging, False), (last_ts, tracked)


# -- the facade's ListOffsets batching ------------------------------------------------------------


def offsets_model(leaders, answers=None):
    """Partitions led as ``leaders`` says, with offsets ``(lso, hw)`` from ``answers``."""
    model = KafkaModel(brokers=(1, 2, 99))
    for tp, leader in leaders.items():
        model.add_partition(tp.topic, tp.partition, leader=leader)
        if answers and tp in answers:
            model.offsets[tp] = list(answers[tp])
    return model


def sent_offsets(model):
    return [(node, 1 if r.read_committed else 0) for node, r in model.sent if type(r).__name__ == "ListOffsets"]


def test_stable_and_high_offsets_one_request_per_leader_and_level_and_a_retry_after_leader_moves():
    model = offsets_model({TP0: 1, TP1: 1, TP2: 2}, {TP0: (100, 130), TP1: (50, 55), TP2: (7, 9)})
    model.leader_moves = {TP1: 2}  # broker 1 answers NOT_LEADER_OR_FOLLOWER until metadata is fetched again
    model.partition_errors[(1, TP1)] = ["NOT_LEADER_OR_FOLLOWER", "NOT_LEADER_OR_FOLLOWER"]
    cluster = fake_kafka.FakeCluster(model)
    result = cluster.stable_and_high_offsets([TP0, TP1, TP2])
    assert result.value == {TP0: (100, 130), TP1: (50, 55), TP2: (7, 9)}
    assert result.missing == []
    sent = sent_offsets(model)
    assert sorted(sent[:4]) == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert sent[4:] == [(2, 1), (2, 0)]  # the retry asks only the new leader, LSO first
    assert cluster.list_offsets([TP0], read_committed=False).value == {TP0: 130}


def test_offsets_name_what_did_not_answer():
    model = offsets_model({TP0: 99, TP1: -1})
    model.down.add(99)
    result = fake_kafka.FakeCluster(model).stable_and_high_offsets([TP0, TP1, TP2])
    assert result.value == {}
    assert [m.subject for m in result.missing] == [TP0, TP1, TP2]
    assert [m.reason for m in result.missing][1:] == ["no leader", "unknown topic or partition"]
    assert result.missing[0].reason.startswith("broker 99: ") and "timed out" in result.missing[0].reason


def test_a_missing_t_10_is_not_taken_for_t_1():
    """Missing parts are typed: a partition whose name is a prefix of another's is not confused with it."""
    t1, t10 = TopicPartition("t", 1), TopicPartition("t", 10)
    t_1, t_10 = TopicPartition("t-1", 0), TopicPartition("t-10", 0)
    model = offsets_model({t1: 1, t10: 2, t_1: 1, t_10: 2}, {t1: (5, 5), t10: (6, 6), t_1: (7, 7), t_10: (8, 8)})
    model.down.add(2)
    result = fake_kafka.FakeCluster(model).stable_and_high_offsets([t1, t10, t_1, t_10])
    assert result.value == {t1: (5, 5), t_1: (7, 7)}
    assert {m.subject for m in result.missing} == {t10, t_10}
    assert result.missing_for(t1) == [] and result.missing_for(t_1) == []


# -- command line, no broker ----------------------------------------------------------------------


def run(*args):
    return subprocess.run([sys.executable, "-m", "kafkatxn", *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["lso", "-b", "127.0.0.1:1", "some-group"], "need --groups"),
        (["lso", "-b", "127.0.0.1:1", "--interval", "soon"], "bad duration"),
        (["lso", "-b", "127.0.0.1:1", "--interval", "0s"], "--interval"),
        (["lso", "-b", "127.0.0.1:1", "--sort", "size"], "--sort"),
        (["lso", "-b", "127.0.0.1:1", "--critical-age", "old"], "bad duration"),
    ],
)
def test_usage_errors_exit_64_before_connecting(args, fragment):
    result = run(*args)
    assert result.returncode == 64, result.stderr
    assert fragment in result.stderr
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1


def test_unreachable_cluster_exits_3_quickly():
    result = run("lso", "-b", "127.0.0.1:1", "--timeout", "2s")
    assert result.returncode == 3, result.stderr
    assert "127.0.0.1:1" in result.stderr and "Traceback" not in result.stderr


def test_each_places_read_committed_lag_is_readable_lag_of_its_fields():
    """group_positions takes readable_lag's first rule inline (caught up: 0): every place agrees with it."""
    from kafkatxn.group_positions import group_positions, readable_lag

    snap = group_snap({TP0: (10, 12), TP1: (7, 7)}, {"a": {TP0: 12, TP1: 7}, "b": {TP0: 4, TP1: 3}, "c": {TP0: 11, TP1: 9}})
    places = list(group_positions(snap))
    assert {p.verdict for p in places} >= {GroupVerdict.caught_up, GroupVerdict.lagging}
    for p in places:
        assert p.read_committed_lag == readable_lag(p.verdict, p.committed_offset, p.offsets.last_stable_offset, p.lag_to_lso_messages, p.lag_to_hw_messages)


def test_the_partitions_at_or_over_min_lag_are_the_ones_the_lag_says():
    """Found a column at a time (HW - LSO >= min_lag): a leader that moved between the two reads can
    leave the HW below the LSO, whose lag is 0, never negative, so it is a row only at min_lag 0."""
    s = snap({TP0: (4, 9), TP1: (3, 3), TP2: (5, 2)})  # (LSO, HW)
    for min_lag, expected in [(1, [(TP0, 5)]), (5, [(TP0, 5)]), (6, []), (0, [(TP0, 5), (TP1, 0), (TP2, 0)]),
                              (-1, [(TP0, 5), (TP1, 0), (TP2, 0)])]:
        rows = lso.partition_lags(s, min_lag)
        assert [(TopicPartition(r.topic, r.partition), r.lag_messages) for r in rows] == expected, min_lag


def test_group_by_leader_keeps_the_order_given_and_leaves_a_partition_without_a_leader_to_the_caller():
    from kafkatxn.kafka.session import group_by_leader

    a, b, c, d = (TopicPartition("t", i) for i in range(4))
    leaders = {a: 2, b: 1, c: 2, d: -1}
    assert group_by_leader([a, b, c], leaders, {}) == {2: [a, c], 1: [b]}
    assert list(group_by_leader([b, a, c], leaders, {})) == [1, 2]
    assert group_by_leader([], leaders, {}) == {}
    assert group_by_leader([a, d], leaders, {}) is None  # no leader
    assert group_by_leader([a, TopicPartition("u", 0)], leaders, {}) is None  # unknown
    assert group_by_leader([a, b], leaders, {1: "silent"}) is None


def test_a_metadata_answer_is_ordered_and_routed_as_before():
    from kafkatxn.kafka import protocol as proto
    from kafkatxn.kafka.session import cluster_metadata
    from kafkatxn.model import BrokerInfo, PartitionInfo

    parts = [PartitionInfo(t, i, i % 3, (1,), (1,)) for t in ("b", "a", "c") for i in (2, 0, 1)]
    md = cluster_metadata(proto.MetadataResponse("c", 1, (BrokerInfo(1, "h", 1),), tuple(parts)), 1)
    assert md.partitions == tuple(sorted(parts, key=lambda p: (p.topic, p.partition)))
    assert md.leaders == {TopicPartition(p.topic, p.partition): p.leader for p in parts}
    assert all(type(tp) is TopicPartition for tp in md.leaders)
    assert [p.tp for p in md.partitions] == [TopicPartition(p.topic, p.partition) for p in md.partitions]
    assert type(md.partitions[0].tp) is TopicPartition and str(md.partitions[0].tp) == "a-0"


def test_group_by_leader_column_takes_the_leaders_beside_the_partitions():
    from kafkatxn.kafka.session import group_by_leader_column

    a, b, c = (TopicPartition("t", i) for i in range(3))
    assert group_by_leader_column([a, b, c], [2, 1, 2], {}) == {2: [a, c], 1: [b]}
    assert group_by_leader_column([a, b], [2, -1], {}) is None and group_by_leader_column([a], [None], {}) is None
    assert group_by_leader_column([a, b], [2, 1], {1: "silent"}) is None
