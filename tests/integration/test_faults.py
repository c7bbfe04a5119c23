"""Fault matrix for the verdicts (issue 13), on three real brokers.

The transaction log has three partitions with replication factor 1, so the broker leading one of
them really leaves it without a leader when it dies. Two genuinely hanging transactions
(harness/hanging_maker.py) sit on ``t-0`` and ``t-1`` (both led by live brokers): the one on ``t-0``
has its transactional id on the victim's ``__transaction_state`` partition, the one on ``t-1``
elsewhere. Each case asserts the verdict, the exit code, and, where no marker may be written, that
the LSO and high watermark did not move and the audit log says refused.
"""

from __future__ import annotations

import json
import signal
import time
import uuid
from pathlib import Path

import pytest

from harness import hanging_maker as hm
from harness import KafkaCluster
from kafkatxn import auditlog, verdicts
from kafkatxn.config import ConnectionConfig
from kafkatxn.kafka import Cluster
from kafkatxn.model import TopicPartition
from tests.support.cli_helpers import run_cli

pytestmark = [pytest.mark.integration, pytest.mark.cluster3, pytest.mark.destructive]

LOG = "__transaction_state"
LOG_PARTITIONS = 3
BROKER_SETTINGS = {
    "transaction.partition.verification.enable": "false",  # hanging_maker's raw Produce
    "transaction.state.log.replication.factor": "1",  # a dead leader leaves its log partition leaderless
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": str(LOG_PARTITIONS),
}
TIMEOUT = "8s"
MAX_TIMEOUT = "1s"  # candidates at once (the broker's own maximum is 15 minutes)


@pytest.fixture(scope="module")
def faults(kafka_workroot: Path):
    cluster = KafkaCluster(kafka_workroot / f"faults-{uuid.uuid4().hex[:8]}", n_brokers=3, broker_config=BROKER_SETTINGS,
                           name="faults")
    try:
        cluster.start(timeout=120)
    except Exception:
        cluster.save_logs(Path(__file__).resolve().parents[2] / "test-logs" / "startup-faults")
        raise
    yield cluster
    cluster.stop()


@pytest.fixture(autouse=True)
def whole_cluster(faults: KafkaCluster):
    """Each test starts from a whole cluster: every broker back and every partition led, with its
    replicas in sync. An earlier test's victim may have rejoined while the controller still brings
    its partitions back online (ZooKeeper mode: seconds, during which CreateTopics waits)."""
    for node_id in faults.broker_ids:
        if node_id not in faults.running_broker_ids():
            faults.start_broker(node_id)
    wait_until_whole(faults)


def wait_until_whole(cluster: KafkaCluster, timeout: float = 90) -> None:
    from confluent_kafka import KafkaException

    admin = cluster.admin_client()
    deadline = time.monotonic() + timeout
    while True:
        try:
            md = admin.list_topics(timeout=5)
            parts = [p for t in md.topics.values() for p in t.partitions.values()]
            if set(md.brokers) == set(cluster.broker_ids) and all(p.leader >= 0 and set(p.isrs) == set(p.replicas) for p in parts):
                return
            waiting = f"brokers {sorted(md.brokers)}, partitions not whole: " + ", ".join(
                f"{t.topic}-{p.id}" for t in md.topics.values() for p in t.partitions.values()
                if p.leader < 0 or set(p.isrs) != set(p.replicas))[:300]
        except KafkaException as exc:
            waiting = str(exc)
        if time.monotonic() > deadline:
            raise AssertionError(f"{cluster.name} not whole after {timeout} s: {waiting}")
        time.sleep(0.3)


def log_leaders(cluster: KafkaCluster) -> dict[int, int]:
    with Cluster(ConnectionConfig(cluster.bootstrap_servers, timeout_ms=10_000)) as c:
        return {p.partition: p.leader for p in c.metadata(refresh=True).partitions if p.topic == LOG}


def tid_on(partition: int, stem: str) -> str:
    return next(t for t in (f"{stem}-{i}" for i in range(10_000)) if verdicts.coordinator_partition(t, LOG_PARTITIONS) == partition)


