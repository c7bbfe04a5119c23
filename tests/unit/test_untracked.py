"""The first minutes of a transaction its coordinator does not track, and of one past its own
timeout: one time rule (verdicts), and every command that shows it (no broker)."""

from __future__ import annotations

import json
import time

import pytest

from kafkatxn import check, diagnose, diagnose_rows, facts_cluster, hanging, verdicts, verdicts_age, verdicts_groups
from kafkatxn.auditlog import AuditLog
from kafkatxn.model import PartitionInfo, ProducerState, TopicPartition, TransactionDescription, TransactionListing
from kafkatxn.remedy import decide
from kafkatxn.remedy.abort import abort
from kafkatxn.remedy.decide import AbortTarget, Outcome
from kafkatxn.remedy.fence import fence
from tests.support.cli_helpers import run_cli
from tests.support.fake_kafka import FakeCluster, KafkaModel

MAX = 900_000  # the brokers' default transaction.max.timeout.ms
OWN = 10_000  # the producer's own transaction timeout
A0 = TopicPartition("a", 0)
A1 = TopicPartition("a", 1)
V = verdicts.Verdict


def now_ms() -> int:
    return int(time.time() * 1000)


def producer(pid=7, start=5, idle_ms=2_000, now=None, epoch=0):
    now = now_ms() if now is None else now
    return ProducerState(pid, epoch, 3, now - idle_ms, -1, start)


def description(partitions=(A1,), pid=7, state="Ongoing", timeout_ms=OWN, start_ms=None):
    start = now_ms() - 1_000 if start_ms is None else start_ms
    return TransactionDescription("app", 1, state, pid, 0, timeout_ms, start, frozenset(partitions))


def classified(txn_producer, d):
    view = verdicts.CoordinatorView(transactional_ids={txn_producer.producer_id: "app"}, descriptions={"app": d} if d else {})
    return verdicts.classify(verdicts.OpenTransaction(A0, txn_producer), view)


# -- the time rule -------------------------------------------------------------------------------


def test_the_deadline_is_the_producers_own_timeout_where_its_coordinator_reports_it():
    now = 1_700_000_000_000
    p = producer(idle_ms=2_000, now=now)
    c = classified(p, description([A1]))  # its coordinator answers for producer 7, without a-0
    assert (c.verdict, c.reason) == (V.HANGING, verdicts.REASON_NOT_TRACKED)
    assert verdicts.own_timeout_ms(c) == OWN
    assert verdicts.hanging_deadline_ms(c, MAX) == p.last_timestamp_ms + OWN
    assert verdicts.is_due(c, p.last_timestamp_ms + OWN, MAX) is False  # strictly past, as Kafka's tool compares
    assert verdicts.is_due(c, p.last_timestamp_ms + OWN + 1, MAX) is True
    assert verdicts.is_due(c, p.last_timestamp_ms + 1, 0) is True  # --max-transaction-timeout 0: on purpose, now
    assert verdicts.deadline_source(c, MAX) == "its producer's 10000 ms transaction timeout"


def test_without_the_coordinators_word_on_its_timeout_the_maximum_applies():
    p = producer()
    no_id = verdicts.classify(verdicts.OpenTransaction(A0, p), verdicts.CoordinatorView())
    other = classified(p, description([A1], pid=8))
    tracked = classified(p, description([A0]))
    two_pc = classified(p, description([A1], timeout_ms=2_147_483_647))
    for c in (no_id, other, two_pc):
        assert verdicts.own_timeout_ms(c) is None
        assert verdicts.hanging_deadline_ms(c, MAX) == p.last_timestamp_ms + MAX
        assert verdicts.hanging_deadline_ms(c, None) is None
    assert verdicts.own_timeout_ms(tracked) is None and tracked.verdict is V.LONG_RUNNING


def test_an_untracked_transaction_is_untracked_until_its_deadline_then_hanging():
    p = producer(idle_ms=0)
    c = classified(p, description([A1]))
    last = p.last_timestamp_ms
    assert verdicts.pin_verdict(c, last + 5_000, MAX) is verdicts.PinVerdict.UNTRACKED
    assert verdicts.pin_verdict(c, last + OWN + 1, MAX) is verdicts.PinVerdict.HANGING
    waiting = verdicts.with_deadline(c, last + 5_000, MAX)
    assert (waiting.verdict, waiting.hanging_at_ms) == (V.UNTRACKED, last + OWN + 1)
    assert verdicts.with_deadline(c, last + OWN + 1, MAX).verdict is V.HANGING
    # Its coordinator could not say: within the maximum no producer's timeout has passed.
    unsure = verdicts.classify(verdicts.OpenTransaction(A0, p), verdicts.CoordinatorView(
        transactional_ids={7: "app"}, unanswered_ids={"app": ()}))
    assert unsure.verdict is V.UNDETERMINED
    assert verdicts.pin_verdict(unsure, last + 5_000, MAX) is verdicts.PinVerdict.NOT_HANGING
    assert verdicts.pin_verdict(unsure, last + MAX + 1, MAX) is verdicts.PinVerdict.UNDETERMINED


