"""Benchmark: a full ``kafkatxn lso`` scan of 1,000 and 10,000 partitions on one local broker.

    python bench/bench_lso.py [--sizes 1000,10000] [--runs 7] [--open-transactions 10]

Starts its own broker (tests.harness, 2 GB heap, JMX on a free loopback port), creates topics of
100 partitions until each size is reached (creation timed separately, not part of any figure), leaves
some transactions open so the scan also describes producers and transactions, then reports per size:

- the library scan (``lso.take_snapshot`` + ``lso.partition_lags`` on a fresh ``Cluster``) and the
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
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kafkatxn import lso  # noqa: E402
from kafkatxn.model import Cluster  # noqa: E402
from kafkatxn.config import resolve  # noqa: E402
from tests.harness import KafkaCluster  # noqa: E402
from tests.scenarios import run_transaction  # noqa: E402

PARTITIONS_PER_TOPIC = 100
# The controller refuses a CreateTopics that makes more than 10,000 records; 20 topics of 100 stay far below.
TOPICS_PER_CREATE = 20
OPEN_TXN_PARTITIONS = 3  # per open transaction, on one topic
GET_OFFSET_SHELL = "org.apache.kafka.tools.GetOffsetShell"
JMX_TOOL = "org.apache.kafka.tools.JmxTool"
REQUEST_METRICS = "kafka.network:type=RequestMetrics,name=RequestsPerSec,request=*,version=*"
# What the combined broker+controller node sends itself (KRaft), whoever the clients are.
CONTROLLER_APIS = frozenset({
    "BrokerHeartbeat", "BrokerRegistration", "ControllerRegistration", "Vote", "BeginQuorumEpoch", "EndQuorumEpoch",
    "FetchSnapshot", "DescribeQuorum", "AlterPartition", "AddRaftVoter", "RemoveRaftVoter", "UpdateRaftVoter",
})


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def broker_jvm_options(jmx_port: int) -> list[str]:
    return [
        "-Xms2g", "-Xmx2g", "-XX:+UseParallelGC", "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true",
        "-Dcom.sun.management.jmxremote",
        f"-Dcom.sun.management.jmxremote.port={jmx_port}",
        f"-Dcom.sun.management.jmxremote.rmi.port={jmx_port}",
        "-Dcom.sun.management.jmxremote.authenticate=false",
        "-Dcom.sun.management.jmxremote.ssl=false",
        "-Djava.rmi.server.hostname=127.0.0.1",
    ]


def create_topics(cluster: KafkaCluster, first: int, count: int) -> list[str]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    names = [f"bench-lso-{i:04d}" for i in range(first, first + count)]
    for i in range(0, len(names), TOPICS_PER_CREATE):
        batch = [NewTopic(n, PARTITIONS_PER_TOPIC, 1) for n in names[i : i + TOPICS_PER_CREATE]]
        for future in admin.create_topics(batch, operation_timeout=120).values():
            future.result(180)
    return names


def wait_until_every_partition_answers(bootstrap: str, expected: int, timeout_s: float = 600) -> None:
    """A new partition is in the metadata before its log exists; wait until ListOffsets answers for all."""
    deadline = time.monotonic() + timeout_s
    while True:
        with Cluster(resolve(bootstrap_servers=bootstrap, timeout="60s")) as c:
            parts = [p.tp for p in c.select_partitions()]
            answered = c.stable_and_high_offsets(parts)
        if len(parts) == expected and not answered.missing:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"only {len(parts)} of {expected} partitions, {len(answered.missing)} without offsets")
        time.sleep(1)


def library_scan(bootstrap: str) -> tuple[float, list[lso.PartitionLag], dict[str, int], list[str]]:
    started = time.perf_counter()
    with Cluster(resolve(bootstrap_servers=bootstrap, timeout="60s")) as c:
        snapshot = lso.take_snapshot(c, [p.tp for p in c.select_partitions()])
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
    started = time.perf_counter()
    result = cluster.run_tool(
        GET_OFFSET_SHELL, "--bootstrap-server", cluster.bootstrap_servers, "--time", "-1", "--exclude-internal-topics",
        timeout=300,
    )
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"GetOffsetShell failed: {result.stderr[-2000:]}")
    return elapsed, len(result.stdout.splitlines())


def broker_request_counts(cluster: KafkaCluster, jmx_port: int) -> dict[str, int]:
    """Requests the broker has received since it started, per API (RequestsPerSec counts, all versions)."""
    result = cluster.run_tool(
        JMX_TOOL, "--jmx-url", f"service:jmx:rmi:///jndi/rmi://127.0.0.1:{jmx_port}/jmxrmi",
        "--object-name", REQUEST_METRICS, "--attributes", "Count", "--one-time", "true", "--report-format", "properties",
        timeout=120,
    )
    if result.returncode != 0:
        raise SystemExit(f"JmxTool failed: {result.stderr[-2000:]}")
    counts: dict[str, int] = {}
    for line in result.stdout.splitlines():
        # kafka.network:type=RequestMetrics,name=RequestsPerSec,request=ListOffsets,version=10:Count=3
        key, sep, value = line.rpartition("=")
        if not sep or "request=" not in key or not key.endswith(":Count"):
            continue
        api = key.split("request=", 1)[1].split(",", 1)[0]
        if api in CONTROLLER_APIS:
            continue
        counts[api] = counts.get(api, 0) + int(float(value))
    return counts


def counted_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {api: after[api] - before.get(api, 0) for api in sorted(after) if after[api] - before.get(api, 0)}


def spread(samples: list[float]) -> str:
    return f"{statistics.median(samples):.3f} s (min {min(samples):.3f}, max {max(samples):.3f}, n={len(samples)})"


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
    cluster = KafkaCluster(workdir, 1, jvm_options=broker_jvm_options(jmx_port), name="bench")
    open_txns = []
    results = []
    try:
        cluster.start(timeout=120)
        bootstrap = cluster.bootstrap_servers
        print(f"broker {bootstrap} (Kafka {cluster.version}) up in {cluster.startup_seconds:.1f} s; {os.cpu_count()} CPUs")
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

            before = broker_request_counts(cluster, jmx_port)
            library_scan(bootstrap)
            broker_lib = counted_delta(before, broker_request_counts(cluster, jmx_port))
            before = broker_request_counts(cluster, jmx_port)
            cli_scan(bootstrap)
            broker_cli = counted_delta(before, broker_request_counts(cluster, jmx_port))
            before = broker_request_counts(cluster, jmx_port)
            reference_scan(cluster)
            broker_ref = counted_delta(before, broker_request_counts(cluster, jmx_port))

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

        print("\nsize     library_s  cli_s   reference_s  cli/ref  broker_requests_cli")
        for size, lib_med, cli_med, ref_med, reqs in results:
            print(f"{size:<8} {lib_med:<10.3f} {cli_med:<7.3f} {ref_med:<12.3f} {cli_med / ref_med:<8.2f} {reqs}")
        big = [r for r in results if r[0] >= 10_000]
        if big:
            verdict = "met" if big[0][2] < 3.0 else "MISSED"
            print(f"target: 10,000 partitions in under 3 s (CLI) — {verdict} ({big[0][2]:.3f} s)")
    finally:
        for txn in open_txns:
            try:
                txn.abort()
            except Exception:  # noqa: BLE001 - the broker goes away next anyway
                pass
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
