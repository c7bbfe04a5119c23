"""Every whole-cluster command at three sizes in one run: seconds, peak RSS and cost per partition.

    python bench/bench_sizes.py                                  # 10,000, 30,000, 100,000 partitions, 6 brokers
    python bench/bench_sizes.py --sizes 5000,15000,50000 --brokers 3
    python bench/bench_sizes.py --sizes 1000,2000,4000 --rounds 1 --brokers 1   # smoke

Starts one cluster with harness/ (``--brokers``, ``--heap`` each; verification off so hanging
transactions can be made) and grows it: at each size of ``--sizes`` it creates more topics of 100
partitions (20 per CreateTopics, as bench_scale.py) until the cluster holds that many, waits until
every partition answers ListOffsets, and measures the whole cluster. Producer state (bench_hanging's
``seed``: hanging, open, committed and idempotent producers) is made at the first size.

At each size, ``--rounds`` times, each command as its own process at its DEFAULT ``--timeout``
(30 s): ``kafkatxn lso``, ``hanging``, ``check``, ``producers --summary``; and scrapes of a fresh
exporter (``--cache-ttl 0s``: a full gather each time, default ``--scrape-timeout``). Printed per
size: median seconds, peak RSS (GNU time; the exporter's VmHWM), and the cost per partition (median
seconds / partitions, in microseconds). Then, per command, the ratio of the cost per partition at the
largest size to that at the middle size, and the marginal cost (extra seconds per extra partition)
between consecutive sizes, which start-up does not flatter.

Exit 1 when a target is missed: cost per partition at the largest size > 1.2x that at the middle
size; exporter peak RSS > 400 MB at the largest size; a command exiting 3 (undetermined: its
default --timeout) or an incomplete scrape; or findings that differ from what was made (hanging
transactions exactly the made ones; lso's lagging partitions exactly those with a hanging or open
transaction; the exporter sees every partition).

A broker keeps a file open per partition (its active segment), so each needs an open-files limit
above its share of the largest size. The benchmark raises its soft limit to the hard one (higher
where it may: root with CAP_SYS_RESOURCE); where the hard limit is 20,000 (this machine, a container
without that capability) a broker holds under ~19,000 partitions, hence 6 brokers for 100,000.
Each also needs ``vm.max_map_count`` above two index maps per partition.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pstats
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench_hanging import seed, spread  # noqa: E402  (same producer state as the other benchmarks)
from benchlib import (  # noqa: E402
    compile_kafkatxn,
    create_topics_batched,
    finish,
    kafkatxn,
    peak_rss_mb,
    run_measured,
    scrape,
    start_exporter,
    wait_until_every_partition_answers,
)

from harness import KafkaCluster  # noqa: E402

PARTITIONS_PER_TOPIC = 100
BOUND_MINUTES = 1
DEFAULT_TIMEOUT_S = 30  # the CLI's default --timeout
TARGET_COST_RATIO = 1.2
TARGET_EXPORTER_RSS_MB = 400
UNDETERMINED = 3

COMMANDS = {
    "lso": ["lso", "-o", "json"],
    "hanging": ["hanging", "--max-transaction-timeout", f"{BOUND_MINUTES}m", "-o", "json"],
    "check": ["check", "--max-transaction-timeout", f"{BOUND_MINUTES}m", "-o", "json"],
    "producers_summary": ["producers", "--summary", "-o", "json"],
}
ALL = [*COMMANDS, "exporter_scrape"]


def raise_open_files_limit(wanted: int = 400_000) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = max(soft, min(wanted, int(Path("/proc/sys/fs/nr_open").read_text())))
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, max(hard, target)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def measure_size(bootstrap: str, size: int, rounds: int, seeded_at: float, failures: list[str]) -> tuple[dict, dict]:
    """Medians and peak RSS of every command at this size; the findings of the last round."""
    times: dict[str, list[float]] = {name: [] for name in ALL}
    exits: dict[str, list[int]] = {name: [] for name in COMMANDS}
    rss: dict[str, float] = {}
    findings: dict = {}

    def answered_runs(name: str) -> list:
        """``rounds`` runs of one command, timed and checked; those that answered (exit 0-2: exit 2
        once the made transactions pass lso's 5-minute critical age, the rows all the same)."""
        runs = []
        for _ in range(rounds):
            run = kafkatxn(*COMMANDS[name], "-b", bootstrap, timeout=600)
            check_exit(name, size, run, failures)
            times[name].append(run.seconds)
            exits[name].append(run.returncode)
            rss[name] = max(rss.get(name, 0.0), run.peak_rss_mb)
            if run.returncode in (0, 1, 2):
                runs.append(run)
        return runs

    for run in answered_runs("lso"):
        findings["lso"] = {(r["topic"], r["partition"]) for r in json.loads(run.stdout)}
    answered_runs("producers_summary")
    exporter, url = start_exporter(bootstrap, "--cache-ttl", "0s")
    try:
        scrape(url)  # warm-up: connections and the first metadata
        for _ in range(rounds):
            took, last, _samples, _bytes = scrape(url)
            times["exporter_scrape"].append(took)
        rss["exporter_scrape"] = peak_rss_mb(exporter.pid)
        findings["exporter"] = last
    finally:
        exporter.terminate()
        exporter.wait(30)
    # hanging and check: every made transaction must be past the 1-minute bound.
    time.sleep(max(0.0, seeded_at + BOUND_MINUTES * 60 + 2 - time.monotonic()))
    for run in answered_runs("hanging"):
        findings["hanging"] = {(r["topic"], r["partition"], r["producer_id"]) for r in json.loads(run.stdout)["hanging"]}
    answered_runs("check")
    figures = {name: {"median_s": round(statistics.median(times[name]), 3), "peak_rss_mb": round(rss[name], 1),
                      "runs_s": [round(t, 3) for t in times[name]], "exits": exits.get(name, [])} for name in ALL}
    return figures, findings


def check_exit(name: str, size: int, run, failures: list[str]) -> None:  # noqa: ANN001 - benchlib.Run
    if run.returncode == UNDETERMINED:
        failures.append(f"{size:,}: kafkatxn {name} exit 3 at its default --timeout: {run.stderr.strip()[-300:]}")
    elif run.returncode not in (0, 1, 2):
        raise SystemExit(f"kafkatxn {name} exited {run.returncode}: {run.stderr.strip()[-1000:]}")
    if run.seconds > DEFAULT_TIMEOUT_S:
        failures.append(f"{size:,}: kafkatxn {name} took {run.seconds:.1f} s, over its default --timeout {DEFAULT_TIMEOUT_S} s")


def compare_findings(size: int, findings: dict, made: set, lagging: set, failures: list[str]) -> None:
    if findings.get("hanging") != made:
        failures.append(f"{size:,}: hanging found {sorted(findings.get('hanging') or [])}, made {sorted(made)}")
    if findings.get("lso") != lagging:
        failures.append(f"{size:,}: lso lagging partitions {len(findings.get('lso') or [])}, expected {len(lagging)}")
    last = findings.get("exporter", {})
    if last.get("kafkatxn_up") != 1 or last.get("kafkatxn_scrape_incomplete") != 0:
        failures.append(f"{size:,}: exporter scrape incomplete at its default --scrape-timeout: "
                        f"up={last.get('kafkatxn_up')} incomplete={last.get('kafkatxn_scrape_incomplete')}")
    if int(last.get("kafkatxn_partitions", 0)) < size:
        failures.append(f"{size:,}: exporter saw {last.get('kafkatxn_partitions')} partitions of {size}")


def profile_commands(bootstrap: str, size: int, directory: Path) -> None:
    """Each command once more under cProfile at this size; its five costliest functions (own time)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, args in COMMANDS.items():
        out = directory / f"{name}-{size}.prof"
        run = run_measured([sys.executable, "-m", "cProfile", "-o", str(out), "-m", "kafkatxn", *args, "-b", bootstrap],
                           timeout=600)
        text = io.StringIO()
        stats = pstats.Stats(str(out), stream=text)
        stats.sort_stats("tottime").print_stats(5)
        body = text.getvalue()
        rows = body[body.find("ncalls"):].rstrip()
        # (cProfile's runner swallows the command's exit code)
        print(f"\nprofile {name} at {size:,} partitions ({run.seconds:.2f} s under cProfile; "
              f"{out}), top five by own time:\n{rows}")
        text = io.StringIO()
        pstats.Stats(str(out), stream=text).sort_stats("cumulative").print_stats(r"kafkatxn", 12)
        body = text.getvalue()
        print(f"by cumulative time, kafkatxn's own:\n{body[body.find('ncalls'):].rstrip()}")
    sys.stdout.flush()


def print_size(size: int, brokers: int, ready_s: float, figures: dict) -> None:
    print(f"\n{size:,} partitions on {brokers} broker(s) (created and answering after {ready_s} s)")
    print(f"{'command':<20} {'median_s':>9} {'peak_rss_mb':>12} {'us_per_partition':>17}  runs_s, exits")
    for name in ALL:
        f = figures[name]
        print(f"{name:<20} {f['median_s']:>9.3f} {f['peak_rss_mb']:>12.1f} {f['us_per_partition']:>17.1f}  {f['runs_s']}, {f['exits']}")
    sys.stdout.flush()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,30000,100000", help="partitions, ascending, multiples of 100")
    parser.add_argument("--brokers", type=int, default=6)
    parser.add_argument("--heap", default="1536m")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--hanging", type=int, default=9)
    parser.add_argument("--open", type=int, default=6)
    parser.add_argument("--committed", type=int, default=15)
    parser.add_argument("--idempotent", type=int, default=15)
    parser.add_argument("--profile", type=Path, help="after the largest size, profile each command (cProfile) into DIR")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if sizes != sorted(sizes) or len(sizes) < 2 or any(s % PARTITIONS_PER_TOPIC for s in sizes):
        parser.error("--sizes: two or more ascending multiples of 100")

    figures: dict = {"brokers": args.brokers, "sizes": sizes, "rounds": args.rounds, "cpus": os.cpu_count(),
                     "broker_heap": args.heap, "open_files_limit": raise_open_files_limit(),
                     "bytecode": compile_kafkatxn()}
    share = (sizes[-1] + 2 * 50) // args.brokers + 1  # + the internal topics' 50 partitions each
    if share > figures["open_files_limit"] - 1000:
        parser.error(f"{sizes[-1]:,} partitions need about {share:,} open files per broker on {args.brokers}; "
                     f"the limit is {figures['open_files_limit']:,}: more --brokers")
    failures: list[str] = []
    per_size: dict[int, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench-sizes-") as workdir:
        jvm = [f"-Xms{args.heap}", f"-Xmx{args.heap}", "-XX:+UseParallelGC", "-XX:+ExitOnOutOfMemoryError",
               "-Djava.awt.headless=true"]
        cluster = KafkaCluster(Path(workdir), args.brokers, name="bench-sizes", jvm_options=jvm,
                               broker_config={"transaction.partition.verification.enable": "false"})
        cluster.start(timeout=240)
        try:
            bootstrap = cluster.bootstrap_servers
            topics: list[str] = []
            made: set = set()
            lagging: set = set()
            seeded_at = 0.0
            open_producers: list = []
            for size in sizes:
                started = time.perf_counter()
                new = [f"bench-sizes-{i:05d}" for i in range(len(topics), size // PARTITIONS_PER_TOPIC)]
                create_topics_batched(bootstrap, new, PARTITIONS_PER_TOPIC)
                topics += new
                wait_until_every_partition_answers(bootstrap, size)
                ready_s = round(time.perf_counter() - started, 1)
                if not made:
                    made, open_producers = seed(bootstrap, topics, PARTITIONS_PER_TOPIC, args)
                    seeded_at = time.monotonic()
                    lagging = {(t, p) for t, p, _ in made} | {
                        (tp.topic, tp.partition) for tp in spread(topics, PARTITIONS_PER_TOPIC, args.open, salt=3)}
                print(f"{size:,} partitions ready ({len(new)} topics added in {ready_s} s); measuring", file=sys.stderr)
                sized, findings = measure_size(bootstrap, size, args.rounds, seeded_at, failures)
                for f in sized.values():
                    f["us_per_partition"] = round(f["median_s"] / size * 1e6, 2)
                compare_findings(size, findings, made, lagging, failures)
                per_size[size] = sized
                print_size(size, args.brokers, ready_s, sized)
                figures[f"ready_s_{size}"] = ready_s
            if args.profile:
                profile_commands(bootstrap, sizes[-1], args.profile)
            del open_producers
        finally:
            cluster.stop()

    largest, middle, smallest = sizes[-1], sizes[-2], sizes[0]
    print(f"\ncost per partition, {largest:,} vs {middle:,} (target <= {TARGET_COST_RATIO}x); "
          f"marginal us per extra partition between sizes")
    for name in ALL:
        ratio = per_size[largest][name]["us_per_partition"] / per_size[middle][name]["us_per_partition"]
        marginal = []
        for a, b in zip(sizes, sizes[1:]):
            marginal.append(round((per_size[b][name]["median_s"] - per_size[a][name]["median_s"]) / (b - a) * 1e6, 2))
        figures[f"cost_ratio_{name}"] = round(ratio, 2)
        figures[f"marginal_us_{name}"] = marginal
        print(f"{name:<20} ratio {ratio:5.2f}   marginal {marginal}")
        if ratio > TARGET_COST_RATIO:
            failures.append(f"{name}: cost per partition at {largest:,} is {ratio:.2f}x that at {middle:,}")
    for size in sizes:
        for name in ALL:
            figures[f"{name}_s_{size}"] = per_size[size][name]["median_s"]
            figures[f"{name}_rss_mb_{size}"] = per_size[size][name]["peak_rss_mb"]
    exporter_rss = per_size[largest]["exporter_scrape"]["peak_rss_mb"]
    if exporter_rss > TARGET_EXPORTER_RSS_MB:
        failures.append(f"exporter peak RSS {exporter_rss} MB at {largest:,}, target <= {TARGET_EXPORTER_RSS_MB}")
    del smallest
    return finish(figures, failures)


if __name__ == "__main__":
    sys.exit(main())
