"""Producer rows and the per-broker/per-topic summary, over hand-made snapshots (no broker)."""

from __future__ import annotations

import json

import pytest

from kafkatxn.output import render_to_string
from kafkatxn import facts, producers
from kafkatxn.kafka import retry
from kafkatxn.model import Broker, Missing, Partial, PartitionInfo, ProducerState, TopicPartition, TransactionListing
from kafkatxn.errors import NotFoundError
from kafkatxn.model import TransactionDescription
from tests.support.fake_kafka import FakeCluster, KafkaModel, as_columns

NOW = 1_700_000_000_000


def state(pid, epoch=0, seq=0, ts=NOW - 1000, coord=-1, start=-1):
    return ProducerState(pid, epoch, seq, ts, coord, start)


def tp(topic, partition):
    return TopicPartition(topic, partition)


def snapshot(states, reported_by=None, tids=None, missing=()):
    reported_by = reported_by or {t: 1 for t in states}
    return facts.ProducerStates(NOW, states, reported_by, dict(tids or {}), list(missing))


def test_rows_carry_every_describe_producers_field_and_the_age():
    snap = snapshot(
        {tp("a", 0): [state(7, epoch=3, seq=41, ts=NOW - 90_500, coord=2, start=120)]},
        reported_by={tp("a", 0): 2},
        tids={7: "app-1"},
    )
    (row,) = producers.producer_rows(snap)
    assert row == producers.ProducerRow(
        topic="a", partition=0, broker_id=2, producer_id=7, producer_epoch=3, last_sequence=41,
        last_timestamp_ms=NOW - 90_500, age_ms=90_500, coordinator_epoch=2,
        current_txn_start_offset=120, transactional_id="app-1",
    )


def test_idempotent_producer_has_no_transactional_id_and_unknown_timestamp_no_age():
    snap = snapshot({tp("a", 0): [state(5, ts=-1)]})
    (row,) = producers.producer_rows(snap)
    assert row.transactional_id is None
    assert row.age_ms is None
    assert "age" not in json.loads(render_to_string([row], "json"))[0]  # machine output: age_ms only, an integer or null


def test_a_producer_clock_ahead_of_ours_gives_a_negative_age():
    (row,) = producers.producer_rows(snapshot({tp("a", 0): [state(5, ts=NOW + 2000)]}))
    assert row.age_ms == -2000
    assert "-2s" in render_to_string([row], "table")  # tables show it human; machine keys keep integers


def test_rows_are_ordered_by_partition_then_producer_id():
    snap = snapshot({tp("b", 0): [state(9), state(3)], tp("a", 10): [state(1)], tp("a", 2): [state(4)]})
    order = [(r.topic, r.partition, r.producer_id) for r in producers.producer_rows(snap)]
    assert order == [("a", 2, 4), ("a", 10, 1), ("b", 0, 3), ("b", 0, 9)]


def test_summary_counts_distinct_producers_states_and_open_transactions_per_broker_and_topic():
    states = {
        tp("a", 0): [state(1, start=5), state(2)],  # broker 1
        tp("a", 1): [state(1, start=7), state(3)],  # broker 2; producer 1's transaction spans a-0 and a-1
        tp("b", 0): [state(4, start=0)],  # broker 1
        tp("b", 1): [],  # broker 2, no producers: still a partition described
    }
    reported_by = {tp("a", 0): 1, tp("a", 1): 2, tp("b", 0): 1, tp("b", 1): 2}
    rows = producers.summarize(snapshot(states, reported_by))
    S = producers.ProducerSummaryRow
    assert rows == [
        S("broker", 1, None, partitions=2, active_producer_ids=3, producer_states=3, open_transactions=2),
        S("broker", 2, None, partitions=2, active_producer_ids=2, producer_states=2, open_transactions=1),
        S("topic", None, "a", partitions=2, active_producer_ids=3, producer_states=4, open_transactions=1),
        S("topic", None, "b", partitions=2, active_producer_ids=1, producer_states=1, open_transactions=1),
    ]


def test_summary_of_nothing_is_empty():
    assert producers.summarize(snapshot({})) == []


