"""JKS and PKCS12 trust and key stores log in with kafkatxn and with Kafka's own ``kafka-transactions.sh``
from the same ``--command-config`` file (issue 27, 1).

The stores are written by keytool (harness/stores.py) from the ``kafka_secure`` broker's test PKI:
JKS and PKCS12 trust stores on the SASL_SSL listener, JKS and PKCS12 key stores on the mutual-TLS
listener (the broker requires the client's certificate), and keytool's default since JDK 9, a
``keystore.jks`` that is PKCS12, named with no type. Each file runs a few commands through both
clients (``cluster`` and ``lso --groups`` build librdkafka's, ``lso``, ``producers`` and
``transactions list`` kafka-python's), then TransactionsCommand from the kafka-tools jar.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
from pathlib import Path

import pytest

from harness.security import SecureKafka, write_properties
from harness.stores import ClientStores, truststore
from tests.support.secure_commands import Run, make_traffic, problem, run_command, run_kafkatxn
from tests.support.secure_files import store_files

pytestmark = pytest.mark.integration

TRANSACTIONS_COMMAND = "org.apache.kafka.tools.TransactionsCommand"
COMMANDS = ("cluster", "lso", "lso --groups", "producers", "transactions list")


@pytest.fixture(scope="module")
def traffic(kafka_secure: SecureKafka):
    with contextlib.closing(make_traffic(kafka_secure)) as made:
        yield made


@pytest.fixture(scope="module")
def stores(secure_stores: ClientStores) -> ClientStores:
    return secure_stores


def test_each_store_style_logs_in_with_kafkatxn_and_kafka_transactions_sh(kafka_secure: SecureKafka, traffic, stores, tmp_path, figures):
    files = {
        name: (kafka_secure.bootstrap(mode), write_properties(tmp_path / f"{name}.properties", props))
        for name, (mode, props) in store_files(kafka_secure, stores).items()
    }
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        java = {
            name: pool.submit(
                kafka_secure.cluster.run_tool,  # type: ignore[attr-defined]
                TRANSACTIONS_COMMAND, "--bootstrap-server", bootstrap, "--command-config", str(path), "list", timeout=120,
            )
            for name, (bootstrap, path) in files.items()
        }
        ours = {
            (name, command): pool.submit(run_command, command, traffic, bootstrap, path, tmp_path / name / command.replace(" ", "_"))
            for name, (bootstrap, path) in files.items()
            for command in COMMANDS
        }
        java_runs = {name: f.result() for name, f in java.items()}
        runs: dict[tuple[str, str], Run] = {k: f.result() for k, f in ours.items()}
    problems = []
    for name, done in java_runs.items():
        if done.returncode != 0 or traffic.scenario.open.transactional_id not in done.stdout:
            problems.append(f"kafka-transactions.sh with {name}: exit {done.returncode}\n{done.stdout[-1500:]}{done.stderr[-2500:]}")
    for (name, command), run in runs.items():
        p = problem(run, traffic, files[name][0])
        if p:
            problems.append(f"{name}: {p}")
    disguised = [run for (name, _), run in runs.items() if name == "pkcs12-named-jks-no-type-mtls"]
    for run in disguised:  # the declared (default) type differs from the file's: said on stderr
        if "is a PKCS12 store, not JKS (Java's default when ssl.keystore.type is not set)" not in run.stderr:
            problems.append(f"no warning about keystore.jks being PKCS12:\n{run.describe()}")
    figures["store styles logging in (kafkatxn commands + kafka-transactions.sh)"] = (
        f"{len(runs) + len(java_runs) - len(problems)}/{len(runs) + len(java_runs)} "
        f"({len(files)} files x ({len(COMMANDS)} commands + kafka-transactions.sh))"
    )
    assert not problems, "\n\n".join(problems)


def test_a_wrong_store_password_is_the_users_to_fix_and_an_untrusted_broker_the_clusters(kafka_secure: SecureKafka, stores, tmp_path):
    """A bad file or password: exit 64, one line naming the file; a store that does not trust the
    broker's certificate (the cluster's side of the handshake): exit 3."""
    mode, props = store_files(kafka_secure, stores)["jks-keystore-mtls"]
    bootstrap = kafka_secure.bootstrap(mode)
    wrong = write_properties(tmp_path / "wrong.properties", {**props, "ssl.keystore.password": "not-the-store-password-8841"})
    run = _run_cluster(bootstrap, wrong, tmp_path)
    assert run.code == 64, run.describe()
    assert run.stderr.startswith(f"kafkatxn: error: {wrong}:") and run.stderr.count("\n") == 1, run.describe()
    assert "ssl.keystore.password does not open it (wrong password)" in run.stderr
    assert "not-the-store-password-8841" not in run.output()

    # A trust store holding an unrelated CA: the broker's certificate is not trusted.
    other = truststore(tmp_path / "other-ca.jks", kafka_secure.pki.other_ca, "JKS", stores.store_password)
    untrusted = write_properties(tmp_path / "untrusted.properties", {**props, "ssl.truststore.location": str(other)})
    run = _run_cluster(bootstrap, untrusted, tmp_path)
    assert run.code == 3, run.describe()
    assert "TLS handshake failed" in run.stderr and "certificate verify failed" in run.stderr, run.describe()


def _run_cluster(bootstrap: str, properties: Path, tmp_path: Path) -> Run:
    argv = ["cluster", "-b", bootstrap, "-c", str(properties), "--timeout", "20s", "-o", "json"]
    return run_kafkatxn("cluster", argv, cwd=tmp_path)
