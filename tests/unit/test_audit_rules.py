"""Audit rules over transaction-log histories, without Spark or a broker.

Histories come from ``Coordinator`` (tests/support/coordinator.py), which writes the records Kafka's
transaction coordinator writes (TransactionMetadata: InitProducerId -> Empty with a bumped epoch;
AddPartitions -> Ongoing; EndTxn -> Prepare*/Complete*, bumping the epoch under transaction version 2;
a coordinator abort fences the epoch first, then aborts through the same path). The rules module knows
nothing of it.
"""

from __future__ import annotations

import json
import uuid

import pytest

from kafkatxn.audit import rules
from kafkatxn.audit.rules import AuditParams, Declaration, HistoryRecord, audit_local, family_of
from kafkatxn.kafka.txnlog import decode_record
from kafkatxn.kafka.txnlog_encode import encode_key, encode_value_v0, encode_value_v1
from kafkatxn.errors import UsageError
from tests.support.coordinator import MIN, S, Coordinator, shared_storm, taking_turns, well_behaved

# --------------------------------------------------------------------------------------------
# Shared ids
# --------------------------------------------------------------------------------------------


VERSIONS = [(0, 0), (0, 2), (2, 2)]  # (client TV, broker TV): classic, librdkafka on Kafka 4, KIP-890 clients


@pytest.mark.parametrize("tv, broker_tv", VERSIONS)
def test_two_instances_fencing_each_other_are_a_shared_id(tv, broker_tv):
    c = Coordinator(tv, broker_tv=broker_tv)
    shared_storm(c, "orders-writer", 1_000_000, fences=4)
    result = audit_local(c.records)
    assert [f.transactional_id for f in result.shared_ids] == ["orders-writer"]
    f = result.shared_ids[0]
    assert f.fences == 4
    assert f.max_fences_in_window == 4
    assert f.inits == 5
    assert f.severity == "critical"
    assert f.producer_ids == [1000]
    assert f.first_fence_ms == 1_000_000 + 2 * S and f.last_fence_ms == 1_000_000 + 8 * S
    assert f.client_transaction_version == max(tv, broker_tv)
    assert f.max_epoch > f.min_epoch
    assert result.exit_code == 2


@pytest.mark.parametrize("tv, broker_tv", VERSIONS)
def test_commits_and_restarts_are_not_fencing_even_when_every_commit_bumps_the_epoch(tv, broker_tv):
    c = Coordinator(tv, broker_tv=broker_tv)
    well_behaved(c, "app-0", 0, runs=4, txns=50, crash_mid_txn=True)
    [stats] = [rules.summarize_id(g) for g in rules.group_histories(c.records)]
    assert stats.fences == 1  # the one restart that fenced its crashed predecessor
    assert stats.inits == 4
    assert stats.commits == 200
    if tv == 2:
        assert stats.max_epoch - stats.min_epoch > 200  # epochs moved on every commit
    result = audit_local(c.records)
    assert result.shared_ids == [] and result.exit_code == 0


def test_a_tv2_client_abort_is_not_a_fence_but_an_abort_by_init_is():
    c = Coordinator(tv=2)
    c.init("x", 0)
    for i in range(5):
        c.add("x", i * S + 1)
        c.abort("x", i * S + 500)  # the client's own aborts: epoch +1 each, as TV2 does
    stats = rules.summarize_id(c.records)
    assert (stats.aborts, stats.fences) == (5, 0)
    c.add("x", 10 * S)
    c.init("x", 10 * S + 200)  # another producer takes over while open
    stats = rules.summarize_id(c.records)
    assert stats.fences == 1 and stats.first_fence_ms == 10 * S + 200


def test_a_tv0_client_on_a_tv2_broker_keeps_its_epoch_on_its_own_aborts():
    c = Coordinator(tv=0, broker_tv=2)
    c.init("y", 0)
    for i in range(4):
        c.add("y", i * S + 1)
        c.abort("y", i * S + 500)
    c.add("y", 10 * S)
    c.init("y", 10 * S + 200)
    stats = rules.summarize_id(c.records)
    assert (stats.aborts, stats.fences) == (5, 1)


