"""Real transactional traffic for tests and the demo, made with confluent-kafka (librdkafka), as
applications make it.

Each helper returns what it created — producer ids and epochs, offsets, partitions — taken from the
client itself (librdkafka's own log of the producer id it acquired, and delivery reports), never from
kafkatxn, so tests compare kafkatxn's output against an independent source.

    scenario = inspect_scenario(bootstrap, topic="t-x")   # idempotent, open, committed, aborted
    try:
        ...
    finally:
        scenario.close()                                  # aborts the open transaction
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Iterable

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkatxn.model import TopicPartition

CLIENT_TIMEOUT_S = 30
log = logging.getLogger(__name__)
# Long enough that no test outlives it, short of the broker's default transaction.max.timeout.ms (15 min).
OPEN_TRANSACTION_TIMEOUT_MS = 600_000

_ACQUIRED_PID = re.compile(r"Acquired PID\{Id:(\d+),Epoch:(\d+)\}")


class ScenarioError(RuntimeError):
    pass


@dataclass(frozen=True)
class Written:
    """Records one producer wrote to one partition, by offset (delivery reports)."""

    topic: str
    partition: int
    first_offset: int
    last_offset: int
    records: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True)
class IdempotentRun:
    """An idempotent (non-transactional) producer that wrote ``records`` records to one partition."""

    producer_id: int
    producer_epoch: int
    written: Written

    @property
    def last_sequence(self) -> int:
        # Sequences start at 0 per partition and count records.
        return self.written.records - 1


@dataclass
class TransactionRun:
    """One transaction of ``transactional_id``; ``outcome`` is ``open``, ``committed`` or ``aborted``.

    Once committed or aborted (here or by ``commit()``/``abort()``), its markers are on its partitions.
    """

    bootstrap_servers: str
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    outcome: str
    written: list[Written]
    # Wall-clock time once every record was written: the coordinator's start time lies before it.
    written_at_ms: int
    producer: Producer | None = field(default=None, repr=False)  # kept alive while the transaction is open

    @property
    def partitions(self) -> set[TopicPartition]:
        return {w.tp for w in self.written}

    def start_offset(self, tp: TopicPartition) -> int:
        """First offset of this transaction on ``tp`` (DescribeProducers' current_txn_start_offset while open)."""
        return next(w.first_offset for w in self.written if w.tp == tp)

    def wait_until_open_longer_than(self, ms: int) -> None:
        """Sleep until the coordinator sees this transaction open for more than ``ms``."""
        left_ms = self.written_at_ms + ms + 1 - int(time.time() * 1000)
        if left_ms > 0:
            time.sleep(left_ms / 1000)

    def abort(self) -> None:
        self._end(commit=False)

    def commit(self) -> None:
        self._end(commit=True)

    def _end(self, commit: bool) -> None:
        if self.outcome != "open" or self.producer is None:
            return
        if commit:
            self.producer.commit_transaction(CLIENT_TIMEOUT_S)
        else:
            self.producer.abort_transaction(CLIENT_TIMEOUT_S)
        self.outcome = "committed" if commit else "aborted"
        self.producer = None
        wait_for_markers(self.bootstrap_servers, self.partitions)


@dataclass
class InspectScenario:
    """Topic ``topic`` with 4 partitions:

    - p0: an idempotent producer, 3 records;
    - p1, p2: a committed transaction, 2 records each;
    - p1: an aborted transaction, 2 records (after the committed one);
    - p2, p3: a transaction left open (long timeout), 2 records each — on p2 it starts after the
      committed transaction's records and marker, so its start offset is not 0.
    """

    bootstrap_servers: str
    topic: str
    idempotent: IdempotentRun
    committed: TransactionRun
    aborted: TransactionRun
    open: TransactionRun

    @property
    def transactions(self) -> list[TransactionRun]:
        return [self.committed, self.aborted, self.open]

    def close(self) -> None:
        """Abort the open transaction, so a shared broker's LSO moves on. A module that outlived its
        timeout finds it aborted by its coordinator already, its producer fenced: nothing is left to do."""
        try:
            self.open.abort()
        except KafkaException as exc:
            if not exc.args[0].fatal():
                raise
            wait_for_markers(self.open.bootstrap_servers, self.open.partitions)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def wait_for_markers(bootstrap_servers: str, partitions: Iterable[TopicPartition], timeout_s: float = CLIENT_TIMEOUT_S) -> None:
    """Wait until ``partitions`` have no open transaction left (LSO = high watermark).

    Ending a transaction returns once the coordinator decided; the markers reach the partitions
    (and their followers: the high watermark covers them) a moment later.
    """
    from confluent_kafka import IsolationLevel, TopicPartition as CTP
    from confluent_kafka.admin import OffsetSpec

    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 0})  # nothing on the demo's terminal
    request = {CTP(tp.topic, tp.partition): OffsetSpec.latest() for tp in partitions}
    deadline = time.monotonic() + timeout_s
    while True:
        latest = {}
        for isolation in (IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED):
            futures = admin.list_offsets(request, isolation_level=isolation, request_timeout=timeout_s)
            latest[isolation] = {(k.topic, k.partition): f.result().offset for k, f in futures.items()}
        if latest[IsolationLevel.READ_COMMITTED] == latest[IsolationLevel.READ_UNCOMMITTED]:
            return
        if time.monotonic() > deadline:
            raise ScenarioError(f"transaction markers did not arrive within {timeout_s}s: {latest}")
        time.sleep(0.05)


