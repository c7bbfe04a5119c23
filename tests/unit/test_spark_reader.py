"""Spark queries as readers: checkpoints in the formats Spark 3.x and 4.x write, read into positions
and decided by the one definition a consumer group is decided by."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafkatxn import check, diagnose, spark_checkpoint as sc, spark_exposition, spark_readers
from kafkatxn.diagnose_rows import Action, TxnVerdict
from kafkatxn.model import QueryReader, TopicPartition
from kafkatxn.facts_cluster import gather_snapshot
from tests.support.blocked_group import ORDERS, blocked_model
from tests.support.cli_helpers import run_cli

QUERY_ID = "8f4c2a3e-1f0d-4b8e-9a57-2c1de0e3b1a4"
# OffsetSeqMetadata as Spark 3.5 / 4.x write it (abridged conf).
META = json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 1764300000000,
                   "conf": {"spark.sql.shuffle.partitions": "2",
                            "spark.sql.streaming.stateStore.providerClass":
                                "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"}},
                  separators=(",", ":"))


def kafka(offsets: dict[str, dict[int, int]]) -> str:
    """KafkaSourceOffset's JSON (JsonUtils.partitionOffsets): topic -> partition (a string) -> offset."""
    return json.dumps({t: {str(p): o for p, o in sorted(ps.items())} for t, ps in offsets.items()}, separators=(",", ":"))


def offsets_v1(*sources: str | None) -> str:
    return "\n".join(["v1", META, *(s if s is not None else "-" for s in sources)])


def offsets_v2(**sources: str | None) -> str:
    return "\n".join(["v2", META, *(f"{k}:{v if v is not None else '-'}" for k, v in sources.items())])


def write_checkpoint(root: Path, offsets: dict[int, str], commits: tuple[int, ...], commit_text: str = 'v1\n{"nextBatchWatermarkMs":0}',
                     initial: str | None = None) -> Path:
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    (root / "metadata").write_text(json.dumps({"id": QUERY_ID}) + "\n")
    for batch, text in offsets.items():
        (root / "offsets" / str(batch)).write_text(text)
        (root / "offsets" / f".{batch}.crc").write_bytes(b"crc\x00")  # the local filesystem's checksum files
    for batch in commits:
        (root / "commits" / str(batch)).write_text(commit_text)
    if initial is not None:
        (root / "sources" / "0").mkdir(parents=True)
        (root / "sources" / "0" / "0").write_text("\x00v1\n" + initial)
    return root


def test_v1_subscribe_with_a_batch_in_flight_and_a_source_that_is_not_kafka(tmp_path):
    ck = write_checkpoint(tmp_path / "q", {
        4: offsets_v1(kafka({"orders": {0: 10, 1: 7}}), '{"logOffset":3}', None),
        5: offsets_v1(kafka({"orders": {0: 15, 1: 9}}), '{"logOffset":4}', None),
    }, commits=(4,))
    (ck / "offsets" / ".6.4c5d.tmp").write_text("v1\n")  # Spark's temporary file: not a batch
    query, missing = spark_readers.read_checkpoint(f"orders-agg={ck}")
    assert missing == []
    assert query.reader == "spark:orders-agg" and query.reader.query_id == QUERY_ID and query.reader.checkpoint == str(ck)
    assert query.committed_batch_id == 4 and query.committed_batch_timestamp_ms == 1764300000000
    assert query.position == {TopicPartition("orders", 0): 10, TopicPartition("orders", 1): 7}
    assert query.in_flight_batch_id == 5 and query.in_flight_end[TopicPartition("orders", 0)] == 15
    assert (query.kafka_sources, query.other_sources) == (1, 1)


def test_v2_named_sources_subscribe_pattern_and_assign_and_commit_v2(tmp_path):
    """OffsetSeqLog v2 (``<source id>:<offset>``), two Kafka sources (a pattern over two topics, an
    assign of one partition), CommitLog v2 (state checkpoint format 2)."""
    ck = write_checkpoint(tmp_path / "q", {
        0: offsets_v2(events=kafka({"clicks": {0: 3}, "views": {0: 5, 1: 6}}), audit=kafka({"orders": {2: 40}})),
    }, commits=(0,), commit_text='v2\n{"nextBatchWatermarkMs":0,"stateUniqueIds":{"0":[["a1b2"]]}}')
    query, missing = spark_readers.read_checkpoint(str(ck))
    assert missing == [] and query.reader == f"spark:{QUERY_ID}" and query.reader.query_name is None
    assert query.position == {TopicPartition("clicks", 0): 3, TopicPartition("views", 0): 5, TopicPartition("views", 1): 6,
                              TopicPartition("orders", 2): 40}
    assert query.kafka_sources == 2 and query.in_flight_batch_id is None


