"""Benchmark: a full ``kafkatxn lso`` scan of 1,000 and 10,000 partitions on one local broker.

    python bench/bench_lso.py [--sizes 1000,10000] [--runs 7] [--open-transactions 10]

Starts its own broker (harness/, 2 GB heap, JMX on a free loopback port), creates topics of
100 partitions until each size is reached (creation timed separately, not part of any figure), leaves
some transactions open so the scan also describes producers and transactions, then reports per size:

- the library scan (``facts_lso.take_snapshot`` + ``lso.partition_lags`` on a fresh ``Cluster``) and the
  CLI (``python -m kafkatxn lso -o json`` as a subprocess): median, min and max of ``--runs`` runs;
- the reference, measured in the same run: Kafka's own ``kafka-get-offsets.sh``
  (``org.apache.kafka.tools.GetOffsetShell --time -1``) over the same partitions, and the ratios
  kafkatxn / reference;
- requests: the facade's own counter, and the broker's ``RequestsPerSec`` counts (JMX, read with
  Kafka's JmxTool before and after one scan), which also see what the clients send on their own
  (ApiVersions, bootstrap metadata).

Target (issue 4): 10,000 partitions in under 3 s on the 2-core CI machine, requests O(brokers).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import (  # noqa: E402  (puts the repository on sys.path)
    broker_request_counts,
    cli_imports,
    compile_kafkatxn,
    counted_delta,
    create_topics_batched,
    free_port,
    get_offset_shell,
    jmx_jvm_options,
    spread,
    wait_until_every_partition_answers,
)
from harness import KafkaCluster  # noqa: E402
from harness.scenarios import run_transaction  # noqa: E402
from kafkatxn import lso, facts_lso  # noqa: E402
from kafkatxn.config import resolve  # noqa: E402
from kafkatxn.kafka.facade import Cluster  # noqa: E402

PARTITIONS_PER_TOPIC = 100
OPEN_TXN_PARTITIONS = 3  # per open transaction, on one topic
TARGET_CLI_VS_LIBRARY = 2.2  # issue 16: the CLI's lso within 2.2x of the library's own scan


def create_topics(cluster: KafkaCluster, first: int, count: int) -> list[str]:
    names = [f"bench-lso-{i:04d}" for i in range(first, first + count)]
    create_topics_batched(cluster.bootstrap_servers, names, PARTITIONS_PER_TOPIC)
    return names


def library_scan(bootstrap: str) -> tuple[float, list[lso.PartitionLag], dict[str, int], list[str]]:
    started = time.perf_counter()
    with Cluster(resolve(bootstrap_servers=bootstrap, timeout="60s")) as c:
        snapshot = facts_lso.take_snapshot(c, [p.tp for p in c.select_partitions()])
        rows = lso.partition_lags(snapshot)
        elapsed = time.perf_counter() - started
        return elapsed, rows, dict(c.requests), snapshot.missing


def cli_scan(bootstrap: str) -> tuple[float, list[dict]]:
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "kafkatxn", "lso", "-b", bootstrap, "--timeout", "60s", "-o", "json"],
        capture_output=True, text=True, timeout=120,
    )
    elapsed = time.perf_counter() - started
    if result.returncode not in (0, 1):
        raise SystemExit(f"kafkatxn lso failed ({result.returncode}): {result.stderr}")
    return elapsed, json.loads(result.stdout)


def reference_scan(cluster: KafkaCluster) -> tuple[float, int]:
    run = get_offset_shell(cluster, "--exclude-internal-topics")
    if run.returncode != 0:
        raise SystemExit(f"GetOffsetShell failed: {run.stderr[-2000:]}")
    return run.seconds, len(run.stdout.splitlines())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000", help="partition totals, ascending (default 1000,10000)")
    parser.add_argument("--runs", type=int, default=7, help="timed runs per figure (median reported; default 7)")
    parser.add_argument("--open-transactions", type=int, default=10, help=f"transactions left open, {OPEN_TXN_PARTITIONS} partitions each")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    if sizes != sorted(sizes) or any(s % PARTITIONS_PER_TOPIC for s in sizes):
        raise SystemExit(f"--sizes must ascend in multiples of {PARTITIONS_PER_TOPIC}")
    if args.runs < 5:
        raise SystemExit("--runs must be at least 5")
    if args.open_transactions > sizes[0] // PARTITIONS_PER_TOPIC:
        raise SystemExit("--open-transactions: at most one per topic of the smallest size")

    workdir = Path(tempfile.mkdtemp(prefix="kafkatxn-bench-lso-"))
    jmx_port = free_port()
    cluster = KafkaCluster(workdir, 1, jvm_options=jmx_jvm_options(jmx_port), name="bench")
    open_txns = []
    results = []
    try:
        cluster.start(timeout=120)
        bootstrap = cluster.bootstrap_servers
        print(f"broker {bootstrap} (Kafka {cluster.version}) up in {cluster.startup_seconds:.1f} s; {os.cpu_count()} CPUs; "
              f"load average {os.getloadavg()[0]:.2f}")
        topics: list[str] = []
        for size in sizes:
            started = time.perf_counter()
            topics += create_topics(cluster, len(topics), size // PARTITIONS_PER_TOPIC - len(topics))
            wait_until_every_partition_answers(bootstrap, size)
            creation_s = time.perf_counter() - started
            if not open_txns:  # one per topic, on its first partitions; open until the end
                for topic in topics[: args.open_transactions]:
                    open_txns.append(run_transaction(bootstrap, topic, list(range(OPEN_TXN_PARTITIONS)), "open"))
            expected_rows = args.open_transactions * OPEN_TXN_PARTITIONS
            print(f"\n== {size} partitions ({len(topics)} topics; created and ready in {creation_s:.1f} s, not counted); "
                  f"{args.open_transactions} open transactions on {expected_rows} partitions")

            print(compile_kafkatxn())
            slowest, packages = cli_imports(["-m", "kafkatxn", "lso", "-b", bootstrap, "--timeout", "60s", "-o", "json"])
            clients = {"kafka (kafka-python)": "kafka" in packages, "confluent_kafka": "confluent_kafka" in packages}
            print("CLI imports Kafka clients: " + ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in clients.items()))
            print("CLI slowest imports (cumulative ms): " + ", ".join(f"{name} {us / 1000:.0f}" for us, name in slowest[:8]))
            # One scan of each kind first: imports, JIT and page cache warm, as on a machine in use.
            library_scan(bootstrap)
            cli_scan(bootstrap)
            reference_scan(cluster)

            lib_times, cli_times, ref_times = [], [], []
            requests: dict[str, int] = {}
            for _ in range(args.runs):
                elapsed, rows, requests, missing = library_scan(bootstrap)
                assert not missing and len(rows) == expected_rows, (missing[:3], len(rows))
                lib_times.append(elapsed)
                elapsed, cli_rows = cli_scan(bootstrap)
                assert len(cli_rows) == expected_rows, len(cli_rows)
                cli_times.append(elapsed)
                elapsed, lines = reference_scan(cluster)
                assert lines == size, f"GetOffsetShell printed {lines} offsets for {size} partitions"
                ref_times.append(elapsed)

            before = broker_request_counts(cluster, [jmx_port])
            library_scan(bootstrap)
            broker_lib = counted_delta(before, broker_request_counts(cluster, [jmx_port]))
            before = broker_request_counts(cluster, [jmx_port])
            cli_scan(bootstrap)
            broker_cli = counted_delta(before, broker_request_counts(cluster, [jmx_port]))
            before = broker_request_counts(cluster, [jmx_port])
            reference_scan(cluster)
            broker_ref = counted_delta(before, broker_request_counts(cluster, [jmx_port]))

            lib_med, cli_med, ref_med = (statistics.median(x) for x in (lib_times, cli_times, ref_times))
            print(f"library scan        {spread(lib_times)}")
            print(f"CLI scan            {spread(cli_times)}")
            print(f"GetOffsetShell      {spread(ref_times)}   (reference: HW only, one isolation level)")
            print(f"ratio CLI/reference {cli_med / ref_med:.2f}   library/reference {lib_med / ref_med:.2f}")
            print(f"requests, facade counter       {json.dumps(requests, sort_keys=True)}  total {sum(requests.values())}")
            print(f"requests, broker (JMX) library {json.dumps(broker_lib, sort_keys=True)}  total {sum(broker_lib.values())}")
            print(f"requests, broker (JMX) CLI     {json.dumps(broker_cli, sort_keys=True)}  total {sum(broker_cli.values())}")
            print(f"requests, broker (JMX) reference {json.dumps(broker_ref, sort_keys=True)}  total {sum(broker_ref.values())}")
            results.append((size, lib_med, cli_med, ref_med, sum(broker_cli.values())))
            print(f"ratio CLI/library   {cli_med / lib_med:.2f}   (load average {os.getloadavg()[0]:.2f})")

        print("\nsize     library_s  cli_s   reference_s  cli/ref  broker_requests_cli")
        for size, lib_med, cli_med, ref_med, reqs in results:
            print(f"{size:<8} {lib_med:<10.3f} {cli_med:<7.3f} {ref_med:<12.3f} {cli_med / ref_med:<8.2f} {reqs}")
        big = [r for r in results if r[0] >= 10_000]
        met = True
        if big:
            size, lib_med, cli_med, _ref_med, _reqs = big[0]
            under_3s = cli_med < 3.0
            ratio = cli_med / lib_med
            met = under_3s and ratio <= TARGET_CLI_VS_LIBRARY
            print(f"target: {size:,} partitions in under 3 s (CLI) — {'met' if under_3s else 'MISSED'} ({cli_med:.3f} s)")
            print(f"target: CLI within {TARGET_CLI_VS_LIBRARY}x of the library scan — "
                  f"{'met' if ratio <= TARGET_CLI_VS_LIBRARY else 'MISSED'} ({ratio:.2f}x)")
    finally:
        for txn in open_txns:
            try:
                txn.abort()
            except Exception:  # noqa: BLE001 - the broker goes away next anyway
                pass
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
