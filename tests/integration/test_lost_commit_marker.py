"""A COMMIT marker lost in a real unclean leader election, on three brokers (issue 25, deliver 3).

Topic ``lost-*`` has one partition, replicas [A, B], leader A, ``unclean.leader.election.enable``.
A transactional producer (librdkafka) writes its records, replicated to A and B; B is killed; the
transaction commits (the COMMIT marker lands on A only); A is killed; B comes back and, as the only
replica left, is elected leader uncleanly: it has the records but no marker, so an open transaction
pins the LSO while the coordinator, broker C (the leader of the id's ``__transaction_state``
partition, replicated three times), recorded PrepareCommit and CompleteCommit. Then:

- ``hanging`` names the lost commit (exit 2), not a hanging transaction to abort, and ``diagnose``
  tells the group blocked behind it to restore the commit; ``lso`` and ``lso --groups`` say of the
  pinning transaction what ``hanging`` says (``txn_lost_commit``, not ``txn_hanging``);
- ``abort`` refuses it, and nothing is written: the partition's LSO and high watermark are unchanged;
- ``restore-commit`` writes the COMMIT marker: a read_committed consumer reads every committed record;
- the audit log holds the abort's refusal and the restore's intent and result.

The cluster is this module's own (it loses two brokers, one for good) and stopped at its end.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import AdminClient, NewTopic

from harness import KafkaCluster
from kafkatxn.config import ConnectionConfig
from kafkatxn.kafka import Cluster
from kafkatxn.model import TopicPartition
from kafkatxn.verdicts import coordinator_partition
from tests.support.cli_helpers import run_cli
from tests.support.groups import commit_offset

pytestmark = [pytest.mark.integration, pytest.mark.cluster3]

A, B, C = 1, 2, 3
RECORDS = 5
TIMEOUT = ["--timeout", "20s"]
# The records' timestamps (CreateTime): older than the brokers' default transaction.max.timeout.ms
# (15 min), so that the open transaction is idle past it for the commands that read the maximum
# from the brokers (lso takes no --max-transaction-timeout), as hanging's rule needs.
WRITTEN_AGO_MS = 30 * 60_000


def _admin(cluster: KafkaCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})


def _partition(cluster: KafkaCluster, topic: str, timeout: float = 5):
    return _admin(cluster).list_topics(topic, timeout=timeout).topics[topic].partitions[0]


def _wait(what: str, check, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except Exception:  # noqa: BLE001 - a broker coming and going: ask again
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.3)


def _id_coordinated_by(cluster: KafkaCluster, broker: int) -> str:
    """A transactional id whose ``__transaction_state`` partition broker ``broker`` leads."""
    warm = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": f"warm-{uuid.uuid4().hex[:6]}",
                     "log_level": 0})
    warm.init_transactions(60)  # creates the transaction log
    _wait("leaders of the transaction log", lambda: all(
        m.leader > 0 for m in _admin(cluster).list_topics("__transaction_state", timeout=5).topics["__transaction_state"].partitions.values()))
    log = _admin(cluster).list_topics("__transaction_state", timeout=10).topics["__transaction_state"].partitions
    owned = [p for p, m in log.items() if m.leader == broker]
    assert owned, f"broker {broker} leads no __transaction_state partition: {[(p, m.leader) for p, m in log.items()]}"
    return next(t for i in range(100_000) if coordinator_partition(t := f"lost-{i}", len(log)) in owned)


def _read_committed(cluster: KafkaCluster, topic: str, end: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": f"count-{uuid.uuid4().hex}",
                         "isolation.level": "read_committed", "enable.partition.eof": True, "log_level": 0})
    consumer.assign([CTP(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None:
                continue
            if m.error() is None:
                values.append(m.value())
            elif m.offset() >= end or m.error().code() == -191:  # _PARTITION_EOF
                break
    finally:
        consumer.close()
    return values


def _unclean_election(cluster: KafkaCluster, topic: str) -> None:
    """B, out of the ISR, becomes the leader: the controller elects it by the topic's
    unclean.leader.election.enable once A is fenced; asked for explicitly (ElectLeaders, UNCLEAN)
    where the controller leaves the partition leaderless."""
    try:
        _wait("the controller's unclean election of B", lambda: _partition(cluster, topic).leader == B, timeout=12)
    except AssertionError:
        from confluent_kafka import ElectionType

        admin = _admin(cluster)
        admin.elect_leaders(ElectionType.UNCLEAN, [CTP(topic, 0)]).result(timeout=20)
        _wait("the requested unclean election of B", lambda: _partition(cluster, topic).leader == B, timeout=20)


def _offsets(cluster: KafkaCluster, tp: TopicPartition) -> tuple[int, int]:
    with Cluster(ConnectionConfig(cluster.bootstrap_servers, timeout_ms=10_000)) as c:
        return c.stable_and_high_offsets([tp]).value[tp]


@pytest.fixture(scope="module")
def lost(kafka_workroot: Path):
    cluster = KafkaCluster(kafka_workroot / f"lost-marker-{uuid.uuid4().hex[:8]}", n_brokers=3, name="lostmarker")
    cluster.start(timeout=120)
    try:
        yield cluster
    finally:
        cluster.stop()


def test_a_commit_marker_lost_in_an_unclean_election_is_restored_never_aborted(lost: KafkaCluster, capsys, tmp_path):
    started = time.monotonic()

    def step(what: str) -> None:  # shown when the test fails: how far the scenario got, and when
        print(f"[{time.monotonic() - started:5.1f}s] {what}")

    topic = f"lost-{uuid.uuid4().hex[:6]}"
    tp = TopicPartition(topic, 0)
    config = {"unclean.leader.election.enable": "true"}
    admin = _admin(lost)  # kept alive until its futures are done: a collected client fails them
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=-1, replica_assignment=[[A, B]],
                                  config=config)])[topic].result(30)
    _wait("the topic's leader", lambda: _partition(lost, topic).leader == A)
    tid = _id_coordinated_by(lost, C)
    step(f"topic {topic} led by {A}; transactional id {tid} coordinated by {C}")

    producer = Producer({"bootstrap.servers": lost.bootstrap_servers, "transactional.id": tid, "acks": "all", "log_level": 0})
    producer.init_transactions(60)
    producer.begin_transaction()
    written_at = int(time.time() * 1000) - WRITTEN_AGO_MS
    for i in range(RECORDS):
        producer.produce(topic, value=f"committed-{i}".encode(), partition=0, timestamp=written_at)
    assert producer.flush(30) == 0  # acks=all with ISR [A, B]: B has every record

    step("records written to A and B")
    lost.kill_broker(B)
    _wait("B to leave the ISR", lambda: B not in _partition(lost, topic).isrs)
    step("B killed and out of the ISR")
    producer.commit_transaction(60)
    with Cluster(ConnectionConfig(lost.bootstrap_servers, timeout_ms=10_000)) as c:
        _wait("the coordinator to complete the commit",
              lambda: c.describe_transactions([tid]).value.found[tid].state == "CompleteCommit")
    step("committed: the COMMIT marker is on A only")
    lost.kill_broker(A)
    lost.start_broker(B, timeout=60)
    step("A killed, B restarted")
    _unclean_election(lost, topic)
    step("B elected uncleanly")

    _wait("B's high watermark", lambda: _offsets(lost, tp)[1] == RECORDS, timeout=15)
    lso_hw = _offsets(lost, tp)
    assert lso_hw == (0, RECORDS), "B should hold the records without the marker: an open transaction from offset 0"
    assert _read_committed(lost, topic, RECORDS) == []

    step(f"LSO and HW {lso_hw}")
    # hanging names the lost commit; it does not call it hanging.
    found = run_cli(capsys, "hanging", "-b", lost.bootstrap_servers, *TIMEOUT, "--max-transaction-timeout", "0s", "-t", topic,
                    "-o", "json")
    doc = json.loads(found.stdout)
    assert found.code == 2 and doc["hanging"] == [], found.stderr
    (row,) = doc["lost_commit"]
    assert (row["topic"], row["partition"], row["start_offset"], row["transactional_id"]) == (topic, 0, 0, tid)
    assert "lost COMMIT marker" in row["reason"] and "restore-commit" in found.stderr

    # diagnose: the group blocked behind it is told to restore the commit, not to abort.
    group = f"readers-{uuid.uuid4().hex[:6]}"
    commit_offset(lost.bootstrap_servers, group, tp, 0)
    # (diagnose takes a --max-transaction-timeout of 0 for none given: 1ms, so that the rule decides now)
    diagnosed = run_cli(capsys, "diagnose", "-b", lost.bootstrap_servers, *TIMEOUT, "--max-transaction-timeout", "1ms",
                        "--group", group, "-o", "json")
    (txn,) = json.loads(diagnosed.stdout)["transactions"]
    assert (txn["verdict"], txn["action"]) == ("lost_commit", "restore_commit"), diagnosed.stdout + diagnosed.stderr
    assert txn["command"].startswith(f"kafkatxn restore-commit --topic {topic} --partition 0 --start-offset 0")

    # check (and the exporter, from the same snapshot) call it what hanging calls it: never "hanging".
    checked = run_cli(capsys, "check", "-b", lost.bootstrap_servers, *TIMEOUT, "--max-transaction-timeout", "1ms",
                      "--topic-regex", f"^{topic}$", "-o", "json")
    kinds = [f["kind"] for f in json.loads(checked.stdout)["findings"]]
    assert checked.code == 2 and kinds == ["lost_commit_marker"], checked.stdout + checked.stderr

    # lso and lso --groups: the pinning (and blocking) transaction is what hanging calls it, never hanging;
    # the next step they name is restore-commit, never abort.
    restore = f"kafkatxn restore-commit --topic {topic} --partition 0 --start-offset 0"
    lagging = run_cli(capsys, "lso", "-b", lost.bootstrap_servers, *TIMEOUT, "-t", topic, "-o", "json")
    (row,) = json.loads(lagging.stdout)
    assert (row["partition"], row["txn_start_offset"], row["transactional_id"]) == (0, 0, tid), lagging.stdout
    assert row["txn_hanging"] is False, lagging.stdout + lagging.stderr  # lso used to call it hanging
    assert row["txn_lost_commit"] is True, lagging.stdout + lagging.stderr
    assert lagging.code == 2 and restore in lagging.stderr, lagging.stderr
    grouped = run_cli(capsys, "lso", "-b", lost.bootstrap_servers, *TIMEOUT, "--groups", group, "--critical-age", "1000d",
                      "-o", "json")
    (row,) = json.loads(grouped.stdout)
    assert (row["verdict"], row["txn_hanging"]) == ("blocked", False), grouped.stdout + grouped.stderr
    assert row["txn_lost_commit"] is True, grouped.stdout + grouped.stderr
    assert grouped.code == 2 and restore in grouped.stderr, grouped.stderr  # stuck: critical whatever the age threshold

    step("hanging, diagnose, check and lso name the lost commit")
    # abort refuses, and writes nothing.
    audit = tmp_path / "audit.jsonl"
    target = ["-t", topic, "-p", "0", "--start-offset", "0", "--audit-log", str(audit), "--yes", "-o", "json"]
    refused = run_cli(capsys, "abort", "-b", lost.bootstrap_servers, *TIMEOUT, "--max-transaction-timeout", "0s", *target)
    (row,) = json.loads(refused.stdout)
    assert refused.code == 3 and row["outcome"] == "refused" and "restore-commit" in row["reason"], refused.stdout
    assert _offsets(lost, tp) == lso_hw  # no marker of either kind was written

    # restore-commit writes the COMMIT marker: every committed record is readable with read_committed.
    restored = run_cli(capsys, "restore-commit", "-b", lost.bootstrap_servers, *TIMEOUT, "--max-transaction-timeout", "0s", *target)
    (row,) = json.loads(restored.stdout)
    assert restored.code == 0 and row["outcome"] == "commit restored", restored.stdout + restored.stderr
    assert _offsets(lost, tp) == (RECORDS + 1, RECORDS + 1)  # the marker is the one record more
    assert _read_committed(lost, topic, RECORDS + 1) == [f"committed-{i}".encode() for i in range(RECORDS)]

    step("restored and read")
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(r["action"], r["record"], r.get("outcome")) for r in records] == [
        ("abort", "result", "refused"), ("restore-commit", "intent", None), ("restore-commit", "result", "commit restored"),
    ]
    assert records[1]["plan"]["write_txn_markers"]["result"] == "COMMIT"
    print(f"lost commit marker scenario: {time.monotonic() - started:.1f}s after the cluster started")
