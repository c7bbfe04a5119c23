"""Pieces the benchmarks share: a cluster with JMX, batched topic creation, broker-side request
counts, the reference tools from the Kafka jars, and per-process time, CPU and peak RSS
(GNU time, `/usr/bin/time`).

Imported by the ``bench_*.py`` scripts (run from the repository: ``python bench/bench_x.py``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

try:
    from wire_replay import load, replay, replay_s  # a benchmark run as a script: bench/ is on the path
except ModuleNotFoundError:  # imported as bench.benchlib (the integration tests)
    from bench.wire_replay import load, replay, replay_s

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness import KafkaCluster  # noqa: E402

GET_OFFSET_SHELL = "org.apache.kafka.tools.GetOffsetShell"
TRANSACTIONS_TOOL = "org.apache.kafka.tools.TransactionsCommand"
JMX_TOOL = "org.apache.kafka.tools.JmxTool"
REQUEST_METRICS = "kafka.network:type=RequestMetrics,name=RequestsPerSec,request=*,version=*"
# What the combined broker+controller node sends itself (KRaft), whoever the clients are.
CONTROLLER_APIS = frozenset({
    "BrokerHeartbeat", "BrokerRegistration", "ControllerRegistration", "Vote", "BeginQuorumEpoch", "EndQuorumEpoch",
    "FetchSnapshot", "DescribeQuorum", "AlterPartition", "AddRaftVoter", "RemoveRaftVoter", "UpdateRaftVoter",
    "Fetch",  # KRaft replication of the metadata log between the nodes
    "FetchFollower",  # replication of the internal topics between the brokers
})

Finding = tuple[str, int, int]  # (topic, partition, producer_id)


def compile_kafkatxn() -> str:
    """Byte-compile kafkatxn's modules, as an installed package has them (pip and pipx compile at
    install). Where PYTHONDONTWRITEBYTECODE is set (as on the shared CI machine) a source checkout
    never gets them, and every CLI start compiles kafkatxn from source (~20 ms). Returns a note
    for the output."""
    import compileall

    compileall.compile_dir(str(ROOT / "kafkatxn"), quiet=1)
    flag = os.environ.get("PYTHONDONTWRITEBYTECODE")
    return f"kafkatxn byte-compiled as installed (PYTHONDONTWRITEBYTECODE={flag!r} in this environment)"


def cli_imports(args: list[str]) -> tuple[list[tuple[int, str]], set[str]]:
    """One run of ``python -X importtime``: the ten slowest imports (cumulative us) and every
    top-level package loaded."""
    run = run_measured([sys.executable, "-X", "importtime", *args], timeout=120)
    rows = []
    for line in run.stderr.splitlines():
        # import time: self [us] | cumulative | imported package
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _self_us, cumulative, name = (c.strip() for c in line.split(":", 1)[1].split("|"))
        rows.append((int(cumulative), name))
    rows.sort(reverse=True)
    return rows[:10], {name.split(".")[0] for _c, name in rows}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def jmx_jvm_options(jmx_port: int, heap: str = "2g") -> list[str]:
    """Broker JVM options: a fixed heap and JMX on loopback (no auth) for the request counters."""
    return [
        f"-Xms{heap}", f"-Xmx{heap}", "-XX:+UseParallelGC", "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true",
        "-Dcom.sun.management.jmxremote",
        f"-Dcom.sun.management.jmxremote.port={jmx_port}",
        f"-Dcom.sun.management.jmxremote.rmi.port={jmx_port}",
        "-Dcom.sun.management.jmxremote.authenticate=false",
        "-Dcom.sun.management.jmxremote.ssl=false",
        "-Djava.rmi.server.hostname=127.0.0.1",
    ]


# Kafka's own broker liveness settings, not the harness's (3 s, for tests that kill brokers): on two
# loaded cores a broker of a 100,000-partition cluster misses 3 s of heartbeats, is fenced, and half
# the partitions have no leader mid-measurement (seen: every broker fenced during an lso --groups at
# load 14, 50,029 partitions without a leader). No benchmark on these clusters kills a broker.
KAFKA_DEFAULT_LIVENESS = {"broker.session.timeout.ms": "9000", "broker.heartbeat.interval.ms": "2000"}


class JmxCluster(KafkaCluster):
    """A harness cluster whose every node serves JMX on its own loopback port (``jmx_ports``), its
    brokers kept alive as Kafka keeps them by default (``KAFKA_DEFAULT_LIVENESS``)."""

    def __init__(self, workdir: Path, n_brokers: int = 1, heap: str = "2g", **kwargs):
        self.jmx_ports = {node_id: free_port() for node_id in range(1, n_brokers + 1)}
        self._heap = heap
        kwargs["broker_config"] = {**KAFKA_DEFAULT_LIVENESS, **(kwargs.get("broker_config") or {})}
        super().__init__(workdir, n_brokers, jvm_options=jmx_jvm_options(self.jmx_ports[1], heap), **kwargs)

    def _launch(self, node, libs_dir):  # noqa: ANN001 - the harness's private hook, one JMX port per node
        self.jvm_options = jmx_jvm_options(self.jmx_ports[node.node_id], self._heap)
        super()._launch(node, libs_dir)

    def request_counts(self) -> dict[str, int]:
        return broker_request_counts(self, list(self.jmx_ports.values()))

    def request_time_ms(self) -> dict[int, float]:
        return broker_request_time_ms(self, list(self.jmx_ports.values()))


def create_topics_batched(bootstrap: str, names: list[str], partitions: int, per_create: int = 20) -> None:
    """Create topics ``per_create`` at a time in one CreateTopics each (the controller refuses one
    that makes more than 10,000 records)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    for i in range(0, len(names), per_create):
        batch = [NewTopic(n, partitions, 1) for n in names[i : i + per_create]]
        for future in admin.create_topics(batch, operation_timeout=120).values():
            future.result(300)


