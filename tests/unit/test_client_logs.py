"""No client library's log line reaches the terminal without --debug: every confluent-kafka client
kafkatxn builds logs to the Python logger kafkatxn.librdkafka, and the harness' clients the demo
runs are quiet. Real librdkafka clients, pointed at a port nothing listens on (no broker needed)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIBRDKAFKA_LINE = re.compile(r"^%\d\|", re.M)  # %3|1700000000.123|FAIL|rdkafka#producer-1| …
NOWHERE = "127.0.0.1:1"


def python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def test_a_producer_the_writer_builds_prints_nothing_and_logs_only_where_logging_is_set_up():
    """The exactly-once writer is handed a Spark job's own producer settings (no log_level): librdkafka
    would print its connection failures to stderr."""
    make = textwrap.dedent(f"""
        from kafkatxn.kafka.transactional_writer import transactional_producer
        producer = transactional_producer({{"bootstrap.servers": "{NOWHERE}"}}, "t")
        for _ in range(15):
            producer.poll(0.1)
        producer.flush(0)
    """)
    quiet = python(make)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""
    logged = python("import logging\nlogging.basicConfig(format='%(name)s %(levelname)s %(message)s')" + make)
    assert logged.returncode == 0 and not LIBRDKAFKA_LINE.search(logged.stderr), logged.stderr
    assert re.search(r"^kafkatxn\.librdkafka (ERROR|WARNING) .*127\.0\.0\.1:1", logged.stderr, re.M), logged.stderr


def test_every_confluent_client_kafkatxn_builds_is_routed(monkeypatch):
    import confluent_kafka
    import confluent_kafka.admin

    from kafkatxn.config import ConnectionConfig
    from kafkatxn.kafka import ledger, log_reader, transactional_writer
    from kafkatxn.kafka.client_logs import LOGGER
    from kafkatxn.kafka.facade import Cluster

    built: list[tuple[str, dict]] = []

    class Client:
        def __init__(self, conf):
            built.append((type(self).__name__, conf))

        def list_topics(self, *a, **k):
            return type("Md", (), {"topics": {}})()

    monkeypatch.setattr(confluent_kafka, "Consumer", type("Consumer", (Client,), {}))
    monkeypatch.setattr(confluent_kafka, "Producer", type("Producer", (Client,), {}))
    monkeypatch.setattr(confluent_kafka.admin, "AdminClient", type("AdminClient", (Client,), {}))
    conf = {"bootstrap.servers": NOWHERE}
    log_reader._consumer(conf)
    transactional_writer.transactional_producer(conf, "t")
    ledger.ledger_partition_count(conf, "ledger")
    Cluster(ConnectionConfig(NOWHERE, {}, 1000)).build_admin()
    assert {name for name, _ in built} == {"Consumer", "Producer", "AdminClient"}
    for name, c in built:
        assert c["logger"].name == LOGGER, name


def test_the_harness_clients_the_demo_runs_print_nothing():
    result = python(f"""
        import harness.scenarios as s
        s.CLIENT_TIMEOUT_S = 1.5
        try:
            s.create_topic("{NOWHERE}", "t")
        except Exception:
            pass
    """)
    assert not LIBRDKAFKA_LINE.search(result.stderr), result.stderr
