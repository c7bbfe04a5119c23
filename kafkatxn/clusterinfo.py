"""``kafkatxn cluster``: who the brokers are and how they are set up for transactions."""

from __future__ import annotations

from dataclasses import dataclass

from typing import TYPE_CHECKING

from kafkatxn.model import IDS_ALL, IDS_FILTERED, INTERNAL_TOPICS, Missing, TopicPartition
from kafkatxn.output import Report

if TYPE_CHECKING:  # capability modules are handed the facade; they do not import it
    from kafkatxn.kafka import Cluster

# Broker settings that decide how transactions behave.
TRANSACTION_SETTINGS = (
    "transaction.max.timeout.ms",
    "transactional.id.expiration.ms",
    "producer.id.expiration.ms",
    "transaction.partition.verification.enable",
    "transaction.state.log.num.partitions",
    "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms",
)

# APIs this tool relies on, shown with the version range each broker supports.
TRANSACTION_APIS = (
    "InitProducerId",
    "AddPartitionsToTxn",
    "EndTxn",
    "WriteTxnMarkers",
    "TxnOffsetCommit",
    "DescribeProducers",
    "ListTransactions",
    "DescribeTransactions",
    "ListOffsets",
)


@dataclass(frozen=True)
class BrokerRow:
    broker_id: int
    host: str
    port: int
    rack: str | None
    is_controller: bool
    kafka_version: str | None  # inferred from ApiVersions: the newest release these versions fit


@dataclass(frozen=True)
class SettingRow:
    broker_id: int
    name: str
    value: str | None
    source: str


@dataclass(frozen=True)
class ApiRow:
    broker_id: int
    api: str
    min_version: int | None
    max_version: int | None


@dataclass(frozen=True)
class VisibilityRow:
    """What this principal can see of one part of the cluster, and the ACL that shows all of it."""

    part: str
    visible: str  # all | filtered | not authorized | yes | no | unknown
    needs: str  # the ACL (resource type and operation) that would show every part
    detail: str = ""


@dataclass
class ClusterInfo:
    report: Report
    missing: list[Missing]


def describe(cluster: Cluster) -> ClusterInfo:
    md = cluster.describe_cluster()
    ids = [b.id for b in md.brokers]
    apis = cluster.api_versions(ids)
    configs = cluster.broker_configs(TRANSACTION_SETTINGS, ids)
    features = cluster.finalized_features()

    brokers = [
        BrokerRow(
            b.id, b.host, b.port, b.rack, b.id == md.controller_id,
            apis.value[b.id].inferred_version if b.id in apis.value else None,
        )
        for b in md.brokers
    ]
    settings = [
        SettingRow(broker_id, name, values[name].value, values[name].source)
        for broker_id, values in sorted(configs.value.items())
        for name in TRANSACTION_SETTINGS
        if name in values
    ]
    api_rows = []
    for broker_id, broker_apis in sorted(apis.value.items()):
        for api in TRANSACTION_APIS:
            lo, hi = broker_apis.versions.get(api, (None, None))
            api_rows.append(ApiRow(broker_id, api, lo, hi))
    versions = sorted({b.kafka_version for b in brokers if b.kafka_version})
    facts = {
        "cluster_id": md.cluster_id,
        "controller_id": md.controller_id,
        "broker_count": len(md.brokers),
        "kafka_version": ",".join(versions) or None,
        "transaction_version": features.get("transaction.version"),
        "metadata_version": features.get("metadata.version"),
    }
    visibility = principal_visibility(cluster, md.topics(), configs.missing)
    sections = {"brokers": brokers, "settings": settings, "apis": api_rows, "visibility": visibility}
    return ClusterInfo(Report(facts, sections), apis.missing + configs.missing)


def _seen(flag: bool | None, yes: str, no: str) -> str:
    return "unknown" if flag is None else yes if flag else no


def principal_visibility(cluster: Cluster, topics: list[str], configs_missing: list[Missing]) -> list[VisibilityRow]:
    """What this principal can and cannot see: Kafka filters transactional ids (ListTransactions),
    topics (Metadata) and consumer groups (ListGroups) by ACL without saying so, and refuses
    producer state (DescribeProducers: READ on the topic) and broker configs per part."""
    ids = cluster.transactional_id_visibility()
    ops = cluster.cluster_authorized_operations()
    filtered_topics = cluster.topic_list_filtered()
    rows = [
        VisibilityRow(
            "transactional ids", ids.value if ids.value in (IDS_ALL, IDS_FILTERED) else "unknown", "DESCRIBE on TransactionalId *",
            "; ".join(m.reason for m in ids.missing)
            or ("ListTransactions leaves out ids it may not describe: hanging verdicts are undetermined" if ids.value == IDS_FILTERED else ""),
        ),
        VisibilityRow(
            "topics", _seen(None if filtered_topics is None else not filtered_topics, "all", "filtered"), "DESCRIBE on Topic *",
            f"{len([t for t in topics if t not in INTERNAL_TOPICS])} topics described",
        ),
    ]
    # READ on a topic (DescribeProducers): one partition per topic tells, as ACLs are per topic.
    denied = sorted(
        m.subject.topic for m in cluster.describe_producers([TopicPartition(t, 0) for t in topics]).missing
        if m.not_authorized and isinstance(m.subject, TopicPartition)
    )
    rows += [VisibilityRow(f"producer state of {t}", "not authorized", f"READ on Topic {t}") for t in denied]
    configs_denied = any(m.not_authorized for m in configs_missing)
    rows.append(VisibilityRow("broker configs", "no" if configs_denied else "yes", "DESCRIBE_CONFIGS on Cluster"))
    rows.append(VisibilityRow("consumer groups", "all" if "DESCRIBE" in ops else "filtered", "DESCRIBE on Cluster",
                              "" if "DESCRIBE" in ops else "ListGroups lists only the groups it may describe"))
    rows.append(VisibilityRow("abort markers", "yes" if "CLUSTER_ACTION" in ops else "no", "CLUSTER_ACTION on Cluster",
                              "WriteTxnMarkers, for kafkatxn abort"))
    return rows