def wait_until_every_partition_answers(bootstrap: str, expected: int, timeout_s: float = 900) -> None:
    """A new partition is in the metadata before its log exists; wait until ListOffsets answers for all."""
    from kafkatxn.config import resolve
    from kafkatxn.kafka.facade import Cluster

    deadline = time.monotonic() + timeout_s
    while True:
        with Cluster(resolve(bootstrap_servers=bootstrap, timeout="60s")) as c:
            parts = [p.tp for p in c.select_partitions()]
            answered = c.stable_and_high_offsets(parts)
        if len(parts) >= expected and not answered.missing:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"only {len(parts)} of {expected} partitions, {len(answered.missing)} without offsets")
        time.sleep(2)


def _request_metrics(cluster: KafkaCluster, port: int, object_name: str, attributes: str):
    """``(api, attribute, value)`` of each client API's request metric on one node (JmxTool, once);
    what the nodes send each other left out."""
    result = cluster.run_tool(
        JMX_TOOL, "--jmx-url", f"service:jmx:rmi:///jndi/rmi://127.0.0.1:{port}/jmxrmi",
        "--object-name", object_name, "--attributes", attributes, "--one-time", "true", "--report-format", "properties",
        timeout=120,
    )
    if result.returncode != 0:
        raise SystemExit(f"JmxTool failed: {result.stderr[-2000:]}")
    for line in result.stdout.splitlines():
        # kafka.network:type=RequestMetrics,name=RequestsPerSec,request=ListOffsets,version=10:Count=3
        key, sep, value = line.rpartition("=")
        if not sep or "request=" not in key or ":" not in key:
            continue
        name, _, attribute = key.rpartition(":")
        api = name.split("request=", 1)[1].split(",", 1)[0]
        if api not in CONTROLLER_APIS:
            yield api, attribute, float(value)


def broker_request_counts(cluster: KafkaCluster, jmx_ports: list[int]) -> dict[str, int]:
    """Requests the brokers have received since they started, per API, summed over brokers."""
    counts: dict[str, int] = {}
    for port in jmx_ports:
        for api, _, value in _request_metrics(cluster, port, REQUEST_METRICS, "Count"):
            counts[api] = counts.get(api, 0) + int(value)
    return counts


