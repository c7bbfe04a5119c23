"""One run (a command, a scrape): a key asked of an API again is answered from the run, not the brokers.

Over the facade with a fake wire (tests/support/fake_kafka.py): what each call sends is in
``model.sent``. What must be asked afresh (a recheck, whether a transaction ended since) is.
"""

from __future__ import annotations

from kafkatxn import facts_cluster, gather, hanging
from kafkatxn.model import ProducerState, TopicPartition, TransactionDescription
from kafkatxn.kafka.session import request_label
from tests.support.fake_kafka import FakeCluster, KafkaModel

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
MAX = 60_000


def world() -> FakeCluster:
    model = KafkaModel(brokers=(1, 2))
    model.add_partition("a", 0, lso=10, hw=20, leader=1)
    model.add_partition("a", 1, lso=5, hw=5, leader=2)
    model.add_partition("b", 0, lso=3, hw=8, leader=2)
    model.add_transaction_log([1, 2])
    model.producers[A0] = [ProducerState(7, 0, 3, 0, -1, 10)]
    model.producers[B0] = [ProducerState(9, 0, 1, 0, -1, 3)]  # no coordinator knows it
    model.transactions["app-1"] = TransactionDescription("app-1", 1, "Ongoing", 7, 0, 3_600_000, 0, frozenset({A0}))
    return FakeCluster(model)


def sent(cluster: FakeCluster, name: str) -> list:
    return [(node, r) for node, r in cluster.model.sent if type(r).__name__ == name]


def test_outside_a_run_every_call_asks_the_brokers():
    cluster = world()
    cluster.describe_producers([A0, B0])
    cluster.describe_producers([A0, B0])
    assert len(sent(cluster, "DescribeProducers")) == 4  # two leaders, twice


def test_in_a_run_a_partition_is_described_once_and_only_the_new_ones_are_asked():
    cluster = world()
    with cluster.one_run():
        first = cluster.describe_producers([A0, B0])
        again = cluster.describe_producers([A0, A1, B0])
    assert again.value[A0] == first.value[A0] and again.value[B0] == first.value[B0]
    asked = [tp for _node, r in sent(cluster, "DescribeProducers") for tp in r.partitions]
    assert sorted(asked) == [A0, A1, B0]


def test_afresh_asks_again_and_a_new_run_forgets():
    cluster = world()
    with cluster.one_run():
        cluster.describe_producers([A0])
        with cluster.afresh():
            cluster.describe_producers([A0])
        cluster.describe_producers([A0])
    with cluster.one_run():
        cluster.describe_producers([A0])
    assert len(sent(cluster, "DescribeProducers")) == 3


def test_a_part_that_did_not_answer_is_asked_again_in_the_run():
    cluster = world()
    cluster.model.down.add(2)
    with cluster.one_run():
        first = cluster.describe_producers([B0])
        assert first.missing
        cluster.model.down.clear()
        cluster.silent.clear()
        second = cluster.describe_producers([B0])
    assert B0 in second.value and not second.missing


def test_one_isolation_level_is_read_from_a_pair_but_a_pair_is_never_made_of_two_answers():
    cluster = world()
    with cluster.one_run():
        pairs = cluster.stable_and_high_offsets([A0, B0])
        assert cluster.list_offsets([A0, B0], read_committed=True).value == {tp: p[0] for tp, p in pairs.value.items()}
        assert cluster.list_offsets([A0], read_committed=False).value == {A0: pairs.value[A0][1]}
        before = len(sent(cluster, "ListOffsets"))
        assert before == 4  # both levels, two leaders
    other = world()
    with other.one_run():
        other.list_offsets([A0], read_committed=True)
        other.list_offsets([A0], read_committed=False)
        other.stable_and_high_offsets([A0])
    assert len(sent(other, "ListOffsets")) == 4  # the pair asked as a pair


