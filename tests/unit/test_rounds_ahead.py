"""Rounds in flight together: a request that needs nothing of the round trip before it goes down with
that round (``Session.send_ahead``), and the call that makes it takes its answer, instead of a round
trip of its own. The requests are the same (each API to each broker, as many); only the waits are
fewer. On the code before, ``check``'s gather waited on 8 round trips after the metadata (the
topic-visibility probe, the offsets, the listing, FindCoordinator, the descriptions, the three of the
log probes and the listing between them, the Fetch ahead) and ``lso``'s configs read waited on a round
trip of its own after the Fetch ahead.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest

from kafkatxn import facts_cluster, lso
from kafkatxn.kafka import protocol as proto
from kafkatxn.kafka.session import BrokerSilent, Session
from kafkatxn.model import Broker, ProducerState, TopicPartition, TransactionDescription
from kafkatxn.snapshot import ClusterSnapshot
from tests.support.fake_kafka import FakeCluster, KafkaModel
from tests.support.wire_rounds import record_rounds

MAX = 900_000
T0 = TopicPartition("t", 0)


def build() -> KafkaModel:
    """Three brokers, each leading a partition whose LSO trails: producer 7 open and tracked by its
    coordinator (app-a), producer 8 open and listed by none (hanging), producer 9 tracked and young."""
    now = int(time.time() * 1000)
    m = KafkaModel(brokers=(1, 2, 3))
    m.add_transaction_log([1, 2, 3])
    a, b, c = (m.add_partition("orders", p, leader=p + 1, lso=4, hw=9) for p in range(3))
    m.producers[a] = [ProducerState(7, 0, 3, now - 2 * MAX, 1, 4)]
    m.transactions["app-a"] = TransactionDescription("app-a", 1, "Ongoing", 7, 0, MAX, now - 3 * MAX, frozenset([a]))
    m.producers[b] = [ProducerState(8, 0, 3, now - 2 * MAX, 1, 4)]
    m.record_timestamps[b] = {4: now - int(2.5 * MAX)}
    m.producers[c] = [ProducerState(9, 0, 3, now - 500, 1, 4)]
    m.transactions["app-b"] = TransactionDescription("app-b", 3, "Ongoing", 9, 0, MAX, now - 1_000, frozenset([c]))
    return m


@pytest.fixture
def rounds(monkeypatch):
    """Each round the fake wire is sent, as the ``(label, node)`` of each request it carried."""
    return record_rounds(monkeypatch)


def _sent(rounds: list[list[tuple[str, int | None]]]) -> Counter:
    return Counter(request for one in rounds for request in one)


def _round_of(rounds, label: str) -> set[int]:
    return {i for i, one in enumerate(rounds) if any(request == label for request, _node in one)}


def _without_ahead(monkeypatch) -> None:
    monkeypatch.setattr(Session, "send_ahead", lambda self, requests: None)


def _check(model: KafkaModel) -> None:
    facts_cluster.gather_snapshot(FakeCluster(model), max_transaction_timeout_ms=900_000)


def test_check_sends_the_listing_and_the_visibility_probe_with_the_offsets_and_the_first_log_probes_with_findcoordinator(
        rounds, monkeypatch):
    _check(build())
    ahead = list(rounds)
    offsets = _round_of(ahead, "ListOffsets (read_committed)")
    assert len(offsets) == 1
    assert _round_of(ahead, "ListTransactions") == offsets  # the unfiltered listing, once per broker
    assert _round_of(ahead, "Metadata") == offsets  # the topic-visibility probe (TopicMetadata)
    assert _round_of(ahead, "DescribeTransactions (log probe before listing)") == _round_of(ahead, "FindCoordinator")
    # The order that matters is kept: probe, listing, probe, each after the one before answered.
    before, = _round_of(ahead, "DescribeTransactions (log probe before listing)")
    between, = _round_of(ahead, "ListTransactions (listed between log probes)")
    after, = _round_of(ahead, "DescribeTransactions (log probe after listing)")
    assert before < between < after

    rounds.clear()
    _without_ahead(monkeypatch)
    _check(build())
    assert _sent(ahead) == _sent(rounds)  # the same requests, to the same brokers
    assert len(ahead) == len(rounds) - 3  # three round trips fewer


def test_check_without_a_timeout_reads_the_brokers_timeouts_with_the_coordinators_first_round(rounds, monkeypatch):
    facts_cluster.gather_snapshot(FakeCluster(build()))
    ahead = list(rounds)
    configs, = _round_of(ahead, "DescribeConfigs")
    # Not a round of its own: with the next round after the offsets' (the fake's ApiVersions; FindCoordinator on a cluster).
    assert configs > min(_round_of(ahead, "ListOffsets (read_committed)"))
    assert {label for label, _node in ahead[configs]} - {"DescribeConfigs"}

    rounds.clear()
    _without_ahead(monkeypatch)
    facts_cluster.gather_snapshot(FakeCluster(build()))
    assert _sent(ahead) == _sent(rounds)
    assert len(ahead) == len(rounds) - 4  # the three of the test above, and the configs' own


def test_lso_reads_the_brokers_timeouts_with_the_fetch_ahead(rounds, monkeypatch):
    lso.partition_report(FakeCluster(build()))
    ahead = list(rounds)
    configs = _round_of(ahead, "DescribeConfigs")
    assert configs and configs == _round_of(ahead, "Fetch (read_uncommitted)")

    rounds.clear()
    _without_ahead(monkeypatch)
    lso.partition_report(FakeCluster(build()))
    assert _sent(ahead) == _sent(rounds)
    assert len(ahead) == len(rounds) - 1


# -- the session's part ----------------------------------------------------------------------------------


def _two_brokers() -> FakeCluster:
    model = KafkaModel(brokers=(1, 2))
    model.add_partition("t", 0, leader=1)
    return FakeCluster(model)


def test_a_request_sent_ahead_goes_with_the_next_round_and_its_call_takes_the_answer(rounds):
    cluster = _two_brokers()
    with cluster.one_run():
        cluster.send_ahead([(2, proto.DescribeConfigs("broker", "2", ("a",)))])
        cluster.list_offsets([T0], read_committed=True)
        assert rounds == [[("ListOffsets (read_committed)", 1), ("DescribeConfigs", 2)]]
        configs = cluster.broker_configs(["a"], [2])
    assert len(rounds) == 1  # answered from the round it went with
    assert configs.missing == [] and 2 in configs.value


def test_a_request_sent_ahead_that_its_round_makes_too_goes_once(rounds):
    cluster = _two_brokers()
    with cluster.one_run():
        cluster.broker_configs_ahead(["a"])
        cluster.broker_configs(["a"])
    assert rounds == [[("DescribeConfigs", 1), ("DescribeConfigs", 2)]]


def test_what_was_sent_ahead_and_not_taken_ends_with_the_run_and_nothing_goes_ahead_outside_one(rounds):
    cluster = _two_brokers()
    with cluster.one_run():
        cluster.broker_configs_ahead(["a"])
        cluster.list_offsets([T0], read_committed=True)
    cluster.broker_configs(["a"])  # after the run: asked again, not taken from it
    cluster.send_ahead([(1, proto.DescribeConfigs("broker", "1", ("b",)))])
    cluster.list_offsets([T0], read_committed=True)
    assert [len(one) for one in rounds] == [3, 2, 1]


def test_a_request_sent_ahead_to_a_silent_broker_is_answered_so(rounds):
    cluster = _two_brokers()
    cluster.model.down.add(2)
    with cluster.one_run():
        cluster.broker_configs([], [2])  # broker 2 goes silent
        cluster.broker_configs_ahead(["a"], [2])
        cluster.list_offsets([T0], read_committed=True)
        configs = cluster.broker_configs(["a"], [2])
    assert [len(one) for one in rounds] == [1, 1]  # nothing more to the silent broker
    assert [m.subject for m in configs.missing] == [Broker(2)]



# -- a round begun now (Session.send_now): lso's offsets go down before its library imports ---------------


def test_lso_sends_its_offsets_ahead_and_the_snapshot_takes_them(rounds, monkeypatch):
    from kafkatxn.cli import lso_cmd

    cluster = FakeCluster(build())
    report = lso_cmd._partition_report(cluster, None, 1, "lag", None, lso.DEFAULT_CRITICAL_AGE_MS, False, None)
    ahead = list(rounds)
    assert cluster.wire.begun == 1  # the ListOffsets pairs, begun before the library was imported
    assert [label for label, _node in ahead[0]] == ["ListOffsets (read_committed)", "ListOffsets (read_uncommitted)"] * 3

    rounds.clear()
    plain = lso.partition_report(FakeCluster(build()))
    assert _sent(ahead) == _sent(rounds)  # the same requests, to the same brokers, as many rounds
    assert len(ahead) == len(rounds)
    ageless = [{k: v for k, v in vars(row).items() if not k.endswith("age_ms")} for row in report.rows]
    assert ageless == [{k: v for k, v in vars(row).items() if not k.endswith("age_ms")} for row in plain.rows]
    assert report.exit_code == plain.exit_code


class _ColumnsCluster(FakeCluster):
    """A fake cluster whose metadata is read as columns (``metadata_columns.ColumnMetadata``), as the wire
    reads a Kafka 3.x answer, and kept until refreshed (as ``MetadataApi.metadata`` keeps it)."""

    def metadata(self, refresh: bool = False):
        from itertools import groupby

        from kafkatxn.metadata_columns import ColumnMetadata, MetadataColumns, TopicRun

        if self._metadata is None or refresh:
            plain = super().metadata(refresh)
            runs = [TopicRun(name, tuple(p.partition for p in ps), tuple(p.leader for p in ps), ps[0].internal, tuple(ps))
                    for name, ps in ((name, list(ps)) for name, ps in groupby(plain.partitions, key=lambda p: p.topic))]
            self._metadata = ColumnMetadata(plain.cluster_id, plain.controller_id, plain.brokers, MetadataColumns(runs), None)
        return self._metadata


def test_lso_sends_its_offsets_from_the_metadatas_columns_before_it_makes_their_partitions(rounds, monkeypatch):
    """lso's ListOffsets go down from each leader's topics' runs the moment the metadata is read: its
    30,000 TopicPartitions (~10 ms), their grouping by leader and the leaders' dict are made while the
    brokers answer, not before. The same requests, in one round, taken by the snapshot's call."""
    from kafkatxn.cli import lso_cmd

    made_when_sent: list[bool] = []
    send_now = Session.send_now
    monkeypatch.setattr(Session, "send_now", lambda self, requests: made_when_sent.append("tps" in self.metadata().__dict__)
                        or send_now(self, requests))
    steps: list[str] = []
    for step in ("data_offsets_ahead", "will_read_log_while_waiting", "select_in_partition_order"):
        monkeypatch.setattr(_ColumnsCluster, step, lambda self, *a, _step=step, _call=getattr(FakeCluster, step): steps.append(_step)
                            or _call(self, *a))
    cluster = _ColumnsCluster(build())
    report = lso_cmd._partition_report(cluster, None, 1, "lag", None, lso.DEFAULT_CRITICAL_AGE_MS, False, None)
    assert made_when_sent[0] is False  # no TopicPartition made yet
    # and made after the library's imports: their file reads let the IO thread send meanwhile (the GIL given up)
    assert steps == ["data_offsets_ahead", "will_read_log_while_waiting", "select_in_partition_order"]
    assert cluster.wire.begun == 1  # sent once: stable_and_high_offsets_ahead finds them gone down already
    assert [label for label, _node in rounds[0]] == ["ListOffsets (read_committed)", "ListOffsets (read_uncommitted)"] * 3
    ahead = list(rounds)
    rounds.clear()
    plain = lso.partition_report(_ColumnsCluster(build()))  # nothing sent ahead
    assert _sent(ahead) == _sent(rounds) and len(ahead) == len(rounds)
    ageless = [{k: v for k, v in vars(row).items() if not k.endswith("age_ms")} for row in report.rows]
    assert ageless == [{k: v for k, v in vars(row).items() if not k.endswith("age_ms")} for row in plain.rows]


