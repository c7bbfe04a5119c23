"""Everything that talks to Kafka: the facade (:class:`Cluster`), error translation, and the wire
layer (the only user of kafka-python internals). Nothing outside this package imports a Kafka client."""

from kafkatxn.kafka.facade import Cluster, check_client_settings

__all__ = ["Cluster", "check_client_settings"]
