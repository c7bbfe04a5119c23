"""kafkatxn.check without a broker: ranges, perfdata, the status decision, the snapshot step over a fake cluster."""

from __future__ import annotations

import json
import math
import time

import pytest

from kafkatxn import check, monitoring_plugin
from kafkatxn.check import Thresholds, evaluate
from kafkatxn.monitoring_plugin import PerfDatum, Range
from kafkatxn.exitcodes import Status
from kafkatxn.facts_cluster import gather_snapshot
from kafkatxn.snapshot import ClusterSnapshot, HangingSample, PartitionSample, TransactionSample
from kafkatxn.model import Broker, Missing, PartitionInfo, ProducerState, TopicPartition, TransactionDescription
from kafkatxn.errors import UsageError
from kafkatxn.output import render_to_string
from kafkatxn.monitoring_plugin import check_ranges
from tests.support.fake_kafka import FakeCluster, KafkaModel, as_columns

NOW_MS = 1_700_000_000_000

# -- ranges -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, alerting, quiet",
    [
        ("10", [-1, 10.5, 11, 1e9], [0, 5, 10]),
        ("10:", [-1, 0, 9.99], [10, 11, 1e9]),
        ("~:10", [10.01, 11, 1e9], [-1e9, 0, 10]),
        ("10:20", [9, 21, -5], [10, 15, 20]),
        ("@10:20", [10, 15, 20], [9.9, 20.1, 0]),
        ("@10", [0, 5, 10], [-1, 11]),
        ("-5:5", [-6, 6], [-5, 0, 5]),
        ("0.5:1.5", [0.4, 1.6], [0.5, 1, 1.5]),
    ],
)
def test_range_alerts_exactly_as_the_monitoring_plugins_guidelines_say(text, alerting, quiet):
    rng = Range.parse(text)
    assert [v for v in alerting if not rng.alerts(v)] == []
    assert [v for v in quiet if rng.alerts(v)] == []


@pytest.mark.parametrize("text", ["", "  ", "abc", "20:10", "@", "1:2:3", "~", "10m"])
def test_bad_ranges_are_usage_errors_naming_the_option(text):
    with pytest.raises(UsageError, match="--lso-lag-warn"):
        Range.parse(text, what="--lso-lag-warn")


@pytest.mark.parametrize(
    "text, perfdata, describe",
    [("10", "10", "> 10"), ("10:", "10:", "< 10"), ("~:10", "~:10", "> 10"), ("10:20", "10:20", "outside 10:20"),
     ("@10:20", "@10:20", "within 10:20")],
)
def test_range_in_perfdata_and_messages(text, perfdata, describe):
    rng = Range.parse(text)
    assert (rng.perfdata(), rng.describe()) == (perfdata, describe)


def test_duration_ranges_are_seconds_in_perfdata_and_keep_the_users_words_in_messages():
    rng = monitoring_plugin.parse_duration_range("5m:1h", "--txn-age-warn")
    assert (rng.start, rng.end) == (300, 3600)
    assert rng.perfdata() == "300:3600"
    assert rng.alerts(299) and rng.alerts(3601) and not rng.alerts(600)
    simple = monitoring_plugin.parse_duration_range("90s", "--txn-age-crit")
    assert simple.perfdata() == "90" and simple.describe() == "> 90s"
    assert monitoring_plugin.parse_duration_range("none", "x") is None
    with pytest.raises(UsageError, match="--txn-age-warn"):
        monitoring_plugin.parse_duration_range("5 minutes", "--txn-age-warn")


# -- perfdata -----------------------------------------------------------------------------------


def test_perfdata_format_follows_the_guidelines():
    assert PerfDatum("lso_lag_max", 4200, warn="1000", crit="10000", min=0).format() == "lso_lag_max=4200;1000;10000;0"
    assert PerfDatum("age", 1.5, "s").format() == "age=1.5s"
    assert PerfDatum("x", 2.0, min=0, max=10).format() == "x=2;;;0;10"
    assert PerfDatum("a b", 1).format() == "'a b'=1"
    assert PerfDatum("it's", 1).format() == "'it''s'=1"
    assert PerfDatum("age", 0.12345, "s").format() == "age=0.123s"


