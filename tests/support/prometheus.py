"""Prometheus and promtool as users run them: Debian's ``prometheus`` package (scripts/test installs
it where it is missing). A :class:`PrometheusServer` runs on 127.0.0.1 in a temporary directory with
short scrape and evaluation intervals, and is killed by the test that started it.

    with PrometheusServer(tmp_path, scrape_configs=[...], rule_files=[rules]) as prom:
        prom.wait_for(lambda: prom.firing("KafkatxnHangingTransaction"), "the alert to fire")
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "monitoring"
ALERTS = MONITORING / "prometheus-alerts.yml"
ALERTS_TEST = MONITORING / "prometheus-alerts.test.yml"
SCRAPE_EXAMPLE = MONITORING / "prometheus.yml"
INSTALL_HINT = "install Debian's prometheus package (scripts/test does: apt-get install -y prometheus)"


def binary(name: str) -> str:
    """The path of ``prometheus`` or ``promtool``; the test is skipped, saying how to install it, without."""
    path = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
    if path is None:
        pytest.skip(f"{name} not found: {INSTALL_HINT}")
    return path


def promtool(*args: str, stdin: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([binary("promtool"), *args], input=stdin, capture_output=True, text=True, timeout=120,
                          cwd=cwd)


def alert_rules(for_duration: str | None = None) -> dict:
    """The example alert rules, optionally with every ``for:`` shortened (expressions untouched), so a
    live Prometheus fires them within a test's time."""
    doc = yaml.safe_load(ALERTS.read_text())
    if for_duration is not None:
        for group in doc["groups"]:
            group["interval"] = "1s"
            for rule in group["rules"]:
                if "for" in rule:
                    rule["for"] = for_duration
    return doc


def example_job(name: str) -> dict:
    """A scrape job of monitoring/prometheus.yml, by job_name."""
    doc = yaml.safe_load(SCRAPE_EXAMPLE.read_text())
    for job in doc["scrape_configs"]:
        if job["job_name"] == name:
            return job
    raise KeyError(f"{SCRAPE_EXAMPLE} has no job {name!r}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PrometheusServer:
    def __init__(self, workdir: Path, scrape_configs: list[dict], rules: dict | None = None,
                 interval: str = "1s", scrape_timeout: str = "1s"):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        config: dict[str, Any] = {
            "global": {"scrape_interval": interval, "evaluation_interval": interval, "scrape_timeout": scrape_timeout},
            "scrape_configs": scrape_configs,
        }
        if rules is not None:
            rules_file = self.workdir / "rules.yml"
            rules_file.write_text(yaml.safe_dump(rules, sort_keys=False))
            config["rule_files"] = [str(rules_file)]
        self.config_file = self.workdir / "prometheus.yml"
        self.config_file.write_text(yaml.safe_dump(config, sort_keys=False))
        checked = promtool("check", "config", str(self.config_file))
        assert checked.returncode == 0, checked.stdout + checked.stderr
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = self.workdir / "prometheus.log"
        self._log_handle = self.log.open("wb")
        self.proc = subprocess.Popen(
            [binary("prometheus"), f"--config.file={self.config_file}", f"--storage.tsdb.path={self.workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=1h"],
            stdout=self._log_handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.workdir,
        )
        self.wait_for(self._ready, "Prometheus to be ready", timeout=60)

    def __enter__(self) -> "PrometheusServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log_handle.close()

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"prometheus exited with {self.proc.returncode}:\n{self.log_tail()}")
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=5) as response:
                return response.status == 200
        except OSError:
            return False

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:]) if self.log.exists() else ""

    def api(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=10) as response:
            doc = json.load(response)
        assert doc["status"] == "success", doc
        return doc["data"]

    def query(self, expr: str) -> dict[tuple, float]:
        """An instant query: {sorted labels (without __name__): value}."""
        data = self.api("query", query=expr)
        return {tuple(sorted((k, v) for k, v in r["metric"].items() if k != "__name__")): float(r["value"][1])
                for r in data["result"]}

    def alerts(self, name: str | None = None, state: str | None = None) -> list[dict]:
        return [a for a in self.api("alerts")["alerts"]
                if (name is None or a["labels"]["alertname"] == name) and (state is None or a["state"] == state)]

    def firing(self, name: str) -> list[dict]:
        return self.alerts(name, "firing")

    def targets(self, job: str | None = None) -> list[dict]:
        return [t for t in self.api("targets", state="active")["activeTargets"]
                if job is None or t["labels"].get("job") == job]

    def wait_for(self, condition: Callable[[], Any], what: str, timeout: float = 90) -> Any:
        """Poll until ``condition()`` is truthy; returns its value. Fails with Prometheus' state and log."""
        deadline = time.monotonic() + timeout
        while True:
            value = condition()
            if value:
                return value
            if time.monotonic() > deadline:
                state = ""
                try:
                    state = json.dumps({"targets": self.targets(), "alerts": self.alerts()}, indent=1)[:4000]
                except Exception as exc:  # noqa: BLE001 - only for the failure message
                    state = repr(exc)
                raise AssertionError(f"waited {timeout}s for {what}\n{state}\n{self.log_tail()}")
            time.sleep(0.5)
