"""The hanging-transaction rule over hand-made snapshots, and the snapshot flow over a fake cluster (no broker)."""

from __future__ import annotations

import time

import pytest

from kafkatxn import hanging, verdicts
from kafkatxn.model import Broker, TransactionalId, Missing, PartitionInfo, ProducerState, TopicPartition, TransactionDescription, TransactionListing
from kafkatxn.errors import NotFoundError
from tests.support.cli_helpers import run_cli
from tests.support.fake_kafka import FakeCluster, KafkaModel

NOW = 1_700_000_000_000
MAX = 900_000
A0 = TopicPartition("a", 0)
A1 = TopicPartition("a", 1)


def producer(pid, start=5, idle_ms=MAX + 1, epoch=0, coord=-1, now=NOW):
    return ProducerState(pid, epoch, 3, now - idle_ms, coord, start)


def description(tid, pid, partitions=(), state="Ongoing", epoch=0):
    return TransactionDescription(tid, 1, state, pid, epoch, 60_000, NOW - 1000, frozenset(partitions))


# -- candidates ---------------------------------------------------------------------------------


def test_candidate_needs_an_open_transaction_idle_strictly_longer_than_the_max_timeout():
    assert verdicts.is_candidate(producer(1, idle_ms=MAX + 1), NOW, MAX)
    assert not verdicts.is_candidate(producer(1, idle_ms=MAX), NOW, MAX)  # Kafka's tool: strictly greater
    assert not verdicts.is_candidate(producer(1, idle_ms=MAX * 10, start=-1), NOW, MAX)  # no open transaction


def test_open_transactions_are_the_producers_with_a_start_offset():
    states = {
        A0: [producer(1), producer(2, idle_ms=1000), producer(3, start=-1)],
        A1: [producer(4, start=0)],
    }
    found = verdicts.open_transactions(states)
    assert [(c.tp, c.producer.producer_id) for c in found] == [(A0, 1), (A0, 2), (A1, 4)]
    assert found[2].start_offset == 0  # offset 0 is an open transaction, not "none"


# -- classification -----------------------------------------------------------------------------


def classify(view, tp=A0, pid=7, **kw):
    return verdicts.classify(verdicts.OpenTransaction(tp, producer(pid, **kw)), view)


def test_no_transactional_id_for_the_producer_is_hanging():
    c = classify(verdicts.CoordinatorView())
    assert c.verdict is verdicts.Verdict.HANGING
    assert c.reason == verdicts.REASON_NO_TRANSACTIONAL_ID


def test_missing_listing_from_a_broker_makes_an_unmapped_producer_undetermined_not_hanging():
    gap = Missing(TopicPartition("__transaction_state", 3), "no leader: its coordinator is unavailable")
    c = classify(verdicts.CoordinatorView(ids_missing=(gap,)))
    assert c.verdict is verdicts.Verdict.UNDETERMINED
    assert c.missing == (gap,)  # typed: which coordinator's partition did not answer
    assert "__transaction_state-3" in c.reason


def test_id_unknown_to_its_coordinator_is_hanging():
    view = verdicts.CoordinatorView(transactional_ids={7: "app"}, unknown_ids=frozenset({"app"}))
    c = classify(view)
    assert (c.verdict, c.reason, c.transactional_id) == (verdicts.Verdict.HANGING, verdicts.REASON_UNKNOWN_TO_COORDINATOR, "app")


def test_coordinator_transaction_without_this_partition_is_hanging():
    view = verdicts.CoordinatorView(transactional_ids={7: "app"}, descriptions={"app": description("app", 7, [A1], "Empty")})
    c = classify(view, tp=A0)
    assert (c.verdict, c.reason) == (verdicts.Verdict.HANGING, verdicts.REASON_NOT_TRACKED)
    assert c.description.state == "Empty"


def test_coordinator_tracking_the_partition_is_long_running_not_hanging():
    view = verdicts.CoordinatorView(transactional_ids={7: "app"}, descriptions={"app": description("app", 7, [A0, A1])})
    assert classify(view, tp=A0).verdict is verdicts.Verdict.LONG_RUNNING


