"""ZooKeeper mode for the harness's clusters: a standalone ZooKeeper from the Kafka jars' own
dependencies (Kafka 2.x and 3.x ship ``org.apache.zookeeper`` on their classpath, as their
``zookeeper-server-start.sh`` uses it), and the broker settings that replace KRaft's.

A cluster runs in ZooKeeper mode when ``KAFKA_METADATA_MODE=zookeeper`` (or
``KafkaCluster(metadata_mode="zookeeper")``), and always on Kafka 2.x, whose KRaft was an early
access without transactions. Kafka 4.x has no ZooKeeper mode.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Mapping, Sequence

KRAFT = "kraft"
ZOOKEEPER = "zookeeper"
MODES = (KRAFT, ZOOKEEPER)

# ZooKeeper bounds a session's timeout by 2..20 ticks: a short tick lets a killed broker's
# registration (an ephemeral znode) expire in a few seconds, so a restarted one can register again.
TICK_MS = 500
SESSION_TIMEOUT_MS = 4000

# KRaft's settings that a ZooKeeper-mode broker has no use for (some it would refuse).
_KRAFT_ONLY = (
    "process.roles", "node.id", "controller.quorum.voters", "controller.listener.names",
    "broker.session.timeout.ms", "broker.heartbeat.interval.ms",
    "share.coordinator.state.topic.replication.factor", "share.coordinator.state.topic.min.isr",
)


def metadata_mode(version: str, requested: str | None = None) -> str:
    """``kraft`` or ``zookeeper`` for Kafka ``version``: as requested (argument, then
    ``KAFKA_METADATA_MODE``), else ZooKeeper on 2.x and KRaft from 3.x."""
    from .broker import KafkaHarnessError

    major = int(version.split(".")[0])
    mode = requested or os.environ.get("KAFKA_METADATA_MODE") or (ZOOKEEPER if major < 3 else KRAFT)
    if mode not in MODES:
        raise KafkaHarnessError(f"KAFKA_METADATA_MODE must be one of {', '.join(MODES)}, not {mode!r}")
    if mode == ZOOKEEPER and major >= 4:
        raise KafkaHarnessError(f"Kafka {version} has no ZooKeeper mode (removed in 4.0); use 3.9.x or older")
    if mode == KRAFT and major < 3:
        raise KafkaHarnessError(f"the harness runs Kafka {version} in ZooKeeper mode only (its KRaft has no transactions)")
    return mode


def broker_properties(kraft_properties: Mapping[str, str], node_id: int, connect: str, controller_listener: str) -> dict[str, str]:
    """A KRaft node's properties made a ZooKeeper-mode broker's: ``broker.id``, ``zookeeper.connect``,
    and the listeners without the controller's."""
    properties = {key: value for key, value in kraft_properties.items() if key not in _KRAFT_ONLY}
    for key in ("listeners", "listener.security.protocol.map"):
        properties[key] = ",".join(
            entry for entry in properties[key].split(",") if not entry.startswith(f"{controller_listener}:")
            and not entry.startswith(f"{controller_listener}://")
        )
    properties.update({
        "broker.id": str(node_id),
        "zookeeper.connect": connect,
        "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
        "zookeeper.connection.timeout.ms": "30000",
    })
    return properties


# A starting broker whose JVM stalls longer than 2/3 of SESSION_TIMEOUT_MS (C1 on two loaded cores,
# a pause at a large allocation) loses its session, and KafkaServer.startup gives up on it (CI: a
# restarted broker in test_faults, SessionExpiredException for /feature). Another start succeeds.
_FATAL_AT_STARTUP = "Fatal error during KafkaServer startup"
_SESSION_EXPIRED = "KeeperException$SessionExpiredException"


def expired_at_startup(server_log: str) -> bool:
    """Whether the broker that wrote ``server_log`` (this start's part of it) died at start-up because
    its ZooKeeper session expired: worth starting again, unlike a bad configuration or a port taken."""
    lines = server_log.splitlines()
    fatal = [i for i, line in enumerate(lines) if _FATAL_AT_STARTUP in line]
    return bool(fatal) and any(_SESSION_EXPIRED in line for line in lines[fatal[-1] + 1:fatal[-1] + 3])


