"""What the test services the harness runs beside the brokers (the OIDC provider, the KDC) share:
one child process in its own session, stopped with SIGTERM (SIGKILL after 10 s), and a context manager."""

from __future__ import annotations

import subprocess
from typing import Any


class ServiceProcess:
    """A subclass's ``start()`` sets ``_process`` and returns ``self``."""

    _process: subprocess.Popen | None = None

    def start(self) -> Any:
        raise NotImplementedError

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
