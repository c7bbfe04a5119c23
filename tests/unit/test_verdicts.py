"""Issue 13: the three verdicts under partial knowledge, over the shared fake (the real facade, no broker).

The cluster: three brokers, each leading one ``__transaction_state`` partition, and ``orders-0``
on broker 1 with old open transactions. Broker 2 is stopped as KRaft shows it: gone from the
metadata's brokers, its only-replica partitions without a leader.
"""

from __future__ import annotations

import json
import time

import pytest

from kafkatxn import auditlog, check, exporter_metrics, hanging, monitoring_plugin, remedy, verdicts
from kafkatxn.model import TWO_PHASE_COMMIT_TIMEOUT_MS, ProducerState, TopicPartition, TransactionDescription
from kafkatxn.remedy import Outcome
from kafkatxn.facts_cluster import gather_snapshot
from tests.support.cli_helpers import run_cli
from tests.support.fake_kafka import FakeCluster, KafkaModel

MAX = 900_000
ORDERS = TopicPartition("orders", 0)
LOG = "__transaction_state"
TWO_PC = TWO_PHASE_COMMIT_TIMEOUT_MS


def tid_on(partition: int, stem: str = "app") -> str:
    """A transactional id that hashes to this ``__transaction_state`` partition (of three)."""
    return next(t for t in (f"{stem}-{i}" for i in range(1000)) if verdicts.coordinator_partition(t, 3) == partition)


def now_ms() -> int:
    return int(time.time() * 1000)


def old(pid: int, start: int, epoch: int = 0, coord: int = -1) -> ProducerState:
    return ProducerState(pid, epoch, 3, now_ms() - 2 * MAX, coord, start)


def model_with(*producers: ProducerState) -> KafkaModel:
    m = KafkaModel(brokers=(1, 2, 3))
    m.add_transaction_log([1, 2, 3])
    m.add_partition("orders", 0, leader=1, lso=10, hw=20)
    m.producers[ORDERS] = list(producers)
    return m


def scan(m: KafkaModel) -> hanging.HangingResult:
    return hanging.find_hanging(FakeCluster(m), topics=["orders"], max_transaction_timeout_ms=MAX)


def verdicts_by_producer(result: hanging.HangingResult) -> dict[int, verdicts.Verdict]:
    return {c.open_txn.producer.producer_id: c.verdict for c in result.classifications}


# -- the coordinator for an id ----------------------------------------------------------------


def test_coordinator_partition_is_javas_abs_hash_modulo_partitions():
    assert verdicts.java_string_hash("abc") == 96354
    assert verdicts.java_string_hash("") == 0
    assert verdicts.java_string_hash("polygenelubricants") == -(2**31)  # Utils.abs maps it to 0
    assert verdicts.coordinator_partition("polygenelubricants", 50) == 0
    assert verdicts.coordinator_partition("abc", 50) == 96354 % 50
    assert verdicts.java_string_hash("é") == 233  # UTF-16 code units, not bytes
    assert verdicts.java_string_hash("😀") == (31 * 0xD83D + 0xDE00)
    # A lone surrogate is a code unit of its own in Java; hanging's copy of the hash raised on it
    # while the audit's had its own: there is one now, which history and the log reader use too.
    assert verdicts.java_string_hash("\ud800x") == 31 * 0xD800 + ord("x")


def test_java_string_hash_of_ascii_names_is_horners_rule():
    """An ASCII name is hashed as a sum of its characters times powers of 31, in C (the exporter hashes
    every group name a scrape): the same 32-bit value as Java's loop, for every length up to the last
    taken that way and past it."""
    import random

    def horner(s: str) -> int:
        h = 0
        for c in s:
            h = (31 * h + ord(c)) & 0xFFFFFFFF
        return h - (1 << 32) if h >= 1 << 31 else h

    rng = random.Random(38)
    names = ["", "a", "billing", "polygenelubricants", "bench-group-01234", "\x7f" * 9, "~" * 300]
    names += ["".join(rng.choice("abcXYZ-_.0189~\x00\x7f") for _ in range(n)) for n in range(0, 300, 7)]
    for name in names:
        assert verdicts.java_string_hash(name) == horner(name), name


# -- 1: undetermined when a coordinator that could own the id did not answer -------------------


def test_unmapped_producer_is_hanging_only_while_every_log_partition_answers():
    m = model_with(old(7, start=10))
    assert verdicts_by_producer(scan(m)) == {7: verdicts.Verdict.HANGING}
    m.stop_broker(2)  # leads __transaction_state-1; every broker in the metadata still answers
    result = scan(m)
    assert verdicts_by_producer(result) == {7: verdicts.Verdict.UNDETERMINED}
    (c,) = result.classifications
    assert [mi.subject for mi in c.missing] == [TopicPartition(LOG, 1)]
    assert result.hanging == [] and [u.producer_id for u in result.undetermined] == [7]