def test_newer_epoch_at_the_coordinator_still_tracks_the_partition():
    # Transaction version 2 bumps the epoch when the transaction ends; its marker (newer epoch,
    # same producer id) still closes the partition's transaction, so this is not hanging.
    view = verdicts.CoordinatorView(
        transactional_ids={7: "app"}, descriptions={"app": description("app", 7, [A0], "PrepareCommit", epoch=4)}
    )
    assert classify(view, tp=A0, epoch=3).verdict is verdicts.Verdict.LONG_RUNNING


def test_coordinator_transaction_of_another_producer_id_is_hanging():
    view = verdicts.CoordinatorView(transactional_ids={7: "app"}, descriptions={"app": description("app", 8, [A0])})
    c = classify(view, tp=A0, pid=7)
    assert c.verdict is verdicts.Verdict.HANGING
    assert c.reason.startswith(verdicts.REASON_OTHER_PRODUCER) and "8" in c.reason


def test_unanswered_coordinator_is_undetermined_with_its_reason():
    gap = Missing(TransactionalId("app"), "timed out")
    view = verdicts.CoordinatorView(transactional_ids={7: "app"}, unanswered_ids={"app": (gap,)})
    c = classify(view)
    assert (c.verdict, c.reason, c.missing) == (verdicts.Verdict.UNDETERMINED, "its coordinator did not answer: timed out", (gap,))


# -- rows ---------------------------------------------------------------------------------------


def test_hanging_row_carries_the_lso_lag_and_whether_it_holds_the_lso():
    c = verdicts.Classification(verdicts.OpenTransaction(A0, producer(7, start=5, idle_ms=MAX + 60_000, coord=2)),
                               verdicts.Verdict.HANGING, verdicts.REASON_NOT_TRACKED, "app", description("app", 7, [], "Empty"))
    row = hanging.hanging_row(c, NOW, lso={A0: 5}, hw={A0: 42})
    assert (row.start_offset, row.last_stable_offset, row.high_watermark, row.lso_lag_messages) == (5, 5, 42, 37)
    assert row.holds_lso is True
    assert row.duration_ms == MAX + 60_000
    assert (row.transactional_id, row.coordinator_state, row.coordinator_epoch) == ("app", "Empty", 2)
    later = hanging.hanging_row(c, NOW, lso={A0: 3}, hw={A0: 42})
    assert later.holds_lso is False  # an earlier open transaction pins the LSO
    unknown = hanging.hanging_row(c, NOW, lso={}, hw={})
    assert unknown.lso_lag_messages is None and unknown.holds_lso is None


def test_max_timeout_is_the_largest_broker_value():
    assert verdicts.max_timeout_from_configs(["60000", None, "120000", "junk"]) == 120_000
    assert verdicts.max_timeout_from_configs([None]) is None


# -- snapshot flow over a fake cluster ----------------------------------------------------------


def hanging_cluster(partitions, producers, listings=(), descriptions=(), max_timeouts=None, offsets=None, silent_listers=(),
                    log_leader=None):
    """The brokers holding ``partitions``; ``listings`` are listed by their coordinator, and those
    without a description are unknown to it; ``silent_listers`` time out on ListTransactions.
    The transaction log's one partition is led by the first broker unless told otherwise (-1: no leader)."""
    brokers = sorted({r for p in partitions for r in p.replicas} | set(silent_listers))
    model = KafkaModel(brokers=tuple(brokers))
    for p in partitions:
        model.add_partition(p.topic, p.partition, leader=p.leader, replicas=p.replicas)
    leader = brokers[0] if log_leader is None else log_leader
    model.add_partition("__transaction_state", 0, leader=leader, replicas=(brokers[0],))
    model.producers.update({tp: list(states) for tp, states in producers.items()})
    model.listings = [(t.transactional_id, t.producer_id, t.state) for t in listings]
    model.coordinators = {t.transactional_id: t.coordinator_id for t in listings}
    model.transactions = {d.transactional_id: d for d in descriptions}
    model.max_timeouts = dict(max_timeouts or {b: str(MAX) for b in brokers})
    for tp, (lso, hw) in (offsets or {}).items():
        model.offsets[tp] = [lso, hw]
    for b in silent_listers:
        model.timeouts[b] = {"ListTransactions"}
    return FakeCluster(model)


def listed_producer_ids(fake):
    return [c[2] for c in fake.called("list_transactions")]


def part(topic, partition, leader=1, replicas=(1,)):
    return PartitionInfo(topic, partition, leader, tuple(replicas), tuple(replicas), topic.startswith("__"))


def now_ms():
    return int(time.time() * 1000)


