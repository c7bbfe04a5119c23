"""`kafkatxn producers` and `kafkatxn transactions` against a real broker.

One scenario (harness/scenarios.py) on the shared broker: an idempotent producer, a committed and an
aborted transaction, and a transaction left open. The expected ids, epochs, sequences and offsets
come from the client that made them (librdkafka's log, delivery reports), never from kafkatxn.
"""

from __future__ import annotations

import re
import time

import pytest

from kafkatxn import transaction_listing
from kafkatxn.kafka import Cluster
from kafkatxn.model import ListTransactionsSupport, TopicPartition
from kafkatxn.config import resolve
from tests.support.cli_helpers import FORMATS, run_cli, run_cli_subprocess

# Tables show ages and timestamps in human form and the columns to act on (tests/integration/
# test_tables.py); exact raw values are compared in the structured formats.
STRUCTURED = [f for f in FORMATS if f != "table"]
from harness.scenarios import InspectScenario, inspect_scenario, unique

pytestmark = pytest.mark.integration

TRANSACTIONS_COMMAND = "org.apache.kafka.tools.TransactionsCommand"


@pytest.fixture(scope="module")
def started_ms() -> int:
    return int(time.time() * 1000)


@pytest.fixture(scope="module")
def scenario(kafka, started_ms) -> InspectScenario:
    made = inspect_scenario(kafka.bootstrap_servers, prefix=unique("inspect"))
    yield made
    made.close()


@pytest.fixture(scope="module")
def prefix_pattern(scenario) -> str:
    """Matches exactly this scenario's transactional ids (they share the topic's unique prefix)."""
    return re.escape(scenario.topic.rsplit("-", 1)[0]) + "-.*"


def kt(capsys, kafka, *args):
    return run_cli(capsys, *args, "-b", kafka.bootstrap_servers, "--timeout", "20s")


def now_ms() -> int:
    return int(time.time() * 1000)


# -- producers ----------------------------------------------------------------------------------


def expected_producers(s: InspectScenario) -> set[tuple[str, ...]]:
    """(partition, producer_id, producer_epoch, last_sequence, current_txn_start_offset, transactional_id)."""
    rows = set()
    idem = s.idempotent
    rows.add((idem.written.partition, idem.producer_id, idem.producer_epoch, idem.last_sequence, -1, ""))
    for run in s.transactions:
        for w in run.written:
            start = w.first_offset if run.outcome == "open" else -1
            rows.add((w.partition, run.producer_id, run.producer_epoch, w.records - 1, start, run.transactional_id))
    return {tuple(str(v) for v in row) for row in rows}


def producer_key(row: dict[str, str]) -> tuple[str, ...]:
    return tuple(
        row[k] for k in ("partition", "producer_id", "producer_epoch", "last_sequence", "current_txn_start_offset", "transactional_id")
    )


@pytest.mark.parametrize("fmt", STRUCTURED)
def test_producers_show_exactly_the_scenario(capsys, kafka, scenario, started_ms, fmt):
    result = kt(capsys, kafka, "producers", "--topic", scenario.topic, "-o", fmt)
    assert result.code == 0, result.stderr
    rows = result.records(fmt)

    expected = expected_producers(scenario)
    assert {producer_key(r) for r in rows} == expected
    assert len(rows) == len(expected)
    # Sanity of the expectation itself: the open transaction on p2 starts after the committed one.
    assert ("2", str(scenario.open.producer_id)) in {k[:2] for k in expected}
    assert scenario.open.start_offset(TopicPartition(scenario.topic, 2)) > 0

    finished = now_ms()
    marked = {str(scenario.committed.producer_id), str(scenario.aborted.producer_id)}
    for row in rows:
        assert row["topic"] == scenario.topic
        assert row["broker_id"] == str(kafka.broker_ids[0])
        assert started_ms - 1000 <= int(row["last_timestamp_ms"]) <= finished
        assert 0 <= int(row["age_ms"]) <= finished - started_ms + 1000
        assert "age" not in row  # machine output: age_ms only
        # Only producers whose transaction ended had a marker written, which sets the coordinator epoch.
        if row["producer_id"] in marked:
            assert int(row["coordinator_epoch"]) >= 0
        else:
            assert row["coordinator_epoch"] == "-1"


def test_producers_partition_filter(capsys, kafka, scenario):
    result = kt(capsys, kafka, "producers", "-t", scenario.topic, "-p", "2", "-o", "json")
    assert result.code == 0, result.stderr
    rows = result.records("json")
    assert {producer_key(r) for r in rows} == {k for k in expected_producers(scenario) if k[0] == "2"}