def test_a_log_leader_that_times_out_makes_it_undetermined_too():
    m = model_with(old(7, start=10))
    m.down.add(2)  # still in the metadata, leading __transaction_state-1, but silent
    (c,) = scan(m).classifications
    assert c.verdict is verdicts.Verdict.UNDETERMINED
    assert [mi.subject for mi in c.missing] == [TopicPartition(LOG, 1)]


def test_a_known_id_whose_coordinator_answered_is_still_decided_with_a_log_partition_down():
    gone = tid_on(0)
    m = model_with(old(7, start=10), old(8, start=12))
    m.listings = [(gone, 8, "Empty")]  # listed by its coordinator (broker 1), no longer described
    m.stop_broker(2)
    result = scan(m)
    assert verdicts_by_producer(result) == {7: verdicts.Verdict.UNDETERMINED, 8: verdicts.Verdict.HANGING}
    assert result.hanging[0].reason == verdicts.REASON_UNKNOWN_TO_COORDINATOR


def test_hanging_command_lists_undetermined_and_exits_3(capsys, monkeypatch):
    m = model_with(old(7, start=10))
    m.stop_broker(2)
    monkeypatch.setattr("kafkatxn.kafka.Cluster", lambda config: FakeCluster(m))
    result = run_cli(capsys, "hanging", "-b", "f:1", "-t", "orders", "--max-transaction-timeout", "15m", "-o", "jsonl")
    assert result.code == 3, result.stderr
    rows = result.records("jsonl")
    assert [r for r in rows if r["section"] == "hanging"] == []
    (u,) = [r for r in rows if r["section"] == "undetermined"]
    assert (u["producer_id"], u["start_offset"]) == ("7", "10") or (u["producer_id"], u["start_offset"]) == (7, 10)
    assert "__transaction_state-1" in result.stderr and "undetermined" in result.stderr


def test_check_and_exporter_count_undetermined_apart_from_hanging():
    m = model_with(old(7, start=10))
    m.stop_broker(2)
    snap = gather_snapshot(FakeCluster(m), topic_regex="^orders$", max_transaction_timeout_ms=MAX)
    assert snap.hanging == () and [u.producer_id for u in snap.undetermined] == [7]
    assert snap.undetermined[0].missing[0].subject == TopicPartition(LOG, 1)
    result = check.evaluate(snap)
    perf = {p.label: p.value for p in result.perfdata}
    assert (perf["hanging_transactions"], perf["undetermined_transactions"]) == (0, 1)
    assert result.exit_code == 3 and result.facts["undetermined_transactions"] == 1
    families = {f.name: f for f in exporter_metrics.metric_families(snap)}
    assert families["kafkatxn_undetermined_transactions"].samples[0].value == 1
    assert families["kafkatxn_hanging_transactions"].samples[0].value == 0


# -- 2: a transaction its coordinator is completing is never hanging ----------------------------


@pytest.mark.parametrize("state", ["PrepareCommit", "PrepareAbort"])
def test_prepare_states_are_long_running_whatever_producer_id_the_coordinator_shows(state, tmp_path):
    tid = tid_on(2)
    m = model_with(old(7, start=10))
    # Transaction version 2 rotated the producer id (epoch exhausted): the coordinator now shows 9.
    m.transactions[tid] = TransactionDescription(tid, 3, state, 9, 0, 60_000, now_ms() - 2 * MAX, frozenset({ORDERS}))
    m.listings = [(tid, 7, state)]
    result = scan(m)
    assert verdicts_by_producer(result) == {7: verdicts.Verdict.LONG_RUNNING}
    assert state in result.long_running[0].reason and verdicts.REASON_COMPLETING in result.long_running[0].reason
    audit = auditlog.AuditLog(tmp_path / "audit.jsonl")
    out = remedy.abort(FakeCluster(m), [remedy.AbortTarget("orders", 0, start_offset=10)], audit=audit, confirm=lambda r: True)
    assert [r.outcome for r in out.rows] == [Outcome.REFUSED] and "completing it" in out.rows[0].reason
    assert out.exit_code == 3 and m.offsets[ORDERS] == [10, 20]
    assert [r["outcome"] for r in audit.records()] == ["refused"]


# -- 3: two-phase commit -------------------------------------------------------------------------


def test_two_phase_commit_transaction_is_long_running_and_marked():
    tid = tid_on(0)
    m = model_with(old(7, start=10))
    m.transactions[tid] = TransactionDescription(tid, 1, "Ongoing", 7, 0, TWO_PC, now_ms() - 10 * MAX, frozenset({ORDERS}))
    result = scan(m)
    (row,) = result.long_running
    assert row.two_phase_commit is True and verdicts.REASON_TWO_PHASE_COMMIT in row.reason
    snap = gather_snapshot(FakeCluster(m), topic_regex="^orders$", max_transaction_timeout_ms=MAX)
    assert snap.oldest_transaction_age_s() == 0.0  # its age is no alarm
    assert check.evaluate(snap, check.Thresholds(txn_age_warn=monitoring_plugin.Range.parse("60"))).exit_code == 0


