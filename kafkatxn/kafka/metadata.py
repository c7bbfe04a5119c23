"""Metadata, DescribeCluster, ApiVersions and the finalized features: what the cluster is made of,
all on the wire.

One Kafka API family per module (as kminion has one file per API), mixed into
:class:`kafkatxn.kafka.facade.Cluster`; the sending, deadline and error translation are the
:class:`kafkatxn.kafka.session.Session`'s.
"""

from __future__ import annotations

import logging
from typing import Iterable

from kafkatxn.errors import KafkatxnError
from kafkatxn.kafka import protocol as proto
from kafkatxn.model import Broker, BrokerApis, ClusterMetadata, Missing, Partial
from kafkatxn.kafka.session import cluster_metadata

# How long a topic-visibility answer is reused by the same session (the exporter's, across scrapes).
TOPIC_VISIBILITY_TTL_S = 300.0

log = logging.getLogger("kafkatxn.cluster")


def _visibility_probe(suffix: str) -> str:
    # "~" makes the name invalid as a topic: no broker creates it, whatever auto-creation says;
    # authorization is checked before the name is looked at.
    return f"~kafkatxn-visibility-probe-{suffix}"


class MetadataApi:
    def metadata(self, refresh: bool = False) -> ClusterMetadata:
        """Brokers and every topic's partitions (one Metadata request through the wire)."""
        if self._metadata is not None and not refresh:
            return self._metadata
        if self._wire is None:
            self.wire  # noqa: B018 - the bootstrap brings fresh metadata
            if self._metadata is not None:
                return self._metadata
        # Any broker can answer: the one that answered before first, then the others, so a broker
        # that died or froze since costs one failed try (its share at most), not the command.
        # (The exporter forgets metadata each scrape, not which brokers it knows.)
        candidates: list[int | None] = self.brokers_to_ask(self._metadata or self._last_metadata) or [None]
        for node in candidates:
            (resp,) = self._send_all([(node, proto.Metadata())])
            if not isinstance(resp, BaseException):
                break
            self.errors.raise_if_auth_in(resp)
            log.debug("metadata from broker %s failed: %s", node, resp)
        else:
            raise self.errors.translate(resp, "fetching metadata")
        self._metadata = self._last_metadata = cluster_metadata(resp, node)
        self.wire.learn_brokers(self._metadata.brokers)
        return self._metadata

    def describe_cluster(self) -> ClusterMetadata:
        """The cluster's brokers with their racks and its controller: the Metadata response carries
        both (what librdkafka's describe_cluster asked for them too)."""
        return self.metadata()

    def api_versions(self, broker_ids: Iterable[int] | None = None, probe: bool = True) -> Partial[dict[int, BrokerApis]]:
        """API versions per broker. ``probe=False``: a broker with an open connection is not asked
        again, its versions are the ones it gave when that connection was made (one request less;
        a probe is what tells a broker that stopped answering from one that answers)."""
        ids = list(broker_ids) if broker_ids is not None else [b.id for b in self.metadata().brokers]
        out = {i: self._api_versions[i] for i in ids if i in self._api_versions}
        if not probe:  # not cached: a later probe (broker_configs) still asks
            for i in ids:
                known = self.wire.known_api_versions(i) if i not in out else None
                if known is not None:
                    out[i] = BrokerApis(known.versions, known.inferred_version)
        asked = [i for i in ids if i not in out]
        if not asked:
            return Partial(out)
        responses = self._send_all([(i, proto.ApiVersions()) for i in asked])
        missing: list[Missing] = []
        for broker_id, resp in zip(asked, responses):
            if self._arrived(resp, Broker(broker_id), missing):
                out[broker_id] = self._api_versions[broker_id] = BrokerApis(resp.versions, resp.inferred_version)
        return Partial({i: out[i] for i in ids if i in out}, missing)

    def finalized_features(self) -> dict[str, int]:
        try:
            features = self.wire.finalized_features()
        except KafkatxnError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise self.errors.translate(exc, "describing features") from exc
        self.requests["ApiVersions"] += 1
        return features

    def cluster_authorized_operations(self) -> set[str]:
        """The operations this principal may perform on the Cluster resource (``DESCRIBE``,
        ``DESCRIBE_CONFIGS``, ``CLUSTER_ACTION``...): DescribeCluster where the brokers have it (Kafka
        2.8+), else Metadata v8-10 with include_cluster_authorized_operations; empty where neither
        says (Kafka answers the operations only to a principal that may DESCRIBE the cluster)."""
        if self.wire.max_version("DescribeCluster") >= 0:
            request: object = proto.ClusterOperations()
        elif self.wire.max_version("Metadata") >= 8:
            request = proto.MetadataClusterOperations()
        else:
            return set()
        (resp,) = self._send_all([(None, request)])
        if isinstance(resp, BaseException):
            raise self.errors.translate(resp, "describing the cluster")
        if resp.error:
            log.debug("cluster authorized operations: %s", resp.error)
            return set()
        return set(resp.operations or ())

    def topic_list_filtered(self) -> bool | None:
        """Whether Metadata leaves out topics this principal may not DESCRIBE: Metadata of a random
        topic answers TOPIC_AUTHORIZATION_FAILED when it may not (``KafkaApis.handleTopicMetadataRequest``),
        UNKNOWN_TOPIC_OR_PARTITION when it may (a wildcard ACL, a super user). None: no answer."""
        import time
        import uuid

        kept = self._kept_topic_list_filtered()
        if kept is not None:
            return kept[0]
        suffix, self._visibility_probe_ahead = self._visibility_probe_ahead or uuid.uuid4().hex, None
        answer = self._probe_topic_list_filtered(suffix)
        if answer is not None:
            self._topics_filtered_cache = (time.monotonic(), answer)
        return answer

    def topic_list_filtered_ahead(self) -> None:
        """The probe of :meth:`topic_list_filtered` sent with the next round (``Session.send_ahead``),
        when no kept answer will do: it asks nothing any other request answers, so it can go with any."""
        import uuid

        if self._kept_topic_list_filtered() is not None:
            return
        self._visibility_probe_ahead = self._visibility_probe_ahead or uuid.uuid4().hex
        self.send_ahead([(None, proto.TopicMetadata(_visibility_probe(self._visibility_probe_ahead)))])

    def _kept_topic_list_filtered(self) -> tuple[bool] | None:
        """The kept answer of the visibility probe, while it is fresh: the exporter asks every scrape,
        and the answer (ACLs change rarely) is kept for a while, one request less per scrape."""
        import time

        cached = self._topics_filtered_cache
        if cached is not None and time.monotonic() - cached[0] < TOPIC_VISIBILITY_TTL_S:
            return (cached[1],)
        return None

    def _probe_topic_list_filtered(self, suffix: str) -> bool | None:
        probe = _visibility_probe(suffix)
        # One Metadata request for that one topic, on the wire: one broker's share of the time
        # (BROKER_SHARE) at most, so a frozen broker does not take the whole command.
        try:
            (resp,) = self._send_all([(None, proto.TopicMetadata(probe))])
        except Exception as exc:  # noqa: BLE001 - visibility is a report, not a reason to end the command
            resp = exc
        if isinstance(resp, BaseException):
            log.debug("topic visibility probe failed: %s", resp)
            return None
        if resp.error is None:
            return None
        # Any other answer about the topic (unknown, invalid) came after the authorizer let it pass.
        log.debug("topic visibility probe: %s", resp.error)
        return resp.error == "TOPIC_AUTHORIZATION_FAILED"
