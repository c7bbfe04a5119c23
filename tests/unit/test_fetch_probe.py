"""The read_committed probe and the first-record read over the wire's Fetch (kafkatxn/kafka/offsets.py),
against the fake wire's record batches: what a read_committed consumer skips (control batches, the
batches of aborted transactions, as the Java consumer tells them from the answer's aborted
transactions), paging, the log start, leaders that move and a Read ACL that is missing."""

from __future__ import annotations

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka.offsets import OffsetsApi, first_readable
from kafkatxn.model import TopicPartition
from tests.support.fake_kafka import FakeCluster, KafkaModel

T0 = 1_700_000_000_000


def batch(base, n=1, pid=-1, transactional=False, control=None):
    records = tuple(p.FetchedRecord(base + i, T0 + base + i, b"k", b"v") for i in range(n))
    return p.FetchedBatch(base, base + n - 1, pid, 0 if pid >= 0 else -1, transactional, control, records)


def cluster_with(batches, lso=None, aborted=(), leader=1, brokers=(1,), log_start=0):
    model = KafkaModel(brokers=brokers)
    hw = batches[-1].last_offset + 1 if batches else log_start
    tp = model.add_partition("orders", 0, leader=leader, lso=hw if lso is None else lso, hw=hw)
    model.batches[tp] = list(batches)
    model.aborted[tp] = list(aborted)
    model.log_starts[tp] = log_start
    return FakeCluster(model), tp


def fetches(cluster):
    return [r for _node, r in cluster.model.sent if isinstance(r, p.Fetch)]


def probe(cluster, starts):
    return OffsetsApi.first_readable_offsets(cluster, starts)


def test_read_committed_skips_an_aborted_transaction_and_its_marker_but_not_another_producers_records():
    # pid 7's transaction 0-3 is aborted (its ABORT marker at 4); pid 8's committed record sits inside it at 2.
    log = [batch(0, 2, pid=7, transactional=True), batch(2, 1, pid=8, transactional=True), batch(3, 1, pid=7, transactional=True),
           batch(4, 1, pid=7, transactional=True, control="ABORT"), batch(5, 1, pid=8, transactional=True, control="COMMIT"),
           batch(6, 2)]
    cluster, tp = cluster_with(log, aborted=[(7, 0, 4)])
    assert probe(cluster, {tp: 0}).value == {tp: 2}
    assert probe(cluster, {tp: 3}).value == {tp: 6}  # 3 aborted, 4 and 5 markers
    read = OffsetsApi.first_record_timestamps(cluster, {tp: 0})  # read_uncommitted: the aborted record is a record
    assert read.value == {tp: T0} and not read.missing


def test_only_markers_and_aborted_records_up_to_the_lso_read_as_none():
    log = [batch(0, 3, pid=7, transactional=True), batch(3, 1, pid=7, transactional=True, control="ABORT"),
           batch(4, 1, pid=9, transactional=True, control="COMMIT"), batch(5, 2, pid=11, transactional=True)]
    cluster, tp = cluster_with(log, lso=5, aborted=[(7, 0, 3)])  # pid 11's transaction is open: the LSO is 5
    got = probe(cluster, {tp: 0})
    assert got.value == {tp: None} and not got.missing
    # read_uncommitted sees the open transaction's records
    assert OffsetsApi._first_records(cluster, {tp: 4}, read_committed=False).value == {tp: (5, T0 + 5)}


def test_a_gap_longer_than_one_fetch_is_paged_from_where_each_answer_left_off():
    log = [batch(i, 1, pid=7, transactional=True) for i in range(6)] + [batch(6, 1, pid=7, transactional=True, control="ABORT"), batch(7)]
    cluster, tp = cluster_with(log, aborted=[(7, 0, 6)])
    cluster.model.batches_per_fetch = 2
    assert probe(cluster, {tp: 0}).value == {tp: 7}
    assert [r.partitions[0].offset for r in fetches(cluster)] == [0, 2, 4, 6]
    assert all(r.read_committed for r in fetches(cluster))


def test_records_of_a_batch_before_the_start_are_not_the_first():
    cluster, tp = cluster_with([batch(0, 5), batch(5, 1)])
    assert probe(cluster, {tp: 3}).value == {tp: 3}
    assert OffsetsApi.first_record_timestamps(cluster, {tp: 3}).value == {tp: T0 + 3}


def test_a_start_below_the_log_start_reads_from_there_and_one_past_the_end_reads_none():
    cluster, tp = cluster_with([batch(10, 2)], log_start=10)
    assert probe(cluster, {tp: 4}).value == {tp: 10}
    asked = [r for _n, r in cluster.model.sent if isinstance(r, p.ListOffsetsAt)]
    assert [(r.partitions, r.timestamp_ms) for r in asked] == [((tp,), p.EARLIEST)]
    assert probe(cluster, {tp: 50}).value == {tp: None}
    # the first record's timestamp is of the record at the start, and there is none below the log start
    dated = OffsetsApi.first_record_timestamps(cluster, {tp: 4})
    assert dated.value == {} and "no record at offset 4" in dated.missing[0].reason


