"""The wire's bootstrap against brokers of a few lines on real sockets: the connections to the brokers
its metadata names begin as soon as that answer is read, before the command sends them anything, and
one that cannot be made leaves the command's first request to that broker to meet what it meets, as
before."""

from __future__ import annotations

import socket
import struct
import threading
import time

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka import wire

API_VERSIONS, METADATA = 18, 3


def answer_frame(response, correlation_id: int, version: int) -> bytes:
    response.API_VERSION = version
    response.with_header(correlation_id=correlation_id)
    return bytes(response.encode(header=True, framed=True))


def api_versions_answer():
    from kafka.protocol.metadata.api_versions import ApiVersionsResponse as R

    return R(error_code=0, throttle_time_ms=0,
             api_keys=[R.ApiVersion(api_key=k, min_version=0, max_version=v) for k, v in ((METADATA, 12), (API_VERSIONS, 3))])


def metadata_answer(ports: dict[int, int]):
    from kafka.protocol.metadata import MetadataResponse as M

    T = M.MetadataResponseTopic
    P = T.MetadataResponsePartition
    return M(throttle_time_ms=0, cluster_id="cid", controller_id=1,
             brokers=[M.MetadataResponseBroker(node_id=b, host="127.0.0.1", port=port, rack=None) for b, port in ports.items()],
             topics=[T(error_code=0, name="orders", is_internal=False, partitions=[
                 P(error_code=0, partition_index=i, leader_id=b, leader_epoch=3, replica_nodes=[b], isr_nodes=[b], offline_replicas=[])
                 for i, b in enumerate(ports)])])


class Broker:
    """Answers ApiVersions and Metadata (naming the brokers of ``ports``) on every connection it
    accepts; keeps the API keys it was asked, in order, and how many connections it accepted."""

    def __init__(self, ports: dict[int, int]):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.ports = ports
        self.asked: list[int] = []
        self.connections = 0
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    def serve(self, conn: socket.socket) -> None:
        pending = b""
        with conn:
            while True:
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                pending += data
                while len(pending) >= 4 and len(pending) >= 4 + struct.unpack_from(">i", pending)[0]:
                    size = struct.unpack_from(">i", pending)[0]
                    api_key, version, correlation_id = struct.unpack_from(">hhi", pending, 4)
                    pending = pending[4 + size:]
                    self.asked.append(api_key)
                    if api_key == API_VERSIONS:
                        conn.sendall(answer_frame(api_versions_answer(), correlation_id, min(version, 3)))
                    else:
                        conn.sendall(answer_frame(metadata_answer(self.ports), correlation_id, version))

    def close(self) -> None:
        self.server.close()


def free_port() -> int:
    """A port nothing listens on (connections to it are refused)."""
    with socket.create_server(("127.0.0.1", 0)) as s:
        return s.getsockname()[1]


def until(condition, seconds: float = 5.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.005)
    return condition()


def bootstrap(port: int, connect_every_broker: bool = True, **settings):
    _wire, end = wire.Wire.begin_bootstrap({"bootstrap_servers": f"127.0.0.1:{port}", **settings}, 5000, 5000,
                                           connect_every_broker=connect_every_broker)
    return end()


def test_the_other_brokers_are_connected_as_soon_as_the_metadata_names_them():
    ports: dict[int, int] = {}
    first, second = Broker(ports), Broker(ports)
    ports.update({1: first.port, 2: second.port})
    try:
        w, md, answered = bootstrap(first.port)
        try:
            assert answered == 1 and sorted(b.id for b in md.brokers) == [1, 2]
            # Nothing sent to broker 2 yet: its connection is made (ApiVersions) all the same.
            assert until(lambda: second.asked == [API_VERSIONS]), second.asked
            (answer,) = w.send_all([(2, p.Metadata())], time.monotonic() + 5)
            assert answer == md
            # The command's request went down that connection: one connection, one ApiVersions.
            assert second.asked == [API_VERSIONS, METADATA] and second.connections == 1
            assert first.asked == [API_VERSIONS, METADATA] and first.connections == 1  # the bootstrap's, kept
        finally:
            w.close()
    finally:
        first.close()
        second.close()


def test_a_command_that_does_not_ask_every_leader_connects_only_where_it_asks():
    ports: dict[int, int] = {}
    first, second = Broker(ports), Broker(ports)
    ports.update({1: first.port, 2: second.port})
    try:
        w, md, answered = bootstrap(first.port, connect_every_broker=False)
        try:
            assert answered == 1 and sorted(b.id for b in md.brokers) == [1, 2]
            time.sleep(0.2)  # time enough for a connection begun ahead (the test above sees one in ms)
            assert second.connections == 0 and second.asked == []
        finally:
            w.close()
    finally:
        first.close()
        second.close()


def test_a_broker_that_cannot_be_connected_ahead_is_connected_again_by_the_first_request_to_it():
    from kafka.errors import KafkaConnectionError

    ports: dict[int, int] = {}
    first = Broker(ports)
    ports.update({1: first.port, 2: free_port()})  # broker 2 refuses connections
    try:
        # A failed connection holds its broker back this long (kafka-python's default: 50 ms)
        w, _md, _answered = bootstrap(first.port, reconnect_backoff_ms=10_000)
        try:
            time.sleep(0.2)  # the connection begun ahead has been refused, its backoff cleared
            (answer,) = w.send_all([(2, p.Metadata())], time.monotonic() + 5)
            # The request's own connection was refused: not "node not ready" from a backoff left behind.
            assert type(answer) is KafkaConnectionError, repr(answer)
        finally:
            w.close()
    finally:
        first.close()