@pytest.mark.parametrize("tv, broker_tv", VERSIONS)
def test_timeouts_are_not_fences(tv, broker_tv):
    c = Coordinator(tv, broker_tv=broker_tv)
    c.init("slow", 0, timeout_ms=10 * S)
    for i in range(5):
        t = i * 20 * S
        c.add("slow", t + 1)
        c.time_out("slow", t + 12 * S)  # aborted by the coordinator past the timeout
    stats = rules.summarize_id(c.records)
    assert (stats.timeouts, stats.fences) == (5, 0)
    assert audit_local(c.records).shared_ids == []


def test_fences_spread_wider_than_the_window_are_restarts():
    c = Coordinator()
    tid = "app-0"
    for i in range(5):  # a crash mid-transaction every hour: one fence per restart
        t = i * 60 * MIN
        c.init(tid, t, timeout_ms=3 * 60 * MIN)  # long transactions: the restart comes before the timeout
        c.add(tid, t + S)
    assert rules.summarize_id(c.records).fences == 4
    assert audit_local(c.records).shared_ids == []
    wide = AuditParams(fence_window_ms=5 * 60 * MIN)
    assert [f.transactional_id for f in audit_local(c.records, wide).shared_ids] == [tid]


def test_prepare_epoch_fence_records_count_once_with_their_abort():
    base = dict(producer_id=7, partitions=("t-0",), timeout_ms=MIN, start_timestamp_ms=0, client_transaction_version=0,
                previous_producer_id=-1, next_producer_id=-1, next_producer_epoch=-1, value_version=1, tombstone=False, log_partition=0)
    recs = []
    for i, (state, epoch) in enumerate([("Empty", 0), ("Ongoing", 0), ("PrepareEpochFence", 1), ("PrepareAbort", 1), ("CompleteAbort", 1)] * 3):
        recs.append(HistoryRecord("pef", producer_epoch=epoch, state=state, last_update_timestamp_ms=i * 100, log_offset=i, **base))
    stats = rules.summarize_id(recs)
    assert stats.fences == 3


def test_the_audit_reads_decoded_records_from_the_decoder():
    raw = []
    off = 0
    for epoch in range(4):
        for state in ("Empty", "Ongoing", "PrepareAbort", "CompleteAbort"):
            e = epoch * 2 + (1 if state in ("PrepareAbort", "CompleteAbort") else 0)
            enc = encode_value_v1 if epoch % 2 else encode_value_v0
            value = enc(producer_id=5, producer_epoch=e, timeout_ms=MIN, state=state,
                        partitions=None if state == "Empty" else ["t-0"],
                        last_update_timestamp_ms=10_000 + off, start_timestamp_ms=-1 if state == "Empty" else 10_000)
            raw.append(decode_record(encode_key("decoded"), value, 0, off))
            off += 1
    result = audit_local(raw)
    assert [f.transactional_id for f in result.shared_ids] == ["decoded"]
    assert result.shared_ids[0].fences == 4


# --------------------------------------------------------------------------------------------
# Families and unstable ids
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tid, family",
    [
        ("job-3f2c1a9e-6b7d-4c1e-9f00-0123456789ab", "job-{uuid}"),
        ("etl-orders-7", "etl-orders-{n}"),
        ("batch-2024-05-01T10:20:30Z-x", "batch-{ts}-x"),
        ("spark-app-20240501-0001-part-3", "spark-app-{n}-{n}-part-{n}"),
        ("writer-9f86d081884c7d65", "writer-{hex}"),
        ("facade-service", "facade-service"),  # hex letters without digits stay a word
    ],
)
def test_family_masks_volatile_parts(tid, family):
    assert family_of(tid) == family


