"""`kafkatxn cluster` against a real broker: both clients, real settings, the same properties file twice."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration


def kafkatxn(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "kafkatxn", *args], capture_output=True, text=True, timeout=timeout)


def cluster_json(bootstrap, *extra):
    result = kafkatxn("cluster", "-b", bootstrap, "-o", "json", "--timeout", "20s", *extra)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def setting(doc, name):
    values = {row["value"] for row in doc["settings"] if row["name"] == name}
    assert len(values) == 1, values
    return values.pop()


def test_cluster_reports_real_values_and_sees_a_changed_setting(kafka_factory):
    cluster = kafka_factory(**{"transaction.max.timeout.ms": "123456", "transaction.partition.verification.enable": "false"})
    doc = cluster_json(cluster.bootstrap_servers)

    assert doc["cluster_id"] == cluster.cluster_id
    assert doc["broker_count"] == 1
    assert [b["broker_id"] for b in doc["brokers"]] == cluster.broker_ids
    assert doc["brokers"][0]["port"] == int(cluster.bootstrap_servers.rsplit(":", 1)[1])
    assert doc["controller_id"] in cluster.broker_ids
    assert setting(doc, "transaction.max.timeout.ms") == "123456"
    assert setting(doc, "transaction.partition.verification.enable") == "false"
    from kafka.protocol.broker_version_data import BROKER_API_VERSIONS

    known = max(BROKER_API_VERSIONS)  # the newest release kafka-python's table has
    if tuple(int(x) for x in cluster.version.split(".")[:2]) > known:
        assert doc["kafka_version"] == ".".join(map(str, known)) + "+"  # newer than any release it knows
    else:
        assert doc["kafka_version"] == ".".join(cluster.version.split(".")[:2])
    apis = {row["api"]: row for row in doc["apis"]}
    assert apis["DescribeProducers"]["max_version"] >= 0
    assert apis["ListTransactions"]["max_version"] >= 0
    if cluster.version.startswith("4."):
        assert doc["transaction_version"] is not None


def test_default_settings_differ_from_the_changed_one(kafka):
    doc = cluster_json(kafka.bootstrap_servers)
    assert setting(doc, "transaction.max.timeout.ms") == "900000"


def test_every_output_format_works(kafka):
    for fmt in ("table", "jsonl", "csv", "tsv"):
        result = kafkatxn("cluster", "-b", kafka.bootstrap_servers, "-o", fmt)
        assert result.returncode == 0, result.stderr
        assert str(kafka.broker_ids[0]) in result.stdout


@pytest.mark.parametrize("style", ["java", "librdkafka"])
def test_properties_file_in_either_style(kafka, tmp_path, style):
    props = tmp_path / f"{style}.properties"
    if style == "java":
        props.write_text("security.protocol=PLAINTEXT\nclient.id=kt-java\nrequest.timeout.ms=5000\n")
    else:
        props.write_text("security.protocol=plaintext\nclient.id=kt-rdk\n")
    doc = cluster_json(kafka.bootstrap_servers, "--command-config", str(props))
    assert doc["broker_count"] == 1


def test_env_var_bootstrap(kafka, monkeypatch):
    import os

    env = dict(os.environ, KAFKATXN_BOOTSTRAP_SERVERS=kafka.bootstrap_servers)
    result = subprocess.run([sys.executable, "-m", "kafkatxn", "cluster", "-o", "json"], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["cluster_id"] == kafka.cluster_id
