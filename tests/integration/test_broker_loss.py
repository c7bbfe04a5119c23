"""Broker loss on three brokers: answers for what is reachable, the missing part named, within the deadline.

One dedicated 3-broker cluster for the module (these tests kill brokers; the session's
kafka_cluster3 is shared with other modules). Topic ``rf3`` (3 partitions, RF 3) keeps its data when
a broker dies, its leaders move; topic ``rf1`` (3 partitions, RF 1) loses the partition the victim
led. One open transaction per topic keeps every partition's LSO behind its high watermark, so
``lso`` has a row for each partition; their transactional ids are chosen so that their coordinator
is not the victim. Transaction partition verification is off so harness/hanging_maker.py can make
hanging transactions for the abort cases.

A kill "during" a command comes from a hook on the facade's fan-out (``Cluster._send_all``): the
command read metadata while the victim was alive, then its requests meet a dead broker. Each test
brings the victim back and checks that the same command is complete again.
"""

from __future__ import annotations

import collections
import contextlib
import json
import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness import hanging_maker as hm
from harness import scenarios
from harness import KafkaCluster
from kafkatxn import auditlog, remedy
from kafkatxn.config import ConnectionConfig
from kafkatxn.kafka import Cluster
from kafkatxn.model import TopicPartition
from tests.support.cli_helpers import run_cli
from tests.support.exporter_process import ExporterProcess

pytestmark = [pytest.mark.integration, pytest.mark.cluster3]

TIMEOUT_S = 8  # --timeout of every command here
SLACK_S = 3  # process start-up, the kill itself, rendering: the deadline plus this is the bound
BROKER_SETTINGS = {"transaction.partition.verification.enable": "false"}

FIGURES: collections.Counter[str] = collections.Counter()


@dataclass
class Setup:
    cluster: KafkaCluster
    rf3: str
    rf1: str
    victim: int
    transactions: list[scenarios.TransactionRun] = field(default_factory=list)

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap_servers

    @property
    def partitions(self) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t in (self.rf1, self.rf3) for p in range(3)]


@pytest.fixture(scope="module")
def bl_cluster(kafka_workroot: Path, request: pytest.FixtureRequest):
    cluster = KafkaCluster(
        kafka_workroot / f"broker-loss-{uuid.uuid4().hex[:8]}", n_brokers=3, broker_config=BROKER_SETTINGS, name="brokerloss"
    )
    try:
        cluster.start(timeout=120)
    except Exception:
        cluster.save_logs(Path(__file__).resolve().parents[2] / "test-logs" / "startup-brokerloss")
        raise
    yield cluster
    cluster.stop()
    report_figure(request, f"broker loss: {sum(FIGURES.values())} fault cases survived "
                           f"({', '.join(f'{k} {v}' for k, v in sorted(FIGURES.items()))})")


def report_figure(request: pytest.FixtureRequest, line: str) -> None:
    """A line on the terminal even while output is captured (fixture teardown runs under capture)."""
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is None:
        return
    with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
        reporter.write_line(line)


@pytest.fixture(scope="module")
def bl(bl_cluster: KafkaCluster) -> Setup:
    suffix = uuid.uuid4().hex[:6]
    rf3 = bl_cluster.create_topic(f"bl-rf3-{suffix}", partitions=3, replication_factor=3)
    rf1 = bl_cluster.create_topic(f"bl-rf1-{suffix}", partitions=3, replication_factor=1)
    victim = leaders(bl_cluster)[TopicPartition(rf1, 0)]
    setup = Setup(bl_cluster, rf3, rf1, victim)
    # Coordinators elsewhere than the victim, so "what is reachable" includes the transactions' ids.
    candidates = [f"bl-open-{suffix}-{i}" for i in range(40)]
    deadline = time.monotonic() + 60
    while True:  # the transaction log is created on first use: COORDINATOR_NOT_AVAILABLE until then
        with Cluster(ConnectionConfig(setup.bootstrap, timeout_ms=20_000)) as cluster:
            coordinators = cluster.find_transaction_coordinators(candidates).value
        tids = [t for t in candidates if coordinators.get(t, setup.victim) != setup.victim][:2]
        if len(tids) == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert len(tids) == 2, coordinators
    for topic, tid in zip((rf1, rf3), tids):
        setup.transactions.append(scenarios.run_transaction(setup.bootstrap, topic, [0, 1, 2], "open", tid))
    yield setup
    for run in setup.transactions:
        try:
            run.abort()
        except Exception:  # noqa: BLE001 - the cluster is going away anyway
            pass


