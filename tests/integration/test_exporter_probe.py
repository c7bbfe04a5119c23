"""One exporter, two clusters: ``/probe?profile=NAME`` (the multi-target exporter pattern) on two real
single-broker clusters given as two kafkatxn profiles. Stopping one cluster's broker leaves the
other's probe answering within its deadline and complete, both scraped directly and by a real
Prometheus with the ``kafkatxn-clusters`` job (relabelling) of monitoring/prometheus.yml.
"""

from __future__ import annotations

import threading
import time
import urllib.error

import pytest

from harness.scenarios import create_topic
from tests.support.exporter_process import ExporterProcess
from tests.support.prometheus import PrometheusServer, example_job

pytestmark = pytest.mark.integration

SCRAPE_TIMEOUT_S = 4


def test_one_cluster_going_down_leaves_the_other_profiles_probe_complete(kafka_factory, unique_name, tmp_path, figures):
    clusters = {"east": kafka_factory(), "west": kafka_factory()}
    partitions = {"east": 2, "west": 3}
    for name, cluster in clusters.items():
        create_topic(cluster.bootstrap_servers, f"{unique_name}-{name}", partitions=partitions[name])
    profiles = tmp_path / "config.toml"
    profiles.write_text("".join(f'[profiles.{name}]\nbootstrap_servers = "{cluster.bootstrap_servers}"\n\n'
                                for name, cluster in clusters.items()))

    # No cluster on the command line: the exporter only answers /probe.
    exporter = ExporterProcess("--cache-ttl", "0s", "--scrape-timeout", f"{SCRAPE_TIMEOUT_S}s",
                               "--topic-regex", f"^{unique_name}-", env={"KAFKATXN_CONFIG": str(profiles)})
    try:
        assert exporter.url.endswith("/probe?profile=NAME")
        for name in clusters:
            metrics, _ = exporter.scrape(f"/probe?profile={name}")
            assert metrics[("kafkatxn_up", ())] == 1
            assert metrics[("kafkatxn_partitions", ())] == partitions[name]
            assert {dict(labels)["topic"] for n, labels in metrics if n == "kafkatxn_partition_lso_lag_messages"} == {
                f"{unique_name}-{name}"}
        with pytest.raises(urllib.error.HTTPError) as refused:
            exporter.get("/probe?profile=north")
        assert refused.value.code == 400
        message = refused.value.read().decode()
        assert message.count("\n") == 1 and "'north' not found" in message

        job = example_job("kafkatxn-clusters")
        job["static_configs"] = [{"targets": sorted(clusters)}]
        job["relabel_configs"][-1]["replacement"] = exporter.base.split("://", 1)[1]
        # Prometheus waits past the exporter's deadline, as monitoring/prometheus.yml does (10s > 8s).
        job["scrape_timeout"] = f"{SCRAPE_TIMEOUT_S + 3}s"
        with PrometheusServer(tmp_path / "prometheus", [job], interval=f"{SCRAPE_TIMEOUT_S + 3}s",
                              scrape_timeout=f"{SCRAPE_TIMEOUT_S + 3}s") as prom:
            both_up = {(("instance", name), ("job", "kafkatxn-clusters")): 1.0 for name in clusters}
            prom.wait_for(lambda: prom.query("kafkatxn_up") == both_up, "both profiles scraped through /probe")
            assert prom.query("kafkatxn_partitions") == {
                (("instance", name), ("job", "kafkatxn-clusters")): float(partitions[name]) for name in clusters}

            clusters["east"].stop_broker(1)
            east: list[tuple[dict, float]] = []
            east_probe = threading.Thread(target=lambda: east.append(exporter.scrape("/probe?profile=east")))
            east_probe.start()
            west_took = []
            try:
                while east_probe.is_alive() or not west_took:  # west, while east's gather is under way
                    metrics, took = exporter.scrape("/probe?profile=west")
                    west_took.append(took)
                    assert metrics[("kafkatxn_up", ())] == 1
                    assert metrics[("kafkatxn_scrape_incomplete", ())] == 0
                    assert metrics[("kafkatxn_partitions", ())] == partitions["west"]
                    time.sleep(0.1)
            finally:
                east_probe.join(30)
            assert east[0][0][("kafkatxn_up", ())] == 0
            assert max(west_took) < SCRAPE_TIMEOUT_S  # within its own deadline while east's ran out
            figures["probe: west scrape while east is down"] = (
                f"max {max(west_took):.2f}s over {len(west_took)} scrapes; east (down) took {east[0][1]:.2f}s; "
                f"deadline {SCRAPE_TIMEOUT_S}s")

            prom.wait_for(lambda: prom.query("kafkatxn_up") == {
                (("instance", "east"), ("job", "kafkatxn-clusters")): 0.0,
                (("instance", "west"), ("job", "kafkatxn-clusters")): 1.0}, "east down and west up in Prometheus")
            assert prom.query('up{job="kafkatxn-clusters"}') == both_up  # the exporter answered both probes
    finally:
        code = exporter.stop()
    assert code == 0, "".join(exporter.stderr_lines)
