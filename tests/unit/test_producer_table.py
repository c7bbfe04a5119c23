"""DescribeProducers' answers of a whole first round kept as their columns (producer_table.ProducerTable):
the partitions with producer state found from them, no list made nor partition hashed for the 30,000
without, and what ``check`` and the exporter read of them read from those alone."""

from __future__ import annotations

import time

import pytest

from kafkatxn import facts_cluster
from kafkatxn.kafka import producer_state
from kafkatxn.model import ProducerState, TopicPartition
from kafkatxn.producer_table import ProducerTable, held_states, open_states
from tests.support.fake_kafka import FakeCluster, KafkaModel

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
S7, S8 = ProducerState(7, 0, 3, 1, 0, 4), ProducerState(8, 0, 3, 1, 0, -1)


def test_a_table_reads_as_the_dict_of_its_lists_and_makes_it_only_to_look_up_one_without_producers():
    table = ProducerTable([([A1, A0], [(S7, S8), ()]), ([B0], [()])])  # as the leaders answered: not in partition order
    held = table[A1]
    assert held == [S7, S8] and type(held) is list and held_states(table) == {A1: [S7, S8]} and table.get(A1) is held
    assert table._all is None  # the partition with producers: no dict of every partition made
    assert len(table) == 3 and list(table) == [A1, A0, B0] and table._all is None
    assert table.get(B0) == [] and table.get(TopicPartition("c", 0)) is None and TopicPartition("c", 0) not in table
    expected = {A1: [S7, S8], A0: [], B0: []}
    assert table == expected and expected == table and dict(table.items()) == expected and list(table.keys()) == list(expected)
    assert table[A1] is held and table[B0] is table[B0]  # each partition's list is its own, whichever way it is read
    assert held_states(expected) is expected  # any other mapping as it is


NOW_MS = int(time.time() * 1000)


def _model() -> KafkaModel:
    now = NOW_MS
    m = KafkaModel(brokers=(1, 2))
    m.add_transaction_log([1, 2])
    for p in range(6):
        m.add_partition("orders", p, leader=1 + p % 2, lso=4 if p == 1 else 9, hw=9)
    m.producers[TopicPartition("orders", 1)] = [ProducerState(7, 0, 3, now, 1, 4), ProducerState(9, 0, 3, now, 1, -1)]
    m.producers[TopicPartition("orders", 4)] = [ProducerState(8, 0, 3, now, 1, -1)]
    return m


def _figures(snap) -> tuple:
    return (snap.open_transaction_count, snap.active_producer_ids, snap.hanging, snap.untracked, snap.undetermined, snap.missing)


def test_checks_gather_reads_the_producers_of_a_whole_round_from_those_with_state_alone(monkeypatch):
    # The producers' answers were put in a dict of every partition (30,000 lists made) and copied into a
    # second (retry.ask's): ~8 ms of every check between the last answer of its big round and its next.
    cluster = FakeCluster(_model())
    with cluster.one_run():
        _, described = cluster.offsets_and_producers(cluster.select_in_partition_order()[0])
    assert type(described.value) is ProducerTable and described.missing == []

    def no_dict_of_every_partition(self):
        raise AssertionError("a dict of every partition's producers made")

    with monkeypatch.context() as patched:
        patched.setattr(ProducerTable, "_every", no_dict_of_every_partition)
        columns = facts_cluster.gather_snapshot(FakeCluster(_model()), max_transaction_timeout_ms=900_000, clock=lambda: NOW_MS / 1000)
    monkeypatch.setattr(producer_state, "_whole_table", lambda requests, responses, grouped_by: None)  # as a dict, as before
    as_dict = facts_cluster.gather_snapshot(FakeCluster(_model()), max_transaction_timeout_ms=900_000, clock=lambda: NOW_MS / 1000)
    assert _figures(columns) == _figures(as_dict)
    assert columns.open_transaction_count == 1 and columns.active_producer_ids == {1: 1, 2: 2}


@pytest.mark.parametrize("fault", ["error", "silent"])
def test_a_round_not_answered_whole_is_read_as_before(fault):
    m = _model()
    if fault == "error":
        m.partition_errors[(1, TopicPartition("orders", 2))] = ["NOT_LEADER_OR_FOLLOWER"] * 3  # both ListOffsets and DescribeProducers
    else:
        m.down.add(2)
    cluster = FakeCluster(m, timeout_s=2)
    with cluster.one_run():
        _, described = cluster.offsets_and_producers(cluster.select_in_partition_order()[0])
    assert type(described.value) is dict


class _CountedLeaders(dict):
    """Leaders that count the partitions looked up."""

    looked_up = 0

    def get(self, key, default=None):
        self.looked_up += 1
        return super().get(key, default)