def offsets(cluster: KafkaCluster, tp: TopicPartition) -> tuple[int, int]:
    return hm.end_offset(cluster.bootstrap_servers, tp, True), hm.end_offset(cluster.bootstrap_servers, tp, False)


def make_hanging(cluster: KafkaCluster, tid: str, topic: str, partition: int) -> hm.HangingTransaction:
    deadline = time.monotonic() + 60
    while True:  # the log is created on first use: COORDINATOR_NOT_AVAILABLE until then
        try:
            return hm.make_hanging_transaction(cluster.bootstrap_servers, tid, topic, partition)
        except hm.HangingMakerError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def cli(capsys, cluster: KafkaCluster, *args: str):
    return run_cli(capsys, *args, "-b", cluster.bootstrap_servers, "--timeout", TIMEOUT, "-o", "json")


def sections(result) -> dict:
    doc = json.loads(result.stdout) if result.stdout.strip() else {}
    return doc


def wait_for_log_leader(cluster: KafkaCluster, partition: int, want_leader: bool, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            leader = log_leaders(cluster).get(partition, -1)
            if (leader >= 0) == want_leader:
                return
        except Exception:  # noqa: BLE001 - a broker is coming or going
            pass
        time.sleep(0.5)
    raise AssertionError(f"{LOG}-{partition} {'has no' if want_leader else 'still has a'} leader after {timeout}s")


def refused_in_audit(path: Path, tp: TopicPartition) -> list[dict]:
    return [r for r in auditlog.read_records(path)
            if r["record"] == "result" and r["outcome"] == "refused"
            and (r["target"]["topic"], r["target"]["partition"]) == (tp.topic, tp.partition)]


@pytest.fixture(scope="module")
def scene(faults: KafkaCluster):
    suffix = uuid.uuid4().hex[:6]
    topic = faults.create_topic(f"t-{suffix}", partitions=3, replication_factor=1)
    # Make the log exist, then pick the victim: the leader of a log partition that leads no t partition we use.
    # Committed, not left hanging: its id lands on the victim's log partition one time in three, and a
    # hanging one there is undetermined beside on_victim once the victim is gone (CI, session 69).
    hm.write_committed(faults.bootstrap_servers, TopicPartition(topic, 2), [b"warm"], f"warm-{suffix}")
    leaders = log_leaders(faults)
    with Cluster(ConnectionConfig(faults.bootstrap_servers, timeout_ms=10_000)) as c:
        t_leaders = {p.partition: p.leader for p in c.metadata(refresh=True).partitions if p.topic == topic}
    victim_partition, victim = next((lp, b) for lp, b in sorted(leaders.items()) if b not in (t_leaders[0], t_leaders[1]))
    live_partition = next(lp for lp, b in sorted(leaders.items()) if b != victim)
    on_victim = make_hanging(faults, tid_on(victim_partition, f"v-{suffix}"), topic, 0)
    elsewhere = make_hanging(faults, tid_on(live_partition, f"l-{suffix}"), topic, 1)
    time.sleep(1.5)  # older than MAX_TIMEOUT: candidates
    return {"topic": topic, "victim": victim, "victim_partition": victim_partition, "on_victim": on_victim,
            "elsewhere": elsewhere}


def verdict_rows(doc: dict) -> dict[str, list[dict]]:
    return {k: doc.get(k) or [] for k in ("hanging", "long_running", "undetermined")}


@pytest.mark.parametrize("fault", ["killed", "sigstopped"])
def test_transaction_log_leader_lost(capsys, faults: KafkaCluster, scene, tmp_path, fault):
    topic, victim = scene["topic"], scene["victim"]
    on_victim, elsewhere = scene["on_victim"], scene["elsewhere"]
    t0 = TopicPartition(topic, 0)
    # Healthy first: both are hanging (the test can tell the difference).
    healthy = cli(capsys, faults, "hanging", "-t", topic, "--max-transaction-timeout", MAX_TIMEOUT)
    assert healthy.code == 2, healthy.stderr
    rows = verdict_rows(sections(healthy))
    assert {r["producer_id"] for r in rows["hanging"]} >= {on_victim.producer_id, elsewhere.producer_id}, (healthy.stdout, healthy.stderr, scene)

    process = faults._node(victim).process
    if fault == "killed":
        faults.kill_broker(victim)
        wait_for_log_leader(faults, scene["victim_partition"], want_leader=False)
    else:
        process.send_signal(signal.SIGSTOP)
    try:
        before = offsets(faults, t0)
        if fault == "sigstopped":
            # Still in the metadata, accepting connections, never answering: the hung broker eats the
            # deadline. Whatever the command manages, it must not call the transaction hanging.
            frozen = cli(capsys, faults, "hanging", "-t", topic, "-p", "0", "--max-transaction-timeout", MAX_TIMEOUT)
            assert frozen.code == 3, (frozen.stdout, frozen.stderr)
            assert on_victim.producer_id not in {r["producer_id"] for r in verdict_rows(sections(frozen))["hanging"]}
            audit = tmp_path / "frozen-audit.jsonl"
            frozen_abort = cli(capsys, faults, "abort", "--all-hanging", "--max-transaction-timeout", MAX_TIMEOUT, "--yes",
                               "--audit-log", str(audit))
            assert frozen_abort.code == 3, frozen_abort.stderr
            assert offsets(faults, t0) == before
            # Then the controller fences it (broker.session.timeout.ms): its log partition has no leader.
            wait_for_log_leader(faults, scene["victim_partition"], want_leader=False)
            # The frozen run may have released the decidable one on t-1 before the deadline: a fresh one.
            elsewhere = scene["elsewhere"] = make_hanging(faults, on_victim_free_tid(scene), topic, 1)
            time.sleep(1.5)
        result = cli(capsys, faults, "hanging", "-t", topic, "--max-transaction-timeout", MAX_TIMEOUT)
        rows = verdict_rows(sections(result))
        # The one whose coordinator is gone is undetermined, naming the log partition; the other is still found.
        assert {r["producer_id"] for r in rows["undetermined"]} == {on_victim.producer_id}, (result.code, result.stdout, result.stderr)
        assert f"{LOG}-{scene['victim_partition']}" in json.dumps(rows["undetermined"])
        assert elsewhere.producer_id in {r["producer_id"] for r in rows["hanging"]}
        assert on_victim.producer_id not in {r["producer_id"] for r in rows["hanging"]}
        assert result.code == 2  # a positively hanging one is there too
        only_t0 = cli(capsys, faults, "hanging", "-t", topic, "-p", "0", "--max-transaction-timeout", MAX_TIMEOUT)
        assert only_t0.code == 3, only_t0.stderr

        audit = tmp_path / "audit.jsonl"
        aborted = cli(capsys, faults, "abort", "--all-hanging", "--max-transaction-timeout", MAX_TIMEOUT, "--yes",
                      "--audit-log", str(audit))
        assert aborted.code == 3, aborted.stderr
        out = {r["producer_id"]: r for r in json.loads(aborted.stdout)}
        assert out[on_victim.producer_id]["outcome"] == "refused"
        assert out[elsewhere.producer_id]["outcome"] == "aborted"
        assert offsets(faults, t0) == before  # no marker on t-0
        assert refused_in_audit(audit, t0)
    finally:
        if fault == "killed":
            faults.start_broker(victim)
        else:
            process.send_signal(signal.SIGCONT)
            # A broker resumed after being fenced can be fenced again while it catches up (as in
            # test_broker_loss): the rest of the module gets it restarted cleanly, as after a kill.
            faults.kill_broker(victim)
            faults.start_broker(victim)
    wait_for_log_leader(faults, scene["victim_partition"], want_leader=True)
    # Back: the cluster can tell again; the hanging one is found and released.
    deadline = time.monotonic() + 60
    while True:
        again = cli(capsys, faults, "hanging", "-t", topic, "-p", "0", "--max-transaction-timeout", MAX_TIMEOUT)
        if again.code == 2 or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert again.code == 2, again.stderr
    released = cli(capsys, faults, "abort", "--max-transaction-timeout", "0s", "-t", topic, "-p", "0", "--start-offset", str(on_victim.start_offset), "--yes",
                   "--audit-log", str(tmp_path / "audit.jsonl"))
    assert released.code == 0, released.stderr
    lso, hw = offsets(faults, t0)
    assert lso == hw
    # Next parametrization needs its own hanging transactions.
    scene["on_victim"] = make_hanging(faults, tid_on(scene["victim_partition"], f"v2-{uuid.uuid4().hex[:4]}"), topic, 0)
    scene["elsewhere"] = make_hanging(faults, on_victim_free_tid(scene), topic, 1)
    time.sleep(1.5)


def on_victim_free_tid(scene) -> str:
    lp = next(p for p in range(LOG_PARTITIONS) if p != scene["victim_partition"])
    return tid_on(lp, f"l2-{uuid.uuid4().hex[:4]}")


def test_explicit_abort_needs_the_epochs_the_partition_expects(capsys, faults: KafkaCluster, scene, tmp_path):
    topic = scene["topic"]
    h = make_hanging(faults, f"epochs-{uuid.uuid4().hex[:6]}", topic, 2)
    tp = TopicPartition(topic, 2)
    audit = tmp_path / "audit.jsonl"
    with Cluster(ConnectionConfig(faults.bootstrap_servers, timeout_ms=10_000)) as c:
        (state,) = [p for p in c.describe_producers([tp]).value[tp] if p.producer_id == h.producer_id]
    expected = max(state.coordinator_epoch, 0)

    def abort(pid, coordinator_epoch):
        return cli(capsys, faults, "abort", "--max-transaction-timeout", "0s", "-t", topic, "-p", "2", "--producer-id", str(pid), "--producer-epoch",
                   str(h.producer_epoch), "--coordinator-epoch", str(coordinator_epoch), "--yes", "--audit-log", str(audit))

    before = offsets(faults, tp)
    for wrong in (expected + 999, expected - 1 if expected > 0 else None):
        if wrong is None:
            continue  # lower than 0 is -1, which the partition accepts where it reports -1
        refused = abort(h.producer_id, wrong)
        assert refused.code == 3 and f"expected --coordinator-epoch {expected}" in refused.stdout + refused.stderr
        assert offsets(faults, tp) == before
    typo = abort(h.producer_id + 100_000, expected)
    assert typo.code == 3 and "unknown to" in typo.stdout + typo.stderr
    assert offsets(faults, tp) == before
    assert len(refused_in_audit(audit, tp)) >= 2
    done = abort(h.producer_id, expected)
    assert done.code == 0, done.stderr
    assert json.loads(done.stdout)[0]["outcome"] == "aborted"
    repeat = abort(h.producer_id, expected)
    assert repeat.code == 0, repeat.stderr


def create_topic_on(cluster: KafkaCluster, name: str, broker: int) -> TopicPartition:
    """A one-partition topic whose only replica is on ``broker``."""
    from confluent_kafka.admin import NewTopic

    cluster.admin_client().create_topics([NewTopic(name, num_partitions=1, replica_assignment=[[broker]])], operation_timeout=30)[name].result(30)
    cluster._wait_for_leaders(name, 1, time.monotonic() + 30)
    return TopicPartition(name, 0)


def test_prefix_named_topic_unavailable_only_its_own_transaction_is_left(capsys, faults: KafkaCluster, scene, tmp_path):
    """``p-1`` and ``p-10`` both hang; only ``p-10``'s leader is dead: ``p-1`` is released, ``p-10`` untouched."""
    prefix = f"pre{uuid.uuid4().hex[:6]}"
    leaders = log_leaders(faults)
    # The victim leads p-10; both transactional ids live on a log partition another broker leads.
    victim = sorted(faults.broker_ids)[-1]
    live_partition = next(lp for lp, b in sorted(leaders.items()) if b != victim)
    other = next(b for b in sorted(faults.broker_ids) if b != victim)
    one, ten = create_topic_on(faults, f"{prefix}-1", other), create_topic_on(faults, f"{prefix}-10", victim)
    h1 = make_hanging(faults, tid_on(live_partition, f"p1-{prefix}"), one.topic, 0)
    h10 = make_hanging(faults, tid_on(live_partition, f"p10-{prefix}"), ten.topic, 0)
    time.sleep(1.5)
    healthy = cli(capsys, faults, "hanging", "-t", one.topic, "-t", ten.topic, "--max-transaction-timeout", MAX_TIMEOUT)
    assert healthy.code == 2, healthy.stderr
    assert {r["producer_id"] for r in verdict_rows(sections(healthy))["hanging"]} == {h1.producer_id, h10.producer_id}
    before_ten = offsets(faults, ten)
    assert before_ten[0] < before_ten[1]  # pinned by the open transaction
    faults.kill_broker(victim)
    try:
        result = cli(capsys, faults, "hanging", "-t", one.topic, "-t", ten.topic, "--max-transaction-timeout", MAX_TIMEOUT)
        rows = verdict_rows(sections(result))
        assert result.code == 2, (result.stdout, result.stderr)  # a hanging one was found
        assert [(r["topic"], r["producer_id"]) for r in rows["hanging"]] == [(one.topic, h1.producer_id)], result.stdout
        assert h10.producer_id not in {r["producer_id"] for rs in rows.values() for r in rs if r["topic"] == one.topic}
        assert f"{ten.topic}-0" in result.stderr, result.stderr  # missing: named exactly, not as p-1
        assert f"{one.topic}-0" not in result.stderr.replace(f"{ten.topic}-0", ""), result.stderr

        audit = tmp_path / "audit.jsonl"
        aborted = cli(capsys, faults, "abort", "--all-hanging", "--max-transaction-timeout", MAX_TIMEOUT, "--yes",
                      "--audit-log", str(audit))
        assert aborted.code == 3, (aborted.stdout, aborted.stderr)  # p-10 could not be looked at
        out = json.loads(aborted.stdout)
        mine = [r for r in out if r["topic"] in (one.topic, ten.topic)]
        assert [(r["topic"], r["producer_id"], r["outcome"]) for r in mine] == [(one.topic, h1.producer_id, "aborted")], aborted.stdout
        lso, hw = offsets(faults, one)
        assert lso == hw
        results = [r for r in auditlog.read_records(audit) if r["record"] == "result" and r["target"]["topic"] in (one.topic, ten.topic)]
        assert [(r["target"]["topic"], r["outcome"]) for r in results] == [(one.topic, "aborted")], results
    finally:
        faults.start_broker(victim)
    deadline = time.monotonic() + 60
    while True:
        try:
            after_ten = offsets(faults, ten)
            break
        except Exception:  # noqa: BLE001 - leader coming back
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    assert after_ten == before_ten  # no marker was written on p-10
    back = cli(capsys, faults, "hanging", "-t", ten.topic, "--max-transaction-timeout", MAX_TIMEOUT)
    assert back.code == 2 and [r["producer_id"] for r in verdict_rows(sections(back))["hanging"]] == [h10.producer_id], back.stderr


def run_in_pty(args: list[str], prompt: str, answer: str, wait_s: float, timeout: float = 90) -> tuple[int, str, str]:
    """Run ``python -m kafkatxn args`` with a terminal on stdin and stderr; answer ``prompt`` after ``wait_s``."""
    import os
    import select
    import subprocess
    import sys

    master, slave = os.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "kafkatxn", *args], stdin=slave, stderr=slave,
                            stdout=subprocess.PIPE, close_fds=True)
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + timeout
    answered = False
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                seen += chunk
            if not answered and prompt.encode() in seen:
                time.sleep(wait_s)  # longer than --timeout at the prompt
                os.write(master, answer.encode() + b"\n")
                answered = True
            if proc.poll() is not None and not ready:
                break
        out = proc.communicate(timeout=max(1, deadline - time.monotonic()))[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert answered, seen.decode(errors="replace")
    return proc.returncode, out.decode(), seen.decode(errors="replace")


def test_confirmation_slower_than_the_timeout_then_acts(faults: KafkaCluster, scene, tmp_path):
    """The deadline restarts after the prompt: answering after longer than --timeout still aborts."""
    topic = faults.create_topic(f"slow-{uuid.uuid4().hex[:6]}", partitions=1, replication_factor=1)
    tp = TopicPartition(topic, 0)
    h = make_hanging(faults, f"slow-{uuid.uuid4().hex[:6]}", topic, 0)
    lso, hw = offsets(faults, tp)
    assert lso == h.start_offset < hw
    audit = tmp_path / "audit.jsonl"
    code, out, terminal = run_in_pty(
        ["-b", faults.bootstrap_servers, "abort", "--max-transaction-timeout", "0s", "-t", topic, "-p", "0", "--start-offset", str(h.start_offset),
         "--timeout", "5s", "--audit-log", str(audit), "-o", "json"],
        prompt="Write these ABORT markers?", answer="y", wait_s=8)
    assert code == 0, (out, terminal)
    assert [(r["producer_id"], r["outcome"]) for r in json.loads(out)] == [(h.producer_id, "aborted")], (out, terminal)
    lso_after, hw_after = offsets(faults, tp)
    assert lso_after == hw_after > hw - 1  # the LSO reached the high watermark (the marker is one more record)
    mine = [r for r in auditlog.read_records(audit) if r["target"].get("producer_id") in (None, h.producer_id)]
    assert [r["record"] for r in mine] == ["intent", "result"], mine
    assert mine[1]["outcome"] == "aborted"


def wait_for_isr(cluster: KafkaCluster, tp: TopicPartition, want: list[int], timeout: float = 60, seen_by: int | None = None) -> None:
    """Until the ISR is ``want`` in the metadata of broker ``seen_by`` (any broker's where None).

    In KRaft the controller shrinks the ISR of a fenced broker's partitions and each broker applies it
    from the metadata log when it gets there: another broker's answer can be ahead of the leader's."""
    deadline = time.monotonic() + timeout
    isr = None
    while time.monotonic() < deadline:
        if seen_by is None:
            meta = cluster.admin_client().list_topics(tp.topic, timeout=10)
        else:
            meta = cluster._metadata_from(cluster._node(seen_by), 10, tp.topic)
        if meta is not None:
            isr = sorted(meta.topics[tp.topic].partitions[tp.partition].isrs)
            if isr == sorted(want):
                return
        time.sleep(0.5)
    raise AssertionError(f"ISR of {tp} is {isr}, not {want}, after {timeout}s")


def test_stuck_in_prepare_commit_is_long_running_and_not_aborted(capsys, faults: KafkaCluster, scene, tmp_path):
    """A real producer commits while one partition cannot take its marker: PrepareCommit, never hanging.

    A partition whose only replica is dead cannot be described either, so the open partition here is
    one whose leader lives but refuses the marker: replicas [A, B], min.insync.replicas 2, B killed.
    The coordinator (on a live broker) writes PrepareCommit, the marker to the second partition (on
    C) lands, the one to A is refused with NOT_ENOUGH_REPLICAS and retried until B is back.
    """
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    name = f"prep-{uuid.uuid4().hex[:6]}"
    brokers = sorted(faults.broker_ids)
    b_victim = brokers[-1]
    a, c = brokers[0], brokers[1]
    leaders = log_leaders(faults)
    tid = tid_on(next(lp for lp, b in sorted(leaders.items()) if b != b_victim), f"prep-{name}")
    stuck, done = TopicPartition(f"{name}-stuck", 0), TopicPartition(f"{name}-done", 0)
    futures = faults.admin_client().create_topics(
        [NewTopic(stuck.topic, num_partitions=1, replica_assignment=[[a, b_victim]], config={"min.insync.replicas": "2"}),
         NewTopic(done.topic, num_partitions=1, replica_assignment=[[c]])], operation_timeout=30)
    for f in futures.values():
        f.result(30)
    for tp in (stuck, done):
        faults._wait_for_leaders(tp.topic, 1, time.monotonic() + 30)
    wait_for_isr(faults, stuck, [a, b_victim])
    producer = Producer({"bootstrap.servers": faults.bootstrap_servers, "transactional.id": tid,
                         "transaction.timeout.ms": 60_000, "enable.idempotence": True, "acks": "all"})
    producer.init_transactions(60)
    producer.begin_transaction()
    for tp in (stuck, done):
        for i in range(3):
            producer.produce(tp.topic, f"prep-{i}".encode(), partition=tp.partition)
    assert producer.flush(30) == 0
    faults.kill_broker(b_victim)
    try:
        # The leader refuses the marker's acks=all append once it has the shrunk ISR itself; a leader
        # still applying it would take the marker and wait for B (the transaction no longer open there,
        # the LSO held until B returns), which is not the state this test is about.
        wait_for_isr(faults, stuck, [a], seen_by=a)
        producer.commit_transaction(60)  # returns once PrepareCommit is in the log
        committed = time.monotonic()
        # Its other partition gets its marker after commit_transaction returns: wait for it, bounded.
        marker_deadline = committed + 30
        while (done_offsets := offsets(faults, done))[0] != done_offsets[1] and time.monotonic() < marker_deadline:
            time.sleep(0.1)
        lso_done, hw_done = done_offsets
        assert lso_done == hw_done, done_offsets  # its other partition got its marker
        time.sleep(max(0.0, committed + 1.5 - time.monotonic()))  # older than MAX_TIMEOUT: a candidate
        before = offsets(faults, stuck)
        assert before[0] < before[1], before  # still open on the stuck partition

        # Right after the kill the cluster may still be settling (the killed broker not yet fenced,
        # a leader moving): such a scan is incomplete (exit 3). Ask again until one is complete;
        # no scan may ever call the transaction hanging or undetermined.
        deadline = time.monotonic() + 60
        while True:
            result = cli(capsys, faults, "hanging", "-t", stuck.topic, "--max-transaction-timeout", MAX_TIMEOUT)
            rows = verdict_rows(sections(result))
            assert rows["hanging"] == [] and rows["undetermined"] == [], (result.stdout, result.stderr)
            if result.code != 3 or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert result.code == 1, (result.stdout, result.stderr)
        (row,) = rows["long_running"]
        assert row["transactional_id"] == tid, row
        assert verdicts.REASON_COMPLETING in row["reason"] and "PrepareCommit" in row["reason"], row

        audit = tmp_path / "audit.jsonl"
        refused = cli(capsys, faults, "abort", "--max-transaction-timeout", "0s", "-t", stuck.topic, "-p", "0", "--start-offset", str(before[0]), "--yes",
                      "--audit-log", str(audit))
        assert refused.code == 3, (refused.stdout, refused.stderr)
        assert [r["outcome"] for r in json.loads(refused.stdout)] == ["refused"], refused.stdout
        assert offsets(faults, stuck) == before
        assert refused_in_audit(audit, stuck)
        everything = cli(capsys, faults, "abort", "--all-hanging", "--max-transaction-timeout", MAX_TIMEOUT, "--yes",
                         "--audit-log", str(audit))
        assert stuck.topic not in everything.stdout, everything.stdout  # not planned at all
        assert offsets(faults, stuck) == before
        assert not [r for r in auditlog.read_records(audit) if r["target"].get("topic") == stuck.topic
                    and r.get("outcome") not in (None, "refused")]
    finally:
        faults.start_broker(b_victim)
    # Back: the coordinator's retried marker lands and the commit completes.
    deadline = time.monotonic() + 60
    while True:
        lso, hw = offsets(faults, stuck)
        if lso == hw or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert lso == hw > before[1]
    assert hm.read_values(faults.bootstrap_servers, stuck, True) == [f"prep-{i}".encode() for i in range(3)]
    producer.flush(5)


@pytest.mark.parametrize("move", ["killed", "restarted"])
def test_coordinator_lost_between_plan_and_act(capsys, faults: KafkaCluster, scene, tmp_path, move):
    """The coordinator's broker dies (and maybe comes back) after the plan: the re-check decides, never the plan."""
    from kafkatxn import remedy

    name = f"moved-{move}-{uuid.uuid4().hex[:6]}"
    leaders = log_leaders(faults)
    log_partition, coordinator = next((lp, b) for lp, b in sorted(leaders.items()) if b >= 0)
    host = next(b for b in sorted(faults.broker_ids) if b != coordinator)
    tp = create_topic_on(faults, name, host)
    h = make_hanging(faults, tid_on(log_partition, f"mv-{name}"), tp.topic, 0)
    time.sleep(1.5)
    before = offsets(faults, tp)
    assert before[0] == h.start_offset < before[1]
    planned: list = []

    def move_then_confirm(plan_rows) -> bool:
        planned.extend(plan_rows)
        faults.kill_broker(coordinator)
        wait_for_log_leader(faults, log_partition, want_leader=False)
        if move == "restarted":
            faults.start_broker(coordinator)
            wait_for_log_leader(faults, log_partition, want_leader=True)
            deadline = time.monotonic() + 60  # until the new coordinator has loaded its log and answers
            while cli(capsys, faults, "hanging", "-t", tp.topic, "--max-transaction-timeout", MAX_TIMEOUT).code != 2:
                assert time.monotonic() < deadline, "the restarted coordinator never answered"
                time.sleep(1)
        return True

    audit_path = tmp_path / "audit.jsonl"
    audit = auditlog.AuditLog(audit_path, bootstrap_servers=faults.bootstrap_servers)
    try:
        with Cluster(ConnectionConfig(faults.bootstrap_servers, timeout_ms=20_000)) as c:
            result = remedy.abort(c, [remedy.AbortTarget(tp.topic, 0, start_offset=h.start_offset)], audit=audit,
                                  max_transaction_timeout_ms=0, confirm=move_then_confirm)
        (row,) = result.rows
        assert [r.producer_id for r in planned] == [h.producer_id]  # it was planned on the healthy view
        records = auditlog.read_records(audit_path)
        if move == "killed":
            assert row.outcome is remedy.Outcome.REFUSED, row
            assert "changed since the plan was made" in row.reason and f"{LOG}-{log_partition}" in row.reason, row.reason
            assert offsets(faults, tp) == before  # no marker on the stale view
            assert [r["record"] for r in records] == ["result"] and refused_in_audit(audit_path, tp)  # no intent
            assert result.exit_code == 3
        else:
            assert row.outcome is remedy.Outcome.ABORTED, row
            lso, hw = offsets(faults, tp)
            assert lso == hw > before[1]
            assert [(r["record"], r.get("outcome")) for r in records] == [("intent", None), ("result", "aborted")]
            assert result.exit_code == 0
    finally:
        if coordinator not in faults.running_broker_ids():
            faults.start_broker(coordinator)
    wait_for_log_leader(faults, log_partition, want_leader=True)
    if move == "killed":  # still hanging, and released once its coordinator answers again
        deadline = time.monotonic() + 60
        while (again := cli(capsys, faults, "abort", "--max-transaction-timeout", "0s", "-t", tp.topic, "-p", "0", "--start-offset", str(h.start_offset),
                            "--yes", "--audit-log", str(audit_path))).code != 0:
            assert time.monotonic() < deadline, again.stderr
            time.sleep(1)
        assert [r["outcome"] for r in json.loads(again.stdout)] == ["aborted"]
        lso, hw = offsets(faults, tp)
        assert lso == hw > before[1]