def test_no_batch_committed_starts_at_the_initial_offsets(tmp_path):
    ck = write_checkpoint(tmp_path / "q", {0: offsets_v1(kafka({"orders": {0: 5}}))}, commits=(),
                          initial=kafka({"orders": {0: 0}}))
    query, missing = spark_readers.read_checkpoint(str(ck))
    assert missing == [] and query.committed_batch_id is None and query.position == {TopicPartition("orders", 0): 0}
    assert query.in_flight_batch_id == 0


class _Metadata:
    def __init__(self, tps):
        self.leaders = {tp: 1 for tp in tps}


class _Cluster:
    def __init__(self, tps):
        self._md = _Metadata(tps)

    def metadata(self):
        return self._md


def test_a_partition_added_after_the_last_batch_has_no_position_yet_and_a_deleted_topic_none(tmp_path):
    ck = write_checkpoint(tmp_path / "q", {3: offsets_v1(kafka({"orders": {0: 10}, "gone": {0: 1}}))}, commits=(3,))
    query, _ = spark_readers.read_checkpoint(str(ck))
    positions = spark_readers.reader_positions(_Cluster([TopicPartition("orders", 0), TopicPartition("orders", 1),
                                                         TopicPartition("other", 0)]), [query])
    assert positions[query.reader] == {TopicPartition("orders", 0): 10, TopicPartition("orders", 1): spark_readers.NO_POSITION}


@pytest.mark.parametrize("damage, words", [
    ("v1\n" + META[:30], "not complete JSON"),
    ("v1\n" + META + "\n" + '{"orders":{"0":1', "not complete JSON"),
    ("v9\n" + META + "\n" + kafka({"orders": {0: 1}}), "version v9, newer than the versions read here"),
    ("", "empty"),
    ("v1", "ends after the version line"),
    ("garbage\n", "not a version line"),
])
def test_a_damaged_committed_batch_is_a_missing_part_naming_the_path_never_a_position(tmp_path, damage, words):
    ck = write_checkpoint(tmp_path / "q", {2: damage}, commits=(2,))
    query, missing = spark_readers.read_checkpoint(str(ck))
    assert query is None
    (m,) = missing
    assert str(ck) in str(m.subject) and words in m.reason


def test_a_batch_in_flight_being_written_keeps_the_position_and_names_the_file(tmp_path):
    ck = write_checkpoint(tmp_path / "q", {1: offsets_v1(kafka({"orders": {0: 4}})), 2: "v1\n"}, commits=(1,))
    query, missing = spark_readers.read_checkpoint(str(ck))
    assert query.position == {TopicPartition("orders", 0): 4} and query.in_flight_end == {}
    (m,) = missing
    assert str(ck / "offsets" / "2") in str(m.subject) and "batch in flight" in m.reason


def test_not_a_checkpoint_and_no_kafka_source(tmp_path):
    _, missing = spark_readers.read_checkpoint(str(tmp_path / "nowhere"))
    assert "no such checkpoint directory" in missing[0].reason
    ck = write_checkpoint(tmp_path / "q", {0: offsets_v1('{"logOffset":0}')}, commits=(0,))
    _, missing = spark_readers.read_checkpoint(str(ck))
    assert "reads no Kafka source" in missing[0].reason
    _, missing = spark_readers.read_checkpoint("ftp://host/ck")
    assert "not a filesystem read here" in missing[0].reason


def test_kafka_offset_shape():
    assert sc.is_kafka_offset({"t": {"0": 1, "12": -2}}) and sc.is_kafka_offset({})
    assert not sc.is_kafka_offset({"logOffset": 3}) and not sc.is_kafka_offset(5)
    assert not sc.is_kafka_offset({"sourceVersion": 1, "reservoirId": "x"})
    assert sc.batch_ids(["0", "10", "2", ".2.crc", ".3.abc.tmp", "_spark_metadata"]) == [0, 2, 10]