# -- the decision -------------------------------------------------------------------------------


def partition(topic: str, p: int, hw: int | None, lso: int | None, leader: int = 1) -> PartitionSample:
    return PartitionSample(topic, p, leader, hw, lso)


def snapshot(**kw) -> ClusterSnapshot:
    base = dict(
        taken_at_ms=NOW_MS,
        cluster_id="c1",
        brokers=(1, 2),
        replica_brokers=(1, 2),
        partitions=(partition("orders", 0, 100, 100), partition("orders", 1, 50, 50)),
        transaction_states={"CompleteCommit": 3},
        active_producer_ids={1: 4, 2: 2},
        max_transaction_timeout_ms=900_000,
    )
    base.update(kw)
    return ClusterSnapshot(**base)


def open_txn(tid: str, age_s: float) -> TransactionSample:
    return TransactionSample(tid, "Ongoing", 7, 1, NOW_MS - int(age_s * 1000), 60_000, ("orders",))


def test_a_quiet_cluster_is_ok_with_exit_0_and_full_perfdata():
    result = evaluate(snapshot())
    assert result.status is Status.OK and result.exit_code == 0
    first = result.nagios_text().splitlines()[0]
    assert first.startswith("KAFKATXN OK - 2 partitions, no hanging transactions, max LSO lag 0")
    perf = first.split(" | ", 1)[1]
    assert "hanging_transactions=0;;0;0" in perf
    assert "lso_lag_max=0;1000;10000;0" in perf
    assert "transaction_age_max=0s;300;900;0" in perf
    assert "active_producer_ids_max=4;;;0" in perf


def test_a_hanging_transaction_is_critical_and_named_in_the_details():
    hung = HangingSample("orders", 3, 42, 17, "app-1", "coordinator does not track this partition", 4200)
    result = evaluate(snapshot(hanging=(hung,)))
    assert result.status is Status.CRITICAL and result.exit_code == 2
    lines = result.nagios_text().splitlines()
    assert lines[0].startswith("KAFKATXN CRITICAL - 1 hanging transaction |")
    assert "hanging_transactions=1;;0;0" in lines[0]
    assert any("orders-3" in line and "offset 17" in line and "app-1" in line for line in lines[1:])


def test_lso_lag_counts_partitions_per_threshold_in_the_summary():
    parts = (
        partition("orders", 0, 20_000, 1000),  # 19000: critical
        partition("orders", 1, 14_000, 2000),  # 12000: critical
        partition("orders", 2, 3000, 1000),  # 2000: warning
        partition("orders", 3, 500, 400),  # 100: fine
    )
    result = evaluate(snapshot(partitions=parts))
    assert result.status is Status.CRITICAL
    assert result.summary == "2 partitions with LSO lag > 10000, 1 partition with LSO lag > 1000"
    assert "lso_lag_max=19000;1000;10000;0" in result.nagios_text()
    assert "lagging_partitions=4;;;0;4" in result.nagios_text()
    assert [f.subject for f in result.findings] == ["orders-0", "orders-1", "orders-2"]


def test_thresholds_move_the_status():
    parts = (partition("t", 0, 1500, 1000),)  # lag 500
    assert evaluate(snapshot(partitions=parts)).status is Status.OK
    assert evaluate(snapshot(partitions=parts), Thresholds(lso_lag_warn=Range.parse("100"))).status is Status.WARNING
    assert evaluate(snapshot(partitions=parts), Thresholds(lso_lag_crit=Range.parse("@400:600"))).status is Status.CRITICAL
    disabled = Thresholds(lso_lag_warn=None, lso_lag_crit=None)
    assert evaluate(snapshot(partitions=(partition("t", 0, 10**9, 0),)), disabled).status is Status.OK