# -- abort --all-hanging under a fault writes exactly the markers it should ----------------------


def test_abort_all_hanging_with_a_log_partition_down_refuses_undetermined_and_aborts_the_decided(tmp_path):
    gone = tid_on(0)
    m = model_with(old(7, start=10), old(8, start=12))
    m.listings = [(gone, 8, "Empty")]
    m.stop_broker(2)
    audit = auditlog.AuditLog(tmp_path / "audit.jsonl")
    out = remedy.abort(FakeCluster(m), all_hanging=True, max_transaction_timeout_ms=MAX, audit=audit, confirm=lambda r: True)
    by_pid = {r.producer_id: r for r in out.rows}
    assert by_pid[7].outcome is Outcome.REFUSED and "undetermined" in by_pid[7].reason
    assert by_pid[8].outcome is Outcome.ABORTED
    markers = [(node, r.producer_id) for node, r in m.sent if type(r).__name__ == "WriteAbortMarker"]
    assert markers == [(1, 8)]  # exactly the decided one
    assert out.exit_code == 3
    results = {r["target"]["producer_id"]: r["outcome"] for r in audit.records() if r["record"] == "result"}
    assert results == {7: "refused", 8: "aborted"}


# -- 4: markers only with the epochs the partition expects ---------------------------------------


@pytest.mark.parametrize("given, ok", [(999, False), (2, False), (3, True)])
def test_explicit_abort_with_a_wrong_coordinator_epoch_writes_nothing(tmp_path, given, ok):
    m = model_with(old(7, start=10, epoch=4, coord=3))
    audit = auditlog.AuditLog(tmp_path / "audit.jsonl")
    target = remedy.AbortTarget("orders", 0, producer_id=7, producer_epoch=4, coordinator_epoch=given)
    out = remedy.abort(FakeCluster(m), [target], audit=audit, confirm=lambda r: True)
    markers = [r for _n, r in m.sent if type(r).__name__ == "WriteAbortMarker"]
    if ok:
        assert [r.outcome for r in out.rows] == [Outcome.ABORTED] and [mk.coordinator_epoch for mk in markers] == [3]
    else:
        assert [r.outcome for r in out.rows] == [Outcome.REFUSED] and out.exit_code == 3
        assert "expected --coordinator-epoch 3" in out.rows[0].reason
        assert markers == [] and m.offsets[ORDERS] == [10, 20]
        assert [r["outcome"] for r in audit.records()] == ["refused"]


def test_unknown_producer_id_is_refused_and_a_repeat_of_a_done_abort_is_ok(tmp_path, capsys, monkeypatch):
    m = model_with(old(7, start=10, epoch=4, coord=3))
    monkeypatch.setattr("kafkatxn.kafka.Cluster", lambda config: FakeCluster(m))
    log = tmp_path / "audit.jsonl"

    def abort(pid):
        return run_cli(capsys, "abort", "-b", "f:1", "-t", "orders", "-p", "0", "--producer-id", pid, "--producer-epoch", "4",
                       "--coordinator-epoch", "3", "--yes", "--audit-log", log)

    typo = abort(77)
    assert typo.code == 3 and "unknown to orders-0" in typo.stdout + typo.stderr
    assert abort(7).code == 0 and m.offsets[ORDERS] == [21, 21]
    m.producers[ORDERS] = []  # its state expired since: the audit log still knows it was done
    again = abort(7)
    assert again.code == 0 and "already aborted" in again.stdout
    outcomes = [r["outcome"] for r in auditlog.read_records(log) if r["record"] == "result"]
    assert outcomes == ["refused", "aborted"]


# -- 5: the deadline is for the network, not for the person -------------------------------------


def test_a_confirmation_longer_than_the_timeout_still_acts(tmp_path):
    m = model_with(old(7, start=10))
    cluster = FakeCluster(m, timeout_s=0.5)
    audit = auditlog.AuditLog(tmp_path / "audit.jsonl")

    def slow_reader(rows):
        time.sleep(0.8)  # longer than the whole deadline
        return True

    out = remedy.abort(cluster, [remedy.AbortTarget("orders", 0, start_offset=10)], audit=audit, confirm=slow_reader)
    assert [r.outcome for r in out.rows] == [Outcome.ABORTED], out.rows
    assert m.offsets[ORDERS] == [21, 21]


