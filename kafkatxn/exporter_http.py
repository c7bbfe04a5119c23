"""The HTTP side of ``kafkatxn exporter``: ``/metrics``, ``/probe?profile=NAME``, TLS and basic auth.

* ``/metrics`` serves the cluster the command was given (``-b``, ``--profile``, a default profile).
* ``/probe?profile=NAME`` is Prometheus' multi-target exporter pattern (as blackbox_exporter and
  snmp_exporter do it): the cluster of the kafkatxn profile NAME is gathered at scrape time, each
  profile with its own :class:`~kafkatxn.exporter.SnapshotCollector` (cache, single gather, deadline,
  ``kafkatxn_up``). Each profile's collector has its own lock, so a cluster that is down or slow
  delays scrapes of that cluster, and others only once more of its scrapes wait than the server
  has workers (:mod:`kafkatxn.exporter_server`: connections on one event loop, requests on a
  bounded pool; a slow or silent client holds no worker until its request head is complete). Only
  configured profiles can be probed: no request can point the exporter at an arbitrary address.
* ``--web-config-file`` takes the Prometheus exporter-toolkit format (:mod:`kafkatxn.web_config`),
  read again for every connection and request; whether the listener speaks TLS at all is decided
  at start.
  Checks happen before any route runs: a refused client never causes a request to the cluster.
"""

from __future__ import annotations

import logging
import re
import signal
import socket
import threading
from dataclasses import dataclass
from typing import Callable, Iterable
from urllib.parse import parse_qs

from kafkatxn.errors import KafkatxnError, UsageError
from kafkatxn.exporter import SnapshotCollector, build_registry
from kafkatxn.exporter_server import ExporterServer, raise_open_files_limit
from kafkatxn.exposition import make_wsgi_app
from kafkatxn.exposition_shared import SnapshotBodies
from kafkatxn.web_config import BasicAuth, WebConfigError, WebConfigFile  # noqa: F401 - WebConfigError: also the app's API

log = logging.getLogger("kafkatxn.exporter")

