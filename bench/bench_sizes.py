"""Every whole-cluster command at three sizes in one run: seconds, peak RSS and cost per partition,
and per consumer group (issue 38 item 3).

    python bench/bench_sizes.py                                  # 10,000, 30,000, 100,000 partitions, 6 brokers,
                                                                 # 2,000, 6,000, 20,000 groups x 20 partitions
    python bench/bench_sizes.py --sizes 5000,15000,50000 --brokers 3
    python bench/bench_sizes.py --sizes 1000,2000,4000 --rounds 1 --brokers 1   # smoke
    python bench/bench_sizes.py --no-groups                      # the partition part alone
    python bench/bench_sizes.py --sizes 3000,10000,30000 --brokers 3 --hold /tmp/held-sizes.json
                                                                 # grow, seed, keep: for A/B runs; rm the file to stop

Starts one cluster with harness/ (``--brokers``, ``--heap`` each; verification off so hanging
transactions can be made; ``transaction.max.timeout.ms`` an hour, so the open transactions outlive
the run) and grows it: at each size of ``--sizes`` it creates more topics of 100 partitions (20 per
CreateTopics, as bench_scale.py) until the cluster holds that many, waits until every partition
answers ListOffsets, and measures the whole cluster. Producer state is made at the first size:
bench_hanging's ``seed`` (hanging, committed and idempotent producers) and bench_groups'
``open_transactions`` (``--open`` transactions of ``--open-partitions`` partitions each, left open
for the hour: their partitions' LSO is pinned).

Groups (unless ``--no-groups``): at each size bench_groups' ``write_records`` puts 5 to 11 records on
every new partition, and ``--groups-per-topic`` (20) new groups of ``--group-partitions`` (20)
consecutive partitions each are committed on every new topic with bench_groups' ``commit_offsets``
(AlterConsumerGroupOffsets, no consumer joins): every partition read by 4 groups, so 2,000 / 6,000 /
20,000 groups (40,000 / 120,000 / 400,000 group-partitions) at 10,000 / 30,000 / 100,000 partitions.
The groups of a smaller size stay as they were. Offsets as bench_groups plans them, from the
partitions' real LSO and high watermark: behind an open transaction every other group commits at the
LSO (held: blocked, or waiting while the transaction is in flight), the others below it; below the
LSO on a partition a hanging transaction pins; elsewhere a quarter of the groups lag by 1 to 3
records and the rest sit at the high watermark.

At each size, ``--rounds`` times, each command as its own process at its DEFAULT ``--timeout``
(30 s): ``kafkatxn lso``, ``hanging``, ``check``, ``producers --summary``; and scrapes of a fresh
exporter (``--cache-ttl 0s``, ``--no-group-lag``: the partition part; default ``--scrape-timeout``).
Then the group part: Kafka's ``kafka-consumer-groups.sh --describe --all-groups`` once (timed, not a
target; a 1 GB heap, not the harness's 256 MB, lest 400,000 rows not fit), ``kafkatxn lso --groups``,
``diagnose``, ``check --groups`` and scrapes of a fresh exporter with group lag (its default). Printed
per size: median seconds, peak RSS (GNU time; the exporter's VmHWM), and the cost per partition
(median seconds / partitions) and per group (median seconds / groups), in microseconds. Then, per
command, the ratio of the cost per partition (per group, for the group part) at the largest size to
that at the middle size, and the marginal cost (extra seconds per extra partition or group) between
consecutive sizes, which start-up does not flatter.

Exit 1 when a target is missed: cost per partition (per group) at the largest size > 1.2x that at
the middle size; exporter peak RSS > 400 MB at the largest size (with group lag: 400,000
group-partition series at 100,000); a command exiting 3 (undetermined: its default --timeout), over
its default --timeout, or an incomplete scrape or one over the default 8 s --scrape-timeout; or
findings that differ: hanging transactions exactly the made ones; lso's lagging partitions exactly
those with a hanging or open transaction; the exporter sees every partition; the (group, topic,
partition) rows with committed offset and high-watermark lag of ``lso --groups``, ``diagnose`` and
the exporter equal Kafka's tool's, whose rows are the commits made; the held pairs of ``lso --groups``
and ``diagnose`` and the exporter's held partitions per group are the ones made, and ``check
--groups`` counts their groups.

A broker keeps a file open per partition (its active segment), so each needs an open-files limit
above its share of the largest size. The benchmark raises its soft limit to the hard one (higher
where it may: root with CAP_SYS_RESOURCE); where the hard limit is 20,000 (this machine, a container
without that capability) a broker holds under ~19,000 partitions, hence 6 brokers for 100,000.
Each also needs ``vm.max_map_count`` above two index maps per partition.

``--hold FILE`` grows the cluster through every size of ``--sizes`` and seeds it as above, measuring
nothing, then writes its bootstrap servers, the held pairs made and the partition and group counts
(JSON) to FILE and keeps it, open transactions included, until FILE is removed: for A/B runs of two
checkouts and profiles against one cluster (``bench/bench_exporter_groups.py``). Every broker serves
JMX on loopback; while holding, a file ``FILE.ask`` is answered by ``FILE.times`` (JSON): per broker,
per API, the count and the milliseconds its ``TotalTimeMs``, ``RequestQueueTimeMs`` and
``LocalTimeMs`` histograms add up to since it started (count x mean), so a caller can tell what the
brokers themselves spent on the requests of one run.
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import os
import pstats
import resource
import statistics
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import bench_groups
from bench_hanging import seed
from benchlib import (
    JMX_TOOL,
    JmxCluster,
    Run,
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

from harness import KafkaCluster

PARTITIONS_PER_TOPIC = 100
BOUND_MINUTES = 1
DEFAULT_TIMEOUT_S = 30  # the CLI's default --timeout
DEFAULT_SCRAPE_TIMEOUT_S = 8  # the exporter's default --scrape-timeout
TARGET_COST_RATIO = 1.2
TARGET_EXPORTER_RSS_MB = 400
UNDETERMINED = 3
TOOL_HEAP = "-Xmx1g"  # Kafka's tool, after the harness's -Xmx256m (the last one counts): 400,000 rows

COMMANDS = {
    "lso": ["lso", "-o", "json"],
    "hanging": ["hanging", "--max-transaction-timeout", f"{BOUND_MINUTES}m", "-o", "json"],
    "check": ["check", "--max-transaction-timeout", f"{BOUND_MINUTES}m", "-o", "json"],
    "producers_summary": ["producers", "--summary", "-o", "json"],
}
ALL = [*COMMANDS, "exporter_scrape"]
GROUP_COMMANDS = bench_groups.COMMANDS  # lso --groups, diagnose, check --groups (-o json)
GROUP_ALL = [*GROUP_COMMANDS, "exporter_scrape_groups"]
Key = tuple[str, str, int]  # (group, topic, partition)


def raise_open_files_limit(wanted: int = 400_000) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = max(soft, min(wanted, int(Path("/proc/sys/fs/nr_open").read_text())))
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, max(hard, target)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


# -- the workload --------------------------------------------------------------------------------


def latest_offsets(bootstrap: str, topics: list[str]) -> dict[tuple[str, int], tuple[int, int]]:
    """(LSO, high watermark) of every partition of these topics, as the brokers answer now."""
    from kafkatxn.config import resolve
    from kafkatxn.kafka.facade import Cluster
    from kafkatxn.model import TopicPartition

    tps = [TopicPartition(t, p) for t in topics for p in range(PARTITIONS_PER_TOPIC)]
    with Cluster(resolve(bootstrap_servers=bootstrap, timeout="120s")) as c:
        answered = c.stable_and_high_offsets(tps)
    if answered.missing:
        raise SystemExit(f"offsets of {len(answered.missing)} partitions did not answer: {answered.missing[:3]}")
    return {(tp.topic, tp.partition): pair for tp, pair in answered.value.items()}


def plan_group_commits(first: int, last: int, topics: list[str], per_topic: int, per_group: int,
                       offsets: dict[tuple[str, int], tuple[int, int]], open_pinned: set[tuple[str, int]]):
    """Groups ``first`` .. ``last - 1``: group g reads ``per_group`` consecutive partitions of topic
    ``g // per_topic`` (so the groups of a smaller size keep theirs as the cluster grows); its offset
    on each as bench_groups' ``plan_commits`` chooses, from the partition's real LSO and high
    watermark. Returns the commits and the held (group, topic, partition) pairs made."""
    slots = PARTITIONS_PER_TOPIC // per_group
    commits: dict[str, dict[tuple[str, int], int]] = {}
    held: set[Key] = set()
    for g in range(first, last):
        name = f"bench-sizes-group-{g:06d}"
        topic = topics[g // per_topic]
        start = (g % per_topic) % slots * per_group
        mine = {}
        for partition in range(start, start + per_group):
            lso, hw = offsets[(topic, partition)]
            if lso < hw and (topic, partition) in open_pinned and g % 2 == 0:
                mine[(topic, partition)] = lso  # behind the open transaction: held
                held.add((name, topic, partition))
            elif lso < hw:
                mine[(topic, partition)] = lso - 1 - g % 3  # below the pin (open or hanging)
            else:
                mine[(topic, partition)] = hw - 1 - g % 3 if g % 4 == 0 else hw
        commits[name] = mine
    return commits, held


# -- measuring -----------------------------------------------------------------------------------


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
    exporter, url = start_exporter(bootstrap, "--cache-ttl", "0s", "--no-group-lag")
    try:
        scrape(url)  # warm-up: connections and the first metadata
        for _ in range(rounds):
            took, last, _samples, _bytes = scrape(url)
            times["exporter_scrape"].append(took)
            check_scrape_time("exporter_scrape", size, took, failures)
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
    return summarize(ALL, times, rss, exits), findings


def summarize(names: list[str], times: dict, rss: dict, exits: dict) -> dict:
    return {name: {"median_s": round(statistics.median(times[name]), 3), "peak_rss_mb": round(rss[name], 1),
                   "runs_s": [round(t, 3) for t in times[name]], "exits": exits.get(name, [])} for name in names}


def consumer_groups_tool(cluster: KafkaCluster) -> Run:
    """bench_groups' ``kafka-consumer-groups.sh --describe --all-groups`` with a 1 GB heap."""
    started = time.perf_counter()
    done = cluster.run_tool(bench_groups.CONSUMER_GROUP_COMMAND, "--bootstrap-server", cluster.bootstrap_servers,
                            "--describe", "--all-groups", "--timeout", "60000", timeout=1800, jvm_options=(TOOL_HEAP,))
    run = Run(time.perf_counter() - started, done.returncode, done.stdout, done.stderr, float("nan"))
    if run.returncode != 0:
        raise SystemExit(f"kafka-consumer-groups.sh --describe --all-groups exited {run.returncode}: {run.stderr[-2000:]}")
    return run


