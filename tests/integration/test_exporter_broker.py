"""``kafkatxn exporter`` as a real process on a real broker, scraped over HTTP.

One dedicated broker (transaction.partition.verification.enable=false, so harness/hanging_maker.py can
make a genuinely hanging transaction) serves the whole story: /metrics matches the scenario and
``check`` says CRITICAL; with the broker killed kafkatxn_up is 0 and the exporter stays up; after
the broker restarts kafkatxn_up is 1 again without touching the exporter.
"""

from __future__ import annotations

import signal
import threading
import time

import pytest

from harness.hanging_maker import make_hanging_transaction
from harness.scenarios import create_topic, run_transaction
from tests.support.cli_helpers import run_cli
from tests.support.exporter_process import ExporterProcess

pytestmark = pytest.mark.integration

SCRAPE_TIMEOUT_S = 3


def test_metrics_follow_the_cluster_through_a_hanging_transaction_and_a_broker_outage(capsys, kafka_factory, unique_name):
    cluster = kafka_factory(**{"transaction.partition.verification.enable": "false"})
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, unique_name, partitions=3)
    run_transaction(bootstrap, unique_name, [1], "committed", records_per_partition=2)
    hanging = make_hanging_transaction(bootstrap, f"{unique_name}-tid", unique_name, partition=0, records=3)
    time.sleep(1.2)  # past --max-transaction-timeout, so the hanging rule looks at it

    exporter = ExporterProcess(
        "-b", bootstrap, "--cache-ttl", "0s", "--scrape-timeout", f"{SCRAPE_TIMEOUT_S}s",
        "--max-transaction-timeout", "1s", "--topic-regex", f"^{unique_name}$",
    )
    try:
        metrics, _ = exporter.scrape()
        p0 = (("partition", "0"), ("topic", unique_name))
        p1 = (("partition", "1"), ("topic", unique_name))
        assert metrics[("kafkatxn_up", ())] == 1
        assert metrics[("kafkatxn_hanging_transactions", ())] == 1
        assert metrics[("kafkatxn_partition_lso_lag_messages", p0)] == 3
        assert metrics[("kafkatxn_partition_last_stable_offset", p0)] == hanging.start_offset
        assert metrics[("kafkatxn_partition_high_watermark", p1)] == 3  # 2 records and the commit marker
        assert metrics[("kafkatxn_partition_lso_lag_messages", p1)] == 0
        assert metrics[("kafkatxn_broker_up", (("broker", "1"),))] == 1
        assert metrics[("kafkatxn_active_producer_ids", (("broker", "1"),))] == 2
        assert metrics[("kafkatxn_transactions", (("state", "CompleteCommit"),))] == 1
        assert metrics[("kafkatxn_scrape_incomplete", ())] == 0

        result = run_cli(capsys, "check", "-b", bootstrap, "--max-transaction-timeout", "1s",
                         "--topic-regex", f"^{unique_name}$")
        assert result.code == 2, result.stdout + result.stderr
        assert result.stdout.startswith("KAFKATXN CRITICAL - 1 hanging transaction")
        assert f"hanging transaction on {unique_name}-0 from offset {hanging.start_offset}" in result.stdout

        cluster.kill_broker(1)
        metrics, took = exporter.scrape()
        assert metrics[("kafkatxn_up", ())] == 0
        assert took < SCRAPE_TIMEOUT_S + 2  # the scrape deadline holds with the broker gone
        assert ("kafkatxn_hanging_transactions", ()) not in metrics  # no stale figures while down
        assert exporter.proc.poll() is None

        cluster.start_broker(1)
        deadline = time.monotonic() + 60
        while True:
            metrics, _ = exporter.scrape()
            if metrics[("kafkatxn_up", ())] == 1 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert metrics[("kafkatxn_up", ())] == 1
        assert exporter.proc.poll() is None
    finally:
        code = exporter.stop()
    assert code == 0, "".join(exporter.stderr_lines)


def test_concurrent_scrapes_share_one_gather(kafka, unique_name):
    create_topic(kafka.bootstrap_servers, unique_name, partitions=2)
    exporter = ExporterProcess("-b", kafka.bootstrap_servers, "--cache-ttl", "30s", "--topic-regex", f"^{unique_name}$")
    try:
        results: list[dict] = []
        threads = [threading.Thread(target=lambda: results.append(exporter.scrape()[0])) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert len(results) == 4
        durations = {r[("kafkatxn_scrape_duration_seconds", ())] for r in results}
        assert len(durations) == 1  # one gather answered all four
        assert all(r[("kafkatxn_partitions", ())] == 2 for r in results)
    finally:
        exporter.stop()


def test_sigterm_during_a_gather_waits_for_it_then_exits_cleanly(kafka_factory, unique_name):
    """Stopping while a scrape gathers from a frozen broker: the exporter lets that gather end (its
    deadline is the scrape timeout), answers the scrape, closes the connections it used and exits 0,
    with no crash on stderr. Closing them under the gather, from the main thread, is what the wait
    prevents."""
    cluster = kafka_factory()
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, unique_name, partitions=1)
    exporter = ExporterProcess("-b", bootstrap, "--cache-ttl", "0s", "--scrape-timeout", f"{SCRAPE_TIMEOUT_S}s")
    process = cluster._node(cluster.broker_ids[0]).process
    scraped: list[object] = []

    def scrape() -> None:
        try:
            scraped.append(exporter.scrape()[0])
        except Exception as exc:  # noqa: BLE001 - the process may end before it answers: recorded, not the test's error
            scraped.append(exc)

    try:
        assert exporter.scrape()[0][("kafkatxn_up", ())] == 1  # connections open before the freeze
        process.send_signal(signal.SIGSTOP)
        scraping = threading.Thread(target=scrape)
        scraping.start()
        time.sleep(0.5)  # the gather now waits on the frozen broker
        started = time.monotonic()
        code = exporter.stop()
        took = time.monotonic() - started
        scraping.join(SCRAPE_TIMEOUT_S + 10)
    finally:
        process.send_signal(signal.SIGCONT)
    time.sleep(0.2)  # the last lines of stderr reach the reader thread
    stderr = "".join(exporter.stderr_lines) + _drained(exporter)
    assert code == 0, stderr
    assert "Traceback" not in stderr and "Fatal Python error" not in stderr and "double free" not in stderr, stderr
    # It waited for the gather (it did not close the clients under it), and no longer than its deadline.
    assert 0.3 <= took <= SCRAPE_TIMEOUT_S + 2, took
    # The scrape under way got its whole answer: the frozen broker is missing from it, not the exporter.
    assert len(scraped) == 1 and isinstance(scraped[0], dict), scraped
    assert scraped[0][("kafkatxn_up", ())] == 0 or scraped[0][("kafkatxn_scrape_incomplete", ())] == 1, scraped[0]


def _drained(exporter: ExporterProcess) -> str:
    lines = []
    while not exporter._stderr.empty():
        lines.append(exporter._stderr.get_nowait())
    return "".join(lines)