@pytest.fixture
def brokers(bl: Setup, bl_cluster: KafkaCluster):
    """The setup; afterwards every broker runs again and the cluster answers completely."""
    yield bl
    for node_id in bl_cluster.broker_ids:
        if node_id not in bl_cluster.running_broker_ids():
            bl_cluster.start_broker(node_id)
    wait_until_complete(bl)


# -- helpers ------------------------------------------------------------------------------------


def metadata(cluster: KafkaCluster, timeout: float = 10):
    """From a new client: a long-lived one keeps sending to a broker it was connected to, hung or not."""
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0}).list_topics(timeout=timeout)


def leaders(cluster: KafkaCluster) -> dict[TopicPartition, int]:
    md = metadata(cluster)
    return {TopicPartition(name, p.id): p.leader for name, t in md.topics.items() for p in t.partitions.values()}


def wait_until_fenced(setup: Setup, timeout: float = 30) -> None:
    """Until every other running broker's metadata no longer lists the victim (the controller fenced it) and
    gives its RF 1 partition no leader. Each broker learns it from the controller on its own: a client
    asking another broker than the one this asked still saw the victim (CI: broker_up 1 after "fenced")."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        others = [node_id for node_id in setup.cluster.running_broker_ids() if node_id != setup.victim]  # a hung one runs
        if all(_fenced_in(setup.cluster.metadata_of(node_id, 5), setup) for node_id in others):
            return
        time.sleep(0.3)
    raise AssertionError(f"broker {setup.victim} was not fenced within {timeout}s")


def _fenced_in(md, setup: Setup) -> bool:
    """Whether ``md`` (one broker's metadata; None when it did not answer) has the victim fenced."""
    if md is None:
        return False
    topic = md.topics.get(setup.rf1)
    return setup.victim not in md.brokers and topic is not None and topic.partitions[0].leader == -1


# A resumed or restarted broker can be fenced again if, busy catching up on a loaded machine, it
# misses heartbeats for the harness's broker.session.timeout.ms (3 s): complete once is not yet
# healthy. CI saw exactly that: complete at teardown, "no leader" for the victim's partition in the
# next test. Complete for longer than one session timeout is.
STABLE_S = 4.0


def wait_until_complete(setup: Setup, timeout: float = 90) -> None:
    """Until producer state, offsets and transactions arrive from every partition and broker, and
    keep arriving for STABLE_S."""
    deadline = time.monotonic() + timeout
    last = None
    complete_since = None
    while time.monotonic() < deadline:
        try:
            with Cluster(ConnectionConfig(setup.bootstrap, timeout_ms=5_000)) as cluster:
                described = cluster.describe_producers(setup.partitions)
                offsets = cluster.stable_and_high_offsets(setup.partitions)
                listed, _ = cluster.list_transactions()
            last = described.missing + offsets.missing + listed.missing
        except Exception as exc:  # noqa: BLE001 - still recovering
            last = exc
        if last:
            complete_since = None
        else:
            complete_since = complete_since or time.monotonic()
            if time.monotonic() - complete_since >= STABLE_S:
                return
        time.sleep(0.5)
    raise AssertionError(f"cluster not complete and steady within {timeout}s: {last}")


def cli(capsys, setup: Setup, *args: str):
    started = time.monotonic()
    result = run_cli(capsys, *args, "-b", setup.bootstrap, "--timeout", f"{TIMEOUT_S}s", "-o", "json")
    elapsed = time.monotonic() - started
    assert elapsed < TIMEOUT_S + SLACK_S, f"{args} took {elapsed:.1f}s with --timeout {TIMEOUT_S}s"
    doc = json.loads(result.stdout) if result.stdout.strip() else None
    return result, doc


def incomplete_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.startswith("kafkatxn: incomplete ")]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def assert_names_missing(text: str, setup: Setup, lost: set[TopicPartition]) -> None:
    """Each lost partition is named, by itself or by the broker that did not answer for it."""
    for tp in lost:
        assert str(tp) in text or f"broker {setup.victim}" in text, (tp, text)