def test_producers_asked_of_a_named_replica(capsys, kafka, scenario):
    broker = kafka.broker_ids[0]
    result = kt(capsys, kafka, "producers", "-t", scenario.topic, "--broker-id", str(broker), "-o", "jsonl")
    assert result.code == 0, result.stderr
    rows = result.records("jsonl")
    assert {producer_key(r) for r in rows} == expected_producers(scenario)
    assert {r["broker_id"] for r in rows} == {str(broker)}


def test_producers_without_a_topic_include_the_scenario_but_not_internal_topics(capsys, kafka, scenario):
    result = kt(capsys, kafka, "producers", "-o", "json")
    assert result.code == 0, result.stderr
    rows = result.records("json")
    assert expected_producers(scenario) <= {producer_key(r) for r in rows if r["topic"] == scenario.topic}
    assert not [r for r in rows if r["topic"].startswith("__")]


@pytest.mark.parametrize("fmt", FORMATS)
def test_producers_summary(capsys, kafka, scenario, fmt):
    # --wide: the test's long topic name would make a narrow table leave a column out.
    result = kt(capsys, kafka, "producers", "--summary", "-t", scenario.topic, "-o", fmt, "--wide")
    assert result.code == 0, result.stderr
    # p0: idempotent; p1: committed + aborted; p2: committed + open; p3: open.
    counts = {"partitions": "4", "active_producer_ids": "4", "producer_states": "6", "open_transactions": "1"}
    assert result.records(fmt) == [
        {"scope": "broker", "broker_id": str(kafka.broker_ids[0]), "topic": "", **counts},
        {"scope": "topic", "broker_id": "", "topic": scenario.topic, **counts},
    ]


def test_producers_summary_includes_internal_topics_when_asked(capsys, kafka, scenario):
    plain = kt(capsys, kafka, "producers", "--summary", "-o", "json")
    internal = kt(capsys, kafka, "producers", "--summary", "--include-internal", "-o", "json")
    assert plain.code == 0 and internal.code == 0, plain.stderr + internal.stderr
    plain_topics = {r["topic"] for r in plain.records("json")}
    internal_topics = {r["topic"] for r in internal.records("json")}
    assert scenario.topic in plain_topics
    assert not {t for t in plain_topics if t.startswith("__")}
    assert "__transaction_state" in internal_topics  # exists: the scenario used transactions


@pytest.mark.parametrize(
    "args, message",
    [
        (["--topic", "no-such-topic-kt"], "unknown topic 'no-such-topic-kt'"),
        (["--topic", "{topic}", "--partition", "4"], "has no partition 4"),
        (["--topic", "{topic}", "--broker-id", "999"], "unknown broker id 999"),
        (["--summary", "--topic", "no-such-topic-kt"], "unknown topic"),
    ],
)
@pytest.mark.parametrize("fmt", ["table", "json"])
def test_unknown_topic_partition_or_broker_is_exit_3_and_one_line(capsys, kafka, scenario, args, message, fmt):
    args = [a.replace("{topic}", scenario.topic) for a in args]
    result = kt(capsys, kafka, "producers", *args, "-o", fmt)
    assert result.code == 3
    assert result.stdout == ""
    assert message in result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("kafkatxn: error: ")


# -- transactions list ----------------------------------------------------------------------------

STATE_OF = {"open": "Ongoing", "committed": "CompleteCommit", "aborted": "CompleteAbort"}


def expected_listing(s: InspectScenario, broker_id: int) -> list[dict[str, str]]:
    rows = [
        {"transactional_id": r.transactional_id, "coordinator_id": str(broker_id), "producer_id": str(r.producer_id), "state": STATE_OF[r.outcome]}
        for r in s.transactions
    ]
    return sorted(rows, key=lambda d: d["transactional_id"])


@pytest.mark.parametrize("fmt", FORMATS)
def test_transactions_list_shows_exactly_the_scenario(capsys, kafka, scenario, prefix_pattern, fmt):
    result = kt(capsys, kafka, "transactions", "list", "--pattern", prefix_pattern, "-o", fmt)
    assert result.code == 0, result.stderr
    assert result.records(fmt) == expected_listing(scenario, kafka.broker_ids[0])