def test_transaction_age_warns_and_goes_critical():
    assert evaluate(snapshot(open_transactions=(open_txn("a", 60),))).status is Status.OK
    warn = evaluate(snapshot(open_transactions=(open_txn("a", 400),)))
    assert warn.status is Status.WARNING and warn.summary == "1 transaction open > 5m"
    crit = evaluate(snapshot(open_transactions=(open_txn("a", 400), open_txn("b", 1000))))
    assert crit.status is Status.CRITICAL
    assert crit.summary == "1 transaction open > 15m, 1 transaction open > 5m"
    assert "transaction_age_max=1000s;300;900;0" in crit.nagios_text()


def test_unknown_start_time_is_not_an_age():
    txn = TransactionSample("a", "Ongoing", 7, 1, -1, 60_000, ("orders",))
    assert evaluate(snapshot(open_transactions=(txn,))).status is Status.OK


def test_active_producer_ids_per_broker():
    thresholds = Thresholds(producer_ids_warn=Range.parse("3"), producer_ids_crit=Range.parse("100"))
    result = evaluate(snapshot(), thresholds)
    assert result.status is Status.WARNING
    assert result.summary == "1 broker with active producer ids > 3"
    assert "active_producer_ids_max=4;3;100;0" in result.nagios_text()


def test_missing_parts_are_unknown_but_a_known_critical_still_pages():
    incomplete = snapshot(missing=(Missing(Broker(2), "timed out"),))
    assert evaluate(incomplete).status is Status.UNKNOWN
    assert evaluate(incomplete).exit_code == 3
    warned = snapshot(missing=(Missing(Broker(2), "timed out"),), open_transactions=(open_txn("a", 400),))
    assert evaluate(warned).status is Status.UNKNOWN
    hung = HangingSample("t", 0, 1, 0, None, "no transactional id for producer")
    assert evaluate(snapshot(missing=(Missing(Broker(2), "timed out"),), hanging=(hung,))).status is Status.CRITICAL


def test_unreachable_cluster_is_unknown_with_the_reason_on_the_first_line():
    result = evaluate(ClusterSnapshot(NOW_MS, error="cannot reach any broker at h:1: Connection refused"))
    assert result.status is Status.UNKNOWN and result.exit_code == 3
    assert result.nagios_text() == "KAFKATXN UNKNOWN - cannot reach any broker at h:1: Connection refused\n"


def test_details_are_capped_in_text_but_complete_in_json():
    parts = tuple(partition("t", i, 50_000, 0) for i in range(30))
    result = evaluate(snapshot(partitions=parts))
    lines = result.nagios_text(max_details=20).splitlines()
    assert len(lines) == 22 and lines[-1].startswith("... and 10 more")
    doc = json.loads(render_to_string(result.report(), "json"))
    assert doc["status"] == "CRITICAL" and doc["exit_code"] == 2
    assert len(doc["findings"]) == 30
    assert {"label", "value", "uom", "warn", "crit", "min", "max"} <= set(doc["perfdata"][0])
    assert doc["lso_lag_max_messages"] == 50_000


def test_partitions_without_offsets_count_as_no_lag_not_as_zero_lag():
    parts = (partition("t", 0, None, None), partition("t", 1, 10, 5))
    result = evaluate(snapshot(partitions=parts))
    assert result.facts["lagging_partitions"] == 1 and result.facts["lso_lag_max_messages"] == 5


def test_check_ranges_reject_bad_text_and_accept_none():
    t = check.Thresholds(*check_ranges("5", "none", "1m", "off", "10:", None))
    assert t.lso_lag_crit is None and t.txn_age_crit is None and t.producer_ids_crit is None
    assert t.txn_age_warn.end == 60 and t.producer_ids_warn.start == 10 and t.producer_ids_warn.end == math.inf
    with pytest.raises(UsageError, match="--lso-lag-crit"):
        check.Thresholds(*check_ranges("5", "ten", "1m", "2m", None, None))


# -- the snapshot step over a fake cluster ------------------------------------------------------


