"""DescribeConfigs: one resource per request (a broker's configs are asked of that broker)."""

from __future__ import annotations

from typing import Any

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka.wire.names import error_name

# Kafka's ConfigResource.Type and DescribeConfigsResponse.ConfigSource codes.
RESOURCE_TYPES = {"topic": 2, "broker": 4}
CONFIG_SOURCES = {
    0: "unknown_config", 1: "dynamic_topic_config", 2: "dynamic_broker_config", 3: "dynamic_default_broker_config",
    4: "static_broker_config", 5: "default_config", 6: "dynamic_broker_logger_config", 7: "client_metrics_config",
    8: "group_config",
}
DEFAULT_CONFIG = 5


def _describe_configs(_wire: Any, request: p.DescribeConfigs) -> Any:
    from kafka.protocol.admin.configs import DescribeConfigsRequest

    resource = DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=RESOURCE_TYPES[request.resource_type],
        resource_name=request.resource_name,
        configuration_keys=list(request.names) or None,
    )
    # v1 on: each entry says its source (v0 only whether it is the default).
    return DescribeConfigsRequest(resources=[resource], include_synonyms=False, include_documentation=False, min_version=1)


def _decode_describe_configs(_request: p.DescribeConfigs, resp: Any) -> p.DescribeConfigsResponse:
    (result,) = resp.results
    if result.error_code:
        return p.DescribeConfigsResponse(error_name(result.error_code))
    return p.DescribeConfigsResponse(None, tuple(
        p.ConfigEntry(c.name, c.value, CONFIG_SOURCES.get(c.config_source, "unknown_config"), c.config_source == DEFAULT_CONFIG)
        for c in result.configs
    ))


CODECS = {p.DescribeConfigs: (_describe_configs, _decode_describe_configs)}