def measure_groups(cluster: KafkaCluster, size: int, rounds: int, failures: list[str]) -> tuple[dict, dict]:
    """Kafka's tool once, then each group command ``rounds`` times at its default --timeout and
    scrapes of an exporter with group lag; medians, peak RSS and the rows of the last round."""
    bootstrap = cluster.bootstrap_servers
    times: dict[str, list[float]] = {name: [] for name in GROUP_ALL}
    exits: dict[str, list[int]] = {name: [] for name in GROUP_COMMANDS}
    rss: dict[str, float] = {}
    findings: dict = {}
    run = consumer_groups_tool(cluster)
    findings["kafka_consumer_groups_s"] = round(run.seconds, 3)
    findings["kafka"] = bench_groups.rows_of_consumer_groups_tool(run.stdout)
    del run
    last: dict[str, Run] = {}
    for name in GROUP_COMMANDS:
        for _ in range(rounds):
            run = kafkatxn(*GROUP_COMMANDS[name], "-b", bootstrap, timeout=900)
            check_exit(name, size, run, failures)
            times[name].append(run.seconds)
            exits[name].append(run.returncode)
            rss[name] = max(rss.get(name, 0.0), run.peak_rss_mb)
            if run.returncode in bench_groups.OK_EXITS:
                last[name] = run
    if "lso_groups" in last:
        findings["lso_groups"], findings["held_lso_groups"] = bench_groups.rows_of_lso(last.pop("lso_groups").stdout)
    if "diagnose" in last:
        findings["diagnose"], findings["held_diagnose"], _doc = bench_groups.rows_of_diagnose(last.pop("diagnose").stdout)
    if "check_groups" in last:
        doc = json.loads(last.pop("check_groups").stdout)
        facts = doc.get("facts", doc)
        findings["check_groups_held"] = facts.get("groups_blocked", 0) + facts.get("groups_waiting", 0)
    exporter, url = start_exporter(bootstrap, "--cache-ttl", "0s")  # group lag on: the exporter's default
    try:
        bench_groups.scrape_group_lag(url)  # warm-up: connections and the first metadata
        body = b""
        for _ in range(rounds):
            took, body = bench_groups.scrape_group_lag(url)
            times["exporter_scrape_groups"].append(took)
            check_scrape_time("exporter_scrape_groups", size, took, failures)
        rss["exporter_scrape_groups"] = peak_rss_mb(exporter.pid)
    finally:
        exporter.terminate()
        exporter.wait(30)
    findings["exporter_body_mb"] = round(len(body) / 1e6, 1)
    findings["exporter"] = bench_groups.exporter_findings(body)
    return summarize(GROUP_ALL, times, rss, exits), findings