def expected_details(s: InspectScenario, broker_id: int) -> dict[str, dict[str, str]]:
    out = {}
    for run in s.transactions:
        partitions = ",".join(f"{w.topic}-{w.partition}" for w in sorted(run.written, key=lambda w: w.partition))
        out[run.transactional_id] = {
            "transactional_id": run.transactional_id,
            "status": "found",
            "coordinator_id": str(broker_id),
            "state": STATE_OF[run.outcome],
            "producer_id": str(run.producer_id),
            "producer_epoch": str(run.producer_epoch),
            "timeout_ms": str(run.timeout_ms),
            # The coordinator forgets the partitions once the markers are written.
            "partitions": partitions if run.outcome == "open" else "",
            "error": "",
        }
    return out


def check_details(rows: list[dict[str, str]], scenario: InspectScenario, broker_id: int, started_ms: int) -> None:
    expected = expected_details(scenario, broker_id)
    assert [r["transactional_id"] for r in rows] == sorted(expected)
    finished = now_ms()
    for row in rows:
        fixed = {k: row[k] for k in expected[row["transactional_id"]]}
        assert fixed == expected[row["transactional_id"]]
        assert started_ms - 1000 <= int(row["start_time_ms"]) <= finished
        if row["state"] == "Ongoing":
            assert 0 <= int(row["duration_ms"]) <= finished - started_ms + 1000
            assert "duration" not in row  # machine output: duration_ms only
        else:  # a finished transaction has no running duration
            assert row["duration_ms"] == ""


@pytest.mark.parametrize("fmt", STRUCTURED)
def test_transactions_list_describe_adds_details(capsys, kafka, scenario, prefix_pattern, started_ms, fmt):
    result = kt(capsys, kafka, "transactions", "list", "--pattern", prefix_pattern, "--describe", "-o", fmt)
    assert result.code == 0, result.stderr
    check_details(result.records(fmt), scenario, kafka.broker_ids[0], started_ms)


def listed_ids(capsys, kafka, *args) -> list[str]:
    result = kt(capsys, kafka, "transactions", "list", *args, "-o", "json")
    assert result.code == 0, result.stderr
    return [r["transactional_id"] for r in result.records("json")]


def test_transactions_list_filters(capsys, kafka, scenario, prefix_pattern):
    s = scenario
    ids = lambda *runs: sorted(r.transactional_id for r in runs)  # noqa: E731
    assert listed_ids(capsys, kafka, "--pattern", prefix_pattern, "--state", "ongoing") == ids(s.open)
    assert listed_ids(
        capsys, kafka, "--pattern", prefix_pattern, "--state", "CompleteCommit", "--state", "CompleteAbort"
    ) == ids(s.committed, s.aborted)
    assert listed_ids(capsys, kafka, "--producer-id", str(s.committed.producer_id)) == ids(s.committed)
    assert listed_ids(
        capsys, kafka, "--producer-id", str(s.aborted.producer_id), "--producer-id", str(s.open.producer_id)
    ) == ids(s.aborted, s.open)
    # The pattern must match the whole id, as on the broker.
    assert listed_ids(capsys, kafka, "--pattern", re.escape(s.topic.rsplit("-", 1)[0])) == []
    assert listed_ids(capsys, kafka, "--pattern", re.escape(s.open.transactional_id)) == ids(s.open)


def test_min_duration_selects_open_transactions_running_longer(capsys, kafka, scenario, prefix_pattern):
    scenario.open.wait_until_open_longer_than(1000)
    # The broker also returns completed transactions that began long ago; only the open one qualifies.
    assert listed_ids(capsys, kafka, "--pattern", prefix_pattern, "--min-duration", "1s") == [scenario.open.transactional_id]
    assert listed_ids(capsys, kafka, "--pattern", prefix_pattern, "--min-duration", "1h") == []
    result = kt(capsys, kafka, "transactions", "list", "--min-duration", "1s", "--state", "CompleteCommit")
    assert result.code == 64 and result.stdout == ""
    assert "--min-duration selects open transactions only" in result.stderr


class OldBrokers:
    """The cluster, as if its brokers only had ListTransactions v0: no duration or pattern filter."""

    def __init__(self, cluster: Cluster):
        self._cluster = cluster

    def __getattr__(self, name):
        return getattr(self._cluster, name)

    def list_transactions(self, broker_ids=None, states=(), producer_ids=(), min_duration_ms=None, pattern=None):
        listed, _ = self._cluster.list_transactions(broker_ids, states, producer_ids)
        return listed, ListTransactionsSupport(duration_on_broker=False, pattern_on_broker=False)


