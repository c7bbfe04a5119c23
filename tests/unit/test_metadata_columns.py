"""A Metadata answer read as columns (kafkatxn.metadata_columns): the metadata made of them is the one made
of its PartitionInfos, and the ListOffsets bodies written from a leader's columns are the bytes the
writer makes of the same partitions without them, on answers with gaps in partition numbers, partitions
without a leader, leader epochs of -1, several leaders (broker ids under 256 and over), replica lists
that differ within a topic, and internal topics."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka.offsets import _offsets_requests
from kafkatxn.kafka.session import cluster_metadata, group_by_leader_column, in_topic_order
from kafkatxn.kafka.wire import bodies
from kafkatxn.metadata_columns import ColumnMetadata, LedPartitions
from kafkatxn.model import ClusterMetadata


def answer(brokers: tuple[int, ...], leaderless: bool = False, gaps: bool = False, epochs: int = 4, mixed: bool = False) -> bytes:
    """A Metadata answer (v12) of five topics of 40 partitions led round-robin, and __transaction_state."""
    from kafka.protocol.metadata import MetadataResponse as M

    T = M.MetadataResponseTopic
    P = T.MetadataResponsePartition
    topics = []
    for t, name in enumerate(("alpha", "Beta", "gamma.x", "d-1", "zeta")):
        parts = []
        for i in range(40):
            if gaps and i % 3 == 1:
                continue
            leader = brokers[(i * (t + 1)) % len(brokers)]
            replicas = [leader, *(b for b in brokers if b != leader)][: (3 if mixed and t == 2 and i % 7 == 0 else 1)]
            parts.append(P(error_code=0, partition_index=i, leader_id=-1 if leaderless and t == 3 and i == 9 else leader,
                           leader_epoch=epochs, replica_nodes=replicas, isr_nodes=replicas, offline_replicas=[]))
        topics.append(T(error_code=0, name=name, topic_id=uuid.uuid4(), is_internal=False, partitions=parts))
    topics.insert(2, T(error_code=0, name="__transaction_state", topic_id=uuid.uuid4(), is_internal=True, partitions=[
        P(error_code=0, partition_index=i, leader_id=brokers[i % len(brokers)], leader_epoch=epochs,
          replica_nodes=[brokers[i % len(brokers)]], isr_nodes=[brokers[i % len(brokers)]], offline_replicas=[])
        for i in range(5)]))
    listed = [M.MetadataResponseBroker(node_id=b, host=f"b{b}", port=9000 + b, rack=None) for b in brokers]
    return bytes(M(throttle_time_ms=0, brokers=listed, cluster_id="cid", controller_id=brokers[0], topics=topics).encode(version=12))


ANSWERS = {
    "three-leaders": {"brokers": (1, 2, 3)},
    "ids-over-255": {"brokers": (1001, 1002, 7)},
    "gaps": {"brokers": (2, 1), "gaps": True},
    "epochs-unknown": {"brokers": (1, 2, 3), "epochs": -1},
    "replicas-differ": {"brokers": (1, 2, 3), "mixed": True},
    "one-leader": {"brokers": (5,)},
    "leaderless": {"brokers": (1, 2, 3), "leaderless": True},
}


def read(raw: bytes) -> tuple[ColumnMetadata, ClusterMetadata]:
    """The metadata made of the columns, and the one made of the decoder's PartitionInfos."""
    from kafka.protocol.metadata import MetadataResponse as M

    from kafkatxn.kafka.wire.metadata_codec import _decode_metadata

    md = cluster_metadata(bodies.read_metadata(memoryview(raw), 12)[0], 1)
    decoded = _decode_metadata(p.Metadata(), M.decode(raw, version=12))
    return md, ClusterMetadata(*decoded[:3], in_topic_order(decoded.partitions), 1)


def written(request: p.ListOffsets, version: int, monkeypatch: Any) -> bytes:
    monkeypatch.setattr(bodies, "_WRITTEN_TOPICS", [])  # written afresh, not the last request's of the same partitions
    return bodies.list_offsets_body(request, version)


@pytest.mark.parametrize("kw", ANSWERS.values(), ids=ANSWERS.keys())
def test_the_columns_make_the_metadata_its_partitions_make(kw):
    md, expected = read(answer(**kw))
    assert type(md) is ColumnMetadata and "partitions" not in md.__dict__
    assert md.tps == expected.tps and md.leaders == expected.leaders and md.topics() == expected.topics()
    assert md.transaction_log == expected.transaction_log
    chosen = [x for x in expected.partitions if not x.internal]
    assert md.data_partitions() == ([x.tp for x in chosen], [x.leader for x in chosen])
    assert md == expected and md.partitions == expected.partitions and md.partitions.tps is md.tps