REQUEST_TIMES = "kafka.network:type=RequestMetrics,name=TotalTimeMs,request=*"


def broker_request_time_ms(cluster: KafkaCluster, jmx_ports: list[int]) -> dict[int, float]:
    """Per broker (by JMX port), the milliseconds it has spent on client requests since it started:
    for each API, ``Count`` x ``Mean`` of its ``TotalTimeMs`` histogram (Yammer's mean is the lifetime
    sum over the count, not a decaying sample), summed."""
    spent: dict[int, float] = {}
    for port in jmx_ports:
        seen: dict[str, dict[str, float]] = {}
        for api, attribute, value in _request_metrics(cluster, port, REQUEST_TIMES, "Count,Mean"):
            seen.setdefault(api, {})[attribute] = value
        spent[port] = sum(a.get("Count", 0.0) * a.get("Mean", 0.0) for a in seen.values())
    return spent


def busiest_broker_ms(before: dict[int, float], after: dict[int, float]) -> float:
    """The busiest broker's milliseconds on client requests between two :func:`broker_request_time_ms`
    reads: the brokers answer side by side, one request at a time on a connection."""
    return max((after[port] - before.get(port, 0.0) for port in after), default=0.0)


def cli_startup() -> Run:
    """One run of the CLI's own start-up (interpreter, imports, configuration; no broker: ``kafkatxn
    config show``): part of every command's floor."""
    return run_measured([sys.executable, "-m", "kafkatxn", "config", "show", "-b", "127.0.0.1:9"])


def cli_startup_s(rounds: int = 3) -> float:
    """The median of ``rounds`` runs of :func:`cli_startup`, in seconds."""
    return statistics.median(cli_startup().seconds for _ in range(rounds))


def floor_figures(figures: dict, name: str, median_s: float, broker_ms: float, startup_s: float,
                  replay: tuple[float, list[float], int, list[tuple[float, str, str]]] | None = None) -> float | None:
    """A command's floor beside its time (issue 38 item 1), added to ``figures``; returns ``NAME_vs_floor``.

    ``NAME_broker_time_s`` is the busiest broker's time answering its requests (JMX), and
    ``NAME_vs_broker_time`` the median over start-up plus that: it leaves out the rounds a command
    must make one after another (metadata first) but counts the time an answer waits for the client
    to read it, so it is no bound either way. With ``replay`` (wire_replay's
    median, runs and rounds: the same requests sent again, each as soon as the answers it waited
    for are in, no client work), the floor is start-up plus the replay (``NAME_replay_s``,
    ``NAME_rounds``), and ``NAME_recorded_idle_ms`` says where the recorded run had nothing in flight
    (its own work on the critical path, interpreter start aside); without, start-up plus the broker
    time. ``startup_s`` is 0 for a running exporter's scrape."""
    figures[f"{name}_broker_time_s"] = round(broker_ms / 1000, 3)
    by_broker_time = startup_s + broker_ms / 1000
    floor_s = by_broker_time
    if replay is not None:
        replay_s, replay_runs, rounds, idle = replay
        figures[f"{name}_replay_s"] = round(replay_s, 3)
        figures[f"{name}_replay_runs_s"] = [round(one, 3) for one in replay_runs]
        figures[f"{name}_rounds"] = rounds
        figures[f"{name}_recorded_idle_ms"] = f"{sum(ms for ms, _, _ in idle):.0f}: " + ", ".join(
            f"{ms:.0f} {after}>{before}" for ms, after, before in idle if ms >= 5)
        figures[f"{name}_vs_broker_time"] = round(median_s / by_broker_time, 2) if by_broker_time > 0 else None
        floor_s = startup_s + replay_s
    figures[f"{name}_floor_s"] = round(floor_s, 3)
    vs = round(median_s / floor_s, 2) if floor_s > 0 else None
    figures[f"{name}_vs_floor"] = vs
    return vs