@pytest.mark.parametrize("batch", [2, 10_000])
def test_check_sends_its_first_round_from_the_metadatas_columns_before_it_makes_their_partitions(rounds, monkeypatch, batch):
    """check's ListOffsets and DescribeProducers go down from each leader's topics' runs the moment the
    metadata is read (a leader's DescribeProducers cut into batches of those runs): its 30,000
    TopicPartitions (~10 ms) and their grouping by leader (~5 ms) are made while the brokers answer, not
    before. The same requests, in one round, taken by the gather's call; the same findings."""
    from kafkatxn.kafka import producer_state

    monkeypatch.setattr(producer_state, "DESCRIBE_PRODUCERS_BATCH", batch)

    def model() -> KafkaModel:
        m = build()
        for p in range(3, 8):  # broker 1 leads more than a DescribeProducers batch of two
            m.add_partition("orders", p, leader=1, lso=9, hw=9)
        return m

    from kafkatxn.metadata_columns import ColumnMetadata

    made_when_sent: list[bool] = []
    send_now = Session.send_now
    monkeypatch.setattr(Session, "send_now", lambda self, requests: made_when_sent.append("tps" in self.metadata().__dict__)
                        or send_now(self, requests))
    grouped: list[int] = []
    all_by_leader = ColumnMetadata.all_by_leader
    monkeypatch.setattr(ColumnMetadata, "all_by_leader", lambda self, silent: grouped.append(1) or all_by_leader(self, silent))
    cluster = _ColumnsCluster(model())
    cluster.wire.answered_at_once = False
    ahead_snap = facts_cluster.gather_snapshot(cluster, max_transaction_timeout_ms=MAX, clock=lambda: 1_800_000_000)
    assert made_when_sent[0] is False  # no TopicPartition made yet
    assert cluster.wire.begun == 1  # the round sent once: the call took every answer of it
    assert len(grouped) == 1  # the partitions grouped by leader once, after the round was sent, for both APIs
    first = Counter(label for label, _node in rounds[0])
    assert first["ListOffsets (read_committed)"] == first["ListOffsets (read_uncommitted)"] == 3
    assert first["DescribeProducers"] == (6 if batch == 2 else 3)  # broker 1: seven partitions (a log one), four batches
    ahead = list(rounds)

    rounds.clear()
    monkeypatch.setattr(Session, "send_now", lambda self, requests: None)
    plain = facts_cluster.gather_snapshot(_ColumnsCluster(model()), max_transaction_timeout_ms=MAX, clock=lambda: 1_800_000_000)
    assert _sent(ahead) == _sent(rounds) and len(ahead) == len(rounds)  # the same requests, as many rounds

    def figures(snap):
        return ([(h.topic, h.partition, h.producer_id, h.reason) for h in snap.hanging + snap.untracked],
                snap.open_transaction_count, snap.active_producer_ids, snap.missing, tuple(snap.partitions))

    assert figures(ahead_snap) == figures(plain) and ahead_snap.hanging


