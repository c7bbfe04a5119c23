"""The exactly-once writer's kept producer against a real broker, no Spark (issue 26, throughput).

A Python worker keeps its transactional producer across batches (no InitProducerId, no ledger read
when the producer committed the ledger entry itself). A later attempt of the same task elsewhere
fences it; the worker holding the stale producer must then write nothing twice: its probe finds the
fence before a record is taken, and the task starts afresh (InitProducerId, the ledger read).
"""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from kafkatxn.kafka import ledger
from kafkatxn.kafka.ledger import LedgerSlot, config_key, ensure_ledger_topic, write_batch_once

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def forget_kept_clients():
    """This process's kept producers and ledger readers are let go after the test (the broker stops)."""
    yield
    for kept in ledger._KEPT.values():
        kept.producer.flush(0)
    for reader in ledger._READERS.values():
        reader.close()
    ledger._KEPT.clear()
    ledger._READERS.clear()


def committed(bootstrap: str, topic: str, partitions: int = 1) -> Counter:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kept-counter", "isolation.level": "read_committed",
                  "enable.partition.eof": True, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen: Counter = Counter()
    at_end: set[int] = set()
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            msg = c.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                at_end.add(msg.partition())
                if len(at_end) == partitions:
                    return seen
                continue
            seen[msg.value().decode()] += 1
    finally:
        c.close()
    raise AssertionError(f"reading {topic} did not reach its end")


def rows(batch: int, n: int = 50):
    return [(None, f"{batch}-{i}".encode()) for i in range(n)]


def untouched(batch: int):
    """Records the task must never take: the stale producer's probe comes first."""
    def gen():
        raise AssertionError(f"the fenced producer's task took batch {batch}'s records")
        yield
    return gen()


def test_a_fenced_kept_producer_writes_nothing_and_the_batch_is_checked_afresh(kafka, unique_name):
    bootstrap = kafka.bootstrap_servers
    out, ledger_topic = f"{unique_name[:40]}-out", f"{unique_name[:40]}-ledger"
    kafka.create_topic(out, partitions=1)
    config = {"bootstrap.servers": bootstrap, "transaction.timeout.ms": 60_000}
    ensure_ledger_topic(config, ledger_topic, 1)
    tid, slot = f"eos-{unique_name[:40]}-0", LedgerSlot(ledger_topic, 0, "app/q/0")
    key = (tid, config_key(config))

    def write(batch, records):
        return write_batch_once(config, tid, out, records, slot, batch, 30, {"partition": 0})

    first = write(0, rows(0))
    assert (first.records, first.skipped, first.new_producer) == (50, False, True)
    again = write(1, rows(1))  # the same worker's next batch: its kept producer, no InitProducerId
    assert (again.records, again.skipped, again.new_producer) == (50, False, False)
    retried = write(1, untouched(1))  # a retry of batch 1 on this worker: its own producer committed it
    assert (retried.skipped, retried.committed_batch) == (True, 1)

    stale = ledger._KEPT.pop(key)  # worker A holds this producer; batch 2 of the task runs on worker B:
    other = write(2, rows(2))  # a new producer there (InitProducerId fences worker A's)
    assert (other.records, other.new_producer) == (50, True)
    ledger._KEPT[key].producer.flush(0)
    ledger._KEPT[key] = stale  # worker A again, with its fenced producer (it believes batch 1 is its last)

    replay = write(2, rows(2))  # batch 2 again on worker A: the fence is found, the ledger read afresh
    assert (replay.skipped, replay.committed_batch, replay.new_producer) == (True, 2, True)
    ledger._KEPT[key] = stale  # and a new batch on the fenced producer: written once, by a new producer
    nxt = write(3, rows(3))
    assert (nxt.records, nxt.skipped, nxt.new_producer) == (50, False, True)

    seen = committed(bootstrap, out)
    expected = {v.decode() for b in range(4) for _, v in rows(b)}
    assert set(seen) == expected and max(seen.values()) == 1, {v: c for v, c in seen.items() if c > 1}


def test_a_replayed_batch_the_ledger_covers_leaves_the_kept_producer_able_to_commit(kafka, unique_name):
    """A restarted driver replays its last batch; the task's new producer finds the batch in the ledger
    and skips it. The worker keeps that producer for the next batch, which must commit (in local mode a
    task that fails ends the query). Were the skipped batch's rows handed to librdkafka, an abort would
    purge produce requests built but not sent (here: the broker frozen while they are), leaving a gap
    in the partition's sequence numbers that fails the next commit (OUT_OF_ORDER_SEQUENCE_NUMBER)."""
    bootstrap = kafka.bootstrap_servers
    out, ledger_topic = f"{unique_name[:40]}-out", f"{unique_name[:40]}-ledger"
    kafka.create_topic(out, partitions=2)
    # A small socket send buffer: with the broker frozen, requests stay in librdkafka's queue to the
    # broker (the kernel's default buffers would take in all five in flight).
    config = {"bootstrap.servers": bootstrap, "transaction.timeout.ms": 60_000, "linger.ms": 20,
              "socket.send.buffer.bytes": 16_384}
    ensure_ledger_topic(config, ledger_topic, 1)
    tid, slot = f"eos-{unique_name[:40]}-0", LedgerSlot(ledger_topic, 0, "app/q/0")
    broker = kafka._node(kafka.broker_ids[0]).process
    n, taken = 20_000, []

    def rows_of(batch):
        return [(str(i).encode(), f"{batch}-{i}".encode().ljust(500, b".")) for i in range(n)]

    def while_frozen(batch):
        """The batch's rows; once the first is taken (the topic's leader known), the broker is frozen
        for a second, so that what follows is queued and built into requests but not sent."""
        rows = rows_of(batch)
        yield rows[0]
        taken.append(batch)
        time.sleep(0.5)  # the ledger is read meanwhile
        broker.send_signal(signal.SIGSTOP)
        threading.Timer(1.0, broker.send_signal, (signal.SIGCONT,)).start()
        yield from rows[1:]

    def write(batch, records):
        return write_batch_once(config, tid, out, records, slot, batch, 30, {"partition": 0})

    try:
        assert write(0, rows_of(0)).records == n  # the run before the restart committed batch 0 ...
        for kept in ledger._KEPT.values():  # ... and its driver died: the restarted query's workers are new
            kept.producer.flush(0)
        ledger._KEPT.clear()

        replay = write(0, while_frozen(0))  # batch 0 again, as the restarted query replays it
        assert (replay.skipped, replay.committed_batch, replay.new_producer) == (True, 0, True)
        time.sleep(1.2 if taken else 0)  # the broker thawed
        nxt = write(1, rows_of(1))  # the next batch on the same worker
        assert (nxt.records, nxt.skipped) == (n, False)
    finally:
        broker.send_signal(signal.SIGCONT)
    assert taken == [], "the skipped batch's rows were produced"

    seen = committed(bootstrap, out, partitions=2)
    assert len(seen) == 2 * n and max(seen.values()) == 1
