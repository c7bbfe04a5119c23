"""A cluster where no transaction ever ran, with Kafka's default 50 ``__transaction_state``
partitions: the first FindCoordinator creates the log, and its coordinators answer NOT_COORDINATOR
and COORDINATOR_LOAD_IN_PROGRESS until they have loaded it.

CI failed on this: the first `transactions list` on the secure cluster said "could not find out
whether every transactional id is visible: the probe did not answer: NOT_COORDINATOR" (exit 3),
because the probe was asked again only once, after 0.2 s."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.admin import AdminClient

from tests.support.cli_helpers import run_cli

pytestmark = pytest.mark.integration

TRANSACTION_LOG = "__transaction_state"


@pytest.mark.parametrize("command", [["transactions", "list"], ["cluster"]], ids=" ".join)
def test_the_first_command_on_a_cluster_without_a_transaction_log_answers(capsys, kafka_factory, command):
    cluster = kafka_factory(**{"transaction.state.log.num.partitions": "50"})
    topics = AdminClient({"bootstrap.servers": cluster.bootstrap_servers}).list_topics(timeout=20).topics
    assert TRANSACTION_LOG not in topics  # the condition this test is about

    result = run_cli(capsys, *command, "-b", cluster.bootstrap_servers, "--timeout", "20s", "-o", "json")

    assert result.code == 0, result.stderr
    assert result.stderr == ""
    doc = json.loads(result.stdout)
    if command == ["transactions", "list"]:
        assert doc == []
    else:
        (ids,) = [row for row in doc["visibility"] if row["part"] == "transactional ids"]
        assert ids["visible"] == "all", ids