def test_offsets_sent_from_the_columns_are_taken_by_a_call_that_groups_anew(rounds):
    """A leader silent since lso's offsets went down from the columns: the call groups the partitions
    itself, and takes the answers of the other leaders' requests sent ahead (not asked again)."""
    model = KafkaModel(brokers=(1, 2, 3))
    tps = [model.add_partition("t", p, leader=p % 3 + 1, lso=p, hw=p + 2) for p in range(6)]
    cluster = _ColumnsCluster(model)
    with cluster.one_run():
        cluster.data_offsets_ahead()
        partitions, leaders = cluster.select_in_partition_order()
        cluster.stable_and_high_offsets_ahead(partitions, leaders)
        assert partitions == tps and len(rounds) == 1
        cluster.silent[2] = BrokerSilent(2, 1.0)  # a leader that used up its share since
        partial = cluster.stable_and_high_offsets(list(partitions))
    assert len(rounds) == 1  # leaders 1 and 3 answered ahead: taken
    assert partial.value == {tp: (p, p + 2) for p, tp in enumerate(tps) if model.leader(tp) != 2}


def test_a_round_begun_now_is_taken_by_the_call_that_makes_its_requests(rounds):
    cluster = _two_brokers()
    with cluster.one_run():
        cluster.stable_and_high_offsets_ahead([T0])
        assert len(rounds) == 1
        pairs = cluster.stable_and_high_offsets([T0])
        assert len(rounds) == 1  # taken from the round begun ahead
        cluster.stable_and_high_offsets_ahead([T0])  # the run holds offsets: nothing goes ahead
        assert len(rounds) == 1
    assert pairs.value == {T0: (0, 0)} and pairs.missing == []


