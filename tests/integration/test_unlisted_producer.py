"""A producer id no coordinator lists, on a real broker: its transaction is hanging ("no transactional
id for producer") only once the listing has been asked again between two probes of every
``__transaction_state`` leader, and those probes answer on real brokers (a probe that never answered
would leave every such transaction undetermined). ``abort --all-hanging`` then ends it, through the
same probes in its recheck.

The producer id is one no coordinator ever issued (coordinators hand ids out from 0, a block of 1,000
at a time): its transactional batch goes straight to the leader, which the shared hanging broker
accepts (transaction.partition.verification.enable=false), so no ListTransactions can name it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid

import pytest

from harness import hanging_maker as hm
from kafkatxn import gather, verdicts
from kafkatxn.config import ConnectionConfig
from kafkatxn.kafka import Cluster
from kafkatxn.model import TopicPartition

pytestmark = pytest.mark.integration


def kafkatxn(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkatxn", "-b", bootstrap, *args, "--timeout", "30s", "-o", "json", "--debug"],
                          capture_output=True, text=True, timeout=120)


def test_a_producer_id_no_coordinator_lists_is_hanging_after_the_log_probes_and_abort_ends_it(kafka_hanging, tmp_path):
    bootstrap = kafka_hanging.bootstrap_servers
    topic = f"unlisted-{uuid.uuid4().hex[:8]}"
    kafka_hanging.create_topic(topic, partitions=1)
    tp = TopicPartition(topic, 0)
    producer_id = (1 << 40) + int(uuid.uuid4().hex[:6], 16)
    with Cluster(ConnectionConfig(bootstrap_servers=bootstrap, timeout_ms=30_000)) as cluster:
        # A transactional id initialised makes __transaction_state (on a fresh broker: nothing could be asked).
        for attempt in range(60):  # the first FindCoordinator creates the log: not available until it is loaded
            try:
                hm.init_producer_id(cluster, f"{topic}-first", 10_000)
                break
            except hm.HangingMakerError:
                if attempt == 59:
                    raise
                time.sleep(0.5)
        start = hm.produce_transactional_batch(cluster, tp, producer_id, 0, f"{topic}-never-initialised", [b"a", b"b"])
    time.sleep(1.5)  # older than the --max-transaction-timeout below
    pinned = (hm.end_offset(bootstrap, tp, read_committed=True), hm.end_offset(bootstrap, tp, read_committed=False))
    assert pinned == (start, start + 2)

    found = kafkatxn(bootstrap, "hanging", "--topic", topic, "--max-transaction-timeout", "1s")
    assert found.returncode == 2, found.stderr[-2000:]
    rows = json.loads(found.stdout)["hanging"]
    assert [(r["producer_id"], r["start_offset"], r["reason"]) for r in rows] == [
        (producer_id, start, verdicts.REASON_NO_TRANSACTIONAL_ID)]
    for purpose in (gather.PROBE_BEFORE, gather.PROBE_AFTER):
        assert f"request DescribeTransactions ({purpose}) to broker" in found.stderr
    assert f"request ListTransactions ({gather.LISTED_BETWEEN_PROBES}) to broker" in found.stderr
    # Nothing was written by looking.
    assert (hm.end_offset(bootstrap, tp, read_committed=True), hm.end_offset(bootstrap, tp, read_committed=False)) == pinned

    aborted = kafkatxn(bootstrap, "abort", "--all-hanging", "--topic", topic, "--max-transaction-timeout", "1s", "--yes",
                       "--audit-log", str(tmp_path / "audit.jsonl"))
    assert aborted.returncode == 0, aborted.stderr[-2000:]
    assert [(r["producer_id"], r["outcome"]) for r in json.loads(aborted.stdout)] == [(producer_id, "aborted")]
    assert hm.end_offset(bootstrap, tp, read_committed=True) == hm.end_offset(bootstrap, tp, read_committed=False)
