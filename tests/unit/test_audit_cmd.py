"""`kafkatxn audit` asks the cluster before starting Spark."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from kafkatxn.cli import audit_cmd
from kafkatxn.model import ConfigValue, Partial

pytest.importorskip("pyspark")


def test_unreachable_cluster_fails_in_one_line_before_spark_starts(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKATXN_")}
    env["XDG_CONFIG_HOME"] = str(tmp_path)
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "kafkatxn", "audit", "-b", "127.0.0.1:1", "--timeout", "2s"],
        capture_output=True, text=True, timeout=60, env=env,
    )
    assert result.returncode == 3, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines == [lines[0]] and lines[0].startswith("kafkatxn: error: cannot reach any broker"), result.stderr
    assert time.monotonic() - started < 10  # no Spark JVM was started


def test_id_expiration_defaults_to_what_the_brokers_say():
    configs = Partial({
        1: {"transactional.id.expiration.ms": ConfigValue("3600000", "static_broker_config", False)},
        2: {"transactional.id.expiration.ms": ConfigValue("7200000", "static_broker_config", False)},
    })
    ctx = SimpleNamespace(cluster=SimpleNamespace(broker_configs=lambda names: configs))
    assert audit_cmd._broker_id_expiration_ms(ctx) == 7_200_000
    empty = SimpleNamespace(cluster=SimpleNamespace(broker_configs=lambda names: Partial({})))
    assert audit_cmd._broker_id_expiration_ms(empty) is None