def recorded(bootstrap: str, command: list[str], workdir: Path) -> Path:
    """``kafkatxn COMMAND`` recorded once (bench/wire_replay.py, its own process): the recording's path."""
    out = workdir / f"replay-{'-'.join(command[:2])}.pickle"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "wire_replay.py"), "record", str(out), "--",
                           *command, "-b", bootstrap, "--timeout", "120s"],
                          capture_output=True, text=True, timeout=600, check=False)
    if not out.exists():
        raise SystemExit(f"wire_replay record {command} failed ({done.returncode}): {done.stderr.strip()[-1000:]}")
    return out


def replayed(bootstrap: str, command: list[str], runs: int, workdir: Path) -> tuple[float, list[float], int, list]:
    """``kafkatxn COMMAND`` recorded once and its requests replayed ``runs`` times: the median seconds,
    the runs, the command's rounds, the recorded run's stretches with nothing in flight."""
    return replay_s(recorded(bootstrap, command, workdir), runs)


class BesideFloor:
    """A command and its floor measured side by side (:func:`beside_floor`): each round's command,
    replay and start-up, in the order they ran; and the CPU each used: the command's and the start-up's
    own (user and system), and the brokers' during the command and during its replay (empty lists
    where not measured)."""

    def __init__(self, command_s: list[float], replay_s: list[float], startup_s: list[float], rounds: int, idle: list,
                 command_cpu_s: list[float] | None = None, startup_cpu_s: list[float] | None = None,
                 broker_cpu_s: list[float] | None = None, replay_broker_cpu_s: list[float] | None = None):
        self.command_s, self.replay_s, self.startup_s, self.rounds, self.idle = command_s, replay_s, startup_s, rounds, idle
        self.command_cpu_s, self.startup_cpu_s = command_cpu_s or [], startup_cpu_s or []
        self.broker_cpu_s, self.replay_broker_cpu_s = broker_cpu_s or [], replay_broker_cpu_s or []

    def replay(self) -> tuple[float, list[float], int, list]:
        """As :func:`replayed` returns it, for :func:`floor_figures`."""
        return statistics.median(self.replay_s), self.replay_s, self.rounds, self.idle


def beside_floor(bootstrap: str, command: list[str], rounds: int, workdir: Path, run_command,
                 brokers_cpu_s=None) -> BesideFloor:
    """``kafkatxn COMMAND`` recorded once, then ``rounds`` times, back to back: the command
    (``run_command()``, a :class:`Run`), its requests replayed once, and the CLI's start-up. The
    command and the two parts of its floor meet the same cluster and machine: the brokers' state in the
    minutes after a run of Kafka's tools, or after 30,000 partitions were created, weighs on each alike.
    ``brokers_cpu_s`` (the CPU seconds the brokers have used so far: ``KafkaCluster.brokers_cpu_s``),
    read around the command and around its replay: what the brokers spent on each."""
    recording = load(recorded(bootstrap, command, workdir))
    measured = BesideFloor([], [], [], recording.rounds(), recording.idle())
    for _ in range(rounds):
        before = brokers_cpu_s() if brokers_cpu_s else None
        run = run_command()
        between = brokers_cpu_s() if brokers_cpu_s else None
        measured.command_s.append(run.seconds)
        measured.replay_s.append(replay(recording))
        if brokers_cpu_s:
            measured.broker_cpu_s.append(between - before)
            measured.replay_broker_cpu_s.append(brokers_cpu_s() - between)
        startup = cli_startup()
        measured.startup_s.append(startup.seconds)
        measured.command_cpu_s.append(run.cpu_s)
        measured.startup_cpu_s.append(startup.cpu_s)
    return measured