def test_the_call_that_takes_a_round_begun_now_takes_its_grouping_by_leader(rounds, monkeypatch):
    """lso's offsets are sent ahead, grouped by leader; the snapshot's call asks the same partitions by
    the same metadata, and takes that grouping instead of making it again (30,000 partitions). Asked
    of other partitions, or with a leader silent since, it groups them itself; the answers are the same."""
    from kafkatxn.kafka import offsets

    grouped: list[int] = []
    group_by_leader = offsets.group_by_leader
    monkeypatch.setattr(offsets, "group_by_leader", lambda tps, *a: grouped.append(len(tps)) or group_by_leader(tps, *a))

    class Cluster(FakeCluster):  # its metadata kept until refreshed, as the session keeps it (MetadataApi.metadata)
        def metadata(self, refresh: bool = False):
            if self._metadata is None or refresh:
                self._metadata = super().metadata(refresh)
            return self._metadata

    model = KafkaModel(brokers=(1, 2, 3))
    tps = [model.add_partition("t", p, leader=p % 3 + 1, lso=p, hw=p + 2) for p in range(6)]
    expected = {tp: (p, p + 2) for p, tp in enumerate(tps)}
    cluster = Cluster(model)
    with cluster.one_run():
        cluster.stable_and_high_offsets_ahead(tps)
        pairs = cluster.stable_and_high_offsets(list(tps))
    assert grouped == [6] and len(rounds) == 1 and pairs.value == expected and pairs.missing == []
    grouped.clear()
    cluster = Cluster(model)
    with cluster.one_run():
        cluster.stable_and_high_offsets_ahead(tps)
        other = cluster.stable_and_high_offsets(tps[:3])  # not the partitions sent ahead: grouped anew
    assert grouped == [6, 3] and other.value == {tp: expected[tp] for tp in tps[:3]}
    grouped.clear()
    cluster = Cluster(model)
    with cluster.one_run():
        cluster.stable_and_high_offsets_ahead(tps)
        cluster.silent[2] = BrokerSilent(2, 1.0)  # a leader that used up its share since
        partial = cluster.stable_and_high_offsets(list(tps))
    assert grouped == [6, 6] and set(partial.value) == {tp for tp in tps if model.leader(tp) != 2}