def test_past_its_own_timeout_is_a_warning_until_its_coordinator_had_its_chance():
    start = 1_700_000_000_000
    txn = verdicts.OpenTransaction(A0, producer(now=start), "app", description([A0], start_ms=start, timeout_ms=OWN))
    grace = verdicts_age.overdue_grace_ms()
    assert grace == verdicts_age.DEFAULT_ABORT_CLEANUP_INTERVAL_MS + verdicts_age.OVERDUE_MARGIN_MS
    within = start + OWN + 1
    assert verdicts_age.is_past_timeout(txn, within) and not verdicts_age.is_overdue(txn, within)
    assert verdicts_age.is_overdue(txn, start + OWN + grace + 1)
    assert not verdicts_age.is_overdue(txn, start + OWN + grace + 1, abort_cleanup_interval_ms=30_000)  # a slower coordinator
    P, B = verdicts.PinVerdict, verdicts_groups.BlockVerdict
    assert verdicts_groups.block_verdict(P.NOT_HANGING, txn, start + 1) is B.in_flight
    assert verdicts_groups.block_verdict(P.NOT_HANGING, txn, within) is B.past_timeout
    assert verdicts_groups.block_verdict(P.NOT_HANGING, txn, start + OWN + grace + 1) is B.overdue
    S = verdicts_groups.Severity
    assert verdicts_groups.block_severity(B.in_flight, False, old=False) is S.ok
    assert verdicts_groups.block_severity(B.past_timeout, False, old=False) is S.warning
    assert verdicts_groups.block_severity(B.untracked, False, old=False) is S.warning
    assert verdicts_groups.block_severity(B.overdue, False, old=False) is S.critical
    assert verdicts_groups.block_severity(B.hanging, False, old=False) is S.critical


# -- over a fake cluster -------------------------------------------------------------------------


def untracked_cluster(idle_ms=2_000, own_ms=OWN, closes_after_first_look=False) -> FakeCluster:
    """a-0 holds producer 7's transaction; its coordinator's transaction (id "app") has a-1 only."""
    now = now_ms()
    model = KafkaModel(brokers=(1,))
    model.add_partition("a", 0, leader=1)
    model.add_partition("a", 1, leader=1)
    model.add_partition("__transaction_state", 0, leader=1)
    model.producers[A0] = [producer(idle_ms=idle_ms, now=now)]
    model.producers[A1] = [producer(idle_ms=idle_ms, now=now)]
    model.offsets[A0] = [5, 30]
    model.offsets[A1] = [5, 30]
    model.listings = [("app", 7, "Ongoing")]
    model.coordinators = {"app": 1}
    model.transactions = {"app": description([A1], timeout_ms=own_ms, start_ms=now - idle_ms)}
    model.max_timeouts = {1: str(MAX)}
    fake = FakeCluster(model)
    if closes_after_first_look:
        look = fake.describe_producers

        def first_look_then_closed(partitions, broker_id=None):
            answer = look(partitions, broker_id)
            model.close_transaction(A0, 7)  # its producer ends it right after
            return answer

        fake.describe_producers = first_look_then_closed
    return fake


@pytest.fixture
def fake_cli(monkeypatch):
    def use(fake):
        monkeypatch.setattr("kafkatxn.kafka.Cluster", lambda config: fake)
    return use


def test_hanging_lists_an_untracked_transaction_with_the_time_it_hangs_from(capsys, fake_cli):
    fake = untracked_cluster()
    result = hanging.find_hanging(fake)
    assert result.hanging == [] and result.undetermined == []
    (row,) = result.untracked
    assert (row.topic, row.partition, row.producer_id, row.start_offset, row.transactional_id) == ("a", 0, 7, 5, "app")
    assert row.hanging_at_ms == fake.model.producers[A0][0].last_timestamp_ms + OWN + 1
    assert 0 < row.hanging_in_ms <= OWN and row.transaction_age_ms is not None  # aged as every open transaction
    fake_cli(untracked_cluster())
    out = run_cli(capsys, "hanging", "-b", "fake:9092", "-o", "json")
    assert out.code == 1, out.stderr  # never 0 while it holds the LSO
    assert json.loads(out.stdout)["untracked"][0]["hanging_at_ms"] > 0
    assert "hanging from" in out.stderr and "--max-transaction-timeout 0" in out.stderr