def test_one_fetch_per_leader_for_all_its_partitions():
    model = KafkaModel(brokers=(1, 2))
    tps = [model.add_partition("orders", n, leader=1 + n % 2, lso=1, hw=1) for n in range(6)]
    for tp in tps:
        model.batches[tp] = [batch(0)]
    cluster = FakeCluster(model)
    assert probe(cluster, {tp: 0 for tp in tps}).value == {tp: 0 for tp in tps}
    assert sorted((node, len(r.partitions)) for node, r in model.sent if isinstance(r, p.Fetch)) == [(1, 3), (2, 3)]


def test_a_moved_leader_is_asked_again_where_fresh_metadata_points():
    cluster, tp = cluster_with([batch(0), batch(1)], brokers=(1, 2))
    cluster.model.partition_errors[(1, tp)] = ["NOT_LEADER_OR_FOLLOWER"]
    cluster.model.leader_moves[tp] = 2
    got = probe(cluster, {tp: 1})
    assert got.value == {tp: 1} and not got.missing
    assert [node for node, r in cluster.model.sent if isinstance(r, p.Fetch)] == [1, 2]


def test_no_read_acl_is_a_missing_part_naming_it_and_a_silent_leader_one_that_timed_out():
    cluster, tp = cluster_with([batch(0)])
    cluster.model.denied_topics["Fetch"] = {"orders"}
    got = probe(cluster, {tp: 0})
    assert got.value == {} and got.missing[0].acl == "READ on Topic orders"
    cluster, tp = cluster_with([batch(0)], brokers=(1, 2))
    cluster.model.down.add(1)
    got = probe(cluster, {tp: 0})
    assert got.value == {} and got.missing[0].subject == tp and "timed out" in got.missing[0].reason


def test_first_readable_follows_the_java_consumers_abort_bookkeeping():
    tp = TopicPartition("t", 0)
    # An aborted transaction that began before this answer's first batch still aborts its batches here.
    part = p.FetchedPartition(tp, None, 10, 10, 0, (p.AbortedTransaction(7, 2),),
                              (batch(5, 2, pid=7, transactional=True), batch(7, 1, pid=7, transactional=True, control="ABORT"),
                               batch(8, 1, pid=7, transactional=True)))
    assert first_readable(part, 5, read_committed=True) == ((8, T0 + 8), 9)  # after its marker, pid 7 writes a new transaction
    assert first_readable(part, 5, read_committed=False) == ((5, T0 + 5), 6)
    empty = p.FetchedPartition(tp, None, 10, 10, 0, (), ())
    assert first_readable(empty, 4, read_committed=True) == (None, 4)


def test_answers_that_move_nothing_on_end_the_read_instead_of_repeating_it_until_the_deadline():
    cluster, tp = cluster_with([batch(0), batch(1)])
    cluster.model.batches_per_fetch = 0  # a broker that answers without records below the end
    got = probe(cluster, {tp: 0})
    assert got.value == {} and got.missing[0].reason == "no records returned from offset 0 below the end"
    assert len(fetches(cluster)) == 1


class _Untouchable(tuple):
    """Records the probe must not read: their batch's header already says where its first record is."""

    def __iter__(self):
        raise AssertionError("the records of a gapless batch were read")

    def __getitem__(self, index):
        raise AssertionError("the records of a gapless batch were read")


def test_the_probe_reads_no_record_of_a_batch_without_gaps_and_every_one_of_a_compacted_batch():
    gapless = batch(0, 5)._replace(records=_Untouchable(batch(0, 5).records), record_count=5)
    cluster, tp = cluster_with([gapless, batch(5, 1)])
    assert probe(cluster, {tp: 3}).value == {tp: 3}
    assert probe(cluster, {tp: 0}).value == {tp: 0}
    # Compaction left offsets 0, 4 and 9 of 0-9: the first record from 1 is at 4, read from the records.
    kept = tuple(r for r in batch(0, 10).records if r.offset in (0, 4, 9))
    compacted = p.FetchedBatch(0, 9, -1, -1, False, None, kept, 3)
    cluster, tp = cluster_with([compacted])
    assert not compacted.gapless and probe(cluster, {tp: 1}).value == {tp: 4}
    assert probe(cluster, {tp: 5}).value == {tp: 9}
    # The first record's timestamp is read from the record itself.
    cluster, tp = cluster_with([batch(0, 5)._replace(record_count=5)])
    assert OffsetsApi.first_record_timestamps(cluster, {tp: 2}).value == {tp: T0 + 2}


class _Corrupt(tuple):
    def __iter__(self):
        raise p.UnreadableRecords("CORRUPT_MESSAGE (CorruptRecordError: Found invalid record structure)")


def test_a_batch_that_cannot_be_read_is_that_partitions_missing_answer_and_the_others_are_answered():
    model = KafkaModel(brokers=(1,))
    bad, good = (model.add_partition("orders", n, leader=1, lso=3, hw=3) for n in (0, 1))
    model.batches[bad] = [p.FetchedBatch(0, 2, -1, -1, False, None, _Corrupt(), 2)]  # 2 records over 3 offsets: read
    model.batches[good] = [batch(0, 3)]
    got = probe(FakeCluster(model), {bad: 1, good: 1})
    assert got.value == {good: 1}
    assert [(m.subject, m.reason) for m in got.missing] == [(bad, "CORRUPT_MESSAGE (CorruptRecordError: Found invalid record structure)")]