def partition(topic, number, leader, replicas):
    return PartitionInfo(topic, number, leader, tuple(replicas), tuple(replicas))


def test_partitions_for_broker_keeps_those_it_holds_a_replica_of():
    parts = [partition("a", 0, 1, [1, 2]), partition("a", 1, 2, [2, 3]), partition("b", 0, 3, [3, 1])]
    chosen = facts.partitions_for_broker(parts, 1, [1, 2, 3])
    assert [p.tp for p in chosen] == [tp("a", 0), tp("b", 0)]


def test_partitions_for_an_unknown_broker_is_not_found():
    with pytest.raises(NotFoundError, match="unknown broker id 9"):
        facts.partitions_for_broker([], 9, [1, 2])


def fake_cluster(partitions=(), described=None, listings=(), down=()):
    """Brokers 1-3 holding ``partitions``, producers as ``described``; ``listings`` are
    TransactionListings (their coordinator lists them); brokers in ``down`` time out."""
    model = KafkaModel(brokers=(1, 2, 3))
    for p in partitions:
        model.add_partition(p.topic, p.partition, leader=p.leader, replicas=p.replicas)
    model.producers.update(described or {})
    model.transactions = {
        t.transactional_id: TransactionDescription(t.transactional_id, t.coordinator_id, t.state, t.producer_id, 0, 60_000, -1, frozenset())
        for t in listings
    }
    model.down.update(down)
    return FakeCluster(model)


def facade_calls(cluster):
    return [c for c in cluster.calls if c[0] in ("describe_producers", "list_transactions")]


def test_transactional_ids_for_no_producers_sends_nothing():
    # An empty producer-id filter would list every transaction in the cluster.
    cluster = fake_cluster()
    assert facts.transactional_ids_for(cluster, []) == {}
    assert facts.transactional_ids_for(cluster, [-1]) == {}
    assert cluster.calls == [] and cluster.model.sent == []


def test_transactional_ids_for_maps_ids_and_reports_brokers_that_did_not_answer():
    listings = [TransactionListing("app-1", 7, "Ongoing", 1), TransactionListing("app-2", 8, "Empty", 2)]
    cluster = fake_cluster(listings=listings, down=[3])
    missing: list[Missing] = []
    assert facts.transactional_ids_for(cluster, [7, 11], missing) == {7: "app-1"}
    assert facade_calls(cluster) == [("list_transactions", [], [7, 11], None, None)]
    assert [m.subject for m in missing] == [Broker(3)]
    assert list(map(str, missing)) == ["transactional ids broker 3: timed out"]


def test_snapshot_attributes_partitions_to_their_leader_or_to_the_named_broker():
    parts = [partition("a", 0, 1, [1, 2]), partition("a", 1, 2, [2, 1])]
    gone = partition("a", 2, 1, [1])
    cluster = fake_cluster(parts + [gone], {tp("a", 0): [state(7)], tp("a", 1): []},
                           listings=[TransactionListing("app-1", 7, "Ongoing", 1)])
    cluster.model.partition_errors[(1, tp("a", 2))] = ["NOT_LEADER_OR_FOLLOWER"] * retry.LEADER_ASKS  # and again at fresh metadata

    snap = facts.producer_states(cluster, parts + [gone])
    assert snap.reported_by == {tp("a", 0): 1, tp("a", 1): 2}
    assert snap.transactional_ids == {7: "app-1"}
    assert snap.missing == [Missing(tp("a", 2), "NOT_LEADER_OR_FOLLOWER")]

    snap = facts.producer_states(cluster, parts, broker_id=2)
    assert snap.reported_by == {tp("a", 0): 2, tp("a", 1): 2}
    assert cluster.called("describe_producers")[-1] == ("describe_producers", [tp("a", 0), tp("a", 1)], 2)
    assert {node for node, r in cluster.model.sent if type(r).__name__ == "DescribeProducers"} == {1, 2}


def test_summary_skips_the_transactional_id_lookup():
    parts = [partition("a", 0, 1, [1])]
    cluster = fake_cluster(parts, {tp("a", 0): [state(7, start=3)]})
    result = producers.describe_producers(cluster, parts, summary=True)
    assert [c[0] for c in facade_calls(cluster)] == ["describe_producers"]
    assert [type(r).__name__ for _n, r in cluster.model.sent] == ["DescribeProducers"]
    assert result.value[0].open_transactions == 1


