"""One cluster state on a real broker, every command asked the same four questions (issue 24):
how many transactions are open, which hang, how old each is, and whether each group is blocked
(and critically so).

The state: a hanging transaction (harness/hanging_maker.py: its coordinator never hears of it) on
partition 0, a real librdkafka transaction in flight on partition 1 (harness/scenarios.py), group
``stuck`` committed at the hanging transaction's first offset and group ``keeping`` at the one in
flight. The broker's transaction.max.timeout.ms is 10 s, so the in-flight transaction can stay open
no longer: the commands run within that window. Expected values come from the clients that made
the traffic, never from kafkatxn.
"""

from __future__ import annotations

import json
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness import hanging_maker as hm
from harness.scenarios import run_transaction, unique
from kafkatxn.config import ConnectionConfig
from kafkatxn.exporter import render_text
from kafkatxn.exporter_metrics import ExportOptions
from kafkatxn.kafka import Cluster
from kafkatxn.model import TopicPartition
from kafkatxn.facts_cluster import gather_snapshot
from tests.support.cli_helpers import run_cli
from tests.support.groups import commit_offset

pytestmark = pytest.mark.integration

TOLERANCE_MS = 5_000


@pytest.fixture(scope="module")
def broker(kafka_hanging):
    return kafka_hanging


