"""Metadata and ApiVersions, as kafka-python's protocol objects."""

from __future__ import annotations

from itertools import repeat
from operator import attrgetter
from typing import Any

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka.wire.names import made
from kafkatxn.model import INTERNAL_TOPICS, BrokerInfo, PartitionInfo


def _metadata(_wire: Any, _request: p.Metadata) -> Any:
    from kafka.protocol.metadata import MetadataRequest

    return MetadataRequest(
        topics=MetadataRequest.ALL_TOPICS,
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
        min_version=1,  # every topic is asked as null from v1 on
    )


def metadata_shell(request: p.Metadata) -> Any:
    """``request`` as kafka-python's MetadataRequest: what the connection needs of it (API key, the
    versions it may go out at, header, response class); the body is :func:`metadata_body`'s."""
    return _metadata(None, request)


def metadata_body(_request: p.Metadata, version: int) -> bytes:
    """The body kafka-python encodes for :func:`_metadata`'s request (every topic, none created, no
    authorized operations asked), written here: encoding it, kafka-python first generates and
    compiles an encoder of the whole request (~7 M instructions, on the IO thread in the middle of
    every command's bootstrap) to write these few bytes."""
    if version < 1:
        raise ValueError(f"every topic is asked as null from Metadata v1 on (v{version})")
    flexible = version >= 9
    return b"".join((
        b"\x00" if flexible else b"\xff\xff\xff\xff",  # Topics: null (a compact array's length is one more)
        b"\x00" if version >= 4 else b"",  # AllowAutoTopicCreation: false
        b"\x00" if 8 <= version <= 10 else b"",  # IncludeClusterAuthorizedOperations: false
        b"\x00" if version >= 8 else b"",  # IncludeTopicAuthorizedOperations: false
        b"\x00" if flexible else b"",  # no tagged fields
    ))


def _api_versions(wire: Any, _request: p.ApiVersions) -> Any:
    from kafka.protocol.metadata.api_versions import ApiVersionsRequest

    name, version = wire.software()
    return ApiVersionsRequest(client_software_name=name, client_software_version=version, min_version=3)


def _decode_api_versions(_request: p.ApiVersions, resp: Any) -> p.ApiVersionsResponse:
    return _api_versions_response({api.api_key: (api.min_version, api.max_version) for api in resp.api_keys})


# What _api_versions_response made of each set of versions met: a cluster's brokers give the same, and
# reading one was ~0.76 M instructions (its API names through the ApiKey enum, the release inferred) on the
# main thread between two rounds, once per broker wherever ListTransactions' versions are looked up.
_READ: dict[tuple[tuple[int, tuple[int, int]], ...], p.ApiVersionsResponse] = {}


def _api_versions_response(by_key: dict[int, tuple[int, int]]) -> p.ApiVersionsResponse:
    key = tuple(sorted(by_key.items()))
    read = _READ.get(key)
    if read is None:
        read = _READ[key] = _read_api_versions(key)
    return p.ApiVersionsResponse(dict(read.versions), read.inferred_version)  # each its own dict, as before


def _read_api_versions(spans: tuple[tuple[int, tuple[int, int]], ...]) -> p.ApiVersionsResponse:
    from kafka.protocol.api_key import ApiKey
    from kafka.protocol.broker_version_data import BROKER_API_VERSIONS, infer_broker_version_from_api_versions

    by_key = dict(spans)
    names = ApiKey._value2member_map_  # the enum's own table of its members by value (what ApiKey(key) looks up)
    versions = {}
    for key, span in spans:
        member = names.get(key)
        versions[member.name if member is not None else f"api_{key}"] = span
    release = infer_broker_version_from_api_versions(by_key)
    inferred = ".".join(str(x) for x in release)
    # kafka-python knows releases up to its own; a broker that speaks more than the newest of them
    # is that release or newer ("4.3+"), never said to be that release.
    newest = max(BROKER_API_VERSIONS)
    if tuple(release) == newest and any(key not in BROKER_API_VERSIONS[newest] or span[1] > BROKER_API_VERSIONS[newest][key][1]
                                        for key, span in by_key.items()):
        inferred += "+"
    return p.ApiVersionsResponse(versions, inferred)


_PARTITION = attrgetter("partition_index", "leader_id", "replica_nodes", "isr_nodes")


def _decode_metadata(_request: p.Metadata, resp: Any) -> p.MetadataResponse:
    brokers = tuple(sorted((BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in resp.brokers), key=lambda b: b.id))
    # Every partition of the cluster (30,000 and more): made column by column per topic, with no
    # Python-level step per partition (a named tuple's own __new__ is a Python function).
    partitions: list[PartitionInfo] = []
    for topic in resp.topics:
        if not topic.partitions:
            continue
        name = topic.name
        indexes, leaders, replicas, isrs = zip(*map(_PARTITION, topic.partitions))
        partitions.extend(made(PartitionInfo, zip(
            repeat(name), indexes, leaders, map(tuple, replicas), map(tuple, isrs), repeat(name in INTERNAL_TOPICS),
        )))
    cluster_id = getattr(resp, "cluster_id", None)
    controller_id = getattr(resp, "controller_id", -1)
    return p.MetadataResponse(cluster_id, -1 if controller_id is None else controller_id, brokers, tuple(partitions))


CODECS = {
    p.ApiVersions: (_api_versions, _decode_api_versions),
    p.Metadata: (_metadata, _decode_metadata),
}