def mixed_cluster(**kw):
    """a-0: hanging (id unknown) and a fresh open txn; a-1: long-running tracked; b-0: idempotent only."""
    now = now_ms()
    producers = {
        A0: [producer(1, start=10, now=now), producer(2, start=12, idle_ms=5_000, now=now)],
        A1: [producer(3, start=0, now=now)],
        TopicPartition("b", 0): [producer(4, start=-1, now=now)],
    }
    return hanging_cluster(
        [part("a", 0), part("a", 1), part("b", 0)],
        producers,
        listings=[TransactionListing("gone", 1, "Empty", 1), TransactionListing("busy", 3, "Ongoing", 1)],
        descriptions=[description("busy", 3, [A1])],  # "gone" is listed but not described: not found
        offsets={A0: (10, 20), A1: (0, 4)},
        **kw,
    )


def test_scan_reports_hanging_long_running_and_untracked_separately():
    fake = mixed_cluster()
    result = hanging.find_hanging(fake)
    assert [(r.topic, r.partition, r.producer_id, r.reason) for r in result.hanging] == [
        ("a", 0, 1, verdicts.REASON_UNKNOWN_TO_COORDINATOR)
    ]
    assert [(r.topic, r.partition, r.producer_id, r.transactional_id) for r in result.long_running] == [("a", 1, 3, "busy")]
    assert result.hanging[0].lso_lag_messages == 10
    assert (result.open_transactions, result.candidates, result.partitions_scanned) == (3, 2, 4)  # + __transaction_state-0
    # The fresh open transaction (producer 2) no coordinator knows is looked up too: untracked, not
    # hanging before the maximum timeout (its own is not known); the idempotent producer never is.
    # Not listed, it is listed again between two probes of the log's leaders (gather._listed_between_probes).
    assert listed_producer_ids(fake) == [[1, 2, 3], [2]]
    assert [(r.producer_id, r.deadline) for r in result.untracked] == [(2, f"the {MAX} ms maximum transaction timeout")]
    assert result.max_transaction_timeout_source.startswith("broker config")
    assert not result.missing


def test_no_open_transaction_means_no_coordinator_lookups():
    now = now_ms()
    fake = hanging_cluster([part("a", 0)], {A0: [producer(1, start=-1, idle_ms=1000, now=now)]})
    result = hanging.find_hanging(fake)
    assert result.hanging == [] and result.long_running == [] and result.untracked == []
    assert fake.called("list_transactions") == [] and fake.called("describe_transactions") == []


def test_whole_cluster_scan_includes_internal_topics():
    now = now_ms()
    offsets_tp = TopicPartition("__consumer_offsets", 3)
    fake = hanging_cluster([part("a", 0), part("__consumer_offsets", 3)], {offsets_tp: [producer(9, now=now)]})
    result = hanging.find_hanging(fake)
    (scan,) = fake.called("describe_producers")
    assert offsets_tp in scan[1]
    assert [(r.topic, r.reason) for r in result.hanging] == [("__consumer_offsets", verdicts.REASON_NO_TRANSACTIONAL_ID)]


def test_broker_id_scans_its_replicas_and_asks_that_broker():
    fake = hanging_cluster([part("a", 0, 1, (1, 2)), part("a", 1, 2, (2, 3)), part("b", 0, 3, (3,))], {})
    hanging.find_hanging(fake, broker_id=2)
    assert fake.called("describe_producers") == [("describe_producers", [A0, A1], 2)]
    with pytest.raises(NotFoundError, match="unknown broker id 9"):
        hanging.find_hanging(fake, broker_id=9)


def test_default_max_timeout_is_read_from_the_brokers_and_an_override_skips_them():
    now = now_ms()
    fake = hanging_cluster(
        [part("a", 0, 1, (1, 2))],
        {A0: [producer(1, idle_ms=90_000, now=now), producer(2, start=7, idle_ms=130_000, now=now)]},
        max_timeouts={1: "60000", 2: "120000"},
    )
    result = hanging.find_hanging(fake)
    assert result.max_transaction_timeout_ms == 120_000
    assert [r.producer_id for r in result.hanging] == [2]  # 90 s idle is within the largest timeout

    fake.calls.clear()
    result = hanging.find_hanging(fake, max_transaction_timeout_ms=10_000)
    assert sorted(r.producer_id for r in result.hanging) == [1, 2]
    assert fake.called("broker_configs") == []


