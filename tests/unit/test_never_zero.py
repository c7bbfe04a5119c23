"""Never a zero for what was not gathered (issue 27, 5): with each part of the snapshot failing in
turn, check's perfdata and the exporter's series leave that part's figures out (the reason is in
``missing``, the part in ``kafkatxn_scrape_part_missing``), and nothing else is lost.

Also the brokers before Kafka 3.0 (no ListTransactions, no DescribeTransactions) over the fake:
what DescribeProducers and the offsets give is gathered, the coordinator's side is missing."""

from __future__ import annotations

import pytest

from kafkatxn import check, exporter_metrics, producers, snapshot
from kafkatxn.errors import UnsupportedBrokerError
from kafkatxn.model import Part
from kafkatxn.facts_cluster import gather_snapshot
from tests.support.blocked_group import blocked_model

# Each part, the check perfdata and the exporter families that are its figures.
FIGURES = {
    snapshot.PART_OFFSETS: ({"lso_lag_max", "lagging_partitions"},
                            {"kafkatxn_lso_lag_max_messages", "kafkatxn_lagging_partitions"}),
    snapshot.PART_PRODUCERS: ({"active_producer_ids_max"}, {"kafkatxn_active_producer_ids"}),
    snapshot.PART_VERDICTS: ({"hanging_transactions", "undetermined_transactions"},
                             {"kafkatxn_hanging_transactions", "kafkatxn_undetermined_transactions"}),
    snapshot.PART_TRANSACTION_STATES: (set(), {"kafkatxn_transactions"}),
    snapshot.PART_TRANSACTION_AGES: ({"transaction_age_max"}, {"kafkatxn_transaction_oldest_age_seconds"}),
    snapshot.PART_GROUPS: ({"groups_blocked", "groups_waiting", "group_lag_max"},
                           {"kafkatxn_groups_blocked", "kafkatxn_groups_stuck", "kafkatxn_group_lag_messages",
                            "kafkatxn_group_blocked", "kafkatxn_group_summed_lag_messages", "kafkatxn_group_blocked_partitions"}),
}


def _fail_offsets(model, cluster):
    for broker in model.brokers:
        model.timeouts.setdefault(broker, set()).add("ListOffsets")


def _fail_producers(model, cluster):
    del model.api_versions["DescribeProducers"]


def _fail_verdicts(model, cluster):  # no transaction.max.timeout.ms: nothing can be classified
    for broker in model.brokers:
        model.timeouts.setdefault(broker, set()).add("DescribeConfigs")


def _fail_transaction_states(model, cluster):  # Kafka 2.8
    del model.api_versions["ListTransactions"]
    del model.api_versions["DescribeTransactions"]


def _fail_transaction_ages(model, cluster):
    del model.api_versions["DescribeTransactions"]


def _fail_groups(model, cluster):
    def list_groups_fails():
        raise cluster.errors.deadline_exceeded()
    cluster.list_groups = list_groups_fails
    cluster.list_groups_partial = list_groups_fails


FAULTS = {
    snapshot.PART_OFFSETS: _fail_offsets,
    snapshot.PART_PRODUCERS: _fail_producers,
    snapshot.PART_VERDICTS: _fail_verdicts,
    snapshot.PART_TRANSACTION_STATES: _fail_transaction_states,
    snapshot.PART_TRANSACTION_AGES: _fail_transaction_ages,
    snapshot.PART_GROUPS: _fail_groups,
}


def _published(snap):
    result = check.evaluate(snap)
    perf = {p.label: p.value for p in result.perfdata}
    series: dict[str, list[float]] = {}
    for family in exporter_metrics.metric_families(snap):
        for sample in family.samples:
            series.setdefault(family.name, []).append(sample.value)
        series.setdefault(family.name, [])
    parts_missing = {s.labels["part"] for f in exporter_metrics.metric_families(snap) if f.name == "kafkatxn_scrape_part_missing"
                     for s in f.samples if s.value == 1}
    return perf, series, parts_missing


def test_every_figure_is_published_when_every_part_was_gathered():
    model, cluster = blocked_model()
    snap = gather_snapshot(cluster, groups=True)
    assert not snap.missing and not snap.not_gathered
    perf, series, parts_missing = _published(snap)
    for labels, families in FIGURES.values():
        assert labels <= set(perf)
        assert all(series.get(name) for name in families), {name: series.get(name) for name in families}
    assert not parts_missing


