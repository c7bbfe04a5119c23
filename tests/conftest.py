"""Fixtures for tests against real Apache Kafka brokers started by harness/.

kafka            session: one broker, started on first use
kafka_cluster3   session: three brokers (3-voter quorum), started on first use
kafka_hanging    session: one broker on which hanging transactions can be made (harness/hanging_maker.py:
                 HANGING_BROKER_CONFIG), started on first use
kafka_factory    per test: kafka_factory(n_brokers=1, **broker_settings) -> a dedicated cluster
kafka_secure     session: one broker with SASL_SSL (SCRAM-SHA-512 + PLAIN) and mutual-TLS listeners,
                 certificates and users made by harness/security.py; started on first use
secure_stores    session: the ``kafka_secure`` PKI's CA and client key as JKS and PKCS12 trust and key stores
                 (harness/stores.py: keytool), with random store and key passwords
kafka_kerberos   session: ``kafka_sasl`` with its KDC (skipped without MIT Kerberos, failed in CI)
kafka_sasl       session: one broker with an OAUTHBEARER listener validating tokens of an OIDC provider and
                 a GSSAPI listener of a Kerberos KDC (harness/oidc.py, harness/kerberos.py,
                 harness/sasl.py; the KDC only where MIT's krb5-kdc is installed); started on first use
figures          session: dict of figures printed at the end of the run (the issues' closing figures)
unique_name      per test: a topic / transactional.id / group name no other test uses

The session clusters (kafka, kafka_cluster3, kafka_hanging, kafka_secure with secure_stores, kafka_sasl)
belong to the process (an xdist worker) rather than to pytest's session scope: each is stopped as soon
as no module still to be handed out uses it (_SessionClusters), and the short modules using one run
right after the last slow module using it (_module_order), so that happens early.

When a test that used a broker fails, its brokers' logs are copied to test-logs/<test id>/.
Set KAFKA_VERSION to test against another Kafka release (e.g. 3.9.1).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import uuid
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence, TypeVar

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
# tests/ is not a package, so pytest only puts tests/ itself on sys.path; the broker harness
# (harness/ at the repository's root, not in the wheel) and tests/support import from the root.
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from harness import KafkaCluster, Listener  # noqa: E402
from harness.kerberos import Kdc, kerberos_available  # noqa: E402
from harness.oidc import OidcProvider  # noqa: E402
from harness.sasl import SaslKafka, sasl_setup  # noqa: E402
from harness.security import SaslUsers, SecureKafka, make_pki, secure_setup  # noqa: E402
from harness.stores import ClientStores, client_stores  # noqa: E402
from tests.support import spark_class_archive  # noqa: E402

# Spark's JVMs as the harness starts brokers (harness/broker.py): C1 only, the serial GC, CDS on. A
# test-sized Spark job otherwise spends much of its CPU in C2 compiling and G1's threads (a small
# local job: 35 CPU-seconds with the defaults, 20 with these); the suite is CPU-bound. The driver
# reads SPARK_SUBMIT_OPTS (pyspark starts it through spark-submit: audits, the exactly-once job,
# in-process sessions), a standalone cluster's master and workers SPARK_DAEMON_JAVA_OPTS. Set here,
# at import, so every xdist worker and every process a test starts inherits them; a value already
# in the environment wins.
# Drivers also map Spark's classes from an archive the xdist controller writes at the start
# (tests/support/spark_class_archive.py).
SPARK_TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xshare:auto"
SPARK_CLASS_ARCHIVE = spark_class_archive.archive_path()
os.environ.setdefault("SPARK_SUBMIT_OPTS", f"{SPARK_TEST_JVM_OPTIONS} {spark_class_archive.driver_options(SPARK_CLASS_ARCHIVE)}".strip())
os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", SPARK_TEST_JVM_OPTIONS)

TEST_LOGS_DIR = REPO_ROOT / "test-logs"
BROKER_FIXTURES = frozenset({"kafka", "kafka_cluster3", "kafka_hanging", "kafka_factory", "kafka_secure", "kafka_sasl", "kafka_kerberos"})
SINGLE_BROKER_START_TIMEOUT = 60
CLUSTER3_START_TIMEOUT = 120
_LOGS_SAVED = pytest.StashKey[bool]()
_FIGURES = pytest.StashKey[dict]()
_CLUSTERS = pytest.StashKey["_SessionClusters"]()
_SPARK_ARCHIVE_WRITER = pytest.StashKey["subprocess.Popen | None"]()
# The session clusters: each stopped on a worker once no module still to be handed out uses it.
SESSION_CLUSTERS = ("kafka", "kafka_cluster3", "kafka_hanging", "kafka_secure", "kafka_sasl")


# Modules that take longest (seconds of one sequential CI run, rounded). Under pytest-xdist
# (`--dist loadfile`, as scripts/test runs the suite) they are handed out first, so no worker is left
# running a long module alone at the end; a module missing here is short and goes after them.
SLOW_MODULES = {
    "test_security.py": 420, "test_nemesis.py": 340, "test_spark_exactly_once.py": 270,
    "test_secrets.py": 260, "test_pipx_install.py": 200, "test_audit.py": 190, "test_faults.py": 150,
    "test_broker_loss.py": 140, "test_audit_patterns.py": 130, "test_harness.py": 120,
    "test_audit_installed.py": 110, "test_declared_deps.py": 100, "test_old_brokers.py": 60,
    "test_cluster.py": 50, "test_spark_reader.py": 50, "test_remedy_tv2.py": 50, "test_exporter_restarts.py": 45,
    "test_bad_input.py": 45,
}


# Modules run one after the other by one worker (one xdist work unit): they share session clusters that
# cost the most to start and to keep (kafka_secure with its key stores, kafka_sasl with its KDC and OIDC
# provider; the 3-broker cluster), which another worker would start again. Only names: xdist's
# controller sees node ids, not fixtures.
SAME_WORKER = {
    **dict.fromkeys(("test_security.py", "test_secrets.py", "test_command_config.py", "test_listener_mismatch.py",
                     "test_stores.py", "test_sasl_gssapi.py", "test_sasl_oauth.py", "test_txnlog_gssapi.py"), "secured clusters"),
    **dict.fromkeys(("test_harness.py", "test_groups_wire.py", "test_inspect.py", "test_lso.py"), "3-broker cluster"),
}


try:  # the [test] extra has pytest-xdist; without it the suite runs in one process
    from xdist.scheduler import LoadFileScheduling
except ImportError:  # pragma: no cover
    LoadFileScheduling = None

if LoadFileScheduling is not None:
    class _SlowestModulesFirst(LoadFileScheduling):
        """xdist's `loadfile`, handing modules out in collection order (the slowest first, above)
        rather than by their number of tests, which put the one-test modules (the nemesis, the
        Spark crash test) last, each running alone at the end; SAME_WORKER's modules as one unit."""

        def _split_scope(self, nodeid: str) -> str:
            module = super()._split_scope(nodeid)
            return SAME_WORKER.get(module.rsplit("/", 1)[-1], module)

        def _assign_work_unit(self, node) -> None:
            if not getattr(self, "_in_collection_order", False):
                order = {scope: i for i, scope in enumerate(dict.fromkeys(map(self._split_scope, self.collection)))}
                units = sorted(self.workqueue.items(), key=lambda unit: order[unit[0]])
                self.workqueue.clear()
                self.workqueue.update(units)
                self._in_collection_order = True
            super()._assign_work_unit(node)

    def pytest_xdist_make_scheduler(config: pytest.Config, log):
        if config.getoption("dist") == "loadfile":
            return _SlowestModulesFirst(config, log)
        return None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "integration: needs a real Kafka broker (started by the harness)")
    config.addinivalue_line("markers", "cluster3: needs the 3-broker cluster")
    # Tables keep to COLUMNS when stdout is not a terminal. pytest-xdist's workers inherit COLUMNS=80
    # from execnet; a test of the 120-column default must not see it (tests that want a width set it).
    os.environ.pop("COLUMNS", None)
    # The controller (not an xdist worker) writes the Spark class archive for a run beyond tests/unit.
    if not hasattr(config, "workerinput") and not _unit_tests_only(config):
        config.stash[_SPARK_ARCHIVE_WRITER] = spark_class_archive.start_writing(SPARK_CLASS_ARCHIVE, SPARK_TEST_JVM_OPTIONS)


