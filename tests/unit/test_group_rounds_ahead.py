"""The group pass's rounds in flight together (``Session.send_ahead``): the members' assignments
(DescribeGroups) go down with the committed offsets' OffsetFetch, after it at each coordinator, and
every round of read_committed probes with the first. The same requests to the same brokers, the same
snapshot; only the round trips are fewer. On the code before, ``check --groups`` waited on a round trip
for DescribeGroups after OffsetFetch's, and on one per round of probes (a partition is probed from one
start a request: three groups at three offsets below its LSO make three rounds)."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from kafkatxn import facts_cluster, facts_lso
from kafkatxn.kafka import protocol as proto
from kafkatxn.kafka.offsets import OffsetsApi
from kafkatxn.model import ProducerState, TopicPartition, TransactionDescription
from tests.support.fake_kafka import FakeCluster, KafkaModel
from tests.support.wire_rounds import record_rounds

T0 = 1_700_000_000_000


def _batch(offset: int, pid: int = -1, control: str | None = None) -> proto.FetchedBatch:
    records = () if control else (proto.FetchedRecord(offset, T0 + offset, b"k", b"v"),)
    return proto.FetchedBatch(offset, offset, pid, 0 if pid >= 0 else -1, pid >= 0, control, records)


def build(assigned: bool = True) -> KafkaModel:
    """Three brokers; six partitions of 9 records (offsets 0-8), the last one a COMMIT marker on
    orders-1 (nothing readable from 8 there); orders-0's LSO pinned at 4 by a tracked transaction.
    Six groups commit 6, 7 and 8 (below the LSO: probed, three starts a partition, three rounds) and
    one is Stable with a member assigned orders-5, where it has no commit."""
    now = int(time.time() * 1000)
    m = KafkaModel(brokers=(1, 2, 3))
    m.add_transaction_log([1, 2, 3])
    for p in range(3):
        m.add_partition("__consumer_offsets", p, leader=p + 1, lso=0, hw=0)
    tps = [m.add_partition("orders", p, leader=p % 3 + 1, lso=9, hw=9) for p in range(6)]
    for tp in tps:
        m.batches[tp] = [_batch(o) for o in range(9)]
    m.batches[tps[1]][8] = _batch(8, pid=5, control="COMMIT")
    pinned = tps[0]
    m.offsets[pinned] = [4, 9]
    m.producers[pinned] = [ProducerState(7, 0, 3, now - 500, 1, 4)]
    m.transactions["app-a"] = TransactionDescription("app-a", 1, "Ongoing", 7, 0, 900_000, now - 1_000, frozenset([pinned]))
    for g in range(6):
        m.groups[f"g{g}"] = {tp: (4 if tp == pinned else 8 - g % 3) for tp in tps[:5]}
    if assigned:
        m.assignments["g0"] = {tps[5]}
    return m


@pytest.fixture
def rounds(monkeypatch):
    """Each round the fake wire is sent, as the ``(label, node)`` of each request; the probes over the
    wire's Fetch (the fake cluster answers them from the model otherwise)."""
    monkeypatch.setattr(FakeCluster, "first_readable_offsets", OffsetsApi.first_readable_offsets)
    monkeypatch.setattr(FakeCluster, "first_readable_offsets_ahead", OffsetsApi.first_readable_offsets_ahead)
    return record_rounds(monkeypatch)


def _sent(rounds) -> Counter:
    return Counter(request for one in rounds for request in one)


def _rounds_of(rounds, label: str) -> list[int]:
    return [i for i, one in enumerate(rounds) if any(request == label for request, _node in one)]


def _check_groups(assigned: bool = True):
    snap = facts_cluster.gather_snapshot(FakeCluster(build(assigned)), max_transaction_timeout_ms=900_000, groups=True)
    return tuple(s._replace(txn_age_ms=None) for s in snap.groups), snap.missing, snap.not_gathered  # ages move between runs


@pytest.mark.parametrize("assigned", [True, False])
def test_check_groups_sends_describegroups_with_offsetfetch_and_every_probe_round_together(rounds, monkeypatch, assigned):
    made = _check_groups(assigned)
    ahead = list(rounds)
    assert len(_rounds_of(ahead, "OffsetFetch")) == 1
    offset_fetch, = _rounds_of(ahead, "OffsetFetch")
    if assigned:  # only g0 is Stable: the groups ListGroups lists Empty are not described
        assert _rounds_of(ahead, "DescribeGroups") == [offset_fetch]
        described = {n for label, n in ahead[offset_fetch] if label == "DescribeGroups"}
        assert described == {FakeCluster(build()).model.group_coordinator("g0")}
    else:
        assert _rounds_of(ahead, "DescribeGroups") == []
    # After OffsetFetch at each coordinator: the assignments are read after the commits.
    for node in (1, 2, 3):
        at_node = [label for label, n in ahead[offset_fetch] if n == node]
        assert "DescribeGroups" not in at_node or at_node.index("DescribeGroups") > at_node.index("OffsetFetch")
    assert len(_rounds_of(ahead, "Fetch (read_committed)")) == 1
    assert _sent(ahead)[("Fetch (read_committed)", 1)] == 3  # three starts on orders-3: three requests, one round

    rounds.clear()
    monkeypatch.setattr(FakeCluster, "group_assignments_ahead", lambda self, groups: None)
    monkeypatch.setattr(FakeCluster, "first_readable_offsets_ahead", lambda self, starts: None)
    assert _check_groups(assigned) == made  # the same samples and missing parts
    assert _sent(ahead) == _sent(rounds)  # the same requests, to the same brokers
    assert len(_rounds_of(rounds, "Fetch (read_committed)")) == 3
    if assigned:  # g0's assignment without a commit: the probes go with its log start's ListOffsets
        assert len(ahead) == len(rounds) - 4  # DescribeGroups' round and the three probe rounds
        assert _rounds_of(ahead, "Fetch (read_committed)") == [len(ahead) - 1]
        assert ("ListOffsets (read_uncommitted)", 3) in ahead[-1]
    else:  # the second and third rounds of probes with the first (no DescribeGroups: every group listed Empty)
        assert len(ahead) == len(rounds) - 2
        assert {label for label, _node in ahead[-1]} == {"Fetch (read_committed)"}