@contextlib.contextmanager
def client_on_its_own_core(cluster: KafkaCluster):
    """Within the block, the brokers' JVMs run on every core of this machine but the last and this process
    (so every command, replay and start-up it runs) on the last alone, as a client on a host of its own
    meets brokers that have their cores to themselves; as before after it. Yields the client's core, or
    None on a machine of one core (nothing pinned)."""
    mine = os.sched_getaffinity(0)
    cores = sorted(mine)
    if len(cores) < 2:
        yield None
        return
    cluster.pin_brokers(set(cores[:-1]))
    os.sched_setaffinity(0, {cores[-1]})
    try:
        yield cores[-1]
    finally:
        os.sched_setaffinity(0, mine)
        cluster.pin_brokers(mine)


def own_core_figures(figures: dict, name: str, measured: BesideFloor) -> None:
    """A command and its floor measured with the client on its own core (:func:`client_on_its_own_core`),
    added to ``figures`` (medians): ``NAME_own_core_s``, ``NAME_own_core_floor_s`` (start-up plus replay,
    each measured there too), ``NAME_own_core_vs_floor`` and ``NAME_own_core_over_floor_s``. Information:
    the targets are judged with the brokers and the client sharing the cores (``NAME_vs_floor``)."""
    median = statistics.median
    command, floor = median(measured.command_s), median(measured.startup_s) + median(measured.replay_s)
    figures[f"{name}_own_core_s"] = round(command, 3)
    figures[f"{name}_own_core_runs_s"] = [round(one, 3) for one in measured.command_s]
    figures[f"{name}_own_core_floor_s"] = round(floor, 3)
    figures[f"{name}_own_core_startup_s"] = round(median(measured.startup_s), 3)
    figures[f"{name}_own_core_replay_s"] = round(median(measured.replay_s), 3)
    figures[f"{name}_own_core_vs_floor"] = round(command / floor, 2)
    figures[f"{name}_own_core_over_floor_s"] = round(command - floor, 3)


def cpu_figures(figures: dict, name: str, measured: BesideFloor, cores: int | None = None) -> None:
    """Where a command's time over its floor goes, from the rounds :func:`beside_floor` measured, added to
    ``figures`` (medians): ``NAME_over_floor_s``, the command's time less its floor (``NAME_floor_s``,
    set by :func:`floor_figures`); ``NAME_cpu_s`` and ``NAME_startup_cpu_s``, the CPU the command's
    process and the start-up's used (user and system), and ``NAME_cpu_over_startup_s`` between them:
    the client's own work beyond starting, which the floor counts as none; ``NAME_broker_cpu_s`` and
    ``NAME_replay_broker_cpu_s``, the brokers' CPU during the command and during its replay (the same
    requests: the same work, if the replay is the command's floor).

    And how the machine's ``cores`` (default: this machine's) were shared, the brokers' and the client's
    CPU being on the same ones: ``NAME_cores_busy`` and ``NAME_replay_cores_busy``, the share of the
    cores' time the command's process and the brokers used during the command, and the brokers during
    its replay (medians of the rounds); ``NAME_packed_s``, the least time the command could take with its
    own work beyond start-up and the brokers' work of the replay packed onto those cores, no core ever
    idle (start-up plus the larger of the replay and that CPU over the cores), and ``NAME_packed_vs_floor``
    over the floor. Above a target, the target needs less of the client's CPU, not more overlap of it
    with the brokers' answers; below it, the overlap is what is missing."""
    median = statistics.median
    figures[f"{name}_over_floor_s"] = round(median(measured.command_s) - figures[f"{name}_floor_s"], 3)
    cpu = [s for s in measured.command_cpu_s if not math.isnan(s)]  # NaN: a Run not measured (Run.cpu_s)
    startup = [s for s in measured.startup_cpu_s if not math.isnan(s)]
    if cpu and startup:
        figures[f"{name}_cpu_s"] = round(median(cpu), 3)
        figures[f"{name}_startup_cpu_s"] = round(median(startup), 3)
        figures[f"{name}_cpu_over_startup_s"] = round(median(cpu) - median(startup), 3)
    if measured.broker_cpu_s:
        figures[f"{name}_broker_cpu_s"] = round(median(measured.broker_cpu_s), 3)
        figures[f"{name}_replay_broker_cpu_s"] = round(median(measured.replay_broker_cpu_s), 3)
        cores = cores or os.cpu_count() or 1
        rounds = zip(measured.command_s, measured.command_cpu_s, measured.broker_cpu_s)
        busy = [(cpu_s + brokers) / (cores * seconds) for seconds, cpu_s, brokers in rounds if not math.isnan(cpu_s) and seconds > 0]
        if busy:
            figures[f"{name}_cores_busy"] = round(median(busy), 2)
        figures[f"{name}_replay_cores_busy"] = round(median(
            brokers / (cores * seconds) for seconds, brokers in zip(measured.replay_s, measured.replay_broker_cpu_s)), 2)
        if cpu and startup:
            work_s = max(0.0, median(cpu) - median(startup)) + median(measured.replay_broker_cpu_s)
            packed = figures[f"{name}_packed_s"] = round(median(measured.startup_s) + max(median(measured.replay_s), work_s / cores), 3)
            figures[f"{name}_packed_vs_floor"] = round(packed / figures[f"{name}_floor_s"], 2)