@pytest.mark.parametrize("part", sorted(FAULTS))
def test_a_part_not_gathered_is_absent_never_zero(part):
    model, cluster = blocked_model()
    FAULTS[part](model, cluster)
    snap = gather_snapshot(cluster, groups=True)
    assert part in snap.not_gathered, (snap.not_gathered, snap.missing)
    assert snap.missing  # the reason is said
    perf, series, parts_missing = _published(snap)
    for gone in snap.not_gathered:
        labels, families = FIGURES[gone]
        assert not labels & set(perf), f"{gone} not gathered, yet check publishes {labels & set(perf)}"
        assert not any(series.get(name) for name in families), f"{gone} not gathered, yet the exporter publishes it"
    assert snap.not_gathered == parts_missing
    # What was gathered is still published.
    for kept in set(FIGURES) - snap.not_gathered:
        labels, families = FIGURES[kept]
        assert labels <= set(perf), (kept, perf)
    facts = check.evaluate(snap).facts
    if part == snapshot.PART_VERDICTS:
        assert facts["hanging_transactions"] is None and facts["undetermined_transactions"] is None


def test_before_kafka_3_producer_state_and_offsets_are_gathered_and_the_coordinator_side_is_missing():
    model, cluster = blocked_model()
    _fail_transaction_states(model, cluster)
    snap = gather_snapshot(cluster, groups=True, max_transaction_timeout_ms=1)  # the open one is a candidate
    assert snap.open_transaction_count == 1 and snap.active_producer_ids
    assert [p.lso_lag_messages for p in snap.partitions if p.topic == "orders"] == [4]
    assert {g.group for g in snap.groups if g.blocked} == {"billing"}
    assert snap.not_gathered == {snapshot.PART_TRANSACTION_STATES, snapshot.PART_TRANSACTION_AGES}
    # The candidate is undetermined (never hanging), saying which API the brokers lack.
    (undetermined,) = snap.undetermined
    assert not snap.hanging and "ListTransactions (needs Apache Kafka 3.0 or newer)" in undetermined.reason
    rows = producers.describe_producers(cluster, cluster.select_partitions(["orders"]))
    assert [r.producer_id for r in rows.value] == [5000] and rows.value[0].transactional_id is None
    assert [(m.subject, m.reason) for m in rows.missing] == [
        (Part("transactional ids"), "the brokers do not support ListTransactions (needs Apache Kafka 3.0 or newer)")]
    with pytest.raises(UnsupportedBrokerError, match="DescribeTransactions .needs Apache Kafka 3.0 or newer"):
        cluster.describe_transactions(["billing-tx"])
    with pytest.raises(UnsupportedBrokerError, match="ListTransactions .needs Apache Kafka 3.0 or newer"):
        cluster.require_transaction_apis()


def test_whether_a_blocked_group_is_stuck_is_not_published_when_it_cannot_be_known():
    """On Kafka 2.8 (no DescribeTransactions) "past its own timeout" cannot be known and the hanging
    verdict is undetermined: `kafkatxn_group_stuck` and `kafkatxn_groups_stuck` were published as 0."""
    model, cluster = blocked_model()
    _fail_transaction_states(model, cluster)
    snap = gather_snapshot(cluster, groups=True, max_transaction_timeout_ms=1)
    blocked = [g for g in snap.groups if g.blocked]
    assert blocked and all(snap.group_stuck(g) is None for g in blocked)
    _perf, series, _parts = _published(snap)
    assert not series.get("kafkatxn_groups_stuck")
    stuck_labels = [s.labels for f in exporter_metrics.metric_families(snap) if f.name == "kafkatxn_group_stuck" for s in f.samples]
    assert not any(labels["group"] == "billing" for labels in stuck_labels), stuck_labels
    # Not blocked: determined not stuck, whatever the coordinator's side.
    assert all(snap.group_stuck(g) is False for g in snap.groups if not g.blocked)


def test_a_blocked_group_whose_pin_is_determined_keeps_its_stuck_series():
    model, cluster = blocked_model()
    snap = gather_snapshot(cluster, groups=True)
    assert all(snap.group_stuck(g) is not None for g in snap.groups)
    _perf, series, _parts = _published(snap)
    assert series.get("kafkatxn_groups_stuck") is not None and series["kafkatxn_groups_stuck"] != []
