"""A real Prometheus (Debian's package) scrapes ``kafkatxn exporter`` on a real broker with the example
alert rules: a genuinely hanging transaction makes KafkatxnHangingTransaction fire, and after
``kafkatxn abort`` it resolves. promtool lints the live /metrics answer and the --textfile output.

The rules are monitoring/prometheus-alerts.yml with every ``for:`` shortened to a few seconds (the
expressions are untouched; promtool's rule tests check the real ``for:`` durations), and the scrape
job is the ``kafkatxn`` job of monitoring/prometheus.yml with the test's address.
"""

from __future__ import annotations

import re
import time

import pytest

from harness import hanging_maker as hm
from kafkatxn.model import TopicPartition
from tests.support.cli_helpers import run_cli
from tests.support.exporter_process import ExporterProcess
from tests.support.prometheus import PrometheusServer, alert_rules, example_job, promtool

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(kafka_hanging):
    return kafka_hanging


def test_prometheus_fires_the_hanging_alert_and_it_resolves_after_abort(capsys, broker, unique_name, tmp_path, figures):
    topic = unique_name[-200:]
    bootstrap = broker.bootstrap_servers
    broker.create_topic(topic, partitions=2)
    # A committed transaction first: it waits for the transaction coordinator of a fresh broker.
    hm.write_committed(bootstrap, TopicPartition(topic, 1), [b"committed"], f"{topic}-committed")
    made = hm.make_hanging_transaction(bootstrap, f"{topic}-tid", topic, partition=0, records=3)
    scope = ["--max-transaction-timeout", "1s", "--topic-regex", f"^{re.escape(topic)}$"]

    exporter = ExporterProcess("-b", bootstrap, "--cache-ttl", "0s", "--scrape-timeout", "3s", *scope)
    try:
        # Hanging once older than --max-transaction-timeout (1s).
        deadline = time.monotonic() + 30
        while exporter.scrape()[0][("kafkatxn_hanging_transactions", ())] != 1 and time.monotonic() < deadline:
            time.sleep(0.3)
        # promtool lints what Prometheus would ingest: the live answer and the textfile.
        live = exporter.get("/metrics")
        assert "\nkafkatxn_hanging_transactions 1.0\n" in live
        linted = promtool("check", "metrics", stdin=live)
        assert linted.returncode == 0, linted.stdout + linted.stderr
        textfile = tmp_path / "kafkatxn.prom"
        result = run_cli(capsys, "check", "-b", bootstrap, *scope, "--textfile", textfile)
        assert result.code == 2, result.stdout + result.stderr
        linted = promtool("check", "metrics", stdin=textfile.read_text())
        assert linted.returncode == 0, linted.stdout + linted.stderr
        assert "\nkafkatxn_hanging_transactions 1.0\n" in textfile.read_text()

        job = example_job("kafkatxn")
        address = exporter.base.split("://", 1)[1]
        # Prometheus waits past the exporter's --scrape-timeout (3s), as monitoring/prometheus.yml does.
        job.update(static_configs=[{"targets": [address]}], scrape_timeout="4s")
        with PrometheusServer(tmp_path / "prometheus", [job], alert_rules(for_duration="3s"),
                              interval="4s", scrape_timeout="4s") as prom:
            firing = prom.wait_for(lambda: prom.firing("KafkatxnHangingTransaction"), "KafkatxnHangingTransaction to fire")
            assert firing[0]["labels"]["instance"] == address
            assert firing[0]["annotations"]["summary"] == f"1 hanging transaction(s) on {address}"
            assert prom.query("kafkatxn_hanging_transactions") == {(("instance", address), ("job", "kafkatxn")): 1.0}
            assert not prom.alerts("KafkatxnClusterUnreachable")  # the broker is up: kafkatxn_up never was 0

            aborted = run_cli(capsys, "abort", "--max-transaction-timeout", "0s", "-b", bootstrap, "--topic", topic, "--partition", "0",
                              "--start-offset", str(made.start_offset), "--yes", "--audit-log", tmp_path / "audit.jsonl")
            assert aborted.code == 0, aborted.stdout + aborted.stderr
            prom.wait_for(lambda: not prom.alerts("KafkatxnHangingTransaction"), "KafkatxnHangingTransaction to resolve")
            assert prom.query("kafkatxn_hanging_transactions")[(("instance", address), ("job", "kafkatxn"))] == 0
            assert prom.query("kafkatxn_partition_lso_lag_messages")[
                (("instance", address), ("job", "kafkatxn"), ("partition", "0"), ("topic", topic))] == 0
    finally:
        code = exporter.stop()
    assert code == 0, "".join(exporter.stderr_lines)
