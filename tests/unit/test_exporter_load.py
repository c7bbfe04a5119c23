"""The exporter under many connections (issue 39), without a broker: silent clients hold no thread
and are let go at their head deadline, concurrent scrapes of one snapshot render it once, and the
shared body (identity and gzip) is the body each scrape would have had, its age included.
"""

from __future__ import annotations

import gc
import gzip
import io
import socket
import threading
import time
import urllib.request
import zlib

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kafkatxn import exporter, exporter_http, exporter_metrics, exporter_server, exposition, exposition_shared
from kafkatxn.exporter import SnapshotCollector, build_registry
from kafkatxn.exporter_metrics import ExportOptions
from kafkatxn.exporter_http import ExporterApp
from kafkatxn.snapshot import ClusterSnapshot, PartitionSample

PARTITIONS = tuple(PartitionSample(f"topic-{i // 10}", i % 10, 1, 100 + i, 90 + i) for i in range(200))


def snapshot() -> ClusterSnapshot:
    return ClusterSnapshot(1_700_000_000_000, 0.01, cluster_id="c", brokers=(1,), replica_brokers=(1,), partitions=PARTITIONS)


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def serving():
    stops: list[tuple[threading.Event, threading.Thread]] = []

    def start(app: ExporterApp) -> tuple[str, int]:
        stop, ready, urls = threading.Event(), threading.Event(), []
        thread = threading.Thread(target=exporter_http.serve, args=(app, "127.0.0.1:0"), daemon=True,
                                  kwargs={"on_ready": lambda url: (urls.append(url), ready.set()), "stop": stop})
        thread.start()
        assert ready.wait(10)
        stops.append((stop, thread))
        return urls[0], int(urls[0].rsplit(":", 1)[1].split("/", 1)[0])

    yield start
    for stop, thread in stops:
        stop.set()
        thread.join(15)


def half_request(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # the head never ends
    return sock


def test_silent_clients_hold_no_thread_and_a_scrape_is_answered_meanwhile(serving):
    url, port = serving(ExporterApp(SnapshotCollector(lambda: snapshot(), cache_ttl_s=60)))
    urllib.request.urlopen(url, timeout=10).read()
    threads_before = threading.active_count()
    held = [half_request(port) for _ in range(300)]
    try:
        time.sleep(0.5)  # accepted and read by now
        # A thread per connection made 300 more here.
        assert threading.active_count() - threads_before < exporter_server.WORKERS
        started = time.monotonic()
        with urllib.request.urlopen(url, timeout=10) as response:
            assert response.status == 200 and b"kafkatxn_up 1.0" in response.read()
        assert time.monotonic() - started < 5
    finally:
        for sock in held:
            sock.close()


def test_a_client_that_never_finishes_its_request_head_is_let_go_at_the_deadline(serving, monkeypatch):
    monkeypatch.setattr(exporter_server, "HEAD_TIMEOUT_S", 0.5)
    _url, port = serving(ExporterApp(SnapshotCollector(lambda: snapshot(), cache_ttl_s=60)))
    sock = half_request(port)
    sock.settimeout(5)
    started = time.monotonic()
    assert sock.recv(1024) == b""  # closed by the exporter, not by our timeout
    assert time.monotonic() - started < 3
    sock.close()


def test_concurrent_scrapes_of_one_snapshot_render_it_once(serving, monkeypatch):
    rendered = []
    real = exporter_metrics.metric_families
    monkeypatch.setattr(exporter, "metric_families", lambda *a, **k: rendered.append(1) or real(*a, **k))
    gathers = []
    url, _port = serving(ExporterApp(SnapshotCollector(lambda: gathers.append(1) or snapshot(), cache_ttl_s=60)))
    bodies: list[bytes] = []

    def scrape(gzipped: bool) -> None:
        request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"} if gzipped else {})
        with urllib.request.urlopen(request, timeout=30) as response:
            body = response.read()
            bodies.append(gzip.decompress(body) if gzipped else body)

    scrapes = [threading.Thread(target=scrape, args=(i % 2 == 0,)) for i in range(40)]
    for t in scrapes:
        t.start()
    for t in scrapes:
        t.join(30)
    assert len(bodies) == 40 and len(gathers) == 1
    # One render per format asked for (identity and gzip), not one per scrape.
    assert len(rendered) == 2
    ages = set()
    for body in bodies:
        samples = {s.name: s.value for f in text_string_to_metric_families(body.decode()) for s in f.samples if not s.labels}
        assert samples["kafkatxn_up"] == 1 and samples["kafkatxn_partitions"] == len(PARTITIONS)
        ages.add(samples["kafkatxn_snapshot_age_seconds"])
    assert all(age >= 0 for age in ages)


ACCEPTS = [None, "application/openmetrics-text;version=1.0.0", "text/plain;version=1.0.0;escaping=allow-utf-8",
           "application/openmetrics-text;version=1.0.0;escaping=dots"]


def call(app, accept=None, gzipped=False, query=""):
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "QUERY_STRING": query, "wsgi.input": io.BytesIO()}
    if accept:
        environ["HTTP_ACCEPT"] = accept
    if gzipped:
        environ["HTTP_ACCEPT_ENCODING"] = "gzip"
    seen = {}
    result = app(environ, lambda status, headers: seen.update(headers, status=status))
    body = b"".join(result)
    if hasattr(result, "close"):
        result.close()
    assert int(seen["Content-Length"]) == len(body)
    if gzipped:
        assert seen["Content-Encoding"] == "gzip" and body[:2] == b"\x1f\x8b" and body[8] == 4  # level 1
        body = gzip.decompress(body)  # checks the CRC-32 and length in the trailer
        assert zlib.decompress(b"".join(result)[10:-8], -zlib.MAX_WBITS) == body  # one deflate stream
    return seen["status"], seen.get("Content-Type"), body