def check_cluster(now_ms: int) -> FakeCluster:
    """Brokers 1 and 2 (broker 3 is a replica of __consumer_offsets-0 but not registered); orders-0
    lags 40 behind an old open transaction; broker 2 does not say its transaction.max.timeout.ms."""
    model = KafkaModel(brokers=(1, 2), cluster_id="cid")
    hw = {TopicPartition("orders", 0): 100, TopicPartition("orders", 1): 40, TopicPartition("orders", 2): 7}
    for i in range(3):
        model.add_partition("orders", i, leader=1 + i % 2, replicas=(1, 2), lso=60 if i == 0 else hw[TopicPartition("orders", i)],
                            hw=hw[TopicPartition("orders", i)])
    offsets_tp = model.add_partition("__consumer_offsets", 0, leader=1, replicas=(1, 3), lso=3)
    model.partitions[offsets_tp] = PartitionInfo("__consumer_offsets", 0, 1, (1, 3), (1,), internal=True)
    old = now_ms - 2_000_000
    model.producers[TopicPartition("orders", 0)] = [ProducerState(11, 0, 5, old, 0, 60), ProducerState(12, 0, 1, now_ms, 0, -1)]
    model.producers[TopicPartition("orders", 1)] = [ProducerState(12, 0, 3, now_ms, 0, -1)]
    model.transactions = {
        "app-1": TransactionDescription("app-1", 1, "Empty", 11, 0, 60_000, -1, frozenset()),
        "app-2": TransactionDescription("app-2", 2, "Ongoing", 21, 0, 60_000, now_ms - 30_000, frozenset({TopicPartition("payments", 1)})),
    }
    model.configs_denied = {2}  # (a DescribeConfigs timeout would make broker 2 silent for the whole command)
    return FakeCluster(model)


def test_gather_builds_one_snapshot_from_every_source():
    cluster = check_cluster(NOW_MS)
    snap = gather_snapshot(cluster, clock=lambda: NOW_MS / 1000)
    assert snap.up and snap.cluster_id == "cid"
    assert snap.broker_up() == {1: True, 2: True, 3: False}
    lags = {str(p.tp): p.lso_lag_messages for p in snap.partitions}
    assert lags == {"orders-0": 40, "orders-1": 0, "orders-2": 0, "__consumer_offsets-0": 0}
    assert snap.active_producer_ids == {1: 2, 2: 1}  # producers 11 and 12 on broker 1's orders-0
    # Producer 11 has had a transaction open on orders-0 for 2000s, and its coordinator's
    # transaction (app-1, Empty) does not include the partition: the hanging rule says hanging.
    assert [(h.topic, h.partition, h.producer_id, h.transactional_id) for h in snap.hanging] == [("orders", 0, 11, "app-1")]
    assert snap.hanging[0].lso_lag_messages == 40
    assert snap.transaction_states == {"Empty": 1, "Ongoing": 1}
    assert [(t.transactional_id, t.topics) for t in snap.open_transactions] == [("app-2", ("payments",))]
    # The hanging one counts too, dated by its first record (2000 s old): no coordinator has it open.
    assert (snap.hanging[0].age_ms, snap.hanging[0].age_source) == (2_000_000, "first_record")
    assert snap.oldest_transaction_age_s() == 2000
    assert snap.max_transaction_timeout_ms == 900_000
    # broker 2 did not say its transaction.max.timeout.ms
    assert tuple(map(str, snap.missing)) == ("broker 2: not authorized: needs DESCRIBE_CONFIGS on Cluster",)
    assert evaluate(snap).status is Status.CRITICAL


def test_gather_honours_topic_regex_and_an_explicit_max_transaction_timeout():
    cluster = check_cluster(NOW_MS)
    snap = gather_snapshot(cluster, topic_regex="^orders$", max_transaction_timeout_ms=3_000_000,
                           clock=lambda: NOW_MS / 1000)
    assert {p.topic for p in snap.partitions} == {"orders"}
    assert snap.open_transactions == ()  # app-2 writes to payments only, outside the regex
    # A larger maximum given does not hide what the coordinator says: app-1 (producer 11) left
    # orders-0 out of its transaction, and its own 60 s timeout passed long ago.
    assert [(h.partition, h.producer_id) for h in snap.hanging] == [(0, 11)]
    assert cluster.called("broker_configs") == []
    assert snap.missing == ()