def test_incomplete_listing_makes_unmapped_producers_undetermined_instead_of_hanging():
    fake = mixed_cluster(silent_listers=[2], log_leader=2)
    fake.model.producers[TopicPartition("b", 0)].append(producer(5, now=now_ms()))  # old, open, no listing found
    result = hanging.find_hanging(fake)
    # Producer 1's id was listed (and is unknown to its coordinator): hanging. Producer 5's id may
    # sit on the log partition whose leader did not answer: undetermined, never guessed.
    assert [r.producer_id for r in result.hanging] == [1]
    assert any(m.subject == Broker(2) and m.reason == "timed out" for m in result.missing)
    (u,) = result.undetermined
    assert (u.topic, u.partition, u.producer_id) == ("b", 0, 5)
    assert u.missing == ["__transaction_state-0: leader broker 2 did not answer ListTransactions"]
    (c,) = [c for c in result.classifications if c.verdict is verdicts.Verdict.UNDETERMINED]
    assert [m.subject for m in c.missing] == [TopicPartition("__transaction_state", 0)]


def test_a_silent_broker_leading_no_log_partition_does_not_block_the_verdict():
    fake = mixed_cluster(silent_listers=[2], log_leader=1)
    fake.model.producers[TopicPartition("b", 0)].append(producer(5, now=now_ms()))
    result = hanging.find_hanging(fake)
    assert sorted(r.producer_id for r in result.hanging) == [1, 5] and result.undetermined == []


def test_a_log_partition_without_leader_makes_unmapped_producers_undetermined():
    # KRaft drops a dead broker from the metadata: every broker listed answered, yet the log has a gap.
    fake = mixed_cluster(log_leader=-1)
    fake.model.producers[TopicPartition("b", 0)].append(producer(5, now=now_ms()))
    result = hanging.find_hanging(fake)
    assert [r.producer_id for r in result.hanging] == [1]  # its id was listed and described: still decided
    assert [(u.producer_id, u.missing) for u in result.undetermined] == [
        (5, ["__transaction_state-0: no leader: its coordinator is unavailable"])
    ]


# -- the command's exit codes -------------------------------------------------------------------


@pytest.fixture
def fake_cli(monkeypatch):
    holder = {}

    def use(fake):
        holder["fake"] = fake
        monkeypatch.setattr("kafkatxn.kafka.Cluster", lambda config: fake)

    return use


def test_command_exits_2_on_hanging_and_prints_its_reason(capsys, fake_cli):
    fake_cli(mixed_cluster())
    result = run_cli(capsys, "hanging", "-b", "fake:9092", "-o", "jsonl")
    assert result.code == 2, result.stderr
    hanging_rows = [r for r in result.records("jsonl") if r["section"] == "hanging"]
    assert [(r["topic"], r["partition"], r["reason"]) for r in hanging_rows] == [("a", "0", verdicts.REASON_UNKNOWN_TO_COORDINATOR)]


def test_command_exits_1_for_long_running_only_and_0_for_nothing(capsys, fake_cli):
    now = now_ms()
    tracked = hanging_cluster(
        [part("a", 1)], {A1: [producer(3, start=0, now=now)]},
        listings=[TransactionListing("busy", 3, "Ongoing", 1)], descriptions=[description("busy", 3, [A1])],
    )
    fake_cli(tracked)
    assert run_cli(capsys, "hanging", "-b", "fake:9092").code == 1
    fake_cli(hanging_cluster(
        [part("a", 0)], {A0: [producer(1, idle_ms=10, now=now)]},
        listings=[TransactionListing("fresh", 1, "Ongoing", 1)], descriptions=[description("fresh", 1, [A0])],
    ))
    result = run_cli(capsys, "hanging", "-b", "fake:9092", "-o", "json")
    assert result.code == 0, result.stderr
    assert '"hanging": []' in result.stdout


def test_command_exits_3_when_a_candidate_cannot_be_checked(capsys, fake_cli):
    now = now_ms()
    fake_cli(hanging_cluster([part("a", 0)], {A0: [producer(1, now=now)]}, silent_listers=[1]))
    result = run_cli(capsys, "hanging", "-b", "fake:9092", "--max-transaction-timeout", "1s")
    assert result.code == 3
    assert "incomplete" in result.stderr and "timed out" in result.stderr
