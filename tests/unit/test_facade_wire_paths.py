"""The facade's batching, routing and retry paths, run against the in-memory cluster of tests/support.

Request counts here are the facade's own decisions (how it splits and routes), counted as the fake
wire receives them. ListOffsets per leader and level with a retry after a leader move is in
test_lso.py (test_stable_and_high_offsets_one_request_per_leader_and_level_and_a_retry_after_leader_moves).
"""

from __future__ import annotations

import time
from collections import Counter

from kafkatxn import gather, remedy, transaction_listing
from kafkatxn.kafka import facade, producer_state, retry
from kafkatxn.kafka import protocol as proto
from kafkatxn.model import IDS_ALL, Broker, ProducerState, TransactionalId, TransactionDescription
from tests.support.fake_kafka import FakeCluster, KafkaModel

NOW = 1_700_000_000_000


def sent(model, kind):
    return [(node, r) for node, r in model.sent if isinstance(r, kind)]


def txn(tid, coordinator, pid, state="Ongoing", partitions=()):
    return TransactionDescription(tid, coordinator, state, pid, 3, 60_000, NOW - 5_000, frozenset(partitions))


# -- DescribeProducers: per leader, at most DESCRIBE_PRODUCERS_BATCH partitions a request -----------


def test_describe_producers_1201_partitions_on_2_leaders_go_in_batches_of_at_most_the_batch_size(monkeypatch):
    monkeypatch.setattr(producer_state, "DESCRIBE_PRODUCERS_BATCH", 500)  # the splitting, at a size small enough to see
    model = KafkaModel(brokers=(1, 2))
    tps = [model.add_partition("big", i, leader=1 if i < 601 else 2) for i in range(1201)]
    model.producers[tps[0]] = [ProducerState(7, 0, 1, NOW, 0, 5)]
    result = FakeCluster(model).describe_producers(tps)
    requests = sent(model, proto.DescribeProducers)
    assert sorted((node, len(r.partitions)) for node, r in requests) == [(1, 101), (1, 500), (2, 100), (2, 500)]
    for node, r in requests:
        assert all(model.leader(tp) == node for tp in r.partitions)
    assert sorted(tp for _node, r in requests for tp in r.partitions) == sorted(tps)  # each partition once
    assert len(result.value) == 1201 and result.missing == []
    assert result.value[tps[0]] == [ProducerState(7, 0, 1, NOW, 0, 5)]


def test_describe_producers_a_leaders_partitions_up_to_the_batch_size_are_one_request():
    model = KafkaModel()
    tps = [model.add_partition("t", i) for i in range(facade.DESCRIBE_PRODUCERS_BATCH)]
    FakeCluster(model).describe_producers(tps)
    assert [len(r.partitions) for _n, r in sent(model, proto.DescribeProducers)] == [facade.DESCRIBE_PRODUCERS_BATCH]


def test_a_dead_brokers_partitions_are_missing_each_by_its_own_subject():
    model = KafkaModel(brokers=(1, 2))
    alive = [model.add_partition("t", i, leader=1) for i in range(3)]
    dead = [model.add_partition("t", i, leader=2) for i in range(3, 6)]
    model.down.add(2)
    result = FakeCluster(model).describe_producers(alive + dead)
    assert set(result.value) == set(alive)
    assert [m.subject for m in result.missing] == dead
    assert all("broker 2" in m.reason and "timed out" in m.reason for m in result.missing)
    assert result.missing_for(Broker(2)) == [] and result.missing_for(alive[0]) == []