def counted_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {api: after[api] - before.get(api, 0) for api in sorted(after) if after[api] - before.get(api, 0)}


def spread(samples: list[float]) -> str:
    return f"{statistics.median(samples):.3f} s (min {min(samples):.3f}, max {max(samples):.3f}, n={len(samples)})"


class Run:
    """One finished child process: wall time, exit code, output, its own peak RSS and the CPU it used
    (user and system; NaN where not measured)."""

    def __init__(self, seconds: float, returncode: int, stdout: str, stderr: str, peak_rss_mb: float,
                 cpu_s: float = float("nan")):
        self.seconds, self.returncode, self.stdout, self.stderr, self.peak_rss_mb = seconds, returncode, stdout, stderr, peak_rss_mb
        self.cpu_s = cpu_s


def run_measured(command: list[str], timeout: float = 600, env: dict | None = None) -> Run:
    """Run a command; its wall time, its peak RSS as GNU time (``/usr/bin/time -f %M``) reports it, and
    its CPU time (user and system: this process's children's, which GNU time and the command are, in
    microseconds where GNU time prints hundredths).

    Not ``wait4`` on our own child: Linux folds the RSS of the process before ``exec`` (here a copy
    of this benchmark, hundreds of MB at 30,000 partitions) into the child's ``ru_maxrss``. GNU time
    forks from its own small process, so what it reports is the command's own peak.
    """
    with tempfile.NamedTemporaryFile("r", suffix=".maxrss") as rss_file:
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(["/usr/bin/time", "-o", rss_file.name, "-f", "%M", *command], capture_output=True,
                              text=True, stdin=subprocess.DEVNULL, cwd=ROOT, env=env, timeout=timeout)
        elapsed = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        lines = rss_file.read().split()
    peak_mb = int(lines[-1]) / 1024 if lines and lines[-1].isdigit() else float("nan")
    cpu_s = (after.ru_utime - children.ru_utime) + (after.ru_stime - children.ru_stime)
    return Run(elapsed, done.returncode, done.stdout, done.stderr, peak_mb, cpu_s)


def kafkatxn(*args: str, timeout: float = 600) -> Run:
    """``python -m kafkatxn ARGS`` as its own process, as an operator runs it."""
    return run_measured([sys.executable, "-m", "kafkatxn", *args], timeout=timeout)


def kafka_tool(cluster: KafkaCluster, main_class: str, *args: str, timeout: float = 600) -> Run:
    """A Kafka tool from the jars in its own JVM, as the harness runs it (wall time, exit, output)."""
    started = time.perf_counter()
    done = cluster.run_tool(main_class, *args, timeout=timeout)
    return Run(time.perf_counter() - started, done.returncode, done.stdout, done.stderr, float("nan"))


def get_offset_shell(cluster: KafkaCluster, *extra: str) -> Run:
    return kafka_tool(cluster, GET_OFFSET_SHELL, "--bootstrap-server", cluster.bootstrap_servers, "--time", "-1", *extra)


