"""The Spark audit against real transaction-log traffic on a real broker.

One dedicated broker (3 transaction-log partitions, nothing else writing to it) and one SparkSession
(local[2]) for the module. The traffic: two producers sharing one id and fencing each other, a job
that makes a new UUID id per batch, and a well-behaved Spark job (kafkatxn.spark writer, stable ids,
restarts, one of them after a crash mid-transaction). The audit must report exactly the first two.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
import uuid

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from confluent_kafka import Producer  # noqa: E402

from kafkatxn.audit import rules, source  # noqa: E402
from kafkatxn.audit.job import Inputs, audit  # noqa: E402
from kafkatxn.kafka.txnlog_encode import encode_key, encode_value_v1  # noqa: E402
from kafkatxn.config import ConnectionConfig  # noqa: E402
from kafkatxn.spark import foreach_batch_writer, transactional_id  # noqa: E402
from tests.support.spark_audit import StandaloneCluster, dedicated_broker, spark  # noqa: E402,F401 - spark: a fixture

pytestmark = pytest.mark.integration

TOPIC = "audit-out"
SHARED_ID = "orders-writer-shared"
UUID_PREFIX = "ingest-batch"
GOOD_PREFIX, GOOD_APP = "etl", "enricher"
GOOD_PARTITIONS = 3
CLIENT_TIMEOUT_S = 30


def _quiet_logger() -> logging.Logger:
    # Fenced producers log FATAL errors; they are expected here and stay out of the test output.
    log = logging.getLogger(f"tests.audit.librdkafka.{uuid.uuid4().hex}")
    log.addHandler(logging.NullHandler())
    log.propagate = False
    return log


def _producer(bootstrap: str, tid: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "logger": _quiet_logger(), "transaction.timeout.ms": 60_000})


def _open_transaction(producer: Producer) -> None:
    producer.init_transactions(CLIENT_TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(TOPIC, b"x", partition=0)
    producer.flush(CLIENT_TIMEOUT_S)


def make_shared_id_traffic(bootstrap: str, fences: int = 4) -> None:
    """Two instances of one application configured with the same id: each start fences the other's open transaction."""
    holder = _producer(bootstrap, SHARED_ID)
    _open_transaction(holder)
    for _ in range(fences):
        other = _producer(bootstrap, SHARED_ID)
        _open_transaction(other)  # InitProducerId fences and aborts the holder's open transaction
        holder = other
    holder.commit_transaction(CLIENT_TIMEOUT_S)


def make_uuid_per_batch_traffic(bootstrap: str, batches: int = 6) -> list[str]:
    ids = []
    for _ in range(batches):
        tid = f"{UUID_PREFIX}-{uuid.uuid4()}"
        p = _producer(bootstrap, tid)
        _open_transaction(p)
        p.commit_transaction(CLIENT_TIMEOUT_S)
        ids.append(tid)
        time.sleep(0.05)  # batches follow each other
    return ids


def make_well_behaved_traffic(spark, bootstrap: str) -> list[str]:
    """The documented writer, three micro-batches, a restart after a crash mid-transaction, two more batches."""
    writer = foreach_batch_writer(
        {"bootstrap.servers": bootstrap}, TOPIC, prefix=GOOD_PREFIX, application=GOOD_APP, partitions=GOOD_PARTITIONS
    )
    df = spark.range(60).selectExpr("CAST(id AS STRING) AS key", "CAST(id * 2 AS STRING) AS value")
    for batch_id in range(3):
        writer(df, batch_id)
    zombie = _producer(bootstrap, transactional_id(GOOD_PREFIX, GOOD_APP, 0))
    _open_transaction(zombie)  # the task dies here; its restart fences it
    for batch_id in range(3, 5):
        writer(df, batch_id)
    del zombie
    return [transactional_id(GOOD_PREFIX, GOOD_APP, p) for p in range(GOOD_PARTITIONS)]


@pytest.fixture(scope="module")
def broker(kafka_workroot):
    with dedicated_broker(kafka_workroot, "audit") as cluster:
        yield cluster


@pytest.fixture(scope="module")
def traffic(broker, spark):
    bootstrap = broker.bootstrap_servers
    broker.create_topic(TOPIC, partitions=3)
    make_shared_id_traffic(bootstrap)
    uuid_ids = make_uuid_per_batch_traffic(bootstrap)
    good_ids = make_well_behaved_traffic(spark, bootstrap)
    return {"bootstrap": bootstrap, "uuid_ids": uuid_ids, "good_ids": good_ids}


@pytest.fixture(scope="module")
def live_result(spark, traffic):
    return audit(spark, Inputs(config=ConnectionConfig(traffic["bootstrap"])))


def test_local_audit_reports_the_shared_id_and_the_uuid_family_and_not_the_stable_job(live_result, traffic):
    result = live_result
    assert [f.transactional_id for f in result.shared_ids] == [SHARED_ID]
    shared = result.shared_ids[0]
    assert shared.fences == 4 and shared.max_fences_in_window == 4
    assert shared.inits == 5
    assert shared.producer_ids and shared.max_epoch > shared.min_epoch
    assert 0 < shared.first_seen_ms <= shared.first_fence_ms <= shared.last_fence_ms <= shared.last_seen_ms

    assert [f.family for f in result.unstable_ids] == [f"{UUID_PREFIX}-{{uuid}}"]
    fam = result.unstable_ids[0]
    assert fam.family_size == len(traffic["uuid_ids"]) == fam.one_shot_ids
    assert fam.pinned_ids == fam.family_size and fam.pinned_until_ms > fam.last_seen_ms
    assert fam.creation_rate_per_hour and fam.creation_rate_per_hour > 0
    assert set(fam.examples) <= set(traffic["uuid_ids"])

    # Every id the traffic made was read; the stable ones (one fenced its crashed predecessor) are clean.
    assert result.transactional_ids == 1 + len(traffic["uuid_ids"]) + GOOD_PARTITIONS
    assert result.unknown_records == result.corrupt_records == 0
    assert result.inventory == [] and result.exit_code == 2


