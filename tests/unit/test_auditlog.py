"""The audit log: durable intents, results, and intents left without a result (no broker)."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import textwrap

import pytest

from kafkatxn import auditlog
from kafkatxn.errors import UsageError

TARGET = {"topic": "orders", "partition": 3, "start_offset": 120, "producer_id": 7, "producer_epoch": 2}


def new_log(tmp_path, name="audit.jsonl"):
    return auditlog.AuditLog(tmp_path / "state" / name, cluster_id="cid-1", bootstrap_servers="k:9092")


def test_intent_and_result_carry_who_when_what_and_the_states(tmp_path):
    log = new_log(tmp_path)
    action_id = log.intent("abort", TARGET, {"last_stable_offset": 120}, plan={"leader_id": 1})
    log.result(action_id, "abort", TARGET, "aborted", {"last_stable_offset": 130}, "LSO moved")
    intent, result = log.records()
    assert intent["record"] == "intent" and result["record"] == "result"
    assert intent["action_id"] == result["action_id"] == action_id
    for record in (intent, result):
        assert record["user"] and record["host"] == socket.gethostname()
        assert record["cluster_id"] == "cid-1" and record["action"] == "abort" and record["target"] == TARGET
        assert record["time"].endswith("Z") and record["time_ms"] > 0
    assert intent["state_before"] == {"last_stable_offset": 120} and intent["plan"] == {"leader_id": 1}
    assert (result["outcome"], result["state_after"], result["detail"]) == ("aborted", {"last_stable_offset": 130}, "LSO moved")
    assert result["time_ms"] >= intent["time_ms"]


def test_log_file_is_private_and_its_directory_created(tmp_path):
    log = new_log(tmp_path)
    log.intent("fence", {"transactional_id": "t"}, None)
    assert stat.S_IMODE(os.stat(log.path).st_mode) == 0o600
    assert log.path.parent.is_dir()


def test_intent_is_fsynced_before_intent_returns(tmp_path, monkeypatch):
    log = new_log(tmp_path)
    synced = []
    real_fsync = os.fsync

    def spy(fd):
        synced.append(os.fstat(fd).st_size)
        real_fsync(fd)

    monkeypatch.setattr(auditlog.os, "fsync", spy)
    log.intent("abort", TARGET, None)
    assert synced and synced[-1] == log.path.stat().st_size > 0


def test_records_are_appended_one_line_each(tmp_path):
    log = new_log(tmp_path)
    for i in range(3):
        log.intent("fence", {"transactional_id": f"t{i}"}, None)
    lines = log.path.read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(line)["record"] == "intent" for line in lines)


def test_unfinished_intents_are_those_without_a_result(tmp_path):
    log = new_log(tmp_path)
    done = log.intent("abort", TARGET, None)
    log.result(done, "abort", TARGET, "aborted", None)
    open_id = log.intent("fence", {"transactional_id": "t"}, None)
    assert [r["action_id"] for r in auditlog.unfinished_intents(log.records())] == [open_id]


def test_a_torn_last_line_is_skipped_and_counted(tmp_path):
    log = new_log(tmp_path)
    log.intent("abort", TARGET, None)
    with open(log.path, "ab") as fh:
        fh.write(b'{"record":"intent","action_id":"x","ti')  # killed mid-write
    unreadable = auditlog.UnreadableLines()
    assert len(log.records(unreadable)) == 1
    assert unreadable.line_numbers == [2]


def test_missing_log_has_no_records(tmp_path):
    assert auditlog.read_records(tmp_path / "nope.jsonl") == []


def test_unwritable_log_is_a_usage_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    log = auditlog.AuditLog(blocker / "audit.jsonl")
    with pytest.raises(UsageError, match="--audit-log"):
        log.check_writable()
    with pytest.raises(UsageError):
        log.intent("abort", TARGET, None)


def test_default_path_follows_xdg_state_home(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert auditlog.default_path() == tmp_path / "kafkatxn" / "audit.jsonl"


def test_intent_of_a_killed_process_is_reported_once_then_closed_as_interrupted(tmp_path):
    path = tmp_path / "audit.jsonl"
    script = textwrap.dedent(
        f"""
        import os, signal
        from kafkatxn.auditlog import AuditLog
        AuditLog({str(path)!r}, cluster_id="cid-1").intent("abort", {TARGET!r}, None)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script])
    assert proc.wait(timeout=60) == -signal.SIGKILL

    log = auditlog.AuditLog(path, cluster_id="cid-1")
    unfinished = log.close_unfinished()
    assert [u["pid"] for u in unfinished] == [proc.pid]
    warning = auditlog.unfinished_warning(log.path, unfinished)
    assert "\n" not in warning and "1 action" in warning and "orders-3 at offset 120" in warning and str(path) in warning
    closing = log.records()[-1]
    assert (closing["record"], closing["outcome"], closing["action_id"]) == ("result", "interrupted", unfinished[0]["action_id"])
    assert log.close_unfinished() == []  # reported once


def test_intent_of_a_running_process_or_another_host_is_reported_but_left_open(tmp_path):
    log = new_log(tmp_path)
    log.intent("abort", TARGET, None)  # this very process: still acting
    other = auditlog.AuditLog(log.path, cluster_id="cid-1")
    other.host = "elsewhere"
    other.intent("fence", {"transactional_id": "t"}, None)  # another host: liveness unknown here
    assert len(log.close_unfinished()) == 2
    assert len(auditlog.unfinished_intents(log.records())) == 2


def test_no_warning_without_unfinished_intents(tmp_path):
    assert auditlog.unfinished_warning(tmp_path / "a.jsonl", []) is None
