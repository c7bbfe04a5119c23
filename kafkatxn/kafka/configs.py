"""DescribeConfigs for brokers (confluent-kafka: librdkafka asks one BROKER resource per call).

One Kafka API family per module (as kminion has one file per API), mixed into
:class:`kafkatxn.kafka.facade.Cluster`; the sending, deadline and error translation are the
:class:`kafkatxn.kafka.session.Session`'s.
"""

from __future__ import annotations

import logging
from typing import Iterable

from kafkatxn.model import Broker, ConfigValue, Missing, Partial
from kafkatxn.kafka.session import NOT_ARRIVED

log = logging.getLogger("kafkatxn.cluster")


class ConfigsApi:
    def broker_configs(self, names: Iterable[str], broker_ids: Iterable[int] | None = None) -> Partial[dict[int, dict[str, ConfigValue]]]:
        from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType

        wanted = set(names)
        ids = list(broker_ids) if broker_ids is not None else [b.id for b in self.metadata().brokers]
        # librdkafka waits for a broker that is down until the request times out, which would spend
        # the whole deadline on it: ask only brokers that answer ApiVersions (a dead one fails fast).
        reachable = self.api_versions(ids)
        missing: list[Missing] = list(reachable.missing)
        # One BROKER resource per call: librdkafka refuses more ("Only one ConfigResource of type
        # BROKER is allowed per call"); the calls are still in flight together.
        futures = {}
        for i in ids:
            if i in reachable.value:
                resource = ConfigResource(ResourceType.BROKER, str(i))
                futures.update(self.admin.describe_configs([resource], request_timeout=self.remaining_s()))
        result: dict[int, dict[str, ConfigValue]] = {}
        for resource, future in futures.items():
            broker_id = int(resource.name)
            entries = self._wait_or_note(future, Broker(broker_id), missing, "DESCRIBE_CONFIGS on Cluster")
            if entries is NOT_ARRIVED:
                continue
            self.requests["DescribeConfigs"] += 1
            result[broker_id] = {
                name: ConfigValue(entry.value, ConfigSource(entry.source).name.lower(), bool(entry.is_default))
                for name, entry in entries.items()
                if name in wanted
            }
        return Partial(result, missing)
