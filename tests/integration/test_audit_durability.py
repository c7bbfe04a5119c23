"""Audit records are never lost: the intent is on disk before the action, the result after it; a run
killed in between (SIGKILL) leaves an intent without a result, which the next run reports, once, and
closes as ``interrupted``.

Real ``kafkatxn abort`` and ``kafkatxn fence`` processes against the broker the hanging and remedy
tests share. The test hook tests/support/pause_after_intent (a sitecustomize on PYTHONPATH) makes a run stop
right after its intent is fsynced and say so on stderr; the test kills it there. What the cluster
looks like at each step is read with librdkafka consumers and the facade, not with the command.
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from harness import hanging_maker as hm
from kafkatxn import auditlog
from kafkatxn.config import ConnectionConfig
from kafkatxn.kafka import Cluster
from kafkatxn.model import TopicPartition
from tests.support.cli_helpers import run_cli_subprocess

pytestmark = pytest.mark.integration

PAUSE_HOOK_DIR = str(Path(__file__).resolve().parents[1] / "support" / "pause_after_intent")
HOOK = re.compile(r"kafkatxn: test hook: intent (\w+) is on disk")
FIGURES: collections.Counter[str] = collections.Counter()


@pytest.fixture(scope="module")
def broker(kafka_hanging, request):
    yield kafka_hanging
    lost = FIGURES["intents written"] - FIGURES["intents with one result"]
    line = (f"audit durability: {FIGURES['kills between intent and result']} runs killed between intent and result, "
            f"{FIGURES['records written']} records written, {lost} audit records lost")
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and FIGURES:
        with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
            reporter.write_line(line)


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKATXN_")}
    return {**env, **extra}


def start_paused(*args: str) -> tuple[subprocess.Popen, str]:
    """Start ``kafkatxn args…``; return once its intent is on disk (the hook says so), with its action id."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkatxn", *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        env=clean_env(PYTHONPATH=os.pathsep.join([PAUSE_HOOK_DIR, os.environ.get("PYTHONPATH", "")])),
    )
    seen = []
    deadline = time.monotonic() + 60
    for line in proc.stderr:  # the hook's line comes after the plan, which goes to stderr as well
        seen.append(line)
        match = HOOK.search(line)
        if match:
            return proc, match.group(1)
        if time.monotonic() > deadline:
            break
    proc.kill()
    proc.wait()
    raise AssertionError(f"kafkatxn {args} never reached its intent: {''.join(seen)}")


def kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    FIGURES["kills between intent and result"] += 1


def kafkatxn(broker, audit_path, *args: str):
    return run_cli_subprocess(*args, "-b", broker.bootstrap_servers, "--timeout", "30s", "--audit-log", str(audit_path),
                              env=clean_env())


def warnings_in(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("kafkatxn: warning: audit log")]


def account(records: list[dict]) -> None:
    """Every intent has exactly one result with its action id; counted for the figures."""
    intents = [r["action_id"] for r in records if r["record"] == "intent"]
    results = collections.Counter(r["action_id"] for r in records if r["record"] == "result")
    assert len(set(intents)) == len(intents)
    FIGURES["intents written"] += len(intents)
    FIGURES["intents with one result"] += sum(1 for a in intents if results[a] == 1)
    FIGURES["records written"] += len(records)
    assert all(results[a] == 1 for a in intents), records
    assert set(results) <= set(intents), records  # no result without its intent