def test_select_partitions_with_a_broker_that_holds_none_of_the_named_topic_is_not_found():
    parts = [partition("a", 0, 1, [1, 2]), partition("b", 0, 3, [3])]
    cluster = fake_cluster(parts)
    assert producers.select_partitions(cluster, ["a", "b"], broker_id=3) == [tp("b", 0)]
    with pytest.raises(NotFoundError, match="broker 3 holds no replica of a-0"):
        producers.select_partitions(cluster, ["a"], 0, broker_id=3)
    # Without a named topic, a broker with no replicas simply has nothing to describe.
    assert producers.select_partitions(cluster, [], broker_id=2) == [tp("a", 0)]


def test_a_whole_clusters_producers_are_the_metadatas_topic_partitions_with_no_partition_info_made(monkeypatch):
    # producers (no topic, no broker) made a PartitionInfo of every partition to select them: 0.065 s of its
    # cProfile time at 100,000 partitions (`_made_from_fields`). The metadata's own TopicPartitions are the same.
    from kafkatxn import selection

    parts = [partition("a", 0, 1, [1, 2]), partition("a", 1, 2, [1, 2]), partition("b", 0, 3, [3])]
    expected = {internal: [p.tp for p in selection.select_partitions(fake_cluster(parts).metadata(), include_internal=internal)]
                for internal in (False, True)}
    cluster = fake_cluster(parts)
    metadata = as_columns(cluster.metadata())  # as the wire reads a Metadata answer, kept for the run
    monkeypatch.setattr(cluster, "metadata", lambda refresh=False: metadata)

    def no_partition_info(*args, **kwargs):
        raise AssertionError("every partition's PartitionInfo made to take its TopicPartition")

    monkeypatch.setattr(selection, "select_partitions", no_partition_info)
    for internal in (False, True):
        assert producers.select_partitions(cluster, [], include_internal=internal) == expected[internal]


def test_partitions_that_did_not_answer_are_exit_3_after_the_rows_that_did(monkeypatch, capsys):
    from kafkatxn.cli.app import main

    row = producers.producer_rows(snapshot({tp("a", 0): [state(7)]}))[0]
    monkeypatch.setattr(producers, "select_partitions", lambda *a, **k: [])
    monkeypatch.setattr(
        producers, "describe_producers", lambda *a, **k: Partial([row], ["broker 2 (3 partitions): timed out"])
    )
    with pytest.raises(SystemExit) as exit_info:
        main(["producers", "-b", "127.0.0.1:1", "-o", "jsonl"])
    out, err = capsys.readouterr()
    assert exit_info.value.code == 3
    assert out.count("\n") == 1 and '"producer_id":7' in out
    assert "incomplete producer state: broker 2 (3 partitions): timed out" in err


def test_producers_and_the_hanging_scan_select_a_brokers_partitions_by_one_definition():
    # producers --broker-id and hanging --broker-id each had their own copy of this selection; both now call
    # facts.selected_partitions, the scan with the internal topics (as kafka-transactions.sh find-hanging).
    from kafkatxn import facts_scan

    parts = [partition("a", 0, 1, [1, 2]), partition("a", 1, 2, [2, 3]), partition("__transaction_state", 0, 2, [2])]
    cluster = fake_cluster(parts)
    assert producers.select_partitions(cluster, [], broker_id=2) == [tp("a", 0), tp("a", 1)]
    assert producers.select_partitions(cluster, [], broker_id=2, include_internal=True) == \
        facts_scan.select_partitions(cluster, broker_id=2) == \
        facts.selected_partitions(cluster, broker_id=2, include_internal=True)
    assert set(facts_scan.select_partitions(cluster, broker_id=2)) == {tp("a", 0), tp("a", 1), tp("__transaction_state", 0)}
    assert facts_scan.select_partitions(cluster, broker_id=3) == [tp("a", 1)]
    with pytest.raises(NotFoundError, match="unknown broker id 9"):
        facts_scan.select_partitions(cluster, broker_id=9)