def row_partitions(rows) -> set[TopicPartition]:
    return {TopicPartition(r["topic"], r["partition"]) for r in rows}


def mine(setup: Setup, tps) -> set[TopicPartition]:
    return {tp for tp in tps if tp.topic in (setup.rf1, setup.rf3)}


@pytest.fixture
def kill_at_first_request(monkeypatch):
    """Arm a kill of ``node_id`` right before the facade's next fan-out request: metadata is read,
    the broker is still listed as leader, and then it is gone."""

    def arm(cluster: KafkaCluster, node_id: int) -> dict:
        original = Cluster._send_all
        state = {"killed_at": None}

        def send_all(self, requests):
            if state["killed_at"] is None:
                cluster.kill_broker(node_id)
                state["killed_at"] = [type(r).__name__ for _, r in requests]
            return original(self, requests)

        monkeypatch.setattr(Cluster, "_send_all", send_all)
        return state

    return arm


# What each command gives on the whole cluster, and its exit code then.
COMMANDS = {
    "producers": (["producers"], 0),
    "lso": (["lso"], 1),  # every partition lags behind its open transaction: a warning
    "hanging": (["hanging"], 0),  # open transactions younger than transaction.max.timeout.ms: none hanging
}


def check_partial(command: str, result, doc, setup: Setup, reachable: set[TopicPartition], lost: set[TopicPartition]) -> None:
    """Exit 3; rows for at least every partition whose leader is alive and none for the lost ones;
    every partition of ours without a row named on stderr (itself, or the broker that did not answer).

    Partitions whose leader is moving may answer or not; either way they are accounted for.
    """
    assert result.code == 3, (command, result.stderr)
    line = incomplete_line(result)
    if command == "hanging":
        # No rows (nothing hangs): the facts count the open transactions that answered, one per partition.
        answered = doc["open_transactions"]
        assert len(reachable) <= answered <= len(setup.partitions) - len(lost), (doc, line)
        assert doc["hanging"] == [], doc
        assert_names_missing(line, setup, lost)
        return
    rows = mine(setup, row_partitions(doc))
    assert reachable <= rows, (command, rows, line)
    assert not rows & lost, (command, rows, line)
    assert_names_missing(line, setup, set(setup.partitions) - rows)


def check_complete(command: str, result, doc, setup: Setup) -> None:
    args, code = COMMANDS[command]
    assert result.code == code, (command, result.stderr)
    assert "incomplete" not in result.stderr, result.stderr
    if command in ("producers", "lso"):
        assert mine(setup, row_partitions(doc)) == set(setup.partitions)
    elif command == "hanging":
        assert doc["open_transactions"] >= len(setup.partitions) and doc["hanging"] == []


# -- tests --------------------------------------------------------------------------------------


def test_a_healthy_three_broker_cluster_answers_completely(capsys, brokers):
    setup = brokers
    for command, (args, _code) in COMMANDS.items():
        result, doc = cli(capsys, setup, *args, *topic_args(setup, command))
        check_complete(command, result, doc, setup)
    result, doc = cli(capsys, setup, "cluster")
    assert result.code == 0, result.stderr
    assert {s["broker_id"] for s in doc["settings"] if s["name"] == "transaction.max.timeout.ms"} == {1, 2, 3}
    result, doc = cli(capsys, setup, "check", *check_args(setup))
    assert result.code == 0, result.stdout + result.stderr
    assert doc["missing_parts"] == 0 and doc["max_transaction_timeout_ms"] is not None