def test_a_topic_regex_matching_nothing_is_unknown_not_ok():
    snap = gather_snapshot(check_cluster(NOW_MS), topic_regex="^ordrs$", max_transaction_timeout_ms=3_000_000)
    assert snap.partitions == () and tuple(map(str, snap.missing)) == ("--topic-regex: no topic matches '^ordrs$'",)
    assert evaluate(snap).status is Status.UNKNOWN


def test_gather_turns_an_unreachable_cluster_into_an_error_not_an_exception():
    cluster = check_cluster(NOW_MS)
    cluster.model.down.update({1, 2})
    snap = gather_snapshot(cluster)
    assert not snap.up and snap.error.startswith("cannot reach any broker at fake:9092")
    assert evaluate(snap).status is Status.UNKNOWN


def test_offsets_that_did_not_arrive_are_missing_not_zero():
    cluster = check_cluster(NOW_MS)
    # Broker 2 keeps saying it is not orders-1's leader, to every request and the retry.
    cluster.model.partition_errors[(2, TopicPartition("orders", 1))] = ["NOT_LEADER_OR_FOLLOWER"] * 10
    snap = gather_snapshot(cluster, max_transaction_timeout_ms=3_000_000)
    assert [p.lso_lag_messages for p in snap.partitions if p.topic == "orders"] == [40, None, 0]
    assert "offsets orders-1: NOT_LEADER_OR_FOLLOWER" in map(str, snap.missing)


def test_describe_producers_goes_out_with_the_offsets_in_one_round_trip():
    cluster = check_cluster(NOW_MS)
    batches = []
    send_all = cluster._wire.send_all
    cluster._wire.send_all = lambda requests, *a, **kw: batches.append([type(r).__name__ for _n, r in requests]) or send_all(requests, *a, **kw)
    snap = gather_snapshot(cluster, clock=lambda: NOW_MS / 1000)
    assert snap.active_producer_ids == {1: 2, 2: 1} and len(snap.partitions) == 4
    first = next(b for b in batches if "ListOffsets" in b)
    # 2 leaders; the listing and the topic-visibility probe, which need only the metadata, ride along
    assert sorted(first) == ["DescribeProducers"] * 2 + ["ListOffsets"] * 4 + ["ListTransactions"] * 2 + ["TopicMetadata"]
    assert sum(b.count("DescribeProducers") for b in batches) == 2  # not asked again


@pytest.mark.parametrize("fails, missing_what, arrived", [
    ("ListOffsets", "offsets", "producer state"), ("DescribeProducers", "producer state", "offsets"),
])
def test_in_the_shared_round_trip_each_kind_that_failed_is_missing_on_its_own(fails, missing_what, arrived):
    cluster = check_cluster(NOW_MS)
    cluster.model.timeouts[2] = {fails, "DescribeConfigs"}  # broker 2 leads orders-1
    snap = gather_snapshot(cluster, max_transaction_timeout_ms=3_000_000)
    orders_1 = TopicPartition("orders", 1)
    assert {(m.what, m.subject) for m in snap.missing if m.subject == orders_1} == {(missing_what, orders_1)}
    if arrived == "offsets":
        assert [p.lso_lag_messages for p in snap.partitions if p.topic == "orders"] == [40, 0, 0]
        assert 2 not in snap.active_producer_ids
    else:
        assert [p.lso_lag_messages for p in snap.partitions if p.topic == "orders"] == [40, None, 0]
        assert snap.active_producer_ids == {1: 2, 2: 1}


def test_a_failed_step_is_named_as_missing_and_the_rest_still_gathered():
    cluster = check_cluster(NOW_MS)
    del cluster.model.api_versions["DescribeProducers"]  # the producer-state step fails as a whole
    snap = gather_snapshot(cluster, clock=lambda: NOW_MS / 1000)
    assert snap.up and snap.active_producer_ids == {} and snap.hanging == ()
    assert any("producer state" in str(m) and "does not support DescribeProducers" in str(m) for m in snap.missing)
    assert snap.transaction_states == {"Empty": 1, "Ongoing": 1}
    assert evaluate(snap).status is Status.UNKNOWN


