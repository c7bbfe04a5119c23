"""Each command, and a warm exporter scrape, goes down to each broker once per API (issue 35).

Counted by the brokers themselves: the JMX request counters of a 3-broker cluster
(harness/jmx.py, Kafka's JmxTool), read before and after one command at a time. The cluster holds
what makes every path of the commands ask: 8 topics over 3 leaders, committed, aborted, open and
hanging transactions, an idempotent producer, and 3 consumer groups, one of them blocked behind the
open transaction. Allowed: connection set-up (ApiVersions, SASL), Metadata twice (bootstrap, then
the cluster's); every other API at most once per broker and isolation level (ListOffsets and
Fetch carry one level per request; a ListOffsets by timestamp is a kind of its own). The brokers count requests per API only, so each command also
runs with ``--debug``, whose log names every request it sends with its level: the log must add up
to the brokers' counts, API by API and broker by broker, and splits them by level. On the code
before the run memo, ``check --groups`` and the scrape sent ListTransactions 3 times to every broker.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as CTP

from harness import hanging_maker as hm
from harness import scenarios
from harness.broker import KafkaCluster
from harness.jmx import counts_between, request_counts
from kafkatxn.model import TopicPartition
from tests.support.exporter_process import ExporterProcess
from tests.support.request_log import LOGGED

pytestmark = [pytest.mark.integration]

TOPICS = 8
# Requests a broker receives from other brokers and controllers, not from the command.
CLUSTER_INTERNAL = {"BrokerHeartbeat", "BrokerRegistration", "ControllerRegistration", "Vote", "BeginQuorumEpoch",
                    "EndQuorumEpoch", "FetchSnapshot", "FetchFollower", "UpdateRaftVoter", "AddRaftVoter"}
CONNECTION_SET_UP = {"ApiVersions", "SaslHandshake", "SaslAuthenticate"}
# The bootstrap's Metadata is the client's own, before the command's log starts.
ALLOWED = {"Metadata": 2}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # Verification off, so a transaction its coordinator never heard of can be written by hand;
    # the brokers' default transaction.max.timeout.ms otherwise (commands are told a short one).
    kafka = KafkaCluster(tmp_path_factory.mktemp("counts"), n_brokers=3, jmx=True, name="counts",
                         broker_config={"transaction.partition.verification.enable": "false"})
    kafka.start(timeout=120)
    yield kafka
    kafka.stop()


@pytest.fixture(scope="module")
def world(cluster):
    bootstrap = cluster.bootstrap_servers
    prefix = scenarios.unique("counts")
    topics = [f"{prefix}-{i}" for i in range(TOPICS)]
    for topic in topics:
        cluster.create_topic(topic, partitions=3)
    scenario = scenarios.inspect_scenario(bootstrap, prefix=f"{prefix}-inspect")
    for attempt in range(20):  # its __transaction_state partition may still be loading (COORDINATOR_LOAD_IN_PROGRESS)
        try:
            hanging = hm.make_hanging_transaction(bootstrap, f"{prefix}-hanging", topics[0], partition=1)
            break
        except hm.HangingMakerError:
            if attempt == 19:
                raise
            time.sleep(0.5)
    for i, topic in enumerate(topics[1:4]):
        scenarios.run_transaction(bootstrap, topic, [0, 1, 2], "committed", f"{prefix}-app-{i}")
    # Settled before counting: a commit marker landing mid-command makes lso ask again, by design.
    scenarios.wait_for_markers(bootstrap, [TopicPartition(t, p) for t in [*topics[1:4], scenario.topic] for p in range(3)
                                           if (t, p) not in {(scenario.topic, 2)}])
    groups = [f"{prefix}-group-{i}" for i in range(3)]
    # Two groups at the end of committed topics, one at the start of the open transaction's partition.
    for group, tp in zip(groups, [(topics[1], 0), (topics[2], 1), (scenario.topic, 3)]):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        for attempt in range(40):  # a fresh cluster's __consumer_offsets partition may still be loading
            try:
                consumer.commit(offsets=[CTP(tp[0], tp[1], 0 if tp[0] == scenario.topic else 2)], asynchronous=False)
                break
            except KafkaException as exc:
                if attempt == 39 or exc.args[0].code() not in (KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.NOT_COORDINATOR,
                                                                KafkaError.COORDINATOR_NOT_AVAILABLE):
                    raise
                time.sleep(0.5)
        consumer.close()
    time.sleep(2)  # the hand-written transaction is older than the --max-transaction-timeout below
    yield {"bootstrap": bootstrap, "groups": groups, "scenario": scenario, "hanging": hanging}
    scenario.close()


def _clean(counted: dict[int, Counter]) -> dict[int, Counter]:
    for counts in counted.values():
        # A consumer's Fetch is counted apart (FetchConsumer); Fetch adds replication's and the quorum's.
        counts["Fetch"] = counts.pop("FetchConsumer", 0)
        for api in [*CLUSTER_INTERNAL, *CONNECTION_SET_UP]:
            counts.pop(api, None)
    return {node: +c for node, c in counted.items()}


def _logged(stderr: str) -> dict[int, Counter]:
    """Per broker, the requests the command's --debug log names, by API and by ``API level``."""
    out: dict[int, Counter] = {}
    for api, level, node in LOGGED.findall(stderr):
        if api in CONNECTION_SET_UP:
            continue
        counts = out.setdefault(int(node), Counter())
        counts[api] += 1
        if level:
            counts[f"{api} {level}"] += 1
    return out


