"""Audit records of destructive actions (abort, fence): one JSON object per line.

Each action writes an **intent** record, flushed and fsynced, before it touches the cluster, and a
**result** record after; both carry the same ``action_id``. An intent without a result means the
process ended in between (killed, lost power), so the cluster may or may not have changed: the next
run of a destructive command reports it (:func:`unfinished_intents`) and closes it with an
``interrupted`` result, so each such gap is reported once and the log stays a complete history.
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import getpass
import json
import os
import socket
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from kafkatxn.config import state_dir
from kafkatxn.errors import UsageError
from kafkatxn.plain import to_plain

INTENT = "intent"
RESULT = "result"
OUTCOME_INTERRUPTED = "interrupted"

def default_path() -> Path:
    return state_dir() / "audit.jsonl"


def current_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no login name (containers): the uid still says who
        return f"uid:{os.getuid()}"


def _now() -> tuple[str, int]:
    now_ms = int(time.time() * 1000)
    iso = _dt.datetime.fromtimestamp(now_ms / 1000, _dt.timezone.utc).isoformat(timespec="milliseconds")
    return iso.replace("+00:00", "Z"), now_ms


@dataclass
class UnreadableLines:
    """Lines that are not JSON records, e.g. the torn last line of a process killed mid-write."""

    line_numbers: list[int] = field(default_factory=list)


class AuditLog:
    """Appends records to ``path``; creates the file (mode 600) and its directory on first use."""

    def __init__(self, path: str | Path | None = None, *, cluster_id: str | None = None, bootstrap_servers: str = ""):
        self.path = Path(os.path.expanduser(path)) if path else default_path()  # an unknown ~user left as written
        self.cluster_id = cluster_id
        self.bootstrap_servers = bootstrap_servers
        self.user = current_user()
        self.host = socket.gethostname()

    # -- writing --------------------------------------------------------------------------

    def _append(self, record: dict[str, Any]) -> None:
        line = (json.dumps(to_plain(record), separators=(",", ":"), sort_keys=False) + "\n").encode()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError as exc:
            raise UsageError(f"cannot write the audit log {self.path}: {exc.strerror}; choose another with --audit-log") from None
        try:
            # One write per record under an exclusive lock: concurrent runs never interleave lines.
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    def check_writable(self) -> None:
        """Fail before planning anything when the log cannot be written (acting unaudited is not allowed)."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            os.close(fd)
        except OSError as exc:
            raise UsageError(f"cannot write the audit log {self.path}: {exc.strerror}; choose another with --audit-log") from None

    def _base(self, kind: str, action_id: str, action: str, target: dict[str, Any]) -> dict[str, Any]:
        iso, ms = _now()
        return {
            "record": kind,
            "action_id": action_id,
            "time": iso,
            "time_ms": ms,
            "user": self.user,
            "host": self.host,
            "pid": os.getpid(),
            "cluster_id": self.cluster_id,
            "bootstrap_servers": self.bootstrap_servers,
            "action": action,
            "target": target,
        }

    def intent(self, action: str, target: dict[str, Any], state_before: Any, plan: dict[str, Any] | None = None) -> str:
        """Record what is about to happen (durably, before acting); returns the action id for :meth:`result`."""
        action_id = uuid.uuid4().hex
        record = self._base(INTENT, action_id, action, target)
        record["state_before"] = state_before
        if plan:
            record["plan"] = plan
        self._append(record)
        return action_id

    def result(
        self, action_id: str, action: str, target: dict[str, Any], outcome: str, state_after: Any, detail: str = "",
        cluster_id: str | None = None,
    ) -> None:
        record = self._base(RESULT, action_id, action, target)
        if cluster_id is not None:
            record["cluster_id"] = cluster_id
        record["outcome"] = outcome
        record["state_after"] = state_after
        if detail:
            record["detail"] = detail
        self._append(record)

    # -- reading --------------------------------------------------------------------------

    def records(self, unreadable: UnreadableLines | None = None) -> list[dict[str, Any]]:
        return read_records(self.path, unreadable)

    def close_unfinished(self) -> list[dict[str, Any]]:
        """Intents without a result: report them, and close those whose process is gone.

        An intent of a process that still runs on this host is an action in progress, not a gap:
        it is reported but left open.
        """
        unfinished = unfinished_intents(self.records())
        for intent in unfinished:
            if not _process_is_gone(intent, self.host):
                continue
            self.result(
                intent.get("action_id", ""),
                intent.get("action", ""),
                intent.get("target", {}),
                OUTCOME_INTERRUPTED,
                None,
                detail=f"the run that recorded this intent (pid {intent.get('pid')}) ended without a result; "
                "the cluster may or may not have changed",
                cluster_id=intent.get("cluster_id"),
            )
        return unfinished


def read_records(path: str | Path, unreadable: UnreadableLines | None = None) -> list[dict[str, Any]]:
    """Every record in the log, oldest first; a missing file has none. Torn lines are skipped."""
    try:
        raw = Path(os.path.expanduser(path)).read_bytes()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise UsageError(f"cannot read the audit log {path}: {exc.strerror}") from None
    out = []
    for number, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict):
            if unreadable is not None:
                unreadable.line_numbers.append(number)
            continue
        out.append(record)
    return out


def unfinished_intents(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Intent records that no result record with the same ``action_id`` follows."""
    open_intents: dict[str, dict[str, Any]] = {}
    for record in records:
        action_id = record.get("action_id")
        if record.get("record") == INTENT:
            open_intents[action_id] = record
        elif record.get("record") == RESULT:
            open_intents.pop(action_id, None)
    return list(open_intents.values())


def describe_intent(intent: dict[str, Any]) -> str:
    """Short human form of an intent: ``abort orders-3 at offset 120 (2026-01-02T03:04:05Z, alice@host)``."""
    target = intent.get("target") or {}
    if intent.get("action") == "abort":
        what = f"abort {target.get('topic')}-{target.get('partition')} at offset {target.get('start_offset')}"
    elif intent.get("action") == "fence":
        what = f"fence {target.get('transactional_id')!r}"
    else:
        what = str(intent.get("action"))
    return f"{what} ({intent.get('time')}, {intent.get('user')}@{intent.get('host')} pid {intent.get('pid')})"


def unfinished_warning(path: Path, unfinished: list[dict[str, Any]]) -> str | None:
    """The one-line warning a destructive command prints about earlier actions without a result."""
    if not unfinished:
        return None
    first = describe_intent(unfinished[-1])
    more = f" and {len(unfinished) - 1} more" if len(unfinished) > 1 else ""
    return (
        f"kafkatxn: warning: audit log {path} has {len(unfinished)} action(s) that never recorded a result "
        f"(latest: {first}{more}); check that state before relying on it"
    )


def _process_is_gone(intent: dict[str, Any], this_host: str) -> bool:
    if intent.get("host") != this_host:
        return False  # another host's process: its liveness cannot be checked from here
    pid = intent.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return True
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # exists, owned by someone else
    return False