def topic_args(setup: Setup, command: str) -> list[str]:
    return [] if command == "lso" else ["--topic", setup.rf1, "--topic", setup.rf3]


def check_args(setup: Setup) -> list[str]:
    # Only our topics; ages off, since the module's open transactions grow older as it runs.
    return ["--topic-regex", f"^({setup.rf1}|{setup.rf3})$", "--txn-age-warn", "none", "--txn-age-crit", "none"]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_broker_killed_during_a_command(capsys, brokers, kill_at_first_request, command):
    setup = brokers
    before = leaders(setup.cluster)
    reachable = {tp for tp in setup.partitions if before[tp] != setup.victim}
    lost = {tp for tp in setup.partitions if before[tp] == setup.victim and tp.topic == setup.rf1}
    assert TopicPartition(setup.rf1, 0) in lost

    killed = kill_at_first_request(setup.cluster, setup.victim)
    args, _code = COMMANDS[command]
    result, doc = cli(capsys, setup, *args, *topic_args(setup, command))
    assert killed["killed_at"], "the command never sent a fan-out request"
    check_partial(command, result, doc, setup, reachable, lost)
    FIGURES[f"{command}: broker killed during the command"] += 1

    # Still down, first while metadata still lists the victim, then once it is fenced (its RF 3
    # partitions have new leaders): every command stays partial and says what is missing.
    for other in COMMANDS:
        result, doc = cli(capsys, setup, *COMMANDS[other][0], *topic_args(setup, other))
        check_partial(other, result, doc, setup, reachable, lost)
        FIGURES[f"{other}: broker down"] += 1
    # Partitions that moved to a new leader may still answer OFFSET_NOT_AVAILABLE for a moment:
    # then they are named, like the lost ones; those that never moved must answer.
    wait_until_fenced(setup)
    for other in COMMANDS:
        result, doc = cli(capsys, setup, *COMMANDS[other][0], *topic_args(setup, other))
        check_partial(other, result, doc, setup, reachable, lost)
        FIGURES[f"{other}: broker fenced"] += 1
    result, doc = cli(capsys, setup, "check", *check_args(setup))
    assert result.code == 3, result.stdout
    assert any(f["kind"] == "incomplete" and f"{setup.rf1}-0" in f["message"] for f in doc["findings"]), doc["findings"]
    FIGURES["check: broker fenced"] += 1

    setup.cluster.start_broker(setup.victim)
    wait_until_complete(setup)
    result, doc = cli(capsys, setup, *args, *topic_args(setup, command))
    check_complete(command, result, doc, setup)


def test_a_hung_broker_costs_only_its_own_partitions(capsys, brokers, bl_cluster):
    """A broker that accepts connections but never answers (SIGSTOP: a long GC pause, a stuck disk).
    Once the controller has fenced it, each command answers for the rest within the deadline, every
    time: kafka-python used to pick its bootstrap server at random and wait the whole deadline on the
    hung one, so one command in three failed outright."""
    setup = brokers
    before = leaders(setup.cluster)
    lost = {tp for tp in setup.partitions if before[tp] == setup.victim and tp.topic == setup.rf1}
    reachable = {tp for tp in setup.partitions if before[tp] != setup.victim}
    process = bl_cluster._node(setup.victim).process  # the harness can kill, not freeze
    process.send_signal(signal.SIGSTOP)
    try:
        wait_until_fenced(setup)
        for _round in range(3):
            for command in COMMANDS:
                result, doc = cli(capsys, setup, *COMMANDS[command][0], *topic_args(setup, command))
                check_partial(command, result, doc, setup, reachable, lost)
                FIGURES[f"{command}: broker hung"] += 1
        # The table of that incomplete answer: never "HANGING (none)" above the scanned count.
        table = run_cli(capsys, "hanging", *topic_args(setup, "hanging"), "-b", setup.bootstrap, "--timeout", f"{TIMEOUT_S}s")
        lines = table.stdout.splitlines()
        assert table.code == 3 and "(none)" not in lines, table.stdout
        assert lines[lines.index("HANGING") + 1].startswith("not determined ("), table.stdout
    finally:
        process.send_signal(signal.SIGCONT)
        # A broker resumed after being fenced can be fenced again while it catches up (CI saw the
        # next test's first command find its partition leaderless after 4 s of steady answers):
        # leave the cluster as the kill tests do, with the victim restarted cleanly.
        bl_cluster.kill_broker(setup.victim)
        bl_cluster.start_broker(setup.victim)


