"""The exporter under connection load: held half-open connections plus a burst of concurrent scrapes.

    python bench/bench_exporter_load.py                    # 2,000 held, 200 scrapes, 3 rounds, 1 broker
    python bench/bench_exporter_load.py --held 500 --scrapes 50 --rounds 1          # smoke
    python bench/bench_exporter_load.py --source /tmp/bisect-abc --source .          # compare checkouts

Starts one broker with harness/ and a small cluster (``--topics`` topics of 10 partitions, one
transaction left open), then runs ``kafkatxn exporter`` (its defaults: a 10 s snapshot cache, an
8 s scrape timeout) as its own process. Each round:

1. ``--held`` connections are opened and each sends half a request (the request line and one
   header, never the blank line that ends the head) and is then left silent;
2. with those still open, ``--scrapes`` scrapes of ``/metrics`` start at once, each as Prometheus
   asks (its Accept header, gzip) on a connection of its own;
3. each scrape's time is taken from its start to the last byte of a complete 200 answer whose body
   decompresses and carries ``kafkatxn_up 1``. A scrape is lost when it has no such answer within
   ``--deadline`` (10 s, Prometheus' default ``scrape_timeout``); it is waited for up to 3x that to
   see how late it is.

Reference, same exporter, same run: the median of sequential scrapes with nothing else connected
(the ratio says what the load costs each scrape). Peak threads are sampled from /proc while a round
runs; peak RSS is the exporter's VmHWM. ``--source DIR`` runs the exporter from another checkout
(its ``kafkatxn`` package on PYTHONPATH), repeatable, against the same broker: that is how the
regression of issue 39 was bisected. ``--fake-cluster`` starts no broker and serves a fixed
snapshot (the HTTP side alone; ``--old-backlog`` raises the listen backlog of the servers before
the event loop, to tell dropped connections from slow answers). All traffic is on 127.0.0.1.

Exit 1 unless every scrape of every round is answered within ``--deadline``.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchlib import ROOT, peak_rss_mb, print_table, proc_status_kb, scrape  # noqa: E402  (repository on sys.path)
import benchlib  # noqa: E402
from confluent_kafka import Producer  # noqa: E402

from harness import KafkaCluster  # noqa: E402

DEADLINE_S = 10.0
PROMETHEUS_ACCEPT = ("application/openmetrics-text;version=1.0.0;escaping=underscores,application/openmetrics-text;"
                     "version=0.0.1;q=0.9,text/plain;version=1.0.0;escaping=underscores;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.1")


def raise_fd_limit(needed: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        soft = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    if soft < needed:
        raise SystemExit(f"ulimit -n is {soft} (hard {hard}); this benchmark needs {needed}")
    return soft


# --fake-cluster: the exporter's HTTP side over a fixed 50-partition snapshot (a 50 ms gather, a
# 10 s cache), no broker; kafkatxn.exporter_http.ExporterApp exists from 8917011 on. --old-backlog
# sets socketserver's listen backlog, which the servers before the event loop used (5 by default).
FAKE_EXPORTER = """
import socketserver, sys, time
backlog = int(sys.argv[1])
if backlog:
    socketserver.TCPServer.request_queue_size = backlog
from kafkatxn import exporter_http
from kafkatxn.exporter import SnapshotCollector
from kafkatxn.snapshot import ClusterSnapshot, PartitionSample
parts = tuple(PartitionSample(f"t{i // 10}", i % 10, 1, 100 + i, 90 + i) for i in range(50))
def gather():
    time.sleep(0.05)
    return ClusterSnapshot(1_700_000_000_000, 0.05, cluster_id="x", brokers=(1,), replica_brokers=(1,), partitions=parts)
