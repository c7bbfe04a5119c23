"""The brokers the connection manager knows, and their connections begun ahead of the rounds that use them.

kafka-python's manager connects only to a broker its own cluster metadata names (:func:`_know_brokers`).
A command that will ask every broker (``Wire.begin_bootstrap(every_broker=True)``) has the other brokers'
connections begun on the IO thread as the bootstrap's Metadata is read (:func:`begin_the_others`), before
the main thread wakes to read it: begun from the main thread, each of their steps (connect, ApiVersions)
waited for the interpreter while it grouped 30,000 partitions, and the first round went to the other two
brokers 20 and 40 ms after the first.
"""

from __future__ import annotations

from typing import Any, Sequence

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka.wire.metadata_codec import _decode_metadata
from kafkatxn.kafka.wire.reading import Read
from kafkatxn.model import BrokerInfo


def _know_brokers(manager: Any, brokers: Sequence[BrokerInfo]) -> None:
    """kafka-python's cluster metadata names exactly ``brokers`` (the manager connects only to a
    broker it names), through its public ``update_metadata`` over a broker-only answer."""
    from kafka.protocol.metadata import MetadataResponse as M

    listed = [M.MetadataResponseBroker(node_id=b.id, host=b.host, port=b.port, rack=b.rack, version=1) for b in brokers]
    manager.cluster.update_metadata(M(brokers=listed, topics=[], controller_id=-1, version=1))


def _metadata_of(response: Any) -> p.MetadataResponse:
    """The bootstrap's Metadata answer, typed (read from its bytes already, or decoded now)."""
    return response.typed if type(response) is Read else _decode_metadata(p.Metadata(), response)


def _answered_by(server: Any, conn: Any, md: p.MetadataResponse) -> int | None:
    """The id of the broker whose advertised address is the bootstrap server's (``conn``'s), or None."""
    peer_host = None
    try:
        peer_host = conn.transport.getPeer()[0]
    except Exception:  # noqa: BLE001 - only used to match the address
        pass
    matches = [b.id for b in md.brokers if b.port == server.port and b.host in (server.host, peer_host)]
    return matches[0] if len(matches) == 1 else None


def begin_the_others(manager: Any, server: Any, conn: Any, response: Any) -> None:
    """On the IO thread, as the bootstrap's Metadata (``response``, answered on ``conn`` to ``server``) is
    read: the connections to every broker it names but the one that answered begun."""
    md = _metadata_of(response)
    _know_brokers(manager, md.brokers)
    answered = _answered_by(server, conn, md)
    open_connections(manager, [b.id for b in md.brokers if b.id != answered])


def open_connections(manager: Any, node_ids: Sequence[int]) -> None:
    """Connections to ``node_ids`` begun (connect, ApiVersions, login; called on the IO thread), nothing
    awaited: open by the time the command's first round to them is sent. One that fails is left as if
    never begun: its reconnect backoff cleared, so the round's own send connects again and meets what
    it would have met (not kafka-python's NodeNotReadyError of a broker still backing off)."""

    async def opened(node_id: int, conn: Any) -> None:
        try:
            await conn.init_future
        except Exception:  # noqa: BLE001 - the round's send meets it again, as it would have
            manager.reset_backoff(node_id)  # after kafka-python's update_backoff, which ran first

    for node_id in node_ids:
        if manager.closed:
            return
        try:
            conn = manager.get_connection(node_id)
        except Exception:  # noqa: BLE001 - backing off or unknown: the round's send says which
            continue
        manager.call_soon(opened, node_id, conn)
