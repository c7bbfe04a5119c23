"""`kafkatxn exporter` as its own process, scraped over HTTP (shared by the exporter tests)."""

from __future__ import annotations

import base64
import os
import queue
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


class ExporterProcess:
    """``url`` is what the exporter said it serves; ``base`` is scheme://host:port. ``ssl_context`` and
    ``auth`` ((user, password)) are used by :meth:`scrape` when the exporter runs with a web config."""

    def __init__(self, *args: str, env: dict[str, str] | None = None, ssl_context: ssl.SSLContext | None = None,
                 auth: tuple[str, str] | None = None):
        self.ssl_context = ssl_context
        self.auth = auth
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kafkatxn", "exporter", "--listen", "127.0.0.1:0", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
            env={**os.environ, **(env or {})},
        )
        self._stderr: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._drain, daemon=True).start()
        self.stderr_lines: list[str] = []
        self._taken = 0
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
            if "serving http://" in line or "serving https://" in line:
                return line.split("serving ", 1)[1].strip()
        raise AssertionError(f"exporter did not start: {self.stderr_lines}")

    def new_stderr(self, settle_s: float = 0.5) -> str:
        """What the exporter wrote to stderr since the last call (after ``settle_s`` for the pipe)."""
        time.sleep(settle_s)
        while True:
            try:
                self.stderr_lines.append(self._stderr.get_nowait())
            except queue.Empty:
                break
        taken, self._taken = "".join(self.stderr_lines[self._taken:]), len(self.stderr_lines)
        return taken

    @property
    def base(self) -> str:
        scheme, rest = self.url.split("://", 1)
        return f"{scheme}://{rest.split('/', 1)[0]}"

    def get(self, path: str, timeout: float = 30) -> str:
        """The body of ``base + path`` (urllib raises HTTPError for anything but 2xx)."""
        request = urllib.request.Request(self.base + path)
        if self.auth is not None:
            token = base64.b64encode(":".join(self.auth).encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        return urllib.request.urlopen(request, timeout=timeout, context=self.ssl_context).read().decode()

    def scrape(self, path: str = "/metrics") -> tuple[dict[tuple, float], float]:
        """Samples keyed by (name, sorted labels), and how long the scrape took."""
        started = time.monotonic()
        body = self.get(path)
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
