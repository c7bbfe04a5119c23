"""The audit on the id patterns real producers make, from librdkafka and from Kafka's own Java client.

One dedicated broker (Kafka 4.x: the Java client speaks transaction version 2, librdkafka the older
protocol) and real clients. Flagged: two instances taking turns on one id with no transaction open
(a re-initialisation storm, which the fence rule cannot see), Kafka Streams-style ids whose process
UUID changes at every restart, Flink-style ids that are new at every checkpoint. Never flagged: a
5-replica set with one stable id per instance, an instance restarting cleanly three times, one that
aborts its own transaction and restarts.
"""

from __future__ import annotations

import logging
import uuid

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from confluent_kafka import KafkaException, Producer  # noqa: E402

from harness import KafkaCluster  # noqa: E402
from kafkatxn.audit import rules, source  # noqa: E402
from kafkatxn.audit.job import Inputs, audit  # noqa: E402
from kafkatxn.config import ConnectionConfig  # noqa: E402
from tests.support.java_traffic import run_script  # noqa: E402
from tests.support.spark_audit import dedicated_broker, spark  # noqa: E402,F401 - spark: the module's session fixture

pytestmark = pytest.mark.integration

TOPIC = "patterns-out"
TIMEOUT_S = 30
TURNS = 8  # per instance: 16 InitProducerIds


def _quiet() -> logging.Logger:
    log = logging.getLogger(f"tests.patterns.{uuid.uuid4().hex}")
    log.addHandler(logging.NullHandler())
    log.propagate = False
    return log


class LibInstance:
    """One application instance with a librdkafka producer; a fenced producer is replaced, as applications do."""

    def __init__(self, bootstrap: str, tid: str):
        self.bootstrap, self.tid = bootstrap, tid
        self.producer = self._new()

    def _new(self) -> Producer:
        p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": self.tid, "logger": _quiet()})
        p.init_transactions(TIMEOUT_S)
        return p

    def txn(self, commit: bool = True) -> None:
        try:
            self._txn(commit)
        except KafkaException:  # fenced by the other holder of the id
            self.producer = self._new()
            self._txn(commit)

    def _txn(self, commit: bool) -> None:
        self.producer.begin_transaction()
        self.producer.produce(TOPIC, b"x", partition=0)
        self.producer.flush(TIMEOUT_S)
        if commit:
            self.producer.commit_transaction(TIMEOUT_S)
        else:
            self.producer.abort_transaction(TIMEOUT_S)

    def restart(self) -> None:
        self.producer.flush(TIMEOUT_S)
        self.producer = self._new()


def librdkafka_traffic(bootstrap: str) -> None:
    a, b = LibInstance(bootstrap, "turns-lib"), LibInstance(bootstrap, "turns-lib")  # the second init is turn 1 of b
    for _ in range(TURNS):
        a.txn()
        b.txn()
    replicas = [LibInstance(bootstrap, f"replicas-lib-{i}") for i in range(5)]
    for r in replicas:
        r.txn()
        r.txn()
    for r in replicas:  # a rolling restart
        r.restart()
        r.txn()
    clean = LibInstance(bootstrap, "restarts-lib")
    for _ in range(3):
        clean.txn()
        clean.restart()
    clean.txn()
    aborting = LibInstance(bootstrap, "aborts-lib")
    aborting.txn(commit=False)
    aborting.restart()
    aborting.txn()
    for checkpoint in range(1, 7):  # Flink KafkaSink's default naming: a new id per subtask and checkpoint
        for subtask in range(2):
            LibInstance(bootstrap, f"flink-orders-sink-{subtask}-{checkpoint}").txn()


def java_traffic(cluster: KafkaCluster) -> None:
    lines = ["init a turns-java", "init b turns-java"]
    for _ in range(TURNS - 1):
        lines += ["txn b", "txn a"]  # each finds itself fenced by the other's init and starts again
    lines += ["txn b"]
    for i in range(5):
        lines += [f"init r{i} replicas-java-{i}", f"txn r{i}", f"txn r{i}"]
    for i in range(5):
        lines += [f"close r{i}", f"init r{i} replicas-java-{i}", f"txn r{i}"]
    lines += ["init c restarts-java", "txn c"]
    for _ in range(3):
        lines += ["close c", "init c restarts-java", "txn c"]
    lines += ["init x aborts-java", "abort x", "close x", "init x aborts-java", "txn x", "close x"]
    for restart in range(4):  # Kafka Streams EOS v2 losing its state directory: a new process UUID each start
        process = uuid.uuid4()
        for thread in (1, 2):
            lines += [f"init s{thread} streams-orders-{process}-{thread}", f"txn s{thread}", f"txn s{thread}"]
        lines += ["close s1", "close s2"]
    run_script(cluster, TOPIC, lines)