def create_topic(bootstrap_servers: str, topic: str, partitions: int = 4, replication_factor: int = 1) -> None:
    """``topic`` made (or there already). A broker's transient refusal is asked again until
    CLIENT_TIMEOUT_S: a Kafka 2.8 controller answered UNKNOWN_SERVER_ERROR (-1) once under CI's load
    (ZooKeeper slow), as Kafka's own clients retry it; an attempt that made the topic before failing
    leaves it there, and the next attempt's TOPIC_ALREADY_EXISTS is success."""
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 0})
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while True:
        future = admin.create_topics([NewTopic(topic, partitions, replication_factor)], operation_timeout=CLIENT_TIMEOUT_S)[topic]
        try:
            future.result(timeout=CLIENT_TIMEOUT_S)
            return
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if "TOPIC_ALREADY_EXISTS" in str(exc):
                return
            transient = error is not None and (error.retriable() or error.code() == KafkaError.UNKNOWN)
            if not transient or time.monotonic() > deadline:
                raise
            log.warning("creating %s: %s; asking again", topic, error)
            time.sleep(0.5)


class _PidLog(logging.Handler):
    """Collects the producer id librdkafka logs when it acquires one (debug=eos)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.pids: list[tuple[int, int]] = []
        self._lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        match = _ACQUIRED_PID.search(record.getMessage())
        if match:
            with self._lock:
                self.pids.append((int(match.group(1)), int(match.group(2))))

    def latest(self) -> tuple[int, int]:
        with self._lock:
            if not self.pids:
                raise ScenarioError("librdkafka did not log an acquired producer id")
            return self.pids[-1]


def _producer(bootstrap_servers: str, **config: object) -> tuple[Producer, _PidLog]:
    handler = _PidLog()
    logger = logging.getLogger(f"harness.scenarios.{uuid.uuid4().hex}")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False  # librdkafka's eos debug lines stay out of test output
    producer = Producer(
        {"bootstrap.servers": bootstrap_servers, "enable.idempotence": True, "debug": "eos", "logger": logger, **config}
    )
    return producer, handler


def _produce(producer: Producer, topic: str, partition: int, records: int) -> Written:
    offsets: list[int] = []
    errors: list[str] = []

    def on_delivery(err, msg):  # noqa: ANN001 - confluent-kafka callback
        if err is not None:
            errors.append(str(err))
        else:
            offsets.append(msg.offset())

    for i in range(records):
        producer.produce(topic, value=f"record-{i}".encode(), partition=partition, on_delivery=on_delivery)
    remaining = producer.flush(CLIENT_TIMEOUT_S)
    if errors or remaining or len(offsets) != records:
        raise ScenarioError(f"producing to {topic}-{partition} failed: {errors or f'{remaining} undelivered'}")
    return Written(topic, partition, min(offsets), max(offsets), records)


def run_idempotent(bootstrap_servers: str, topic: str, partition: int = 0, records: int = 3) -> IdempotentRun:
    """An idempotent producer writes ``records`` records to one partition, then closes."""
    producer, pids = _producer(bootstrap_servers)
    written = _produce(producer, topic, partition, records)
    producer.poll(0)  # serves the log queue
    pid, epoch = pids.latest()
    return IdempotentRun(pid, epoch, written)


def run_transaction(
    bootstrap_servers: str,
    topic: str,
    partitions: list[int],
    outcome: str,
    transactional_id: str | None = None,
    records_per_partition: int = 2,
    timeout_ms: int = OPEN_TRANSACTION_TIMEOUT_MS,
) -> TransactionRun:
    """One transaction writing to ``partitions``, then committed, aborted, or left ``open``.

    An open transaction keeps its producer in the returned run; call ``abort()`` or ``commit()`` on it,
    or let the coordinator abort it after ``timeout_ms``.
    """
    if outcome not in ("open", "committed", "aborted"):
        raise ValueError(f"outcome must be open, committed or aborted, not {outcome!r}")
    tid = transactional_id or unique("tx-scenario")
    producer, pids = _producer(bootstrap_servers, **{"transactional.id": tid, "transaction.timeout.ms": timeout_ms})
    producer.init_transactions(CLIENT_TIMEOUT_S)
    producer.begin_transaction()
    written = [_produce(producer, topic, p, records_per_partition) for p in partitions]
    written_at_ms = int(time.time() * 1000)
    producer.poll(0)
    pid, epoch = pids.latest()
    run = TransactionRun(bootstrap_servers, tid, pid, epoch, timeout_ms, "open", written, written_at_ms, producer)
    if outcome == "committed":
        run.commit()
    elif outcome == "aborted":
        run.abort()
    return run


def inspect_scenario(
    bootstrap_servers: str, topic: str | None = None, prefix: str = "inspect", replication_factor: int = 1
) -> InspectScenario:
    """The layout :class:`InspectScenario` describes, on a new 4-partition topic."""
    topic = topic or unique(prefix)
    create_topic(bootstrap_servers, topic, partitions=4, replication_factor=replication_factor)
    idempotent = run_idempotent(bootstrap_servers, topic, partition=0, records=3)
    committed = run_transaction(bootstrap_servers, topic, [1, 2], "committed", unique(f"{prefix}-committed"))
    aborted = run_transaction(bootstrap_servers, topic, [1], "aborted", unique(f"{prefix}-aborted"))
    opened = run_transaction(bootstrap_servers, topic, [2, 3], "open", unique(f"{prefix}-open"))
    return InspectScenario(bootstrap_servers, topic, idempotent, committed, aborted, opened)