def test_the_probes_find_what_they_found_before(rounds):
    groups, missing, not_gathered = _check_groups()
    assert not missing and not not_gathered
    lags = {(s.group, s.topic, s.partition): s.lag_messages for s in groups}
    assert lags[("g0", "orders", 1)] == 0  # only the COMMIT marker between 8 and the LSO
    assert lags[("g0", "orders", 2)] == 1
    assert lags[("g2", "orders", 3)] == 3  # from 6: 6, 7 and 8
    assert lags[("g0", "orders", 5)] == 9  # assigned, no commit (DescribeGroups): at most from the log start
    assert {(s.group, s.partition) for s in groups if s.waiting} == {(f"g{g}", 0) for g in range(6)}


def test_nothing_goes_ahead_when_a_groups_coordinator_is_not_known(rounds):
    cluster = FakeCluster(build())
    with cluster.one_run():
        cluster.group_assignments_ahead(["g0", "not-listed"])  # ListGroups has not placed them: FindCoordinator first
        assert cluster.group_offsets(["g0"]).value
    assert _rounds_of(rounds, "DescribeGroups") == []


def test_a_probe_round_that_differs_from_what_went_ahead_is_asked_on_its_own(rounds):
    cluster = FakeCluster(build())
    tp = TopicPartition("orders", 3)
    with cluster.one_run():
        facts_lso.take_snapshot(cluster, [tp])
        cluster.first_readable_offsets_ahead({tp: 6})
        cluster.group_offsets(["g0"])  # the round the probe rides with
        assert cluster.first_readable_offsets({tp: 7}).value == {tp: 7}  # not the answer from 6
    assert len(_rounds_of(rounds, "Fetch (read_committed)")) == 2


def test_the_group_pass_takes_the_offsets_pass_pairs_and_asks_only_the_rest(rounds):
    """check's group pass is handed the offsets pass's (LSO, HW) pairs (take_snapshot's ``known``): those
    are its offsets as they are; a partition not among them is asked."""
    cluster = FakeCluster(build())
    a, b, c = (TopicPartition("orders", p) for p in (0, 1, 2))
    with cluster.one_run():
        snap = facts_lso.take_snapshot(cluster, [c, a, b], known={a: (4, 9), b: (9, 9)}, max_transaction_timeout_ms=900_000)
    assert snap.offsets == {a: (9, 4), b: (9, 9), c: (9, 9)}  # Offsets(high_watermark, last_stable_offset)
    asked = [r for one in rounds for r in one if r[0].startswith("ListOffsets")]
    assert asked == [("ListOffsets (read_committed)", 3), ("ListOffsets (read_uncommitted)", 3)]  # orders-2's leader only
    assert snap.pin(a) is not None  # the pin behind the pair taken is described


def test_a_scrapes_group_listings_go_with_the_round_before_them_to_the_brokers_last_named(rounds):
    """An exporter scrape's ListGroups (one a broker) go with its Metadata, the round before them, to the
    brokers the last scrape's metadata named (exporter.ClusterGatherer): on the code before, a round trip of
    their own between the scrape's Metadata and its OffsetFetch. The same requests and the same groups."""
    cluster = FakeCluster(build())
    with cluster.one_run():
        cluster.list_groups_ahead()  # no metadata read yet: nothing goes ahead
        assert cluster.list_groups() == [f"g{g}" for g in range(6)]
    assert [{label for label, _node in one} for one in rounds] == [{"ListGroups"}]
    cluster._last_metadata = cluster.metadata()  # as the wire's metadata keeps it across scrapes
    cluster.restart_deadline(30)
    rounds.clear()
    with cluster.one_run():
        cluster.list_groups_ahead()
        cluster.api_versions()  # the round before the listing (the scrape's Metadata, read by the wire)
        assert cluster.list_groups() == [f"g{g}" for g in range(6)]
    (one,) = rounds
    assert sorted(one) == [("ApiVersions", 1), ("ApiVersions", 2), ("ApiVersions", 3),
                           ("ListGroups", 1), ("ListGroups", 2), ("ListGroups", 3)]