def pytest_unconfigure(config: pytest.Config) -> None:
    spark_class_archive.stop_writing(config.stash.get(_SPARK_ARCHIVE_WRITER, None), SPARK_CLASS_ARCHIVE)


def _unit_tests_only(config: pytest.Config) -> bool:
    unit = REPO_ROOT / "tests" / "unit"
    paths = [Path(str(a).split("::", 1)[0]).resolve() for a in config.args]
    return bool(paths) and all(p == unit or unit in p.parents for p in paths)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Mark by fixture use as well as by directory, so `-m "not integration"` never starts a JVM.
    integration_dir = REPO_ROOT / "tests" / "integration"
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & BROKER_FIXTURES or integration_dir in item.path.parents:
            item.add_marker(pytest.mark.integration)
        if "kafka_cluster3" in fixtures:
            item.add_marker(pytest.mark.cluster3)
    # Stable: a module's tests keep their order; only whole modules move.
    order = _module_order(items)
    items.sort(key=lambda item: order[item.path])


def _module_order(items: Sequence[pytest.Item]) -> dict[Path, tuple[tuple[int, int], tuple[int, int]]]:
    """The slow modules first (SLOW_MODULES), slowest first. Each other module using a session cluster
    goes right after the last slow module using that cluster (the earliest such place, if it uses
    several), so a worker can let the cluster go soon (_SessionClusters); the rest after all those."""
    used: dict[Path, set[str]] = {}
    for item in items:
        used.setdefault(item.path, set()).update(n for n in SESSION_CLUSTERS if n in getattr(item, "fixturenames", ()))
    slow = sorted((p for p in used if p.name in SLOW_MODULES), key=lambda p: -SLOW_MODULES[p.name])
    anchor = {name: rank for rank, path in enumerate(slow) for name in used[path]}  # the last slow user's rank
    order = {path: (rank, 0) for rank, path in enumerate(slow)}
    for path, names in used.items():
        if path not in order:
            order[path] = (min(anchor.get(n, len(slow) - 1) for n in names), 1) if names else (len(slow), 1)
    # A SAME_WORKER unit's modules together, where its first would be: xdist hands out units in this order.
    unit_start: dict[str, tuple[int, int]] = {}
    for path, key in order.items():
        if path.name in SAME_WORKER:
            unit_start[SAME_WORKER[path.name]] = min(key, unit_start.get(SAME_WORKER[path.name], key))
    return {path: (unit_start.get(SAME_WORKER.get(path.name, ""), key), key) for path, key in order.items()}


