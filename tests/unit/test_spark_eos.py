"""The exactly-once writer's pieces that need no broker and no Spark (the crash test is
tests/integration/test_spark_exactly_once.py)."""

from __future__ import annotations

import pytest

from harness.spark_jars import closest_release
from kafkatxn.kafka.ledger import consumer_settings, ledger_topic_config
from kafkatxn.spark_eos import ExactlyOnceWriter, _as_bytes


def writer(**kw):
    return ExactlyOnceWriter({"bootstrap.servers": "b:9092"}, "out", **{"application": "app", "partitions": 4, **kw})


def test_each_task_has_its_own_ledger_key_per_application_and_query():
    assert writer(query="main").ledger_key(3) == "app/main/3"
    assert writer().ledger_key(0) == "app//0"
    assert len({writer(query=q).ledger_key(p) for q in ("a", "b") for p in range(4)}) == 8


def test_rows_go_to_tasks_by_the_key_unless_told_otherwise():
    assert writer().partition_by == ("key",)
    assert writer(partition_by=["id", "ts"]).partition_by == ("id", "ts")


@pytest.mark.parametrize("kw, message", [
    ({"partitions": 0}, "partitions must be at least 1"),
    ({"application": "a b"}, "application must be non-empty"),
    ({"ledger_topic": "bad topic"}, "ledger_topic is not a valid Kafka topic name"),
])
def test_bad_settings_are_refused_on_the_driver(kw, message):
    with pytest.raises(ValueError, match=message):
        writer(**kw)


def test_negative_batch_ids_are_refused():
    with pytest.raises(ValueError, match="batch id must not be negative"):
        writer().write_batch(object(), -1)


def test_keys_and_values_become_bytes():
    assert [_as_bytes(v) for v in (None, b"x", "é", bytearray(b"y"), 7)] == [None, b"x", "é".encode(), b"y", b"7"]


def test_the_ledger_reader_is_read_committed_and_gets_no_producer_settings():
    conf = consumer_settings({"bootstrap.servers": "b:9092", "transactional.id": "t", "linger.ms": 5, "sasl.username": "u"})
    assert conf["isolation.level"] == "read_committed" and conf["enable.partition.eof"] is True
    assert "transactional.id" not in conf and "linger.ms" not in conf and conf["sasl.username"] == "u"


def test_the_ledger_is_compacted_never_deleted():
    assert ledger_topic_config(3) == {"cleanup.policy": "compact", "min.insync.replicas": "2", "min.compaction.lag.ms": "0"}
    assert ledger_topic_config(1)["min.insync.replicas"] == "1"


def test_the_connector_falls_back_to_the_newest_release_not_newer_than_pyspark():
    published = ["3.5.1", "4.0.0", "4.1.3", "4.2.0", "4.2.0-preview5", "4.3.0-preview1", "5.0.0"]
    assert closest_release("4.3.0", published) == "4.2.0"
    assert closest_release("4.1.3", published) == "4.1.3"
    assert closest_release("6.0.0", published) is None
    assert closest_release("4.3.0.dev0", published) is None


def test_the_writer_is_also_found_in_kafkatxn_spark():
    from kafkatxn.spark import ExactlyOnceWriter as FromSpark

    assert FromSpark is ExactlyOnceWriter


def test_arrow_columns_become_bytes_without_a_python_call_per_value():
    import pyarrow as pa

    from kafkatxn.spark_eos import _column_bytes

    assert _column_bytes(pa.array(["é", None], pa.string())) == ["é".encode(), None]
    assert _column_bytes(pa.array(["x"], pa.large_string())) == [b"x"]
    assert _column_bytes(pa.array([b"y", None], pa.binary())) == [b"y", None]
    assert _column_bytes(pa.array([7, None], pa.int64())) == [b"7", None]


def test_a_kept_producer_is_found_again_by_its_settings_whatever_the_callbacks():
    from kafkatxn.kafka.ledger import config_key

    # The writer is unpickled anew in every task: its callbacks are new objects each time.
    assert config_key({"bootstrap.servers": "b", "error_cb": lambda e: None}) == config_key(
        {"error_cb": lambda e: 1, "bootstrap.servers": "b"})
    assert config_key({"bootstrap.servers": "b"}) != config_key({"bootstrap.servers": "c"})


def test_the_ledger_check():
    from kafkatxn.kafka.ledger import covers

    assert covers(3, 3) and covers(4, 3)
    assert not covers(2, 3) and not covers(None, 0)
