"""The minutes before the facts settle, at the brokers' default transaction.max.timeout.ms (15 min):

- a transaction its coordinator does not track (harness/hanging_maker.py; the broker's partition
  verification off) blocks a read_committed group: from the first second it is shown, counted and
  aged as untracked (never OK), diagnose offers abort (never fence), a fence says it is still pinned
  and changes nothing, and once its producer's own 10 s timeout has passed it is hanging and the
  abort diagnose printed releases the group;
- a producer killed with a transaction open and a 10 s timeout: its coordinator aborts it at its
  next cleanup (every 10 s), and check --groups never pages before then.

Offsets and ids come from the clients that made the traffic, never from kafkatxn.
"""

from __future__ import annotations

import json
import shlex
import time

import pytest

from harness import hanging_maker as hm
from harness.scenarios import create_topic, run_transaction, unique
from kafkatxn.config import ConnectionConfig
from kafkatxn.kafka import Cluster
from kafkatxn.model import TopicPartition
from tests.support.cli_helpers import run_cli
from tests.support.groups import commit_offset

pytestmark = pytest.mark.integration

OWN_TIMEOUT_MS = 10_000


def offsets(bootstrap: str, tp: TopicPartition) -> tuple[int, int]:
    """(LSO, HW) as the brokers answer them now."""
    with Cluster(ConnectionConfig(bootstrap_servers=bootstrap, timeout_ms=20_000)) as cluster:
        return cluster.stable_and_high_offsets([tp]).value[tp]


def cli(capsys, bootstrap: str, *args: str):
    return run_cli(capsys, *args, "--bootstrap-server", bootstrap, "--timeout", "20s")


