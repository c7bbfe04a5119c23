"""Real Apache Kafka clusters for tests: KRaft combined nodes (broker + controller) on loopback.

Each node is a JVM running `kafka.Kafka` from the jars that `jars.ensure_kafka_jars` caches.
JVMs never outlive the Python process that started them: `stop()` runs from the context
manager and from atexit, and each JVM also gets SIGKILL from the kernel when its parent dies
(setpriv --pdeathsig). That signal is tied to the *thread* that started the JVM, so start
clusters from a thread that lives as long as the cluster (the main thread in tests).
"""

from __future__ import annotations

import atexit
import base64
import concurrent.futures
import itertools
import logging
import os
import shutil
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from .jars import default_kafka_version, ensure_kafka_jars, log4j_flavour
from . import zookeeper
from .class_archive import ClassArchives

LOOPBACK = "127.0.0.1"
CONTROLLER_LISTENER = "CONTROLLER"

# Quick JVM start matters more than peak throughput for tests: C1 only, serial GC, CDS on.
FAST_START_JVM_OPTIONS: tuple[str, ...] = (
    "-Xms256m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xshare:auto",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)
TOOL_JVM_OPTIONS: tuple[str, ...] = (
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xshare:auto",
)

# Kafka's classes for the broker JVMs from a CDS archive (harness/class_archive.py).
_class_archives = ClassArchives()

# The key of a node's JMX port among its listener ports (not a listener: no broker config names it).
JMX_PORT = "JMX"

STOP_GRACE_SECONDS = 5.0
_PORT_ATTEMPTS = 3
# Starts again of a ZooKeeper-mode node that died starting because its session expired (zookeeper.expired_at_startup).
_EXPIRED_SESSION_RESTARTS = 2
_log = logging.getLogger(__name__)
_PROBE_TOPIC = "_kafkatxn_harness_probe"
_LOG_TAIL_LINES = 40


class KafkaHarnessError(RuntimeError):
    pass


class _PortTaken(KafkaHarnessError):
    """A node could not bind one of its ports: another process took it after we picked it."""


class _SessionExpiredAtStart(KafkaHarnessError):
    """ZooKeeper-mode nodes died starting because their ZooKeeper session expired: they may start again."""

    def __init__(self, message: str, nodes: "list[_Node]"):
        super().__init__(message)
        self.nodes = nodes


@dataclass
class Listener:
    """A client-facing listener. The first listener of a cluster is also the inter-broker one.

    `broker_properties` become `listener.name.<name>.<key>` (e.g. `plain.sasl.jaas.config`),
    `client_properties` are merged into `KafkaCluster.client_config()` for clients of this listener.
    """

    name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    broker_properties: Mapping[str, str] = field(default_factory=dict)
    client_properties: Mapping[str, str] = field(default_factory=dict)


@dataclass
class _Node:
    node_id: int
    directory: Path
    ports: dict[str, int]  # listener name -> port, CONTROLLER included
    process: subprocess.Popen | None = None
    log_start: int = 0  # server.log's size when the process was launched: what it wrote comes after

    def log_since_launch(self) -> str:
        if not self.server_log.exists():
            return ""
        with open(self.server_log, "rb") as log:
            log.seek(self.log_start)
            return log.read().decode(errors="replace")

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def server_properties(self) -> Path:
        return self.directory / "server.properties"

    @property
    def server_log(self) -> Path:
        return self.directory / "server.log"

    @property
    def stdout_log(self) -> Path:
        return self.directory / "stdout.log"