def check_exit(name: str, size: int, run: Run, failures: list[str]) -> None:
    if run.returncode == UNDETERMINED:
        failures.append(f"{size:,}: kafkatxn {name} exit 3 at its default --timeout: {run.stderr.strip()[-300:]}")
    elif run.returncode not in (0, 1, 2):
        raise SystemExit(f"kafkatxn {name} exited {run.returncode}: {run.stderr.strip()[-1000:]}")
    if run.seconds > DEFAULT_TIMEOUT_S:
        failures.append(f"{size:,}: kafkatxn {name} took {run.seconds:.1f} s, over its default --timeout {DEFAULT_TIMEOUT_S} s")


def check_scrape_time(name: str, size: int, took: float, failures: list[str]) -> None:
    if took > DEFAULT_SCRAPE_TIMEOUT_S:
        failures.append(f"{size:,}: {name} took {took:.1f} s, over the default --scrape-timeout {DEFAULT_SCRAPE_TIMEOUT_S} s")


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


def compare_group_findings(size: int, findings: dict, commits: dict, held_made: set[Key], failures: list[str]) -> dict:
    """The rows of each against Kafka's tool's, Kafka's against the commits made, the held pairs
    against those made; returns the counts for the figures."""
    theirs = findings["kafka"]
    made = {(g, t, p): off for g, offsets in commits.items() for (t, p), off in offsets.items()}
    out = {"rows_kafka": len(theirs), "rows_made": len(made), "held_made": len(held_made)}
    out["kafka_equal_made"] = bench_groups.compare(f"{size:,}: kafka-consumer-groups (committed offsets, against the commits made)",
                                                   made, {k: v[0] for k, v in theirs.items()}, failures)
    for name in ("lso_groups", "diagnose"):
        rows = findings.get(name, {})
        out[f"rows_{name}"] = len(rows)
        out[f"rows_{name}_equal_kafka"] = bench_groups.compare(f"{size:,}: {name}", theirs, rows, failures)
        held = findings.get(f"held_{name}", set())
        out[f"held_{name}"] = len(held)
        if held != held_made:
            failures.append(f"{size:,}: {name}: held pairs differ from those made: {len(held - held_made)} extra "
                            f"{sorted(held - held_made)[:3]}, {len(held_made - held)} not found {sorted(held_made - held)[:3]}")
    lag, blocked, held_per_group, scalars = findings["exporter"]
    out["rows_exporter"] = len(lag)
    out["rows_exporter_equal_kafka"] = bench_groups.compare(f"{size:,}: exporter", {k: v[1] for k, v in theirs.items()},
                                                            lag, failures)
    if scalars.get("kafkatxn_up") != 1 or scalars.get("kafkatxn_scrape_incomplete") != 0:
        failures.append(f"{size:,}: exporter scrape with group lag incomplete at its default --scrape-timeout: "
                        f"up={scalars.get('kafkatxn_up')} incomplete={scalars.get('kafkatxn_scrape_incomplete')}")
    out["held_exporter"] = sum(held_per_group.values())
    if held_per_group != dict(Counter(g for g, _t, _p in held_made)) or not blocked <= held_made:
        failures.append(f"{size:,}: exporter: held partitions per group differ from those made ({out['held_exporter']} "
                        f"of {len(held_made)}), or a blocked place was not made ({len(blocked - held_made)})")
    groups_made = len({g for g, _t, _p in held_made})
    out["check_groups_held"] = findings.get("check_groups_held")
    if out["check_groups_held"] != groups_made:
        failures.append(f"{size:,}: check --groups counts {out['check_groups_held']} groups blocked or waiting, {groups_made} made")
    return out