def test_abort_killed_after_its_intent_is_reported_once_by_the_next_runs(broker, tmp_path):
    topic = broker.create_topic(f"audit-kill-{uuid.uuid4().hex[:8]}", partitions=1)
    tp = TopicPartition(topic, 0)
    # A committed transaction first: librdkafka waits out a transaction log that is still being created.
    hm.write_committed(broker.bootstrap_servers, tp, [b"before"], f"{topic}-before")
    made = hm.make_hanging_transaction(broker.bootstrap_servers, f"{topic}-tid", topic, 0)
    hm.write_committed(broker.bootstrap_servers, tp, [b"after"], f"{topic}-after")
    audit_path = tmp_path / "audit.jsonl"
    abort = ("abort", "--max-transaction-timeout", "0s", "-t", topic, "-p", "0", "--start-offset", str(made.start_offset), "--yes",
             "-b", broker.bootstrap_servers, "--timeout", "30s", "--audit-log", str(audit_path))

    # Killed twice in a row, each time right after its intent reached the disk.
    killed = []
    for round_ in (1, 2):
        proc, action_id = start_paused(*abort)
        records = auditlog.read_records(audit_path)
        # The intent is on disk before the action: there, and the transaction still open.
        assert records[-1]["record"] == "intent" and records[-1]["action_id"] == action_id
        assert records[-1]["target"]["start_offset"] == made.start_offset and records[-1]["pid"] == proc.pid
        assert hm.end_offset(broker.bootstrap_servers, tp, read_committed=True) == made.start_offset
        kill(proc)
        killed.append((action_id, proc.pid))
        after = auditlog.read_records(audit_path)
        assert after == records  # nothing more was written, nothing torn
        assert [i["action_id"] for i in auditlog.unfinished_intents(after)] == [action_id]  # only the latest is open
        if round_ == 2:  # the second run reported and closed the first kill before acting
            first = [r for r in after if r["action_id"] == killed[0][0]]
            assert [(r["record"], r.get("outcome")) for r in first] == [("intent", None), ("result", "interrupted")]
            assert f"pid {killed[0][1]}" in first[1]["detail"]
    assert hm.end_offset(broker.bootstrap_servers, tp, read_committed=True) == made.start_offset  # never acted

    # A dry run reports the open intent and leaves it open.
    dry = kafkatxn(broker, audit_path, "abort", "--max-transaction-timeout", "0s", "-t", topic, "-p", "0", "--start-offset", str(made.start_offset), "--dry-run")
    assert dry.code == 0, dry.stderr
    (warning,) = warnings_in(dry.stderr)
    assert f"abort {topic}-0 at offset {made.start_offset}" in warning and f"pid {killed[1][1]}" in warning
    assert auditlog.read_records(audit_path) == after

    # The next real run reports it, closes it as interrupted, then acts with its own intent and result.
    done = kafkatxn(broker, audit_path, "abort", "--max-transaction-timeout", "0s", "-t", topic, "-p", "0", "--start-offset", str(made.start_offset), "--yes")
    assert done.code == 0, done.stderr
    assert len(warnings_in(done.stderr)) == 1
    lso = hm.end_offset(broker.bootstrap_servers, tp, read_committed=True)
    assert lso == hm.end_offset(broker.bootstrap_servers, tp, read_committed=False) > made.start_offset
    records = auditlog.read_records(audit_path)
    tail = [(r["record"], r.get("outcome")) for r in records[len(after):]]
    assert tail == [("result", "interrupted"), ("intent", None), ("result", "aborted")]
    intent, result = records[-2:]
    assert intent["action_id"] == result["action_id"] and intent["time_ms"] <= result["time_ms"]
    assert result["state_after"]["last_stable_offset"] == lso

    # Reported once: the run after that has nothing to say about it.
    again = kafkatxn(broker, audit_path, "abort", "--max-transaction-timeout", "0s", "-t", topic, "-p", "0", "--start-offset", str(made.start_offset), "--yes")
    assert again.code == 0 and warnings_in(again.stderr) == [], again.stderr
    final = auditlog.read_records(audit_path)
    assert final == records  # nothing to abort: nothing acted, nothing recorded
    account(final)


def test_fence_killed_after_its_intent_changes_nothing_and_is_reported(broker, tmp_path):
    tid = f"audit-kill-fence-{uuid.uuid4().hex[:8]}"
    topic = broker.create_topic(f"{tid}-topic", partitions=1)
    hm.write_committed(broker.bootstrap_servers, TopicPartition(topic, 0), [b"x"], tid)

    def described():
        with Cluster(ConnectionConfig(broker.bootstrap_servers, timeout_ms=20_000)) as cluster:
            described = cluster.describe_transactions([tid])
        assert not described.missing
        return described.value.found[tid]

    # The commit returns once the coordinator decided (PrepareCommit); it completes after the markers.
    deadline = time.monotonic() + 20
    while (before := described()).state.startswith("Prepare") and time.monotonic() < deadline:
        time.sleep(0.1)
    audit_path = tmp_path / "audit.jsonl"
    proc, action_id = start_paused("fence", tid, "--yes", "-b", broker.bootstrap_servers, "--timeout", "30s",
                                   "--audit-log", str(audit_path))
    (intent,) = auditlog.read_records(audit_path)
    assert (intent["action_id"], intent["target"]) == (action_id, {"transactional_id": tid})
    assert described() == before  # the intent came first: not fenced yet
    kill(proc)
    assert described() == before  # killed before InitProducerId: nothing changed
    assert auditlog.unfinished_intents(auditlog.read_records(audit_path)) == [intent]

    done = kafkatxn(broker, audit_path, "fence", tid, "--yes")
    assert done.code == 0, done.stderr
    (warning,) = warnings_in(done.stderr)
    assert f"fence {tid!r}" in warning and f"pid {proc.pid}" in warning
    fenced = described()
    assert (fenced.producer_id, fenced.producer_epoch) != (before.producer_id, before.producer_epoch)
    records = auditlog.read_records(audit_path)
    assert [(r["record"], r.get("outcome")) for r in records] == [
        ("intent", None), ("result", "interrupted"), ("intent", None), ("result", "fenced"),
    ]
    account(records)
