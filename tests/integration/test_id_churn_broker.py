"""Transactional-id churn from a real broker's coordinators, through the exporter's collector."""

from __future__ import annotations

import uuid

from confluent_kafka import Producer
from prometheus_client import CollectorRegistry, generate_latest

from kafkatxn.config import ConnectionConfig
from kafkatxn.exporter import ClusterGatherer, SnapshotCollector
from kafkatxn.exporter_metrics import ExportOptions


def _commit_one(bootstrap: str, topic: str, tid: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"x")
    p.commit_transaction(30)


def _value(text: str, line_start: str) -> float:
    [line] = [ln for ln in text.splitlines() if ln.startswith(line_start)]
    return float(line.rsplit(" ", 1)[1])


def test_new_ids_of_a_family_show_between_two_gathers(kafka, unique_name):
    kafka.create_topic(unique_name, partitions=1)
    prefix = "churn" + "".join(chr(97 + int(c, 16)) for c in uuid.uuid4().hex[:6])  # letters: no digit to mask
    _commit_one(kafka.bootstrap_servers, unique_name, f"{prefix}-stable-0")
    gatherer = ClusterGatherer(ConnectionConfig(kafka.bootstrap_servers), scrape_timeout_s=20)
    collector = SnapshotCollector(gatherer, ExportOptions(per_family=True), cache_ttl_s=0)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    try:
        first = generate_latest(registry).decode()
        assert _value(first, f'kafkatxn_transactional_ids{{family="{prefix}-stable-{{n}}"}}') == 1
        for _ in range(3):  # a job that makes a new id per run
            _commit_one(kafka.bootstrap_servers, unique_name, f"{prefix}-run-{uuid.uuid4()}")
        _commit_one(kafka.bootstrap_servers, unique_name, f"{prefix}-stable-0")  # reused: not new
        second = generate_latest(registry).decode()
    finally:
        gatherer.close()
    assert _value(second, f'kafkatxn_transactional_ids_new{{family="{prefix}-run-{{uuid}}"}}') == 3
    assert _value(second, f'kafkatxn_transactional_ids_new{{family="{prefix}-stable-{{n}}"}}') == 0
    assert _value(second, f'kafkatxn_transactional_ids_appeared_total{{family="{prefix}-run-{{uuid}}"}}') == 3
    assert _value(second, f'kafkatxn_transactional_ids{{family="{prefix}-run-{{uuid}}"}}') == 3