def test_past_its_own_timeout_it_is_hanging_though_the_maximum_is_fifteen_minutes():
    result = hanging.find_hanging(untracked_cluster(idle_ms=OWN + 1_000))
    assert [(r.topic, r.partition, r.reason) for r in result.hanging] == [("a", 0, verdicts.REASON_NOT_TRACKED)]
    assert result.untracked == []


def _asked_again_by_the_dating_fetch(fake) -> bool:
    """The one question again is the Fetch that dates the transaction, sent after the coordinators
    answered (its LSO moved past the start offset): DescribeProducers is asked once."""
    fetches = [r for _node, r in fake.model.sent if type(r).__name__ == "Fetch"]
    return len(fake.called("describe_producers")) == 1 and len(fetches) == 1 and fetches[0].partitions[0].tp == A0


def test_a_transaction_that_ended_between_two_answers_is_asked_again_not_reported():
    fake = untracked_cluster(closes_after_first_look=True)
    result = hanging.find_hanging(fake)
    assert result.untracked == [] and result.hanging == [] and not result.missing
    assert _asked_again_by_the_dating_fetch(fake)


def test_one_past_its_timeout_its_coordinator_just_aborted_is_asked_again_never_paged():
    """The coordinator's rollback of a timed-out transaction lands between DescribeProducers and
    DescribeTransactions: the partition looked open, its coordinator no longer lists it (seen on Kafka
    4.4: check paged CRITICAL at the moment the broker logged the rollback)."""
    def cluster():
        fake = untracked_cluster(idle_ms=OWN + 1_000)
        fake.model.transactions["app"] = description([], state="CompleteAbort", timeout_ms=OWN)
        describe = fake.describe_transactions

        def answered_after_the_markers(transactional_ids):
            for tp in (A0, A1):  # CompleteAbort: its markers are written by the time it answers so
                fake.model.close_transaction(tp, 7)
            return describe(transactional_ids)

        fake.describe_transactions = answered_after_the_markers
        return fake

    fake = cluster()
    result = hanging.find_hanging(fake)
    assert result.hanging == [] and result.untracked == [] and not result.missing
    assert _asked_again_by_the_dating_fetch(fake)
    checked = check.evaluate(facts_cluster.gather_snapshot(cluster()))
    assert checked.exit_code != 2, checked.nagios_text()
    assert not [f for f in checked.findings if "hanging" in f.kind], checked.nagios_text()


def test_check_warns_and_names_it_and_the_exporters_oldest_age_counts_it():
    snap = facts_cluster.gather_snapshot(untracked_cluster())
    result = check.evaluate(snap)
    assert result.exit_code == 1, result.nagios_text()
    (finding,) = [f for f in result.findings if f.kind == "untracked_transaction"]
    assert "a-0" in finding.message and "(app)" in finding.message and "hanging from" in finding.message
    assert result.facts["untracked_transactions"] == 1
    assert result.facts["transaction_age_max_ms"] >= 2_000  # not 0: it is the oldest open one
    from kafkatxn.exporter_metrics import metric_families

    text = {m.name: m for m in metric_families(snap)}
    assert text["kafkatxn_untracked_transactions"].samples[0].value == 1
    assert text["kafkatxn_untracked_transaction_seconds_until_hanging"].samples[0].labels["transactional_id"] == "app"


def test_abort_shows_when_it_becomes_abortable_and_writes_nothing_before(tmp_path):
    fake = untracked_cluster()
    audit = AuditLog(tmp_path / "audit.jsonl")
    plan = abort(fake, all_hanging=True, audit=audit, confirm=lambda rows: True, dry_run=True)
    (row,) = plan.rows
    assert row.outcome is Outcome.NOT_HANGING_YET and plan.exit_code == 1
    assert "hanging from" in row.reason and "--max-transaction-timeout 0" in row.reason and "risk" in row.reason
    named = abort(fake, [AbortTarget("a", 0, start_offset=5)], audit=audit, confirm=lambda rows: True)
    assert [r.outcome for r in named.rows] == [Outcome.NOT_HANGING_YET] and named.exit_code == 1
    assert fake.called("write_abort_marker") == [] and fake.model.offsets[A0] == [5, 30]
    # On purpose, now: the operator's maximum of 0 makes it due.
    done = abort(fake, [AbortTarget("a", 0, start_offset=5)], audit=audit, confirm=lambda rows: True,
                 max_transaction_timeout_ms=0)
    assert [r.outcome for r in done.rows] == [Outcome.ABORTED], done.rows
    assert fake.model.offsets[A0][0] > 5


