"""The exporter scraped thousands of times while producers and transactions come and go.

    python bench/bench_soak.py                          # 2,000 scrapes, 2 scrapers, 1 broker, 200 partitions
    python bench/bench_soak.py --scrapes 500 --interval 0

Starts one broker (harness/), ``--topics`` topics of 20 partitions, and a background load:
transactional producers, each living for a few transactions before a new transactional.id
replaces it, that commit, abort, or leave a transaction open for a while; an idempotent producer
writing throughout. ``kafkatxn exporter --cache-ttl 0s`` (every scrape a full gather) is scraped
``--scrapes`` times by ``--scrapers`` threads at once, each pausing ``--interval`` seconds.

Every ``--sample-every`` scrapes the exporter's RSS (VmRSS) and open file descriptors are read
from /proc. RSS growth is measured from the end of the warm-up (the first ``--warmup`` scrapes) to
the end; descriptor growth as the median of the second half of the samples after warm-up against
the first half's (a dozen descriptors, one of them a connection that comes and goes). Exit 1 when RSS or descriptors grow by 5 % or more, when a scrape takes longer than its
deadline (``--scrape-timeout``, over HTTP or in ``kafkatxn_scrape_duration_seconds``), fails, or
reports ``kafkatxn_up`` 0.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchlib import open_fds, print_table, rss_mb, scrape, start_exporter  # noqa: E402  (repository on sys.path)
from confluent_kafka import KafkaException, Producer  # noqa: E402

from harness import KafkaCluster  # noqa: E402

PARTITIONS_PER_TOPIC = 20
TARGET_GROWTH = 0.05


def load(bootstrap: str, topics: list[str], stop: threading.Event, counts: dict[str, int]) -> None:
    """Transactions opened, committed, aborted or left open, by producers that come and go."""
    rng = random.Random(16)
    quiet = {"bootstrap.servers": bootstrap, "log_level": 0, "linger.ms": 2}
    idem = Producer({**quiet, "enable.idempotence": True})
    lingering: list[tuple[float, Producer]] = []  # transactions left open, aborted later

    def finish(q: Producer) -> None:
        try:
            q.abort_transaction(30)
            counts["aborted"] += 1
        except KafkaException:  # a later producer took its transactional.id: fenced, as in production
            counts["fenced"] += 1
    for generation in itertools.count():
        if stop.is_set():
            break
        p = Producer({**quiet, "transactional.id": f"soak-{generation % 50}", "transaction.timeout.ms": 60_000})
        p.init_transactions(30)
        counts["producers"] += 1
        for _ in range(rng.randint(1, 5)):
            if stop.is_set():
                break
            p.begin_transaction()
            for _ in range(rng.randint(1, 4)):
                p.produce(rng.choice(topics), b"soak", partition=rng.randrange(PARTITIONS_PER_TOPIC))
                idem.produce(rng.choice(topics), b"idem", partition=rng.randrange(PARTITIONS_PER_TOPIC))
            p.flush(30)
            outcome = rng.random()
            if outcome < 0.1 and len(lingering) < 5:
                lingering.append((time.monotonic() + rng.uniform(2, 10), p))
                counts["left_open"] += 1
                p = None
                break
            if outcome < 0.55:
                p.commit_transaction(30)
                counts["committed"] += 1
            else:
                p.abort_transaction(30)
                counts["aborted"] += 1
        idem.poll(0)
        now = time.monotonic()
        for due, q in [x for x in lingering if x[0] <= now]:
            lingering.remove((due, q))
            finish(q)
        time.sleep(0.02)
    for _due, q in lingering:
        finish(q)
    idem.flush(30)


def active_producer_ids(url: str) -> int:
    """The producer ids with state on the brokers (``kafkatxn_active_producer_ids``, summed)."""
    import urllib.request

    body = urllib.request.urlopen(url, timeout=30).read().decode()
    return int(sum(float(line.rsplit(" ", 1)[1]) for line in body.splitlines()
                   if line.startswith("kafkatxn_active_producer_ids{")))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scrapes", type=int, default=2000)
    parser.add_argument("--scrapers", type=int, default=2, help="threads scraping at once")
    parser.add_argument("--interval", type=float, default=0.05, help="seconds each scraper pauses between scrapes")
    parser.add_argument("--warmup", type=int, default=200, help="scrapes before the baseline sample")
    parser.add_argument("--sample-every", type=int, default=100)
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--scrape-timeout", type=float, default=5.0, help="the exporter's deadline per scrape, s")
    args = parser.parse_args()

    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-soak-") as workdir:
        cluster = KafkaCluster(Path(workdir), 1, name="bench-soak")
        cluster.start(timeout=120)
        stop = threading.Event()
        counts = {"producers": 0, "committed": 0, "aborted": 0, "left_open": 0, "fenced": 0}
        exporter = None
        try:
            bootstrap = cluster.bootstrap_servers
            topics = [cluster.create_topic(f"soak-{i:02d}", partitions=PARTITIONS_PER_TOPIC, timeout=120)
                      for i in range(args.topics)]
            loader = threading.Thread(target=load, args=(bootstrap, topics, stop, counts), daemon=True)
            loader.start()
            exporter, url = start_exporter(bootstrap, "--cache-ttl", "0s", "--scrape-timeout", f"{args.scrape_timeout}s")

            lock = threading.Lock()
            done = itertools.count(1)
            http_s: list[float] = []
            gather_s: list[float] = []
            samples: list[tuple[int, float, int]] = []  # (scrapes done, RSS MB, open fds)
            # What a scrape carries at each sample, to tell a leak from a workload that grows.
            sizes: list[tuple[int, int, int, int]] = []  # (scrapes done, samples, body bytes, active producer ids)

            def scraper() -> None:
                while True:
                    with lock:
                        n = next(done)
                    if n > args.scrapes:
                        return
                    try:
                        took, scalars, n_samples, n_bytes = scrape(url, timeout=args.scrape_timeout * 3)
                    except Exception as exc:  # noqa: BLE001 - counted as a failure, the soak goes on
                        with lock:
                            failures.append(f"scrape {n} failed: {exc}")
                        continue
                    with lock:
                        http_s.append(took)
                        gather_s.append(scalars.get("kafkatxn_scrape_duration_seconds", float("nan")))
                        if scalars.get("kafkatxn_up") != 1:
                            failures.append(f"scrape {n}: kafkatxn_up {scalars.get('kafkatxn_up')}")
                        if n % args.sample_every == 0 or n == args.warmup:
                            samples.append((n, rss_mb(exporter.pid), open_fds(exporter.pid)))
                            sizes.append((n, n_samples, n_bytes, active_producer_ids(url)))
                    time.sleep(args.interval)

            started = time.perf_counter()
            threads = [threading.Thread(target=scraper) for _ in range(args.scrapers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            soak_s = time.perf_counter() - started
            stop.set()
            loader.join(60)
            samples.append((args.scrapes, rss_mb(exporter.pid), open_fds(exporter.pid)))
        finally:
            stop.set()
            if exporter is not None:
                exporter.terminate()
                exporter.wait(10)
            cluster.stop()

    samples.sort()
    base = next(s for s in samples if s[0] >= args.warmup)
    end = samples[-1]
    rss_growth = (end[1] - base[1]) / base[1]
    # A dozen descriptors, one of which is the scraper's HTTP connection or a broker connection
    # coming and going: one reading against another would call a single in-flight socket 7 % growth.
    # A leak climbs; so the median of the second half after warm-up is compared with the first's.
    after = [s[2] for s in samples if s[0] >= args.warmup]
    half = len(after) // 2
    fd_base, fd_end = statistics.median(after[:half] or after), statistics.median(after[half:])
    fd_growth = (fd_end - fd_base) / fd_base
    over = [t for t in http_s if t > args.scrape_timeout] + [t for t in gather_s if t > args.scrape_timeout]
    if over:
        failures.append(f"{len(over)} scrapes over the {args.scrape_timeout} s deadline (longest {max(over):.2f} s)")
    if rss_growth >= TARGET_GROWTH:
        failures.append(f"RSS grew {rss_growth:.1%} after warm-up")
    if fd_growth >= TARGET_GROWTH:
        failures.append(f"open descriptors grew {fd_growth:.1%} after warm-up")
    if len(http_s) != args.scrapes:
        failures.append(f"{args.scrapes - len(http_s)} scrapes did not answer")

    result = {
        "scrapes": len(http_s),
        "scrapers": args.scrapers,
        "soak_s": round(soak_s, 1),
        "partitions": args.topics * PARTITIONS_PER_TOPIC,
        **{f"load_{k}": v for k, v in counts.items()},
        "scrape_http_median_s": round(statistics.median(http_s), 4),
        "scrape_http_p99_s": round(sorted(http_s)[int(len(http_s) * 0.99) - 1], 4),
        "scrape_http_max_s": round(max(http_s), 4),
        "scrape_gather_max_s": round(max(gather_s), 4),
        "scrape_deadline_s": args.scrape_timeout,
        "rss_mb_after_warmup": round(base[1], 1),
        "rss_mb_end": round(end[1], 1),
        "rss_growth_pct": round(rss_growth * 100, 2),
        "open_fds_after_warmup": base[2],
        "open_fds_end": end[2],
        "open_fds_median_first_half": fd_base,
        "open_fds_median_second_half": fd_end,
        "fd_growth_pct": round(fd_growth * 100, 2),
        "rss_mb_samples": [round(s[1], 1) for s in samples],
        "active_producer_ids_samples": [s[3] for s in sorted(sizes)],
        "scrape_kb_samples": [round(s[2] / 1024) for s in sorted(sizes)],
        "open_fds_samples": [s[2] for s in samples],
        "load_average_1m": round(os.getloadavg()[0], 2),
        "failures": failures[:10],
    }
    print_table(result)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