def _disagree(counted: dict[int, Counter], logged: dict[int, Counter]) -> dict[int, dict[str, tuple[int, int]]]:
    """Where the log and the brokers' counters differ: ``{broker: {api: (counted, logged)}}``
    (Metadata aside: the bootstrap's is sent before the log)."""
    out: dict[int, dict[str, tuple[int, int]]] = {}
    for node in set(counted) | set(logged):
        c, g = counted.get(node, Counter()), logged.get(node, Counter())
        for api in {a for a in [*c, *g] if " " not in a and a != "Metadata"}:
            if c[api] != g[api]:
                out.setdefault(node, {})[api] = (c[api], g[api])
    return out


def _over(counted: dict[int, Counter], logged: dict[int, Counter]) -> dict[str, dict[int, int]]:
    """Per API (per API and level where it has levels), the brokers asked more than once."""
    over: dict[str, dict[int, int]] = {}
    for node, counts in counted.items():
        by_level = {a: n for a, n in logged.get(node, Counter()).items() if " " in a}
        # What no level or purpose names is counted too: a ListTransactions asked again between the
        # log probes (a producer id not listed) does not hide the first one being asked twice.
        unnamed = {api: n - sum(m for a, m in by_level.items() if a.split(" ")[0] == api) for api, n in counts.items()}
        for api, n in [*((a, n) for a, n in unnamed.items() if n), *by_level.items()]:
            if n > ALLOWED.get(api, 1):
                over.setdefault(api, {})[node] = n
    return over


COMMANDS = {
    "lso": ["lso"],
    "lso --groups": ["lso", "--groups"],
    "producers": ["producers"],
    "transactions list": ["transactions", "list"],
    "hanging": ["hanging", "--max-transaction-timeout", "1s"],
    "check": ["check", "--max-transaction-timeout", "1s"],
    "check --groups": ["check", "--groups", "--max-transaction-timeout", "1s"],
    "diagnose": ["diagnose", "--max-transaction-timeout", "1s"],
    "cluster": ["cluster"],
}


def test_each_command_and_a_warm_scrape_ask_each_broker_once_per_api(cluster, world, record_property):
    """One command at a time, the counters read between them (a JmxTool per broker per reading)."""
    bootstrap = world["bootstrap"]
    per_command: dict[str, dict[int, Counter]] = {}
    logs: dict[str, dict[int, Counter]] = {}
    readings = [request_counts(cluster)]
    for name, args in COMMANDS.items():
        run = subprocess.run([sys.executable, "-m", "kafkatxn", "-b", bootstrap, *args, "--timeout", "30s", "-o", "json", "--debug"],
                             capture_output=True, text=True, timeout=120)
        readings.append(request_counts(cluster))
        assert run.returncode in (0, 1, 2), f"{name}: {run.stderr[-3000:]}"  # it answered (a hanging transaction is a finding)
        per_command[name] = _clean(counts_between(readings[-2], readings[-1]))
        logs[name] = _logged(run.stderr)
    exporter = ExporterProcess("-b", bootstrap, "--max-transaction-timeout", "1s", "--cache-ttl", "0s", "--debug")
    try:
        exporter.scrape()  # cold: metadata, configs and the brokers' API versions are learnt here
        exporter.new_stderr()
        before = request_counts(cluster)
        metrics, _took = exporter.scrape()
        per_command["exporter scrape (warm)"] = _clean(counts_between(before, request_counts(cluster)))
        logs["exporter scrape (warm)"] = _logged(exporter.new_stderr())
    finally:
        exporter.stop()
    assert any(name == "kafkatxn_hanging_transactions" for name, _ in metrics), sorted({n for n, _ in metrics})[:20]
    shown = {name: {node: dict(sorted((c + Counter({a: n for a, n in logs[name].get(node, Counter()).items() if " " in a})).items()))
                    for node, c in counts.items()} for name, counts in per_command.items()}
    print(json.dumps(shown, sort_keys=True))
    record_property("requests_per_command", json.dumps(shown, sort_keys=True))
    # The log is the brokers' count: what it splits by level is what was sent.
    disagree = {name: found for name, counts in per_command.items() if (found := _disagree(counts, logs[name]))}
    assert disagree == {}, f"--debug's log and the brokers' counters differ ((counted, logged)): {disagree}"
    over = {name: found for name, counts in per_command.items() if (found := _over(counts, logs[name]))}
    assert over == {}, json.dumps(shown, sort_keys=True)