def test_spark_stages_equal_the_single_process_scan(spark, traffic, live_result):
    opts = source.reader_options(ConnectionConfig(traffic["bootstrap"]))
    rows = spark.read.format(source.FORMAT).options(**opts).load().filter("row_kind = 'record'").collect()
    assert len({r.log_partition for r in rows}) > 1  # the ids spread over the log's partitions
    local = rules.audit_local(rules.HistoryRecord(*[r[c] for c in source.RECORD_COLUMNS]) for r in rows)
    assert local.comparable() == live_result.comparable()


def test_stable_ids_restarts_show_in_their_stats(spark, traffic):
    opts = source.reader_options(ConnectionConfig(traffic["bootstrap"]))
    rows = spark.read.format(source.FORMAT).options(**opts).load().filter("row_kind = 'record'").collect()
    by_id: dict[str, list] = {}
    for r in rows:
        by_id.setdefault(r.transactional_id, []).append(rules.HistoryRecord(*[r[c] for c in source.RECORD_COLUMNS]))
    stats = {tid: rules.summarize_id(sorted(g, key=lambda x: x.log_offset)) for tid, g in by_id.items()}
    for i, tid in enumerate(traffic["good_ids"]):
        # one InitProducerId per batch, the same id every time; partition 0 also had the zombie's
        assert stats[tid].inits == (6 if i == 0 else 5)
    assert stats[traffic["good_ids"][0]].fences == 1  # the crashed task's zombie, fenced once


def test_capture_then_audit_the_history_gives_the_same_result(spark, traffic, live_result, tmp_path):
    from kafkatxn.audit.capture import capture

    config = ConnectionConfig(traffic["bootstrap"])
    first = capture(spark, config, tmp_path / "history", duration_ms=0)
    assert first.records_captured == live_result.records
    again = capture(spark, config, tmp_path / "history", duration_ms=0)  # continues from its checkpoint
    assert again.records_captured == 0
    history = audit(spark, Inputs(history=[str(tmp_path / "history")]))
    assert history.comparable() == live_result.comparable()
    both = audit(spark, Inputs(config=config, history=[str(tmp_path / "history")]))  # overlapping: counted once
    assert both.comparable() == live_result.comparable()


def test_unknown_and_corrupt_records_are_rows_of_their_own(spark, broker, unique_name):
    topic = unique_name
    broker.create_topic(topic, partitions=1)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    good = encode_value_v1(producer_id=1, producer_epoch=0, timeout_ms=1000, state="Empty", partitions=None,
                           last_update_timestamp_ms=5, start_timestamp_ms=-1)
    p.produce(topic, key=encode_key("fine"), value=good)
    p.produce(topic, key=encode_key("gone"), value=None)  # tombstone
    p.produce(topic, key=b"\x00\x07rest", value=good)  # unknown key version
    p.produce(topic, key=encode_key("bad"), value=good[:9])  # truncated value
    p.flush(CLIENT_TIMEOUT_S)
    opts = source.reader_options(ConnectionConfig(broker.bootstrap_servers), topic=topic)
    rows = spark.read.format(source.FORMAT).options(**opts).load().orderBy("log_offset").collect()
    assert [(r.row_kind, r.transactional_id, r.tombstone) for r in rows] == [
        ("record", "fine", False), ("record", "gone", True), ("unknown_version", None, None), ("corrupt", None, None),
    ]
    assert "truncated or corrupt" in rows[3].error
    assert all(r.record_timestamp_ms > 0 for r in rows)


# --------------------------------------------------------------------------------------------
# The same audit through spark-submit on a standalone cluster (master and worker on loopback)
# --------------------------------------------------------------------------------------------


def test_spark_submit_to_a_standalone_cluster_gives_the_same_report(traffic, live_result, tmp_path):
    cluster = StandaloneCluster(tmp_path / "spark", workers=1).start()
    try:
        report_dir = tmp_path / "report"
        done = cluster.submit("--bootstrap-server", traffic["bootstrap"], "-o", "json", "--report", str(report_dir))
    finally:
        cluster.stop()
    problems = [ln for ln in done.stderr.splitlines() if "kafkatxn:" in ln or "Error" in ln or "Traceback" in ln]
    assert done.returncode == 2, "\n".join(problems[-20:]) or done.stderr[-3000:]  # shared id: critical
    assert done.stdout.startswith("{"), done.stdout[:500]
    printed = json.loads(done.stdout)
    assert [f["transactional_id"] for f in printed["shared_ids"]] == [SHARED_ID]
    assert [f["family"] for f in printed["unstable_ids"]] == [f"{UUID_PREFIX}-{{uuid}}"]
    written = json.loads((report_dir / "report.json").read_text())
    written.pop("sources")
    assert written == live_result.comparable()
    assert (report_dir / "ids").is_dir() and (report_dir / "shared_ids").is_dir()
    shutil.rmtree(tmp_path / "spark", ignore_errors=True)
