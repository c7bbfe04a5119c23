"""What the cluster lets this principal do and see: its authorized operations (DescribeCluster, or
Metadata v8-10 on older brokers) and one topic's Metadata (the topic-visibility probe)."""

from __future__ import annotations

from typing import Any

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka.wire.names import error_name

# Kafka's AclOperation codes (0 UNKNOWN, 1 ANY and 2 ALL are never granted as such).
ACL_OPERATIONS = {
    3: "READ", 4: "WRITE", 5: "CREATE", 6: "DELETE", 7: "ALTER", 8: "DESCRIBE", 9: "CLUSTER_ACTION",
    10: "DESCRIBE_CONFIGS", 11: "ALTER_CONFIGS", 12: "IDEMPOTENT_WRITE", 13: "CREATE_TOKENS", 14: "DESCRIBE_TOKENS",
    15: "TWO_PHASE_COMMIT",
}


def operation_names(codes: Any) -> frozenset[str] | None:
    """kafka-python's decoded bit field (a set of codes; None when the broker left it out)."""
    if codes is None:
        return None
    return frozenset(ACL_OPERATIONS[c] for c in codes if c in ACL_OPERATIONS)


def _cluster_operations(_wire: Any, _request: p.ClusterOperations) -> Any:
    from kafka.protocol.admin.cluster import DescribeClusterRequest

    return DescribeClusterRequest(include_cluster_authorized_operations=True)


def _decode_cluster_operations(_request: Any, resp: Any) -> p.ClusterOperationsResponse:
    error = error_name(getattr(resp, "error_code", 0))
    return p.ClusterOperationsResponse(error, None if error else operation_names(resp.authorized_operations))


def _metadata_cluster_operations(_wire: Any, _request: p.MetadataClusterOperations) -> Any:
    from kafka.protocol.metadata import MetadataRequest

    return MetadataRequest(
        topics=[], allow_auto_topic_creation=False, include_cluster_authorized_operations=True,
        include_topic_authorized_operations=False, min_version=8, max_version=10,  # v11 dropped the field
    )


def _topic_metadata(_wire: Any, request: p.TopicMetadata) -> Any:
    from kafka.protocol.metadata import MetadataRequest

    return MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=request.topic)],
        allow_auto_topic_creation=False,  # never creates it, whatever the brokers' auto.create.topics.enable
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
        min_version=4,  # allow_auto_topic_creation came with v4
    )


def _decode_topic_metadata(request: p.TopicMetadata, resp: Any) -> p.TopicMetadataResponse:
    topic = next((t for t in resp.topics if t.name == request.topic), None)
    return p.TopicMetadataResponse("UNKNOWN_TOPIC_OR_PARTITION" if topic is None else error_name(topic.error_code))


CODECS = {
    p.ClusterOperations: (_cluster_operations, _decode_cluster_operations),
    p.MetadataClusterOperations: (_metadata_cluster_operations, _decode_cluster_operations),
    p.TopicMetadata: (_topic_metadata, _decode_topic_metadata),
}