def test_a_coordinator_that_appears_between_plan_and_act_stops_the_marker(tmp_path):
    tid = tid_on(1)
    m = model_with(old(7, start=10))
    audit = auditlog.AuditLog(tmp_path / "audit.jsonl")

    def meanwhile_the_coordinator_is_back(rows):
        assert [r.outcome for r in rows] == [Outcome.WOULD_ABORT]
        # Its coordinator (back, or moved) tracks the transaction after all.
        m.transactions[tid] = TransactionDescription(tid, 2, "Ongoing", 7, 0, 60_000, now_ms() - 2 * MAX, frozenset({ORDERS}))
        return True

    out = remedy.abort(FakeCluster(m), [remedy.AbortTarget("orders", 0, start_offset=10)], audit=audit,
                       confirm=meanwhile_the_coordinator_is_back)
    assert [r.outcome for r in out.rows] == [Outcome.REFUSED] and "changed since the plan" in out.rows[0].reason
    assert not [r for _n, r in m.sent if type(r).__name__ == "WriteAbortMarker"]
    assert [r["outcome"] for r in audit.records()] == ["refused"]
    assert json.dumps(audit.records())  # plain JSON


# -- 3 and 7: fence as Kafka fences ----------------------------------------------------------------


def open_2pc(m: KafkaModel) -> str:
    tid = tid_on(0, "xa")
    m.transactions[tid] = TransactionDescription(tid, 1, "Ongoing", 7, 0, TWO_PC, now_ms() - 10 * MAX, frozenset({ORDERS}))
    return tid


def test_fence_refuses_an_open_two_phase_commit_transaction_unless_named_with_the_override(tmp_path):
    m = model_with(old(7, start=10))
    tid = open_2pc(m)
    audit = auditlog.AuditLog(tmp_path / "audit.jsonl")
    out = remedy.fence(FakeCluster(m), [tid], audit=audit, confirm=lambda r: True)
    (row,) = out.rows
    assert (row.outcome, row.two_phase_commit) == (Outcome.REFUSED, True) and "two-phase commit" in row.reason
    assert out.exit_code == 3 and m.offsets[ORDERS] == [10, 20]
    assert [r["outcome"] for r in audit.records()] == ["refused"]
    with pytest.raises(remedy.UsageError):
        remedy.fence(FakeCluster(m), pattern="xa-.*", allow_two_phase_commit=True, audit=audit, confirm=lambda r: True)
    done = remedy.fence(FakeCluster(m), [tid], allow_two_phase_commit=True, audit=audit, confirm=lambda r: True)
    assert [r.outcome for r in done.rows] == [Outcome.FENCED]


class BusyCoordinator(FakeCluster):
    """InitProducerId answers CONCURRENT_TRANSACTIONS, then COORDINATOR_LOAD_IN_PROGRESS, then works
    (the coordinator's answers on the fake wire, one per request)."""

    def __init__(self, model, errors):
        super().__init__(model)
        model.init_producer_id_errors[:] = errors
        self.errors_left = model.init_producer_id_errors


def test_fence_retries_busy_coordinators_and_shows_old_and_new_producer_and_the_lso(tmp_path):
    tid = tid_on(0, "busy")
    m = model_with(old(7, start=10, epoch=3))
    m.transactions[tid] = TransactionDescription(tid, 1, "Ongoing", 7, 3, 60_000, now_ms() - 1000, frozenset({ORDERS}))
    cluster = BusyCoordinator(m, ["CONCURRENT_TRANSACTIONS", "COORDINATOR_LOAD_IN_PROGRESS"])
    audit = auditlog.AuditLog(tmp_path / "audit.jsonl")
    out = remedy.fence(cluster, [tid], audit=audit, confirm=lambda r: True)
    (row,) = out.rows
    assert row.outcome is Outcome.FENCED, row.reason
    assert (row.producer_id_before, row.producer_epoch_before, row.producer_id_after, row.producer_epoch_after) == (7, 3, 7, 5)
    assert "CONCURRENT_TRANSACTIONS" in row.reason and "COORDINATOR_LOAD_IN_PROGRESS" in row.reason
    assert row.last_stable_offsets_after == {"orders-0": 21}


def test_fence_does_not_retry_what_kafka_does_not_retry(tmp_path):
    tid = tid_on(0, "auth")
    m = model_with(old(7, start=10))
    m.transactions[tid] = TransactionDescription(tid, 1, "Ongoing", 7, 0, 60_000, now_ms() - 1000, frozenset({ORDERS}))
    cluster = BusyCoordinator(m, ["TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "CONCURRENT_TRANSACTIONS"])
    out = remedy.fence(cluster, [tid], audit=auditlog.AuditLog(tmp_path / "audit.jsonl"), confirm=lambda r: True)
    assert [r.outcome for r in out.rows] == [Outcome.UNKNOWN] and cluster.errors_left == ["CONCURRENT_TRANSACTIONS"]