def test_a_query_and_a_group_at_the_same_place_get_the_same_verdict_and_the_next_step(tmp_path):
    """The query stands at offset 3 of orders-0, where group billing is committed, behind the same
    hanging transaction: the same verdict, severity and command, with the query named by its checkpoint."""
    model, cluster = blocked_model(idle_ms=900_000 + 1_000, tracked=False)
    ck = write_checkpoint(tmp_path / "q", {7: offsets_v1(kafka({"orders": {0: 3}}))}, commits=(7,))
    d = diagnose.run(cluster, ["billing"], spark_checkpoints=[f"etl={ck}"])
    rows = {p.group: p for p in d.partitions}
    assert rows["spark:etl"].verdict is rows["billing"].verdict and rows["spark:etl"].gap is rows["billing"].gap
    (t,) = d.transactions
    assert t.verdict is TxnVerdict.hanging and t.action is Action.abort
    assert t.command == "kafkatxn abort --topic orders --partition 0 --start-offset 3"
    assert set(t.groups) == {"billing", "spark:etl"} and d.exit_code == 2
    (q,) = d.queries
    assert (q.query_name, q.query_id, q.checkpoint, q.committed_batch_id, q.status) == ("etl", QUERY_ID, str(ck), 7, "blocked")
    alone = diagnose.run(cluster, spark_checkpoints=[str(ck)])  # without a group named, no group is read
    assert {p.group for p in alone.partitions} == {f"spark:{QUERY_ID}"} and alone.exit_code == 2


def test_a_query_waiting_on_a_transaction_in_flight_is_told_to_watch_it_by_its_checkpoint(tmp_path):
    _, cluster = blocked_model()
    ck = write_checkpoint(tmp_path / "q", {0: offsets_v1(kafka({"orders": {0: 3}}))}, commits=(0,))
    d = diagnose.run(cluster, spark_checkpoints=[str(ck)])
    (t,) = d.transactions
    assert t.action is Action.wait and t.command == f"kafkatxn lso --groups --spark-checkpoint {ck} --watch"
    assert d.exit_code == 0


def test_check_pages_a_stuck_query_by_name_and_the_exporter_publishes_its_series(tmp_path):
    _, cluster = blocked_model(idle_ms=900_000 + 1_000, tracked=False)
    ck = write_checkpoint(tmp_path / "q", {7: offsets_v1(kafka({"orders": {0: 3}}))}, commits=(7,))
    snap = gather_snapshot(cluster, spark_checkpoints=[f"etl={ck}"])
    result = check.evaluate(snap)
    assert result.exit_code == 2 and "1 Spark query blocked" in result.summary
    (f,) = [f for f in result.findings if f.kind == "group_blocked"]
    assert f"Spark query 'etl' (id {QUERY_ID}, checkpoint {ck})" in f.message and f"diagnose --spark-checkpoint etl={ck}" in f.message
    groups, queries = spark_exposition.split(snap.groups)
    assert groups == [] and [s.group for s in queries] == ["spark:etl"]
    families = {m.name: m for m in spark_exposition.query_lag(snap, queries)}
    (stuck,) = families["kafkatxn_spark_query_stuck"].samples
    assert stuck.labels == {"query": "etl", "query_id": QUERY_ID, "checkpoint": str(ck), "topic": "orders", "partition": "0"}
    assert stuck.value == 1
    assert families["kafkatxn_spark_query_blocked_partitions"].samples[0].value == 1
    assert families["kafkatxn_spark_queries_blocked"].samples[0].value == 1
    sums_only = {m.name for m in spark_exposition.query_lag(snap, queries, per_partition=False)}
    assert "kafkatxn_spark_query_stuck" not in sums_only and "kafkatxn_spark_query_summed_lag_messages" in sums_only


def test_reader_label_is_a_string_that_names_its_query():
    q = QueryReader(None, QUERY_ID, "/ck")
    assert q == f"spark:{QUERY_ID}" and spark_readers.reader_option(q) == "--spark-checkpoint /ck"
    assert spark_readers.reader_option("billing") == "--group billing"
    import copy
    import pickle

    for again in (copy.deepcopy(q), pickle.loads(pickle.dumps(q))):
        assert type(again) is QueryReader and (again.query_id, again.checkpoint) == (QUERY_ID, "/ck")