# -- holding the cluster ------------------------------------------------------------------------

# What the brokers spent on requests, per API (RequestMetrics histograms; a histogram's Mean is its
# lifetime sum over its count, so count x mean is the milliseconds spent since the broker started).
REQUEST_TIME_METRICS = ("TotalTimeMs", "RequestQueueTimeMs", "LocalTimeMs")


def broker_request_times(cluster: JmxCluster) -> dict[str, dict[str, dict[str, float]]]:
    """Per broker (node id), per API: ``count`` and the milliseconds of each of :data:`REQUEST_TIME_METRICS`
    (all brokers read at once, one JmxTool each)."""

    def one(port: int) -> dict[str, dict[str, float]]:
        done = cluster.run_tool(JMX_TOOL, "--jmx-url", f"service:jmx:rmi:///jndi/rmi://127.0.0.1:{port}/jmxrmi",
                                "--object-name", "kafka.network:type=RequestMetrics,name=*TimeMs,request=*",
                                "--attributes", "Count,Mean", "--one-time", "true", "--report-format", "properties",
                                timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"JmxTool failed: {done.stderr[-2000:]}")
        seen: dict[tuple[str, str], dict[str, float]] = {}
        for line in done.stdout.splitlines():
            # kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Fetch:Count=3
            key, sep, value = line.rpartition("=")
            name, _, attribute = key.rpartition(":")
            if not sep or "request=" not in name or "name=" not in name:
                continue
            metric = name.split("name=", 1)[1].split(",", 1)[0]
            api = name.split("request=", 1)[1].split(",", 1)[0]
            if metric in REQUEST_TIME_METRICS:
                seen.setdefault((api, metric), {})[attribute] = float(value)
        out: dict[str, dict[str, float]] = {}
        for (api, metric), a in seen.items():
            row = out.setdefault(api, {})
            row[metric] = a.get("Count", 0.0) * a.get("Mean", 0.0)
            if metric == "TotalTimeMs":
                row["count"] = a.get("Count", 0.0)
        return out

    with ThreadPoolExecutor(len(cluster.jmx_ports)) as pool:
        found = dict(zip(cluster.jmx_ports, pool.map(one, cluster.jmx_ports.values())))
    return {str(node): apis for node, apis in found.items()}


