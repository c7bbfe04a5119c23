"""ListOffsets' answers of a whole first round kept as their columns (offset_table.OffsetTable): the
partitions that trail found from them, no pair made nor partition hashed for the 30,000 that do not."""

from __future__ import annotations

from tests.support import fake_kafka
from tests.support.fake_kafka import KafkaModel

from kafkatxn import facts_lso
from kafkatxn.model import TopicPartition
from kafkatxn.offset_table import OffsetTable
from kafkatxn.verdicts_groups import Offsets

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_a_table_reads_as_the_dict_of_its_pairs_and_makes_it_only_to_look_up_one_that_does_not_trail():
    table = OffsetTable([A0, A1, B0], [10, 5, 7], [4, 5, 7], Offsets)
    assert table.trailing() == [A0]
    assert table[A0] == Offsets(10, 4) and type(table[A0]) is Offsets
    assert table._all is None  # the partition that trails: no dict of every partition made
    assert len(table) == 3 and list(table) == [A0, A1, B0]
    assert table._all is None
    assert table.get(B0) == Offsets(7, 7) and table.get(TopicPartition("c", 0)) is None and TopicPartition("c", 0) not in table
    expected = {A0: Offsets(10, 4), A1: Offsets(5, 5), B0: Offsets(7, 7)}
    assert table == expected and expected == table and dict(table.items()) == expected
    assert list(table.keys()) == [A0, A1, B0] and list(table.values()) == list(expected.values())
    pairs = OffsetTable([A0, A1], [10, 5], [4, 5])  # without a shape: (LSO, HW) pairs
    assert pairs == {A0: (4, 10), A1: (5, 5)} and pairs.trailing() == [A0]


def model():
    built = KafkaModel(brokers=(1, 2))
    for tp, leader, lso, hw in ((A0, 1, 4, 10), (A1, 2, 5, 5), (B0, 1, 7, 7)):
        built.add_partition(tp.topic, tp.partition, leader=leader, lso=lso, hw=hw)
    return built


def test_a_first_round_answered_whole_is_kept_as_its_columns_and_the_run_answers_from_them():
    kafka = model()
    cluster = fake_kafka.FakeCluster(kafka)
    with cluster.one_run():
        tps, leaders = cluster.select_in_partition_order()
        cluster.stable_and_high_offsets_ahead(tps, leaders)
        snapshot = facts_lso.take_snapshot(cluster, tps, ordered=True, lagging_only=True)  # as lso takes it
        assert type(snapshot.offsets) is OffsetTable and snapshot.lagging == [A0] and snapshot.missing == []
        sent = len(kafka.sent)
        again = cluster.stable_and_high_offsets([A1, A0])  # from the run: nothing asked
        assert again.value == {A1: (5, 5), A0: (4, 10)} and again.missing == [] and len(kafka.sent) == sent
    assert snapshot.offsets == {A0: Offsets(10, 4), A1: Offsets(5, 5), B0: Offsets(7, 7)}
    # A caller that reads every partition's offsets (the group pass, diagnose) is given their dict.
    with cluster.one_run():
        every = facts_lso.take_snapshot(cluster, [A0, A1, B0])
    assert type(every.offsets) is dict and every.offsets == snapshot.offsets and every.lagging == [A0]


def test_more_answers_join_a_table_the_run_keeps_without_changing_it():
    cluster = fake_kafka.FakeCluster(model())
    table = OffsetTable([A0], [10], [4])
    with cluster.one_run():
        cluster.remember_table("ListOffsets", "t", table)
        cluster.remember_table("ListOffsets", "t", {B0: (7, 7)})
        assert cluster.remembered_in_table("ListOffsets", "t", [A0, B0, A1]) == {A0: (4, 10), B0: (7, 7)}
    assert table == {A0: (4, 10)}