@pytest.mark.parametrize("accept", ACCEPTS)
@pytest.mark.parametrize("gzipped", [False, True])
def test_the_shared_body_is_the_body_of_each_scrape_its_age_included(accept, gzipped):
    clock = Clock()
    collector = SnapshotCollector(lambda: snapshot(), ExportOptions(), cache_ttl_s=60, clock=clock)
    shared = exposition.make_wsgi_app(build_registry(collector), exposition_shared.SnapshotBodies(collector))
    alone = exposition.make_wsgi_app(build_registry(collector))  # renders every scrape, as before
    for advance in (0.0, 2.5, 7.25):
        clock.now += advance
        assert call(shared, accept, gzipped) == call(alone, accept, gzipped)
    body = call(shared, accept, gzipped)[2].decode()
    assert any("snapshot" in line and line.endswith(" 9.75") for line in body.splitlines())  # the name escaped or not
    # A name[] filter is answered as before, not from the shared body.
    assert call(shared, accept, gzipped, "name[]=kafkatxn_up") == call(alone, accept, gzipped, "name[]=kafkatxn_up")


def test_a_new_snapshot_is_rendered_again():
    clock = Clock()
    collector = SnapshotCollector(lambda: snapshot(), cache_ttl_s=10, clock=clock)
    bodies = exposition_shared.SnapshotBodies(collector)
    app = exposition.make_wsgi_app(build_registry(collector), bodies)
    call(app)
    call(app)
    clock.now += 11
    call(app)
    assert bodies.renders == 2


@pytest.mark.parametrize("a, b", [(b"", b"x"), (b"abc", b""), (b"hello ", b"world"), (bytes(range(256)) * 40, b"\x00" * 1000)])
def test_crc32_combine_is_zlibs(a, b):
    assert exposition_shared.crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)


def test_requests_waiting_on_a_gather_take_at_most_the_workers(serving):
    release = threading.Event()

    def gather() -> ClusterSnapshot:
        assert release.wait(30)
        return snapshot()

    url, _port = serving(ExporterApp(SnapshotCollector(gather, cache_ttl_s=60)))
    threads_before = threading.active_count()
    answered = []
    scrapes = [threading.Thread(target=lambda: answered.append(urllib.request.urlopen(url, timeout=30).status))
               for _ in range(2 * exporter_server.WORKERS)]
    for t in scrapes:
        t.start()
    time.sleep(1)
    grew = threading.active_count() - threads_before - len(scrapes)
    release.set()
    for t in scrapes:
        t.join(30)
    assert answered == [200] * len(scrapes)
    assert 1 < grew <= exporter_server.WORKERS  # the pool grows with the requests, and no further


def test_a_snapshot_no_later_scrape_is_served_from_keeps_no_body():
    clock = Clock()
    collector = SnapshotCollector(lambda: snapshot(), cache_ttl_s=10, clock=clock)
    bodies = exposition_shared.SnapshotBodies(collector)
    app = exposition.make_wsgi_app(build_registry(collector), bodies)
    call(app, gzipped=True)
    assert bodies._bodies  # kept: the snapshot is served for 10 s more
    clock.now += 10
    call(app, gzipped=True)  # a new gather, age 0: kept
    collector.cache_ttl_s = 0
    call(app, gzipped=True)  # --cache-ttl 0s: every scrape gathers, nothing shares its body later
    assert not bodies._bodies


