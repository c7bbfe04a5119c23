"""Transactional-id churn: the pure tracker, its metric families, and the exporter's collector hook."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from kafkatxn.audit.churn import IdChurn, churn_metric_families
from kafkatxn.snapshot import ClusterSnapshot
from kafkatxn.exporter import SnapshotCollector
from kafkatxn.exporter_metrics import ExportOptions


def _samples(families) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}


def test_the_first_look_is_the_baseline_then_new_ids_are_counted_per_family():
    churn = IdChurn()
    first = churn.observe(["etl-0", "etl-1", "ingest-aaaaaaaa-1111-2222-3333-444444444444"])
    assert (first.ids, first.new_ids, first.appeared_total, first.baseline) == (3, 0, 0, False)
    second = churn.observe(["etl-0", "etl-1", "ingest-bbbbbbbb-1111-2222-3333-444444444444",
                            "ingest-cccccccc-1111-2222-3333-444444444444"])
    assert (second.ids, second.new_ids, second.appeared_total, second.baseline) == (4, 2, 2, True)
    assert second.ids_by_family == {"etl-{n}": 2, "ingest-{uuid}": 2}
    assert second.new_by_family == {"etl-{n}": 0, "ingest-{uuid}": 2}
    third = churn.observe(["etl-0", "etl-1"])  # the ingest ids expired: nothing new, the counter stays
    assert (third.ids, third.new_ids, third.appeared_total) == (2, 0, 2)
    assert third.appeared_total_by_family == {"ingest-{uuid}": 2}


def test_metric_families_cluster_wide_and_per_family():
    churn = IdChurn()
    churn.observe(["a-1"])
    sample = churn.observe(["a-1", "a-2", "b"])
    flat = _samples(churn_metric_families(sample))
    assert flat == {("kafkatxn_transactional_ids", ()): 3, ("kafkatxn_transactional_ids_new", ()): 2,
                    ("kafkatxn_transactional_ids_appeared_total", ()): 2}
    per = _samples(churn_metric_families(sample, per_family=True))
    assert per[("kafkatxn_transactional_ids", (("family", "a-{n}"),))] == 2
    assert per[("kafkatxn_transactional_ids_new", (("family", "a-{n}"),))] == 1
    assert per[("kafkatxn_transactional_ids_new", (("family", "b"),))] == 1
    assert per[("kafkatxn_transactional_ids_appeared_total", (("family", "b"),))] == 1


def test_the_collector_exports_churn_per_gather_and_keeps_the_baseline_over_an_incomplete_listing():
    listings = iter([("x-1",), ("x-1", "x-2", "x-3"), None, ("x-1", "x-2", "x-3", "x-4")])

    def gather() -> ClusterSnapshot:
        return ClusterSnapshot(1, transactional_ids=next(listings))

    collector = SnapshotCollector(gather, ExportOptions(per_family=True), cache_ttl_s=0)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)

    def scrape() -> str:
        return generate_latest(registry).decode()

    assert 'kafkatxn_transactional_ids_new{family="x-{n}"} 0.0' in scrape()
    assert 'kafkatxn_transactional_ids_new{family="x-{n}"} 2.0' in scrape()
    assert "kafkatxn_transactional_ids" not in scrape()  # listing incomplete: no figures rather than wrong ones
    text = scrape()
    assert 'kafkatxn_transactional_ids_new{family="x-{n}"} 1.0' in text  # compared with the last complete listing
    assert 'kafkatxn_transactional_ids_appeared_total{family="x-{n}"} 3.0' in text