@pytest.mark.parametrize("kw", ANSWERS.values(), ids=ANSWERS.keys())
def test_a_leaders_partitions_from_the_columns_are_grouped_and_written_as_without_them(kw, monkeypatch):
    md, _ = read(answer(**kw))
    tps, leaders = md.data_partitions()
    grouped = group_by_leader_column(tps, leaders, {})
    by_leader = md.data_by_leader({})
    if kw.get("leaderless"):
        assert grouped is None and by_leader is None  # the call names the partition without a leader
        return
    assert by_leader == grouped and list(by_leader) == list(grouped)  # the leaders in the same order
    assert all(type(led) is LedPartitions and led.runs for led in by_leader.values())
    assert md.data_by_leader({list(by_leader)[0]: "silent"}) is None
    for earliest in (False, True):
        with_runs = _offsets_requests(by_leader, (True, False), earliest)
        plain = _offsets_requests(grouped, (True, False), earliest)
        # the same requests: of the same partitions, each leader's those its runs were sent with before they were made
        assert [(node, tuple(r.partitions), *r[1:]) for node, r in with_runs] == [(node, *r) for node, r in plain]
        assert [r.partitions for _, r in with_runs] == [runs for runs in md.data_runs_by_leader({}).values() for _ in (1, 2)]
        for (node, request), (_, without) in zip(with_runs, plain):
            assert request.partitions.runs and getattr(without.partitions, "runs", None) is None
            for version in range(1, 12):
                assert written(request, version, monkeypatch) == written(without, version, monkeypatch), (node, version)


def test_runs_that_do_not_name_the_partitions_write_other_bytes(monkeypatch):
    """The bodies above are compared where they could differ: a run's partition numbers are what is written."""
    md, _ = read(answer(brokers=(1, 2)))
    by_leader = md.data_by_leader({})
    request = _offsets_requests(by_leader, (True,), False)[0][1]
    good = written(request, 11, monkeypatch)
    name, indexes = request.partitions.runs[0]
    request.partitions.runs[0] = (name, indexes[:-1])
    assert written(request, 11, monkeypatch) != good


@pytest.mark.parametrize("kw", ANSWERS.values(), ids=ANSWERS.keys())
def test_every_partition_grouped_by_the_leaders_of_the_columns_is_grouped_and_written_as_by_a_dict(kw, monkeypatch):
    """``check`` asks every partition (internal topics' too) by ``metadata.leaders``: where that metadata
    was read as columns, its partitions are grouped from them; other partitions, or other leaders, as before."""
    from kafkatxn.kafka.session import group_by_leader

    md, expected = read(answer(**kw))
    tps = list(md.tps)
    grouped = group_by_leader(tps, md.leaders, {})
    plain = group_by_leader(tps, dict(expected.leaders), {})
    assert grouped == plain and (grouped is None or list(grouped) == list(plain))
    if kw.get("leaderless"):
        return
    assert all(type(led) is LedPartitions for led in grouped.values())
    assert not any(type(led) is LedPartitions for led in group_by_leader(tps[1:], md.leaders, {}).values())
    assert group_by_leader(tps, md.leaders, {list(grouped)[0]: "silent"}) is None
    for (node, request), (_, without) in zip(_offsets_requests(grouped, (True,), False), _offsets_requests(plain, (True,), False)):
        for version in (1, 5, 6, 11):
            assert written(request, version, monkeypatch) == written(without, version, monkeypatch), (node, version)


@pytest.mark.parametrize("kw", ANSWERS.values(), ids=ANSWERS.keys())
def test_replica_ids_and_every_partition_from_the_columns_are_the_partitions_own(kw):
    """``check`` takes its replica brokers and its partitions' count from the columns before its first
    request; the PartitionInfos are made only where one is read, and are the metadata's."""
    md, expected = read(answer(**kw))
    every = md.every_partition()
    assert md.replica_ids() == {r for x in expected.partitions for r in x.replicas}
    assert len(every) == len(expected.partitions) and "partitions" not in md.__dict__
    assert every == expected.partitions and list(every) == list(expected.partitions) and every[3] == expected.partitions[3]


@pytest.mark.parametrize("batch", [7, 40, 41, 10_000])
@pytest.mark.parametrize("kw", ANSWERS.values(), ids=ANSWERS.keys())
def test_describe_producers_batches_keep_the_runs_and_write_the_bytes_written_without_them(kw, batch, monkeypatch):
    """A leader's partitions cut into DescribeProducers batches keep its topics' runs, cut where a batch
    ends (within a topic too): each body is written from them, the bytes written a partition at a time."""
    from kafkatxn.kafka import producer_state

    monkeypatch.setattr(producer_state, "DESCRIBE_PRODUCERS_BATCH", batch)
    md, _ = read(answer(**kw))
    by_leader = md.all_by_leader({})
    if by_leader is None:
        return
    for led in by_leader.values():
        batches = producer_state._batches(led)
        assert [tuple(b) for b in batches] == [tuple(led[i : i + batch]) for i in range(0, len(led), batch)]
        for b in batches:
            assert [p.TopicPartition(name, i) for name, run in b.runs for i in run] == list(b)
            assert len({name for name, _ in b.runs}) == len(b.runs)
            without = p.DescribeProducers(tuple(b))
            assert bodies.describe_producers_body(p.DescribeProducers(b), 0) == bodies.describe_producers_body(without, 0)
    assert producer_state._batches([]) == []


