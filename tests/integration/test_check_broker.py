"""``kafkatxn check`` on a real broker: OK, WARNING, CRITICAL and UNKNOWN for scenarios that should give them.

The session broker is shared with other tests, so each check is scoped to this test's own topic
(``--topic-regex``); transaction ages then count only transactions on that topic too.
(A hanging transaction — CRITICAL — is made on a dedicated broker in test_exporter_broker.py.)
"""

from __future__ import annotations

import json
import re

import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness.scenarios import create_topic, run_transaction
from tests.support.cli_helpers import run_cli

pytestmark = pytest.mark.integration

PLUGIN_LINE = re.compile(r"^KAFKATXN (OK|WARNING|CRITICAL|UNKNOWN) - [^|\n]+( \| [^\n]+)?$")


def perfdata(line: str) -> dict[str, str]:
    items = line.split(" | ", 1)[1].split()
    return {item.split("=", 1)[0]: item.split("=", 1)[1] for item in items}


@pytest.fixture
def topic_with_open_transaction(kafka, unique_name):
    """p0: a committed transaction (2 records + marker), then an open one of 3 records (long timeout)."""
    create_topic(kafka.bootstrap_servers, unique_name, partitions=2)
    run_transaction(kafka.bootstrap_servers, unique_name, [0], "committed", records_per_partition=2)
    run = run_transaction(kafka.bootstrap_servers, unique_name, [0], "open", records_per_partition=3)
    try:
        yield unique_name, run
    finally:
        run.abort()


def check(capsys, kafka, topic: str, *args: str):
    return run_cli(capsys, "check", "-b", kafka.bootstrap_servers, "--timeout", "20s",
                   "--topic-regex", f"^{re.escape(topic)}$", *args)


def test_ok_when_every_transaction_completed(capsys, kafka, unique_name):
    create_topic(kafka.bootstrap_servers, unique_name, partitions=2)
    run_transaction(kafka.bootstrap_servers, unique_name, [0, 1], "committed")
    run_transaction(kafka.bootstrap_servers, unique_name, [1], "aborted")
    result = check(capsys, kafka, unique_name, "--txn-age-warn", "1s")
    assert result.code == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert PLUGIN_LINE.match(lines[0]) and lines[0].startswith("KAFKATXN OK - 2 partitions, no hanging transactions")
    perf = perfdata(lines[0])
    assert perf["lso_lag_max"] == "0;1000;10000;0"
    assert perf["hanging_transactions"] == "0;;0;0"
    assert perf["partitions"] == "2;;;0"
    assert result.stderr == ""


def test_lso_lag_of_an_open_transaction_warns_then_goes_critical(capsys, kafka, topic_with_open_transaction):
    topic, run = topic_with_open_transaction
    start = run.start_offset(run.written[0].tp)
    warn = check(capsys, kafka, topic, "--lso-lag-warn", "2", "--lso-lag-crit", "100", "--txn-age-warn", "none",
                 "--txn-age-crit", "none")
    assert warn.code == 1, warn.stdout + warn.stderr
    first = warn.stdout.splitlines()[0]
    assert first.startswith("KAFKATXN WARNING - 1 partition with LSO lag > 2 |")
    assert perfdata(first)["lso_lag_max"] == "3;2;100;0"  # 3 records of the open transaction
    assert f"{topic}-0: LSO lag 3 messages" in warn.stdout

    crit = check(capsys, kafka, topic, "--lso-lag-crit", "@3:5", "-o", "json")
    assert crit.code == 2, crit.stdout + crit.stderr
    doc = json.loads(crit.stdout)
    assert doc["status"] == "CRITICAL" and doc["lso_lag_max_messages"] == 3 and doc["lagging_partitions"] == 1
    lag = [f for f in doc["findings"] if f["kind"] == "lso_lag"]
    assert [(f["subject"], f["value"], f["status"]) for f in lag] == [(f"{topic}-0", 3, "critical")]
    assert start == 3  # the committed transaction's 2 records and its marker come first

    run.commit()
    after = check(capsys, kafka, topic, "--lso-lag-warn", "0")
    assert after.code == 0, after.stdout
    assert perfdata(after.stdout.splitlines()[0])["lso_lag_max"].startswith("0;")


def test_an_old_open_transaction_warns_by_age(capsys, kafka, topic_with_open_transaction):
    topic, run = topic_with_open_transaction
    run.wait_until_open_longer_than(1500)
    result = check(capsys, kafka, topic, "--txn-age-warn", "1s", "--txn-age-crit", "1h", "--lso-lag-warn", "none")
    assert result.code == 1, result.stdout + result.stderr
    assert "1 transaction open > 1s" in result.stdout.splitlines()[0]
    assert f"transaction {run.transactional_id!r} open for" in result.stdout
    age = float(perfdata(result.stdout.splitlines()[0])["transaction_age_max"].split(";")[0].rstrip("s"))
    assert 1.5 <= age < 120


def test_textfile_holds_the_same_scenario_for_node_exporter(capsys, kafka, topic_with_open_transaction, tmp_path):
    topic, _run = topic_with_open_transaction
    target = tmp_path / "kafkatxn.prom"
    result = check(capsys, kafka, topic, "--textfile", str(target), "--txn-age-warn", "none")
    assert result.code == 0, result.stdout + result.stderr
    samples = {
        (s.name, s.labels.get("topic"), s.labels.get("partition")): s.value
        for family in text_string_to_metric_families(target.read_text())
        for s in family.samples
    }
    assert samples[("kafkatxn_up", None, None)] == 1
    assert samples[("kafkatxn_partition_lso_lag_messages", topic, "0")] == 3
    assert samples[("kafkatxn_partition_lso_lag_messages", topic, "1")] == 0
    assert samples[("kafkatxn_partition_high_watermark", topic, "0")] == 6
    assert samples[("kafkatxn_partition_last_stable_offset", topic, "0")] == 3
    assert samples[("kafkatxn_partitions", None, None)] == 2
    assert [p.name for p in tmp_path.iterdir()] == ["kafkatxn.prom"]


def test_unknown_when_the_cluster_cannot_be_reached(capsys):
    result = run_cli(capsys, "check", "-b", "127.0.0.1:1", "--timeout", "2s")
    assert result.code == 3
    assert result.stdout.startswith("KAFKATXN UNKNOWN - cannot reach any broker at 127.0.0.1:1")
    assert len(result.stdout.splitlines()) == 1


def test_usage_errors_exit_64_before_touching_the_cluster(capsys):
    result = run_cli(capsys, "check", "-b", "127.0.0.1:1", "--lso-lag-warn", "20:10")
    assert result.code == 64 and "--lso-lag-warn" in result.stderr
    # Nagios shows stdout: one UNKNOWN line naming the bad option, not an empty status (issue 24).
    assert result.stdout.splitlines() == ["KAFKATXN UNKNOWN - bad --lso-lag-warn '20:10': the start of the range is above its end"]
    result = run_cli(capsys, "check", "-b", "127.0.0.1:1", "--textfile", "/tmp/metrics.txt")
    assert result.code == 64 and ".prom" in result.stderr