@pytest.fixture(scope="module")
def broker(kafka_workroot):
    with dedicated_broker(kafka_workroot, "patterns") as cluster:
        cluster.create_topic(TOPIC, partitions=1)
        librdkafka_traffic(cluster.bootstrap_servers)
        java_traffic(cluster)
        yield cluster


@pytest.fixture(scope="module")
def result(spark, broker):
    return audit(spark, Inputs(config=ConnectionConfig(broker.bootstrap_servers)))


def test_instances_taking_turns_are_storms_from_both_clients(result, broker):
    storms = {f.transactional_id: f for f in result.init_storms}
    assert sorted(storms) == ["turns-java", "turns-lib"]
    # librdkafka: both start, then each of its 2 x TURNS transactions finds it fenced and re-initialises;
    # the Java script lets b go first, so its first transaction is not fenced.
    expected = {"turns-lib": 2 + 2 * TURNS, "turns-java": 2 + 2 * TURNS - 2}
    for tid, f in storms.items():
        assert f.likely_cause == "instances_taking_turns", f
        assert f.max_inits_in_window == f.inits == expected[tid] and f.inits_fencing_open_transaction == 0
        assert len(f.epochs) == f.inits and len(f.intervals_ms) == f.inits - 1
        assert f.severity == "critical"
    # The Java client speaks transaction version 2 (KIP-890) to a Kafka 4 broker, the older protocol
    # to a 3.x broker (KAFKA_VERSION=3.9.1); librdkafka the older protocol everywhere.
    kip890 = int(broker.version.split(".")[0]) >= 4
    assert (storms["turns-java"].client_transaction_version == 2) == kip890
    assert storms["turns-lib"].client_transaction_version < 2
    assert result.shared_ids == []  # nothing was open to fence: only the storm rule sees it
    assert result.exit_code == 2


def test_framework_families_churning_are_flagged_as_such(result):
    by_family = {f.family: f for f in result.unstable_ids}
    assert sorted(by_family) == ["flink-orders-sink-{n}-{n}", "streams-orders-{uuid}-{n}"]
    streams, flink = by_family["streams-orders-{uuid}-{n}"], by_family["flink-orders-sink-{n}-{n}"]
    assert streams.framework == rules.FRAMEWORK_STREAMS and streams.family_size == 8 and "state.dir" in streams.advice
    assert flink.framework == rules.FRAMEWORK_FLINK and flink.family_size == 12 and "POOLING" in flink.advice
    for f in (streams, flink):
        assert f.pinned_ids == f.family_size and f.estimated_state_bytes >= rules.state_bytes(f.family_size, 0)
        assert f.pinned_until_ms == f.last_seen_ms + f.id_expiration_ms
    summaries = {f.family: f for f in result.families}
    assert summaries["streams-orders-{uuid}-{n}"].verdict == "churning"
    for stable in ("replicas-lib-{n}", "replicas-java-{n}"):
        assert summaries[stable].verdict == "stable" and summaries[stable].ids == 5


def test_stable_ids_clean_restarts_and_own_aborts_are_never_flagged(result):
    flagged = {f.transactional_id for f in result.init_storms} | {f.transactional_id for f in result.shared_ids}
    families = {f.family for f in result.unstable_ids}
    for client in ("lib", "java"):
        assert not {f"restarts-{client}", f"aborts-{client}"} & flagged
        assert not {f"replicas-{client}-{i}" for i in range(5)} & flagged
        assert f"replicas-{client}-{{n}}" not in families


def test_spark_equals_the_single_process_scan_on_this_traffic(spark, broker, result):
    opts = source.reader_options(ConnectionConfig(broker.bootstrap_servers))
    rows = spark.read.format(source.FORMAT).options(**opts).load().filter("row_kind = 'record'").collect()
    local = rules.audit_local(rules.HistoryRecord(*[r[c] for c in source.RECORD_COLUMNS]) for r in rows)
    assert local.comparable() == result.comparable()