def test_nothing_is_begun_outside_a_run_and_what_a_run_did_not_take_ends_with_it(rounds):
    cluster = _two_brokers()
    cluster.send_now([(1, proto.ListOffsets((T0,), True))])
    assert rounds == []
    with cluster.one_run():
        cluster.send_now([(1, proto.ListOffsets((T0,), True))])
    cluster.list_offsets([T0], read_committed=True)  # after the run: asked again
    assert len(rounds) == 2


def test_a_round_begun_now_at_a_broker_that_does_not_answer_makes_it_silent(rounds):
    cluster = _two_brokers()
    cluster.model.down.add(1)
    with cluster.one_run():
        cluster.send_now([(1, proto.ListOffsets((T0,), True))])
        offsets = cluster.list_offsets([T0], read_committed=True)
        assert 1 in cluster.silent
    assert len(rounds) == 1 and offsets.value == {} and offsets.missing


def test_hanging_sends_the_visibility_probe_with_the_producer_states(rounds, monkeypatch):
    from kafkatxn import hanging

    found = hanging.find_hanging(FakeCluster(build()), max_transaction_timeout_ms=MAX)
    ahead = list(rounds)
    assert _round_of(ahead, "Metadata") == _round_of(ahead, "DescribeProducers")  # the probe (TopicMetadata)

    rounds.clear()
    _without_ahead(monkeypatch)
    plain = hanging.find_hanging(FakeCluster(build()), max_transaction_timeout_ms=MAX)
    assert _sent(ahead) == _sent(rounds)
    assert len(ahead) == len(rounds) - 1
    assert [(r.topic, r.partition, r.producer_id) for r in found.hanging] == [(r.topic, r.partition, r.producer_id) for r in plain.hanging]
    assert found.missing == plain.missing


def test_protocol_modules_import_while_a_round_begun_now_waits_and_not_once_it_is_answered(monkeypatch):
    from kafkatxn.kafka.wire import client_package

    imported: list[tuple[str, ...]] = []
    monkeypatch.setattr(client_package, "import_protocol", lambda apis: imported.append(tuple(apis)))
    cluster = _two_brokers()
    with cluster.one_run():
        cluster.will_ask_while_waiting("Fetch")  # nothing in flight
        cluster.wire.answered_at_once = False
        cluster.stable_and_high_offsets_ahead([T0])
        cluster.will_ask_while_waiting("DescribeProducers", "Fetch")
        cluster.wire.answered_at_once = True
        cluster.will_ask_while_waiting("DescribeConfigs")  # answered: imported where first sent, if it is
    assert imported == [("DescribeProducers",), ("Fetch",)]