def test_a_damaged_checkpoint_alone_is_one_line_and_exit_3(tmp_path, capsys):
    ck = write_checkpoint(tmp_path / "q", {2: "v7\n" + META}, commits=(2,))
    _, cluster = blocked_model()
    d = diagnose.run(cluster, spark_checkpoints=[str(ck)])
    assert d.exit_code == 3 and d.partitions == [] and d.transactions == []
    assert any(str(ck) in str(m) and "v7" in str(m) for m in d.missing)
    # Nothing read: the table output adds no "no committed offsets" line to the one on stderr.
    from kafkatxn.cli.diagnose_cmd import text_report
    assert text_report(d) == ""


def test_a_profile_names_its_queries(tmp_path, monkeypatch):
    from kafkatxn.config import resolve
    from kafkatxn.errors import UsageError

    path = tmp_path / "config.toml"
    monkeypatch.setenv("KAFKATXN_CONFIG", str(path))
    path.write_text('[profiles.prod]\nbootstrap_servers = "k:9092"\n'
                    '[profiles.prod.spark_checkpoints]\norders-etl = "s3a://ck/orders"\nbilling = "/ck/billing"\n')
    assert resolve(profile="prod").spark_checkpoints == ("orders-etl=s3a://ck/orders", "billing=/ck/billing")
    path.write_text('[profiles.prod]\nbootstrap_servers = "k:9092"\nspark_checkpoints = ["/ck/a"]\n')
    assert resolve(profile="prod").spark_checkpoints == ("/ck/a",)
    path.write_text('[profiles.prod]\nbootstrap_servers = "k:9092"\nspark_checkpoints = 3\n')
    with pytest.raises(UsageError, match="spark_checkpoints"):
        resolve(profile="prod")


@pytest.mark.parametrize("ledger, state, code", [({0: 7, 1: 8}, "ahead", 0), ({0: 7, 1: 7}, "in_step", 0), ({0: 6, 1: 6}, "behind", 1)])
def test_the_writers_ledger_beside_the_checkpoint(tmp_path, ledger, state, code):
    """Ahead: the writer committed batch 8, the checkpoint not (a replay the writer will skip); behind:
    the checkpoint committed batch 7 the ledger does not have (lost output, a finding)."""
    from kafkatxn.model import Partial

    _, cluster = blocked_model()
    asked = []
    cluster.writer_batches = lambda topic, app, query: asked.append((topic, app, query)) or Partial(dict(ledger))
    ck = write_checkpoint(tmp_path / "q", {7: offsets_v1(kafka({"audit": {0: 10}}))}, commits=(7,))
    writers = [spark_readers.parse_writer("etl=orders-enricher/main")]
    d = diagnose.run(cluster, spark_checkpoints=[f"etl={ck}"], spark_writers=writers)
    (q,) = d.queries
    assert asked == [("kafkatxn-spark-ledger", "orders-enricher", "main")]
    assert (q.writer, q.writer_batch_id, q.committed_batch_id, q.writer_state) == ("orders-enricher/main", max(ledger.values()), 7, state)
    assert d.exit_code == code
    snap = gather_snapshot(cluster, spark_checkpoints=[f"etl={ck}"], spark_writers=writers)
    families = {m.name: m for m in spark_exposition.batches(snap)}
    assert families["kafkatxn_spark_query_writer_batch_id"].samples[0].value == max(ledger.values())
    assert families["kafkatxn_spark_query_writer_behind"].samples[0].value == (1 if state == "behind" else 0)
    assert families["kafkatxn_spark_query_committed_batch_id"].samples[0].value == 7


def test_a_ledger_that_cannot_be_read_is_missing_not_in_step(tmp_path):
    from kafkatxn.model import Missing, Part, Partial

    _, cluster = blocked_model()
    cluster.writer_batches = lambda topic, app, query: Partial({}, [Missing(Part(f"ledger topic {topic}"), "the ledger topic t does not exist")])
    ck = write_checkpoint(tmp_path / "q", {7: offsets_v1(kafka({"audit": {0: 10}}))}, commits=(7,))
    d = diagnose.run(cluster, spark_checkpoints=[f"etl={ck}"], spark_writers=[spark_readers.parse_writer("etl=app/q@t")])
    (q,) = d.queries
    assert q.writer_state is None and d.exit_code == 3 and any("ledger topic t" in str(m) for m in d.missing)