def test_a_partition_error_is_missing_for_that_partition_only():
    model = KafkaModel()
    tp0, tp1 = model.add_partition("t", 0), model.add_partition("t", 1)
    # asked as often as the one policy allows: fresh metadata names broker 1 again each time
    model.partition_errors[(1, tp1)] = ["NOT_LEADER_OR_FOLLOWER"] * retry.LEADER_ASKS
    result = FakeCluster(model).describe_producers([tp0, tp1])
    assert set(result.value) == {tp0}
    assert [(m.subject, m.reason) for m in result.missing] == [(tp1, "NOT_LEADER_OR_FOLLOWER")]
    assert [r.partitions for _n, r in sent(model, proto.DescribeProducers)] == [(tp0, tp1)] + [(tp1,)] * (retry.LEADER_ASKS - 1)


def test_a_partition_whose_leader_moved_is_asked_again_at_the_new_leader():
    model = KafkaModel(brokers=(1, 2))
    tp0, tp1 = model.add_partition("t", 0, leader=1, replicas=(1, 2)), model.add_partition("t", 1, leader=1, replicas=(1, 2))
    model.partition_errors[(1, tp1)] = ["NOT_LEADER_OR_FOLLOWER"]
    model.leader_moves[tp1] = 2  # what the next metadata says
    cluster = FakeCluster(model)
    result = cluster.describe_producers([tp0, tp1])
    assert set(result.value) == {tp0, tp1} and result.missing == []
    assert ("metadata", True) in cluster.calls


def test_a_silent_broker_is_not_asked_again_in_the_same_command():
    model = KafkaModel(brokers=(1, 2))
    alive, dead = model.add_partition("t", 0, leader=1), model.add_partition("t", 1, leader=2)
    model.down.add(2)
    cluster = FakeCluster(model)
    first = cluster.describe_producers([alive, dead])
    sent_to_2 = [node for node, _ in model.sent].count(2)
    second = cluster.stable_and_high_offsets([alive, dead])
    assert [m.subject for m in first.missing] == [dead] and [m.subject for m in second.missing] == [dead]
    assert "timed out" in second.missing[0].reason and set(second.value) == {alive}
    assert [node for node, _ in model.sent].count(2) == sent_to_2  # answered at once, from the silent list


# -- FindCoordinator: batched from v4, one id a request before ----------------------------------


def coordinated_model(find_coordinator_max=6):
    model = KafkaModel(brokers=(1, 2))
    model.api_versions["FindCoordinator"] = (0, find_coordinator_max)
    model.add_transaction_log([1, 2])  # every log partition has a leader: the listing can be complete
    for tid, coordinator, pid in (("app", 1, 10), ("app-1", 2, 11), ("app-10", 1, 12), ("app-2", 2, 13)):
        model.transactions[tid] = txn(tid, coordinator, pid)
    return model


def test_find_coordinator_v4_asks_for_every_id_in_one_request():
    model = coordinated_model(6)
    found = FakeCluster(model).find_transaction_coordinators(["app", "app-1", "app-10", "app-2"])
    assert found.value == {"app": 1, "app-1": 2, "app-10": 1, "app-2": 2}
    (request,) = [r for _n, r in sent(model, proto.FindTransactionCoordinators)]
    assert request.batched and request.transactional_ids == ("app", "app-1", "app-10", "app-2")


def test_find_coordinator_before_v4_asks_one_id_a_request():
    model = coordinated_model(3)
    found = FakeCluster(model).find_transaction_coordinators(["app", "app-1", "app-10", "app-2"])
    assert found.value == {"app": 1, "app-1": 2, "app-10": 1, "app-2": 2}
    requests = [r for _n, r in sent(model, proto.FindTransactionCoordinators)]
    assert [(r.batched, r.transactional_ids) for r in requests] == [
        (False, ("app",)), (False, ("app-1",)), (False, ("app-10",)), (False, ("app-2",))
    ]


# -- DescribeTransactions: one request per coordinator ------------------------------------------