def test_a_new_uuid_per_batch_is_an_unstable_family_with_its_pinned_state():
    c = Coordinator()
    for i in range(6):
        tid = f"ingest-{uuid.UUID(int=i + 1)}"
        c.init(tid, i * MIN)
        c.txn(tid, i * MIN + S)
    result = audit_local(c.records)
    [f] = result.unstable_ids
    assert f.family == "ingest-{uuid}"
    assert (f.family_size, f.one_shot_ids, f.peak_concurrent_ids) == (6, 6, 1)
    assert f.creation_rate_per_hour == pytest.approx(60.0)
    assert f.pinned_ids == 6 and f.pinned_partitions == 6
    assert f.pinned_until_ms == 5 * MIN + S + 100 + 5 + rules.DEFAULT_ID_EXPIRATION_MS
    assert f.steady_state_pinned_ids == 60 * 24 * 7
    assert len(f.examples) == 3
    assert result.exit_code == 1


def test_expired_members_no_longer_pin_state():
    c = Coordinator()
    for i in range(6):
        tid = f"ingest-{i}"
        c.init(tid, i * MIN)
        c.txn(tid, i * MIN + S)
    for i in range(4):
        c.expire(f"ingest-{i}", 10 * MIN)
    [f] = audit_local(c.records).unstable_ids
    assert f.pinned_ids == 2


def test_stable_partition_ids_are_not_unstable_with_or_without_restarts():
    for runs in (1, 3):
        c = Coordinator()
        for p in range(8):  # eight tasks, alive together
            well_behaved(c, f"etl-orders-{p}", p * 10, runs=runs, txns=3)
        assert audit_local(c.records).unstable_ids == [], runs


def test_small_families_are_left_alone():
    c = Coordinator()
    for i in range(4):
        c.init(f"tmp-{i}", i * MIN)
        c.txn(f"tmp-{i}", i * MIN + S)
    assert audit_local(c.records).unstable_ids == []
    assert len(audit_local(c.records, AuditParams(min_family_size=4)).unstable_ids) == 1


def test_peak_concurrency():
    assert rules.peak_concurrency([(0, 10), (5, 15), (10, 20), (30, 40)]) == 3
    assert rules.peak_concurrency([(0, 1), (2, 3)]) == 1
    assert rules.peak_concurrency([]) == 0


def test_max_in_window():
    assert rules.max_in_window([0, 1, 2, 100, 101], 5) == 3
    assert rules.max_in_window([0, 10, 20], 9) == 1
    assert rules.max_in_window([], 9) == 0


# --------------------------------------------------------------------------------------------
# Inventory
# --------------------------------------------------------------------------------------------

INVENTORY_CSV = """application,instance,transactional_id,prefix
orders,eu-1,orders-writer,
orders,eu-2,orders-writer,
billing,main,,bill-
billing,backfill,,bill-2024-
ledger,main,ledger-0,
ledger,main,,ledger-
ghost,main,ghost-0,
"""


def test_parse_inventory_csv_and_json_agree():
    csv_decls = rules.parse_inventory(INVENTORY_CSV)
    rows = [{k: v for k, v in d.__dict__.items() if v is not None} for d in csv_decls]
    assert rules.parse_inventory(json.dumps(rows)) == csv_decls
    assert rules.parse_inventory(json.dumps({"declarations": rows})) == csv_decls
    assert csv_decls[2] == Declaration("billing", "main", None, "bill-")


@pytest.mark.parametrize(
    "text, message",
    [
        ("application,instance\nx,y\n", "CSV header"),
        ("application,instance,transactional_id,prefix\nx,y,a,b\n", "line 2: give exactly one"),
        ("application,instance,transactional_id\n,y,a\n", "application and instance are required"),
        ('[{"application": "x"', "not valid JSON"),
        ('{"declarations": 3}', "expected a list"),
    ],
)
def test_parse_inventory_errors_say_where(text, message):
    with pytest.raises(UsageError, match=message):
        rules.parse_inventory(text)