def test_pairs_kept_high_first_answer_the_run_as_pairs_do():
    """lso's snapshot asks its pairs as Offsets (HW, LSO), made from the answers' columns: the run reads
    them back for either level and as (LSO, HW) pairs, and asks nothing again."""
    from kafkatxn.verdicts_groups import Offsets

    cluster = world()
    with cluster.one_run():
        shaped = cluster.stable_and_high_offsets([A0, B0], high_first=Offsets)
        plain = {tp: (o.last_stable_offset, o.high_watermark) for tp, o in shaped.value.items()}
        assert all(type(o) is Offsets for o in shaped.value.values()) and set(plain) == {A0, B0}
        assert cluster.stable_and_high_offsets([A0, B0]).value == plain
        assert cluster.list_offsets([A0, B0], read_committed=True).value == {tp: p[0] for tp, p in plain.items()}
        assert cluster.list_offsets([B0], read_committed=False).value == {B0: plain[B0][1]}
        assert cluster.stable_and_high_offsets([A0], high_first=Offsets).value == {A0: shaped.value[A0]}
        assert len(sent(cluster, "ListOffsets")) == 4  # both levels, two leaders: once


def test_an_unfiltered_listing_answers_a_listing_by_producer_id():
    cluster = world()
    with cluster.one_run():
        everything, _ = cluster.list_transactions()
        mine, _ = cluster.list_transactions(producer_ids=[7])
        states, _ = cluster.list_transactions(states=["Ongoing"])
    assert len(sent(cluster, "ListTransactions")) == 2  # once per broker
    assert [t.transactional_id for t in mine.value] == ["app-1"]
    assert [t.transactional_id for t in states.value] == [t.transactional_id for t in everything.value] == ["app-1"]


def test_transactions_and_their_coordinators_are_asked_once_and_the_probe_rides_along():
    cluster = world()
    with cluster.one_run():
        view, _ = gather.coordinator_view(cluster, [7, 9])  # 9 is listed nowhere: the visibility probe is asked
        again, _ = gather.coordinator_view(cluster, [7, 9])
    assert view == again and view.descriptions["app-1"].producer_id == 7
    # app-1 and the visibility probe, each once; a coordinator asked once (the log probes apart, below)
    described = [(node, r) for node, r in sent(cluster, "DescribeTransactions") if not r.purpose]
    assert sorted(tid[:8] for _node, r in described for tid in r.transactional_ids) == ["app-1", "~kafkatx"]
    assert len({node for node, _r in described}) == len(described)
    assert len(sent(cluster, "FindCoordinator")) + len(sent(cluster, "FindTransactionCoordinators")) <= 1
    # 9 unlisted: listed again between two probes of the log's leader, once in the run.
    purposes = [(r.purpose, node) for node, r in sent(cluster, "DescribeTransactions") + sent(cluster, "ListTransactions") if r.purpose]
    assert {p for p, _node in purposes} == {gather.PROBE_BEFORE, gather.PROBE_AFTER, gather.LISTED_BETWEEN_PROBES}
    assert len(set(purposes)) == len(purposes)


def test_the_hanging_command_and_check_each_ask_each_api_once_per_broker():
    for run in (lambda c: hanging.find_hanging(c, max_transaction_timeout_ms=MAX),
                lambda c: facts_cluster.gather_snapshot(c, max_transaction_timeout_ms=MAX)):
        cluster = world()
        run(cluster)
        per_broker: dict[tuple[str, int | None], int] = {}
        for node, request in cluster.model.sent:
            key = (request_label(request), node)  # a request asked again for a reason is named apart
            per_broker[key] = per_broker.get(key, 0) + 1
        allowed = {"Metadata": 2}
        over = {k: n for k, n in per_broker.items() if n > allowed.get(k[0], 1)}
        assert over == {}, per_broker


# -- reads fetched ahead ---------------------------------------------------------------------------


def _with_batches(cluster: FakeCluster) -> FakeCluster:
    from kafkatxn.kafka import protocol as p

    records = tuple(p.FetchedRecord(offset, 1_000 + offset, None, b"v") for offset in (10, 11, 12))
    cluster.model.batches[A0] = [p.FetchedBatch(10, 12, 7, 0, True, None, records, 3)]
    return cluster


