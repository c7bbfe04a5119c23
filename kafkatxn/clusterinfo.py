"""``kafkatxn cluster``: who the brokers are and how they are set up for transactions."""

from __future__ import annotations

from dataclasses import dataclass

from typing import TYPE_CHECKING
from kafkatxn.model import Missing
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
    report = Report(facts, {"brokers": brokers, "settings": settings, "apis": api_rows})
    return ClusterInfo(report, apis.missing + configs.missing)