def test_a_bad_topic_regex_is_a_usage_error():
    cluster = check_cluster(NOW_MS)
    with pytest.raises(UsageError):
        gather_snapshot(cluster, topic_regex="(")
    assert cluster.model.sent == []


# -- the command, over a fake snapshot ----------------------------------------------------------


@pytest.mark.parametrize(
    "snap, code, first",
    [
        (snapshot(), 0, "KAFKATXN OK - 2 partitions"),
        (snapshot(open_transactions=(open_txn("a", 400),)), 1, "KAFKATXN WARNING - 1 transaction open > 5m |"),
        (snapshot(hanging=(HangingSample("t", 0, 1, 0, None, "no transactional id for producer"),)), 2,
         "KAFKATXN CRITICAL - 1 hanging transaction |"),
        (ClusterSnapshot(NOW_MS, error="cannot reach any broker at h:1"), 3, "KAFKATXN UNKNOWN - cannot reach any broker"),
    ],
)
def test_the_command_prints_the_plugin_line_and_exits_with_the_status(capsys, monkeypatch, snap, code, first):
    from tests.support.cli_helpers import run_cli

    monkeypatch.setattr("kafkatxn.cli.check_cmd.gather_snapshot", lambda *a, **kw: snap)
    result = run_cli(capsys, "check", "-b", "h:1")
    assert result.code == code
    assert result.stdout.startswith(first)
    doc = json.loads(run_cli(capsys, "check", "-b", "h:1", "-o", "json").stdout)
    assert doc["exit_code"] == code


def test_the_command_writes_the_textfile(capsys, monkeypatch, tmp_path):
    from tests.support.cli_helpers import run_cli

    monkeypatch.setattr("kafkatxn.cli.check_cmd.gather_snapshot", lambda *a, **kw: snapshot())
    target = tmp_path / "k.prom"
    assert run_cli(capsys, "check", "-b", "h:1", "--textfile", str(target)).code == 0
    assert "kafkatxn_up 1.0" in target.read_text()


def test_threshold_findings_decide_each_value_once_and_name_only_what_alerts():
    """30,000 partitions, a handful of distinct LSO lags: a subject is made only for an item that
    alerts, largest value first (critical before warning), equal values in the order given."""
    named: list[str] = []

    def subject_of(item: str) -> str:
        named.append(item)
        return item

    findings: list = []
    values = [("p0", 0), ("p1", 5), ("p2", 2000), ("p3", 0), ("p4", 3000), ("p5", 2000)]
    counts = check._threshold_findings(
        findings, values, subject_of, Range.parse("1000"), Range.parse("2500"), "lso_lag",
        lambda subject, value, rng: f"{subject} {value}",
    )
    assert [(status, f.subject, f.value) for status, f in findings] == [
        (Status.CRITICAL, "p4", 3000), (Status.WARNING, "p2", 2000), (Status.WARNING, "p5", 2000),
    ]
    assert sorted(named) == ["p2", "p4", "p5"]
    assert list(counts.values()) == [1, 2] and [status for status, _ in counts] == [Status.CRITICAL, Status.WARNING]

    findings.clear()
    check._threshold_findings(findings, [("b2", 9), ("b1", 12)], str, Range.parse("5"), None, "active_producer_ids",
                              lambda subject, value, rng: subject, largest_first=False)
    assert [f.subject for _, f in findings] == ["b2", "b1"]  # the order given