def hold(path: Path, cluster: JmxCluster, held_made: set[Key], partitions: int, groups: int) -> None:
    """Keep the grown and seeded cluster until ``path`` is removed (see ``--hold``); answer ``path.ask``
    with the brokers' request times in ``path.times``."""
    ask, times = Path(f"{path}.ask"), Path(f"{path}.times")
    path.write_text(json.dumps({"bootstrap": cluster.bootstrap_servers, "held": sorted(held_made), "partitions": partitions,
                                "groups": groups, "times_ask": str(ask), "times": str(times)}))
    print(f"holding {cluster.bootstrap_servers} ({partitions:,} partitions, {groups:,} groups): remove {path} to stop; "
          f"touch {ask} for the brokers' request times in {times}", file=sys.stderr, flush=True)
    while path.exists():
        if ask.exists():
            tmp = Path(f"{times}.tmp")
            tmp.write_text(json.dumps(broker_request_times(cluster)))
            tmp.replace(times)
            ask.unlink(missing_ok=True)
        time.sleep(0.2)


# -- where the time goes -------------------------------------------------------------------------


def print_top(name: str, size: int, prof: Path, seconds: float | None) -> None:
    if not prof.exists():  # the run's exit is the measured runs' still: a missing profile is said, not raised
        print(f"\nprofile {name} at {size:,} partitions: no profile written ({prof})")
        return
    text = io.StringIO()
    pstats.Stats(str(prof), stream=text).sort_stats("tottime").print_stats(5)
    body = text.getvalue()
    took = f"{seconds:.2f} s under cProfile; " if seconds is not None else ""
    print(f"\nprofile {name} at {size:,} partitions ({took}{prof}), top five by own time:\n{body[body.find('ncalls'):].rstrip()}")
    text = io.StringIO()
    pstats.Stats(str(prof), stream=text).sort_stats("cumulative").print_stats(r"kafkatxn", 12)
    body = text.getvalue()
    print(f"by cumulative time, kafkatxn's own:\n{body[body.find('ncalls'):].rstrip()}")


