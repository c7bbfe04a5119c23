"""Every command in a real terminal (tmux) at 80 and 120 columns, on the demo's data (a hanging
transaction next to the inspect scenario, a group blocked behind an open one): no line wraps, and no
command the output suggests is split across lines. The terminal decides what wraps: the pane is
captured as displayed (``capture-pane`` without ``-J``) and joined (``-J``), and they must agree.
tests/unit/test_cli_terminal.py checks the same without a terminal, on the fake cluster."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from harness.hanging_maker import make_hanging_transaction
from harness.scenarios import inspect_scenario, unique
from kafkatxn.model import TopicPartition
from tests.support.cli_helpers import run_cli
from tests.support.groups import commit_offset

pytestmark = [pytest.mark.integration, pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed (scripts/test installs it)")]

ROOT = Path(__file__).resolve().parents[2]
WIDTHS = (80, 120)
SUGGESTED = re.compile(r"kafkatxn (?:fence|abort|lso|diagnose|hanging)\b[^;`)\n\"]*")
DONE = "__kafkatxn_done__"


class Terminal:
    """A tmux server of its own (its own socket), one window per command."""

    def __init__(self) -> None:
        self.socket = f"kafkatxn-test-{uuid.uuid4().hex[:8]}"
        self._kept = False

    def tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, "-f", "/dev/null", *args], capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args[:1])} failed ({done.returncode}): {done.stderr.strip()}")
        return done.stdout

    def _keep_server(self) -> None:
        """An idle session for the terminal's whole life: without it the server exits with each
        command's session, and the next new-session can meet the server still shutting down (CI:
        new-session failed once, mid-test)."""
        if not self._kept:
            self.tmux("new-session", "-d", "-s", "keep", "sleep 3600")
            self._kept = True

    def run(self, args: list[str], width: int, errors: Path) -> tuple[list[str], list[str]]:
        """``kafkatxn args`` in a ``width``-column pane (stderr to ``errors``): the lines as displayed and joined."""
        self._keep_server()
        name = uuid.uuid4().hex[:8]
        command = (f"cd {shlex.quote(str(ROOT))} && {shlex.quote(sys.executable)} -m kafkatxn "
                   f"{' '.join(map(shlex.quote, args))} 2>>{shlex.quote(str(errors))}; echo {DONE}; sleep 300")
        self.tmux("new-session", "-d", "-s", name, "-x", str(width), "-y", "50", "env -u COLUMNS -u LINES " + f"sh -c {shlex.quote(command)}")
        try:
            self.tmux("set-option", "-t", name, "history-limit", "10000")
            deadline = time.monotonic() + 90
            while DONE not in self.tmux("capture-pane", "-p", "-t", name, "-S", "-"):
                assert time.monotonic() < deadline, f"{args} did not finish"
                time.sleep(0.2)
            shown = self.tmux("capture-pane", "-p", "-t", name, "-S", "-", "-E", "-").splitlines()
            joined = self.tmux("capture-pane", "-p", "-J", "-t", name, "-S", "-", "-E", "-").splitlines()
            assert int(self.tmux("display-message", "-p", "-t", name, "#{pane_width}")) == width
        finally:
            self.tmux("kill-session", "-t", name)
        end = lambda lines: lines[: next(i for i, x in enumerate(lines) if DONE in x)]  # noqa: E731
        return end(shown), end(joined)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=30)


def test_every_command_renders_at_80_and_120_columns_without_wrapping(capsys, kafka_factory, tmp_path, figures):
    cluster = kafka_factory(1, {"transaction.partition.verification.enable": "false"})
    bootstrap = cluster.bootstrap_servers
    scenario = inspect_scenario(bootstrap, prefix="terminal-demo")
    topic = scenario.topic
    terminal = Terminal()
    try:
        hanging = make_hanging_transaction(bootstrap, unique("orders-app-stuck"), topic, partition=0, transaction_timeout_ms=10_000)
        group = unique("terminal-billing")
        commit_offset(bootstrap, group, TopicPartition(topic, 3), scenario.open.start_offset(TopicPartition(topic, 3)))
        time.sleep(2.5)
        bound = ("--max-transaction-timeout", "2s")
        audit = ("--audit-log", str(tmp_path / "audit.jsonl"))
        commands = [
            ("cluster",), ("producers",), ("producers", "--topic", topic), ("producers", "--summary"),
            ("transactions", "list"), ("transactions", "list", "--describe"),
            ("transactions", "describe", scenario.open.transactional_id, scenario.committed.transactional_id),
            ("lso",), ("lso", "--groups"), ("lso", "--groups", group), ("hanging", *bound), ("check", *bound),
            ("check", "--groups", *bound),
            ("abort", "--max-transaction-timeout", "0s", "--topic", topic, "--partition", "0", "--start-offset", str(hanging.start_offset), "--dry-run", *audit),
            ("abort", "--max-transaction-timeout", "0s", "--topic", topic, "--partition", "3", "--start-offset", str(scenario.open.start_offset(TopicPartition(topic, 3))),
             "--dry-run", *audit),
            ("abort", "--all-hanging", "--dry-run", *bound, *audit),
            ("fence", scenario.open.transactional_id, "--dry-run", *audit),
            ("diagnose", *bound), ("diagnose", "--group", group, *bound), ("config", "show"),
        ]
        connect = ["--bootstrap-server", bootstrap, "--timeout", "20s"]
        for args in commands:
            structured = run_cli(capsys, *args, *connect, "-o", "json").stdout
            suggested = {m.group(0).rstrip(" '.") for m in SUGGESTED.finditer(structured)}
            for width in WIDTHS:
                shown, joined = terminal.run([*args, *connect], width, tmp_path / "stderr.txt")
                assert shown, (args, (tmp_path / "stderr.txt").read_text())
                # The terminal wrapped nothing: each displayed line is a whole line of output.
                assert shown == joined and max(map(len, joined)) <= width, (args, width, [x for x in joined if len(x) > width])
                text = "\n".join(shown)
                for command in suggested:
                    if " ".join(command.split()[:2]) in text:  # shown (not only in a column left out at this width)
                        assert any(command in line for line in shown), (args, width, command, text)
                assert not [x for x in shown if re.search(r"\bkafkatxn$", x.rstrip())], (args, width, text)
                # The columns to act on stay at 80 (hanging's start_offset, which abort takes; a group's
                # numbers), and what a table left out is named with --wide.
                needed = {"hanging": {"start_offset"}, "lso": {"committed", "lso", "hw", "lag"} if "--groups" in args else set()}
                headers = {w for line in shown for w in line.split()}
                assert needed.get(args[0], set()) <= headers, (args, width, text)
                if width == 80 and args[0] in ("hanging", "lso", "producers"):
                    assert "--wide shows them" in " ".join(text.split()), (args, text)
                figures.setdefault(f"commands rendered in tmux at {width} columns", 0)
                figures[f"commands rendered in tmux at {width} columns"] += 1
        # The case the issue names: abort --dry-run's fence suggestion, whole, on a line of its own.
        shown, _ = terminal.run([*commands[14], *connect], 80, tmp_path / "stderr.txt")
        assert any(line.strip() == f"kafkatxn fence '{scenario.open.transactional_id}'" for line in shown), "\n".join(shown)
    finally:
        terminal.close()
        scenario.close()
