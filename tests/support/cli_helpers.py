"""Run the kafkatxn CLI from tests and read its output back, in any output format.

    result = run_cli(capsys, "producers", "-b", bootstrap, "-o", "csv")
    assert result.code == 0, result.stderr
    rows = result.records("csv")        # list of {column: text}, the same shape for every format

``records`` turns every format into rows of text cells (json ``null`` -> ``""``, lists joined with
``,``, booleans ``true``/``false``: what csv and table show), so one expectation checks all formats.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import pytest

from kafkatxn.cli.app import main

FORMATS = ("table", "json", "jsonl", "csv", "tsv")


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str

    def records(self, fmt: str) -> list[dict[str, str]]:
        return parse_records(self.stdout, fmt)


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> CliResult:
    """Run ``kafkatxn args…`` in this process (fast); use :func:`run_cli_subprocess` for ``--debug``."""
    capsys.readouterr()  # drop anything printed before
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    out, err = capsys.readouterr()
    return CliResult(code, out, err)


def run_cli_subprocess(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> CliResult:
    proc = subprocess.run(
        [sys.executable, "-m", "kafkatxn", *map(str, args)],
        capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def cell(value: Any) -> str:
    """A json value as csv and table print it."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(cell(v) for v in value)
    if isinstance(value, dict):
        return ",".join(f"{k}={cell(v)}" for k, v in value.items())
    return str(value)


def parse_records(text: str, fmt: str) -> list[dict[str, str]]:
    """Rows of a single-section output in ``fmt``, every value as text."""
    if fmt == "json":
        return [{k: cell(v) for k, v in row.items()} for row in json.loads(text)]
    if fmt == "jsonl":
        return [{k: cell(v) for k, v in json.loads(line).items()} for line in text.splitlines() if line.strip()]
    if fmt in ("csv", "tsv"):
        return list(csv.DictReader(io.StringIO(text), delimiter="," if fmt == "csv" else "\t"))
    if fmt == "table":
        return parse_table(text)
    raise ValueError(f"unknown format {fmt!r}")


def parse_table(text: str) -> list[dict[str, str]]:
    """A ``tabulate`` "simple" table: column spans come from the dashes under the headers."""
    lines = text.splitlines()
    lines = lines[: lines.index("")] if "" in lines else lines  # what follows a table (commands, a note) is not rows
    if len(lines) < 2 or not set(lines[1]) <= {"-", " "}:
        return []  # an empty-result message, not a table
    spans = []
    start = None
    for i, ch in enumerate(lines[1] + " "):
        if ch == "-" and start is None:
            start = i
        elif ch == " " and start is not None:
            spans.append((start, i))
            start = None
    # The last column may run past its dashes; give it the rest of the line.
    spans[-1] = (spans[-1][0], None)  # type: ignore[assignment]
    headers = [lines[0][a:b].strip() for a, b in spans]
    return [dict(zip(headers, (line[a:b].strip() for a, b in spans))) for line in lines[2:] if line.strip()]