def test_no_command_builds_a_librdkafka_client(capsys, brokers, monkeypatch):
    """Every request of these commands goes through the wire: none builds a confluent-kafka client
    (whose DescribeCluster once waited for a controller that never answered until the deadline, and
    which cannot log in to a Kerberos cluster). A client built here fails the command; the commands
    still answer completely."""
    import confluent_kafka
    import confluent_kafka.admin

    def refuse(*_args, **_kwargs):
        raise AssertionError("a command built a confluent-kafka client")

    for module, name in ((confluent_kafka.admin, "AdminClient"), (confluent_kafka, "Consumer"), (confluent_kafka, "Producer")):
        monkeypatch.setattr(module, name, refuse)
    setup = brokers
    wait_until_complete(setup)  # a test that faults the cluster may have run before this one
    for command, (args, _code) in COMMANDS.items():
        result, doc = cli(capsys, setup, *args, *topic_args(setup, command))
        check_complete(command, result, doc, setup)
        FIGURES[f"{command}: no librdkafka client"] += 1
    # The commands that used librdkafka until the wire served them: groups, configs, the cluster's
    # description and operations, read_committed probes.
    for args in (["lso", "--groups"], ["check", "--groups"], ["cluster"], ["diagnose"]):
        result, _doc = cli(capsys, setup, *args)
        assert result.code in (0, 1, 2) and "confluent-kafka client" not in result.stderr, (args, result.code, result.stderr[-2000:])
        FIGURES[f"{' '.join(args)}: no librdkafka client"] += 1


def series(samples: dict, name: str) -> set[TopicPartition]:
    return {
        TopicPartition(dict(labels)["topic"], int(dict(labels)["partition"]))
        for (n, labels), _v in samples.items()
        if n == name
    }


def test_exporter_scrape_with_a_broker_killed(capsys, brokers, tmp_path):
    setup = brokers
    scrape_timeout = 5
    exporter = ExporterProcess(
        "-b", setup.bootstrap, "--cache-ttl", "0s", "--scrape-timeout", f"{scrape_timeout}s",
        "--topic-regex", f"^({setup.rf1}|{setup.rf3})$",
    )
    try:
        samples, _ = exporter.scrape()
        assert samples[("kafkatxn_scrape_incomplete", ())] == 0
        assert series(samples, "kafkatxn_partition_lso_lag_messages") == set(setup.partitions)

        before = leaders(setup.cluster)
        lost = {tp for tp in setup.partitions if before[tp] == setup.victim and tp.topic == setup.rf1}
        reachable = {tp for tp in setup.partitions if before[tp] != setup.victim}
        setup.cluster.kill_broker(setup.victim)
        for phase in ("killed", "fenced"):
            if phase == "fenced":
                wait_until_fenced(setup)
            samples, took = exporter.scrape()
            assert took < scrape_timeout + SLACK_S, f"scrape took {took:.1f}s"
            assert exporter.proc.poll() is None, "the exporter died with the broker"
            assert samples[("kafkatxn_up", ())] == 1  # two brokers answer: up, but incomplete
            assert samples[("kafkatxn_scrape_incomplete", ())] == 1
            assert samples[("kafkatxn_scrape_missing_parts", ())] >= 1
            lagging = series(samples, "kafkatxn_partition_lso_lag_messages")
            assert reachable <= lagging and not lagging & lost
            # The partitions without figures are named by a series of their own.
            missing = series(samples, "kafkatxn_partition_offsets_missing")
            assert missing == set(setup.partitions) - lagging, (missing, lagging)
            if phase == "fenced":
                assert samples[("kafkatxn_broker_up", (("broker", str(setup.victim)),))] == 0
                # The per-topic form counts them instead (no per-partition series there).
                textfile = tmp_path / "kafkatxn.prom"
                run_cli(capsys, "check", "-b", setup.bootstrap, "--timeout", f"{TIMEOUT_S}s", *check_args(setup),
                        "--textfile", str(textfile), "--per-topic")
                per_topic = {
                    s.labels["topic"]: s.value
                    for family in text_string_to_metric_families(textfile.read_text())
                    for s in family.samples if s.name == "kafkatxn_topic_offsets_missing_partitions"
                }
                assert per_topic == {setup.rf1: len(lost)}
            FIGURES[f"exporter scrape: broker {phase}"] += 1

        setup.cluster.start_broker(setup.victim)
        wait_until_complete(setup)
        samples, _ = exporter.scrape()
        assert samples[("kafkatxn_scrape_incomplete", ())] == 0
        assert series(samples, "kafkatxn_partition_lso_lag_messages") == set(setup.partitions)
        assert series(samples, "kafkatxn_partition_offsets_missing") == set()
        assert all(samples[("kafkatxn_broker_up", (("broker", str(b)),))] == 1 for b in (1, 2, 3))
    finally:
        code = exporter.stop()
    assert code == 0