def test_the_brokers_that_reported_a_whole_round_are_those_that_answered_it_no_partition_looked_up():
    # Every described partition's leader was looked up to find the brokers that reported (30,000: ~3 ms of
    # check between its coordinators' answers and its Fetch); the requests were sent by those leaders. Then
    # each partition with producer state still was: every partition, where producers are idempotent.
    from kafkatxn.facts import ProducerStates, ReportedByLeaders, active_producer_ids

    leaders = _CountedLeaders({A0: 1, A1: 1, B0: 2, TopicPartition("c", 0): 3})
    table = ProducerTable([([A1, A0], [(S7, S8), ()]), ([B0], [()]), ([], [])], [1, 2, 3], leaders)
    assert table.reporters(leaders) == {1, 2} and table.reporters(dict(leaders)) is None  # (3 answered for none)
    found = active_producer_ids(ProducerStates(0, table, ReportedByLeaders(table, leaders)))
    assert found == {1: 2, 2: 0} and leaders.looked_up == 0  # each answer's producer ids, by the broker that gave it
    as_dict = _CountedLeaders(leaders)
    assert active_producer_ids(ProducerStates(0, dict(table.items()), ReportedByLeaders(table, as_dict))) == found
    assert as_dict.looked_up == 4


def _idempotent_everywhere() -> KafkaModel:
    """Every partition written by an idempotent producer (Kafka's producers are, by default, since 3.0),
    one of them with a transaction open too."""
    m = _model()
    for p in range(6):
        tp = TopicPartition("orders", p)
        m.producers[tp] = [*m.producers.get(tp, []), ProducerState(100 + p, 0, 9, NOW_MS, -1, -1)]
    return m


def _idempotent_cluster(monkeypatch) -> FakeCluster:
    """A fake of :func:`_idempotent_everywhere` whose metadata is one answer the run routes by, as the facade
    keeps it (the fake makes one a call)."""
    cluster = FakeCluster(_idempotent_everywhere())
    metadata = cluster.metadata()
    monkeypatch.setattr(cluster, "metadata", lambda refresh=False: metadata)
    return cluster


def _only_the_open_ones_read(patched) -> None:
    """Within ``patched`` (a monkeypatch context), a table that makes its partitions with state into lists, or
    the dict of them all, fails the test."""
    def no_held(self):
        raise AssertionError("every partition with producer state made into a list")

    def no_dict_of_every_partition(self):
        raise AssertionError("a dict of every partition's producers made")

    patched.setattr(ProducerTable, "held", no_held)
    patched.setattr(ProducerTable, "_every", no_dict_of_every_partition)


def test_where_every_partition_has_producer_state_a_pass_reads_the_open_ones_alone(monkeypatch):
    # Each partition with producer state was made into a list and a dict entry, then walked in Python by
    # the open-transaction count, the scan and the listing's pinning ids, and its leader looked up for the
    # producer ids per broker: ~20 ms of check at 30,000 partitions written by idempotent producers.
    cluster = _idempotent_cluster(monkeypatch)
    with monkeypatch.context() as patched:
        _only_the_open_ones_read(patched)
        columns = facts_cluster.gather_snapshot(cluster, max_transaction_timeout_ms=900_000, clock=lambda: NOW_MS / 1000)
    monkeypatch.setattr(producer_state, "_whole_table", lambda requests, responses, grouped_by: None)  # as a dict
    as_dict = facts_cluster.gather_snapshot(FakeCluster(_idempotent_everywhere()), max_transaction_timeout_ms=900_000,
                                            clock=lambda: NOW_MS / 1000)
    assert _figures(columns) == _figures(as_dict)
    assert columns.open_transaction_count == 1 and columns.active_producer_ids == {1: 4, 2: 5}


def test_the_open_partitions_of_a_table_are_those_the_verdicts_find_open():
    # open_held is the verdicts' rule (a CurrentTxnStartOffset >= 0) read over the columns in C: the same
    # partitions, each with all its producers, in the answers' order, whatever the mix of producers.
    import random

    from kafkatxn import verdicts

    rng = random.Random(38)
    for _ in range(200):
        columns = []
        for topic in "abc":
            tps = [TopicPartition(topic, i) for i in rng.sample(range(40), rng.randint(0, 12))]
            producers = [tuple(ProducerState(rng.randint(1, 9), 0, 1, 1, 0, rng.choice([-1, -1, 0, 5, 2**40]))
                               for _ in range(rng.choice([0, 0, 1, 1, 2, 3]))) for _ in tps]
            columns.append((tps, producers))
        table = ProducerTable(columns)
        every = dict(table.items())
        opened = open_states(table)
        assert list(opened) == [tp for tp, states in every.items() if any(s.current_txn_start_offset >= 0 for s in states)]
        assert all(opened[tp] == every[tp] for tp in opened)
        assert verdicts.open_transactions(opened) == verdicts.open_transactions(every)
        assert verdicts.open_transaction_count(opened) == verdicts.open_transaction_count(every)
        assert open_states(every) is every  # any other mapping as it is


def test_a_tables_lists_are_its_own_whichever_is_read_first():
    # open_held, held and the dict of every partition hand out the same list of a partition.
    a = ProducerTable([([A1, A0], [(S7, S8), (S8,)]), ([B0], [()])])
    b = ProducerTable([([A1, A0], [(S7, S8), (S8,)]), ([B0], [()])])
    assert a.open_held()[A1] is a.held()[A1] is a[A1] and a.held()[A0] is a[A0] and list(a.held()) == [A1, A0]
    assert b[A0] is b.held()[A0] and b.open_held()[A1] is b.held()[A1] is b[A1] and list(b.open_held()) == [A1]


