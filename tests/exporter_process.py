"""`kafkatxn exporter` as its own process, scraped over HTTP (shared by the exporter tests)."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


class ExporterProcess:
    def __init__(self, *args: str):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kafkatxn", "exporter", "--listen", "127.0.0.1:0", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        )
        self._stderr: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._drain, daemon=True).start()
        self.stderr_lines: list[str] = []
        self.url = self._wait_for_url(30)

    def _drain(self) -> None:
        for line in self.proc.stderr:
            self._stderr.put(line)

    def _wait_for_url(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._stderr.get(timeout=0.2)
            except queue.Empty:
                if self.proc.poll() is not None:
                    break
                continue
            self.stderr_lines.append(line)
            if "serving http://" in line:
                return line.split("serving ", 1)[1].strip()
        raise AssertionError(f"exporter did not start: {self.stderr_lines}")

    def scrape(self) -> tuple[dict[tuple, float], float]:
        """Samples keyed by (name, sorted labels), and how long the scrape took."""
        started = time.monotonic()
        body = urllib.request.urlopen(self.url, timeout=30).read().decode()
        took = time.monotonic() - started
        out = {}
        for family in text_string_to_metric_families(body):
            for s in family.samples:
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
        return out, took

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return -9