# -- abort interrupted by leader movement -------------------------------------------------------


def lso_and_hw(setup: Setup, tp: TopicPartition) -> tuple[int, int]:
    """As librdkafka consumers see them: not kafkatxn's own reading."""
    return hm.end_offset(setup.bootstrap, tp, read_committed=True), hm.end_offset(setup.bootstrap, tp, read_committed=False)


def hanging_on_new_topic(setup: Setup, replication_factor: int) -> tuple[hm.HangingTransaction, int]:
    topic = setup.cluster.create_topic(f"bl-abort-rf{replication_factor}-{uuid.uuid4().hex[:6]}", 1, replication_factor)
    tp = TopicPartition(topic, 0)
    hm.write_committed(setup.bootstrap, tp, [b"before"], f"{topic}-before")
    for attempt in range(20):  # coordinators load their log after a restart (COORDINATOR_LOAD_IN_PROGRESS)
        try:
            made = hm.make_hanging_transaction(setup.bootstrap, f"{topic}-tid", topic, 0)
            break
        except hm.HangingMakerError:
            if attempt == 19:
                raise
            time.sleep(0.5)
    hm.write_committed(setup.bootstrap, tp, [b"after"], f"{topic}-after")
    assert lso_and_hw(setup, tp)[0] == made.start_offset  # pinned
    return made, leaders(setup.cluster)[tp]


def abort_with_library(setup: Setup, made: hm.HangingTransaction, audit_path: Path, timeout_ms: int, confirm=None):
    audit = auditlog.AuditLog(audit_path, bootstrap_servers=setup.bootstrap)
    with Cluster(ConnectionConfig(setup.bootstrap, timeout_ms=timeout_ms)) as cluster:
        result = remedy.abort(
            cluster, [remedy.AbortTarget(made.topic, 0, start_offset=made.start_offset)],
            max_transaction_timeout_ms=0,  # made just now: hanging by the whole rule at once
            audit=audit, confirm=confirm or (lambda rows: True),
        )
    (row,) = result.rows
    return row, auditlog.read_records(audit_path)


def test_abort_whose_leader_dies_between_plan_and_act_goes_to_the_new_leader(brokers, tmp_path):
    setup = brokers
    made, leader = hanging_on_new_topic(setup, replication_factor=3)

    def kill_then_confirm(plan_rows) -> bool:
        assert [r.outcome for r in plan_rows] == [remedy.Outcome.WOULD_ABORT]
        setup.cluster.kill_broker(leader)  # after the plan, before the re-check and the marker
        return True

    row, records = abort_with_library(setup, made, tmp_path / "audit.jsonl", 30_000, kill_then_confirm)
    assert row.outcome is remedy.Outcome.ABORTED, row.reason
    assert row.leader_id not in (None, leader), row
    lso, hw = lso_and_hw(setup, made.tp)
    assert lso == hw > made.start_offset and row.lso_after == lso  # released, and it says so
    assert [(r["record"], r.get("outcome")) for r in records] == [("intent", None), ("result", "aborted")]
    assert records[1]["state_after"]["last_stable_offset"] == lso
    FIGURES["abort: leader killed between plan and act"] += 1


