"""Exporter scrape time and peak RSS with many partitions, against references measured in the same run.

    python bench/bench_exporter.py                      # 10,000 partitions on a fresh harness broker
    python bench/bench_exporter.py --partitions 1000 --rounds 3

Starts one broker with harness/, creates ``--partitions`` partitions (in topics of 500),
leaves transactions open on some of them and idempotent producer state on others, then runs
``kafkatxn exporter`` as its own process and scrapes /metrics ``--rounds`` times with the cache off
(every scrape is a full gather: metadata, ListOffsets at both isolation levels, DescribeProducers
for every partition, broker configs, ListTransactions, DescribeTransactions, the hanging rule).

References, same cluster, same run:
* Kafka's own GetOffsetShell (``--time -1`` over the same topics): a JVM tool reading one offset per
  partition at one isolation level; the figure includes its JVM start, as an operator would see it;
* the bare offsets pass of the facade (both isolation levels, in this process), the floor any
  gather pays.

Targets (issue 6): scrape < 1 s and exporter peak RSS < 200 MB at 10,000 partitions.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchlib import cpu_seconds, peak_rss_mb, print_table, scrape, start_exporter  # noqa: E402  (repository on sys.path)
from confluent_kafka import Producer  # noqa: E402

from harness import KafkaCluster  # noqa: E402
from kafkatxn.config import ConnectionConfig  # noqa: E402
from kafkatxn.kafka.facade import Cluster  # noqa: E402

TOPIC_SIZE = 500
TARGET_SCRAPE_S = 1.0
TARGET_RSS_MB = 200


def create_topics(cluster: KafkaCluster, partitions: int) -> list[str]:
    topics = []
    left = partitions
    while left > 0:
        size = min(TOPIC_SIZE, left)
        topics.append(cluster.create_topic(f"bench-{len(topics):03d}", partitions=size, timeout=120))
        left -= size
    return topics


def seed_producer_state(bootstrap: str, topics: list[str], open_txn_partitions: int, idempotent_partitions: int):
    """Open transactions (left open) and idempotent writes, so DescribeProducers has state to report."""
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "bench-open", "transaction.timeout.ms": 600_000, "log_level": 0,
                    "linger.ms": 5})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(open_txn_partitions):
        txn.produce(topics[i % len(topics)], b"open", partition=i // len(topics))
    txn.flush(60)
    idem = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5, "log_level": 0})
    for i in range(idempotent_partitions):
        idem.produce(topics[-1 - i % len(topics)], b"idem", partition=i // len(topics))
    idem.flush(60)
    return txn  # kept alive so its transaction stays open


def get_offset_shell(cluster: KafkaCluster, partitions: int) -> float:
    started = time.perf_counter()
    done = cluster.run_tool("org.apache.kafka.tools.GetOffsetShell", "--bootstrap-server", cluster.bootstrap_servers,
                            "--topic-partitions", "bench-.*", "--time", "-1", timeout=300)
    took = time.perf_counter() - started
    lines = [line for line in done.stdout.splitlines() if line.startswith("bench-")]
    if done.returncode != 0 or len(lines) != partitions:
        raise RuntimeError(f"GetOffsetShell: exit {done.returncode}, {len(lines)} lines\n{done.stderr[-2000:]}")
    return took


def offsets_pass(bootstrap: str, topics: list[str]) -> float:
    with Cluster(ConnectionConfig(bootstrap_servers=bootstrap, timeout_ms=60_000)) as cluster:
        tps = [p.tp for p in cluster.select_partitions(topics=topics)]
        cluster.stable_and_high_offsets(tps[:10])  # connect first: the pass is what is measured
        started = time.perf_counter()
        result = cluster.stable_and_high_offsets(tps)
        took = time.perf_counter() - started
        if result.missing or len(result.value) != len(tps):
            raise RuntimeError(f"offsets pass incomplete: {result.missing[:3]}")
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--open-transactions", type=int, default=200, help="partitions with an open transaction")
    parser.add_argument("--idempotent", type=int, default=1000, help="partitions with idempotent producer state")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="kafkatxn-bench-exporter-"))
    cluster = KafkaCluster(workdir, n_brokers=1, name="bench")
    cluster.start(timeout=120)
    exporter = None
    try:
        started = time.perf_counter()
        topics = create_topics(cluster, args.partitions)
        print(f"created {args.partitions} partitions in {len(topics)} topics in {time.perf_counter() - started:.1f} s",
              file=sys.stderr)
        txn = seed_producer_state(cluster.bootstrap_servers, topics, args.open_transactions, args.idempotent)

        modes = {}
        for mode, extra in (("all_partitions", ()), ("only_lagging", ("--only-lagging",))):
            exporter, url = start_exporter(cluster.bootstrap_servers, "--cache-ttl", "0s", "--scrape-timeout", "60s", *extra)
            rss_idle = peak_rss_mb(exporter.pid)
            scrape(url)  # warm-up: connections, imports, first metadata
            cpu_before = cpu_seconds(exporter.pid)
            rounds = [scrape(url) for _ in range(args.rounds)]
            cpu_per_scrape = (cpu_seconds(exporter.pid) - cpu_before) / args.rounds
            rss_peak = peak_rss_mb(exporter.pid)
            exporter.terminate()
            exporter.wait(10)
            exporter = None
            last = rounds[-1][1]
            if last.get("kafkatxn_up") != 1 or last.get("kafkatxn_scrape_incomplete") != 0:
                raise RuntimeError(f"scrape was not complete: {last}")
            if int(last["kafkatxn_partitions"]) < args.partitions:
                raise RuntimeError(f"scrape saw {last['kafkatxn_partitions']} partitions, expected {args.partitions}")
            modes[mode] = {
                "http_s": statistics.median(r[0] for r in rounds),
                "gather_s": statistics.median(r[1]["kafkatxn_scrape_duration_seconds"] for r in rounds),
                "cpu_s": cpu_per_scrape,
                "samples": rounds[-1][2],
                "bytes": rounds[-1][3],
                "rss_idle": rss_idle,
                "rss_peak": rss_peak,
                "last": last,
            }
        del txn  # its transaction stayed open for both modes
        full = modes["all_partitions"]
        http_s, rss_peak, last = full["http_s"], full["rss_peak"], full["last"]

        shell_s = statistics.median(get_offset_shell(cluster, args.partitions) for _ in range(3))
        offsets_s = statistics.median(offsets_pass(cluster.bootstrap_servers, topics) for _ in range(3))

        result = {
            "partitions": args.partitions,
            "partitions_scanned": int(last["kafkatxn_partitions"]),
            "lagging_partitions": int(last["kafkatxn_lagging_partitions"]),
            "rounds": args.rounds,
            "scrape_http_median_s": round(http_s, 3),
            "scrape_gather_median_s": round(full["gather_s"], 3),
            "scrape_exporter_cpu_s": round(full["cpu_s"], 3),
            "scrape_samples": full["samples"],
            "scrape_bytes": full["bytes"],
            "exporter_rss_idle_mb": round(full["rss_idle"], 1),
            "exporter_rss_peak_mb": round(rss_peak, 1),
            "only_lagging_scrape_http_median_s": round(modes["only_lagging"]["http_s"], 3),
            "only_lagging_scrape_exporter_cpu_s": round(modes["only_lagging"]["cpu_s"], 3),
            "only_lagging_scrape_samples": modes["only_lagging"]["samples"],
            "only_lagging_exporter_rss_peak_mb": round(modes["only_lagging"]["rss_peak"], 1),
            "load_average_1m": round(os.getloadavg()[0], 2),
            "get_offset_shell_median_s": round(shell_s, 3),
            "offsets_pass_median_s": round(offsets_s, 3),
            "ratio_scrape_vs_get_offset_shell": round(http_s / shell_s, 3),
            "ratio_scrape_vs_offsets_pass": round(http_s / offsets_s, 2),
            "target_scrape_s": TARGET_SCRAPE_S,
            "target_rss_mb": TARGET_RSS_MB,
            "meets_targets": http_s < TARGET_SCRAPE_S and rss_peak < TARGET_RSS_MB,
        }
        print_table(result)
        return 0 if result["meets_targets"] else 1
    finally:
        if exporter is not None:
            exporter.terminate()
            exporter.wait(10)
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