def profile_commands(bootstrap: str, size: int, directory: Path, groups: bool) -> dict:
    """Each command once more under cProfile at this size; its five costliest functions (own time).
    With groups, ``lso --groups`` and an exporter scrape with group lag as bench_groups' ``profile_runs``
    profiles them (the scrape in this process, its gather and exposition timed apart)."""
    directory.mkdir(parents=True, exist_ok=True)
    names = {**COMMANDS, **({k: v for k, v in GROUP_COMMANDS.items() if k != "lso_groups"} if groups else {})}
    for name, args in names.items():
        out = directory / f"{name}-{size}.prof"
        # (cProfile's runner swallows the command's exit code)
        run = run_measured([sys.executable, "-m", "cProfile", "-o", str(out), "-m", "kafkatxn", *args, "-b", bootstrap],
                           timeout=900)
        print_top(name, size, out, run.seconds)
    figures: dict = {}
    if groups:
        figures = bench_groups.profile_runs(bootstrap, directory / "groups")
        print_top("lso_groups (--timeout 300s)", size, directory / "groups" / "lso_groups.prof", figures["profile_lso_groups_s"])
        print_top("exporter scrape with group lag (in process, scrape timeout 120 s)", size,
                  directory / "groups" / "scrape.prof", None)
        print(f"scrape under cProfile: {figures}")
    sys.stdout.flush()
    return figures


# -- printing ------------------------------------------------------------------------------------


def print_size(size: int, groups: int, brokers: int, ready_s: float, figures: dict, names: list[str]) -> None:
    print(f"\n{size:,} partitions, {groups:,} groups on {brokers} broker(s) (created and answering after {ready_s} s)")
    print(f"{'command':<24} {'median_s':>9} {'peak_rss_mb':>12} {'us_per_partition':>17} {'us_per_group':>13}  runs_s, exits")
    for name in names:
        f = figures[name]
        per_group = f"{f['us_per_group']:>13.1f}" if "us_per_group" in f else f"{'':>13}"
        print(f"{name:<24} {f['median_s']:>9.3f} {f['peak_rss_mb']:>12.1f} {f['us_per_partition']:>17.1f} {per_group}  "
              f"{f['runs_s']}, {f['exits']}")
    sys.stdout.flush()


def ratios(per_size: dict, sizes: list[int], names: list[str], unit: str, counts: dict[int, int],
           figures: dict, failures: list[str]) -> None:
    """Per command, the cost per ``unit`` at the largest size over the middle one's, and the marginal cost."""
    largest, middle = sizes[-1], sizes[-2]
    print(f"\ncost per {unit}, {counts[largest]:,} vs {counts[middle]:,} {unit}s (target <= {TARGET_COST_RATIO}x); "
          f"marginal us per extra {unit} between sizes")
    for name in names:
        key = f"us_per_{unit}"
        ratio = per_size[largest][name][key] / per_size[middle][name][key]
        marginal = []
        for a, b in itertools.pairwise(sizes):
            extra = (per_size[b][name]["median_s"] - per_size[a][name]["median_s"]) / (counts[b] - counts[a])
            marginal.append(round(extra * 1e6, 2))
        figures[f"cost_ratio_{name}"] = round(ratio, 2)
        figures[f"marginal_us_{name}"] = marginal
        print(f"{name:<24} ratio {ratio:5.2f}   marginal {marginal}")
        if ratio > TARGET_COST_RATIO:
            failures.append(f"{name}: cost per {unit} at {counts[largest]:,} is {ratio:.2f}x that at {counts[middle]:,}")


