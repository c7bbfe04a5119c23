"""Every whole-cluster command at 30,000 partitions on 3 brokers, against references in the same run.

    python bench/bench_scale.py                        # 3 brokers, 30,000 partitions (10,000 each)
    python bench/bench_scale.py --topics 30 --rounds 2 # a quick 3,000-partition run of the same steps

Starts a 3-node cluster with harness/ (1 GB heap per node, JMX on loopback for the broker-side
request counters, ``transaction.partition.verification.enable=false`` so hanging transactions can
be made), creates ``--topics`` topics of 100 partitions (20 topics per CreateTopics; creation and
the wait until every partition answers are timed apart), and seeds producer state with
bench_hanging's ``seed``: hanging transactions, open ones (tracked, not hanging), committed
transactional producers and idempotent ones. Then ``--rounds`` times, interleaved:

* ``kafkatxn lso``              vs Kafka's GetOffsetShell (``--time -1``, its own JVM);
* ``kafkatxn hanging``          vs ``kafka-transactions.sh find-hanging --broker-id B`` per broker
                                and kafka-python's ``python -m kafka.admin transactions find-hanging``;
* ``kafkatxn check``, ``kafkatxn producers --summary`` (no reference tool covers a whole cluster);
* an exporter scrape (``--cache-ttl 0s``: a full gather each time) vs GetOffsetShell.

Every kafkatxn figure is a process of its own (interpreter start included; kafkatxn byte-compiled
first, as installed and as bench_sizes.py and bench_startup.py run it), with its peak RSS (GNU time). Requests are counted on the brokers (JMX RequestsPerSec, all three nodes) around the first of
``FLOOR_RUNS`` more runs of each. Findings are compared: lso's high watermarks against GetOffsetShell's, hanging
transactions between kafkatxn, Kafka's tool and what was made. Exit 1 when findings differ or a
target is missed (issue 38's): a warm exporter scrape <= 0.7 s, ``lso`` <= 0.06x GetOffsetShell,
``hanging`` <= 0.1x find-hanging (the three brokers' runs added up), ``lso`` and ``check`` within 1.3x
their floor; and exporter peak RSS < 200 MB, requests per command <= 15 per broker (O(brokers)).

Each command's floor (``*_vs_floor``): the CLI's start-up (``kafkatxn config show``, no broker) plus
the brokers answering the command's requests, measured as bench/wire_replay.py has it: one run of
the command recorded, and its requests sent again byte for byte, each as soon as the answers the
command had before sending it are in (the order the command must keep, no client work). For ``lso``
and ``check`` (the commands with a floor target), ``FLOOR_ROUNDS`` rounds run, after the rounds beside
Kafka's tools, the command, its replay and the start-up back to back; ``NAME_vs_floor`` is the median of
those runs of the command (``NAME_beside_floor_median_s``, its runs) over the medians of those start-ups
and replays (``NAME_startup_runs_s``, ``NAME_replay_s``, ``NAME_replay_runs_s``, ``NAME_rounds``): a
command and its floor that met the same cluster and machine. Until session 62 the floor was measured
minutes after the rounds it divided, whose runs of ``lso`` each came right after a GetOffsetShell JVM
had read 30,000 partitions: ``NAME_rounds_median_vs_floor`` keeps that median over this floor, beside.
Where their time over the floor (``NAME_over_floor_s``) goes, from the same rounds: the CPU of the
command's process and of the start-up's (``NAME_cpu_s``, ``NAME_startup_cpu_s``; user plus system,
from ``getrusage`` of the children) and between them ``NAME_cpu_over_startup_s``, the client's own
work beyond starting, which the floor counts as none; and the brokers' CPU during the command and during its replay
(``NAME_broker_cpu_s``, ``NAME_replay_broker_cpu_s``, from /proc): the same work, where the replay is
the command's floor. The brokers and the client share the machine's cores: ``NAME_cores_busy`` and
``NAME_replay_cores_busy`` say how much of the cores' time was used, and ``NAME_packed_vs_floor`` what the
command would take over its floor with its CPU beyond start-up and the replay's broker CPU packed onto the
cores, none idle (``benchlib.cpu_figures``): a target below it needs less client CPU, not more overlap.
The same rounds again with the client on a core of its own and the brokers on the others
(``benchlib.client_on_its_own_core``: CPU affinity, the brokers' every thread), as a client on a host of its
own meets brokers: ``NAME_own_core_vs_floor`` (``NAME_own_core_s`` over ``NAME_own_core_floor_s``, its start-up
and replay measured there too; ``benchlib.own_core_figures``). Information beside the targets, which are judged
with the cores shared (the brokers then answer on fewer cores, so the floor itself is longer).
The other commands' floors: start-up (``startup_median_s``) plus the median of ``FLOOR_RUNS`` replays.
Beside them, ``NAME_broker_time_s``: the busiest broker's time on the same requests from the brokers' own
``TotalTimeMs`` histograms (JMX), the median of ``FLOOR_RUNS`` runs each read around (their wall times:
``NAME_jmx_runs_s``), and ``NAME_vs_broker_time`` over start-up plus that. Not a bound either way: it
leaves out the rounds a command makes one after another, but counts the time an answer waits for the
command to read it (``ResponseSendTime``) and a request queued behind the one before it on its
connection; at 30,000 partitions it came out above the replay (0.188 against 0.144 s for ``lso``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench_hanging import seed  # noqa: E402  (same producer state as the 2,000-partition benchmark)
from benchlib import (  # noqa: E402
    JmxCluster,
    beside_floor,
    busiest_broker_ms,
    cli_startup_s,
    client_on_its_own_core,
    compile_kafkatxn,
    counted_delta,
    cpu_figures,
    create_topics_batched,
    find_hanging_per_broker,
    finish,
    floor_figures,
    get_offset_shell,
    kafkatxn,
    own_core_figures,
    peak_rss_mb,
    replayed,
    run_measured,
    scrape,
    start_exporter,
    wait_until_every_partition_answers,
)

PARTITIONS_PER_TOPIC = 100
BOUND_MINUTES = 1
TARGET_SCRAPE_S = 0.7  # issue 38: a warm scrape (the exporter running, connections open)
# Issue 38's ratios to Kafka's own tools, compared unrounded.
TARGET_LSO_VS_GET_OFFSET_SHELL = 0.06
TARGET_HANGING_VS_FIND_HANGING = 0.1
TARGET_RSS_MB = 200
REQUESTS_PER_BROKER = 15
# A command's time over its floor (start-up plus its requests replayed with no client work).
FLOOR_TARGETS = {"lso": 1.3, "check": 1.3}
# Runs each between JMX reads for a command's broker time (and the replays of the commands without a
# floor target): their median.
FLOOR_RUNS = 3
# Rounds of each command with a floor target beside its floor: the command, its replay, the start-up.
FLOOR_ROUNDS = 9

COMMANDS = {
    "lso": ["lso", "-o", "json"],
    "hanging": ["hanging", "--max-transaction-timeout", f"{BOUND_MINUTES}m", "-o", "json"],
    "check": ["check", "--max-transaction-timeout", f"{BOUND_MINUTES}m", "-o", "json"],
    "producers_summary": ["producers", "--summary", "-o", "json"],
}
OK_EXITS = {"lso": {0, 1}, "hanging": {0, 1, 2}, "check": {0, 1, 2}, "producers_summary": {0, 1}}


def run_command(bootstrap: str, name: str):
    run = kafkatxn(*COMMANDS[name], "-b", bootstrap, "--timeout", "120s", timeout=300)
    if run.returncode not in OK_EXITS[name]:
        raise SystemExit(f"kafkatxn {name} exited {run.returncode}: {run.stderr.strip()[-1000:]}")
    return run


def kafka_python_find_hanging(bootstrap: str):
    """kafka-python 3.0's own admin CLI. Its find-hanging lists and describes the transactions the
    coordinators track and flags those open longer than the timeout + 5 minutes."""
    run = run_measured([sys.executable, "-m", "kafka.admin", "-b", bootstrap, "--format", "json", "transactions",
                        "find-hanging", "--max-transaction-timeout-ms", str(BOUND_MINUTES * 60_000)], timeout=300)
    if run.returncode != 0:
        raise SystemExit(f"python -m kafka.admin transactions find-hanging exited {run.returncode}: {run.stderr[-1000:]}")
    return run, json.loads(run.stdout or "[]")


def offsets_of_get_offset_shell(stdout: str) -> dict[tuple[str, int], int]:
    out = {}
    for line in stdout.splitlines():  # topic:partition:offset
        topic, partition, offset = line.rsplit(":", 2)
        out[(topic, int(partition))] = int(offset)
    return out


def hold(path: Path, bootstrap: str, expected: set, jmx_ports: dict[int, int]) -> None:
    """Keep the seeded cluster until ``path`` is removed (see ``--hold``); the file names its JMX
    ports too (by node id), for the brokers' request times around one run of a held cluster."""
    path.write_text(json.dumps({"bootstrap": bootstrap, "hanging": sorted(expected), "jmx_ports": list(jmx_ports.values())}))
    print(f"holding {bootstrap}: remove {path} to stop", file=sys.stderr, flush=True)
    while path.exists():
        time.sleep(1)