def test_the_scanned_partitions_samples_are_columns_read_as_the_tuple_of_them():
    from kafkatxn.model import PartitionInfo
    from kafkatxn.snapshot import PartitionSample, lso_lags, partition_samples

    infos = [PartitionInfo(tp.topic, tp.partition, leader, (1,), (1,)) for tp, leader in ((A0, 1), (A1, 2), (B0, 1))]
    expected = (PartitionSample("a", 0, 1, 10, 4), PartitionSample("a", 1, 2, 5, 5), PartitionSample("b", 0, 1, 7, 7))
    table = OffsetTable([B0, A1, A0], [7, 5, 10], [7, 5, 4])  # as the leaders answered: not the partitions' order
    for offsets in (table, dict(table.items())):
        samples = partition_samples(infos, [A0, A1, B0], offsets)
        assert lso_lags(samples) == [6, 0, 0] and samples._rows is None  # read from the columns: no sample made
        assert samples == expected and expected == samples and tuple(samples) == expected and samples[1] == expected[1]
        assert len(samples) == 3 and hash(samples) == hash(expected)
    unanswered = partition_samples(infos, [A0, A1, B0], {A0: (4, 10)})
    assert unanswered == (expected[0], PartitionSample("a", 1, 2, None, None), PartitionSample("b", 0, 1, None, None))
    assert lso_lags(unanswered) == [6, None, None] and lso_lags(tuple(unanswered)) == [6, None, None]



def test_the_samples_of_a_whole_table_read_their_lags_from_the_partitions_that_trail_alone():
    # A check's lags of 30,000 partitions: the few that trail placed by bisection, no dict of every partition
    # made nor any looked up (~9 ms of every check between the offsets' answers and the coordinators' round).
    from kafkatxn.model import PartitionInfo
    from kafkatxn.snapshot import PartitionSample, lso_lags, partition_samples

    c0 = TopicPartition("c", 0)
    tps = [A0, A1, B0, c0]
    infos = [PartitionInfo(tp.topic, tp.partition, 1, (1,), (1,)) for tp in tps]
    table = OffsetTable([c0, B0, A1, A0], [9, 7, 5, 10], [3, 7, 6, 4])  # as the leaders answered; a1's LSO past its HW
    samples = partition_samples(infos, tps, table)
    assert lso_lags(samples) == [6, 0, 0, 6]
    assert table._all is None and samples._rows is None  # nothing looked up, no sample made
    assert samples == (PartitionSample("a", 0, 1, 10, 4), PartitionSample("a", 1, 1, 5, 6), PartitionSample("b", 0, 1, 7, 7),
                       PartitionSample("c", 0, 1, 9, 3))  # the columns made when read
    assert lso_lags(_given_columns(samples)) == [6, 0, 0, 6]
    # Not in partition order, or a partition that trails not among those scanned: the columns made at once.
    for given, table in (([B0, A0, A1, c0], OffsetTable([c0, B0, A1, A0], [9, 7, 5, 10], [3, 7, 6, 4])),
                         (tps, OffsetTable([TopicPartition("d", 0), B0, A1, A0], [9, 7, 5, 10], [3, 7, 6, 4]))):
        samples = partition_samples(infos, given, table)
        assert samples.trailing is None and table._all is not None


def _given_columns(samples):
    """The same samples, as columns given (not read from a table)."""
    from kafkatxn.partition_columns import PartitionColumns

    return PartitionColumns(samples.row, samples.partitions, list(samples.high), list(samples.stable))


def test_offsets_and_producers_of_partitions_in_order_ask_as_of_the_same_partitions_given_otherwise():
    from kafkatxn.model import ProducerState

    answers = []
    for given in ([A0, A1, B0], [B0, A0, A1, A0]):  # in partition order (the metadata's); or not, and one twice
        kafka = model()
        kafka.producers[A0] = [ProducerState(7, 0, 0, 1, 0, 4)]
        pairs, producers = fake_kafka.FakeCluster(kafka).offsets_and_producers(given)
        sent = sorted((node, type(r).__name__, tuple(sorted(r.partitions))) for node, r in kafka.sent)  # (ListOffsets in the order given)
        answers.append((dict(pairs.value.items()), pairs.missing, producers.value, producers.missing, sent))
    assert answers[0] == answers[1]
    assert answers[0][0] == {A0: (4, 10), A1: (5, 5), B0: (7, 7)} and answers[0][2][A0] == [ProducerState(7, 0, 0, 1, 0, 4)]


def test_lso_keeps_the_columns_only_where_its_rows_read_the_lagging_partitions_alone():
    from kafkatxn import lso

    assert type(lso.partition_report(fake_kafka.FakeCluster(model())).snapshot.offsets) is OffsetTable
    for every in ({"min_lag": 0}, {"watching": True}):  # a row per partition, or each compared with the last sample
        report = lso.partition_report(fake_kafka.FakeCluster(model()), **every)
        assert type(report.snapshot.offsets) is dict and report.snapshot.lagging == [A0]