def pytest_collection_finish(session: pytest.Session) -> None:
    session.config.stash[_CLUSTERS] = _SessionClusters(session.items)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Before the item's fixtures: the previous module's module-scoped fixtures are gone by now.
    clusters = item.config.stash.get(_CLUSTERS, None)
    if clusters is not None:
        clusters.entering(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    report = yield
    if report.failed:
        clusters = _clusters_used_by(item)
        if clusters:
            destination = TEST_LOGS_DIR / _sanitise(item.nodeid)
            if not item.stash.get(_LOGS_SAVED, False):
                shutil.rmtree(destination, ignore_errors=True)  # left by an earlier run of this test
                item.stash[_LOGS_SAVED] = True
            for cluster in clusters:
                cluster.save_logs(destination)  # node directories are named <cluster>-<node id>
            report.sections.append(("kafka broker logs", f"saved to {destination}"))
    return report


class KafkaFactory:
    """Starts dedicated clusters for one test; all of them are stopped after it."""

    def __init__(self, workroot: Path, test_name: str):
        self._workroot = workroot
        self._test_name = test_name
        self.clusters: list[KafkaCluster] = []

    def __call__(
        self,
        n_brokers: int = 1,
        broker_config: Mapping[str, object] | None = None,
        *,
        kafka_version: str | None = None,
        listeners: Sequence[Listener] | None = None,
        format_arguments: Sequence[str] = (),
        timeout: float = CLUSTER3_START_TIMEOUT,
        **broker_settings: object,
    ) -> KafkaCluster:
        """Dotted Kafka settings go in broker_config or as **{"a.b": "c"}."""
        name = f"factory{len(self.clusters) + 1}"
        cluster = KafkaCluster(
            self._workroot / f"{self._test_name}-{uuid.uuid4().hex[:8]}",
            n_brokers=n_brokers,
            broker_config={**(broker_config or {}), **broker_settings},
            kafka_version=kafka_version,
            listeners=listeners,
            format_arguments=format_arguments,
            name=name,
        )
        # Registered before start, so a failed start still has its logs saved.
        self.clusters.append(cluster)
        return cluster.start(timeout=timeout)

    def stop_all(self) -> None:
        for cluster in self.clusters:
            cluster.stop()
            shutil.rmtree(cluster.workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def kafka_workroot() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="kafkatxn-tests-"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


T = TypeVar("T")


class _SessionClusters:
    """This process's session clusters, each started on first use and stopped (with what was started for
    it) once no module still to be handed out to this process uses it. An idle cluster is not idle: its
    JVMs keep the CPU busy, and the suite is CPU-bound.

    xdist hands modules out in collection order (_SlowestModulesFirst), so when this process starts the
    module at index i, every module before it has gone to some worker: a cluster whose last user is
    before i is never needed here again. A test that asks for a cluster by getfixturevalue counts as a
    user in its module; were a cluster needed again after all, it would be started again.
    """

    def __init__(self, items: Sequence[pytest.Item]) -> None:
        self._module_index: dict[Path, int] = {}
        self._last_user: dict[str, int] = {}
        for item in items:
            index = self._module_index.setdefault(item.path, len(self._module_index))
            for name in SESSION_CLUSTERS + ("secure_stores",):
                if name in getattr(item, "fixturenames", ()):
                    self._last_user[name] = index
        self._current = -1
        self._open: dict[str, tuple[object, ExitStack]] = {}
        self._dependents: dict[str, list[str]] = {}
        self._failed: dict[str, BaseException] = {}  # a start that failed is not tried again for each module

    def entering(self, item: pytest.Item) -> None:
        index = self._module_index.get(item.path, self._current)
        if index != self._current:
            self._current = index
            for name in [n for n in self._open if self._last_user.get(n, -1) < index]:
                self.stop(name)

    def get(self, name: str, start: Callable[[ExitStack], T], needs: Sequence[str] = ()) -> T:
        """The cluster (or what else) `start` makes, which enters what is to be stopped with it in its stack."""
        self._last_user[name] = max(self._last_user.get(name, -1), self._current)
        if name in self._failed:
            raise self._failed[name]
        if name not in self._open:
            with ExitStack() as stack:
                try:
                    value = start(stack)
                except Exception as error:
                    self._failed[name] = error
                    raise
                self._open[name] = (value, stack.pop_all())
            for needed in needs:
                self._dependents.setdefault(needed, []).append(name)
        return self._open[name][0]  # type: ignore[return-value]

    def stop(self, name: str) -> None:
        for dependent in self._dependents.pop(name, []):
            self.stop(dependent)
        opened = self._open.pop(name, None)
        if opened is not None:
            opened[1].close()

    def stop_all(self) -> None:
        for name in reversed(list(self._open)):
            self.stop(name)


@pytest.fixture(scope="session")
def _session_clusters(kafka_workroot: Path, pytestconfig: pytest.Config) -> Iterator[_SessionClusters]:
    clusters = pytestconfig.stash.get(_CLUSTERS, None) or pytestconfig.stash.setdefault(_CLUSTERS, _SessionClusters(()))
    try:
        yield clusters
    finally:
        clusters.stop_all()  # before kafka_workroot goes


# Module-scoped views of the session clusters (_SessionClusters decides when they stop), so a module
# fixture may use them.
@pytest.fixture(scope="module")
def kafka(_session_clusters: _SessionClusters, kafka_workroot: Path) -> KafkaCluster:
    return _session_clusters.get("kafka", lambda stack: stack.enter_context(
        _session_cluster(kafka_workroot, "kafka", 1, SINGLE_BROKER_START_TIMEOUT)))


@pytest.fixture(scope="module")
def kafka_cluster3(_session_clusters: _SessionClusters, kafka_workroot: Path) -> KafkaCluster:
    return _session_clusters.get("kafka_cluster3", lambda stack: stack.enter_context(
        _session_cluster(kafka_workroot, "kafka3", 3, CLUSTER3_START_TIMEOUT)))


@pytest.fixture(scope="module")
def kafka_hanging(_session_clusters: _SessionClusters, kafka_workroot: Path) -> KafkaCluster:
    from harness.hanging_maker import HANGING_BROKER_CONFIG

    return _session_clusters.get("kafka_hanging", lambda stack: stack.enter_context(_session_cluster(
        kafka_workroot, "hanging", 1, 90, broker_config=HANGING_BROKER_CONFIG)))


@pytest.fixture(scope="module")
def kafka_secure(_session_clusters: _SessionClusters, kafka_workroot: Path) -> SecureKafka:
    def start(stack: ExitStack) -> SecureKafka:
        workdir = Path(tempfile.mkdtemp(prefix="secure-", dir=kafka_workroot))  # a restart gets new files
        pki = make_pki(workdir / "pki")
        users = SaslUsers.random()
        setup = secure_setup(pki, users)
        cluster = stack.enter_context(_session_cluster(
            workdir, "kafka-secure", 1, SINGLE_BROKER_START_TIMEOUT,
            listeners=setup.listeners, format_arguments=setup.format_arguments, broker_config=setup.broker_config,
        ))
        return SecureKafka(cluster, pki, users, setup)

    return _session_clusters.get("kafka_secure", start)


@pytest.fixture(scope="module")
def secure_stores(_session_clusters: _SessionClusters, kafka_secure: SecureKafka) -> ClientStores:
    import secrets

    def start(stack: ExitStack) -> ClientStores:
        return client_stores(
            kafka_secure.pki, kafka_secure.pki.directory.parent / "stores",
            f"storePw-{secrets.token_hex(10)}", f"keyPw-{secrets.token_hex(10)}",
        )

    return _session_clusters.get("secure_stores", start, needs=("kafka_secure",))


@pytest.fixture(scope="module")
def kafka_sasl(_session_clusters: _SessionClusters, kafka_workroot: Path) -> SaslKafka:
    def start(stack: ExitStack) -> SaslKafka:
        workdir = Path(tempfile.mkdtemp(prefix="sasl-", dir=kafka_workroot))
        kdc = Kdc(workdir / "kdc") if kerberos_available() else None
        oidc = stack.enter_context(OidcProvider(workdir / "oidc"))
        if kdc is not None:
            stack.callback(kdc.stop)
        setup = sasl_setup(oidc, kdc.start() if kdc else None)
        cluster = stack.enter_context(_session_cluster(
            workdir, "kafka-sasl", 1, SINGLE_BROKER_START_TIMEOUT,
            listeners=setup.listeners, broker_config=setup.broker_config, jvm_options=setup.jvm_options,
        ))
        return SaslKafka(cluster, oidc, kdc)

    return _session_clusters.get("kafka_sasl", start)


@pytest.fixture(scope="module")
def kafka_kerberos(kafka_sasl: SaslKafka) -> SaslKafka:
    """``kafka_sasl`` with its KDC: skipped where MIT Kerberos is not installed, failed in CI (scripts/test installs it)."""
    if kafka_sasl.kdc is None:
        message = "MIT Kerberos (krb5-kdc, krb5-admin-server, krb5-user) is not installed: scripts/test installs it"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return kafka_sasl


@pytest.fixture(scope="session")
def figures(request: pytest.FixtureRequest) -> dict:
    """Name -> value; printed in the terminal summary, e.g. "commands x security modes passed"."""
    return request.config.stash.setdefault(_FIGURES, {})


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    shown = config.stash.get(_FIGURES, None)
    if shown:
        terminalreporter.section("figures")
        for name, value in shown.items():
            terminalreporter.write_line(f"{name}: {value}")


@pytest.fixture
def kafka_factory(kafka_workroot: Path, request: pytest.FixtureRequest) -> Iterator[KafkaFactory]:
    factory = KafkaFactory(kafka_workroot, _sanitise(request.node.name)[:60])
    yield factory
    factory.stop_all()


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> str:
    return f"{_sanitise(request.node.name)[:80]}-{uuid.uuid4().hex[:8]}"


@contextmanager
def _session_cluster(workroot: Path, name: str, n_brokers: int, timeout: float, **options: object) -> Iterator[KafkaCluster]:
    cluster = KafkaCluster(workroot / name, n_brokers=n_brokers, name=name, **options)  # type: ignore[arg-type]
    try:
        cluster.start(timeout=timeout)
    except Exception:
        # Every test using this fixture errors in setup; keep the logs once, under the fixture's name.
        destination = TEST_LOGS_DIR / f"startup-{name}"
        shutil.rmtree(destination, ignore_errors=True)
        cluster.save_logs(destination)
        raise
    try:
        yield cluster
    finally:
        cluster.stop()


def _clusters_used_by(item: pytest.Item) -> list[KafkaCluster]:
    clusters: list[KafkaCluster] = []
    for value in getattr(item, "funcargs", {}).values():
        if isinstance(value, KafkaCluster):
            clusters.append(value)
        elif isinstance(value, (SecureKafka, SaslKafka)):
            clusters.append(value.cluster)  # type: ignore[arg-type]
        elif isinstance(value, KafkaFactory):
            clusters.extend(value.clusters)
    return clusters


def _sanitise(text: str) -> str:
    """Safe as a directory name and as a Kafka topic name ([A-Za-z0-9._-])."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_.") or "test"