def test_reads_fetched_ahead_go_down_in_one_fetch_per_leader_and_answer_the_readers():
    cluster = _with_batches(world())
    with cluster.one_run():
        cluster.fetch_ahead({A0: (10, 1024), B0: (3, 1024)})
        assert len(sent(cluster, "Fetch")) == 2  # leaders 1 and 2
        answers, failed = cluster.fetch_from_leaders({A0: 10}, False, 64 * 1024)
        assert len(sent(cluster, "Fetch")) == 2 and not failed
        assert answers[A0].batches[0].base_offset == 10
        assert cluster.offsets_fetched_ahead([A0, A1, B0]) == {A0: (10, 20), B0: (3, 8)}
        # Another offset, or the other isolation level, is not what was read: asked of the leader.
        cluster.fetch_from_leaders({A0: 11}, False, 64 * 1024)
        cluster.fetch_from_leaders({A0: 10}, True, 64 * 1024)
        assert len(sent(cluster, "Fetch")) == 4


def test_an_answer_with_no_records_short_of_the_end_is_not_kept_and_nothing_is_fetched_outside_a_run():
    cluster = world()  # no batches: B0 answers empty at offset 3 while its high watermark is 8
    cluster.fetch_ahead({B0: (3, 1024)})
    assert sent(cluster, "Fetch") == []
    with cluster.one_run():
        cluster.fetch_ahead({B0: (3, 1024)})
        cluster.fetch_from_leaders({B0: 3}, False, 64 * 1024)
    assert len(sent(cluster, "Fetch")) == 2


def test_a_partition_fetched_ahead_carries_its_own_byte_limit():
    cluster = _with_batches(world())
    with cluster.one_run():
        cluster.fetch_ahead({A1: (0, 4096), B0: (3, 1024)})  # one leader
    (node, request), = sent(cluster, "Fetch")
    assert node == 2
    assert [(f.tp, f.max_bytes) for f in request.partitions] == [(B0, 1024), (A1, 4096)]  # the small one first


def test_debug_names_each_request_with_its_level_as_test_request_counts_reads_it():
    import re

    from kafkatxn.kafka import protocol as p
    from kafkatxn.kafka.session import request_label
    from tests.support.request_log import LOGGED

    labels = [request_label(p.ListOffsets((A0,), True)), request_label(p.ListOffsetsAt((A0,), -2)),
              request_label(p.Fetch((p.FetchOffset(A0, 0),), False)), request_label(p.DescribeProducers((A0,))),
              request_label(p.DescribeTransactions(("x",), gather.PROBE_BEFORE))]
    assert labels == ["ListOffsets (read_committed)", "ListOffsets (by time)", "Fetch (read_uncommitted)", "DescribeProducers",
                      f"DescribeTransactions ({gather.PROBE_BEFORE})"]
    assert [m.groups() for m in (re.search(LOGGED, f"request {label} to broker 3") for label in labels)] == [
        ("ListOffsets", "read_committed", "3"), ("ListOffsets", "by time", "3"), ("Fetch", "read_uncommitted", "3"),
        ("DescribeProducers", None, "3"), ("DescribeTransactions", gather.PROBE_BEFORE, "3")]


def test_cyclic_collection_waits_while_a_run_is_in_flight_and_resumes_as_it_was():
    import gc

    cluster = world()
    assert gc.isenabled()
    with cluster.one_run():
        assert not gc.isenabled()
        with cluster.one_run():  # a run inside a run is the outer one
            pass
        assert not gc.isenabled()
        cluster.describe_producers([A0])
    assert gc.isenabled()
    try:
        with cluster.one_run():
            raise RuntimeError("a run that fails")
    except RuntimeError:
        pass
    assert gc.isenabled()
    gc.disable()  # paused by someone else (an exporter scrape): left paused
    try:
        with cluster.one_run():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