def test_lso_lags_are_each_partitions_lso_lag_and_alerting_keeps_the_alerting_pairs_in_order():
    from kafkatxn.check import alerting
    from kafkatxn.snapshot import PartitionSample, lso_lags

    samples = [PartitionSample("t", 0, 1, 10, 7), PartitionSample("t", 1, 1, None, None), PartitionSample("t", 2, 1, 5, 6),
               PartitionSample("t", 3, 1, 20, 8)]
    lags = lso_lags(samples)
    assert lags == [s.lso_lag_messages for s in samples] == [3, None, 0, 12]
    warn, crit = Range.parse("2"), Range.parse("10")  # alerts above 2, above 10
    assert alerting(samples, lags, warn, crit) == [(samples[0], 3), (samples[3], 12)]  # None and 0 alert on nothing
    assert alerting(samples, lags, None, crit) == [(samples[3], 12)]
    assert alerting(samples, lags, None, None) == []
    # What the pairs one by one would give: every pair a range alerts on, in the order given.
    for rng in (warn, crit, Range.parse("@0:3")):
        assert alerting(samples, lags, rng, None) == [(s, lag) for s, lag in zip(samples, lags) if lag is not None and rng.alerts(lag)]


def test_evaluate_starts_no_collection_over_what_the_gather_left():
    """evaluate runs after the gather's run, whose objects the collector has just taken on: the
    30,000 lags and 100,000 group samples it looks at start no collection that walks them again."""
    import gc

    from kafkatxn.snapshot import GroupSample

    partitions = tuple(PartitionSample("t", i, 1, 10, 10 - i % 3) for i in range(20_000))
    groups = tuple(GroupSample(f"g{i % 50}", "t", i, i % 5, i % 5, i % 7, False) for i in range(20_000))
    snap = ClusterSnapshot(taken_at_ms=0, cluster_id="c", brokers=(1,), partitions=partitions, groups=groups)
    collections: list[int] = []

    def note(phase: str, info: dict) -> None:
        if phase == "start":
            collections.append(info["generation"])

    was = gc.isenabled()
    gc.enable()
    gc.callbacks.append(note)
    try:
        gc.collect()
        collections.clear()
        result = evaluate(snap, check.Thresholds(*check_ranges("1", "2", None, None, None, None, "3", None)))
        assert collections in ([], [0]) and gc.isenabled()  # at most the youngest, when resumed
    finally:
        gc.callbacks.remove(note)
        (gc.enable if was else gc.disable)()
    assert result.facts["lagging_partitions"] == 20_000 * 2 // 3 and result.facts["group_lag_max_messages"] == 4


# -- check --groups on the held places alone ---------------------------------------------------------


def _groups_cluster() -> FakeCluster:
    """orders-0's LSO pinned at 3 by a transaction its coordinator has in flight (billing waits there),
    orders-1's by one no coordinator tracks, idle for an hour (ledger is blocked there, stock through
    orders-1 too); audit-0 lagging 5 (reports) and caught up (billing)."""
    now = int(time.time() * 1000)
    model = KafkaModel(brokers=(1, 2))
    model.add_transaction_log([1, 2])
    orders0 = model.add_partition("orders", 0, leader=1, lso=3, hw=7)
    orders1 = model.add_partition("orders", 1, leader=2, lso=4, hw=9)
    audit = model.add_partition("audit", 0, leader=2, lso=20, hw=20)
    model.producers[orders0] = [ProducerState(5000, 3, 3, now - 2_000, -1, 3)]
    model.transactions["billing-tx"] = TransactionDescription("billing-tx", 1, "Ongoing", 5000, 3, 600_000, now - 30_000,
                                                              frozenset({orders0}))
    model.producers[orders1] = [ProducerState(6000, 0, 3, now - 3_600_000, -1, 4)]
    model.record_timestamps[orders1] = {4: now - 3_600_000}
    model.groups = {"billing": {orders0: 3, audit: 20}, "ledger": {orders1: 4, orders0: 1}, "reports": {audit: 15},
                    "stock": {orders1: 4}}
    return FakeCluster(model)