def test_describe_transactions_goes_to_each_ids_coordinator_once():
    model = coordinated_model()
    described = FakeCluster(model).describe_transactions(["app", "app-1", "app-10", "app-2", "nobody"])
    requests = sent(model, proto.DescribeTransactions)
    assert Counter(node for node, _r in requests) == {1: 1, 2: 1}
    expected = {1: {"app", "app-10"}, 2: {"app-1", "app-2"}}
    expected[model.coordinator("nobody")].add("nobody")
    assert {node: set(r.transactional_ids) for node, r in requests} == expected
    assert set(described.value.found) == {"app", "app-1", "app-10", "app-2"}
    assert set(described.value.not_found) == {"nobody"} and described.missing == []


def test_a_dead_coordinators_ids_are_missing_by_id():
    model = coordinated_model()
    model.down.add(2)
    described = FakeCluster(model).describe_transactions(["app", "app-1", "app-10", "app-2"])
    assert set(described.value.found) == {"app", "app-10"}
    assert [m.subject for m in described.missing] == [TransactionalId("app-1"), TransactionalId("app-2")]
    assert described.missing_for(TransactionalId("app")) == []


# -- prefixes: t-1 is not t-10, app-1 is not app-10 ---------------------------------------------


def test_an_unanswered_app_10_leaves_app_1_and_app_answered_in_the_hanging_rule():
    model = coordinated_model()
    model.transaction_errors["app-10"] = "COORDINATOR_LOAD_IN_PROGRESS"
    view, missing = gather.coordinator_view(FakeCluster(model, timeout_s=2), [10, 11, 12])
    assert view.transactional_ids == {10: "app", 11: "app-1", 12: "app-10"} and view.ids_complete
    assert set(view.unanswered_ids) == {"app-10"}
    assert [m.reason for m in view.unanswered_ids["app-10"]] == ["COORDINATOR_LOAD_IN_PROGRESS"]
    assert set(view.descriptions) == {"app", "app-1"}
    assert [m.subject for m in missing] == [TransactionalId("app-10")]


def test_an_unanswered_app_10_gives_app_1_its_own_row_in_transactions():
    model = coordinated_model()
    model.transaction_errors["app-10"] = "COORDINATOR_LOAD_IN_PROGRESS"
    model.transactions.pop("app")
    result = transaction_listing.describe_transactions(FakeCluster(model, timeout_s=2), ["app-1", "app-10", "app"])
    rows = {r.transactional_id: r for r in result.rows}
    assert (rows["app-1"].status, rows["app-1"].state, rows["app-1"].error) == ("found", "Ongoing", None)
    assert rows["app"].status == transaction_listing.NOT_FOUND
    assert rows["app-10"].status == transaction_listing.UNKNOWN and "COORDINATOR_LOAD_IN_PROGRESS" in rows["app-10"].error
    assert [m.subject for m in result.missing] == [TransactionalId("app-10")]


def test_remedy_describe_keeps_app_1_answered_when_app_10_is_not():
    model = coordinated_model()
    model.down.add(1)  # coordinator of app and app-10
    found, unknown, unanswered = remedy._describe(FakeCluster(model), ["app", "app-1", "app-10", "app-2"])
    assert set(found) == {"app-1", "app-2"} and unknown == set()
    assert set(unanswered) == {"app", "app-10"}
    assert all("coordinator 1" in why for why in unanswered.values())


def test_offsets_missing_for_t_10_are_not_missing_for_t_1():
    model = KafkaModel(brokers=(1, 2))
    t1, t10 = model.add_partition("t", 1, leader=1, lso=5), model.add_partition("t", 10, leader=2, lso=6)
    t_1, t_10 = model.add_partition("t-1", 0, leader=1, lso=7), model.add_partition("t-10", 0, leader=2, lso=8)
    model.down.add(2)
    result = FakeCluster(model).describe_producers([t1, t10, t_1, t_10])
    assert set(result.value) == {t1, t_1}
    assert {m.subject for m in result.missing} == {t10, t_10}
    assert result.missing_for(t1) == [] and result.missing_for(t_1) == []


# -- ListTransactions: a broker that answers with an error -----------------------------------------