def profile(bootstrap: str, name: str, directory: Path) -> list[str]:
    """One run of ``kafkatxn NAME`` under py-spy, every thread sampled (kafka-python's IO thread
    decodes the answers): the folded stacks in DIRECTORY, and the five frames with the most samples
    of their own (the leaf), each with its share of the samples."""
    directory.mkdir(parents=True, exist_ok=True)
    out = directory / f"{name}.folded"
    command = ["py-spy", "record", "--threads", "--rate", "250", "--format", "raw", "--output", str(out), "--",
               sys.executable, "-m", "kafkatxn", *COMMANDS[name], "-b", bootstrap, "--timeout", "120s"]
    run = run_measured(command, timeout=300)
    if not out.exists():
        raise SystemExit(f"py-spy on {name} wrote nothing: {run.stderr[-1000:]}")
    return top_frames(out.read_text())


def top_frames(folded: str, n: int = 5) -> list[str]:
    """The ``n`` leaf frames with the most samples in py-spy's raw (folded) output, each named with
    its thread. py-spy leaves out the samples of a thread that is idle (blocked on a lock, in select):
    what is counted is where the threads ran."""
    own: dict[str, int] = {}
    total = 0
    for line in folded.splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        frames = stack.split(";")
        thread = frames[0].split(":", 1)[-1].strip() if frames[0].startswith("thread") else ""
        leaf = f"{frames[-1]} [{thread}]" if thread else frames[-1]
        own[leaf] = own.get(leaf, 0) + int(count)
        total += int(count)
    top = sorted(own.items(), key=lambda kv: -kv[1])[:n]
    return [f"{frame} {100 * count / total:.1f}%" for frame, count in top]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--topics", type=int, default=300, help="topics of --partitions-per-topic partitions")
    parser.add_argument("--partitions-per-topic", type=int, default=PARTITIONS_PER_TOPIC,
                        help="a cluster of many small topics costs a command more per partition than one of few large ones")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--hanging", type=int, default=9)
    parser.add_argument("--open", type=int, default=6)
    parser.add_argument("--committed", type=int, default=15)
    parser.add_argument("--idempotent", type=int, default=15)
    parser.add_argument("--hold", metavar="FILE", type=Path,
                        help="after seeding, write the bootstrap servers (JSON) to FILE and keep the cluster, "
                             "its open transactions included, until FILE is removed; then stop (nothing measured): "
                             "for A/B runs and profiles against one cluster")
    parser.add_argument("--profile", metavar="DIR", type=Path,
                        help="after the rounds, run lso and check once more each under py-spy (all threads, "
                             "raw folded stacks in DIR) and print each one's top five own-time frames")
    args = parser.parse_args()
    partitions = args.topics * args.partitions_per_topic

    figures: dict = {"brokers": args.brokers, "partitions": partitions, "rounds": args.rounds, "cpus": os.cpu_count()}
    # As installed (pip compiles at install), as bench_startup.py measures the start-up: the
    # commands and their floor's start-up alike.
    figures["bytecode"] = compile_kafkatxn()
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as workdir:
        cluster = JmxCluster(Path(workdir), args.brokers, heap="1g", name="bench-scale",
                             broker_config={"transaction.partition.verification.enable": "false"})
        cluster.start(timeout=240)
        exporter = None
        try:
            bootstrap = cluster.bootstrap_servers
            started = time.perf_counter()
            topics = [f"bench-scale-{i:04d}" for i in range(args.topics)]
            create_topics_batched(bootstrap, topics, args.partitions_per_topic)
            figures["create_topics_s"] = round(time.perf_counter() - started, 1)
            wait_until_every_partition_answers(bootstrap, partitions)
            figures["created_and_ready_s"] = round(time.perf_counter() - started, 1)
            expected, open_producers = seed(bootstrap, topics, args.partitions_per_topic, args)
            seeded_at = time.monotonic()
            print(f"{partitions:,} partitions on {args.brokers} brokers ready in {figures['created_and_ready_s']} s; "
                  f"{len(expected)} hanging transactions made", file=sys.stderr)
            if args.hold is not None:
                hold(args.hold, bootstrap, expected, cluster.jmx_ports)
                del open_producers
                return 0

            times: dict[str, list[float]] = {}
            rss: dict[str, float] = {}

            def note(name: str, seconds: float, peak_mb: float | None = None) -> None:
                times.setdefault(name, []).append(seconds)
                if peak_mb is not None:
                    rss[name] = max(rss.get(name, 0.0), peak_mb)

            # lso, check, producers and the exporter do not need the transactions to be old.
            lso_rows: list[dict] = []
            shell_offsets: dict = {}
            for _ in range(args.rounds):
                for name in ("lso", "check", "producers_summary"):
                    run = run_command(bootstrap, name)
                    note(name, run.seconds, run.peak_rss_mb)
                    if name == "lso":
                        lso_rows = json.loads(run.stdout)
                shell = get_offset_shell(cluster, "--exclude-internal-topics")
                if shell.returncode != 0:
                    raise SystemExit(f"GetOffsetShell failed: {shell.stderr[-2000:]}")
                note("get_offset_shell", shell.seconds)
                shell_offsets = offsets_of_get_offset_shell(shell.stdout)
            # Each command with a floor target beside its floor, FLOOR_ROUNDS times back to back (the
            # command, its requests replayed, the start-up): the ratio compares runs that met the same
            # cluster and machine, away from Kafka's tools (a GetOffsetShell JVM just ended, in the rounds).
            floors = {name: beside_floor(bootstrap, COMMANDS[name], FLOOR_ROUNDS, Path(workdir),
                                         lambda name=name: run_command(bootstrap, name), cluster.brokers_cpu_s)
                      for name in FLOOR_TARGETS}
            # The same with the client on a core of its own and the brokers on the others, as a client on a
            # host of its own meets them (no core shared): information beside the targets, judged above.
            with client_on_its_own_core(cluster) as own_core:
                own_floors = {} if own_core is None else {
                    name: beside_floor(bootstrap, COMMANDS[name], FLOOR_ROUNDS, Path(workdir),
                                       lambda name=name: run_command(bootstrap, name))
                    for name in FLOOR_TARGETS}
            if args.profile is not None:
                for name in FLOOR_TARGETS:
                    figures[f"{name}_profile"] = profile(bootstrap, name, args.profile)

            # The CLI's own start-up (interpreter, imports, configuration; no broker), part of each command's floor.
            startup_s = cli_startup_s(max(args.rounds, 3))

            exporter, url = start_exporter(bootstrap, "--cache-ttl", "0s", "--scrape-timeout", "60s")
            scrape(url)  # warm-up: connections and the first metadata
            last: dict = {}
            for _ in range(args.rounds):
                took, last, _samples, _bytes = scrape(url)
                note("exporter_scrape", took)
            rss["exporter_scrape"] = peak_rss_mb(exporter.pid)
            if last.get("kafkatxn_up") != 1 or last.get("kafkatxn_scrape_incomplete") != 0:
                failures.append(f"exporter scrape incomplete: {last}")
            if int(last.get("kafkatxn_partitions", 0)) < partitions:
                failures.append(f"exporter saw {last.get('kafkatxn_partitions')} partitions of {partitions}")

            # Hanging: every transaction must be past the 1-minute bound both tools get.
            time.sleep(max(0.0, seeded_at + BOUND_MINUTES * 60 + 2 - time.monotonic()))
            found = {}
            for _ in range(args.rounds):
                run = run_command(bootstrap, "hanging")
                note("hanging", run.seconds, run.peak_rss_mb)
                found["kafkatxn"] = {(r["topic"], r["partition"], r["producer_id"]) for r in json.loads(run.stdout)["hanging"]}
                took, found["find_hanging"] = find_hanging_per_broker(cluster, BOUND_MINUTES)
                note("find_hanging_per_broker", took)
                run, kp = kafka_python_find_hanging(bootstrap)
                note("kafka_python_find_hanging", run.seconds, run.peak_rss_mb)
                found["kafka_python"] = {(tp["topic"], tp["partition"], row["producer_id"])
                                         for row in kp for tp in row["topic_partitions"]}

            # Broker-side requests and the time the brokers spent answering them: FLOOR_RUNS more
            # runs of each, each between JMX reads (all nodes); the requests of the first, the
            # median of the runs' busiest-broker times (one run's moved by a third on a loaded machine).
            requests: dict[str, dict[str, int]] = {}
            broker_ms: dict[str, float] = {}
            broker_runs_ms: dict[str, list[float]] = {}
            jmx_runs: dict[str, list[float]] = {}  # the same runs' wall times
            before = cluster.request_counts()
            spent_before = cluster.request_time_ms()
            for name in [*COMMANDS, "exporter_scrape"]:
                for run_number in range(FLOOR_RUNS):
                    if name == "exporter_scrape":
                        took = scrape(url)[0]
                    else:
                        took = run_command(bootstrap, name).seconds
                    jmx_runs.setdefault(name, []).append(took)
                    after, spent_after = cluster.request_counts(), cluster.request_time_ms()
                    if run_number == 0:
                        requests[name] = counted_delta(before, after)
                    # The busiest broker's time: the brokers answer side by side, one request at a time
                    # on a connection.
                    broker_runs_ms.setdefault(name, []).append(busiest_broker_ms(spent_before, spent_after))
                    before, spent_before = after, spent_after
                broker_ms[name] = statistics.median(broker_runs_ms[name])
            # The floor proper: each command's requests replayed with no client work, in the order
            # the command had to make them (wire_replay.py), the median of FLOOR_RUNS replays.
            replays = {name: replayed(bootstrap, COMMANDS[name], FLOOR_RUNS, Path(workdir))
                       for name in COMMANDS if name not in floors}
            get_offset_shell(cluster, "--exclude-internal-topics")
            after = cluster.request_counts()
            requests["get_offset_shell"] = counted_delta(before, after)
            before = after
            find_hanging_per_broker(cluster, BOUND_MINUTES)
            requests["find_hanging_per_broker"] = counted_delta(before, cluster.request_counts())
            del open_producers
        finally:
            if exporter is not None:
                exporter.terminate()
                exporter.wait(10)
            cluster.stop()

    # -- findings -------------------------------------------------------------------------------
    lagging_ok = all(shell_offsets.get((r["topic"], r["partition"])) == r["high_watermark"] for r in lso_rows)
    figures["get_offset_shell_partitions"] = len(shell_offsets)
    figures["lso_lagging_partitions"] = len(lso_rows)
    figures["lso_high_watermarks_match_get_offset_shell"] = lagging_ok
    if len(shell_offsets) != partitions or not lagging_ok or not lso_rows:
        failures.append("lso and GetOffsetShell disagree")
    figures["hanging_made"] = len(expected)
    for tool, findings in found.items():
        figures[f"hanging_found_{tool}"] = len(findings)
    if not (found["kafkatxn"] == found["find_hanging"] == expected):
        failures.append(f"hanging findings differ: only kafkatxn {sorted(found['kafkatxn'] - found['find_hanging'])}, "
                        f"only find-hanging {sorted(found['find_hanging'] - found['kafkatxn'])}, "
                        f"made {len(expected)}")
    # kafka-python's find-hanging only sees transactions a coordinator tracks (and flags them after
    # timeout + 5 min): it cannot see these, whose coordinator never heard of the partition.
    figures["kafka_python_finds_made_hanging"] = len(found["kafka_python"] & expected)

    # -- figures --------------------------------------------------------------------------------
    for name, samples in times.items():
        figures[f"{name}_median_s"] = round(statistics.median(samples), 3)
    for name, peak in rss.items():
        figures[f"{name}_peak_rss_mb"] = round(peak, 1)
    ref = statistics.median(times["get_offset_shell"])
    for name in ("lso", "check", "producers_summary", "exporter_scrape"):
        figures[f"ratio_{name}_vs_get_offset_shell"] = round(statistics.median(times[name]) / ref, 2)
    figures["ratio_hanging_vs_find_hanging"] = round(
        statistics.median(times["hanging"]) / statistics.median(times["find_hanging_per_broker"]), 2)
    figures["ratio_hanging_vs_kafka_python"] = round(
        statistics.median(times["hanging"]) / statistics.median(times["kafka_python_find_hanging"]), 2)
    # The floor: start-up plus the command's requests replayed (not for a scrape, which keeps the
    # busiest broker's time: the exporter is running and its requests are not recorded).
    figures["startup_median_s"] = round(startup_s, 3)
    for name, ms in broker_ms.items():
        figures[f"{name}_jmx_runs_s"] = [round(one, 3) for one in jmx_runs[name]]
        floor = floors.get(name)
        if floor is None:
            floor_figures(figures, name, statistics.median(times[name]), ms,
                          0.0 if name == "exporter_scrape" else startup_s, replays.get(name))
        else:  # the ratio of the runs beside the floor; the rounds' median over the same floor beside it
            figures[f"{name}_beside_floor_median_s"] = round(statistics.median(floor.command_s), 3)
            figures[f"{name}_beside_floor_runs_s"] = [round(one, 3) for one in floor.command_s]
            figures[f"{name}_startup_runs_s"] = [round(one, 3) for one in floor.startup_s]
            floor_figures(figures, name, statistics.median(floor.command_s), ms, statistics.median(floor.startup_s),
                          floor.replay())
            cpu_figures(figures, name, floor)
            figures[f"{name}_rounds_median_vs_floor"] = round(statistics.median(times[name]) / figures[f"{name}_floor_s"], 2)
        figures[f"{name}_broker_time_runs_s"] = [round(one / 1000, 3) for one in broker_runs_ms[name]]
    for name, measured in own_floors.items():
        own_core_figures(figures, name, measured)
    for name, target in FLOOR_TARGETS.items():
        if figures.get(f"{name}_vs_floor") is not None and figures[f"{name}_vs_floor"] > target:
            failures.append(f"{name}: {figures[f'{name}_vs_floor']}x its floor, target <= {target}x")
    for name, counts in requests.items():
        figures[f"requests_{name}"] = sum(counts.values())
        print(f"requests (broker-side) {name}: {json.dumps(counts, sort_keys=True)}")
        if name in COMMANDS or name == "exporter_scrape":
            if sum(counts.values()) > REQUESTS_PER_BROKER * args.brokers:
                failures.append(f"{name}: {sum(counts.values())} requests, more than {REQUESTS_PER_BROKER} per broker")
    scrape_s = statistics.median(times["exporter_scrape"])
    if scrape_s > TARGET_SCRAPE_S:
        failures.append(f"exporter scrape {scrape_s:.3f} s, target <= {TARGET_SCRAPE_S} s")
    for name, reference, target in (("lso", "get_offset_shell", TARGET_LSO_VS_GET_OFFSET_SHELL),
                                    ("hanging", "find_hanging_per_broker", TARGET_HANGING_VS_FIND_HANGING)):
        ratio = statistics.median(times[name]) / statistics.median(times[reference])
        if ratio > target:
            failures.append(f"{name}: {ratio:.3f}x {reference}, target <= {target}x")
    if rss["exporter_scrape"] >= TARGET_RSS_MB:
        failures.append(f"exporter peak RSS {rss['exporter_scrape']:.1f} MB, target < {TARGET_RSS_MB} MB")
    return finish(figures, failures)


if __name__ == "__main__":
    sys.exit(main())