# -- the run -------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,30000,100000", help="partitions, ascending, multiples of 100")
    parser.add_argument("--brokers", type=int, default=6)
    parser.add_argument("--heap", default="1536m")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--hanging", type=int, default=9)
    parser.add_argument("--open", type=int, default=6, help="transactions left open (for the hour)")
    parser.add_argument("--open-partitions", type=int, default=2, help="partitions per open transaction")
    parser.add_argument("--committed", type=int, default=15)
    parser.add_argument("--idempotent", type=int, default=15)
    parser.add_argument("--no-groups", action="store_true", help="the partition part alone: no records, groups or group commands")
    parser.add_argument("--groups-per-topic", type=int, default=20, help="new groups per new topic of 100 partitions")
    parser.add_argument("--group-partitions", type=int, default=20, help="partitions per group (divides 100)")
    parser.add_argument("--profile", type=Path, help="after the largest size, profile each command (cProfile) into DIR")
    parser.add_argument("--hold", metavar="FILE", type=Path,
                        help="grow and seed through every size, measuring nothing; write the bootstrap servers and the "
                             "held pairs made (JSON) to FILE and keep the cluster until FILE is removed: for A/B runs")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if sizes != sorted(sizes) or len(sizes) < 2 or any(s % PARTITIONS_PER_TOPIC for s in sizes):
        parser.error("--sizes: two or more ascending multiples of 100")
    if PARTITIONS_PER_TOPIC % args.group_partitions:
        parser.error(f"--group-partitions must divide {PARTITIONS_PER_TOPIC}")
    groups_on = not args.no_groups
    group_count = {s: s // PARTITIONS_PER_TOPIC * args.groups_per_topic if groups_on else 0 for s in sizes}

    figures: dict = {"brokers": args.brokers, "sizes": sizes, "rounds": args.rounds, "cpus": os.cpu_count(),
                     "groups": [group_count[s] for s in sizes], "group_partitions": args.group_partitions,
                     "broker_heap": args.heap, "open_files_limit": raise_open_files_limit(),
                     "bytecode": compile_kafkatxn()}
    share = (sizes[-1] + 2 * 50) // args.brokers + 1  # + the internal topics' 50 partitions each
    if share > figures["open_files_limit"] - 1000:
        parser.error(f"{sizes[-1]:,} partitions need about {share:,} open files per broker on {args.brokers}; "
                     f"the limit is {figures['open_files_limit']:,}: more --brokers")
    failures: list[str] = []
    per_size: dict[int, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench-sizes-") as workdir:
        # JMX on every broker (loopback): what they spent answering, for --hold's callers.
        cluster = JmxCluster(Path(workdir), args.brokers, heap=args.heap, name="bench-sizes",
                             broker_config={"transaction.partition.verification.enable": "false", **bench_groups.BROKER_CONFIG})
        cluster.start(timeout=240)
        try:
            bootstrap = cluster.bootstrap_servers
            topics: list[str] = []
            made: set = set()
            lagging: set = set()
            open_pinned: set = set()
            held_made: set[Key] = set()
            commits: dict = {}
            seeded_at = 0.0
            producers: list = []
            for size in sizes:
                started = time.perf_counter()
                new = [f"bench-sizes-{i:05d}" for i in range(len(topics), size // PARTITIONS_PER_TOPIC)]
                create_topics_batched(bootstrap, new, PARTITIONS_PER_TOPIC)
                topics += new
                wait_until_every_partition_answers(bootstrap, size)
                ready_s = round(time.perf_counter() - started, 1)
                figures[f"ready_s_{size}"] = ready_s
                if groups_on:
                    step = time.perf_counter()
                    figures[f"records_written_{size}"] = bench_groups.write_records(bootstrap, new)
                    figures[f"setup_records_s_{size}"] = round(time.perf_counter() - step, 1)
                if not made:
                    made, seeded = seed(bootstrap, topics, PARTITIONS_PER_TOPIC, argparse.Namespace(**{**vars(args), "open": 0}))
                    pinned, producers = bench_groups.open_transactions(bootstrap, topics, args.open, args.open_partitions)
                    producers += seeded
                    seeded_at = time.monotonic()
                    hanging_partitions = {(t, p) for t, p, _ in made}
                    open_pinned = set(pinned) - hanging_partitions
                    lagging = hanging_partitions | set(pinned)
                if groups_on:
                    step = time.perf_counter()
                    offsets = latest_offsets(bootstrap, new)
                    first = len(commits)
                    new_commits, new_held = plan_group_commits(first, group_count[size], topics, args.groups_per_topic,
                                                               args.group_partitions, offsets, open_pinned)
                    bench_groups.commit_offsets(bootstrap, new_commits)
                    commits.update(new_commits)
                    held_made |= new_held
                    figures[f"setup_commits_s_{size}"] = round(time.perf_counter() - step, 1)
                print(f"{size:,} partitions, {group_count[size]:,} groups ready ({len(new)} topics added in {ready_s} s); "
                      f"{'held next' if args.hold else 'measuring'}", file=sys.stderr)
                if args.hold is not None:
                    continue
                sized, findings = measure_size(bootstrap, size, args.rounds, seeded_at, failures)
                compare_findings(size, findings, made, lagging, failures)
                names = ALL
                if groups_on:
                    grouped, group_findings = measure_groups(cluster, size, args.rounds, failures)
                    sized.update(grouped)
                    names = [*ALL, *GROUP_ALL]
                    figures[f"kafka_consumer_groups_s_{size}"] = group_findings["kafka_consumer_groups_s"]
                    figures[f"exporter_groups_body_mb_{size}"] = group_findings["exporter_body_mb"]
                    compared = compare_group_findings(size, group_findings, commits, held_made, failures)
                    figures.update({f"{k}_{size}": v for k, v in compared.items()})
                    del group_findings
                for name, f in sized.items():
                    f["us_per_partition"] = round(f["median_s"] / size * 1e6, 2)
                    if name in GROUP_ALL:
                        f["us_per_group"] = round(f["median_s"] / group_count[size] * 1e6, 2)
                per_size[size] = sized
                print_size(size, group_count[size], args.brokers, ready_s, sized, names)
                if groups_on:
                    took = figures[f"kafka_consumer_groups_s_{size}"]
                    print(f"kafka-consumer-groups.sh --describe --all-groups (once, not a target): {took:.3f} s, "
                          f"{took / group_count[size] * 1e6:.1f} us per group; findings: "
                          f"{ {k: figures[f'{k}_{size}'] for k in compared} }")
                    sys.stdout.flush()
            if args.hold is not None:
                hold(args.hold, cluster, held_made, sizes[-1], group_count[sizes[-1]])
                del producers
                return 0
            if args.profile:
                figures.update(profile_commands(bootstrap, sizes[-1], args.profile, groups_on))
            del producers
        finally:
            cluster.stop()

    ratios(per_size, sizes, ALL, "partition", {s: s for s in sizes}, figures, failures)
    if groups_on:
        ratios(per_size, sizes, GROUP_ALL, "group", group_count, figures, failures)
    for size in sizes:
        for name in per_size[size]:
            figures[f"{name}_s_{size}"] = per_size[size][name]["median_s"]
            figures[f"{name}_rss_mb_{size}"] = per_size[size][name]["peak_rss_mb"]
    largest = sizes[-1]
    for name in ("exporter_scrape", *(["exporter_scrape_groups"] if groups_on else [])):
        exporter_rss = per_size[largest][name]["peak_rss_mb"]
        if exporter_rss > TARGET_EXPORTER_RSS_MB:
            failures.append(f"{name}: exporter peak RSS {exporter_rss} MB at {largest:,}, target <= {TARGET_EXPORTER_RSS_MB}")
    return finish(figures, failures)


if __name__ == "__main__":
    sys.exit(main())