def test_a_broker_failing_list_transactions_is_missing_as_that_broker():
    model = coordinated_model()
    model.listing_errors[2] = "COORDINATOR_LOAD_IN_PROGRESS"  # asked again within half the time left
    listed, _support = FakeCluster(model, timeout_s=2).list_transactions()
    assert {t.transactional_id for t in listed.value} == {"app", "app-10"}
    assert [(m.subject, m.reason) for m in listed.missing] == [(Broker(2), "COORDINATOR_LOAD_IN_PROGRESS")]


# -- metadata through the wire: one client serves lso, hanging, producers and transactions -----------


def wire_only_cluster(model):
    """The real facade (not FakeCluster's metadata) over the fake wire: no confluent-kafka client."""
    from kafkatxn.config import ConnectionConfig
    from tests.support.fake_kafka import FakeWire

    return facade.Cluster(ConnectionConfig(bootstrap_servers="fake:9092", timeout_ms=30_000), wire=FakeWire(model))


def test_metadata_is_one_metadata_request_through_the_wire_and_builds_no_librdkafka_client():
    model = KafkaModel(brokers=(1, 2))
    tps = [model.add_partition("t", i, leader=1 + i % 2) for i in (2, 0, 1)]
    cluster = wire_only_cluster(model)
    md = cluster.metadata()
    assert [p.tp for p in md.partitions] == sorted(tps)  # sorted, as every caller expects
    assert [b.id for b in md.brokers] == [1, 2]
    assert cluster.metadata() is md  # cached until a refresh is asked for
    assert [type(r) for _n, r in model.sent] == [proto.Metadata]
    assert cluster.requests["Metadata"] == 1
    assert cluster._admin is None


def test_a_leader_move_is_retried_with_metadata_fetched_again_through_the_wire():
    model = KafkaModel(brokers=(1, 2))
    tp = model.add_partition("t", 0, leader=1)
    model.offsets[tp] = (5, 9)
    model.leader_moves = {tp: 2}
    model.partition_errors[(1, tp)] = ["NOT_LEADER_OR_FOLLOWER", "NOT_LEADER_OR_FOLLOWER"]
    cluster = wire_only_cluster(model)
    result = cluster.stable_and_high_offsets([tp])
    assert result.value == {tp: (5, 9)} and result.missing == []
    assert len(sent(model, proto.Metadata)) == 2
    assert sent(model, proto.ListOffsets)[-1][0] == 2  # asked again at the new leader
    assert cluster._admin is None


def test_metadata_that_does_not_arrive_ends_the_command_as_undetermined():
    from kafkatxn.errors import ClusterError

    model = KafkaModel(brokers=(1,))
    model.add_partition("t", 0)
    model.timeouts[None] = ("Metadata",)
    cluster = wire_only_cluster(model)
    try:
        cluster.metadata()
    except ClusterError as exc:
        assert exc.exit_code == 3
    else:
        raise AssertionError("metadata without an answer was taken for an empty cluster")


def test_a_filtered_listing_asks_api_versions_only_of_a_broker_whose_connection_did_not_give_them():
    """Where the listing filters (ListTransactions v1, v2) depends on every broker's versions."""
    model = KafkaModel(brokers=(1, 2))
    model.connected = {1}  # the bootstrap connection: ApiVersions was part of making it
    cluster = FakeCluster(model)
    cluster.list_transactions(min_duration_ms=1000)
    assert [node for node, _r in sent(model, proto.ApiVersions)] == [2]
    assert sorted(node for node, _r in sent(model, proto.ListTransactions)) == [1, 2]


def test_an_unfiltered_listing_asks_no_api_versions_of_a_broker_not_connected_yet():
    """``transactions list`` sent broker 2 an ApiVersions of its own, after the one kafka-python's
    connection makes: an unfiltered listing needs only to know that ListTransactions exists, which
    the bootstrap broker's versions say."""
    model = KafkaModel(brokers=(1, 2))
    model.connected = {1}
    cluster = FakeCluster(model)
    cluster.list_transactions()
    assert sent(model, proto.ApiVersions) == []
    assert sorted(node for node, _r in sent(model, proto.ListTransactions)) == [1, 2]