def test_hanging_sends_its_producer_states_ahead_with_the_probe_and_the_scan_takes_them(rounds):
    from kafkatxn import hanging
    from kafkatxn.cli import hanging_cmd

    cluster = FakeCluster(build())
    found = hanging_cmd._find_hanging(cluster, None, None, None, MAX)
    ahead = list(rounds)
    assert cluster.wire.begun == 1
    assert {label for label, _node in ahead[0]} == {"DescribeProducers", "Metadata"}  # the states, and the probe riding

    rounds.clear()
    plain = hanging.find_hanging(FakeCluster(build()), max_transaction_timeout_ms=MAX)
    assert _sent(ahead) == _sent(rounds)  # the same requests, to the same brokers, as many rounds
    assert len(ahead) == len(rounds)
    assert [(r.topic, r.partition, r.producer_id) for r in found.hanging] == [(r.topic, r.partition, r.producer_id) for r in plain.hanging]
    assert found.missing == plain.missing


def test_a_request_sent_ahead_twice_goes_once(rounds):
    cluster = _two_brokers()
    with cluster.one_run():
        cluster.topic_list_filtered_ahead()
        cluster.describe_producers_ahead([T0])  # the probe goes with these
        cluster.topic_list_filtered_ahead()  # gone down, not taken yet: not again
        cluster.describe_producers([T0])
        cluster.topic_list_filtered()
        cluster.list_offsets([T0], read_committed=True)
    assert [label for one in rounds for label, _node in one].count("Metadata") == 1


def _groups_model() -> KafkaModel:
    """A group whose commit trails the LSO by a gap with records in it (the probe finds one: the exporter's
    memo keeps that answer, read again only while the log start stays at or below it), one assigned a
    partition without a commit, and a partition of each leader."""
    m = KafkaModel(brokers=(1, 2))
    a = m.add_partition("orders", 0, leader=1, lso=8, hw=8)
    b = m.add_partition("orders", 1, leader=2, lso=6, hw=6)
    m.groups["g"] = {a: 5, b: 6}
    m.groups["h"] = {a: 8}
    m.assignments["h"] = {a, b}  # b: no commit
    m.log_starts[b] = 2
    return m


def test_the_exporters_log_starts_go_with_the_offsets_round_trip(rounds, monkeypatch):
    """A warm gather with group lag (facts_lso.log_starts_ahead): the log starts the group pass reads (of
    the partitions without a commit, and those a kept probe answer found a record on) ride with the
    offsets' round trip instead of one of their own: the same requests, one round trip fewer, the same
    snapshot."""
    from kafkatxn.facts_probes import ProbeMemo

    def warm() -> tuple[list, ClusterSnapshot]:
        model, memo = _groups_model(), ProbeMemo()
        facts_cluster.gather_snapshot(FakeCluster(model), max_transaction_timeout_ms=MAX, groups=True, probe_memo=memo)
        assert memo.recorded() == [TopicPartition("orders", 0)]
        rounds.clear()
        snap = facts_cluster.gather_snapshot(FakeCluster(model), max_transaction_timeout_ms=MAX, groups=True, probe_memo=memo)
        return list(rounds), snap

    ahead, snap = warm()
    from kafkatxn import facts_lso

    monkeypatch.setattr(facts_lso, "log_starts_ahead", lambda cluster, by_group, memo: None)
    alone, snap_alone = warm()
    assert _sent(ahead) == _sent(alone)  # the same requests, to the same brokers
    assert len(ahead) == len(alone) - 1
    assert tuple(snap.groups) == tuple(snap_alone.groups) and snap.missing == snap_alone.missing == ()
    assert [(s.group, s.partition, s.lag_messages) for s in snap.groups] == [("g", 0, 3), ("g", 1, 0), ("h", 0, 0), ("h", 1, 4)]


def test_a_requests_partitions_are_hashed_once_and_as_their_tuple():
    """A request sent ahead is a key looked up as it rides, lands and is taken: its 10,000 partitions
    were hashed at each look-up (~90 M instructions of check's first round at 30,000 partitions)."""
    from kafkatxn.kafka.rounds_ahead import HashedOnce

    hashed = Counter()

    class Counted(int):
        def __hash__(self) -> int:
            hashed[int(self)] += 1
            return int.__hash__(self)

    partitions = HashedOnce(map(Counted, range(3)))
    request = proto.DescribeProducers(partitions)
    kept = {(1, type(request), request): "answer"}
    for _ in range(4):
        assert kept[(1, type(request), proto.DescribeProducers(partitions))] == "answer"
    assert hashed == Counter({0: 1, 1: 1, 2: 1})
    assert partitions == (0, 1, 2) and hash(partitions) == hash((0, 1, 2))