def test_diagnose_offers_abort_never_fence_for_an_untracked_transaction():
    fake = untracked_cluster()
    fake.model.groups = {"billing": {A0: 5}}
    result = diagnose.run(fake, ["billing"])
    (t,) = result.transactions
    assert t.verdict is diagnose_rows.TxnVerdict.untracked and t.action is diagnose_rows.Action.abort
    assert t.command == "kafkatxn abort --topic a --partition 0 --start-offset 5"
    assert t.release_command == "kafkatxn abort --topic a --partition 0 --start-offset 5 --max-transaction-timeout 0"
    assert t.until_ms == fake.model.producers[A0][0].last_timestamp_ms + OWN + 1
    assert "fence" not in f"{t.command} {t.release_command} {t.reason}"
    assert result.exit_code == 1  # never 0 while the group is blocked


def test_fence_says_still_pinned_when_the_partition_it_could_not_end_did_not_move(tmp_path):
    fake = untracked_cluster()
    audit = AuditLog(tmp_path / "audit.jsonl")
    result = fence(fake, ["app"], audit=audit, confirm=lambda rows: True)
    (row,) = result.rows
    assert row.outcome is Outcome.STILL_PINNED, row.reason
    assert "a-0@5" in row.reason and "kafkatxn abort --topic a --partition 0 --start-offset 5" in row.reason
    assert row.last_stable_offsets_before == {"a-0": 5, "a-1": 5} and row.last_stable_offsets_after["a-0"] == 5
    assert result.exit_code == 3
    records = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert records[-1]["outcome"] == "still pinned"


def test_verify_fence_is_fenced_when_nothing_is_left_pinned():
    before = description([A1])
    after = TransactionDescription("app", 1, "Empty", 7, 2, OWN, -1, frozenset())
    assert decide.verify_fence(before, after, []).outcome is Outcome.FENCED
    pinned = decide.verify_fence(before, after, [], still_pinned=[(A0, 5)])
    assert pinned.outcome is Outcome.STILL_PINNED and decide.exit_code([pinned.outcome]) == 3


def test_fence_names_the_partitions_it_could_not_look_at_never_calls_them_clear(tmp_path):
    fake = untracked_cluster()
    fake.model.brokers = (1, 2)
    fake.model.add_partition("b", 0, leader=2)
    fake.model.down = {2}  # its producers cannot be described: a transaction there would go unseen
    result = fence(fake, ["app"], audit=AuditLog(tmp_path / "audit.jsonl"), confirm=lambda rows: True)
    (row,) = result.rows
    assert row.outcome is Outcome.STILL_PINNED and "not checked for other open transactions" in row.reason, row.reason
    assert "b-0" in row.reason


def test_at_80_columns_abort_and_untracked_rows_keep_what_names_the_transaction_and_when_it_hangs(tmp_path):
    from kafkatxn.output import render_to_string

    fake = untracked_cluster()
    plan = abort(fake, all_hanging=True, audit=AuditLog(tmp_path / "audit.jsonl"), confirm=lambda rows: True, dry_run=True)
    header = render_to_string(plan.rows, "table", width=80).splitlines()[0].split()
    assert "start_offset" in header, header
    rows = hanging.find_hanging(fake).untracked
    header = render_to_string(rows, "table", width=80).splitlines()[0].split()
    assert {"start_offset", "hanging_at"} <= set(header), header


def test_diagnose_drops_a_pin_the_group_snapshot_found_ended_without_describing_it_again():
    fake = untracked_cluster(closes_after_first_look=True)
    fake.model.groups = {"billing": {A0: 5}}
    result = diagnose.run(fake, ["billing"])
    assert [t.verdict for t in result.transactions] == []  # it ended: no untracked transaction to act on
    assert _asked_again_by_the_dating_fetch(fake)


def test_still_open_at_its_start_offset_is_not_described_again_and_lower_it_is():
    """The dating Fetch's LSO at the transaction's start offset: still open, nothing asked again. A
    LSO below it (another transaction pins the partition lower) says nothing of this one:
    DescribeProducers is asked again, afresh."""
    fake = untracked_cluster()
    assert fake.model.offsets[A0][0] == producer().current_txn_start_offset  # pinned at its start
    result = hanging.find_hanging(fake)
    assert [r.partition for r in result.untracked] == [0]
    assert len(fake.called("describe_producers")) == 1
    lower = untracked_cluster()
    lower.model.offsets[A0] = [3, 30]
    hanging.find_hanging(lower)
    assert len(lower.called("describe_producers")) == 2