def new_kafka_uuid() -> str:
    """A random Kafka Uuid as `kafka-storage random-uuid` prints it, without starting a JVM."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        # Kafka rejects ids starting with "-" too: they read as options on command lines.
        if not text.startswith("-"):
            return text


class KafkaCluster:
    """`n_brokers` combined KRaft nodes with ids 1..n, all voters of one static controller quorum.

    Every node directory (`node_dir(id)`) holds server.properties, server.log, stdout.log and data/.
    `broker_config` overrides the harness's defaults, `listeners` the single PLAINTEXT listener;
    `format_arguments` go to `kafka-storage format` (harness/security.py builds SASL/TLS set-ups).
    """

    def __init__(
        self,
        workdir: Path,
        n_brokers: int = 1,
        broker_config: Mapping[str, object] | None = None,
        kafka_version: str | None = None,
        listeners: Sequence[Listener] | None = None,
        name: str = "kafka",
        jvm_options: Sequence[str] | None = None,
        format_arguments: Sequence[str] = (),
        metadata_mode: str | None = None,
        jmx: bool = False,
    ):
        if n_brokers < 1:
            raise ValueError("n_brokers must be at least 1")
        self.listeners = list(listeners) if listeners else [Listener()]
        listener_names = [listener.name for listener in self.listeners]
        if len(set(listener_names)) != len(listener_names) or CONTROLLER_LISTENER in listener_names:
            raise ValueError(f"listener names must be unique and not {CONTROLLER_LISTENER}: {listener_names}")
        self.workdir = Path(workdir)
        self.n_brokers = n_brokers
        self.broker_config = {key: _property_value(value) for key, value in (broker_config or {}).items()}
        self.version = kafka_version or default_kafka_version()
        self.name = name
        self.jvm_options = list(FAST_START_JVM_OPTIONS if jvm_options is None else jvm_options)
        # A JMX port per broker (harness/jmx.py reads the brokers' own request counters through it).
        self.jmx = jmx
        # Extra `kafka-storage format` arguments, e.g. --add-scram: SCRAM users exist from the first start.
        self.format_arguments = list(format_arguments)
        self.broker_ids = list(range(1, n_brokers + 1))
        self.cluster_id = new_kafka_uuid()
        self.startup_seconds: float | None = None
        self._nodes: dict[int, _Node] = {}
        self._admin: AdminClient | None = None
        # ZooKeeper mode (harness/zookeeper.py): its own ZooKeeper, no storage format, no controller listener.
        self.metadata_mode = zookeeper.metadata_mode(self.version, metadata_mode)
        self.zookeeper = zookeeper.ZooKeeper(self.workdir / f"{name}-zookeeper") if self.metadata_mode == zookeeper.ZOOKEEPER else None

    # -- addresses and clients ------------------------------------------------------------

    @property
    def libs_dir(self) -> Path:
        return ensure_kafka_jars(self.version)

    @property
    def bootstrap_servers(self) -> str:
        return self.bootstrap_servers_for(self.listeners[0].name)

    def jmx_port(self, node_id: int) -> int:
        """The node's JMX port (a cluster made with ``jmx=True``)."""
        self._require_nodes()
        return self._nodes[node_id].ports[JMX_PORT]

    def bootstrap_servers_for(self, listener_name: str) -> str:
        self._require_nodes()
        return ",".join(f"{LOOPBACK}:{node.ports[listener_name]}" for node in self._nodes.values())

    def client_config(self, listener_name: str | None = None) -> dict[str, str]:
        """librdkafka / confluent-kafka settings for a client of `listener_name` (default: the first)."""
        listener = self._listener(listener_name or self.listeners[0].name)
        return {
            "bootstrap.servers": self.bootstrap_servers_for(listener.name),
            "security.protocol": listener.security_protocol,
            **listener.client_properties,
        }

    def admin_client(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient({**self.client_config(), **_QUIET_CLIENT})
        return self._admin

    def node_dir(self, node_id: int) -> Path:
        return self._node(node_id).directory

    def server_logs(self) -> list[Path]:
        return [node.server_log for node in self._nodes.values() if node.server_log.exists()]

    def save_logs(self, destination: Path) -> list[Path]:
        """Copy each node's server.log, stdout.log and server.properties to destination/<node dir>/."""
        saved = []
        for node in self._nodes.values():
            for source in (node.server_log, node.stdout_log, node.server_properties):
                if source.exists():
                    target = Path(destination) / node.directory.name / source.name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(source, target)
                    saved.append(target)
        return saved

    # -- lifecycle ------------------------------------------------------------------------

    def start(self, timeout: float = 60) -> "KafkaCluster":
        """Start every node; return once each answers Metadata and the cluster can create a topic."""
        if any(node.running for node in self._nodes.values()):
            raise KafkaHarnessError(f"cluster {self.name} is already running")
        libs_dir = self.libs_dir  # may fetch; not counted in the startup time
        started_at = time.monotonic()
        deadline = started_at + timeout
        _live_clusters.add(self)
        try:
            if self.zookeeper is not None:
                self.zookeeper.start([*_parent_death_signal_prefix(), _java(), *TOOL_JVM_OPTIONS], libs_dir, deadline)
            for attempt in range(1, _PORT_ATTEMPTS + 1):
                self._prepare_nodes(libs_dir)
                try:
                    for node in self._nodes.values():
                        self._launch(node, libs_dir)
                    self._wait_until_serving(self.broker_ids, deadline)
                    self._probe_topic_creation(deadline)
                    break
                except _PortTaken:
                    self._kill_all()
                    if attempt == _PORT_ATTEMPTS:
                        raise
        except BaseException:
            self.stop()
            raise
        if self.zookeeper is not None:
            zookeeper.settle(self, deadline)
        self.startup_seconds = time.monotonic() - started_at
        _class_archives.dump_running()  # not counted in the startup time
        return self

    def stop(self) -> None:
        """SIGTERM every node, SIGKILL what is left after STOP_GRACE_SECONDS. Safe to call twice."""
        self._admin = None
        for node in self._nodes.values():
            if node.running:
                node.process.terminate()
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        while time.monotonic() < deadline:
            still_running = len(self.running_broker_ids())
            # Nodes left without a majority of the controller quorum cannot finish a controlled
            # shutdown; waiting for them only burns the grace period.
            if still_running == 0 or still_running <= self.n_brokers // 2:
                break
            time.sleep(0.05)
        self._kill_all()
        _class_archives.settle()
        if self.zookeeper is not None:
            self.zookeeper.stop()
        _live_clusters.discard(self)

    def kill_broker(self, node_id: int) -> None:
        """SIGKILL one node, as a crash would."""
        node = self._node(node_id)
        if node.process is not None:
            node.process.kill()
            node.process.wait()
            # Stopped on purpose: waits on the other nodes must not report it as having died.
            node.process = None

    def stop_broker(self, node_id: int, timeout: float = STOP_GRACE_SECONDS) -> None:
        """Stop one node gracefully (controlled shutdown); SIGKILL it after `timeout`."""
        node = self._node(node_id)
        if node.running:
            node.process.terminate()
            try:
                node.process.wait(timeout)
            except subprocess.TimeoutExpired:
                pass  # killed below
        self.kill_broker(node_id)

    def start_broker(self, node_id: int, timeout: float = 60) -> None:
        """Restart a stopped node on its existing data and ports; wait until it serves again."""
        node = self._node(node_id)
        if node.running:
            raise KafkaHarnessError(f"node {node_id} of {self.name} is already running")
        _live_clusters.add(self)
        if self.zookeeper is not None:
            self.zookeeper.wait_until_unregistered(node_id, time.monotonic() + timeout / 2)
        self._launch(node, self.libs_dir)
        self._wait_until_serving([node_id], time.monotonic() + timeout)
        if self.zookeeper is not None:
            zookeeper.settle(self, time.monotonic() + timeout)

    def running_broker_ids(self) -> list[int]:
        return [node.node_id for node in self._nodes.values() if node.running]

    def pin_brokers(self, cpus: set[int]) -> None:
        """Every thread of the running brokers' JVMs made to run on ``cpus`` alone (Linux affinity, per
        thread: a JVM's threads made later inherit it from the thread that makes them). A benchmark gives
        the brokers some cores and its client the others, as a client on a host of its own has them."""
        for node in self._nodes.values():
            if node.running:
                for task in Path(f"/proc/{node.process.pid}/task").iterdir():
                    try:
                        os.sched_setaffinity(int(task.name), cpus)
                    except (ProcessLookupError, FileNotFoundError):  # a thread that ended meanwhile
                        pass

    def brokers_cpu_s(self) -> float:
        """The CPU time (user and system) the running brokers' JVMs have used since they started, read from
        /proc (Linux): a benchmark reads it before and after a command to see the brokers' part of its work."""
        ticks = 0
        for node in self._nodes.values():
            if node.running:
                # /proc/PID/stat: utime and stime are fields 14 and 15, counted after the ")" that ends the name.
                fields = Path(f"/proc/{node.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
                ticks += int(fields[11]) + int(fields[12])
        return ticks / os.sysconf("SC_CLK_TCK")

    def __enter__(self) -> "KafkaCluster":
        if not self.running_broker_ids():
            self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    # -- topics and tools -----------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        config: Mapping[str, object] | None = None,
        timeout: float = 30,
    ) -> str:
        """Create a topic and wait until every partition has a leader. Returns `name`."""
        topic = NewTopic(
            name,
            num_partitions=partitions,
            replication_factor=replication_factor,
            config={key: _property_value(value) for key, value in (config or {}).items()},
        )
        self.admin_client().create_topics([topic], operation_timeout=timeout)[name].result(timeout)
        self._wait_for_leaders(name, partitions, time.monotonic() + timeout)
        return name

    def run_tool(
        self, main_class: str, *args: str, timeout: float = 60, jvm_options: Sequence[str] = ()
    ) -> subprocess.CompletedProcess:
        """Run one of Kafka's own command-line tools, e.g. org.apache.kafka.tools.TransactionsCommand.

        Arguments go through unchanged: pass `--bootstrap-server`, `cluster.bootstrap_servers` yourself.
        `jvm_options` add system properties (`-Djava.security.krb5.conf=...`, OAUTHBEARER's allowed URLs).
        """
        libs_dir = self.libs_dir
        command = [
            _java(),
            *TOOL_JVM_OPTIONS,
            *jvm_options,
            _logging_option(libs_dir, self._tools_logging_config(libs_dir)),
            "-cp",
            f"{libs_dir}/*",
            main_class,
            *map(str, args),
        ]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    # -- internals ------------------------------------------------------------------------

    def _listener(self, name: str) -> Listener:
        for listener in self.listeners:
            if listener.name == name:
                return listener
        raise KeyError(f"no listener {name!r}; listeners are {[listener.name for listener in self.listeners]}")

    def _node(self, node_id: int) -> _Node:
        self._require_nodes()
        try:
            return self._nodes[node_id]
        except KeyError:
            raise KeyError(f"no node {node_id} in {self.name}; nodes are {self.broker_ids}") from None

    def _require_nodes(self) -> None:
        if not self._nodes:
            raise KafkaHarnessError(f"cluster {self.name} has not been started")

    def _prepare_nodes(self, libs_dir: Path) -> None:
        """Fresh directories, fresh ports, configs, and formatted storage for every node."""
        listener_names = [listener.name for listener in self.listeners] + [CONTROLLER_LISTENER]
        if self.jmx:
            listener_names.append(JMX_PORT)
        ports = iter(_free_ports(len(listener_names) * self.n_brokers))
        self._nodes = {}
        for node_id in self.broker_ids:
            directory = self.workdir / f"{self.name}-{node_id}"
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir(parents=True)
            self._nodes[node_id] = _Node(node_id, directory, {name: next(ports) for name in listener_names})
        flavour = log4j_flavour(libs_dir)
        for node in self._nodes.values():
            node.server_properties.write_text(_format_properties(self._server_properties(node)))
            _write_broker_logging_config(node, flavour)
        self._format_storage(libs_dir)

    def _server_properties(self, node: _Node) -> dict[str, str]:
        # Internal topics are replicated as much as the cluster allows: 1 for one node, 3 (min ISR 2) for three.
        internal_replication = str(min(3, self.n_brokers))
        internal_min_isr = str(2 if self.n_brokers >= 3 else 1)
        client_listeners = [listener.name for listener in self.listeners]
        properties = {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            # A static quorum formats the same way on Kafka 3.9 and 4.x (no --standalone needed).
            "controller.quorum.voters": ",".join(
                f"{other.node_id}@{LOOPBACK}:{other.ports[CONTROLLER_LISTENER]}" for other in self._nodes.values()
            ),
            "controller.listener.names": CONTROLLER_LISTENER,
            "listeners": ",".join(
                f"{name}://{LOOPBACK}:{node.ports[name]}" for name in [*client_listeners, CONTROLLER_LISTENER]
            ),
            "advertised.listeners": ",".join(f"{name}://{LOOPBACK}:{node.ports[name]}" for name in client_listeners),
            "listener.security.protocol.map": ",".join(
                [f"{listener.name}:{listener.security_protocol}" for listener in self.listeners]
                + [f"{CONTROLLER_LISTENER}:PLAINTEXT"]
            ),
            "inter.broker.listener.name": self.listeners[0].name,
            "log.dirs": str(node.directory / "data"),
            "auto.create.topics.enable": "false",
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.replication.factor": internal_replication,
            "transaction.state.log.replication.factor": internal_replication,
            "transaction.state.log.min.isr": internal_min_isr,
            "share.coordinator.state.topic.replication.factor": internal_replication,
            "share.coordinator.state.topic.min.isr": internal_min_isr,
            # Few partitions for internal topics: they are created on first use, inside a test's time.
            "offsets.topic.num.partitions": "5",
            "transaction.state.log.num.partitions": "5",
            "num.network.threads": "2",
            "num.io.threads": "4",
            # The log cleaner's dedupe map is allocated whole as a broker starts: 128 MiB by default, half
            # the initial heap, the longest step of most starts in CI's logs (3.35 s in the one whose
            # ZooKeeper session expired meanwhile). Test topics compact few keys; Kafka wants > 1 MiB.
            "log.cleaner.dedupe.buffer.size": str(4 << 20),
            # A killed node can re-register only once its old session expired (9 s by default):
            # keep kill/restart tests short.
            "broker.session.timeout.ms": "3000",
            "broker.heartbeat.interval.ms": "500",
        }
        for listener in self.listeners:
            prefix = f"listener.name.{listener.name.lower()}."
            properties.update({prefix + key: _property_value(value) for key, value in listener.broker_properties.items()})
        properties.update(self.broker_config)
        if self.zookeeper is not None:
            return zookeeper.broker_properties(properties, node.node_id, self.zookeeper.connect, CONTROLLER_LISTENER)
        return properties

    def _format_storage(self, libs_dir: Path) -> None:
        if self.zookeeper is not None:
            return  # a ZooKeeper-mode broker makes its storage itself
        # One JVM per node, in parallel: formatting is a noticeable part of the startup time.
        formatters = {}
        for node in self._nodes.values():
            archive_options, archive_writer = _class_archives.options(libs_dir, _java(), "storage-tool", at_exit=True)
            command = [
                _java(),
                *TOOL_JVM_OPTIONS,
                *archive_options,
                _logging_option(libs_dir, self._tools_logging_config(libs_dir)),
                "-cp",
                f"{libs_dir}/*",
                "kafka.tools.StorageTool",
                "format",
                "-t",
                self.cluster_id,
                "-c",
                str(node.server_properties),
                *self.format_arguments,
            ]
            formatters[node.node_id] = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            )
            _class_archives.adopt(archive_writer, formatters[node.node_id])
        for node_id, formatter in formatters.items():
            output, _ = formatter.communicate(timeout=120)
            if formatter.returncode != 0:
                raise KafkaHarnessError(f"formatting storage of node {node_id} failed:\n{output}")

    def _tools_logging_config(self, libs_dir: Path) -> Path:
        flavour = log4j_flavour(libs_dir)
        path = self.workdir / f"{self.name}-tools-{flavour}.properties"
        if not path.exists():
            self.workdir.mkdir(parents=True, exist_ok=True)
            path.write_text(_TOOLS_LOGGING[flavour])
        return path

    def _launch(self, node: _Node, libs_dir: Path) -> None:
        flavour = log4j_flavour(libs_dir)
        archive_options, archive_writer = _class_archives.options(libs_dir, _java(), "broker")
        command = [
            *_parent_death_signal_prefix(),
            _java(),
            *self.jvm_options,
            *archive_options,
            *(_jmx_options(node.ports[JMX_PORT]) if JMX_PORT in node.ports else ()),
            _logging_option(libs_dir, node.directory / _BROKER_LOGGING_FILE[flavour]),
            "-cp",
            f"{libs_dir}/*",
            "kafka.Kafka",
            str(node.server_properties),
        ]
        node.log_start = node.server_log.stat().st_size if node.server_log.exists() else 0
        with open(node.stdout_log, "ab") as stdout:
            # Own session: a terminal's Ctrl-C reaches the harness, which then stops brokers in order.
            node.process = subprocess.Popen(
                command, cwd=node.directory, stdin=subprocess.DEVNULL, stdout=stdout,
                stderr=subprocess.STDOUT, start_new_session=True,
            )
        _class_archives.adopt(archive_writer, node.process)

    def _wait_until_serving(self, node_ids: Iterable[int], deadline: float) -> None:
        """Wait until each node answers Metadata itself and lists every running node as a live broker.
        A ZooKeeper-mode node that died starting because its session expired is started again, at most
        _EXPIRED_SESSION_RESTARTS times."""
        node_ids = list(node_ids)
        for restart in itertools.count(1):
            try:
                self._wait_until_each_serves(node_ids, deadline)
                return
            except _SessionExpiredAtStart as expired:
                if restart > _EXPIRED_SESSION_RESTARTS:
                    raise
                for node in expired.nodes:
                    _log.warning("%s: node %d died starting, its ZooKeeper session expired: starting it again (%d of %d)",
                                 self.name, node.node_id, restart, _EXPIRED_SESSION_RESTARTS)
                    self.zookeeper.wait_until_unregistered(node.node_id, deadline)
                    self._launch(node, self.libs_dir)

    def _wait_until_each_serves(self, node_ids: Iterable[int], deadline: float) -> None:
        for node_id in node_ids:
            node = self._nodes[node_id]
            self._wait_for_port(node, deadline)
            for attempt in itertools.count(1):
                self._check_alive(deadline, f"node {node_id} to serve metadata")
                # Short waits while the node is still starting, longer ones in case it is merely slow.
                metadata = self._metadata_from(node, timeout=min(0.5 * attempt, 5.0))
                # A node lists itself only once the controller has unfenced it.
                if metadata is not None and set(self.running_broker_ids()) <= set(metadata.brokers):
                    break
                time.sleep(0.1)

    def _probe_topic_creation(self, deadline: float) -> None:
        """Create (and delete) a topic replicated on every node: proves the controller and all brokers work."""
        admin = self.admin_client()
        replicas = len(self.running_broker_ids())
        while True:
            self._check_alive(deadline, "the cluster to create a topic")
            try:
                admin.create_topics([NewTopic(_PROBE_TOPIC, 1, replicas)], operation_timeout=5)[_PROBE_TOPIC].result(10)
                break
            except KafkaException as error:
                if error.args[0].code() == _TOPIC_ALREADY_EXISTS:
                    break
                time.sleep(0.2)  # typically: not every broker is unfenced yet
            except concurrent.futures.TimeoutError:
                pass
        self._wait_for_leaders(_PROBE_TOPIC, 1, deadline)
        admin.delete_topics([_PROBE_TOPIC], operation_timeout=10)[_PROBE_TOPIC].result(15)

    def _wait_for_leaders(self, topic: str, partitions: int, deadline: float) -> None:
        """Wait until every running node knows `topic` with a leader for each partition.

        Brokers learn of new topics asynchronously, and a client may ask any of them.
        """
        for node_id in self.running_broker_ids():
            while True:
                self._check_alive(deadline, f"node {node_id} to know leaders for {topic}")
                metadata = self._metadata_from(self._nodes[node_id], timeout=2.0, topic=topic)
                described = metadata.topics.get(topic) if metadata is not None else None
                if (
                    described is not None
                    and described.error is None
                    and len(described.partitions) == partitions
                    and all(partition.leader >= 0 for partition in described.partitions.values())
                ):
                    break
                time.sleep(0.1)

    def metadata_of(self, node_id: int, timeout: float, topic: str | None = None):
        """Metadata as broker ``node_id`` itself sees it, or None if it did not answer within ``timeout``:
        the brokers learn a change from the controller one by one, so one broker's view is not another's."""
        return self._metadata_from(self._node(node_id), timeout, topic)

    def _metadata_from(self, node: _Node, timeout: float, topic: str | None = None):
        """Metadata as `node` itself sees it, or None if it did not answer within `timeout`."""
        # A fresh client knows only this node, so its first request can go nowhere else.
        admin = AdminClient(
            {**self.client_config(), **_QUIET_CLIENT, "bootstrap.servers": f"{LOOPBACK}:{node.ports[self.listeners[0].name]}"}
        )
        try:
            metadata = admin.list_topics(topic=topic, timeout=timeout)
        except KafkaException:
            return None
        return metadata if metadata.orig_broker_id == node.node_id else None

    def _wait_for_port(self, node: _Node, deadline: float) -> None:
        port = node.ports[self.listeners[0].name]
        while True:
            self._check_alive(deadline, f"node {node.node_id} to listen on port {port}")
            try:
                socket.create_connection((LOOPBACK, port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.1)

    def _check_alive(self, deadline: float, waiting_for: str) -> None:
        """Raise, with excerpts of the logs, if a node died or the deadline passed."""
        dead = [node for node in self._nodes.values() if node.process is not None and node.process.poll() is not None]
        if dead:
            ids = ", ".join(f"{node.node_id} (exit code {node.process.returncode})" for node in dead)
            message = f"{self.name}: node {ids} exited while waiting for {waiting_for}\n{self._log_excerpts(dead)}"
            port_taken = any("Address already in use" in _read(node.server_log) + _read(node.stdout_log) for node in dead)
            if port_taken:
                raise _PortTaken(message)
            if self.zookeeper is not None and all(zookeeper.expired_at_startup(node.log_since_launch()) for node in dead):
                raise _SessionExpiredAtStart(message, dead)
            raise KafkaHarnessError(message)
        if time.monotonic() > deadline:
            raise KafkaHarnessError(
                f"{self.name} (Kafka {self.version}): timed out waiting for {waiting_for}\n"
                + self._log_excerpts(self._nodes.values())
            )

    def _log_excerpts(self, nodes: Iterable[_Node]) -> str:
        """The first error of each log (after a fatal one the tail is only shutdown noise), then its tail."""
        sections = []
        for node in nodes:
            for path in (node.stdout_log, node.server_log):
                lines = _read(path).splitlines()
                if not lines:
                    continue
                tail_start = max(0, len(lines) - _LOG_TAIL_LINES)
                first_error = next((i for i, line in enumerate(lines) if " ERROR " in line), None)
                if first_error is not None and first_error < tail_start:
                    sections.append(f"--- first error in {path} ---\n" + "\n".join(lines[first_error:first_error + 20]))
                sections.append(f"--- tail of {path} ---\n" + "\n".join(lines[tail_start:]))
        return "\n".join(sections) or "(no broker output)"

    def _kill_all(self) -> None:
        for node in self._nodes.values():
            if node.running:
                node.process.kill()
            if node.process is not None:
                node.process.wait()


# -- module helpers ---------------------------------------------------------------------------

_TOPIC_ALREADY_EXISTS = 36  # KafkaError.TOPIC_ALREADY_EXISTS

# Harness clients poll brokers that are still starting: retry fast and keep librdkafka's
# connection-refused chatter off stderr.
_QUIET_CLIENT = {"reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500, "log_level": 0}

_BROKER_LOGGING_FILE = {"log4j2": "log4j2.properties", "reload4j": "log4j.properties"}

_BROKER_LOGGING = {
    "log4j2": """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
""",
    "reload4j": """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log}
log4j.appender.file.Append=true
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
""",
}

# Kafka's tools print their results on stdout; their logging goes to stderr, warnings only.
_TOOLS_LOGGING = {
    "log4j2": """\
status = warn
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = stderr
""",
    "reload4j": """\
log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
""",
}


def _write_broker_logging_config(node: _Node, flavour: str) -> None:
    (node.directory / _BROKER_LOGGING_FILE[flavour]).write_text(_BROKER_LOGGING[flavour].format(log=node.server_log))


def _logging_option(libs_dir: Path, config: Path) -> str:
    if log4j_flavour(libs_dir) == "reload4j":
        return f"-Dlog4j.configuration=file:{config}"
    return f"-Dlog4j2.configurationFile={config}"


def _jmx_options(port: int) -> tuple[str, ...]:
    """Remote JMX on loopback without authentication: a test cluster's counters, read by JmxTool."""
    return (
        "-Dcom.sun.management.jmxremote",
        f"-Dcom.sun.management.jmxremote.port={port}",
        f"-Dcom.sun.management.jmxremote.rmi.port={port}",
        "-Dcom.sun.management.jmxremote.authenticate=false",
        "-Dcom.sun.management.jmxremote.ssl=false",
        "-Dcom.sun.management.jmxremote.local.only=false",
        f"-Djava.rmi.server.hostname={LOOPBACK}",
    )


def _java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    return "java"


def _parent_death_signal_prefix() -> list[str]:
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL"] if setpriv else []


def _free_ports(count: int) -> list[int]:
    """Ports the kernel considers free right now; all held open together so none repeats."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((LOOPBACK, 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def _property_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _format_properties(properties: Mapping[str, str]) -> str:
    # Java .properties: backslashes are escapes and a value must stay on one line.
    def escape(text: str) -> str:
        return text.replace("\\", "\\\\").replace("\n", "\\n")

    return "".join(f"{escape(key)}={escape(value)}\n" for key, value in properties.items())


# Clusters with JVMs that may still be running; stopped when the interpreter exits.
_live_clusters: set[KafkaCluster] = set()


@atexit.register
def _stop_live_clusters() -> None:
    for cluster in list(_live_clusters):
        cluster.stop()