class _KnowsItsBrokers(FakeCluster):
    """The fake whose metadata names the brokers a request for any broker may go to (the bootstrap
    broker first: here broker 1), as the real session's does: the fake's own leaves the client to pick."""

    def metadata(self, refresh: bool = False):
        md = super().metadata(refresh)
        self._last_metadata = md
        return md


def test_check_sends_the_visibility_probe_to_the_broker_its_offsets_round_gives_fewest_requests(rounds, monkeypatch):
    # A leader of more partitions than one DescribeProducers carries is sent two: with the listing and the
    # probe on its connection too it was given six, and a connection keeps five in flight (the sixth, its
    # ListTransactions, waited for an answer of that leader's; when the wire sent waves, for the whole
    # round's: 13 ms of check's at 30,000 partitions). The probe, for any broker, goes where the round gives fewest.
    from kafkatxn.kafka import producer_state

    monkeypatch.setattr(producer_state, "DESCRIBE_PRODUCERS_BATCH", 2)
    model = build()
    for p in range(3, 5):
        model.add_partition("orders", p, leader=1, lso=9, hw=9)
    facts_cluster.gather_snapshot(_KnowsItsBrokers(model), max_transaction_timeout_ms=900_000)
    offsets, = _round_of(rounds, "ListOffsets (read_committed)")
    per_broker = Counter(node for _label, node in rounds[offsets])
    assert per_broker == {1: 5, 2: 5, 3: 4}, rounds[offsets]  # the probe on broker 2, not on broker 1 as its sixth
    assert ("Metadata", 2) in rounds[offsets]


def test_check_begins_its_offsets_and_producers_round_now_and_reads_the_log_modules_while_it_waits(rounds, monkeypatch):
    # The round was sent by the call (the main thread waiting in it), and the log's readers imported after
    # the Fetch had answered, at check's end: ~5 ms on its critical path at 30,000 partitions.
    import importlib

    from kafkatxn.kafka import offsets, producer_state

    class Cluster(FakeCluster):  # its metadata kept until refreshed, as the session keeps it (MetadataApi.metadata)
        def metadata(self, refresh: bool = False):
            if self._metadata is None or refresh:
                self._metadata = super().metadata(refresh)
            return self._metadata

    grouped: list[int] = []
    group_by_leader = offsets.group_by_leader
    monkeypatch.setattr(offsets, "group_by_leader", lambda tps, *a: grouped.append(len(tps)) or group_by_leader(tps, *a))
    monkeypatch.setattr(producer_state, "group_by_leader", lambda tps, *a: grouped.append(len(tps)) or group_by_leader(tps, *a))
    imported: list[str] = []
    import_module = importlib.import_module
    monkeypatch.setattr(importlib, "import_module", lambda name, *a: imported.append(name) or import_module(name, *a))
    cluster = Cluster(build())
    cluster.wire.answered_at_once = False
    ahead_snap = facts_cluster.gather_snapshot(cluster, max_transaction_timeout_ms=MAX, clock=lambda: 1_800_000_000)
    ahead = list(rounds)
    assert cluster.wire.begun == 1 and "kafkatxn.kafka.log_fetch" in imported
    assert grouped.count(len(cluster.metadata().partitions)) == 1  # every partition grouped by leader once, for both APIs
    offsets_round, = _round_of(ahead, "ListOffsets (read_committed)")
    assert {"DescribeProducers", "ListTransactions", "Metadata"} <= {label for label, _ in ahead[offsets_round]}

    rounds.clear()
    monkeypatch.setattr(Session, "send_now", lambda self, requests: None)
    plain = facts_cluster.gather_snapshot(Cluster(build()), max_transaction_timeout_ms=MAX, clock=lambda: 1_800_000_000)
    assert _sent(ahead) == _sent(rounds) and len(ahead) == len(rounds)  # the same requests, as many rounds
    assert [r[:2] for r in ahead] == [r[:2] for r in rounds]
    def figures(snap):  # (the model's records are dated as it is built)
        return ([(h.topic, h.partition, h.producer_id, h.reason) for h in snap.hanging + snap.untracked],
                snap.open_transaction_count, snap.active_producer_ids, snap.missing)

    assert figures(ahead_snap) == figures(plain) and ahead_snap.hanging