def test_inventory_conflicts():
    decls = rules.parse_inventory(INVENTORY_CSV)
    c = Coordinator()
    for tid in ("orders-writer", "bill-2024-01", "bill-x", "ledger-0", "rogue-1", "rogue-2"):
        c.init(tid, 0)
        c.txn(tid, S)
    result = audit_local(c.records, declarations=decls)
    found = {(f.kind, f.subject): f for f in result.inventory}
    assert set(found) == {
        ("declared_twice", "orders-writer"),
        ("declared_twice", "bill-2024-*"),
        ("declared_not_seen", "ghost-0"),
        ("undeclared", "rogue-{n}"),
    }  # ledger-0 and ledger-* are one instance's: no conflict
    assert found[("declared_twice", "orders-writer")].declared_by == ["orders/eu-1", "orders/eu-2"]
    assert found[("undeclared", "rogue-{n}")].ids_seen == 2
    assert found[("undeclared", "rogue-{n}")].examples == ["rogue-1", "rogue-2"]
    assert result.exit_code == 1


def test_inventory_index_matches_ids_and_prefixes():
    idx = rules.InventoryIndex([Declaration("a", "1", "x-1"), Declaration("a", "2", None, "x-"), Declaration("b", "1", None, "y")])
    assert idx.match("x-1") == [0, 1]
    assert idx.match("x-2") == [1]
    assert idx.match("yes") == [2]
    assert idx.match("z") == []


# --------------------------------------------------------------------------------------------
# The whole audit
# --------------------------------------------------------------------------------------------


def test_history_overlapping_the_live_log_counts_once():
    c = Coordinator()
    shared_storm(c, "dup", 0, fences=3)
    once = audit_local(c.records)
    twice = audit_local(c.records + c.records[:10])
    assert once.comparable() == twice.comparable()
    assert once.records == len(c.records)


def test_the_three_kinds_of_behaviour_together():
    c = Coordinator()
    shared_storm(c, "shared-writer", 0, fences=5)
    for i in range(7):
        tid = f"batch-{uuid.UUID(int=100 + i)}"
        c.init(tid, i * MIN)
        c.txn(tid, i * MIN + S)
    for p in range(3):
        well_behaved(c, f"good-app-{p}", p, runs=3, txns=4, crash_mid_txn=(p == 0))
    result = audit_local(c.records)
    assert [f.transactional_id for f in result.shared_ids] == ["shared-writer"]
    assert [f.family for f in result.unstable_ids] == ["batch-{uuid}"]
    assert result.transactional_ids == 1 + 7 + 3
    assert result.exit_code == 2


# --------------------------------------------------------------------------------------------
# The command without PySpark
# --------------------------------------------------------------------------------------------


def test_audit_without_pyspark_says_how_to_install_and_exits_3(monkeypatch, capsys):
    import builtins

    from kafkatxn.cli.app import main

    real_import = builtins.__import__

    def no_spark(name, *args, **kwargs):
        if name.split(".")[0] in ("pyspark", "pyarrow"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_spark)
    with pytest.raises(SystemExit) as exit_info:
        main(["audit", "--no-live", "--history", "/nonexistent"])
    assert exit_info.value.code == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["kafkatxn: error: the audit needs PySpark: pip install 'kafkatxn[spark]'"]


def test_audit_usage_errors_exit_64(capsys):
    from kafkatxn.cli.app import main

    with pytest.raises(SystemExit) as exit_info:
        main(["audit", "--no-live"])
    assert exit_info.value.code == 64
    assert "--no-live needs --history" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# Re-initialisation storms
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tv", [0, 2])
def test_two_instances_taking_turns_without_an_open_transaction_are_a_storm(tv):
    c = Coordinator(tv)
    taking_turns(c, "orders-writer", 1_000_000, turns=16)  # 16 InitProducerId in ten seconds
    result = audit_local(c.records)
    assert result.shared_ids == []  # nothing was fenced: the fence rule cannot see it
    [f] = result.init_storms
    assert f.transactional_id == "orders-writer" and f.severity == "critical"
    assert f.likely_cause == "instances_taking_turns"
    assert f.max_inits_in_window == f.inits == 16
    assert f.inits_fencing_open_transaction == 0 and f.intervals_with_commits == 15
    assert f.intervals_ms == [600] * 15 and f.median_interval_ms == 600
    assert f.epochs == sorted(f.epochs) and len(set(f.epochs)) == 16  # every init bumped the epoch
    assert (f.first_init_ms, f.last_init_ms) == (1_000_000, 1_000_000 + 15 * 600)
    assert f.siblings_median_inits == -1 and f.family_size == 1
    assert result.exit_code == 2