def test_client_side_filters_select_the_same_as_the_brokers(kafka, scenario, prefix_pattern):
    scenario.open.wait_until_open_longer_than(1000)
    config = resolve(bootstrap_servers=kafka.bootstrap_servers, timeout="20s")
    with Cluster(config) as cluster:
        for kwargs in ({"min_duration_ms": 1000, "pattern": prefix_pattern}, {"pattern": prefix_pattern}, {"min_duration_ms": 3_600_000}):
            on_brokers = transaction_listing.list_transactions(cluster, **kwargs)
            on_client = transaction_listing.list_transactions(OldBrokers(cluster), **kwargs)
            assert on_client.rows == on_brokers.rows, kwargs
            assert any("on the client" in n for n in on_client.notes)
            assert not any("on the client" in n for n in on_brokers.notes)
        only_open = transaction_listing.list_transactions(OldBrokers(cluster), min_duration_ms=1000, pattern=prefix_pattern)
        assert [r.transactional_id for r in only_open.rows] == [scenario.open.transactional_id]


def test_debug_says_where_filters_ran(kafka, scenario, prefix_pattern):
    result = run_cli_subprocess(
        "transactions", "list", "-b", kafka.bootstrap_servers, "--min-duration", "10m", "--pattern", prefix_pattern, "--debug"
    )
    assert result.code == 0, result.stderr
    assert "--min-duration filtered by the brokers" in result.stderr
    assert "--pattern filtered by the brokers" in result.stderr


# -- transactions describe ------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", STRUCTURED)
def test_describe_reports_unknown_ids_without_failing_the_others(capsys, kafka, scenario, started_ms, fmt):
    missing_id = unique("no-such-transactional-id")
    s = scenario
    result = kt(capsys, kafka, "transactions", "describe", s.open.transactional_id, missing_id, s.committed.transactional_id, "-o", fmt)
    assert result.code == 1, result.stderr
    assert f"not found: {missing_id}" in result.stderr
    rows = result.records(fmt)
    assert [(r["transactional_id"], r["status"]) for r in rows] == [
        (s.open.transactional_id, "found"), (missing_id, "not_found"), (s.committed.transactional_id, "found"),
    ]
    assert rows[1]["state"] == "" and rows[1]["error"] == "TRANSACTIONAL_ID_NOT_FOUND"
    found = [rows[0], rows[2]]
    expected = expected_details(s, kafka.broker_ids[0])
    for row in found:
        assert {k: row[k] for k in expected[row["transactional_id"]]} == expected[row["transactional_id"]]


def test_describe_of_known_ids_exits_0(capsys, kafka, scenario, started_ms):
    tids = sorted(r.transactional_id for r in scenario.transactions)
    result = kt(capsys, kafka, "transactions", "describe", *tids, "-o", "csv")
    assert result.code == 0, result.stderr
    check_details(result.records("csv"), scenario, kafka.broker_ids[0], started_ms)


# -- at least what kafka-transactions.sh shows ------------------------------------------------------


def kafka_tool(kafka, *args) -> list[dict[str, str]]:
    proc = kafka.run_tool(TRANSACTIONS_COMMAND, "--bootstrap-server", kafka.bootstrap_servers, *args)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if "\t" in line]
    headers = [h.strip() for h in lines[0].split("\t")]
    return [dict(zip(headers, (v.strip() for v in line.split("\t")))) for line in lines[1:]]