def test_broker_configs_still_probe_every_broker_whose_configs_they_read():
    """A probe is what tells a hung broker (connection still open) from one that answers."""
    model = KafkaModel(brokers=(1, 2))
    model.connected = {1, 2}
    facade.Cluster.api_versions(FakeCluster(model), [1, 2])
    assert sorted(node for node, _r in sent(model, proto.ApiVersions)) == [1, 2]


def test_versions_known_from_a_connection_do_not_stand_in_for_a_later_probe():
    model = KafkaModel(brokers=(1,))
    model.connected = {1}
    cluster = FakeCluster(model)
    cluster.list_transactions()
    assert sent(model, proto.ApiVersions) == []
    facade.Cluster.api_versions(cluster, [1])
    assert [node for node, _r in sent(model, proto.ApiVersions)] == [1]


# -- a coordinator that says "not yet" is asked again; one that does not answer, once -----------------


def test_a_coordinator_loading_its_log_is_asked_until_it_answers():
    """A cluster's first FindCoordinator creates __transaction_state (50 partitions by default): its
    coordinators answer NOT_COORDINATOR, then COORDINATOR_LOAD_IN_PROGRESS, for a second or more.
    CI failed when that outlasted the one retry there was."""
    model = coordinated_model()
    model.transaction_errors["app"] = ["NOT_COORDINATOR"] * 3 + ["COORDINATOR_LOAD_IN_PROGRESS"]
    described = FakeCluster(model, timeout_s=10).describe_transactions(["app", "app-1"])
    assert set(described.value.found) == {"app", "app-1"} and described.missing == []
    asked = Counter(tid for _n, r in sent(model, proto.DescribeTransactions) for tid in r.transactional_ids)
    assert asked == {"app": 5, "app-1": 1}  # only the id that was not answered is asked again


def test_a_coordinator_that_never_loads_is_missing_after_half_the_time_left():
    model = coordinated_model()
    model.transaction_errors["app"] = "COORDINATOR_LOAD_IN_PROGRESS"
    started = time.monotonic()
    described = FakeCluster(model, timeout_s=2).describe_transactions(["app", "app-1"])
    assert time.monotonic() - started < 1.2  # the rest of the deadline is the command's
    assert [(m.subject, m.reason) for m in described.missing] == [(TransactionalId("app"), "COORDINATOR_LOAD_IN_PROGRESS")]
    assert set(described.value.found) == {"app-1"}
    assert len(sent(model, proto.DescribeTransactions)) >= 3


def test_a_coordinator_that_does_not_answer_is_asked_once_more_not_until_the_deadline():
    model = coordinated_model()
    model.down.add(1)  # coordinates app and app-10
    started = time.monotonic()
    described = FakeCluster(model, timeout_s=4).describe_transactions(["app", "app-1"])
    assert time.monotonic() - started < 1.0
    assert [m.subject for m in described.missing] == [TransactionalId("app")]
    assert set(described.value.found) == {"app-1"}
    assert [n for n, _r in sent(model, proto.DescribeTransactions)].count(1) <= 2


def test_the_visibility_probe_asks_a_log_partition_that_has_a_leader():
    """The probe's id is random; any coordinator can say whether the principal may describe it, so
    it is not sent to a __transaction_state partition without a leader, where it would wait out its
    backoff and then say the visibility is unknown."""
    model = KafkaModel(brokers=(1, 2))
    model.add_transaction_log([1, -1])  # __transaction_state-1 has no leader
    for _ in range(20):
        model.sent.clear()
        visibility = FakeCluster(model, timeout_s=10).transactional_id_visibility()
        assert (visibility.value, visibility.missing) == (IDS_ALL, [])
        assert len(sent(model, proto.DescribeTransactions)) == 1