def test_a_crash_loop_is_a_storm_and_says_so():
    c = Coordinator()
    for i in range(8):  # dies during its first transaction, every time
        c.init("loader", i * 5 * S)
        c.add("loader", i * 5 * S + 100)
    c2 = Coordinator()
    for i in range(8):  # dies before its first transaction
        c2.init("loader", i * 5 * S)
    for coord in (c, c2):
        [f] = audit_local(coord.records).init_storms
        assert f.likely_cause == "crash_loop" and f.intervals_with_commits == 0
    assert audit_local(c.records).init_storms[0].inits_fencing_open_transaction == 7


def test_single_instances_restarting_are_never_a_storm():
    c = Coordinator()
    well_behaved(c, "clean-restarts", 0, runs=4, txns=2)  # started, then restarted cleanly three times
    c.init("aborts-then-restarts", 0)
    c.add("aborts-then-restarts", S)
    c.abort("aborts-then-restarts", 2 * S)  # aborts its own transaction
    c.init("aborts-then-restarts", 3 * S)  # and restarts
    c.txn("aborts-then-restarts", 4 * S)
    for p in range(5):  # a 5-replica set, one stable id each, rolling-restarted twice
        well_behaved(c, f"replica-set-{p}", p * S, runs=3, txns=3)
    result = audit_local(c.records)
    assert result.init_storms == [] and result.shared_ids == [] and result.unstable_ids == []
    assert result.exit_code == 0


def test_a_per_batch_writer_reinitialising_all_its_ids_is_not_a_storm_but_one_id_used_twice_is():
    c = Coordinator()
    for batch in range(30):  # kafkatxn.spark's foreach_batch_writer: every batch inits each of its ids once
        for p in range(4):
            c.init(f"etl-app-{p}", batch * 2 * S + p)
            c.txn(f"etl-app-{p}", batch * 2 * S + 100 + p)
    assert audit_local(c.records).init_storms == []
    for batch in range(30):  # a second job configured with the same application name writes partition 0 too
        c.init("etl-app-0", batch * 2 * S + S)
        c.txn("etl-app-0", batch * 2 * S + S + 100)
    [f] = audit_local(c.records).init_storms
    assert f.transactional_id == "etl-app-0" and f.siblings_median_inits == 30 and f.max_inits_in_window == 60
    assert f.family == "etl-app-{n}" and f.family_size == 4


def test_storm_thresholds_and_severity_are_options():
    c = Coordinator()
    well_behaved(c, "restarts", 0, runs=4, txns=1)
    assert audit_local(c.records).init_storms == []
    strict = AuditParams(storm_min_inits=4, storm_window_ms=10 * MIN, storm_severity="warning")
    result = audit_local(c.records, strict)
    assert [f.transactional_id for f in result.init_storms] == ["restarts"] and result.exit_code == 1
    narrow = AuditParams(storm_min_inits=4, storm_window_ms=30 * S)  # the restarts are 32 s apart
    assert audit_local(c.records, narrow).init_storms == []