def test_carries_what_kafka_transactions_sh_shows(capsys, kafka, scenario, prefix_pattern):
    s = scenario

    listed = {r["TransactionalId"]: r for r in kafka_tool(kafka, "list") if re.fullmatch(prefix_pattern, r["TransactionalId"])}
    ours = {r["transactional_id"]: r for r in kt(capsys, kafka, "transactions", "list", "--pattern", prefix_pattern, "-o", "json").records("json")}
    assert set(listed) == set(ours) == {r.transactional_id for r in s.transactions}
    for tid, theirs in listed.items():
        assert (theirs["Coordinator"], theirs["ProducerId"], theirs["TransactionState"]) == (
            ours[tid]["coordinator_id"], ours[tid]["producer_id"], ours[tid]["state"],
        )

    before = now_ms()
    (theirs,) = kafka_tool(kafka, "describe", "--transactional-id", s.open.transactional_id)
    (mine,) = kt(capsys, kafka, "transactions", "describe", s.open.transactional_id, "-o", "json").records("json")
    after = now_ms()
    assert theirs["CoordinatorId"] == mine["coordinator_id"]
    assert theirs["TransactionalId"] == mine["transactional_id"]
    assert theirs["ProducerId"] == mine["producer_id"]
    assert theirs["ProducerEpoch"] == mine["producer_epoch"]
    assert theirs["TransactionState"] == mine["state"]
    assert theirs["TransactionTimeoutMs"] == mine["timeout_ms"]
    assert theirs["CurrentTransactionStartTimeMs"] == mine["start_time_ms"]
    # Both durations are "now - start", measured a moment apart.
    assert 0 <= int(mine["duration_ms"]) - int(theirs["TransactionDurationMs"]) <= after - before
    assert set(theirs["TopicPartitions"].split(",")) == set(mine["partitions"].split(","))

    for partition in (1, 2):
        theirs_rows = kafka_tool(kafka, "describe-producers", "--topic", s.topic, "--partition", str(partition))
        mine_rows = kt(capsys, kafka, "producers", "-t", s.topic, "-p", str(partition), "-o", "csv").records("csv")
        theirs_view = {
            (
                r["ProducerId"], r["ProducerEpoch"], r["LatestCoordinatorEpoch"], r["LastSequence"], r["LastTimestamp"],
                "-1" if r["CurrentTransactionStartOffset"] == "None" else r["CurrentTransactionStartOffset"],
            )
            for r in theirs_rows
        }
        mine_view = {
            (
                r["producer_id"], r["producer_epoch"], r["coordinator_epoch"], r["last_sequence"], r["last_timestamp_ms"],
                r["current_txn_start_offset"],
            )
            for r in mine_rows
        }
        assert theirs_view == mine_view
        assert len(theirs_view) == 2


# -- several brokers ------------------------------------------------------------------------------


@pytest.mark.cluster3
def test_three_brokers_leaders_named_followers_and_every_coordinator(capsys, kafka_cluster3):
    bootstrap = kafka_cluster3.bootstrap_servers
    s = inspect_scenario(bootstrap, prefix=unique("inspect3"), replication_factor=3)
    try:
        cli = lambda *args: run_cli(capsys, *args, "-b", bootstrap, "--timeout", "20s")  # noqa: E731
        meta = kafka_cluster3.admin_client().list_topics(s.topic, timeout=20).topics[s.topic].partitions
        leaders = {p: m.leader for p, m in meta.items()}
        assert len(set(leaders.values())) > 1  # the requests really go to several leaders

        result = cli("producers", "-t", s.topic, "-o", "json")
        assert result.code == 0, result.stderr
        rows = result.records("json")
        assert {producer_key(r) for r in rows} == expected_producers(s)
        assert {(r["partition"], r["broker_id"]) for r in rows} == {(str(p), str(leaders[p])) for p in range(4)}

        # A follower keeps the same producer state as the leader.
        follower = next(b for b in meta[2].replicas if b != leaders[2])
        result = cli("producers", "-t", s.topic, "-p", "2", "--broker-id", str(follower), "-o", "csv")
        assert result.code == 0, result.stderr
        rows = result.records("csv")
        assert {producer_key(r) for r in rows} == {k for k in expected_producers(s) if k[0] == "2"}
        assert {r["broker_id"] for r in rows} == {str(follower)}

        summary = cli("producers", "--summary", "-t", s.topic, "-o", "jsonl").records("jsonl")
        per_broker = [r for r in summary if r["scope"] == "broker"]
        assert sum(int(r["partitions"]) for r in per_broker) == 4
        assert sum(int(r["producer_states"]) for r in per_broker) == 6

        pattern = re.escape(s.topic.rsplit("-", 1)[0]) + "-.*"
        listed = cli("transactions", "list", "--pattern", pattern, "-o", "json").records("json")
        described = cli("transactions", "list", "--pattern", pattern, "--describe", "-o", "json").records("json")
        assert sorted(r["transactional_id"] for r in listed) == sorted(r.transactional_id for r in s.transactions)
        # Each id is listed by, and described at, its own coordinator.
        assert {(r["transactional_id"], r["coordinator_id"]) for r in listed} == {
            (r["transactional_id"], r["coordinator_id"]) for r in described
        }
        assert {r["coordinator_id"] for r in listed} <= {str(b) for b in kafka_cluster3.broker_ids}
    finally:
        s.close()