app = exporter_http.ExporterApp(SnapshotCollector(gather, cache_ttl_s=10))
exporter_http.serve(app, "127.0.0.1:0", on_ready=lambda url: print("serving " + url, file=sys.stderr, flush=True))
"""


def start_exporter(source: Path, bootstrap: str | None, old_backlog: int = 0) -> tuple[subprocess.Popen, str]:
    """The exporter of ``source`` against ``bootstrap``, or the fixed-snapshot one (no broker)."""
    command = [sys.executable, "-c", FAKE_EXPORTER, str(old_backlog)] if bootstrap is None else None
    return benchlib.start_exporter(bootstrap or "", command=command, source=source)


class ThreadPeak:
    """Samples the exporter's thread count every 50 ms while running."""

    def __init__(self, pid: int):
        self.pid, self.peak, self._stop = pid, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            try:
                self.peak = max(self.peak, proc_status_kb(self.pid, "Threads"))
            except (OSError, ValueError):
                return

    def __enter__(self) -> "ThreadPeak":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)


async def hold(port: int, opened: list) -> None:
    """One connection with half a request sent, left open until cancelled."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        await writer.drain()
    except OSError:
        return
    opened.append(writer)


async def one_scrape(port: int, started: float, wait_s: float) -> tuple[float | None, str]:
    """Seconds from ``started`` to a complete, valid answer (None when there was none within wait_s) and why."""
    request = (f"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: {PROMETHEUS_ACCEPT}\r\n"
               "Accept-Encoding: gzip\r\nUser-Agent: Prometheus/bench\r\nConnection: close\r\n\r\n").encode()

    async def run() -> tuple[float | None, str]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(request)
            await writer.drain()
            data = await reader.read()  # the exporter closes after one answer
        finally:
            writer.close()
        took = time.perf_counter() - started
        head, _, body = data.partition(b"\r\n\r\n")
        if not head.startswith((b"HTTP/1.0 200", b"HTTP/1.1 200")):
            return None, f"answer {head[:40]!r}"
        if b"content-encoding: gzip" in head.lower():
            body = gzip.decompress(body)
        if b"\nkafkatxn_up 1.0\n" not in body:
            return None, "kafkatxn_up is not 1"
        return took, "ok"

    try:
        return await asyncio.wait_for(run(), wait_s)
    except asyncio.TimeoutError:
        return None, "no answer"
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        return None, f"{type(exc).__name__}: {exc}"


def listen_overflows() -> int:
    """The kernel's count of connections dropped for a full accept queue (all of the host's listeners)."""
    lines = Path("/proc/net/netstat").read_text().splitlines()
    for names, values in zip(lines[::2], lines[1::2]):
        if names.startswith("TcpExt:"):
            return int(dict(zip(names.split()[1:], values.split()[1:]))["ListenOverflows"])
    return 0


async def load_round(port: int, held: int, scrapes: int, deadline_s: float) -> dict:
    overflows = listen_overflows()
    opened: list = []
    t0 = time.perf_counter()
    await asyncio.wait_for(asyncio.gather(*(hold(port, opened) for _ in range(held))), 120)
    open_s = time.perf_counter() - t0
    try:
        started = time.perf_counter()
        results = await asyncio.gather(*(one_scrape(port, started, 3 * deadline_s) for _ in range(scrapes)))
    finally:
        for writer in opened:
            writer.close()
    times = [t for t, _ in results if t is not None]
    answered = sum(1 for t in times if t <= deadline_s)
    reasons = sorted({why for t, why in results if t is None})
    return {"held_open": len(opened), "held_open_s": open_s, "answered_in_deadline": answered,
            "answered_late_or_never": scrapes - answered, "median_s": statistics.median(times) if times else None,
            "slowest_s": max(times) if len(times) == scrapes else None, "failures": reasons,
            "listen_overflows": listen_overflows() - overflows}


def seed(cluster: KafkaCluster, topics: int) -> Producer:
    names = [cluster.create_topic(f"load-{i:02d}", partitions=10, timeout=60) for i in range(topics)]
    txn = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": "bench-load-open",
                    "transaction.timeout.ms": 600_000, "log_level": 0})
    txn.init_transactions(30)
    txn.begin_transaction()
    for name in names:
        txn.produce(name, b"v", partition=0)
    txn.flush(30)
    return txn  # its transaction stays open while the benchmark runs


def measure(source: Path, bootstrap: str | None, args: argparse.Namespace) -> dict:
    exporter, url = start_exporter(source, bootstrap, args.old_backlog)
    port = int(url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])
    try:
        scrape(url)  # warm-up: connections, imports, first gather
        alone = statistics.median(scrape(url)[0] for _ in range(7))
        rounds = []
        with ThreadPeak(exporter.pid) as threads:
            for _ in range(args.rounds):
                rounds.append(asyncio.run(load_round(port, args.held, args.scrapes, args.deadline)))
                time.sleep(1)
        alive = exporter.poll() is None
        rss = peak_rss_mb(exporter.pid)
    finally:
        exporter.terminate()
        exporter.wait(30)
    medians = [r["median_s"] for r in rounds if r["median_s"] is not None]
    slowest = [r["slowest_s"] for r in rounds]
    return {
        "source": str(source),
        "rounds": args.rounds,
        "held_connections": args.held,
        "held_open_per_round": [r["held_open"] for r in rounds],
        "scrapes_per_round": args.scrapes,
        "answered_within_deadline_per_round": [r["answered_in_deadline"] for r in rounds],
        "scrape_median_s_per_round": [round(m, 3) for m in medians],
        "scrape_slowest_s_per_round": [None if s is None else round(s, 3) for s in slowest],
        "scrape_median_s": round(statistics.median(medians), 3) if medians else None,
        "scrape_slowest_s": None if None in slowest else round(max(slowest), 3),
        "scrape_alone_median_s": round(alone, 4),
        "ratio_loaded_median_vs_alone": round(statistics.median(medians) / alone, 1) if medians else None,
        "failures": sorted({f for r in rounds for f in r["failures"]}),
        "host_listen_overflows_per_round": [r["listen_overflows"] for r in rounds],
        "exporter_peak_threads": threads.peak,
        "exporter_peak_rss_mb": round(rss, 1),
        "exporter_alive_after": alive,
        "load_average_1m": round(os.getloadavg()[0], 2),
        "every_scrape_in_deadline": alive and all(r["answered_in_deadline"] == args.scrapes for r in rounds),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--held", type=int, default=2000, help="half-open connections held during each round")
    parser.add_argument("--scrapes", type=int, default=200, help="concurrent scrapes of /metrics per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--topics", type=int, default=5, help="topics of 10 partitions")
    parser.add_argument("--deadline", type=float, default=DEADLINE_S, help="seconds a scrape may take")
    parser.add_argument("--source", type=Path, action="append", help="checkout whose exporter to run (default: this one)")
    parser.add_argument("--fake-cluster", action="store_true", help="no broker: the HTTP side over a fixed snapshot")
    parser.add_argument("--old-backlog", type=int, default=0, help="with --fake-cluster: socketserver's listen backlog")
    args = parser.parse_args()
    raise_fd_limit(args.held + args.scrapes + 1024)
    sources = [s.resolve() for s in (args.source or [ROOT])]
    if args.fake_cluster:
        results = [measure(source, None, args) for source in sources]
        for result in results:
            print_table(result)
        return 0 if all(r["every_scrape_in_deadline"] for r in results) else 1

    workdir = Path(tempfile.mkdtemp(prefix="kafkatxn-bench-exporter-load-"))
    cluster = KafkaCluster(workdir, n_brokers=1, name="bench")
    cluster.start(timeout=120)
    try:
        txn = seed(cluster, args.topics)
        results = [measure(source, cluster.bootstrap_servers, args) for source in sources]
        del txn
    finally:
        cluster.stop()
    for result in results:
        print_table(result)
    return 0 if all(r["every_scrape_in_deadline"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
