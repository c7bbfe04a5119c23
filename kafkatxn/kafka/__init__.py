"""Everything that talks to Kafka: the facade (:class:`Cluster`), error translation, and the wire
layer (the only user of kafka-python internals). Nothing outside this package imports a Kafka client."""

from kafkatxn.kafka.client_package import defer_package_init

defer_package_init()  # before any kafka-python import: its package __init__ runs only if asked for

from kafkatxn.kafka.facade import Cluster, check_client_settings

__all__ = ["Cluster", "check_client_settings"]