def parse_find_hanging_table(stdout: str) -> set[Finding]:
    """Rows of find-hanging's table: tab-separated padded cells under a header row starting 'Topic'."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    starts = [i for i, line in enumerate(lines) if line.split("\t")[0].strip() == "Topic"]
    if not starts:
        return set()  # "No hanging transactions found"
    header = [c.strip() for c in lines[starts[0]].split("\t")]
    out = set()
    for line in lines[starts[0] + 1 :]:
        cells = dict(zip(header, (c.strip() for c in line.split("\t"))))
        out.add((cells["Topic"], int(cells["Partition"]), int(cells["ProducerId"])))
    return out


def find_hanging_per_broker(cluster: KafkaCluster, max_timeout_minutes: int) -> tuple[float, set[Finding]]:
    """``kafka-transactions.sh find-hanging --broker-id B`` once per broker (the tool needs
    --topic or --broker-id), each in its own JVM; total wall time and the union of findings."""
    findings: set[Finding] = set()
    started = time.perf_counter()
    for broker_id in cluster.broker_ids:
        run = kafka_tool(cluster, TRANSACTIONS_TOOL, "--bootstrap-server", cluster.bootstrap_servers, "find-hanging",
                         "--broker-id", str(broker_id), "--max-transaction-timeout", str(max_timeout_minutes), timeout=600)
        if run.returncode != 0:
            raise SystemExit(f"{TRANSACTIONS_TOOL} failed for broker {broker_id}: {run.stderr.strip()[-2000:]}")
        findings |= parse_find_hanging_table(run.stdout)
    return time.perf_counter() - started, findings


# -- the exporter as its own process ----------------------------------------------------------------


def proc_status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc (Linux only)")


def peak_rss_mb(pid: int) -> float:
    return proc_status_kb(pid, "VmHWM") / 1024


def rss_mb(pid: int) -> float:
    return proc_status_kb(pid, "VmRSS") / 1024


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process: less sensitive than wall time to a busy machine."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_exporter(bootstrap: str, *extra: str, command: list[str] | None = None, source: Path = ROOT) -> tuple[subprocess.Popen, str]:
    """An exporter process (``command`` instead of kafkatxn's own where given), run from ``source``
    (another checkout, for A/B runs); returns it and its URL once it serves."""
    command = command or [sys.executable, "-m", "kafkatxn", "exporter", "-b", bootstrap, "--listen", "127.0.0.1:0", *extra]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                            cwd=source, env=dict(os.environ, PYTHONPATH=str(source)) if source != ROOT else None)
    line = proc.stderr.readline()
    if "serving http://" not in line:
        proc.kill()
        raise RuntimeError(f"exporter did not start: {line}{proc.stderr.read()}")
    threading.Thread(target=lambda: proc.stderr.read(), daemon=True).start()
    return proc, line.split("serving ", 1)[1].strip()


def scrape(url: str, timeout: float = 120) -> tuple[float, dict[str, float], int, int]:
    """One GET of /metrics: seconds, the unlabelled samples by name, sample count, body bytes."""
    from prometheus_client.parser import text_string_to_metric_families

    started = time.perf_counter()
    body = urllib.request.urlopen(url, timeout=timeout).read()
    took = time.perf_counter() - started
    scalars: dict[str, float] = {}
    samples = 0
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            samples += 1
            if not s.labels:
                scalars[s.name] = s.value
    return took, scalars, samples, len(body)


def print_table(result: dict) -> None:
    width = max(map(len, result))
    for key, value in result.items():
        print(f"{key.ljust(width)}  {value}")
    print(json.dumps(result))


def finish(figures: dict, failures: list[str]) -> int:
    """A benchmark's last step: the machine's load and the failures added to its figures, all
    printed, and its exit code (1 when a finding differed or a target was missed)."""
    figures["load_average_1m"] = round(os.getloadavg()[0], 2)
    figures["failures"] = failures
    print_table(figures)
    return 1 if failures else 0