PROBE_PATH = "/probe"


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT`` (all interfaces) or ``[IPv6]:PORT``."""
    match = re.fullmatch(r"(?:\[(?P<v6>[^\]]+)\]|(?P<host>[^:\[\]\s]*)):(?P<port>\d{1,5})", text.strip(), re.ASCII)
    if not match or not 0 <= int(match.group("port")) <= 65535:
        raise UsageError(f"bad --listen {text!r}; use HOST:PORT, :PORT or [IPv6]:PORT")
    host = match.group("v6") or match.group("host") or "0.0.0.0"
    return host, int(match.group("port"))


# -- the application ---------------------------------------------------------------------------


@dataclass
class _Target:
    collector: SnapshotCollector
    close: Callable[[], None]
    app: Callable


class ProbeTargets:
    """One collector per kafkatxn profile, made at the profile's first probe and kept; a profile
    that does not resolve is refused each time it is asked for (so profiles added later work)."""

    def __init__(self, resolve: Callable[[str], object],
                 make_collector: Callable[[object], tuple[SnapshotCollector, Callable[[], None]]]):
        self._resolve = resolve
        self._make_collector = make_collector
        self._lock = threading.Lock()
        self._targets: dict[str, _Target] = {}

    def app_for(self, profile: str) -> Callable:
        with self._lock:
            target = self._targets.get(profile)
        if target is not None:
            return target.app
        config = self._resolve(profile)  # UsageError: unknown or unusable profile
        with self._lock:
            target = self._targets.get(profile)
            if target is None:
                collector, close = self._make_collector(config)
                target = _Target(collector, close, _snapshot_app(collector))
                self._targets[profile] = target
            return target.app

    def collector(self, profile: str) -> SnapshotCollector | None:
        with self._lock:
            target = self._targets.get(profile)
        return target.collector if target else None

    def close(self) -> None:
        with self._lock:
            targets, self._targets = list(self._targets.values()), {}
        for target in targets:
            target.close()


def _snapshot_app(collector: SnapshotCollector) -> Callable:
    """/metrics of one collector: concurrent scrapes of one snapshot share one rendered body."""
    return make_wsgi_app(build_registry(collector), SnapshotBodies(collector))


LANDING = """kafkatxn exporter
/metrics                 the cluster given on the command line{metrics_note}
/probe?profile=NAME      the cluster of kafkatxn profile NAME (multi-target exporter pattern)
"""


class ExporterApp:
    """The WSGI application: web-config checks first, then the routes."""

    def __init__(self, metrics: SnapshotCollector | None = None, probes: ProbeTargets | None = None,
                 web_config: WebConfigFile | None = None):
        self.metrics_app = _snapshot_app(metrics) if metrics is not None else None
        self.probes = probes
        self.web_config = web_config
        self.auth = BasicAuth()

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        headers: tuple[tuple[str, str], ...] = ()
        if self.web_config is not None:
            try:
                config = self.web_config.current()
            except WebConfigError as exc:
                log.error("refusing requests: %s", exc)
                return _text(start_response, "500 Internal Server Error", "the exporter's web configuration is unusable; see its log")
            headers = config.headers
            if config.users and not self.auth.check(config.users, environ.get("HTTP_AUTHORIZATION")):
                return _text(start_response, "401 Unauthorized", "Unauthorized", headers,
                             [("WWW-Authenticate", 'Basic realm="kafkatxn exporter", charset="UTF-8"')])

        def respond(status: str, response_headers: list, exc_info=None):
            return start_response(status, list(response_headers) + list(headers), exc_info)

        path = environ.get("PATH_INFO", "/")
        if path == "/metrics":
            if self.metrics_app is None:
                return _text(respond, "404 Not Found", "no cluster was given on the command line; "
                             f"scrape {PROBE_PATH}?profile=NAME")
            return self.metrics_app(environ, respond)
        if path == PROBE_PATH:
            return self._probe(environ, respond)
        if path == "/":
            note = "" if self.metrics_app is not None else " (none given: 404)"
            return _text(respond, "200 OK", LANDING.format(metrics_note=note).rstrip("\n"))
        return _text(respond, "404 Not Found", f"not found: {path[:100]!r}; try /metrics or {PROBE_PATH}?profile=NAME")

    def _probe(self, environ: dict, respond: Callable) -> Iterable[bytes]:
        if self.probes is None:
            return _text(respond, "404 Not Found", "probing is off")
        values = parse_qs(environ.get("QUERY_STRING", "")).get("profile", [])
        if len(values) != 1 or not values[0]:
            return _text(respond, "400 Bad Request", "give exactly one profile: /probe?profile=NAME")
        try:
            app = self.probes.app_for(values[0])
        except UsageError as exc:
            return _text(respond, "400 Bad Request", " ".join(str(exc).splitlines()))
        return app(environ, respond)


def _text(start_response: Callable, status: str, body: str, headers: Iterable[tuple[str, str]] = (),
          extra: Iterable[tuple[str, str]] = ()) -> list[bytes]:
    data = (body + "\n").encode()
    start_response(status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(data))),
                            *extra, *headers])
    return [data]


# -- the server (kafkatxn.exporter_server) -------------------------------------------------


def start_server(app: ExporterApp, host: str, port: int) -> ExporterServer:
    """Start serving in a background thread; ``server.server_port`` has the port."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
    except socket.gaierror as exc:
        raise KafkatxnError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None

    raise_open_files_limit()
    try:
        server = ExporterServer((host, port), family, app, app.web_config)
    except OSError as exc:
        raise KafkatxnError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    server.start()
    return server


def serve(app: ExporterApp, listen: str, on_ready: Callable[[str], None] | None = None,
          stop: threading.Event | None = None, drain_s: float = 0.0) -> None:
    """Serve until SIGINT/SIGTERM (or ``stop`` is set), then stop listening and give the requests
    under way up to ``drain_s`` to finish (a scrape's gather is bounded by its timeout)."""
    host, port = parse_listen(listen)
    server = start_server(app, host, port)
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    shown_host = f"[{host}]" if ":" in host else host
    scheme = "https" if server.tls else "http"
    path = "/metrics" if app.metrics_app is not None else f"{PROBE_PATH}?profile=NAME"
    if on_ready is not None:
        on_ready(f"{scheme}://{shown_host}:{server.server_port}{path}")
    try:
        stop.wait()
    finally:
        server.shutdown()
        if not server.drain(drain_s):
            log.warning("stopping with a request still being served (after %.1f s)", drain_s)
        server.server_close()