def test_hangings_scan_of_a_whole_cluster_reads_a_whole_first_round_as_its_columns_too(monkeypatch):
    # describe_producers put every partition's producers in a list and a dict (retry.ask's), and hanging's
    # selection made a PartitionInfo of each to take its TopicPartition: 30,000 each, at every partition
    # written by an idempotent producer. The first round answered whole is a table, as check's.
    from kafkatxn import facts_scan

    cluster = _idempotent_cluster(monkeypatch)
    metadata = cluster.metadata()
    with monkeypatch.context() as patched:
        _only_the_open_ones_read(patched)
        described = []
        describe = cluster.describe_producers
        patched.setattr(cluster, "describe_producers", lambda *args, **kwargs: described.append(describe(*args, **kwargs)) or described[-1])
        with cluster.one_run():
            tps = facts_scan.select_partitions(cluster)
            scan = facts_scan.take_scan(cluster, max_transaction_timeout_ms=900_000, partitions=tps)
    assert tps == metadata.tps and tps is not metadata.tps
    assert [type(d.value) for d in described] == [ProducerTable] and described[0].missing == []
    monkeypatch.setattr(producer_state, "_whole_table", lambda requests, responses, grouped_by: None)  # as a dict
    as_dict = facts_scan.take_scan(FakeCluster(_idempotent_everywhere()), max_transaction_timeout_ms=900_000)
    assert [c.open_txn for c in scan.pins.classifications.values()] == [c.open_txn for c in as_dict.pins.classifications.values()]
    assert len(scan.pins.classifications) == 1


def test_producers_rows_and_summary_read_a_table_as_one_dict_not_a_look_up_each(monkeypatch):
    # describe_producers answers a whole first round as a table since hanging's scan took it so: the summary
    # looked every partition up twice through the table's __getitem__ (200,000 Python calls at 100,000
    # partitions, 0.13 s of producers --summary's cProfile time).
    from kafkatxn import producers
    from kafkatxn.column_tables import FewApart
    from kafkatxn.facts import ProducerStates, ReportedByLeaders

    leaders = {A0: 1, A1: 1, B0: 2}
    columns = [([A0, A1], [(S8,), (S7, S8)]), ([B0], [()])]
    as_dict = dict(ProducerTable(columns).items())
    expected_summary = producers.summarize(ProducerStates(0, as_dict, ReportedByLeaders(as_dict, leaders), {}, []))
    expected_rows = producers.producer_rows(ProducerStates(0, as_dict, ReportedByLeaders(as_dict, leaders), {7: "t"}, []))
    looked_up = []
    get_item = FewApart.__getitem__
    monkeypatch.setattr(FewApart, "__getitem__", lambda self, key: looked_up.append(key) or get_item(self, key))
    table = ProducerTable(columns, [1, 2], leaders)
    assert producers.summarize(ProducerStates(0, table, ReportedByLeaders(table, leaders), {}, [])) == expected_summary
    assert producers.producer_rows(ProducerStates(0, table, ReportedByLeaders(table, leaders), {7: "t"}, [])) == expected_rows
    assert looked_up == []
    assert [(r.scope, r.broker_id, r.topic, r.partitions, r.producer_states, r.open_transactions) for r in expected_summary] == [
        ("broker", 1, None, 2, 3, 1), ("broker", 2, None, 1, 0, 0), ("topic", None, "a", 2, 3, 1), ("topic", None, "b", 1, 0, 0)]


def test_hangings_command_sends_a_whole_clusters_producer_states_from_the_metadatas_topic_partitions(monkeypatch):
    # The scan's own selection took the metadata's TopicPartitions (above), but the command, which sends the
    # producer states ahead, still made a PartitionInfo of every partition to take its TopicPartition
    # (`_made_from_fields`, 0.03 s of cProfile time at 100,000 partitions).
    from kafkatxn import selection
    from kafkatxn.cli import hanging_cmd

    cluster = _idempotent_cluster(monkeypatch)
    metadata = cluster.metadata()
    sent = []
    ahead = cluster.describe_producers_ahead
    monkeypatch.setattr(cluster, "describe_producers_ahead", lambda partitions: sent.append(partitions) or ahead(partitions))
    with monkeypatch.context() as patched:
        def no_partition_info(*args, **kwargs):
            raise AssertionError("every partition's PartitionInfo made to take its TopicPartition")

        patched.setattr(selection, "select_partitions", no_partition_info)
        found = hanging_cmd._find_hanging(cluster, None, None, None, 900_000)
    assert sent == [metadata.tps] and sent[0] is not metadata.tps
    named = hanging_cmd._find_hanging(FakeCluster(_idempotent_everywhere()), None, ["orders"], None, 900_000)  # by name: selected
    assert [(r.topic, r.partition, r.producer_id) for r in found.hanging] == [(r.topic, r.partition, r.producer_id) for r in named.hanging]
    assert found.missing == named.missing == []