def test_check_groups_decides_on_the_held_places_and_the_largest_lag_alone(monkeypatch):
    """The 100,000 samples of 5,000 groups were made to find a few held places and the largest lag:
    made of the held places alone, the snapshot decides the same."""
    fixed = time.time()
    monkeypatch.setattr(time, "time", lambda: fixed)  # the same ages in both passes
    full = gather_snapshot(_groups_cluster(), max_transaction_timeout_ms=900_000, clock=time.time, groups=True)
    held = gather_snapshot(_groups_cluster(), max_transaction_timeout_ms=900_000, clock=time.time, groups=True,
                           held_groups_only=True)
    assert full.group_lag_max is None and len(full.groups) == 6
    assert held.groups == tuple(g for g in full.groups if g.blocked or g.waiting)
    assert {(g.group, g.partition, g.blocked, g.waiting) for g in held.groups} == {
        ("billing", 0, False, True), ("ledger", 1, True, False), ("stock", 1, True, False)}
    assert held.group_lag_max == max(g.lag_messages for g in full.groups) == 5  # reports on audit-0, from 15 to its LSO 20

    def decided(snap):
        report = evaluate(snap).report()
        return report.facts | {"gather_duration_ms": None}, report.sections

    assert decided(held) == decided(full)
    assert evaluate(held).facts["groups_blocked"] == 2 and evaluate(held).facts["group_lag_max_messages"] == 5


@pytest.mark.parametrize("options, held_only", [
    ((), True),
    (("--group-lag-warn", "10"), False),
    (("--group-lag-crit", "10"), False),
    (("--textfile", "/nonexistent-dir/k.prom"), False),
    (("--spark-checkpoint", "/nonexistent-dir"), False),
])
def test_the_command_asks_for_the_held_places_alone_only_where_nothing_needs_every_place(capsys, monkeypatch, options,
                                                                                            held_only):
    from tests.support.cli_helpers import run_cli

    asked = []
    monkeypatch.setattr("kafkatxn.cli.check_cmd.gather_snapshot", lambda *a, **kw: asked.append(kw) or snapshot())
    run_cli(capsys, "check", "-b", "h:1", "--groups", *options)
    assert [kw["held_groups_only"] for kw in asked] == [held_only]


def _offsets_of_orders_1_refused(cluster: FakeCluster) -> FakeCluster:
    cluster.model.partition_errors[(2, TopicPartition("orders", 1))] = ["NOT_LEADER_OR_FOLLOWER"] * 10
    return cluster


@pytest.mark.parametrize("arranged", [lambda cluster: cluster, _offsets_of_orders_1_refused], ids=["whole", "offsets-missing"])
def test_a_metadata_read_as_columns_gathers_the_snapshot_its_partitions_gather(arranged):
    """Every partition of a metadata read as columns (the wire's): its TopicPartitions, leaders and replica ids
    taken from the columns, its PartitionInfos made where a sample is read; the same snapshot, offsets not
    gathered included (None, not 0), and the PartitionInfos not made before the offsets' round."""
    expected = gather_snapshot(arranged(check_cluster(NOW_MS)), clock=lambda: NOW_MS / 1000)
    cluster = arranged(check_cluster(NOW_MS))
    plain = cluster.metadata
    made = []

    def metadata(refresh: bool = False):  # kept until refreshed, as the session keeps it (MetadataApi.metadata)
        if refresh or not made:
            made.append(as_columns(plain(refresh)))
        return made[-1]

    cluster.metadata = metadata
    sent = cluster.offsets_and_producers

    def offsets_and_producers(tps):
        assert "partitions" not in made[0].__dict__ and tps is made[0].tps
        return sent(tps)

    cluster.offsets_and_producers = offsets_and_producers
    snap = gather_snapshot(cluster, clock=lambda: NOW_MS / 1000)
    assert (snap.partitions, snap.replica_brokers, snap.hanging, snap.missing) == (
        expected.partitions, expected.replica_brokers, expected.hanging, expected.missing)
    assert [p.lso_lag_messages for p in snap.partitions] == [p.lso_lag_messages for p in expected.partitions]
    assert snap.replica_brokers and len(snap.partitions) == len(expected.partitions) == 4
    assert tuple(map(str, snap.missing)) == tuple(map(str, expected.missing))
    if arranged is _offsets_of_orders_1_refused:
        assert [p.lso_lag_messages for p in snap.partitions if p.topic == "orders"] == [40, None, 0]