def test_an_untracked_transaction_is_never_ok_fence_is_never_offered_and_abort_releases_it(capsys, kafka_factory, tmp_path):
    broker = kafka_factory(1, **{"transaction.partition.verification.enable": "false"})  # transaction.max.timeout.ms: default
    bootstrap = broker.bootstrap_servers
    topic, group = unique("untracked"), unique("refunds")
    create_topic(bootstrap, topic, partitions=1)
    tp = TopicPartition(topic, 0)
    hm.write_committed(bootstrap, tp, [b"before"], f"{topic}-before")
    made = hm.make_hanging_transaction(bootstrap, f"{topic}-app", topic, 0, transaction_timeout_ms=OWN_TIMEOUT_MS)
    written_ms = int(time.time() * 1000)
    hm.write_committed(bootstrap, tp, [b"after-0", b"after-1"], f"{topic}-after")
    commit_offset(bootstrap, group, tp, made.start_offset)
    pinned = offsets(bootstrap, tp)
    assert pinned[0] == made.start_offset < pinned[1]

    found = cli(capsys, bootstrap, "hanging", "--topic", topic, "-o", "json")
    assert found.code == 1, (found.stdout, found.stderr)  # a finding, not "OK" and not "nothing"
    doc = json.loads(found.stdout)
    assert doc["hanging"] == []
    (row,) = doc["untracked"]
    assert (row["producer_id"], row["start_offset"], row["transactional_id"]) == (made.producer_id, made.start_offset, made.transactional_id)
    assert written_ms - 2_000 <= row["hanging_at_ms"] - OWN_TIMEOUT_MS <= written_ms + 1_000
    assert row["transaction_age_ms"] is not None and row["transaction_age_source"] == "first_record"

    checked = cli(capsys, bootstrap, "check", "--groups", "--group-regex", f"^{group}$", "--topic-regex", f"^{topic}$")
    assert checked.code == 1, checked.stdout
    assert "untracked transaction" in checked.stdout and made.transactional_id in checked.stdout
    assert f"consumer group {group!r} waits on {topic}-0" in checked.stdout
    age = float(checked.stdout.split("transaction_age_max=")[1].split("s")[0])
    assert age > 0

    plan = cli(capsys, bootstrap, "abort", "--all-hanging", "--topic", topic, "--dry-run", "-o", "json")
    assert plan.code == 1, plan.stderr
    (planned,) = json.loads(plan.stdout)
    assert planned["outcome"] == "not hanging yet" and "--max-transaction-timeout 0" in planned["reason"]

    diagnosed = cli(capsys, bootstrap, "diagnose", "--group", group, "-o", "json")
    assert diagnosed.code == 1, diagnosed.stderr
    (t,) = json.loads(diagnosed.stdout)["transactions"]
    assert (t["verdict"], t["action"]) == ("untracked", "abort")
    assert t["command"] == f"kafkatxn abort --topic {topic} --partition 0 --start-offset {made.start_offset}"
    assert not any("fence" in (t[k] or "") for k in ("reason", "command", "release_command", "risk", "release_risk")), t
    assert t["release_command"] == f"{t['command']} --max-transaction-timeout 0"

    # A fence cannot end it (its coordinator does not track the partition), and says so.
    fenced = cli(capsys, bootstrap, "fence", made.transactional_id, "--yes", "--audit-log", str(tmp_path / "audit.jsonl"), "-o", "json")
    assert fenced.code == 3, fenced.stdout
    (f,) = json.loads(fenced.stdout)
    assert f["outcome"] == "still pinned" and f"{topic}-0@{made.start_offset}" in f["reason"]
    assert offsets(bootstrap, tp) == pinned  # nothing written to the partition

    # Past its producer's own timeout it is hanging, and what diagnose says releases the group.
    time.sleep(max(0.0, (written_ms + OWN_TIMEOUT_MS + 1_500 - time.time() * 1000) / 1000))
    found = cli(capsys, bootstrap, "hanging", "--topic", topic, "-o", "json")
    assert found.code == 2, found.stdout
    assert [r["start_offset"] for r in json.loads(found.stdout)["hanging"]] == [made.start_offset]
    diagnosed = cli(capsys, bootstrap, "diagnose", "--group", group, "-o", "json")
    (t,) = json.loads(diagnosed.stdout)["transactions"]
    assert (t["verdict"], t["action"]) == ("hanging", "abort"), t
    argv = shlex.split(t["command"])
    released = cli(capsys, bootstrap, *argv[1:], "--yes", "--audit-log", str(tmp_path / "audit.jsonl"))
    assert released.code == 0, (released.stdout, released.stderr)
    assert offsets(bootstrap, tp)[0] > made.start_offset
    assert hm.read_values(bootstrap, tp, read_committed=True, wait_s=1.5) == [b"before", b"after-0", b"after-1"]


def test_a_killed_producer_is_no_page_before_its_coordinator_had_its_chance(capsys, kafka):
    bootstrap = kafka.bootstrap_servers
    topic, group = unique("killed"), unique("ledger")
    create_topic(bootstrap, topic, partitions=1)
    tp = TopicPartition(topic, 0)
    txn = run_transaction(bootstrap, topic, [0], "open", records_per_partition=3, timeout_ms=OWN_TIMEOUT_MS)
    start = txn.start_offset(tp)
    commit_offset(bootstrap, group, tp, start)
    regex = ("--groups", "--group-regex", f"^{group}$", "--topic-regex", f"^{topic}$")
    # Its producer is never heard from again; its coordinator aborts it at a cleanup 10-20 s on.
    codes, texts = [], []
    deadline = time.monotonic() + 45
    while time.monotonic() < deadline and offsets(bootstrap, tp)[0] <= start:
        checked = cli(capsys, bootstrap, "check", *regex)
        codes.append(checked.code)
        texts.append(checked.stdout)
        time.sleep(0.5)
    assert offsets(bootstrap, tp)[0] > start, "the coordinator did not abort it within 45 s"
    assert 2 not in codes, texts[codes.index(2)]  # no page before the coordinator had its chance
    assert set(codes) <= {0, 1}, list(zip(codes, texts))
    warned = [t for t in texts if "past its own timeout" in t]
    print(f"{len(codes)} samples, {len(warned)} past its own timeout (warning)")