def test_abort_whose_leader_dies_after_the_intent_is_retried_on_the_new_leader(brokers, tmp_path, monkeypatch):
    setup = brokers
    made, leader = hanging_on_new_topic(setup, replication_factor=3)
    original = auditlog.AuditLog.intent

    def intent_then_kill(self, *args, **kwargs):
        action_id = original(self, *args, **kwargs)
        setup.cluster.kill_broker(leader)  # the intent is on disk; the marker goes to a dead leader
        return action_id

    monkeypatch.setattr(auditlog.AuditLog, "intent", intent_then_kill)
    row, records = abort_with_library(setup, made, tmp_path / "audit.jsonl", 30_000)
    assert row.outcome is remedy.Outcome.ABORTED, row.reason
    assert row.leader_id not in (None, leader) and f"broker {leader}" in row.reason, row
    lso, hw = lso_and_hw(setup, made.tp)
    assert lso == hw > made.start_offset
    intent, result = records
    assert intent["plan"]["write_txn_markers"]["leader_id"] == leader
    assert (result["outcome"], result["action_id"]) == ("aborted", intent["action_id"])
    assert f"broker {leader}" in result["detail"] and result["state_after"]["leader_id"] == row.leader_id
    FIGURES["abort: leader killed after the intent, retried"] += 1


def test_abort_whose_only_replica_dies_after_the_intent_says_so_and_changes_nothing(capsys, brokers, tmp_path, monkeypatch):
    setup = brokers
    made, leader = hanging_on_new_topic(setup, replication_factor=1)
    audit_path = tmp_path / "audit.jsonl"
    original = auditlog.AuditLog.intent

    def intent_then_kill(self, *args, **kwargs):
        action_id = original(self, *args, **kwargs)
        setup.cluster.kill_broker(leader)
        return action_id

    monkeypatch.setattr(auditlog.AuditLog, "intent", intent_then_kill)
    started = time.monotonic()
    row, records = abort_with_library(setup, made, audit_path, TIMEOUT_S * 1000)
    assert time.monotonic() - started < TIMEOUT_S + SLACK_S
    monkeypatch.undo()
    assert row.outcome in (remedy.Outcome.UNKNOWN, remedy.Outcome.REFUSED, remedy.Outcome.FAILED), row
    assert f"broker {leader}" in row.reason, row.reason
    intent, result = records  # the intent got its result: what happened is on record
    assert (result["record"], result["action_id"], result["outcome"]) == ("result", intent["action_id"], row.outcome.value)
    assert f"broker {leader}" in result["detail"]

    setup.cluster.start_broker(leader)
    wait_until_complete(setup)
    # Nothing was half-applied: the transaction is still open where it was, the LSO still pinned.
    with Cluster(ConnectionConfig(setup.bootstrap, timeout_ms=20_000)) as cluster:
        states = cluster.describe_producers([made.tp]).value[made.tp]
    assert [s.current_txn_start_offset for s in states if s.producer_id == made.producer_id] == [made.start_offset]
    assert lso_and_hw(setup, made.tp)[0] == made.start_offset

    # And it is safe to do again once the broker is back.
    again = run_cli(capsys, "abort", "--max-transaction-timeout", "0s", "-b", setup.bootstrap, "--timeout", "30s", "--audit-log", str(audit_path), "-o", "json",
                    "--topic", made.topic, "--partition", "0", "--start-offset", str(made.start_offset), "--yes")
    assert again.code == 0, again.stderr
    assert [r["outcome"] for r in json.loads(again.stdout)] == ["aborted"]
    lso, hw = lso_and_hw(setup, made.tp)
    assert lso == hw > made.start_offset
    FIGURES["abort: only replica killed after the intent"] += 1
