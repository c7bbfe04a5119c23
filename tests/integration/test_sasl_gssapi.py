"""GSSAPI (Kerberos): one Java ``--command-config`` file (Krb5LoginModule with a keytab, or with a ticket
cache), read by kafkatxn and by Kafka's own ``kafka-transactions.sh``, against a broker with a GSSAPI
listener and a real MIT KDC (harness/kerberos.py: Debian's krb5-kdc) started by the tests.

confluent-kafka's wheels have no GSSAPI: kafkatxn serves a Kerberos cluster with kafka-python alone
(the ``gssapi`` package), and a command that needs librdkafka says so in one line, exit 64.
"""

from __future__ import annotations

import concurrent.futures
import os

import pytest

from harness.sasl import SaslKafka
from harness.security import write_properties
from kafkatxn.config.kerberos import LIBRDKAFKA_HAS_NO_GSSAPI
from tests.support.secure_commands import make_traffic, problem, run_command

pytestmark = pytest.mark.integration

TRANSACTIONS_COMMAND = "org.apache.kafka.tools.TransactionsCommand"
WIRE_COMMANDS = ("lso", "producers", "transactions list", "transactions describe")
LIBRDKAFKA_COMMANDS = ("cluster", "lso --groups", "hanging", "abort", "fence", "check")


@pytest.fixture(scope="module")
def kerberos(kafka_kerberos: SaslKafka) -> SaslKafka:
    return kafka_kerberos  # skipped without MIT Kerberos, failed in CI (tests/conftest.py)


@pytest.fixture(scope="module")
def traffic(kerberos: SaslKafka):
    made = make_traffic(kerberos)  # over the PLAINTEXT listener
    yield made
    made.close()


def kafka_transactions_list(kafka: SaslKafka, properties):
    return kafka.run_tool(TRANSACTIONS_COMMAND, "--bootstrap-server", kafka.bootstrap("GSSAPI"), "--command-config", str(properties), "list")


def realm_env(kafka: SaslKafka) -> dict[str, str]:
    """Where MIT's library finds the realm (as /etc/krb5.conf would say), and no ticket cache of the user's."""
    assert kafka.kdc is not None
    return kafka.kdc.environment


def test_kafkatxn_and_kafka_transactions_sh_log_in_from_one_keytab_file(kerberos: SaslKafka, traffic, tmp_path, figures):
    properties = write_properties(tmp_path / "keytab.properties", kerberos.kerberos_properties("keytab"))
    bootstrap = kerberos.bootstrap("GSSAPI")
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        java = pool.submit(kafka_transactions_list, kerberos, properties)
        runs = list(pool.map(
            lambda c: run_command(c, traffic, bootstrap, properties, tmp_path / c.replace(" ", "_"), env=realm_env(kerberos)),
            WIRE_COMMANDS,
        ))
        java_result = java.result()
    assert java_result.returncode == 0, f"kafka-transactions.sh refused {properties}:\n{java_result.stderr[-3000:]}"
    assert traffic.scenario.open.transactional_id in java_result.stdout
    failures = [p for p in (problem(run, traffic, bootstrap) for run in runs) if p]
    assert not failures, "\n\n".join(failures)
    figures["GSSAPI commands (keytab)"] = f"{len(runs)}/{len(WIRE_COMMANDS)} and kafka-transactions.sh"


def test_the_ticket_cache_form_logs_in_with_both(kerberos: SaslKafka, traffic, tmp_path):
    assert kerberos.kdc is not None
    ccache = kerberos.kdc.kinit(tmp_path / "krb5cc")
    properties = write_properties(tmp_path / "ccache.properties", kerberos.kerberos_properties("ticket-cache", ccache=ccache))
    java = kafka_transactions_list(kerberos, properties)
    assert java.returncode == 0, f"kafka-transactions.sh refused {properties}:\n{java.stderr[-3000:]}"
    run = run_command("transactions list", traffic, kerberos.bootstrap("GSSAPI"), properties, tmp_path / "work", env=realm_env(kerberos))
    assert problem(run, traffic, kerberos.bootstrap("GSSAPI")) is None, run.describe()


def test_commands_that_need_librdkafka_say_so_in_one_line(kerberos: SaslKafka, traffic, tmp_path):
    properties = write_properties(tmp_path / "keytab.properties", kerberos.kerberos_properties("keytab"))
    for command in LIBRDKAFKA_COMMANDS:
        run = run_command(command, traffic, kerberos.bootstrap("GSSAPI"), properties, tmp_path / "work", env=realm_env(kerberos))
        assert (run.code, run.stderr) == (64, f"kafkatxn: error: {LIBRDKAFKA_HAS_NO_GSSAPI}\n"), run.describe()


def test_a_service_name_the_kdc_does_not_know_is_refused_at_once(kerberos: SaslKafka, traffic, tmp_path):
    """(kafka-transactions.sh is refused too, but only after its 60 s of retries: not run here, for CI's time.)"""
    properties = write_properties(
        tmp_path / "wrong.properties", {**kerberos.kerberos_properties("keytab"), "sasl.kerberos.service.name": "nosuchservice"}
    )
    run = run_command("transactions list", traffic, kerberos.bootstrap("GSSAPI"), properties, tmp_path / "work", env=realm_env(kerberos))
    assert run.code == 3, run.describe()
    assert run.stderr.startswith("kafkatxn: error: authentication failed") and run.stderr.count("\n") == 1, run.describe()
    assert run.seconds < 15, run.describe()