@pytest.mark.parametrize("accept", ACCEPTS[:3])  # the formats kafkatxn's encoder writes (not escaping=dots)
def test_a_body_of_many_series_is_written_as_it_is_made_and_not_held(monkeypatch, accept):
    """Without gzip, a body over STREAM_SERIES series is written as it is made, for each scrape: its
    Content-Length counted beforehand, nothing kept for the next scrape (250 MB at 20,000 groups x 20
    partitions), and cyclic GC paused until the server closes it; the body is the one rendered whole."""
    monkeypatch.setattr(exposition_shared, "STREAM_SERIES", 10)
    collector = SnapshotCollector(lambda: snapshot(), ExportOptions(), cache_ttl_s=60, clock=Clock())
    bodies = exposition_shared.SnapshotBodies(collector)
    shared = exposition.make_wsgi_app(build_registry(collector), bodies)
    alone = exposition.make_wsgi_app(build_registry(collector))
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "QUERY_STRING": "", "wsgi.input": io.BytesIO()}
    if accept:
        environ["HTTP_ACCEPT"] = accept
    seen: dict = {}
    for _ in range(2):
        seen.clear()
        result = shared(environ, lambda status, headers: seen.update(headers, status=status))
        assert seen["status"] == "200 OK"
        assert not isinstance(result, list) and not bodies._bodies
        assert not gc.isenabled()
        body = b"".join(result)
        result.close()
        assert gc.isenabled()
        assert int(seen["Content-Length"]) == len(body)
        assert body == call(alone, accept)[2]
    assert bodies.renders == 2  # once per scrape
    # gzip, as Prometheus asks: only the compressed pieces are held, and shared.
    assert call(shared, accept, gzipped=True) == call(alone, accept, gzipped=True)
    call(shared, accept, gzipped=True)
    assert bodies._bodies and bodies.renders == 3


@pytest.mark.parametrize("gzipped", [False, True])
def test_the_collection_after_a_render_follows_the_scrapes_last_byte(gzipped):
    """The full collection that ends a render runs when the scrape that rendered has its body (its
    close), not before its first byte: at 5,000 groups it took a tenth of the scrape."""
    collector = SnapshotCollector(lambda: snapshot(), ExportOptions(), cache_ttl_s=60, clock=Clock())
    bodies = exposition_shared.SnapshotBodies(collector)
    app = exposition.make_wsgi_app(build_registry(collector), bodies)
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "QUERY_STRING": "", "wsgi.input": io.BytesIO()}
    if gzipped:
        environ["HTTP_ACCEPT_ENCODING"] = "gzip"
    result = app(environ, lambda status, headers: None)
    assert not gc.isenabled()  # rendered; its body not yet written
    b"".join(result)
    result.close()
    assert gc.isenabled()
    again = app(environ, lambda status, headers: None)  # shared: nothing rendered, nothing paused
    assert gc.isenabled() and bodies.renders == 1
    b"".join(again)


@pytest.mark.parametrize("ttl, gzipped", [(0.0, False), (10.0, False), (10.0, True)])
def test_the_snapshot_served_until_now_is_let_go_before_the_next_gather(ttl, gzipped):
    """At 20,000 groups x 20 partitions a snapshot holds 400,000 group samples: neither the collector
    nor the shared bodies keep the one served until now through the next gather (its peak), whatever
    the cache TTL; a scrape still writing it holds its own."""
    import weakref

    clock = Clock()
    served: list = []
    alive_during_gather: list[bool] = []

    def gather() -> ClusterSnapshot:
        if served:
            gc.collect()
            alive_during_gather.append(served[-1]() is not None)
        snap = snapshot()
        served.append(weakref.ref(snap))
        return snap

    collector = SnapshotCollector(gather, cache_ttl_s=ttl, clock=clock)
    app = exposition.make_wsgi_app(build_registry(collector), exposition_shared.SnapshotBodies(collector))
    call(app, gzipped=gzipped)
    clock.now += 11
    call(app, gzipped=gzipped)
    assert alive_during_gather == [False]


def test_what_the_first_gather_built_to_last_is_frozen_once_after_its_snapshot_is_let_go(monkeypatch):
    """exporter._settle_heap: the heap is frozen (gc.freeze) once, as the second gather begins, when the
    first snapshot is gone (frozen, a snapshot left in a cycle would never be collected); never again."""
    import weakref

    clock = Clock()
    served: list = []
    frozen: list[bool] = []  # per freeze: whether the first snapshot was still alive
    monkeypatch.setattr(exporter.gc, "freeze", lambda: frozen.append(served[0]() is not None))

    def gather() -> ClusterSnapshot:
        snap = snapshot()
        served.append(weakref.ref(snap))
        return snap

    collector = SnapshotCollector(gather, cache_ttl_s=0.0, clock=clock)
    app = exposition.make_wsgi_app(build_registry(collector), exposition_shared.SnapshotBodies(collector))
    for _ in range(4):
        call(app)
        clock.now += 1
    assert len(served) == 4 and frozen == [False]