def test_writer_specs_and_a_profiles_writers(tmp_path, monkeypatch):
    from kafkatxn.config import resolve

    assert spark_readers.parse_writer("etl=app/q@ledger") == spark_readers.WriterSpec("etl", "app", "q", "ledger")
    assert spark_readers.parse_writer("etl=app/").query is None
    with pytest.raises(ValueError, match="NAME=APPLICATION/QUERY"):
        spark_readers.parse_writer("app/q")
    path = tmp_path / "config.toml"
    monkeypatch.setenv("KAFKATXN_CONFIG", str(path))
    path.write_text('[profiles.prod]\nbootstrap_servers = "k:9092"\n[profiles.prod.spark_checkpoints]\n'
                    'etl = {checkpoint = "/ck/etl", writer = "orders-enricher/main", ledger_topic = "ledger"}\nplain = "/ck/p"\n')
    config = resolve(profile="prod")
    assert config.spark_checkpoints == ("etl=/ck/etl", "plain=/ck/p") and config.spark_writers == ("etl=orders-enricher/main@ledger",)


def test_the_remote_path_reads_through_pyarrow_fs_as_the_local_one(tmp_path):
    """hdfs/s3a/gs/abfs go through pyarrow.fs; its local filesystem (file://) runs the same code here."""
    pytest.importorskip("pyarrow")
    from kafkatxn.model import Part

    ck = write_checkpoint(tmp_path / "q", {4: offsets_v1(kafka({"orders": {0: 10}})), 5: offsets_v1(kafka({"orders": {0: 12}}))},
                          commits=(4,))
    fs = spark_readers._Arrow(f"file://{ck}")
    remote, missing = spark_readers._read(fs, fs.root, "etl", f"file://{ck}", Part("x"))
    local, _ = spark_readers.read_checkpoint(f"etl={ck}")
    assert missing == [] and (remote.position, remote.in_flight_end, remote.committed_batch_id) == \
        (local.position, local.in_flight_end, local.committed_batch_id)
    assert fs.list(str(tmp_path / "nowhere")) is None


def test_lso_groups_shows_the_query_alone_or_beside_every_group(tmp_path):
    from kafkatxn import lso

    _, cluster = blocked_model()
    ck = write_checkpoint(tmp_path / "q", {0: offsets_v1(kafka({"orders": {0: 3}}))}, commits=(0,))
    queries, _ = spark_readers.read_checkpoints([f"etl={ck}"])
    readers = spark_readers.reader_positions(cluster, queries)
    alone = lso.group_report(cluster, readers=readers)
    assert [(r.group, r.committed_offset, r.verdict.value) for r in alone.rows] == [("spark:etl", 3, "waiting")]
    beside = lso.group_report(cluster, readers=readers, every_group=True)
    assert {r.group for r in beside.rows} == {"billing", "reports", "spark:etl"}
    assert {r.verdict for r in beside.rows if r.group in ("billing", "spark:etl")} == {alone.rows[0].verdict}
    assert spark_readers.query_notes(queries) == [f"spark:etl is query {QUERY_ID} (checkpoint {ck}): batch 0 committed"]


@pytest.fixture
def silent_store():
    """A real S3 endpoint that takes connections and never answers (a store hung at 3 a.m.)."""
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []

    def accept() -> None:
        try:
            while True:
                held.append(server.accept()[0])
        except OSError:
            pass

    threading.Thread(target=accept, daemon=True).start()
    yield f"127.0.0.1:{server.getsockname()[1]}"
    server.close()
    for conn in held:
        conn.close()


def test_a_remote_checkpoint_whose_store_does_not_answer_is_missing_within_the_deadline(silent_store, monkeypatch):
    pytest.importorskip("pyarrow")
    import time

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "kafkatxn-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "kafkatxn-test")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    path = f"s3a://bucket/ck?endpoint_override={silent_store}&scheme=http"
    started = time.monotonic()
    query, missing = spark_readers.read_checkpoint(f"etl={path}", started + 1.0)
    took = time.monotonic() - started
    assert query is None and [str(m.subject) for m in missing] == [f"spark checkpoint {path}"]
    assert "did not answer within 1.0s" in missing[0].reason and took < 3.0


def test_a_remote_location_pyarrow_cannot_parse_is_one_missing_part_not_a_traceback():
    pytest.importorskip("pyarrow")
    query, missing = spark_readers.read_checkpoint("etl=s3a://bucket/ck?no_such_option=1")
    assert query is None and len(missing) == 1 and "not a location pyarrow can read" in missing[0].reason
