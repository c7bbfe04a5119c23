"""OAUTHBEARER with OIDC client credentials (KIP-768): one Java ``--command-config`` file, read by
kafkatxn and by Kafka's own ``kafka-transactions.sh``, against a broker whose listener validates tokens
against the JWKS of a real OIDC provider (harness/oidc.py: mock-oauth2-server).

kafkatxn's commands go through both clients: ``cluster`` through librdkafka (its ``oidc`` method),
``lso``, ``producers`` and ``transactions list`` through kafka-python (kafkatxn's token provider).
"""

from __future__ import annotations

import concurrent.futures
import time

import pytest

from harness.broker import _free_ports
from harness.sasl import SaslKafka
from harness.security import write_properties
from tests.support.secure_commands import Run, make_traffic, problem, run_command

pytestmark = pytest.mark.integration

TRANSACTIONS_COMMAND = "org.apache.kafka.tools.TransactionsCommand"
COMMANDS = ("cluster", "lso", "producers", "transactions list")


@pytest.fixture(scope="module")
def traffic(kafka_sasl: SaslKafka):
    made = make_traffic(kafka_sasl)  # over the PLAINTEXT listener
    yield made
    made.close()


def kafka_transactions_list(kafka_sasl: SaslKafka, properties) -> "object":
    return kafka_sasl.run_tool(TRANSACTIONS_COMMAND, "--bootstrap-server", kafka_sasl.bootstrap(), "--command-config", str(properties), "list")


def test_kafkatxn_and_kafka_transactions_sh_log_in_from_one_oidc_file(kafka_sasl: SaslKafka, traffic, tmp_path, figures):
    properties = write_properties(tmp_path / "oauth.properties", kafka_sasl.properties())
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        java = pool.submit(kafka_transactions_list, kafka_sasl, properties)
        runs: list[Run] = list(pool.map(
            lambda c: run_command(c, traffic, kafka_sasl.bootstrap(), properties, tmp_path / c.replace(" ", "_")), COMMANDS
        ))
        java_result = java.result()
    assert java_result.returncode == 0, f"kafka-transactions.sh refused {properties}:\n{java_result.stderr[-3000:]}"
    assert traffic.scenario.open.transactional_id in java_result.stdout
    failures = [p for p in (problem(run, traffic, kafka_sasl.bootstrap()) for run in runs) if p]
    assert not failures, "\n\n".join(failures)
    figures["OAUTHBEARER commands"] = f"{len(runs)}/{len(COMMANDS)} and kafka-transactions.sh, {time.monotonic() - started:.1f}s"


def test_a_token_from_an_issuer_the_broker_does_not_trust_is_refused_by_both(kafka_sasl: SaslKafka, traffic, tmp_path):
    """The provider signs it (another issuer, another key): only the broker's JWKS validation refuses it."""
    properties = write_properties(
        tmp_path / "untrusted.properties", kafka_sasl.properties(token_url=kafka_sasl.oidc.untrusted_token_url)
    )
    java = kafka_transactions_list(kafka_sasl, properties)
    assert java.returncode != 0, java.stdout
    for command in ("transactions list", "cluster"):
        run = run_command(command, traffic, kafka_sasl.bootstrap(), properties, tmp_path / command.replace(" ", "_"))
        assert run.code == 3, run.describe()
        assert run.stderr.startswith("kafkatxn: error: authentication failed"), run.describe()
        assert run.stderr.count("\n") == 1, run.describe()


def test_an_unreachable_token_endpoint_ends_the_command_at_once_naming_it(kafka_sasl: SaslKafka, traffic, tmp_path):
    [port] = _free_ports(1)  # nothing listens there
    url = f"http://127.0.0.1:{port}/kafka/token"
    properties = write_properties(tmp_path / "nowhere.properties", kafka_sasl.properties(token_url=url))
    run = run_command("transactions list", traffic, kafka_sasl.bootstrap(), properties, tmp_path / "work")
    assert run.code == 3, run.describe()
    assert run.stderr == f"kafkatxn: error: cannot reach the OAuth token endpoint {url}: [Errno 111] Connection refused\n"
    assert run.seconds < 10, run.describe()