# --------------------------------------------------------------------------------------------
# Framework-aware families
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tid, framework",
    [
        (f"orders-app-{uuid.UUID(int=5)}-1", rules.FRAMEWORK_STREAMS),
        ("orders-sink-3-1207", rules.FRAMEWORK_FLINK),
        (f"spark-job-{uuid.UUID(int=9)}", rules.FRAMEWORK_RANDOM),
        ("writer-9f86d081884c7d65", rules.FRAMEWORK_RANDOM),
        ("etl-orders-enricher-main-7", rules.FRAMEWORK_NUMBERED),
        ("billing-writer", rules.FRAMEWORK_OTHER),
    ],
)
def test_framework_of_recognises_the_shapes_frameworks_write(tid, framework):
    assert rules.framework_of(family_of(tid)) == framework


def test_kafka_streams_losing_its_state_dir_churns_process_uuids():
    c = Coordinator()
    for restart in range(5):  # every restart without state.dir: a new process UUID, two stream threads
        process = uuid.UUID(int=1000 + restart)
        for thread in (1, 2):
            tid = f"orders-app-{process}-{thread}"
            c.init(tid, restart * 10 * MIN)
            for k in range(3):
                c.txn(tid, restart * 10 * MIN + (k + 1) * S)
    result = audit_local(c.records)
    [f] = result.unstable_ids
    assert f.family == "orders-app-{uuid}-{n}" and f.framework == rules.FRAMEWORK_STREAMS
    assert "state.dir" in f.advice
    assert f.pinned_ids == 10 and f.estimated_state_bytes == rules.state_bytes(10, 10)
    [fam] = result.families
    assert (fam.framework, fam.verdict, fam.ids, fam.live_ids) == (rules.FRAMEWORK_STREAMS, "churning", 10, 10)
    assert fam.held_until_ms == f.pinned_until_ms
    assert result.init_storms == []


def test_flink_default_naming_makes_new_ids_per_checkpoint():
    c = Coordinator()
    for checkpoint in range(1, 9):
        for subtask in range(3):
            tid = f"orders-sink-{subtask}-{checkpoint}"
            c.init(tid, checkpoint * MIN)
            c.txn(tid, checkpoint * MIN + S)
    [f] = audit_local(c.records).unstable_ids
    assert f.family == "orders-sink-{n}-{n}" and f.framework == rules.FRAMEWORK_FLINK
    assert "POOLING" in f.advice and f.steady_state_bytes and f.steady_state_bytes > f.estimated_state_bytes


def test_the_kafkatxn_spark_helper_ids_are_a_stable_family_never_flagged():
    from kafkatxn.spark import transactional_id

    c = Coordinator()
    for run in range(3):  # three runs of a query, each with 20 micro-batches over 4 fixed partitions
        for batch in range(20):
            for p in range(4):
                tid = transactional_id("etl", "orders", p, query="main", partitions=4)
                t = run * 30 * MIN + batch * S + p
                c.init(tid, t)
                c.txn(tid, t + 100)
    result = audit_local(c.records)
    assert result.unstable_ids == [] and result.init_storms == [] and result.exit_code == 0
    [fam] = result.families
    assert (fam.family, fam.framework, fam.verdict, fam.ids) == ("etl-orders-main-{n}", rules.FRAMEWORK_NUMBERED, "stable", 4)
    assert fam.estimated_state_bytes == rules.state_bytes(4, 4)


def test_a_missing_module_in_a_spark_failure_is_one_line_naming_the_package_and_the_python():
    from kafkatxn.audit.job import spark_error_line

    trace = (
        "An error occurred while calling o111.collectToPython.\n"
        "org.apache.spark.SparkException: Job aborted due to stage failure: ...\n"
        "  File \"/opt/spark/python/pyspark/worker.py\", line 1, in main\n"
        "ModuleNotFoundError: No module named 'pyarrow'\n"
    )
    line = spark_error_line(RuntimeError(trace), "/usr/bin/python3")
    assert "\n" not in line and "/usr/bin/python3" in line and "lacks pyarrow" in line and "kafkatxn[spark]" in line
    assert "lacks confluent-kafka" in spark_error_line(RuntimeError("No module named 'confluent_kafka.cimpl'"), "/p/python")
