"""``kafkatxn audit`` as a user installs it: its own virtualenv, not activated, another ``python3`` on PATH.

Spark starts its Python processes with ``PYSPARK_PYTHON`` or ``python3`` from PATH. Here the
``python3`` on PATH is a bare virtualenv without PySpark or pyarrow, as on a machine where kafkatxn
was installed with pipx; the audit must still run (it pins local mode to its own interpreter), and a
``PYSPARK_PYTHON`` that lacks the packages must be one line naming them and that interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    """A fresh venv with ``pip install '.[spark]'`` (not editable) and a bare venv whose python3 lacks PySpark."""
    root = tmp_path_factory.mktemp("installed")
    venv, bare = root / "venv", root / "bare"
    _run([sys.executable, "-m", "venv", str(venv)], check=True)
    _run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    # --no-compile: pip's byte-compiling of every module (half the install's CPU: PySpark, pandas) is not
    # what is tested; the audit compiles what it imports.
    done = _run([str(venv / "bin" / "pip"), "install", "-q", "--no-compile", f"{REPO}[spark]"], timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV", "SPARK_HOME", "PYTHONPATH")}
    env["PATH"] = f"{bare / 'bin'}{os.pathsep}{env['PATH']}"  # `python3` is the bare one; the venv is not on PATH
    env["HOME"] = str(root)  # no profile of the machine's user
    probe = _run(["python3", "-c", "import pyspark"], env=env)
    assert probe.returncode != 0 and "No module named 'pyspark'" in probe.stderr, "the python3 on PATH must lack PySpark"
    return {"kafkatxn": str(venv / "bin" / "kafkatxn"), "bare_python": str(bare / "bin" / "python3"), "env": env}


@pytest.fixture(scope="module")
def traffic(kafka) -> str:
    """A few committed transactions, so the live log has records."""
    kafka.create_topic("installed-check", partitions=1)
    for i in range(3):
        p = Producer({"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": f"installed-check-{i}"})
        p.init_transactions(30)
        p.begin_transaction()
        p.produce("installed-check", b"x")
        p.commit_transaction(30)
    return kafka.bootstrap_servers


def test_the_installed_cli_audits_a_live_log_with_a_python3_on_path_that_lacks_pyspark(installed, traffic):
    done = _run([installed["kafkatxn"], "audit", "-b", traffic, "-o", "json", "--master", "local[1]"],
                env=installed["env"], timeout=600, cwd="/")
    assert done.returncode in (0, 1, 2), done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "No module named" not in done.stderr, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["records"] > 0
    assert report["transactional_ids"] >= 3


def test_a_pyspark_python_without_the_packages_is_one_line_naming_them_and_it(installed, traffic):
    env = {**installed["env"], "PYSPARK_PYTHON": installed["bare_python"]}  # the user's choice is kept, and checked
    done = _run([installed["kafkatxn"], "audit", "-b", traffic, "-o", "json", "--master", "local[1]"],
                env=env, timeout=600, cwd="/")
    assert done.returncode == 3, done.stderr[-3000:]
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("kafkatxn: error:")]
    assert len(lines) == 1, done.stderr[-3000:]
    assert installed["bare_python"].rsplit("/", 1)[0] in lines[0] or "bare/bin/python3" in lines[0], lines[0]
    assert "pyarrow" in lines[0] and "kafkatxn[spark]" in lines[0], lines[0]
    assert "Traceback" not in done.stderr and done.stdout == ""