def settle(cluster, deadline: float) -> None:
    """After a (re)start in ZooKeeper mode: admin requests such as CreateTopics go to the controller,
    which a killed or restarted broker may have been (KRaft brokers forward them, ZooKeeper-mode ones
    answer NOT_CONTROLLER). Wait until the metadata names a running controller, and make the harness's
    next admin client learn it afresh. The cluster id is ZooKeeper's, not the one the harness made up."""
    from confluent_kafka import KafkaException

    from .broker import KafkaHarnessError

    while True:
        cluster._admin = None
        try:
            metadata = cluster.admin_client().list_topics(timeout=5)
        except KafkaException:
            metadata = None
        if metadata is not None and metadata.controller_id in cluster.running_broker_ids():
            cluster.cluster_id = metadata.cluster_id
            return
        if time.monotonic() > deadline:
            raise KafkaHarnessError(f"{cluster.name}: no running broker became the controller")
        time.sleep(0.2)


class ZooKeeper:
    """One standalone ZooKeeper server (``ZooKeeperServerMain``) for one cluster, on loopback."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self.port: int | None = None
        self.process: subprocess.Popen | None = None

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.directory / "zookeeper.log"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, java_command: Sequence[str], libs_dir: Path, deadline: float) -> None:
        """Start on a fresh data directory and a free port from the jars in ``libs_dir``; return once
        it answers. ``java_command`` is the JVM and its options."""
        from .broker import KafkaHarnessError, _free_ports

        shutil.rmtree(self.directory, ignore_errors=True)
        (self.directory / "data").mkdir(parents=True)
        self.port = _free_ports(1)[0]
        config = self.directory / "zoo.cfg"
        config.write_text(
            f"tickTime={TICK_MS}\ndataDir={self.directory / 'data'}\nclientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\nmaxClientCnxns=0\nadmin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr,dump\n"
        )
        logging_config = self.directory / "log4j.properties"
        logging_config.write_text(
            f"log4j.rootLogger=INFO, file\nlog4j.appender.file=org.apache.log4j.FileAppender\n"
            f"log4j.appender.file.File={self.log}\nlog4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
        )
        with open(self.log, "ab") as output:
            self.process = subprocess.Popen(
                [*java_command, f"-Dlog4j.configuration=file:{logging_config}", "-cp", f"{libs_dir}/*",
                 "org.apache.zookeeper.server.ZooKeeperServerMain", str(config)],
                cwd=self.directory, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        while not self._answers("ruok", "imok"):
            if self.process.poll() is not None or time.monotonic() > deadline:
                tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-30:]) if self.log.exists() else ""
                state = f"exited ({self.process.returncode})" if self.process.poll() is not None else "timed out"
                raise KafkaHarnessError(f"ZooKeeper on port {self.port} {state} before serving\n{tail}")
            time.sleep(0.1)

    def registered(self, broker_id: int) -> bool:
        """Whether ``/brokers/ids/<broker_id>`` exists: the ephemeral registration of a broker whose
        session is alive (or not yet expired, after a kill)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock:
                sock.sendall(b"dump")
                dump = b"".join(iter(lambda: sock.recv(65536), b"")).decode(errors="replace")
        except OSError:
            return True  # cannot tell: assume it is
        return any(line.strip() == f"/brokers/ids/{broker_id}" for line in dump.splitlines())

    def wait_until_unregistered(self, broker_id: int, deadline: float) -> None:
        """Wait until a killed broker's registration expired: a broker restarted before that fails
        to register (its id is still held by the old session)."""
        while self.registered(broker_id) and time.monotonic() < deadline:
            time.sleep(0.2)

    def stop(self) -> None:
        if self.process is None:
            return
        if self.running:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.process.wait()

    def _answers(self, command: str, expected: str) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(command.encode())
                return sock.recv(16).decode(errors="replace").startswith(expected)
        except OSError:
            return False
