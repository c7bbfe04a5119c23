"""The on-call path at real sizes: 5,000 consumer groups x 20 partitions on 30,000 partitions, against
Kafka's own ``kafka-consumer-groups.sh --describe --all-groups`` in the same run (issue 25, item 5).

    python bench/bench_groups.py                                  # 3 brokers, 30,000 partitions, 5,000 groups
    python bench/bench_groups.py --topics 30 --groups 500 --rounds 2   # 3,000 partitions, 500 groups

Starts a 3-node cluster with harness/ (1 GB heap per node, JMX on loopback; ``transaction.max.timeout.ms``
raised to an hour so the open transactions outlive the run; 30,000 partitions on one node would need
more file descriptors than this host's hard limit of 20,000), then, each step timed apart:

* creates ``--topics`` topics of 100 partitions (20 per CreateTopics) and waits until every partition
  answers ListOffsets;
* writes 5 to 11 records to every partition (one idempotent producer);
* opens ``--open`` transactions (librdkafka producers kept open, ``--open-partitions`` partitions
  each): their partitions' LSO is pinned at the high watermark before them;
* commits offsets for ``--groups`` groups of ``--group-partitions`` partitions each with the admin API
  (AlterConsumerGroupOffsets; no consumer joins): on a pinned partition every other group commits at
  the LSO (blocked behind the open transaction), the rest below it; elsewhere a quarter of the groups
  lag by 1 to 3 records and the rest are caught up at the high watermark.

Then ``--rounds`` times, interleaved: Kafka's ``ConsumerGroupCommand --describe --all-groups`` (its own
JVM, as ``kafka-consumer-groups.sh`` runs it), ``kafkatxn lso --groups``, ``kafkatxn diagnose``,
``kafkatxn check --groups`` (each its own process, interpreter start included, with its peak RSS) and
one scrape of an exporter (``--cache-ttl 0s``, group lag on: every scrape gathers everything afresh),
then one more asking for gzip as Prometheus does (``exporter_scrape_gzip``: shown beside, with its
ratio; the 1 s target is the plain scrape's). Broker-side requests are counted
around one more run of each.

Findings compared: the (group, topic, partition) rows with their committed offset and high-watermark lag
are the same in Kafka's tool, ``lso --groups`` and ``diagnose``; the exporter's per-partition
``kafkatxn_group_lag_to_high_watermark_messages`` equals Kafka's lag; the held (group, partition)
pairs of ``lso --groups`` and ``diagnose`` (blocked, or waiting: the open transactions made are in
flight, tracked and within their own hour) are the ones made, and so are the exporter's held
partitions per group (``kafkatxn_group_blocked_partitions`` plus ``..._waiting_partitions``; a
``kafkatxn_group_blocked`` place is one made); ``check --groups`` counts the groups made as blocked or
waiting. Exit 1 when findings differ or a target is missed (issue 38): ``lso --groups`` at most 0.08x,
``diagnose`` 0.1x and ``check --groups`` 0.06x Kafka's tool (medians), the exporter scrape at most 1 s.

``--hold FILE`` seeds the same cluster, writes its bootstrap servers and the held pairs made to FILE
(JSON) and keeps it, open transactions included, until FILE is removed, measuring nothing: for A/B
runs of two checkouts against one settled cluster and for profiles.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

from benchlib import (  # noqa: E402  (puts the repository on sys.path)
    JmxCluster,
    busiest_broker_ms,
    cli_startup_s,
    compile_kafkatxn,
    counted_delta,
    create_topics_batched,
    finish,
    floor_figures,
    kafka_tool,
    kafkatxn,
    peak_rss_mb,
    replayed,
    run_measured,
    start_exporter,
    wait_until_every_partition_answers,
)

CONSUMER_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
PARTITIONS_PER_TOPIC = 100
# Issue 38's targets: each command's median over Kafka's tool's, and the plain scrape's seconds.
TARGET_RATIOS = {"lso_groups": 0.08, "diagnose": 0.1, "check_groups": 0.06}
TARGET_SCRAPE_S = 1.0
TXN_TIMEOUT_MS = 3_000_000  # the open transactions stay open for the whole run
RETRIED = ("NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE")
BROKER_CONFIG = {"transaction.max.timeout.ms": "3600000"}

COMMANDS = {
    "lso_groups": ["lso", "--groups", "-o", "json"],
    "diagnose": ["diagnose", "-o", "json"],
    "check_groups": ["check", "--groups", "-o", "json"],
}
OK_EXITS = {0, 1, 2}  # lagging and blocked groups are findings, not failures
# Where a made pair is held: blocked, or waiting while its transaction is in flight (tracked, within its
# own timeout: the transactions made here are, for the hour they may last). Both are the pairs made.
HELD = {"blocked", "waiting"}

Key = tuple[str, str, int]  # (group, topic, partition)


# -- the workload -------------------------------------------------------------------------------


def records_in(partition: int) -> int:
    return 5 + partition % 7


def group_partitions(g: int, topics: list[str], per_group: int) -> list[tuple[str, int]]:
    """Group ``g`` reads ``per_group`` consecutive partitions of one topic; the groups cover every
    partition, each by about groups * per_group / partitions groups."""
    slots = PARTITIONS_PER_TOPIC // per_group
    topic = topics[g % len(topics)]
    first = (g // len(topics)) % slots * per_group
    return [(topic, first + i) for i in range(per_group)]


def write_records(bootstrap: str, topics: list[str]) -> int:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0, "enable.idempotence": True,
                         "linger.ms": 50, "queue.buffering.max.messages": 1_000_000})
    # flush() returning 0 says nothing about records that failed (a new partition's leader not yet
    # known within the message timeout, on a loaded machine): they are counted and written again,
    # lest a partition hold fewer records than planned and a commit below it be planned negative.
    failed: list[tuple[str, int]] = []

    def delivered(err, msg) -> None:
        if err is not None:
            failed.append((msg.topic(), msg.partition()))

    todo = [(topic, p) for topic in topics for p in range(PARTITIONS_PER_TOPIC) for _ in range(records_in(p))]
    for attempt in range(3):
        for n, (topic, p) in enumerate(todo):
            producer.produce(topic, b"r", partition=p, on_delivery=delivered)
            if n % 1000 == 0:
                producer.poll(0)
        if producer.flush(300):
            raise SystemExit("records not all written within 300 s")
        if not failed:
            return sum(records_in(p) for _ in topics for p in range(PARTITIONS_PER_TOPIC))
        todo, failed = failed, []
        print(f"{len(todo)} records failed to be written; writing them again", file=sys.stderr)
    raise SystemExit(f"{len(todo)} records still not written after 3 attempts, e.g. to {todo[0]}")


def open_transactions(bootstrap: str, topics: list[str], count: int, per_txn: int) -> tuple[dict[tuple[str, int], int], list]:
    """``count`` transactions left open, each on ``per_txn`` partitions spread over the topics: the
    pinned partitions with their LSO (the high watermark before the transaction), and the producers
    (kept alive by the caller)."""
    from confluent_kafka import Producer

    pinned: dict[tuple[str, int], int] = {}
    producers = []
    for i in range(count):
        p = Producer({"bootstrap.servers": bootstrap, "log_level": 0, "transactional.id": f"bench-groups-open-{i}",
                      "transaction.timeout.ms": TXN_TIMEOUT_MS, "linger.ms": 5})
        p.init_transactions(60)
        p.begin_transaction()
        for j in range(per_txn):
            n = i * per_txn + j
            topic, partition = topics[(n * 7) % len(topics)], (n * 13) % PARTITIONS_PER_TOPIC
            if (topic, partition) in pinned:
                continue
            pinned[(topic, partition)] = records_in(partition)
            p.produce(topic, b"open", partition=partition)
        if p.flush(60):
            raise SystemExit("an open transaction's records were not written within 60 s")
        producers.append(p)
    return pinned, producers


def plan_commits(topics: list[str], groups: int, per_group: int, pinned: dict[tuple[str, int], int]):
    """Per group, the offset it commits on each of its partitions, and the blocked pairs made."""
    commits: dict[str, dict[tuple[str, int], int]] = {}
    blocked: set[Key] = set()
    for g in range(groups):
        name = f"bench-group-{g:05d}"
        offsets = {}
        for topic, partition in group_partitions(g, topics, per_group):
            hw = records_in(partition)
            if (topic, partition) in pinned:
                lso = pinned[(topic, partition)]
                offsets[(topic, partition)] = lso if g % 2 == 0 else lso - 1 - g % 3
                if g % 2 == 0:
                    blocked.add((name, topic, partition))
            else:
                offsets[(topic, partition)] = hw - 1 - g % 3 if g % 4 == 0 else hw
        commits[name] = offsets
    return commits, blocked


def commit_offsets(bootstrap: str, commits: dict[str, dict[tuple[str, int], int]], in_flight: int = 500) -> None:
    """AlterConsumerGroupOffsets, one group per call (the API's limit), ``in_flight`` calls at once;
    groups whose coordinator is not ready yet (``__consumer_offsets`` being created or loaded) are
    sent again."""
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    todo = list(commits)
    give_up = time.monotonic() + 600
    while todo:
        again: list[str] = []
        for i in range(0, len(todo), in_flight):
            futures = {}
            for name in todo[i : i + in_flight]:
                tps = [TopicPartition(t, p, off) for (t, p), off in commits[name].items()]
                futures[name] = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(name, tps)],
                                                                   request_timeout=120)[name]
            for name, future in futures.items():
                try:
                    errors = [tp.error for tp in future.result(300).topic_partitions if tp.error]
                except KafkaException as exc:
                    errors = [exc.args[0]]
                if errors and (errors[0].retriable() or errors[0].name() in RETRIED) and time.monotonic() < give_up:
                    again.append(name)
                elif errors:
                    raise SystemExit(f"committing offsets for {name} failed: {errors[0]}")
        if again:
            time.sleep(1)
        todo = again


# -- the tools and what they found --------------------------------------------------------------


def consumer_groups_tool(cluster: JmxCluster):
    run = kafka_tool(cluster, CONSUMER_GROUP_COMMAND, "--bootstrap-server", cluster.bootstrap_servers,
                     "--describe", "--all-groups", "--timeout", "60000", timeout=900)
    if run.returncode != 0:
        raise SystemExit(f"kafka-consumer-groups.sh --describe --all-groups exited {run.returncode}: {run.stderr[-2000:]}")
    return run


def rows_of_consumer_groups_tool(stdout: str) -> dict[Key, tuple[int, int]]:
    """(group, topic, partition) -> (CURRENT-OFFSET, LAG) from the tool's tables (one per group, each
    under a header row starting with GROUP; ``-`` where it has no value)."""
    out: dict[Key, tuple[int, int]] = {}
    header: list[str] | None = None
    for line in stdout.splitlines():
        cells = line.split()
        if not cells:
            continue
        if cells[0] == "GROUP":
            header = cells
            continue
        if header is None or len(cells) != len(header):
            continue
        row = dict(zip(header, cells))
        if row["CURRENT-OFFSET"] == "-":
            continue
        out[(row["GROUP"], row["TOPIC"], int(row["PARTITION"]))] = (int(row["CURRENT-OFFSET"]), int(row["LAG"]))
    return out


def run_command(bootstrap: str, name: str):
    run = kafkatxn(*COMMANDS[name], "-b", bootstrap, "--timeout", "300s", timeout=900)
    if run.returncode not in OK_EXITS:
        raise SystemExit(f"kafkatxn {name} exited {run.returncode}: {run.stderr.strip()[-1000:]}")
    return run


def rows_of_lso(stdout: str) -> tuple[dict[Key, tuple[int, int]], set[Key]]:
    rows = json.loads(stdout)
    found = {(r["group"], r["topic"], r["partition"]): (r["committed_offset"], r["lag_to_hw_messages"]) for r in rows}
    return found, {(r["group"], r["topic"], r["partition"]) for r in rows if r["verdict"] in HELD}


def rows_of_diagnose(stdout: str) -> tuple[dict[Key, tuple[int, int]], set[Key], dict]:
    doc = json.loads(stdout)
    rows = doc["partitions"]
    found = {(r["group"], r["topic"], r["partition"]): (r["committed_offset"], r["lag_to_hw_messages"]) for r in rows}
    held = {(r["group"], r["topic"], r["partition"]) for r in rows if r["verdict"] in HELD}
    return found, held, doc


def scrape_group_lag(url: str, timeout: float = 300, gzip_body: bool = False) -> tuple[float, bytes]:
    """One scrape: the time until the whole body is read, and the body (decompressed). With
    ``gzip_body`` it asks as Prometheus does (``Accept-Encoding: gzip``)."""
    import gzip

    request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"} if gzip_body else {})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=timeout) as response:
        body = response.read()
        took = time.perf_counter() - started
        if response.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
    return took, body


def lso_rows(body: bytes) -> dict:
    """The group lag a scrape reports (two scrapes a moment apart see the same settled workload)."""
    return exporter_findings(body)[0]


def exporter_findings(body: bytes) -> tuple[dict[Key, int], set[Key], dict[str, int], dict[str, float]]:
    """Per (group, topic, partition): the high-watermark lag; the blocked pairs (the exporter has a
    series per place for blocked, and only a count per group for waiting); per group, its held
    partitions (blocked plus waiting); the unlabelled samples."""
    from prometheus_client.parser import text_string_to_metric_families

    lag: dict[Key, int] = {}
    blocked: set[Key] = set()
    held: Counter[str] = Counter()
    scalars: dict[str, float] = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            if not s.labels:
                scalars[s.name] = s.value
            elif s.name == "kafkatxn_group_lag_to_high_watermark_messages":
                lag[(s.labels["group"], s.labels["topic"], int(s.labels["partition"]))] = int(s.value)
            elif s.name == "kafkatxn_group_blocked" and s.value == 1:
                blocked.add((s.labels["group"], s.labels["topic"], int(s.labels["partition"])))
            elif s.name in ("kafkatxn_group_blocked_partitions", "kafkatxn_group_waiting_partitions") and s.value:
                held[s.labels["group"]] += int(s.value)
    return lag, blocked, dict(held), scalars


def hold(path: Path, bootstrap: str, made_held: set[Key], jmx_ports: dict[int, int] | None = None) -> None:
    """Keep the seeded cluster until ``path`` is removed (see ``--hold``); its JMX ports in the file too
    (``--floors``)."""
    path.write_text(json.dumps({"bootstrap": bootstrap, "held": sorted(made_held), "jmx_ports": jmx_ports or {}}))
    print(f"holding {bootstrap}: remove {path} to stop", file=sys.stderr, flush=True)
    while path.exists():
        time.sleep(1)


# -- the floor (issue 38 item 1) ------------------------------------------------------------------


def floors_of_held(path: Path, rounds: int) -> int:
    """``--floors``: each command's floor on a cluster ``--hold`` keeps (its bootstrap and JMX ports from
    ``path``): the CLI's start-up, then ``rounds`` runs of each command, each between two JMX reads; the
    command's median run beside the median of its brokers' time."""
    held = json.loads(path.read_text())
    ports = {int(node): port for node, port in held.get("jmx_ports", {}).items()}
    if not ports:
        raise SystemExit(f"{path} names no JMX ports: hold the cluster with this version of bench_groups.py")
    figures: dict = {"rounds": rounds, "cpus": os.cpu_count(), "bytecode": compile_kafkatxn()}
    with tempfile.TemporaryDirectory(prefix="bench-groups-floors-") as workdir:
        tools = JmxCluster(Path(workdir), len(ports), heap="1g", name="bench-groups")  # not started: JmxTool's runner
        tools.jmx_ports = ports
        startup_s = cli_startup_s(max(rounds, 3))
        figures["startup_median_s"] = round(startup_s, 3)
        before = tools.request_time_ms()
        for name in COMMANDS:
            took: list[float] = []
            spent: list[float] = []
            for _ in range(rounds):  # nothing else may ask the cluster meanwhile: each run between two JMX reads
                took.append(run_command(held["bootstrap"], name).seconds)
                after = tools.request_time_ms()
                spent.append(busiest_broker_ms(before, after))
                before = after
            figures[f"{name}_median_s"] = round(statistics.median(took), 3)
            figures[f"{name}_runs_s"] = [round(t, 3) for t in took]
            figures[f"{name}_broker_runs_s"] = [round(ms / 1000, 3) for ms in spent]
            floor_figures(figures, name, statistics.median(took), statistics.median(spent), startup_s,
                          replayed(held["bootstrap"], COMMANDS[name], rounds, Path(workdir)))
    return finish(figures, [])


# -- where the time goes -------------------------------------------------------------------------


def profile_runs(bootstrap: str, out: Path) -> dict:
    """One ``lso --groups`` under cProfile (its own process) and one exporter scrape in this process:
    the gather and the exposition timed apart, the whole scrape under cProfile. Prints the top of each."""
    import cProfile
    import pstats

    from kafkatxn.config import ConnectionConfig
    from kafkatxn.exporter import ClusterGatherer, render_text

    out.mkdir(parents=True, exist_ok=True)
    run = run_measured([sys.executable, "-m", "cProfile", "-o", str(out / "lso_groups.prof"), "-m", "kafkatxn",
                        *COMMANDS["lso_groups"], "-b", bootstrap, "--timeout", "300s"], timeout=900)
    figures = {"profile_lso_groups_s": round(run.seconds, 3)}
    gatherer = ClusterGatherer(ConnectionConfig(bootstrap_servers=bootstrap), scrape_timeout_s=120, groups=True)
    try:
        render_text(gatherer())  # warm-up: connections, imports
        profiler = cProfile.Profile()
        profiler.enable()
        started = time.perf_counter()
        snap = gatherer()
        gathered = time.perf_counter()
        body = render_text(snap)
        rendered = time.perf_counter()
        profiler.disable()
    finally:
        gatherer.close()
    profiler.dump_stats(str(out / "scrape.prof"))
    figures.update(profile_scrape_gather_s=round(gathered - started, 3), profile_scrape_exposition_s=round(rendered - gathered, 3),
                   profile_scrape_body_mb=round(len(body) / 1e6, 1), profile_scrape_group_samples=len(snap.groups or ()))
    for name in ("lso_groups.prof", "scrape.prof"):
        print(f"-- {name}: top 25 by cumulative time")
        pstats.Stats(str(out / name)).sort_stats("cumulative").print_stats(25)
    return figures


# -- the run ------------------------------------------------------------------------------------


def compare(name: str, theirs: dict, ours: dict, failures: list[str]) -> bool:
    if theirs == ours:
        return True
    only_theirs, only_ours = theirs.keys() - ours.keys(), ours.keys() - theirs.keys()
    differ = sorted(k for k in theirs.keys() & ours.keys() if theirs[k] != ours[k])
    failures.append(f"{name} differs from kafka-consumer-groups: {len(only_theirs)} rows only there "
                    f"{sorted(only_theirs)[:3]}, {len(only_ours)} only in {name} {sorted(only_ours)[:3]}, "
                    f"{len(differ)} with other values {[(k, theirs[k], ours[k]) for k in differ[:3]]}")
    return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--topics", type=int, default=300, help=f"topics of {PARTITIONS_PER_TOPIC} partitions")
    parser.add_argument("--groups", type=int, default=5000)
    parser.add_argument("--group-partitions", type=int, default=20, help="partitions per group (divides 100)")
    parser.add_argument("--open", type=int, default=5, help="transactions left open")
    parser.add_argument("--open-partitions", type=int, default=4, help="partitions per open transaction")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--hold", metavar="FILE", type=Path,
                        help="after seeding, write the bootstrap servers and the held pairs made (JSON) to FILE and "
                             "keep the cluster, its open transactions included, until FILE is removed; then stop "
                             "(nothing measured): for A/B runs and profiles against one cluster")
    parser.add_argument("--floors", metavar="FILE", type=Path,
                        help="measure nothing else: each command's floor (start-up plus its requests replayed, beside "
                             "the busiest broker's time on them, JMX) on the cluster a running --hold FILE keeps, "
                             "--rounds runs each")
    parser.add_argument("--no-requests", action="store_true", help="skip the broker-side request counts and the floors")
    parser.add_argument("--profile", metavar="DIR", help="after the rounds, profile one `lso --groups` (cProfile) and one "
                        "exporter scrape in this process (gather and exposition timed apart); .prof files in DIR")
    args = parser.parse_args()
    if PARTITIONS_PER_TOPIC % args.group_partitions:
        parser.error(f"--group-partitions must divide {PARTITIONS_PER_TOPIC}")
    if args.floors is not None:
        return floors_of_held(args.floors, args.rounds)
    partitions = args.topics * PARTITIONS_PER_TOPIC

    figures: dict = {"brokers": args.brokers, "partitions": partitions, "groups": args.groups,
                     "group_partitions": args.groups * args.group_partitions, "rounds": args.rounds, "cpus": os.cpu_count()}
    # As installed (pip compiles at install), as bench_scale.py and bench_startup.py run it: the commands
    # and their floor's start-up alike.
    figures["bytecode"] = compile_kafkatxn()
    failures: list[str] = []
    times: dict[str, list[float]] = {}
    rss: dict[str, float] = {}
    requests: dict[str, dict[str, int]] = {}
    broker_ms: dict[str, float] = {}
    replays: dict[str, tuple] = {}
    startup_s = 0.0

    def note(name: str, seconds: float, peak_mb: float | None = None) -> None:
        times.setdefault(name, []).append(seconds)
        if peak_mb is not None and peak_mb == peak_mb:
            rss[name] = max(rss.get(name, 0.0), peak_mb)

    with tempfile.TemporaryDirectory(prefix="bench-groups-") as workdir:
        started = time.perf_counter()
        cluster = JmxCluster(Path(workdir), args.brokers, heap="1g", name="bench-groups", broker_config=BROKER_CONFIG)
        cluster.start(timeout=240)
        figures["setup_brokers_s"] = round(time.perf_counter() - started, 1)
        exporter = None
        producers: list = []
        try:
            bootstrap = cluster.bootstrap_servers
            step = time.perf_counter()
            topics = [f"bench-groups-{i:04d}" for i in range(args.topics)]
            create_topics_batched(bootstrap, topics, PARTITIONS_PER_TOPIC)
            wait_until_every_partition_answers(bootstrap, partitions)
            figures["setup_topics_s"] = round(time.perf_counter() - step, 1)
            step = time.perf_counter()
            figures["records_written"] = write_records(bootstrap, topics)
            figures["setup_records_s"] = round(time.perf_counter() - step, 1)
            step = time.perf_counter()
            pinned, producers = open_transactions(bootstrap, topics, args.open, args.open_partitions)
            figures["pinned_partitions"] = len(pinned)
            figures["setup_transactions_s"] = round(time.perf_counter() - step, 1)
            step = time.perf_counter()
            commits, made_blocked = plan_commits(topics, args.groups, args.group_partitions, pinned)
            commit_offsets(bootstrap, commits)
            figures["setup_commits_s"] = round(time.perf_counter() - step, 1)
            figures["setup_total_s"] = round(time.perf_counter() - started, 1)
            figures["blocked_pairs_made"] = len(made_blocked)
            figures["blocked_groups_made"] = len({g for g, _t, _p in made_blocked})
            print(f"{partitions:,} partitions, {args.groups:,} groups, {len(pinned)} pinned partitions; "
                  f"set up in {figures['setup_total_s']} s", file=sys.stderr)
            if args.hold is not None:
                hold(args.hold, bootstrap, made_blocked, cluster.jmx_ports)
                return 0

            exporter, url = start_exporter(bootstrap, "--cache-ttl", "0s", "--scrape-timeout", "120s")
            scrape_group_lag(url)  # warm-up: connections and the first metadata
            theirs: dict[Key, tuple[int, int]] = {}
            found: dict[str, dict] = {}
            blocked: dict[str, set[Key]] = {}
            check_doc: dict = {}
            body = b""
            for _ in range(args.rounds):
                run = consumer_groups_tool(cluster)
                note("kafka_consumer_groups", run.seconds)
                theirs = rows_of_consumer_groups_tool(run.stdout)
                run = run_command(bootstrap, "lso_groups")
                note("lso_groups", run.seconds, run.peak_rss_mb)
                found["lso_groups"], blocked["lso_groups"] = rows_of_lso(run.stdout)
                run = run_command(bootstrap, "diagnose")
                note("diagnose", run.seconds, run.peak_rss_mb)
                found["diagnose"], blocked["diagnose"], _doc = rows_of_diagnose(run.stdout)
                run = run_command(bootstrap, "check_groups")
                note("check_groups", run.seconds, run.peak_rss_mb)
                check_doc = json.loads(run.stdout)
                took, body = scrape_group_lag(url)
                note("exporter_scrape", took)
                took, zipped = scrape_group_lag(url, gzip_body=True)  # as Prometheus asks: no target, shown beside
                note("exporter_scrape_gzip", took)
                if lso_rows(zipped) != lso_rows(body):
                    failures.append("exporter: the gzip scrape's group lag differs from the plain scrape's")
            rss["exporter_scrape"] = peak_rss_mb(exporter.pid)

            if not args.no_requests:
                # Requests, and the time the brokers spent answering them (the floor's), one more run of
                # each between JMX reads (all nodes).
                before, spent_before = cluster.request_counts(), cluster.request_time_ms()
                for name in ("kafka_consumer_groups", *COMMANDS, "exporter_scrape"):
                    if name == "kafka_consumer_groups":
                        consumer_groups_tool(cluster)
                    elif name == "exporter_scrape":
                        scrape_group_lag(url)
                    else:
                        run_command(bootstrap, name)
                    after, spent_after = cluster.request_counts(), cluster.request_time_ms()
                    requests[name] = counted_delta(before, after)
                    broker_ms[name] = busiest_broker_ms(spent_before, spent_after)
                    before, spent_before = after, spent_after
                startup_s = cli_startup_s(max(args.rounds, 3))  # the CLI's own start-up, no broker
                # The floor proper: each command's requests replayed with no client work (wire_replay.py).
                replays.update({name: replayed(bootstrap, COMMANDS[name], 3, Path(workdir)) for name in COMMANDS})
            if args.profile:
                figures.update(profile_runs(bootstrap, Path(args.profile)))
        finally:
            if exporter is not None:
                exporter.terminate()
                exporter.wait(10)
            del producers
            cluster.stop()

    # -- findings -------------------------------------------------------------------------------
    made = {(g, t, p): (off, records_in(p) + (1 if (t, p) in pinned else 0) - off)
            for g, offsets in commits.items() for (t, p), off in offsets.items()}
    figures["rows_kafka_consumer_groups"] = len(theirs)
    compare("kafka-consumer-groups (against the commits made)", made, theirs, failures)
    for name, rows in found.items():
        figures[f"rows_{name}"] = len(rows)
        figures[f"rows_{name}_equal_kafka"] = compare(name, theirs, rows, failures)
    lag, exporter_blocked, exporter_held, scalars = exporter_findings(body)
    figures["rows_exporter_scrape"] = len(lag)
    figures["rows_exporter_scrape_equal_kafka"] = compare("exporter", {k: v[1] for k, v in theirs.items()}, lag, failures)
    if scalars.get("kafkatxn_up") != 1 or scalars.get("kafkatxn_scrape_incomplete") != 0:
        failures.append(f"exporter scrape incomplete: up {scalars.get('kafkatxn_up')}, "
                        f"incomplete {scalars.get('kafkatxn_scrape_incomplete')}")
    for name, pairs in blocked.items():
        figures[f"held_pairs_{name}"] = len(pairs)
        if pairs != made_blocked:
            failures.append(f"{name}: held pairs (blocked or waiting) differ from those made: {len(pairs - made_blocked)} extra, "
                            f"{len(made_blocked - pairs)} not found")
    figures["held_pairs_exporter_scrape"] = sum(exporter_held.values())
    if exporter_held != dict(Counter(g for g, _t, _p in made_blocked)) or not exporter_blocked <= made_blocked:
        failures.append(f"exporter: held partitions per group (blocked plus waiting) differ from those made, or a "
                        f"blocked place was not made ({len(exporter_blocked - made_blocked)})")
    facts = check_doc.get("facts", check_doc)
    figures["check_groups_blocked_or_waiting"] = facts.get("groups_blocked", 0) + facts.get("groups_waiting", 0)
    if figures["check_groups_blocked_or_waiting"] != figures["blocked_groups_made"]:
        failures.append(f"check --groups: {facts.get('groups_blocked')} blocked + {facts.get('groups_waiting')} waiting "
                        f"groups, {figures['blocked_groups_made']} made")

    # -- figures --------------------------------------------------------------------------------
    for name, samples in times.items():
        figures[f"{name}_median_s"] = round(statistics.median(samples), 3)
        figures[f"{name}_runs_s"] = [round(s, 3) for s in samples]
    for name, peak in rss.items():
        figures[f"{name}_peak_rss_mb"] = round(peak, 1)
    reference = statistics.median(times["kafka_consumer_groups"])
    for name in (*COMMANDS, "exporter_scrape", "exporter_scrape_gzip"):
        ratio = statistics.median(times[name]) / reference
        figures[f"ratio_{name}_vs_kafka_consumer_groups"] = round(ratio, 3)
        target = TARGET_RATIOS.get(name)
        if target is not None:
            figures[f"target_{name}"] = f"<= {target}x: {'met' if ratio <= target else 'missed'}"
            if ratio > target:
                failures.append(f"{name}: {ratio:.3f}x kafka-consumer-groups, target <= {target}x")
    scrape_s = statistics.median(times["exporter_scrape"])
    figures["target_exporter_scrape"] = f"<= {TARGET_SCRAPE_S} s: {'met' if scrape_s <= TARGET_SCRAPE_S else 'missed'}"
    if scrape_s > TARGET_SCRAPE_S:
        failures.append(f"exporter scrape {scrape_s:.3f} s, target <= {TARGET_SCRAPE_S} s")
    # Each command's floor (issue 38 item 1): start-up plus its requests replayed; the exporter's scrape
    # (nothing to start, its requests not recorded) the busiest broker's time. Kafka's tool's broker time beside.
    if broker_ms:
        figures["startup_median_s"] = round(startup_s, 3)
        figures["kafka_consumer_groups_broker_time_s"] = round(broker_ms["kafka_consumer_groups"] / 1000, 3)
        for name in (*COMMANDS, "exporter_scrape"):
            floor_figures(figures, name, statistics.median(times[name]), broker_ms[name], 0.0 if name == "exporter_scrape" else startup_s,
                          replays.get(name))
    for name, counts in requests.items():
        figures[f"requests_{name}"] = sum(counts.values())
        print(f"requests (broker-side) {name}: {json.dumps(counts, sort_keys=True)}")
    return finish(figures, failures)


if __name__ == "__main__":
    sys.exit(main())
