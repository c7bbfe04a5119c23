"""GSSAPI (Kerberos): one Java ``--command-config`` file (Krb5LoginModule with a keytab, or with a ticket
cache), read by kafkatxn and by Kafka's own ``kafka-transactions.sh``, against a broker with a GSSAPI
listener and a real MIT KDC (harness/kerberos.py: Debian's krb5-kdc) started by the tests.

confluent-kafka's wheels have no GSSAPI: kafkatxn serves a Kerberos cluster with kafka-python alone
(the ``gssapi`` package). Every command of the security matrix runs over GSSAPI: it answers what the
scenario calls for, or, where a part of it still needs a librdkafka client, says so in one line as
that client would be built, exit 64. Those served by the wire alone (``WIRE_COMMANDS``) must answer.
"""

from __future__ import annotations

import concurrent.futures
import json
import os

import pytest

from harness import hanging_maker as hm
from harness import scenarios
from harness.sasl import SaslKafka
from harness.security import write_properties
from kafkatxn.config.kerberos import LIBRDKAFKA_HAS_NO_GSSAPI
from kafkatxn.model import TopicPartition
from tests.support.secure_commands import QUICK_COMMANDS, connection_args, make_traffic, problem, run_command, run_kafkatxn

pytestmark = pytest.mark.integration

TRANSACTIONS_COMMAND = "org.apache.kafka.tools.TransactionsCommand"
# Served by the wire alone, every one of them: groups, configs, the cluster's description, the
# visibility probes, Fetch and fencing need no librdkafka client. (`fence` here fences a committed id;
# a real open transaction is fenced in test_fence_aborts_an_open_transaction_over_gssapi.)
WIRE_COMMANDS = (*QUICK_COMMANDS, "exporter")
# The one line a part that needs librdkafka (until it moves to the wire) ends with: what it needs it for may follow.
REFUSAL = LIBRDKAFKA_HAS_NO_GSSAPI


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
    """Every command of the security matrix: an answer, or the one-line refusal where librdkafka is built."""
    properties = write_properties(tmp_path / "keytab.properties", kerberos.kerberos_properties("keytab"))
    bootstrap = kerberos.bootstrap("GSSAPI")
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        java = pool.submit(kafka_transactions_list, kerberos, properties)
        # The exporter starts (no client is built up front for GSSAPI) and serves everything, group lag included.
        exporter = pool.submit(run_command, "exporter", traffic, bootstrap, properties, tmp_path / "exporter",
                               env=realm_env(kerberos))
        runs = list(pool.map(
            lambda c: run_command(c, traffic, bootstrap, properties, tmp_path / c.replace(" ", "_"), env=realm_env(kerberos)),
            QUICK_COMMANDS,
        ))
        java_result = java.result()
        runs.append(exporter.result())
    assert java_result.returncode == 0, f"kafka-transactions.sh refused {properties}:\n{java_result.stderr[-3000:]}"
    assert traffic.scenario.open.transactional_id in java_result.stdout
    answered = {run.command for run in runs if problem(run, traffic, bootstrap) is None}
    refused = {run.command for run in runs if run.code == 64 and run.stderr.startswith(f"kafkatxn: error: {REFUSAL}")
               and run.stderr.count("\n") == 1}
    failures = [problem(run, traffic, bootstrap) for run in runs
                if run.command not in answered and (run.command in WIRE_COMMANDS or run.command not in refused)]
    assert not failures, "\n\n".join(map(str, failures))
    figures["GSSAPI commands (keytab)"] = (
        f"{len(answered)}/{len(runs)} answered ({', '.join(sorted(answered))}); "
        f"{len(refused)} need librdkafka ({', '.join(sorted(refused)) or 'none'}); and kafka-transactions.sh"
    )


def test_fence_aborts_an_open_transaction_over_gssapi(kerberos: SaslKafka, traffic, tmp_path):
    """A live producer's open transaction: ``abort --dry-run`` points at fence (its coordinator tracks
    it), ``fence`` bumps the epoch over GSSAPI and the coordinator aborts the transaction: the LSO
    reaches the high watermark."""
    plain, bootstrap = kerberos.plaintext_bootstrap, kerberos.bootstrap("GSSAPI")
    topic = scenarios.unique("gssapi-fence")
    scenarios.create_topic(plain, topic, partitions=1)
    live = scenarios.run_transaction(plain, topic, [0], "open")
    tp = TopicPartition(topic, 0)
    start = live.start_offset(tp)
    properties = write_properties(tmp_path / "keytab.properties", kerberos.kerberos_properties("keytab"))
    audit = str(tmp_path / "audit.jsonl")

    def kafkatxn(*argv: str):
        run = run_kafkatxn(argv[0], [*argv, *connection_args(bootstrap, properties)], env=realm_env(kerberos))
        return run, json.loads(run.stdout) if run.stdout.strip() else None

    try:
        assert hm.end_offset(plain, tp, read_committed=True) == start  # pinned by the open transaction
        run, rows = kafkatxn("abort", "-t", topic, "-p", "0", "--start-offset", str(start), "--max-transaction-timeout", "0s",
                             "--dry-run", "--audit-log", audit)
        assert run.code == 3 and rows and "kafkatxn fence" in rows[0]["reason"], run.describe()
        run, rows = kafkatxn("fence", live.transactional_id, "--yes", "--audit-log", audit)
        assert run.code == 0, run.describe()
        (row,) = rows
        assert (row["outcome"], row["state_before"], row["partitions_before"]) == ("fenced", "Ongoing", [str(tp)]), row
        assert row["producer_id_after"] == row["producer_id_before"] == live.producer_id, row
        assert row["producer_epoch_after"] > row["producer_epoch_before"] == live.producer_epoch, row
        end = hm.end_offset(plain, tp, read_committed=False)
        assert end > start and hm.end_offset(plain, tp, read_committed=True) == end  # aborted: the LSO moved past it
        assert row["last_stable_offsets_after"] == {str(tp): end}, row
    finally:
        live.producer = None  # fenced: it can no longer end the transaction itself


def test_the_ticket_cache_form_logs_in_with_both(kerberos: SaslKafka, traffic, tmp_path):
    assert kerberos.kdc is not None
    ccache = kerberos.kdc.kinit(tmp_path / "krb5cc")
    properties = write_properties(tmp_path / "ccache.properties", kerberos.kerberos_properties("ticket-cache", ccache=ccache))
    java = kafka_transactions_list(kerberos, properties)
    assert java.returncode == 0, f"kafka-transactions.sh refused {properties}:\n{java.stderr[-3000:]}"
    run = run_command("transactions list", traffic, kerberos.bootstrap("GSSAPI"), properties, tmp_path / "work", env=realm_env(kerberos))
    assert problem(run, traffic, kerberos.bootstrap("GSSAPI")) is None, run.describe()


def test_a_service_name_the_kdc_does_not_know_is_refused_at_once(kerberos: SaslKafka, traffic, tmp_path):
    """(kafka-transactions.sh is refused too, but only after its 60 s of retries: not run here, for CI's time.)"""
    properties = write_properties(
        tmp_path / "wrong.properties", {**kerberos.kerberos_properties("keytab"), "sasl.kerberos.service.name": "nosuchservice"}
    )
    run = run_command("transactions list", traffic, kerberos.bootstrap("GSSAPI"), properties, tmp_path / "work", env=realm_env(kerberos))
    assert run.code == 3, run.describe()
    assert run.stderr.startswith("kafkatxn: error: authentication failed") and run.stderr.count("\n") == 1, run.describe()
    assert run.seconds < 15, run.describe()