def test_a_topics_partition_numbers_are_in_order_where_they_increase():
    """Most topics' are 0 .. n-1, compared with one tuple; others (gaps, a repeat, one out of place) pairwise."""
    from kafkatxn.metadata_columns import TopicRun

    def run(indexes: tuple[int, ...]) -> TopicRun:
        return TopicRun("t", indexes, (1,) * len(indexes), False)

    assert all(bodies._in_order(run(tuple(range(n)))) for n in (0, 1, 7, 3000, 5))
    assert bodies._in_order(run((0, 2, 5))) and bodies._in_order(run((3, 4)))
    assert not any(bodies._in_order(run(x)) for x in ((1, 0), (0, 1, 1), (0, 1, 3, 2), tuple(range(4000))[::-1]))


@pytest.mark.parametrize("kw", ANSWERS.values(), ids=ANSWERS.keys())
def test_a_partitions_leader_looked_up_alone_is_the_dicts_and_makes_no_dict_of_them_all(kw):
    """``ColumnMetadata.leaders``: a partition looked up alone (``get``, ``[]``, ``in``) answers as the dict of
    every partition does, from its topic's run, and the dict is not made (``lso`` routes the few partitions
    that lag); read whole, it is that dict, its look-ups dict's own."""
    from kafkatxn.leader_map import LeaderMap
    from kafkatxn.model import TopicPartition

    md, expected = read(answer(**kw))
    whole = dict(expected.leaders)
    leaders = md.leaders
    asked = [*expected.tps[::23], TopicPartition("alpha", 40), TopicPartition("alpha", -1), TopicPartition("nowhere", 0),
             TopicPartition("Beta", 1)]
    gapped = kw.get("gaps", False)
    for tp in asked:
        assert leaders.get(tp) == whole.get(tp) and leaders.get(tp, "none") == whole.get(tp, "none")
        assert (tp in leaders) == (tp in whole)
        if tp in whole:
            assert leaders[tp] == whole[tp]
        else:
            with pytest.raises(KeyError):
                leaders[tp]  # noqa: B018
    # A run numbered 0 .. n-1 answers from its columns; a run with gaps in its numbers fills the dict.
    assert dict.__len__(leaders) == (len(whole) if gapped else 0)
    assert isinstance(leaders, LeaderMap) and leaders.metadata is md
    assert len(leaders) == len(whole) and type(leaders) is LeaderMap and dict.__len__(leaders) == len(whole)
    assert leaders == whole and list(leaders.items()) == list(whole.items()) and set(leaders) == set(whole)


def test_leaders_read_whole_in_any_way_are_every_partitions():
    md, expected = read(answer((1, 2, 3)))
    whole = dict(expected.leaders)
    for read_whole in (list, len, dict, lambda m: m.keys(), lambda m: m.items(), lambda m: m.values(), lambda m: m.copy(),
                       lambda m: {**m}, lambda m: m | {}, repr, lambda m: list(reversed(m)), lambda m: m == whole):
        md, _ = read(answer((1, 2, 3)))
        read_whole(md.leaders)
        assert dict(dict.items(md.leaders)) == whole, read_whole


def test_leaders_looked_up_one_by_one_many_times_are_made_a_dict_then():
    """A caller looking up many partitions one by one (a bound ``get`` over thousands) pays dict's
    look-ups after ``LOOKED_UP_ALONE`` of them, not a topic run's each; and grouping many by leader
    makes the dict first."""
    from kafkatxn.kafka.session import group_by_leader
    from kafkatxn.leader_map import LOOKED_UP_ALONE, LeaderMap, LeadersWhenRead

    md, expected = read(answer((1, 2, 3)))
    get = md.leaders.get
    tps = expected.tps[1:]
    assert [get(tp) for tp in tps[:LOOKED_UP_ALONE]] == [expected.leaders[tp] for tp in tps[:LOOKED_UP_ALONE]]
    assert type(md.leaders) is LeadersWhenRead
    assert [get(tp) for tp in tps] == [expected.leaders[tp] for tp in tps] and type(md.leaders) is LeaderMap
    md, _ = read(answer((1, 2, 3)))
    assert group_by_leader(tps[:3], md.leaders, {}) == group_by_leader(tps[:3], dict(expected.leaders), {})
    assert type(md.leaders) is LeadersWhenRead  # a few: from the runs
    assert group_by_leader(tps, md.leaders, {}) == group_by_leader(tps, dict(expected.leaders), {})
    assert type(md.leaders) is LeaderMap
