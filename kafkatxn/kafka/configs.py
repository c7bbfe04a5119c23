"""DescribeConfigs for brokers, on the wire: one request per broker, sent to that broker (a broker
answers for its own configs only), all in flight at once.

One Kafka API family per module (as kminion has one file per API), mixed into
:class:`kafkatxn.kafka.facade.Cluster`; the sending, deadline and error translation are the
:class:`kafkatxn.kafka.session.Session`'s.
"""

from __future__ import annotations

import logging
from typing import Iterable

from kafkatxn.kafka import protocol as proto
from kafkatxn.kafka.client_errors import part_missing
from kafkatxn.model import Broker, ConfigValue, Missing, Partial

log = logging.getLogger("kafkatxn.cluster")

BROKER_CONFIGS_ACL = "DESCRIBE_CONFIGS on Cluster"


class ConfigsApi:
    def broker_configs(self, names: Iterable[str], broker_ids: Iterable[int] | None = None) -> Partial[dict[int, dict[str, ConfigValue]]]:
        """These configs of each broker; a broker that did not answer (silent, refused, not
        authorized: the ACL named) is a ``Missing`` of its own, the others arrive."""
        ids, requests = self._config_requests(names, broker_ids)
        wanted = tuple(sorted(set(names)))
        missing: list[Missing] = []
        result: dict[int, dict[str, ConfigValue]] = {}
        for broker_id, resp in zip(ids, self._send_all(requests) if requests else []):
            if not self._arrived(resp, Broker(broker_id), missing):
                continue
            if resp.error:
                missing.append(part_missing(Broker(broker_id), resp.error, BROKER_CONFIGS_ACL))
                continue
            result[broker_id] = {e.name: ConfigValue(e.value, e.source, e.is_default) for e in resp.entries if e.name in wanted}
        return Partial(result, missing)

    def broker_configs_ahead(self, names: Iterable[str], broker_ids: Iterable[int] | None = None) -> None:
        """The requests of :meth:`broker_configs` sent with the next round (``Session.send_ahead``)."""
        self.send_ahead(self._config_requests(names, broker_ids)[1])

    def _config_requests(self, names: Iterable[str], broker_ids: Iterable[int] | None) -> tuple[list[int], list]:
        wanted = tuple(sorted(set(names)))
        ids = list(broker_ids) if broker_ids is not None else [b.id for b in self.metadata().brokers]
        # Each broker gets its share of the deadline (BROKER_SHARE): one that is down or frozen costs
        # that share and is named, the rest arrive; no ApiVersions round trip is needed first.
        return ids, [(i, proto.DescribeConfigs("broker", str(i), wanted)) for i in ids]
