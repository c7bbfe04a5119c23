"""A real two-phase-commit (KIP-939) transaction left open past the max timeout (issue 13, item 3).

The broker runs with ``transaction.two.phase.commit.enable=true``; the producer is a real client
whose InitProducerId asks for 2PC (see tests/support/two_phase_commit_producer.py for why it is
kafka-python's producer and not Kafka's Java one). Its coordinator records the timeout as
2147483647 ms and never aborts it. kafkatxn must show it as two-phase commit, never as hanging,
and ``fence`` must leave it alone unless the id is named with --allow-two-phase-commit.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest

from harness import hanging_maker as hm
from harness.jars import default_kafka_version
from kafkatxn import auditlog
from kafkatxn.model import TopicPartition
from tests.support import two_phase_commit_producer as tpc
from tests.support.cli_helpers import run_cli

pytestmark = [
    pytest.mark.integration,
    pytest.mark.destructive,
    pytest.mark.skipif(int(default_kafka_version().split(".")[0]) < 4,
                       reason="two-phase commit (KIP-939) needs a Kafka 4.x broker"),
]

MAX_TIMEOUT_MS = 3000  # the broker's transaction.max.timeout.ms: the 2PC transaction outlives it
TWO_PC_TIMEOUT_MS = 2147483647


@pytest.fixture(scope="module")
def two_pc_cluster(kafka_workroot):
    from harness import KafkaCluster

    cluster = KafkaCluster(
        kafka_workroot / f"two-pc-{uuid.uuid4().hex[:8]}",
        n_brokers=1,
        broker_config={**tpc.BROKER_SETTINGS, "transaction.max.timeout.ms": str(MAX_TIMEOUT_MS),
                       "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"},
        name="two-pc",
    )
    cluster.start(timeout=120)
    yield cluster
    cluster.stop()


def cli(capsys, cluster, *args: str):
    return run_cli(capsys, *args, "-b", cluster.bootstrap_servers, "--timeout", "10s", "-o", "json")


def offsets(cluster, tp: TopicPartition) -> tuple[int, int]:
    return hm.end_offset(cluster.bootstrap_servers, tp, True), hm.end_offset(cluster.bootstrap_servers, tp, False)


def test_open_two_phase_commit_transaction_is_never_hanging_and_fence_refuses_it(capsys, two_pc_cluster, tmp_path):
    topic = two_pc_cluster.create_topic(f"tpc-{uuid.uuid4().hex[:6]}", partitions=1, replication_factor=1)
    tp = TopicPartition(topic, 0)
    tid = f"xa-{uuid.uuid4().hex[:6]}"
    producer = tpc.open_two_phase_commit_transaction(two_pc_cluster.bootstrap_servers, tid, topic, 0)
    try:
        # Past the broker's max timeout, and past several of its abort-timed-out checks.
        time.sleep(MAX_TIMEOUT_MS / 1000 * 2)

        described = cli(capsys, two_pc_cluster, "transactions", "describe", tid)
        assert described.code == 0, described.stderr
        (row,) = json.loads(described.stdout)
        assert row["state"] == "Ongoing" and row["timeout_ms"] == TWO_PC_TIMEOUT_MS, row  # the coordinator did not abort it
        assert row["two_phase_commit"] is True and row["duration_ms"] > MAX_TIMEOUT_MS, row
        pinned = offsets(two_pc_cluster, tp)
        assert pinned[0] < pinned[1], pinned  # it holds the LSO back

        found = cli(capsys, two_pc_cluster, "hanging", "-t", topic)
        doc = json.loads(found.stdout)
        assert not doc.get("hanging") and not doc.get("undetermined"), (found.stdout, found.stderr)
        (long_running,) = doc["long_running"]
        assert long_running["two_phase_commit"] is True and long_running["transactional_id"] == tid, long_running
        assert found.code == 1, (found.code, found.stderr)  # a long-running finding, not critical, not undetermined

        checked = cli(capsys, two_pc_cluster, "check", "--topic-regex", f"^{topic}$")
        facts = json.loads(checked.stdout)
        assert facts["hanging_transactions"] == 0 and facts["undetermined_transactions"] == 0, facts
        assert facts["open_transactions"] == 1 and facts["transaction_age_max_ms"] == 0, facts  # its age is no alarm
        assert checked.code in (0, 1), (checked.code, checked.stdout, checked.stderr)  # LSO lag may warn; never critical

        audit = tmp_path / "audit.jsonl"
        everything = cli(capsys, two_pc_cluster, "abort", "--all-hanging", "--yes", "--audit-log", str(audit))
        assert everything.code == 0, (everything.stdout, everything.stderr)
        assert offsets(two_pc_cluster, tp) == pinned  # no marker

        refused = cli(capsys, two_pc_cluster, "fence", tid, "--yes", "--audit-log", str(audit))
        assert refused.code == 3, (refused.stdout, refused.stderr)
        assert "two-phase commit" in refused.stdout + refused.stderr
        assert offsets(two_pc_cluster, tp) == pinned  # not fenced, not aborted
        records = [r for r in auditlog.read_records(audit) if r["record"] == "result"]
        assert records and records[-1]["outcome"] == "refused", records

        fenced = cli(capsys, two_pc_cluster, "fence", tid, "--allow-two-phase-commit", "--yes",
                     "--audit-log", str(audit))
        assert fenced.code == 0, (fenced.stdout, fenced.stderr)
        lso, hw = offsets(two_pc_cluster, tp)
        assert lso == hw and hw > pinned[1], (lso, hw, pinned)  # the abort marker released the partition
    finally:
        producer.close(timeout=0)
