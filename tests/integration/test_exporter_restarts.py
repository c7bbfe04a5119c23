"""A long-running exporter scraped without pause while its cluster's brokers restart and leaders move.

The exporter must answer every scrape (never die: a crashed exporter drops every alert at once), and
once the cluster is whole again its figures must be what they were before. bench/soak_exporter.py
runs the same faults for many minutes, over TLS too; this is its short form.
"""

from __future__ import annotations

import contextlib
import threading
import time

import pytest

from harness.leaders import leaders, rotate_leaders, wait_for_full_isr
from harness.scenarios import create_topic, run_transaction
from tests.support.exporter_process import ExporterProcess

pytestmark = pytest.mark.integration

SCRAPE_TIMEOUT_S = 3
FATAL = ("Fatal Python error", "Segmentation fault", "double free", "corruption", "Traceback")


class Scrapers:
    """Threads scraping /metrics back to back; every answer or failure is kept."""

    def __init__(self, exporter: ExporterProcess, n: int):
        self.exporter = exporter
        self.stop = threading.Event()
        self.answers: list[dict] = []
        self.failures: list[str] = []
        self.slowest = 0.0
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(n)]
        for t in self.threads:
            t.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                metrics, took = self.exporter.scrape()
            except Exception as exc:  # noqa: BLE001 - recorded: the test fails on any
                self.failures.append(f"{type(exc).__name__}: {exc}")
                time.sleep(0.2)
                continue
            self.answers.append(metrics)
            self.slowest = max(self.slowest, took)

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(SCRAPE_TIMEOUT_S + 35)


def _stderr(exporter: ExporterProcess) -> str:
    """What the exporter wrote so far: after a native crash, faulthandler's stacks of every thread."""
    while not exporter._stderr.empty():
        exporter.stderr_lines.append(exporter._stderr.get())
    return "".join(exporter.stderr_lines)


def _whole(metrics: dict) -> bool:
    return metrics.get(("kafkatxn_up", ())) == 1 and metrics.get(("kafkatxn_scrape_incomplete", ())) == 0 and all(
        metrics.get(("kafkatxn_broker_up", (("broker", str(b)),))) == 1 for b in (1, 2, 3))


def _wait_whole(exporter: ExporterProcess, timeout_s: float = 60) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        metrics, _ = exporter.scrape()
        if _whole(metrics) or time.monotonic() > deadline:
            return metrics
        time.sleep(0.5)


def _figures(metrics: dict, topic: str) -> dict:
    """The per-partition figures and transaction counts that must survive restarts and moves."""
    names = ("kafkatxn_partition_high_watermark", "kafkatxn_partition_last_stable_offset", "kafkatxn_partition_lso_lag_messages")
    out = {(name, labels): value for (name, labels), value in metrics.items()
           if name in names and ("topic", topic) in labels}
    out["open"] = metrics.get(("kafkatxn_open_transactions", ()))
    return out


def test_exporter_scrapes_through_broker_restarts_and_a_leader_move(kafka_factory, unique_name):
    cluster = kafka_factory(3)
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, unique_name, partitions=3, replication_factor=3)
    run_transaction(bootstrap, unique_name, [1, 2], "committed", records_per_partition=2)
    # An open transaction: its LSO lag must be reported the same after the faults.
    open_run = run_transaction(bootstrap, unique_name, [0], "open", transactional_id=f"{unique_name}-open", records_per_partition=3)
    exporter = ExporterProcess("-b", bootstrap, "--cache-ttl", "0s", "--scrape-timeout", f"{SCRAPE_TIMEOUT_S}s",
                               "--topic-regex", f"^{unique_name}$", env={"PYTHONFAULTHANDLER": "1"})
    scrapers = None
    try:
        before = _wait_whole(exporter)
        assert _whole(before), before
        assert before[("kafkatxn_partition_lso_lag_messages", (("partition", "0"), ("topic", unique_name)))] == 3
        scrapers = Scrapers(exporter, 2)

        first = leaders(bootstrap, [unique_name])[(unique_name, 0)]
        cluster.kill_broker(first)  # a crash of the partition's leader, under the scrapes
        time.sleep(2)
        cluster.start_broker(first)
        second = next(b for b in cluster.broker_ids if b != first)
        cluster.stop_broker(second)  # a controlled shutdown: leaders leave it first
        time.sleep(1)
        cluster.start_broker(second)
        wait_for_full_isr(bootstrap, [unique_name])  # else the election may find the new first replica behind
        moved = rotate_leaders(bootstrap, [unique_name])
        assert moved, "no leader moved"
        assert exporter.proc.poll() is None, _stderr(exporter)

        after = _wait_whole(exporter)
        scrapers.close()
        assert _whole(after), after
        assert _figures(after, unique_name) == _figures(before, unique_name)
        assert exporter.proc.poll() is None, _stderr(exporter)
        # Every scrape under the faults was answered (none refused or cut: the process served throughout).
        assert scrapers.failures == [], scrapers.failures[:5]
        assert len(scrapers.answers) >= 4
        assert scrapers.slowest < SCRAPE_TIMEOUT_S + 3  # the gather's deadline, and room on a loaded host
    finally:
        if scrapers is not None:
            scrapers.close()
        code = exporter.stop()
        with contextlib.suppress(Exception):  # cleanup only: the coordinator aborts it at its timeout anyway
            open_run.abort()
    time.sleep(0.2)  # the last lines of stderr reach the reader thread
    stderr = _stderr(exporter)
    assert code == 0, stderr
    assert not [mark for mark in FATAL if mark in stderr], stderr