def test_every_command_answers_the_four_questions_alike_on_one_real_cluster(capsys, broker):
    bootstrap = broker.bootstrap_servers
    topic, stuck, keeping = unique("truth"), unique("stuck"), unique("keeping")
    broker.create_topic(topic, partitions=2)
    hanging_tp, flight_tp = TopicPartition(topic, 0), TopicPartition(topic, 1)
    hm.write_committed(bootstrap, hanging_tp, [b"before"], unique("truth-before"))  # the transaction log exists from here
    made_at = int(time.time() * 1000)
    made = hm.make_hanging_transaction(bootstrap, unique("truth-lost"), topic, 0, records=3)
    commit_offset(bootstrap, stuck, hanging_tp, made.start_offset)
    time.sleep(hm.HANGING_BROKER_MAX_TIMEOUT_MS / 1000 + 1)  # idle past the maximum timeout: a candidate
    flight = run_transaction(bootstrap, topic, [1], "open", timeout_ms=hm.HANGING_BROKER_MAX_TIMEOUT_MS)
    flight_start = flight.start_offset(flight_tp)
    commit_offset(bootstrap, keeping, flight_tp, flight_start)
    flight_at = int(time.time() * 1000)

    def cli(*args: str, codes=(0, 1, 2)):
        result = run_cli(capsys, *args, "-b", bootstrap, "--timeout", "10s", "-o", "json")
        assert result.code in codes, (args, result.code, result.stderr)
        return json.loads(result.stdout), result.code

    try:
        lagging, _ = cli("lso", "-t", topic, "--sort", "age")
        found, _ = cli("hanging", "-t", topic)
        checked, _ = cli("check", "--topic-regex", f"^{topic}$", "--groups", "--group-regex", f"^({stuck}|{keeping})$",
                         "--txn-age-crit", "5m", "--txn-age-warn", "none")
        planned, _ = cli("abort", "--all-hanging", "-t", topic, "--dry-run", codes=(0, 1, 2, 3))
        diagnosed = {g: cli("diagnose", "--group", g) for g in (stuck, keeping)}
        by_lso = {g: cli("lso", "--groups", g, "--critical-age", "5m") for g in (stuck, keeping)}
        with Cluster(ConnectionConfig(bootstrap_servers=bootstrap, timeout_ms=10_000)) as cluster:
            snapshot = gather_snapshot(cluster, topic_regex=f"^{topic}$", groups=True, group_regex=f"^({stuck}|{keeping})$")
        exported = {s.name + "".join(f"{{{v}}}" for _, v in sorted(s.labels.items())): s.value
                    for f in text_string_to_metric_families(render_text(snapshot, ExportOptions()).decode()) for s in f.samples}
        elapsed_ms = int(time.time() * 1000) - flight_at
    finally:
        flight.abort()
    assert elapsed_ms < hm.HANGING_BROKER_MAX_TIMEOUT_MS, f"the commands took {elapsed_ms} ms: the in-flight transaction may have timed out"
    print(f"\nall commands in {elapsed_ms} ms")

    # How many transactions are open?
    counts = {"hanging": found["open_transactions"], "check": checked["open_transactions"],
              "lso": sum(r["open_transactions"] for r in lagging), "exporter": exported["kafkatxn_open_transactions"]}
    assert set(counts.values()) == {2}, counts

    # Which hang?
    hanging = {
        "hanging": {r["partition"] for r in found["hanging"]},
        "check": {int(f["subject"].rsplit("-", 1)[1]) for f in checked["findings"] if f["kind"] == "hanging_transaction"},
        "lso": {r["partition"] for r in lagging if r["txn_hanging"]},
        "abort": {r["partition"] for r in planned if r["outcome"] == "would abort"},
        "diagnose": {int(t["partitions"][0].split("@")[0].rsplit("-", 1)[1])
                     for d, _ in diagnosed.values() for t in d["transactions"] if t["verdict"] == "hanging"},
    }
    assert all(v == {0} for v in hanging.values()), hanging
    assert exported["kafkatxn_hanging_transactions"] == 1

    # How old is each? The hanging one from its first record (no coordinator has it), the other from its coordinator.
    now = int(time.time() * 1000)
    lso_ages = {r["partition"]: (r["txn_age_ms"], r["txn_age_source"]) for r in lagging}
    (hanging_row,) = found["hanging"]
    (stuck_txn,) = diagnosed[stuck][0]["transactions"]
    (keeping_txn,) = diagnosed[keeping][0]["transactions"]
    hanging_ages = {"lso": lso_ages[0], "hanging": (hanging_row["transaction_age_ms"], hanging_row["transaction_age_source"]),
                    "diagnose": (stuck_txn["age_ms"], stuck_txn["age_source"])}
    for command, (age, source) in hanging_ages.items():
        assert source == "first_record" and hm.HANGING_BROKER_MAX_TIMEOUT_MS < age <= now - made_at + TOLERANCE_MS, (command, age, source)
    assert max(a for a, _ in hanging_ages.values()) - min(a for a, _ in hanging_ages.values()) <= TOLERANCE_MS, hanging_ages
    flight_ages = {"lso": lso_ages[1], "diagnose": (keeping_txn["age_ms"], keeping_txn["age_source"])}
    for command, (age, source) in flight_ages.items():
        assert source == "coordinator" and 0 <= age < hm.HANGING_BROKER_MAX_TIMEOUT_MS, (command, age, source)
    assert [r["partition"] for r in lagging] == [0, 1]  # --sort age: the hanging one, the oldest, first
    oldest = {"check": checked["transaction_age_max_ms"], "exporter": int(exported["kafkatxn_transaction_oldest_age_seconds"] * 1000)}
    assert all(abs(v - hanging_ages["lso"][0]) <= TOLERANCE_MS for v in oldest.values()), (oldest, hanging_ages)

    # Is each group blocked (or waiting on a transaction in flight), and critically? Blocked means
    # stuck: only behind the hanging one.
    for group, critical, partition in ((stuck, True, 0), (keeping, False, 1)):
        (row,), lso_code = by_lso[group]
        series = f"{{{group}}}{{{partition}}}{{{topic}}}"
        held = "blocked" if critical else "waiting"
        blocked = {"lso": row["verdict"] == held, "diagnose": diagnosed[group][0]["groups"][0]["status"] == held,
                   "exporter": exported["kafkatxn_group_blocked" + series] == (1 if critical else 0)}
        assert all(blocked.values()), (group, blocked)
        severe = {"lso": lso_code == 2, "diagnose": diagnosed[group][1] == 2,
                  "check": any(f["kind"] == "group_blocked" and f["subject"] == group for f in checked["findings"]),
                  "exporter": exported["kafkatxn_group_stuck" + series] == 1}
        assert set(severe.values()) == {critical}, (group, severe)
    assert checked["groups_blocked"] == 1 and checked["groups_waiting"] == 1, checked
