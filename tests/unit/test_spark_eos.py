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


class FakeProducer:
    """Records what the writer asks of a transactional producer; ``fail_commit`` makes commits fail."""

    def __init__(self, fail_commit: bool = False):
        self.calls: list[str] = []
        self.fail_commit = fail_commit

    def init_transactions(self, timeout):
        self.calls.append("init")

    def begin_transaction(self):
        self.calls.append("begin")

    def produce(self, topic, key=None, value=None, partition=None, on_delivery=None):
        self.calls.append(f"produce {topic}")
        if on_delivery:
            on_delivery(None, None)

    def poll(self, timeout):
        return 0

    def flush(self, timeout=None):
        return 0

    def commit_transaction(self, timeout):
        self.calls.append("commit")
        if self.fail_commit:
            raise RuntimeError("commit failed")

    def abort_transaction(self, timeout):
        self.calls.append("abort")


@pytest.fixture
def fake_kafka(monkeypatch):
    """The ledger module with fake producers (one per InitProducerId) and a ledger held in a dict."""
    from kafkatxn.kafka import ledger

    made: list[FakeProducer] = []
    state = {"ledger": None, "reads": 0, "fail_commit": False}

    def producer(config, tid):
        made.append(FakeProducer(state["fail_commit"]))
        return made[-1]

    def read(config, slot, timeout):
        state["reads"] += 1
        return state["ledger"]

    monkeypatch.setattr(ledger, "transactional_producer", producer)
    monkeypatch.setattr(ledger, "last_committed_batch", read)
    monkeypatch.setattr(ledger, "_KEPT", {})
    return ledger, made, state


def untouched():
    raise AssertionError("a skipped batch's records were taken")
    yield


def write(ledger, batch, records):
    slot = ledger.LedgerSlot("ledger", 0, "app/q/0")
    return ledger.write_batch_once({"bootstrap.servers": "b"}, "eos-app-q-0", "out", records, slot, batch, 5)


def test_a_batch_the_ledger_covers_is_skipped_before_any_transaction_and_the_next_batch_commits(fake_kafka):
    ledger, made, state = fake_kafka
    state["ledger"] = 4  # the previous run committed batch 4; the restarted query replays it
    skipped = write(ledger, 4, untouched())
    assert (skipped.skipped, skipped.committed_batch, skipped.new_producer) == (True, 4, True)
    assert made[0].calls == ["init"]  # nothing begun, nothing produced, nothing to abort
    nxt = write(ledger, 5, [(None, b"x")])  # the kept producer, which knows the ledger: no new read
    assert (nxt.records, nxt.skipped, nxt.new_producer) == (1, False, False)
    assert len(made) == 1 and state["reads"] == 1
    assert made[0].calls[1:] == ["begin", "produce ledger", "produce out", "commit"]


def test_a_producer_whose_transaction_was_aborted_is_not_kept(fake_kafka):
    ledger, made, state = fake_kafka
    state["fail_commit"] = True
    with pytest.raises(RuntimeError, match="commit failed"):
        write(ledger, 0, [(None, b"x")])
    assert made[0].calls[-1] == "abort" and ledger._KEPT == {}
    state["fail_commit"] = False
    assert write(ledger, 0, [(None, b"x")]).new_producer  # the retry builds a new producer (InitProducerId)
    assert made[1].calls[0] == "init" and state["reads"] == 2

    (key, kept), = ledger._KEPT.items()
    del ledger._KEPT[key]
    kept.abort(5)  # however a transaction came to be aborted, that producer is not kept
    ledger._keep(key, kept)
    assert made[1].calls[-1] == "abort" and ledger._KEPT == {}
