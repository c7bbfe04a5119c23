"""Everything that talks to Kafka: the facade (:class:`Cluster`), error translation, and the wire
layer (the only user of kafka-python internals). Nothing outside this package imports a Kafka client.

The facade is imported on first use of its names, not with the package: a command begins its
bootstrap through :mod:`.bootstrap_ahead` (the wire alone), and the facade and its API modules import
while the broker connects and answers."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kafkatxn.kafka.facade import Cluster, check_client_settings

__all__ = ["Cluster", "check_client_settings"]


def __getattr__(name: str) -> object:  # PEP 562: `from kafkatxn.kafka import Cluster` imports the facade then
    if name in __all__:
        from kafkatxn.kafka import facade

        value = globals()[name] = getattr(facade, name)
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
