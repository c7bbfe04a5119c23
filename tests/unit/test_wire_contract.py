"""What kafkatxn/kafka/wire/ relies on in kafka-python, checked without a broker.

The wire uses kafka-python's connection manager, a few of its private names (each listed in
PRIVATE_NAMES with the test that exercises it; a scan of the wire package fails on any other) and
builds protocol objects by field name. A kafka-python release that renames a class, a nested class,
a field or a manager method breaks kafkatxn only at run time against a broker; this file makes it
break here instead: every request the wire builds is encoded at every version it may be sent at, and
a response of each type, built by field name and put through the binary encoding, is decoded by the
wire's own decoders.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import subprocess
import sys
from typing import Any
from pathlib import Path

import pytest

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka import wire
from kafkatxn.kafka.wire import client as wire_client
from kafkatxn import metadata_columns
from kafkatxn.kafka.session import cluster_metadata, in_topic_order
from kafkatxn.metadata_columns import ColumnMetadata, MetadataColumns
from kafkatxn.model import BrokerInfo, ClusterMetadata, InTopicOrder, PartitionInfo, ProducerState, TopicPartition

TP0, TP1, OTHER = TopicPartition("orders", 0), TopicPartition("orders", 1), TopicPartition("payments", 3)


# -- the private names the wire uses: scanned, each one exercised ------------------------------------

WIRE_PACKAGE = Path(wire.__file__).parent

# Every use of another object's private parts in kafkatxn/kafka/wire/ (see private_uses), with the
# test below that exercises it. A new one fails test_the_wire_uses_only_the_private_names_listed_here
# until it is listed with a test of its own.
PRIVATE_NAMES = {
    "_bootstrap_future =": "test_the_manager_marked_bootstrapped_starts_no_bootstrap_of_its_own",
    "_conns": "test_the_bootstrap_connection_is_kept_as_the_brokers_and_forgotten_when_it_closes",
    "node_id =": "test_the_bootstrap_connection_is_kept_as_the_brokers_and_forgotten_when_it_closes",
    "_version =": "test_a_kept_request_negotiates_its_version_again",
    "__class__ =": "test_a_reused_request_writes_kafka_pythons_bytes_at_every_version_its_body_encoded_once",
    "__getattr__ =": "test_the_deferred_kafka_package_still_serves_its_names",
    "setattr": "test_the_deferred_protocol_packages_import_one_api_module_and_still_serve_their_names",
    "load_json =": "test_every_schema_kafka_python_ships_reads_as_its_load_json_reads_it",
    "_resolve_common_structs": "test_every_schema_kafka_python_ships_reads_as_its_load_json_reads_it",
    "_getframe": "test_the_version_checks_broker_version_data_makes_are_kafka_pythons_requests_made_when_first_read",
    "_value2member_map_": "test_api_versions_read_again_are_the_same_answer_each_with_its_own_dict",
    "underscore_name =": "test_every_field_of_every_schema_is_named_as_kafka_pythons_regex_names_it_once_per_name",
    "_build_transport": "test_the_managers_plain_tcp_connections_read_in_bulk",
    "ApiVersionsRequest =": "test_the_connections_api_versions_request_is_walked_as_kafka_python_encodes_it",
}


def private_uses(source: str) -> set[str]:
    """What ``source`` uses of other objects' insides: ``_name`` for an attribute whose name starts
    with ``_`` read on anything but ``self``/``cls`` (Python's own ``__dunders__`` aside), ``name =``
    for any attribute set on such an object (monkey-patching; ``__class__ =`` included), ``del name``,
    ``setattr``/``delattr`` for those calls, and ``_name`` for a private name imported from kafka."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            if isinstance(node.ctx, ast.Store):
                found.add(f"{node.attr} =")
            elif isinstance(node.ctx, ast.Del):
                found.add(f"del {node.attr}")
            elif node.attr.startswith("_") and not (node.attr.startswith("__") and node.attr.endswith("__")):
                found.add(node.attr)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr"):
            found.add(node.func.id)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "kafka":
            found.update(alias.name for alias in node.names if alias.name.startswith("_"))
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names
                         if alias.name.split(".")[0] == "kafka" and any(part.startswith("_") for part in alias.name.split(".")))
    return found


def test_the_scan_finds_private_names_and_patches_but_not_ones_own():
    source = (
        "import kafka.net._hidden_module\n"
        "from kafka.net import _hidden, public\n"
        "from kafkatxn.kafka.wire.metadata_codec import _ours\n"
        "def f(manager, conn):\n"
        "    manager._new_thing.pop(1)\n"
        "    manager.cluster._brokers[1] = 2\n"
        "    conn.__class__ = int\n"
        "    conn.send = print\n"
        "    del conn.other\n"
        "    setattr(conn, 'x', 1)\n"
        "    return type(conn).__name__, conn.public\n"
        "class C:\n"
        "    def m(self):\n"
        "        self._fine = self._also_fine\n"
        "    @classmethod\n"
        "    def k(cls):\n"
        "        return cls._fine_too\n"
    )
    assert private_uses(source) == {
        "kafka.net._hidden_module", "_hidden", "_new_thing", "_brokers", "__class__ =", "send =", "del other", "setattr",
    }


def test_the_wire_uses_only_the_private_names_listed_here():
    used: dict[str, list[str]] = {}
    for path in sorted(WIRE_PACKAGE.glob("*.py")):
        for name in private_uses(path.read_text()):
            used.setdefault(name, []).append(path.name)
    assert {name: files for name, files in used.items() if name not in PRIVATE_NAMES} == {}, "list it in PRIVATE_NAMES with a test"
    assert sorted(set(PRIVATE_NAMES) - set(used)) == [], "no longer used: drop it from PRIVATE_NAMES"
    for name, test in PRIVATE_NAMES.items():
        assert test.startswith("test_") and callable(globals().get(test)), (name, test)


@pytest.fixture
def manager():
    """A real connection manager on an IO loop that is never started: its attributes, no broker."""
    from kafka.net.manager import KafkaConnectionManager
    from kafka.net.selector import NetworkSelector

    net = NetworkSelector()
    made = KafkaConnectionManager(net, bootstrap_servers="127.0.0.1:1")
    yield made
    made.close()
    net.close()


def test_the_manager_marked_bootstrapped_starts_no_bootstrap_of_its_own(manager):
    from kafka.cluster import ClusterMetadata

    assert manager._bootstrap_future is None and not manager.bootstrapped
    wire_client._mark_bootstrapped(manager)
    assert manager.bootstrapped
    assert manager.bootstrap_async(refresh=False) is manager._bootstrap_future  # nothing started
    # The metadata refresh loop (started by a lost connection) bootstraps only a manager that is not.
    assert "if not self._manager.bootstrapped" in inspect.getsource(ClusterMetadata._refresh_loop)


def test_the_bootstrap_connection_is_kept_as_the_brokers_and_forgotten_when_it_closes(manager):
    import kafka.errors as Errors

    bootstrap_id = manager.cluster.bootstrap_brokers()[0].node_id
    conn = manager.get_connection(bootstrap_id, timeout_ms=1000, refresh_metadata_on_err=False, reset_backoff_on_connect=False)
    assert manager._conns == {bootstrap_id: conn}  # a dict by node id
    wire_client._keep_as(manager, conn, bootstrap_id, 7)
    assert manager._conns == {7: conn} and conn.node_id == 7
    assert manager.get_connection(7) is conn  # what the manager sends to broker 7 goes on it
    assert wire_client._open_connection(manager, 7) is None  # not open yet: not among the open connections
    conn.close(Errors.KafkaConnectionError("gone"))  # closed with an error: at once
    assert manager._conns == {}


def test_a_connection_lost_with_an_error_starts_no_metadata_refresh_of_kafka_pythons_own():
    """The wire's manager: a lost connection leaves kafka-python's refresh loop unstarted (it would send a
    Metadata nobody asked for at once and every metadata_max_age_ms after). kafka-python's own manager,
    the wire's before, starts it."""
    import kafka.errors as Errors
    from kafka.net.manager import KafkaConnectionManager
    from kafka.net.selector import NetworkSelector

    from kafkatxn.kafka.wire.receiving import Manager

    def lose_a_connection(kind: type) -> Any:
        net = NetworkSelector()
        made = kind(net, bootstrap_servers="127.0.0.1:1")
        wire_client._mark_bootstrapped(made)
        wire_client._know_brokers(made, [BrokerInfo(0, "127.0.0.1", 1)])
        conn = made.get_connection(0, timeout_ms=1000)
        conn.close(Errors.KafkaConnectionError("gone"))  # closed with an error: its errbacks run at once
        started = made.cluster._refresh_loop_future is not None
        made.close()
        net.close()
        return started

    assert lose_a_connection(KafkaConnectionManager)  # what the override stops, still there to stop
    assert not lose_a_connection(Manager)


def test_the_managers_plain_tcp_connections_read_in_bulk():
    """receiving.Manager's transports, made where kafka-python makes them, read in bulk on a QuietSelector."""
    import socket
    from types import SimpleNamespace

    from kafka.net.selector import NetworkSelector

    from kafkatxn.kafka.wire.receiving import Manager, QuietSelector, ReadingInBulk

    listener = socket.create_server(("127.0.0.1", 0))
    net = NetworkSelector(selector=QuietSelector)
    made = Manager(net, bootstrap_servers="127.0.0.1:1")
    net.start()
    try:
        async def build() -> Any:
            return await made._build_transport(SimpleNamespace(host="127.0.0.1", port=listener.getsockname()[1]))

        transport = made.run(build)
        assert type(transport) is ReadingInBulk and isinstance(net._selector, QuietSelector)

        async def close() -> None:
            transport.close()

        made.run(close)
    finally:
        made.close()
        net.close()
        listener.close()


def test_a_plain_connections_host_is_looked_up_as_the_bytes_the_idna_codec_makes_of_it():
    """receiving.Manager gives socket.getaddrinfo an ASCII host as bytes (no IDNA codec imported): only
    where the codec would give those bytes, without an error; any other host goes as it is."""
    import encodings.idna  # noqa: F401 - the codec the lookup would use

    from kafkatxn.kafka.wire.receiving import idna_as_ascii

    for host in ("127.0.0.1", "localhost", "kafka-1.example.com", "host.", "", "a..b", "x" * 64, "a." + "x" * 63,
                 "b\u00fccher.example", ".lead"):
        try:
            alike = host.encode("idna") == host.encode("ascii")
        except UnicodeError:
            alike = False
        assert idna_as_ascii(host) is alike, host


def test_reading_in_bulk_hands_over_what_kafka_pythons_transport_reads():
    """The same bytes as kafka-python's 4 KB reads, in one call while the buffer holds them; the
    connection's end is the same error."""
    import socket
    import threading
    import time

    from kafka.net.transport import KafkaTCPTransport

    from kafkatxn.kafka.wire.receiving import RECEIVE_BUFFER_BYTES, ReadingInBulk

    payload = bytes(range(256)) * (RECEIVE_BUFFER_BYTES // 256 + 1000)  # more than the buffer holds
    for transport_class in (KafkaTCPTransport, ReadingInBulk):
        ours, theirs = socket.socketpair()
        ours.setblocking(False)
        sender = threading.Thread(target=lambda: (theirs.sendall(payload), theirs.close()))
        sender.start()
        transport = transport_class(None, ours)
        got, err = bytearray(), None
        while err is None:
            data, err = transport._sock_recv()
            got += data
            if not data and err is None:
                time.sleep(0.001)  # nothing yet: the sender's next bytes
        sender.join()
        ours.close()
        assert bytes(got) == payload, transport_class
        assert str(err) == "KafkaConnectionError: socket disconnected", transport_class


def test_reading_in_bulk_sends_a_request_as_it_is_written_and_the_rest_as_kafka_pythons_transport_does():
    """A write with nothing waiting before it goes to the socket at once (a broker begins on a request as
    it is encoded); what the socket does not take waits for kafka-python's write task, as do the writes
    after it, in order; a send that fails closes the transport, as that task does."""
    import socket
    import threading
    from types import SimpleNamespace

    from kafkatxn.kafka.wire.receiving import ReadingInBulk

    scheduled: list = []
    net = SimpleNamespace(call_soon=scheduled.append, unregister_event=lambda *a: None, cancel=lambda task: None)
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    theirs.settimeout(5)  # kafka-python's transport sends nothing here: the test fails, not hangs
    transport = ReadingInBulk(net, ours)
    transport.write(b"first")
    assert theirs.recv(16) == b"first" and not scheduled and not transport._writing  # sent, no task
    big, after = bytes(range(256)) * 40_000, b"after"  # more than a socket's buffers take at once
    transport.write(big)
    transport.write(after)
    assert len(scheduled) == 1 and transport._writing and transport._write_buffer  # the rest left to the task
    got = bytearray()
    reader = threading.Thread(target=lambda: [got.extend(chunk) for chunk in iter(lambda: theirs.recv(1 << 16), b"")])
    reader.start()
    while transport._write_buffer:  # the task's sends
        transport._sock_send()
    ours.shutdown(socket.SHUT_WR)
    reader.join()
    assert bytes(got) == big + after
    theirs.close()
    failing = ReadingInBulk(net, ours)
    failing.write(b"to a closed peer")  # the peer gone: the send fails, the transport closes
    assert failing._closed and failing._sock is None
    ours.close()


def test_the_quiet_selector_looks_keys_up_as_the_platforms_does():
    import socket

    from kafkatxn.kafka.wire.receiving import QuietSelector

    a, b = socket.socketpair()
    selector = QuietSelector()
    with pytest.raises(KeyError) as raised:
        selector.get_key(a)
    assert raised.value.args == (a,)  # named, not formatted
    selector.register(a, 1, "data")
    assert selector.get_key(a).data == "data" and selector.get_key(a.fileno()).fileobj is a
    selector.close()
    with pytest.raises(RuntimeError):
        selector.get_key(a)
    a.close()
    b.close()


def test_failed_bootstrap_connections_are_forgotten_when_closed(manager):
    """Wire.begin_bootstrap closes a failed connection with its error and relies on the manager dropping it."""
    import kafka.errors as Errors

    bootstrap_id = manager.cluster.bootstrap_brokers()[0].node_id
    conn = manager.get_connection(bootstrap_id, timeout_ms=1000, refresh_metadata_on_err=False, reset_backoff_on_connect=False)
    conn.close(Errors.KafkaConnectionError("refused"))
    assert manager.least_used_connections() == [] and manager.get_connection(bootstrap_id) is not conn


def test_a_kept_request_negotiates_its_version_again():
    from kafka.net.connection import KafkaConnection

    request = wire.Wire(None)._encode(p.ListOffsets((TP0,), True))
    request.API_VERSION = 4
    with pytest.raises(TypeError):
        request.API_VERSION = None  # why the wire clears the private _version
    wire_client._negotiate_again(request)
    assert request.API_VERSION is None
    # The connection picks the version of a request that has none, and only then.
    assert "if request.API_VERSION is None:" in inspect.getsource(KafkaConnection._send_request)


def test_brokers_become_known_to_kafka_pythons_cluster_metadata(manager):
    w = wire.Wire(manager)
    wire_client._know_brokers(manager, [BrokerInfo(1, "a", 9092, None)])
    w.learn_brokers([BrokerInfo(1, "moved", 1, None), BrokerInfo(2, "b", 9093, "r1")])
    got = sorted((b.node_id, b.host, b.port, b.rack) for b in manager.cluster.brokers())
    assert got == [(1, "a", 9092, None), (2, "b", 9093, "r1")]  # a known broker is kept as it was
    assert manager.cluster.broker_metadata(2).port == 9093  # where get_connection looks a broker up


# -- the connection manager ---------------------------------------------------------------------------


def params(fn) -> dict[str, inspect.Parameter]:
    return dict(inspect.signature(fn).parameters)


def test_the_connection_manager_has_what_the_wire_uses(manager):
    from kafka.net.selector import NetworkSelector

    send = params(manager.send)
    assert {"request", "node_id", "request_timeout_ms"} <= set(send)
    assert list(params(manager.wait_for)) == ["future", "timeout_ms"]
    assert inspect.iscoroutinefunction(manager.wait_for)
    assert "coro" in params(manager.run)
    assert {"node_id", "timeout_ms", "refresh_metadata_on_err", "reset_backoff_on_connect"} <= set(params(manager.get_connection))
    for name in ("reset_backoff", "least_used_connections", "close"):
        assert callable(getattr(manager, name)), name
    assert manager.closed is False
    for name in ("bootstrap_brokers", "brokers", "update_metadata", "broker_metadata"):
        assert callable(getattr(manager.cluster, name)), name
    for key in ("max_in_flight_requests_per_connection", "client_software_name", "client_software_version",
                "security_protocol", "sasl_mechanism", "request_timeout_ms", "receive_message_max_bytes"):
        assert key in manager.config, key
    # Set once a broker has answered ApiVersions; wire.max_version reads its api_versions.
    assert hasattr(manager, "broker_version_data")
    for name in ("start", "close", "sleep"):
        assert callable(getattr(NetworkSelector, name)), name


def test_the_settings_kafkatxn_passes_are_all_known_to_the_connection_manager():
    """The manager ignores a setting it does not know: a renamed one would be dropped silently."""
    from kafka.net.manager import KafkaConnectionManager

    from kafkatxn.config import ConnectionConfig

    settings = ConnectionConfig(bootstrap_servers="h:1", settings={
        "security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN", "sasl.username": "u", "sasl.password": "p",
        "ssl.ca.location": "/ca", "ssl.certificate.location": "/c", "ssl.key.location": "/k", "ssl.key.password": "x",
        "ssl.endpoint.identification.algorithm": "none",
    }).kafka_python()
    assert set(settings) | {"receive_message_max_bytes"} <= set(KafkaConnectionManager.DEFAULT_CONFIG)
    assert {"sasl_oauth_token_provider", "sasl_kerberos_service_name", "ssl_context"} <= set(KafkaConnectionManager.DEFAULT_CONFIG)


def test_max_version_reads_the_broker_version_data_by_api_key():
    from kafka.protocol.api_key import ApiKey
    from kafka.protocol.broker_version_data import BrokerVersionData

    data = BrokerVersionData(api_versions={ApiKey["DescribeProducers"].value: (0, 0), ApiKey["FindCoordinator"].value: (0, 6)})
    w = wire.Wire(type("M", (), {"broker_version_data": data})())
    assert (w.max_version("DescribeProducers"), w.max_version("FindCoordinator"), w.max_version("ListTransactions")) == (0, 6, -1)
    for name in p.REQUEST_NAMES.values():
        ApiKey[name]  # every request name the wire counts is an ApiKey member


def test_error_names_come_from_kafka_errors():
    assert wire.error_name(0) is None
    assert wire.error_name(6) == "NOT_LEADER_OR_FOLLOWER"
    assert wire.error_name(105) == "TRANSACTIONAL_ID_NOT_FOUND"


def test_every_error_name_the_facade_and_the_fake_act_on_is_one_the_wire_gives():
    """A leadership error kafka-python names differently would never trigger the retry."""
    from kafkatxn.kafka.facade import LEADERSHIP_ERRORS

    given = {wire.error_name(code) for code in range(1, 200)}
    acted_on = LEADERSHIP_ERRORS | {"TRANSACTIONAL_ID_NOT_FOUND", "NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE"}
    assert acted_on - given == set()


def _Answer(value):
    """A kafka-python future that is already done, as the manager's send returns one."""
    from kafka.future import Future

    return Future().success(value)


class _Manager:
    """Stands in for KafkaConnectionManager with the same call shapes; answers from a function."""

    def __init__(self, answer):
        from kafka.net.manager import KafkaConnectionManager

        self.config = dict(KafkaConnectionManager.DEFAULT_CONFIG)
        self.answer = answer
        self.sent = []
        self.broker_version_data = None  # the bootstrap broker's ApiVersions: none answered here
        self.connected = set()  # node ids with an open connection
        self.soon = []  # what the wire queued on the IO loop, run by the test

    def send(self, request, node_id=None, request_timeout_ms=None):
        self.sent.append((node_id, request))
        return self.answer(request)

    def least_used_connections(self):
        from types import SimpleNamespace

        return [SimpleNamespace(node_id=n) for n in self.connected]

    def call_soon(self, fn, *args):
        self.soon.append((fn, args))

    async def wait_for(self, future, timeout_ms):
        return await future

    def run(self, coro, *args):
        return asyncio.run(coro(*args))


def roundtrip(response, version):
    """``response`` as the manager hands it over: encoded to bytes and decoded at ``version``."""
    return type(response).decode(response.encode(version=version), version=version)


def api_versions_response():
    from kafka.protocol.metadata.api_versions import ApiVersionsResponse as R

    return roundtrip(R(
        error_code=0,
        api_keys=[R.ApiVersion(api_key=k, min_version=0, max_version=v) for k, v in ((0, 11), (2, 8), (10, 6), (61, 0), (66, 1))],
        throttle_time_ms=0,
        supported_features=[R.SupportedFeatureKey(name="transaction.version", min_version=0, max_version=2)],
        finalized_features_epoch=5,
        finalized_features=[R.FinalizedFeatureKey(name="transaction.version", max_version_level=2, min_version_level=0)],
    ), 3)


def test_finalized_features_from_api_versions_v3():
    manager = _Manager(lambda request: _Answer(api_versions_response()))
    assert wire.Wire(manager).finalized_features() == {"transaction.version": 2}
    (node, request), = manager.sent
    assert node is None and request.client_software_name == manager.config["client_software_name"]
    assert request._min_version == 3  # finalized features came with v3


def test_send_all_sends_through_the_manager_and_decodes():
    from kafka.protocol.consumer.offsets import ListOffsetsResponse as R

    def answer(request):
        part = R.ListOffsetsTopicResponse.ListOffsetsPartitionResponse(partition_index=0, error_code=0, offset=42, timestamp=-1)
        return _Answer(roundtrip(R(topics=[R.ListOffsetsTopicResponse(name="orders", partitions=[part])]), 4))

    manager = _Manager(answer)
    counted = []
    (resp,) = wire.Wire(manager).send_all([(1, p.ListOffsets((TP0,), True))], deadline=1e12, count=counted.append)
    assert resp == p.ListOffsetsResponse((p.PartitionOffset(TP0, None, 42),))
    assert counted == ["ListOffsets"] and manager.sent[0][0] == 1


def test_the_big_per_leader_requests_are_built_once_and_reused_within_a_limit():
    from kafka.protocol.consumer.offsets import ListOffsetsResponse as R

    manager = _Manager(lambda request: _Answer(roundtrip(R(topics=[]), 4)))
    w = wire.Wire(manager)
    offsets = [(1, p.ListOffsets((TP0, TP1), True)), (1, p.ListOffsets((TP0, TP1), False)), (2, p.ListOffsets((OTHER,), True))]
    w.send_all(offsets, deadline=1e12)
    w.send_all([(1, p.ListTransactions())] + offsets, deadline=1e12)
    first, second = manager.sent[:3], manager.sent[4:]
    assert all(a[1] is b[1] for a, b in zip(first, second))  # the same kafka-python objects, by node and request
    # Sent once at a version, reused without one: the connection negotiates it again.
    first[0][1].API_VERSION = 4
    w.send_all(offsets[:1], deadline=1e12)
    assert manager.sent[-1][1] is first[0][1] and first[0][1].API_VERSION is None
    assert manager.sent[0][1] is not manager.sent[1][1]  # the isolation level tells them apart
    w.send_all([(1, p.ListTransactions())], deadline=1e12)
    assert manager.sent[-1][1] is not manager.sent[3][1]  # other kinds are built per send
    # A different node or partition set is built anew; beyond the limit the oldest are dropped.
    many = [(n, p.ListOffsets((TopicPartition("t", n),), True)) for n in range(wire.REUSED_LIMIT + 1)]
    w.send_all(many, deadline=1e12)
    assert len(w._built) == wire.REUSED_LIMIT
    assert {id(b) for b in w._built.values()} == w._bodies.keys()  # a dropped request's bodies went with it
    sent = len(manager.sent)
    w.send_all(offsets[:1], deadline=1e12)
    assert manager.sent[sent][1] is not manager.sent[0][1]



def test_requests_to_brokers_not_connected_go_first_and_their_bodies_are_written_while_they_connect():
    from kafka.protocol.api_key import ApiKey
    from kafka.protocol.broker_version_data import BrokerVersionData
    from kafka.protocol.consumer.offsets import ListOffsetsResponse as R

    from kafkatxn.kafka.wire import bodies

    manager = _Manager(lambda request: _Answer(roundtrip(R(topics=[]), 4)))
    manager.connected = {1}
    manager.broker_version_data = BrokerVersionData(api_versions={ApiKey["ListOffsets"].value: (0, 7)})
    w = wire.Wire(manager)
    w.send_all([(1, p.ListOffsets((TP0,), True)), (2, p.ListOffsets((OTHER,), True))], deadline=1e12)
    assert [node for node, _ in manager.sent] == [2, 1]  # its connection begun before broker 1's body is written
    (fn, args), = manager.soon
    fn(*args)  # on the IO loop, after the connections' first steps
    built = manager.sent[0][1]
    assert list(w._bodies[id(built)]) == [7]  # written at the bootstrap broker's version, not yet sent
    assert built.encode(version=7, header=False) == bodies.list_offsets_body(p.ListOffsets((OTHER,), True), 7)
    assert w._bodies[id(built)][7] is built.encode(version=7, header=False)  # the body written ahead, taken as it is


def test_a_kept_request_is_found_by_its_ends_and_told_apart_whole():
    from kafka.protocol.consumer.offsets import ListOffsetsResponse as R

    manager = _Manager(lambda request: _Answer(roundtrip(R(topics=[]), 4)))
    w = wire.Wire(manager)
    a, b = p.ListOffsets((TP0, TP1, OTHER), True), p.ListOffsets((TP0, TopicPartition("orders", 9), OTHER), True)
    assert wire_client._reuse_key(1, a) == wire_client._reuse_key(1, b)  # the same ends and length
    first = w._reused(1, a)
    assert w._reused(1, b) is not first  # told apart whole: built anew, the other forgotten
    assert w._reused(1, p.ListOffsets(tuple(a.partitions), True)) is not first and len(w._built) == 1
    assert w._reused(1, p.ListOffsets(tuple(a.partitions), True)) is w._reused(1, a)  # an equal request: the kept one


def test_a_metadata_request_writes_kafka_pythons_bytes_at_every_version_without_its_encoder():
    """Metadata (the bootstrap's, and every refresh) is written by the wire (metadata_codec.metadata_body),
    built per send, its answers read by the wire: the framed bytes kafka-python writes for the same
    request at every version it may go out at, and kafka-python compiles no encoder for them."""
    from kafka.protocol.api_message import ApiMessage
    from kafka.protocol.metadata import MetadataRequest

    from kafkatxn.kafka.wire import bodies, metadata_codec
    from kafkatxn.kafka.wire import client as wire_client_module

    assert p.Metadata in wire_client_module.WRITTEN_PER_SEND and bodies.WRITERS[p.Metadata][1] is metadata_codec.metadata_body
    w = wire.Wire(None)
    sent = w._reused(None, p.Metadata())
    assert w._reused(None, p.Metadata()) is not sent and not w._built  # built per send, none kept
    fresh = metadata_codec._metadata(None, p.Metadata())  # kafka-python's own encoding: the reference
    assert (sent._min_version, sent._max_version) == (fresh._min_version, fresh._max_version)
    assert isinstance(sent, MetadataRequest) and type(sent).header_class is not type(fresh).header_class  # answers read by the wire
    low, high = fresh._min_version or 0, MetadataRequest.max_version
    assert low == 1 and high >= 12
    struct = MetadataRequest._struct
    compiled_before = dict(struct._compiled_encoders)
    written = {}
    for version in range(low, high + 1):
        sent.with_header(correlation_id=version, client_id="kafkatxn")
        written[version] = sent.encode(version=version, header=True, framed=True)
        assert sent.encode() == metadata_codec.metadata_body(p.Metadata(), version)
    assert struct._compiled_encoders == compiled_before  # kafka-python compiled no encoder for them
    for version in range(low, high + 1):
        fresh.with_header(correlation_id=version, client_id="kafkatxn")
        fresh.API_VERSION = version
        assert written[version] == bytes(ApiMessage.encode(fresh, version=version, header=True, framed=True)), version
    with pytest.raises(ValueError):
        metadata_codec.metadata_body(p.Metadata(), 0)


def test_an_offset_fetch_is_reused_when_batched_and_built_per_send_one_group_at_a_time():
    w = wire.Wire(None)
    batched, single = (1, p.OffsetFetch(("group-a", "group-b"))), (1, p.OffsetFetch(("group-a",), batched=False))
    for _ in range(2):
        w._reused(*batched), w._reused(*single)
    assert w._reused(*batched) is w._reused(*batched)
    assert w._reused(*single) is not w._reused(*single)
    assert list(w._built) == [wire_client._reuse_key(*batched)]


# Over 127 partitions of a topic and a topic name over 127 bytes: two-byte lengths in flexible versions.
MANY = tuple(TopicPartition(topic, i) for topic in ("orders", "t" * 200, "payments") for i in range(300))


@pytest.mark.parametrize("request_", [p.ListOffsets((TP0, TP1, OTHER), True), p.ListOffsets((TP0,), False, earliest=True),
                                      p.ListOffsets(MANY, True), p.ListOffsets(MANY, False), p.ListOffsets((), True),
                                      p.DescribeProducers((TP0, TP1, OTHER)), p.DescribeProducers(MANY),
                                      p.OffsetFetch(("group-a", "group-b")),
                                      p.OffsetFetch((*(f"group-{i}" for i in range(200)), "g" * 200, "gr\u00fcppe"))],
                         ids=["latest", "earliest", "many-committed", "many-uncommitted", "none", "producers",
                              "many-producers", "offset-fetch", "many-groups"])
def test_a_reused_request_writes_kafka_pythons_bytes_at_every_version_its_body_encoded_once(request_, monkeypatch):
    from kafka.protocol.api_message import ApiMessage

    from kafkatxn.kafka.wire import bodies as written

    bodies = []
    # ListOffsets: the body written by .bodies, not kafka-python's encoding.
    for kind, (shell, body) in list(written.WRITERS.items()):
        monkeypatch.setitem(written.WRITERS, kind, (shell, lambda req, version, body=body: bodies.append(1) or body(req, version)))
    w = wire.Wire(None)
    reused = w._reused(1, request_)
    fresh = w._encode(request_)  # kafka-python's own object, every partition in it: the reference
    real = ApiMessage.encode
    monkeypatch.setattr(ApiMessage, "encode", lambda self, *a, **kw: bodies.append(1) or real(self, *a, **kw))
    # The versions it may go out at: a batched OffsetFetch limits them on the request (v8+).
    low = getattr(fresh, "_min_version", None) or type(fresh).min_version
    high = getattr(fresh, "_max_version", None) or type(fresh).max_version
    for version in range(low, high + 1):
        for correlation_id in (7, 8):
            reused.with_header(correlation_id=correlation_id, client_id="kafkatxn")
            fresh.with_header(correlation_id=correlation_id, client_id="kafkatxn")
            fresh.API_VERSION = version
            expected = bytes(real(fresh, version=version, header=True, framed=True))
            assert reused.encode(version=version, header=True, framed=True) == expected
            assert reused.encode() == bytes(real(fresh))  # the body alone, at the version set
        assert reused.API_VERSION == version and reused.header.request_api_version == version
    assert len(bodies) == high - low + 1  # once per version, not per send
    assert isinstance(reused, type(fresh)) and type(reused).__name__ == type(fresh).__name__
    assert (reused._min_version, reused._max_version) == (fresh._min_version, fresh._max_version)
    w._forget(w._built.pop(wire_client._reuse_key(1, request_)))  # a request the Wire drops takes its bodies with it
    assert id(reused) not in w._bodies and id(reused) not in w._writers


# -- requests: every one wire.py builds encodes at every version it may go out at ------------------

SAMPLE_REQUESTS = [
    p.ListOffsets((TP0, TP1, OTHER), read_committed=True),
    p.ListOffsets((TP0,), read_committed=False),
    p.DescribeProducers((TP0, TP1, OTHER)),
    p.ListTransactions(),
    p.ListTransactions(states=("Ongoing",), producer_ids=(7, 8)),
    p.ListTransactions(states=("Ongoing",), min_duration_ms=60_000),
    p.ListTransactions(min_duration_ms=60_000, pattern="^app-"),
    p.FindTransactionCoordinators(("app-1", "app-10")),
    p.FindTransactionCoordinators(("app-1",), batched=False),
    p.DescribeTransactions(("app-1", "app-10")),
    p.WriteAbortMarker(TP1, producer_id=7, producer_epoch=3, coordinator_epoch=2),
    # wireadmin
    p.DescribeConfigs("broker", "2", ("transaction.max.timeout.ms", "transactional.id.expiration.ms")),
    p.DescribeConfigs("topic", "orders"),
    p.ClusterOperations(),
    p.MetadataClusterOperations(),
    p.TopicMetadata("~kafkatxn-visibility-probe-x"),
    p.InitProducerId("app-1", 60_000),
    p.Fetch((p.FetchOffset(TP0, 5), p.FetchOffset(TP1, 0), p.FetchOffset(OTHER, 9)), read_committed=True, max_wait_ms=200),
    p.Fetch((p.FetchOffset(TP0, 5),), read_committed=False),
    p.ListOffsetsAt((TP0, OTHER), timestamp_ms=1_700_000_000_000),
    p.ListOffsetsAt((TP0,), timestamp_ms=p.EARLIEST),
    # consumer groups
    p.ListOffsets((TP0, OTHER), read_committed=False, earliest=True),
    p.ListGroups(),
    p.FindGroupCoordinators(("billing", "reports")),
    p.FindGroupCoordinators(("billing",), batched=False),
    p.OffsetFetch(("billing", "reports")),
    p.OffsetFetch(("billing",), batched=False),
    p.OffsetFetch(("billing", "reports"), stable=((TP0, TP1), (OTHER,))),
    p.OffsetFetch(("billing",), batched=False, stable=((TP0, OTHER),)),
    p.DescribeGroups(("billing", "reports")),
]


def versions(request) -> range:
    low, high = type(request)._valid_versions
    low = max(low, request._min_version if request._min_version is not None else low)
    high = min(high, request._max_version if request._max_version is not None else high)
    return range(low, high + 1)


@pytest.mark.parametrize("typed", SAMPLE_REQUESTS, ids=lambda r: type(r).__name__)
def test_each_request_encodes_at_every_version_it_may_be_sent_at(typed):
    request = wire.Wire(None)._encode(typed)
    assert type(request).__module__.startswith("kafka.protocol"), "wire.py has no encoder for this type"
    assert len(versions(request)) > 0, f"no version of {type(request).__name__} allowed"
    sent = request.to_dict()
    for version in versions(request):
        # Decoding our own bytes gives the fields back: what this version carries arrives unchanged.
        again = type(request).decode(request.encode(version=version), version=version).to_dict()
        assert again == project(sent, again), version


def _walked(typed):
    """Whether the wire walks ``typed``'s small bodies and answers (kafka-python neither compiles for them):
    not those it writes or reads itself, nor kafka-python's classes that encode themselves (MetadataRequest
    mends a v0 request first: compiled, as kafka-python does; this test passed for them only after another
    test had compiled their encoders)."""
    from kafkatxn.kafka.wire import bodies, reading

    if type(typed) in bodies.READERS or type(typed) in bodies.WRITERS:
        return False
    return type(wire.Wire(None)._encode(typed)) in reading._WALKING_CLASSES.values()


@pytest.mark.parametrize("typed", [r for r in SAMPLE_REQUESTS if _walked(r)] + [
    p.DescribeTransactions(tuple(f"app-{i}" for i in range(200))),  # large: kafka-python's compiled encoder
    p.DescribeConfigs("topic", "orders", tuple(f"config.{i}" for i in range(63))),  # 64 items: walked still
], ids=lambda r: type(r).__name__)
def test_a_small_request_walked_by_kafka_pythons_schema_is_its_compiled_bytes_and_compiles_nothing(typed):
    from kafka.protocol.api_message import ApiMessage

    from kafkatxn.kafka.wire import reading

    request = wire.Wire(None)._encode(typed)
    small = reading._items_within(request, reading.SMALL_ITEMS) >= 0
    assert small == (len(getattr(typed, "transactional_ids", ())) < 200)
    compiled = type(request)._struct._compiled_encoders
    for version in versions(request):
        before = dict(compiled)
        request.with_header(correlation_id=version, client_id="kafkatxn")
        walked = request.encode(version=version, header=True, framed=True)
        if small:
            assert compiled == before, version  # no encoder compiled for it
        assert walked == bytes(ApiMessage.encode(request, version=version, header=True, framed=True)), version  # the compiled one's


def _small_answers():
    from kafka.protocol.admin.configs import DescribeConfigsResponse as Configs
    from kafka.protocol.admin.transactions import DescribeTransactionsResponse as Described, ListTransactionsResponse as Listed
    from kafka.protocol.metadata import FindCoordinatorResponse as Found

    C, S = Configs.DescribeConfigsResult.DescribeConfigsResourceResult, Described.TransactionState
    return [
        Listed(error_code=0, unknown_state_filters=["Nope"], transaction_states=[
            Listed.TransactionState(transactional_id="app-1", producer_id=7, transaction_state="Ongoing")]),
        Found(error_code=0, node_id=3, host="h", port=9092, coordinators=[
            Found.Coordinator(key="app-1", node_id=2, host="h", port=9092, error_code=0),
            Found.Coordinator(key="app-10", node_id=-1, host="", port=-1, error_code=15, error_message="not yet")]),
        Described(transaction_states=[
            S(error_code=0, transactional_id="app-1", transaction_state="Ongoing", transaction_timeout_ms=60_000,
              transaction_start_time_ms=1_700_000_000_000, producer_id=7, producer_epoch=3,
              topics=[S.TopicData(topic="orders", partitions=[0, 1])]),
            S(error_code=105, transactional_id="app-10", transaction_state="", transaction_timeout_ms=0,
              transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1, topics=[])]),
        Configs(results=[Configs.DescribeConfigsResult(error_code=0, error_message=None, resource_type=4, resource_name="2", configs=[
            C(name="transaction.max.timeout.ms", value="900000", read_only=True, config_source=5, is_sensitive=False, synonyms=[
                C.DescribeConfigsSynonym(name="transaction.max.timeout.ms", value="900000", source=5)]),
            C(name="sasl.jaas.config", value=None, read_only=True, config_source=4, is_sensitive=True, synonyms=[])])]),
    ]


@pytest.mark.parametrize("answer", _small_answers(), ids=lambda a: type(a).__name__)
def test_a_small_answer_walked_by_kafka_pythons_schema_is_what_its_compiled_decoder_makes_and_compiles_nothing(answer):
    from kafka.protocol.frame import KafkaBytes

    from kafkatxn.kafka.wire import reading

    cls = type(answer)
    low, high = cls._valid_versions
    for version in range(low, high + 1):
        raw = bytes(answer.encode(version=version))
        kept = KafkaBytes(len(raw) + 3)  # as kafka-python's parser hands it over: after the header
        kept.write(b"hdr" + raw)
        kept.seek(3)
        compiled = dict(cls._struct._compiled_encoders)
        walked = reading._WalkingSmallAnswers(cls[version], version).decode(kept)
        assert cls._struct._compiled_encoders == compiled, version  # no decoder compiled for it
        assert kept.tell() == len(kept)
        expected = cls.decode(raw, version=version)
        assert walked == expected and walked.to_dict(meta="all") == expected.to_dict(meta="all"), version
        assert type(walked) is type(expected) and (walked.tags, walked.unknown_tags) == (expected.tags, expected.unknown_tags)


def test_the_connections_api_versions_request_is_walked_as_kafka_python_encodes_it():
    """kafka-python's connection sends ApiVersions first, built from its module's ApiVersionsRequest:
    the walking subclass there makes the same bytes, compiling no encoder; its answer reads as before."""
    import kafka.net.connection as connection
    from kafka.protocol.frame import KafkaBytes
    from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

    from kafkatxn.kafka.wire import receiving

    receiving.walk_api_versions()
    walking = connection.ApiVersionsRequest
    assert issubclass(walking, ApiVersionsRequest) and walking.max_version == ApiVersionsRequest.max_version
    encoders = ApiVersionsRequest._struct._compiled_encoders
    for version in range(ApiVersionsRequest.min_version, ApiVersionsRequest.max_version + 1):
        built = walking(version=version, client_software_name="kafkatxn", client_software_version="1.0")
        built.with_header(correlation_id=version, client_id="kafkatxn")
        before = dict(encoders)
        sent = built.encode(header=True, framed=True)
        assert encoders == before, version  # no encoder compiled for it
        plain = ApiVersionsRequest(version=version, client_software_name="kafkatxn", client_software_version="1.0")
        plain.with_header(correlation_id=version, client_id="kafkatxn")
        assert sent == bytes(plain.encode(header=True, framed=True)), version
        answer = ApiVersionsResponse(error_code=0, throttle_time_ms=0, api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=k, min_version=0, max_version=k % 9) for k in range(70)])
        raw = bytes(answer.encode(version=version))
        kept = KafkaBytes(len(raw))
        kept.write(raw)
        kept.seek(0)
        # its answer: kafka-python's own decode (walked, ~80 API keys cost more than the decoder compiled)
        assert built.header.get_response_class().decode(kept) == ApiVersionsResponse.decode(raw, version=version)


def test_a_large_answer_is_left_to_kafka_pythons_compiled_decoder(monkeypatch):
    from kafka.protocol.admin.transactions import ListTransactionsResponse as Listed
    from kafka.protocol.data_container import DataContainer
    from kafka.protocol.frame import KafkaBytes

    from kafkatxn.kafka.wire import reading

    answer = Listed(error_code=0, unknown_state_filters=[], transaction_states=[
        Listed.TransactionState(transactional_id=f"app-{i}", producer_id=i, transaction_state="Ongoing") for i in range(300)])
    raw = bytes(answer.encode(version=1))
    assert len(raw) > reading.SMALL_ANSWER_BYTES
    kept = KafkaBytes(len(raw))
    kept.write(raw)
    kept.seek(0)
    monkeypatch.setattr(DataContainer, "decode", None)  # the walker, not to be used
    assert reading._WalkingSmallAnswers(Listed[1], 1).decode(kept) == Listed.decode(raw, version=1)


def project(sent, shape):
    """``sent`` cut down to the fields present in ``shape`` (what one version carries)."""
    if isinstance(shape, dict):
        return {k: project(sent[k], v) for k, v in shape.items() if k in sent} | {k: v for k, v in shape.items() if k not in sent}
    if isinstance(shape, list) and isinstance(sent, list) and len(sent) == len(shape):
        return [project(a, b) for a, b in zip(sent, shape)]
    return sent


def test_protocol_objects_refuse_unknown_fields():
    """What makes a renamed field fail the tests above rather than go out silently as a default."""
    from kafka.protocol.admin.transactions import DescribeTransactionsRequest

    with pytest.raises(Exception):
        DescribeTransactionsRequest(transactional_idz=["a"])


def test_request_fields_reach_the_wire():
    w = wire.Wire(None)
    offsets = w._encode(p.ListOffsets((TP0, TP1, OTHER), read_committed=True))
    assert offsets.isolation_level == 1 and offsets._min_version == 2
    assert {(t.name, part.partition_index, part.timestamp) for t in offsets.topics for part in t.partitions} == {
        ("orders", 0, -1), ("orders", 1, -1), ("payments", 3, -1)
    }
    assert w._encode(p.ListOffsets((TP0,), read_committed=False)).isolation_level == 0
    producers = w._encode(p.DescribeProducers((TP0, TP1, OTHER)))
    assert {(t.name, tuple(t.partition_indexes)) for t in producers.topics} == {("orders", (0, 1)), ("payments", (3,))}
    listing = w._encode(p.ListTransactions(("Ongoing",), (7,), 60_000, "^a"))
    assert (listing.state_filters, listing.producer_id_filters, listing.duration_filter, listing.transactional_id_pattern) == (
        ["Ongoing"], [7], 60_000, "^a"
    )
    assert listing._min_version == 2
    batched = w._encode(p.FindTransactionCoordinators(("a", "b")))
    assert (batched.key_type, batched.coordinator_keys, batched._min_version) == (1, ["a", "b"], 4)
    single = w._encode(p.FindTransactionCoordinators(("a",), batched=False))
    assert (single.key, single.key_type, single._max_version) == ("a", 1, 3)
    assert w._encode(p.DescribeTransactions(("a",))).transactional_ids == ["a"]
    (marker,) = w._encode(p.WriteAbortMarker(TP1, 7, 3, 2)).markers
    assert (marker.producer_id, marker.producer_epoch, marker.transaction_result, marker.coordinator_epoch) == (7, 3, False, 2)
    assert [(t.name, list(t.partition_indexes)) for t in marker.topics] == [("orders", [1])]


def test_a_marker_declares_transaction_version_0_at_v2_so_the_leader_takes_the_transactions_own_epoch():
    # KIP-1228 (Kafka 4.3+): a leader checks a version-2 marker's epoch strictly (> the partition's);
    # kafkatxn's markers carry the open transaction's own epoch, which only the >= check accepts.
    request = wire.Wire(None)._encode(p.WriteAbortMarker(TP1, 7, 3, 2, commit=True))
    assert 2 in versions(request)
    (marker,) = type(request).decode(request.encode(version=2), version=2).markers
    assert (marker.transaction_version, marker.producer_epoch, marker.transaction_result) == (0, 3, True)


def test_api_versions_request_uses_the_managers_client_software_settings():
    manager = _Manager(None)
    request = wire.Wire(manager)._encode(p.ApiVersions())
    assert request.client_software_name == manager.config["client_software_name"]
    for version in versions(request):
        request.encode(version=version)


# -- responses: built by field name, encoded, decoded by wire.py -----------------------------------


def test_list_offsets_response():
    from kafka.protocol.consumer.offsets import ListOffsetsResponse as R

    P = R.ListOffsetsTopicResponse.ListOffsetsPartitionResponse
    resp = R(topics=[R.ListOffsetsTopicResponse(name="orders", partitions=[
        P(partition_index=0, error_code=0, offset=130, timestamp=-1),
        P(partition_index=1, error_code=6, offset=-1, timestamp=-1),
    ]), R.ListOffsetsTopicResponse(name="empty", partitions=[])])
    for version in (2, 8):
        got = wire.DECODERS[p.ListOffsets](p.ListOffsets((TP0, TP1), True), roundtrip(resp, version))
        assert got == p.ListOffsetsResponse((p.PartitionOffset(TP0, None, 130), p.PartitionOffset(TP1, "NOT_LEADER_OR_FOLLOWER", -1)))
        # Made without their constructors (column by column): still of their own types, not plain tuples.
        assert all(type(x) is p.PartitionOffset and type(x.tp) is TopicPartition for x in got.partitions)


def test_describe_producers_response():
    from kafka.protocol.admin.transactions import DescribeProducersResponse as R

    P = R.TopicResponse.PartitionResponse
    state = P.ProducerState(producer_id=7, producer_epoch=3, last_sequence=10, last_timestamp=1_700_000_000_000,
                            coordinator_epoch=1, current_txn_start_offset=100)
    resp = R(topics=[R.TopicResponse(name="orders", partitions=[
        P(partition_index=0, error_code=0, active_producers=[state]),
        P(partition_index=1, error_code=3, active_producers=[]),
    ])])
    got = wire.DECODERS[p.DescribeProducers](p.DescribeProducers((TP0, TP1)), roundtrip(resp, 0))
    assert got == p.DescribeProducersResponse((
        p.PartitionProducers(TP0, None, (ProducerState(7, 3, 10, 1_700_000_000_000, 1, 100),)),
        p.PartitionProducers(TP1, "UNKNOWN_TOPIC_OR_PARTITION", ()),
    ))
    assert all(type(x) is p.PartitionProducers and type(x.tp) is TopicPartition for x in got.partitions)
    assert type(got.partitions[0].producers[0]) is ProducerState


def test_list_transactions_response():
    from kafka.protocol.admin.transactions import ListTransactionsResponse as R

    resp = R(error_code=0, unknown_state_filters=[], transaction_states=[
        R.TransactionState(transactional_id="app-1", producer_id=7, transaction_state="Ongoing"),
    ])
    for version in (0, 1, 2):
        got = wire.DECODERS[p.ListTransactions](p.ListTransactions(), roundtrip(resp, version))
        assert got == p.ListTransactionsResponse(None, (p.ListedTransaction("app-1", 7, "Ongoing"),))


@pytest.mark.parametrize("request_type, coordinator, keys, versions", [
    (p.FindTransactionCoordinators, p.Coordinator, ("app-1", "app-10"), (1, 3)),
    (p.FindGroupCoordinators, p.GroupCoordinator, ("billing", "reports"), (0, 1, 3)),
], ids=["transactional ids", "groups"])
def test_find_coordinator_responses_batched_and_single(request_type, coordinator, keys, versions):
    from kafka.protocol.metadata import FindCoordinatorResponse as R

    first, second = keys
    batched = R(coordinators=[
        R.Coordinator(key=first, node_id=2, host="h", port=9092, error_code=0),
        R.Coordinator(key=second, node_id=-1, host="", port=-1, error_code=15),
    ])
    got = wire.DECODERS[request_type](request_type(keys), roundtrip(batched, 4))
    assert got.coordinators == (coordinator(first, None, 2), coordinator(second, "COORDINATOR_NOT_AVAILABLE", -1))
    single = R(error_code=0, node_id=3, host="h", port=9092)
    for version in versions:
        got = wire.DECODERS[request_type](request_type((first,), batched=False), roundtrip(single, version))
        assert got.coordinators == (coordinator(first, None, 3),)


def test_describe_transactions_response():
    from kafka.protocol.admin.transactions import DescribeTransactionsResponse as R

    S = R.TransactionState
    resp = R(transaction_states=[
        S(error_code=0, transactional_id="app-1", transaction_state="Ongoing", transaction_timeout_ms=60_000,
          transaction_start_time_ms=1_700_000_000_000, producer_id=7, producer_epoch=3,
          topics=[S.TopicData(topic="orders", partitions=[0, 1])]),
        S(error_code=105, transactional_id="app-10", transaction_state="", transaction_timeout_ms=0,
          transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1, topics=[]),
    ])
    got = wire.DECODERS[p.DescribeTransactions](p.DescribeTransactions(("app-1", "app-10")), roundtrip(resp, 0))
    assert got.transactions == (
        p.TransactionState("app-1", None, "Ongoing", 7, 3, 60_000, 1_700_000_000_000, frozenset({TP0, TP1})),
        p.TransactionState("app-10", "TRANSACTIONAL_ID_NOT_FOUND", "", -1, -1, 0, -1, frozenset()),
    )


@pytest.mark.parametrize("error_code, expected", [(0, None), (47, "INVALID_PRODUCER_EPOCH")])
def test_write_txn_markers_response(error_code, expected):
    from kafka.protocol.producer.transaction import WriteTxnMarkersResponse as R

    T = R.WritableTxnMarkerResult.WritableTxnMarkerTopicResult
    resp = R(markers=[R.WritableTxnMarkerResult(producer_id=7, topics=[
        T(name="orders", partitions=[T.WritableTxnMarkerPartitionResult(partition_index=1, error_code=error_code)]),
    ])])
    low, high = R._valid_versions
    for version in (low, high):
        assert wire.DECODERS[p.WriteAbortMarker](p.WriteAbortMarker(TP1, 7, 3, 2), roundtrip(resp, version)).error == expected


def test_api_versions_response_names_apis_and_infers_the_broker_version():
    got = wire.DECODERS[p.ApiVersions](p.ApiVersions(), api_versions_response())
    assert got.versions["ListOffsets"] == (0, 8) and got.versions["DescribeProducers"] == (0, 0)
    assert got.versions["FindCoordinator"] == (0, 6) and got.versions["ListTransactions"] == (0, 1)
    assert got.inferred_version and all(part.isdigit() for part in got.inferred_version.split("."))


def test_api_versions_read_again_are_the_same_answer_each_with_its_own_dict():
    """The brokers of a cluster give the same versions: read once (metadata_codec._READ), each broker's
    answer equal to reading them afresh, its versions a dict of its own."""
    from kafka.protocol.api_key import ApiKey
    from kafka.protocol.broker_version_data import BROKER_API_VERSIONS, infer_broker_version_from_api_versions

    from kafkatxn.kafka.wire import metadata_codec

    by_key = {**BROKER_API_VERSIONS[(3, 9)], 999: (0, 1)}
    first, again = metadata_codec._api_versions_response(by_key), metadata_codec._api_versions_response(dict(by_key))
    assert first == again and first.versions is not again.versions
    assert first.versions == {**{ApiKey(k).name: span for k, span in by_key.items() if k != 999}, "api_999": (0, 1)}
    assert first.inferred_version == ".".join(map(str, infer_broker_version_from_api_versions(by_key))) == "3.9"
    newest = max(BROKER_API_VERSIONS)
    assert metadata_codec._api_versions_response({**BROKER_API_VERSIONS[newest], 999: (0, 1)}).inferred_version.endswith("+")


def test_every_typed_request_has_an_encoder_and_a_decoder():
    from kafkatxn.kafka.wire import codecs

    typed = set(p.REQUEST_NAMES)
    assert {kind for kinds in codecs.FAMILIES.values() for kind in kinds} == typed  # each family's module imported when first used
    assert all(callable(wire.ENCODERS[kind]) and callable(wire.DECODERS[kind]) for kind in typed)


# -- wireadmin: DescribeConfigs, the cluster's authorized operations, one topic's Metadata, InitProducerId --


def test_admin_request_fields_reach_the_wire():
    w = wire.Wire(None)
    (resource,) = w._encode(p.DescribeConfigs("broker", "2", ("a", "b"))).resources
    assert (resource.resource_type, resource.resource_name, resource.configuration_keys) == (4, "2", ["a", "b"])
    (resource,) = w._encode(p.DescribeConfigs("topic", "orders")).resources
    assert (resource.resource_type, resource.configuration_keys) == (2, None)  # every config of the topic
    assert w._encode(p.DescribeConfigs("broker", "1"))._min_version == 1  # entries carry their source
    assert w._encode(p.ClusterOperations()).include_cluster_authorized_operations is True
    old = w._encode(p.MetadataClusterOperations())
    assert (old.include_cluster_authorized_operations, old._min_version, old._max_version, old.topics) == (True, 8, 10, [])
    probe = w._encode(p.TopicMetadata("~probe"))
    assert ([t.name for t in probe.topics], probe.allow_auto_topic_creation) == (["~probe"], False)
    init = w._encode(p.InitProducerId("app-1", 60_000))
    assert (init.transactional_id, init.transaction_timeout_ms, init.producer_id, init.producer_epoch) == ("app-1", 60_000, -1, -1)
    assert (init.enable2_pc, init.keep_prepared_txn) == (False, False)


def test_describe_configs_response():
    from kafka.protocol.admin.configs import DescribeConfigsResponse as R

    C = R.DescribeConfigsResult.DescribeConfigsResourceResult
    resp = R(results=[R.DescribeConfigsResult(error_code=0, error_message=None, resource_type=4, resource_name="2", configs=[
        C(name="transaction.max.timeout.ms", value="900000", read_only=True, config_source=5, is_sensitive=False, synonyms=[]),
        C(name="transactional.id.expiration.ms", value="60000", read_only=False, config_source=4, is_sensitive=False, synonyms=[]),
        C(name="sasl.jaas.config", value=None, read_only=True, config_source=4, is_sensitive=True, synonyms=[]),
    ])])
    for version in (1, 4):
        got = wire.DECODERS[p.DescribeConfigs](p.DescribeConfigs("broker", "2"), roundtrip(resp, version))
        assert got == p.DescribeConfigsResponse(None, (
            p.ConfigEntry("transaction.max.timeout.ms", "900000", "default_config", True),
            p.ConfigEntry("transactional.id.expiration.ms", "60000", "static_broker_config", False),
            p.ConfigEntry("sasl.jaas.config", None, "static_broker_config", False),
        ))
    refused = R(results=[R.DescribeConfigsResult(error_code=31, error_message="denied", resource_type=4, resource_name="2", configs=[])])
    got = wire.DECODERS[p.DescribeConfigs](p.DescribeConfigs("broker", "2"), roundtrip(refused, 1))
    assert got == p.DescribeConfigsResponse("CLUSTER_AUTHORIZATION_FAILED")


def test_cluster_operations_responses_describe_cluster_and_metadata():
    from kafka.protocol.admin.cluster import DescribeClusterResponse as D
    from kafka.protocol.metadata import MetadataResponse as M

    described = D(error_code=0, error_message=None, cluster_id="c", controller_id=1, brokers=[], authorized_operations={8, 9, 10})
    for version in (0, 1):
        got = wire.DECODERS[p.ClusterOperations](p.ClusterOperations(), roundtrip(described, version))
        assert got == p.ClusterOperationsResponse(None, frozenset({"DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS"}))
    refused = D(error_code=31, error_message="denied", cluster_id="c", controller_id=1, brokers=[], authorized_operations=None)
    assert wire.DECODERS[p.ClusterOperations](p.ClusterOperations(), roundtrip(refused, 0)).error == "CLUSTER_AUTHORIZATION_FAILED"
    md = M(brokers=[], cluster_id="c", controller_id=1, topics=[], authorized_operations={3, 8})
    for version in (8, 10):
        got = wire.DECODERS[p.MetadataClusterOperations](p.MetadataClusterOperations(), roundtrip(md, version))
        assert got == p.ClusterOperationsResponse(None, frozenset({"READ", "DESCRIBE"}))


@pytest.mark.parametrize("error_code, expected", [(29, "TOPIC_AUTHORIZATION_FAILED"), (17, "INVALID_TOPIC"), (3, "UNKNOWN_TOPIC_OR_PARTITION")])
def test_topic_metadata_response(error_code, expected):
    from kafka.protocol.metadata import MetadataResponse as M

    resp = M(brokers=[], cluster_id="c", controller_id=1, topics=[
        M.MetadataResponseTopic(error_code=error_code, name="~probe", is_internal=False, partitions=[]),
    ])
    for version in (4, 12):
        assert wire.DECODERS[p.TopicMetadata](p.TopicMetadata("~probe"), roundtrip(resp, version)) == p.TopicMetadataResponse(expected)


@pytest.mark.parametrize("error_code, expected", [(0, None), (51, "CONCURRENT_TRANSACTIONS"), (53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED")])
def test_init_producer_id_response(error_code, expected):
    from kafka.protocol.producer.transaction import InitProducerIdResponse as R

    resp = R(error_code=error_code, producer_id=7 if not error_code else -1, producer_epoch=4 if not error_code else -1)
    for version in (0, 5):
        got = wire.DECODERS[p.InitProducerId](p.InitProducerId("app-1", 60_000), roundtrip(resp, version))
        assert got == p.InitProducerIdResponse(expected, 7 if not error_code else -1, 4 if not error_code else -1)
# -- Fetch (wirelog) -------------------------------------------------------------------------------


def test_fetch_is_sent_from_v4_to_v12_with_its_fields():
    """v4 brought isolation levels and aborted transactions; v13 names topics by id (not kept here)."""
    request = wire.Wire(None)._encode(p.Fetch((p.FetchOffset(TP0, 5), p.FetchOffset(OTHER, 9)), True, 1000, 100, 250))
    assert versions(request) == range(4, 13)
    assert (request.isolation_level, request.max_bytes, request.max_wait_ms, request.min_bytes, request.replica_id) == (1, 1000, 250, 1, -1)
    assert {(t.topic, f.partition, f.fetch_offset, f.partition_max_bytes) for t in request.topics for f in t.partitions} == {
        ("orders", 0, 5, 100), ("payments", 3, 9, 100)
    }
    assert wire.Wire(None)._encode(p.Fetch((p.FetchOffset(TP0, 5),), False)).isolation_level == 0
    at = wire.Wire(None)._encode(p.ListOffsetsAt((TP0,), p.EARLIEST))
    assert [(t.name, part.timestamp) for t in at.topics for part in t.partitions] == [("orders", -2)] and at.isolation_level == 0


def _batch(base, records, producer=(-1, -1), transactional=False, control=None, compression=0):
    """Record batch bytes as a broker stores them (kafka-python's own builder)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=transactional,
                                  producer_id=producer[0], producer_epoch=producer[1], base_sequence=0 if producer[0] >= 0 else -1,
                                  batch_size=1 << 20)
    for i, (ts, key, value) in enumerate(records):
        b.append(i, timestamp=ts, key=key, value=value, headers=[])
    out = bytearray(b.build())
    out[0:8] = base.to_bytes(8, "big")
    if control is not None:  # the control flag (attributes bit 5); the CRC covers it, and nothing here checks CRCs
        out[22] |= 0x20
    return bytes(out)


def test_fetch_response_decodes_batches_markers_and_aborted_transactions_at_every_version():
    from kafka.protocol.consumer.fetch import FetchResponse as R

    marker_key = (0).to_bytes(2, "big") + (1).to_bytes(2, "big")  # version 0, type 1: COMMIT
    records = (
        _batch(10, [(1_700_000_000_000, b"k", b"v"), (1_700_000_000_005, None, b"w")], producer=(7, 3), transactional=True)
        + _batch(12, [(1_700_000_000_009, marker_key, b"\x00\x00\x00\x00\x00\x00")], producer=(7, 3), transactional=True, control=True)
        + _batch(13, [(1_700_000_000_010, b"z", b"gz")], compression=1)  # gzip
        + _batch(14, [(1, b"cut", b"short")])[:-5]  # the response's max bytes cut the last batch
    )
    P = R.FetchableTopicResponse.PartitionData
    resp = R(throttle_time_ms=0, error_code=0, session_id=0, responses=[R.FetchableTopicResponse(topic="orders", partitions=[
        P(partition_index=0, error_code=0, high_watermark=14, last_stable_offset=13, log_start_offset=2,
          aborted_transactions=[P.AbortedTransaction(producer_id=8, first_offset=4)], preferred_read_replica=-1, records=records),
        P(partition_index=1, error_code=1, high_watermark=-1, last_stable_offset=-1, log_start_offset=-1,
          aborted_transactions=None, preferred_read_replica=-1, records=None),
    ])])
    request = p.Fetch((p.FetchOffset(TP0, 10), p.FetchOffset(TP1, 99)), True)
    for version in range(4, 13):
        got = wire.DECODERS[p.Fetch](request, roundtrip(resp, version))
        part, bad = got.partitions
        assert (part.tp, part.error, part.high_watermark, part.last_stable_offset) == (TP0, None, 14, 13)
        assert part.log_start_offset == (2 if version >= 5 else -1)  # log start offsets came with v5
        assert part.aborted_transactions == (p.AbortedTransaction(8, 4),)
        data, marker, plain = part.batches
        assert data == p.FetchedBatch(10, 11, 7, 3, True, None, (
            p.FetchedRecord(10, 1_700_000_000_000, b"k", b"v"), p.FetchedRecord(11, 1_700_000_000_005, None, b"w")), 2)
        assert data.gapless and (marker.record_count, plain.record_count) == (1, 1)
        assert (marker.base_offset, marker.control, marker.is_control, marker.producer_id) == (12, "COMMIT", True, 7)
        assert plain.records == (p.FetchedRecord(13, 1_700_000_000_010, b"z", b"gz"),) and not plain.is_transactional
        assert (bad.tp, bad.error, bad.batches) == (TP1, "OFFSET_OUT_OF_RANGE", ())


def test_a_plain_batch_is_read_when_its_records_are_and_a_corrupt_one_says_so_then():
    """An uncompressed data batch's records are decoded on first use (the probe reads none of a gapless
    batch); a batch whose records cannot be read raises UnreadableRecords then, naming CORRUPT_MESSAGE."""
    from kafka.protocol.consumer.fetch import FetchResponse as R

    good = _batch(10, [(1_700_000_000_000, b"k", b"v"), (1_700_000_000_005, None, b"w")])
    corrupt = bytearray(_batch(12, [(1_700_000_000_009, b"k", b"v")]))
    corrupt[-4:] = b"\xff\xff\xff\xff"  # the record's bytes: varints that run past the end
    P = R.FetchableTopicResponse.PartitionData
    resp = R(throttle_time_ms=0, error_code=0, session_id=0, responses=[R.FetchableTopicResponse(topic="orders", partitions=[
        P(partition_index=0, error_code=0, high_watermark=13, last_stable_offset=13, log_start_offset=0,
          aborted_transactions=None, preferred_read_replica=-1, records=good + bytes(corrupt)),
    ])])
    got = wire.DECODERS[p.Fetch](p.Fetch((p.FetchOffset(TP0, 10),), True), roundtrip(resp, 12))
    (part,) = got.partitions
    ok, bad = part.batches
    assert part.error is None and "not read yet" in repr(ok.records) and "not read yet" in repr(bad.records)
    assert [r.offset for r in ok.records] == [10, 11] and len(ok.records) == 2
    with pytest.raises(p.UnreadableRecords, match="CORRUPT_MESSAGE"):
        list(bad.records)
# -- consumer groups -------------------------------------------------------------------------------


def test_group_request_fields_reach_the_wire():
    w = wire.Wire(None)
    earliest = w._encode(p.ListOffsets((TP0, OTHER), read_committed=False, earliest=True))
    assert {part.timestamp for t in earliest.topics for part in t.partitions} == {-2} and earliest.isolation_level == 0
    batched = w._encode(p.FindGroupCoordinators(("a", "b")))
    assert (batched.key_type, batched.coordinator_keys, batched._min_version) == (0, ["a", "b"], 4)
    single = w._encode(p.FindGroupCoordinators(("a",), batched=False))
    assert (single.key, single.key_type, single._max_version) == ("a", 0, 3)
    fetch = w._encode(p.OffsetFetch(("a", "b")))
    # v10 names topics by id: the batched form must stay at v8-v9; null topics: every committed offset.
    assert (fetch._min_version, fetch._max_version) == (8, 9)
    assert [(g.group_id, g.topics) for g in fetch.groups] == [("a", None), ("b", None)]
    one = w._encode(p.OffsetFetch(("a",), batched=False))
    assert (one.group_id, one.topics, one._min_version, one._max_version) == ("a", None, 2, 7)
    assert w._encode(p.DescribeGroups(("a", "b"))).groups == ["a", "b"]


def test_an_earliest_list_offsets_is_not_reused_for_a_latest_one():
    from kafka.protocol.consumer.offsets import ListOffsetsResponse as R

    manager = _Manager(lambda request: _Answer(roundtrip(R(topics=[]), 4)))
    w = wire.Wire(manager)
    w.send_all([(1, p.ListOffsets((TP0,), False)), (1, p.ListOffsets((TP0,), False, earliest=True))], deadline=1e12)
    latest, earliest = (r for _, r in manager.sent)
    from kafka.protocol.consumer.offsets import ListOffsetsRequest

    def timestamp(sent):  # what goes out (the body .bodies writes), read back by kafka-python
        return ListOffsetsRequest.decode(sent.encode(version=4), version=4).topics[0].partitions[0].timestamp

    assert latest is not earliest and timestamp(latest) == -1
    assert timestamp(earliest) == -2


def test_the_two_isolation_levels_list_offsets_bodies_share_what_follows_the_level_and_are_kafka_pythons():
    from kafka.protocol.api_message import ApiMessage

    from kafkatxn.kafka.wire import bodies

    bodies._WRITTEN_TOPICS.clear()
    for version in range(1, 12):
        for earliest in (False, True):
            pair = [p.ListOffsets(tuple(MANY), committed, earliest) for committed in (False, True)]  # equal, not the same tuple
            written = [bodies.list_offsets_body(request, version) for request in pair]
            for request, body in zip(pair, written):
                if version < 2 and request.read_committed:
                    continue  # isolation levels came with v2
                fresh = wire.Wire(None)._encode(request)
                assert body == bytes(ApiMessage.encode(fresh, version=version)), (version, request.read_committed, earliest)
            level = 5 if version >= 2 else 4
            assert bodies._list_offsets_topics(pair[1].partitions, earliest, version) is bodies._WRITTEN_TOPICS[-1][3]
            assert written[0][level:] == written[1][level:]
    assert len(bodies._WRITTEN_TOPICS) == bodies.WRITTEN_TOPICS_KEPT


def test_a_list_offsets_body_written_from_a_leaders_runs_is_kafka_pythons(monkeypatch):
    """Each topic's name and partition numbers as the metadata's columns group them (``LedPartitions.runs``),
    written with no Python step per topic: names and counts of one-byte lengths and longer, every version."""
    from kafka.protocol.api_message import ApiMessage

    from kafkatxn.kafka.wire import bodies
    from kafkatxn.metadata_columns import LedPartitions

    for runs in (
        [("orders", (0, 3, 6)), ("t" * 200, (1,)), ("payments", tuple(range(2, 600, 2)))],  # a long name, 299 partitions
        [("a", (0,)), ("b" * 125, (4, 5)), ("c" * 126, (7,))],  # lengths written in one byte to the most
        [],
    ):
        led = LedPartitions(TopicPartition(name, i) for name, indexes in runs for i in indexes)
        led.runs = runs
        for version in range(1, 12):
            for earliest in (False, True):
                monkeypatch.setattr(bodies, "_WRITTEN_TOPICS", [])
                request = p.ListOffsets(led, version >= 2, earliest)
                fresh = wire.Wire(None)._encode(p.ListOffsets(tuple(led), version >= 2, earliest))
                assert bodies.list_offsets_body(request, version) == bytes(ApiMessage.encode(fresh, version=version)), (version, runs[:1])


def test_list_groups_response():
    from kafka.protocol.admin.groups import ListGroupsResponse as R

    resp = R(error_code=0, groups=[
        R.ListedGroup(group_id="billing", protocol_type="consumer", group_state="Stable", group_type="classic"),
        R.ListedGroup(group_id="connect-x", protocol_type="connect", group_state="Stable", group_type="classic"),
    ])
    low, high = R._valid_versions
    for version in range(low, high + 1):
        got = wire.DECODERS[p.ListGroups](p.ListGroups(), roundtrip(resp, version))
        # The state from v4 on; before, none (""): DescribeGroups is then what says it.
        state, kind = "Stable" if version >= 4 else "", "classic" if version >= 5 else ""
        assert got == p.ListGroupsResponse(None, (p.ListedGroup("billing", "consumer", state, kind),
                                                  p.ListedGroup("connect-x", "connect", state, kind)))
    loading = R(error_code=14, groups=[])
    assert wire.DECODERS[p.ListGroups](p.ListGroups(), roundtrip(loading, high)).error == "COORDINATOR_LOAD_IN_PROGRESS"


def test_offset_fetch_responses_batched_and_single():
    from kafka.protocol.consumer import OffsetFetchResponse as R

    G = R.OffsetFetchResponseGroup
    T = G.OffsetFetchResponseTopics
    P = T.OffsetFetchResponsePartitions
    batched = R(groups=[
        G(group_id="billing", error_code=0, topics=[T(name="orders", partitions=[
            P(partition_index=0, committed_offset=3, committed_leader_epoch=-1, metadata="", error_code=0),
            P(partition_index=1, committed_offset=-1, committed_leader_epoch=-1, metadata="", error_code=0),
        ])]),
        G(group_id="reports", error_code=30, topics=[]),
    ])
    for version in (8, 9):
        got = wire.DECODERS[p.OffsetFetch](p.OffsetFetch(("billing", "reports")), roundtrip(batched, version))
        assert got.groups == (p.GroupOffsets("billing", None, {TP0: 3}), p.GroupOffsets("reports", "GROUP_AUTHORIZATION_FAILED", {}))
    OT = R.OffsetFetchResponseTopic
    OP = OT.OffsetFetchResponsePartition
    single = R(error_code=0, topics=[OT(name="payments", partitions=[
        OP(partition_index=3, committed_offset=9, committed_leader_epoch=-1, metadata=None, error_code=0),
    ])])
    for version in range(2, 8):
        got = wire.DECODERS[p.OffsetFetch](p.OffsetFetch(("billing",), batched=False), roundtrip(single, version))
        assert got.groups == (p.GroupOffsets("billing", None, {OTHER: 9}),)
    loading = R(error_code=14, topics=[])
    got = wire.DECODERS[p.OffsetFetch](p.OffsetFetch(("billing",), batched=False), roundtrip(loading, 7))
    assert got.groups == (p.GroupOffsets("billing", "COORDINATOR_LOAD_IN_PROGRESS", {}),)


def test_a_stable_offset_fetch_names_its_partitions_and_reads_unstable_ones():
    """require_stable (KIP-447) with the partitions asked, v7+; UNSTABLE_OFFSET_COMMIT (88) per
    partition or for the group: the partitions whose offsets a read_committed consumer cannot fetch."""
    from kafka.protocol.consumer import OffsetFetchResponse as R

    w = wire.Wire(None)
    batched = w._encode(p.OffsetFetch(("billing", "reports"), stable=((TP0, TP1), (OTHER,))))
    assert batched.require_stable is True and batched._min_version == 8
    assert [(g.group_id, [(t.name, list(t.partition_indexes)) for t in g.topics]) for g in batched.groups] == [
        ("billing", [("orders", [0, 1])]), ("reports", [("payments", [3])])]
    single = w._encode(p.OffsetFetch(("billing",), batched=False, stable=((TP0, OTHER),)))
    assert single.require_stable is True and single._min_version == 7
    assert [(t.name, list(t.partition_indexes)) for t in single.topics] == [("orders", [0]), ("payments", [3])]
    assert w._encode(p.OffsetFetch(("billing",), batched=False)).require_stable is False
    G = R.OffsetFetchResponseGroup
    T = G.OffsetFetchResponseTopics
    P = T.OffsetFetchResponsePartitions
    resp = R(groups=[
        G(group_id="billing", error_code=0, topics=[T(name="orders", partitions=[
            P(partition_index=0, committed_offset=-1, committed_leader_epoch=-1, metadata="", error_code=88),
            P(partition_index=1, committed_offset=4, committed_leader_epoch=-1, metadata="", error_code=0),
        ])]),
        G(group_id="reports", error_code=88, topics=[]),
    ])
    request = p.OffsetFetch(("billing", "reports"), stable=((TP0, TP1), (OTHER,)))
    got = wire.DECODERS[p.OffsetFetch](request, roundtrip(resp, 8))
    assert got.groups == (p.GroupOffsets("billing", None, {TP1: 4}, frozenset({TP0})),
                          p.GroupOffsets("reports", None, {}, frozenset({OTHER})))


def test_describe_groups_response_decodes_the_consumer_protocols_assignments():
    from kafka.protocol.admin.groups import DescribeGroupsResponse as R
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as A

    def assignment(*tps):
        by_topic = p.by_topic(tps)
        return A(assigned_partitions=[A.TopicPartition(topic=t, partitions=ps) for t, ps in by_topic.items()], user_data=None).encode(version=0)

    M = R.DescribedGroup.DescribedGroupMember
    resp = R(groups=[
        R.DescribedGroup(error_code=0, group_id="billing", group_state="Stable", protocol_type="consumer", protocol_data="range",
                         members=[M(member_id="m1", client_id="c", client_host="/h", member_metadata=b"", member_assignment=assignment(TP0, OTHER)),
                                  M(member_id="m2", client_id="c", client_host="/h", member_metadata=b"", member_assignment=assignment(TP1)),
                                  M(member_id="m3", client_id="c", client_host="/h", member_metadata=b"", member_assignment=b"")]),
        R.DescribedGroup(error_code=0, group_id="connect-x", group_state="Stable", protocol_type="connect", protocol_data="",
                         members=[M(member_id="w", client_id="c", client_host="/h", member_metadata=b"", member_assignment=b"\x00\x01")]),
        R.DescribedGroup(error_code=30, group_id="secret", group_state="", protocol_type="", protocol_data="", members=[]),
    ])
    low, high = R._valid_versions
    for version in range(low, high + 1):
        got = wire.DECODERS[p.DescribeGroups](p.DescribeGroups(("billing", "connect-x", "secret")), roundtrip(resp, version))
        assert got.groups == (
            p.DescribedGroup("billing", None, "Stable", "consumer", frozenset({TP0, TP1, OTHER})),
            p.DescribedGroup("connect-x", None, "Stable", "connect", frozenset()),  # not the consumer protocol: not read
            p.DescribedGroup("secret", "GROUP_AUTHORIZATION_FAILED"),
        )


def test_the_group_errors_the_facade_acts_on_are_ones_the_wire_gives():
    from kafkatxn.kafka import retry

    given = {wire.error_name(code) for code in range(1, 200)}
    acted_on = {e for api in ("OffsetFetch", "DescribeGroups", "ListGroups") for e in retry.RETRIES[api]} - {retry.NO_ANSWER}
    acted_on |= {"GROUP_AUTHORIZATION_FAILED"}
    assert acted_on - given == set()


# -- ListOffsets answers read from their bytes (wire/bodies.py) ---------------------------------------


def list_offsets_answer(topics: dict[str, list[tuple[int, int, int]]], throttle_ms: int = 0):
    """kafka-python's ListOffsetsResponse: per topic, (partition, error code, offset) rows."""
    from kafka.protocol.consumer.offsets import ListOffsetsResponse as R

    T = R.ListOffsetsTopicResponse
    P = T.ListOffsetsPartitionResponse
    return R(throttle_time_ms=throttle_ms, topics=[
        T(name=name, partitions=[P(partition_index=i, error_code=e, timestamp=-1, offset=o, leader_epoch=3) for i, e, o in rows])
        for name, rows in topics.items()
    ])


ANSWERS = {
    "one": {"orders": [(0, 0, 42)]},
    "many": {"orders": [(i, 0, i * 7) for i in range(300)], "t" * 200: [(i, 0, -1) for i in range(200)], "payments": [(3, 0, 0)]},
    "errors": {"orders": [(0, 6, -1), (1, 0, 5)], "payments": [(2, 3, -1)]},
    "empty-topic": {"orders": [], "payments": [(1, 0, 9)]},
    "none": {},
}


@pytest.mark.parametrize("answer", ANSWERS.values(), ids=ANSWERS.keys())
def test_a_list_offsets_answer_read_from_its_bytes_is_what_the_decoder_makes_of_kafka_pythons(answer):
    from kafka.protocol.consumer.offsets import ListOffsetsResponse as R

    from kafkatxn.kafka.wire import bodies
    from kafkatxn.kafka.wire.offsets_codec import _decode_list_offsets

    request = p.ListOffsets((TP0,), True)
    for version in range(1, R.max_version + 1):
        raw = list_offsets_answer(answer, throttle_ms=17).encode(version=version)
        read = bodies.read_list_offsets(memoryview(raw), version)
        if version < bodies.LIST_OFFSETS_FLEXIBLE:
            assert read is None  # kafka-python's to decode
            continue
        assert read == (_decode_list_offsets(request, R.decode(raw, version=version)), 17)
        assert bodies.read_list_offsets(memoryview(raw), version) == read  # again: each topic's columns as kept


def test_a_list_offsets_answer_laid_out_as_one_read_before_is_read_by_its_layout(monkeypatch):
    from kafka.protocol.consumer.offsets import ListOffsetsResponse as R

    from kafkatxn.kafka.wire import bodies, offsets_layout
    from kafkatxn.kafka.wire.offsets_codec import _decode_list_offsets

    monkeypatch.setattr(offsets_layout, "_layouts", type(offsets_layout._layouts)())
    walked = []
    walk = offsets_layout._walked
    monkeypatch.setattr(offsets_layout, "_walked", lambda data: walked.append(len(data)) or walk(data))
    request = p.ListOffsets((TP0,), True)
    before = {"orders": [(i, 0, 10 + i) for i in range(50)], "payments": [(i, 0, 7) for i in range(3)]}
    after = {**before, "orders": [*before["orders"][:-1], (49, 0, 60)]}  # one partition written to since
    more = {**before, "payments": [(i, 0, 7) for i in range(4)]}  # a partition more: laid out otherwise
    read = []
    for topics in (before, before, after, more):
        raw = list_offsets_answer(topics).encode(version=9)
        read.append(bodies.read_list_offsets(memoryview(raw), 9))
        assert read[-1] == (_decode_list_offsets(request, R.decode(raw, version=9)), 0)
    assert len(walked) == 2  # the first answer and the one with a partition more; the others by the layout
    assert read[1][0].partitions.tps is read[0][0].partitions.tps is read[2][0].partitions.tps  # one layout's


def test_list_offsets_columns_are_their_rows_and_both_are_taken_apart_alike():
    rows = (p.PartitionOffset(TP0, None, 5), p.PartitionOffset(TP1, "NOT_LEADER_OR_FOLLOWER", -1))
    columns = p.OffsetColumns((TP0, TP1), (None, "NOT_LEADER_OR_FOLLOWER"), (5, -1))
    assert columns == rows and rows == columns and tuple(columns) == rows and columns[1] == rows[1] and len(columns) == 2
    assert columns != rows[:1] and p.ListOffsetsResponse(columns) == p.ListOffsetsResponse(rows)
    taken = ((TP0, TP1), (None, "NOT_LEADER_OR_FOLLOWER"), (5, -1))
    assert p.offset_columns(columns) == taken and p.offset_columns(rows) == taken and p.offset_columns(()) == ((), (), ())


def test_a_list_offsets_answer_with_tagged_fields_is_left_to_kafka_python():
    from kafka.protocol.consumer.offsets import ListOffsetsResponse as R

    from kafkatxn.kafka.wire import bodies

    plain = bytes(list_offsets_answer(ANSWERS["one"]).encode(version=11))
    assert bodies.read_list_offsets(memoryview(plain), 11) is not None
    # The partition's tagged-field count (its last byte) set to one unknown tag (tag 9, 1 byte).
    end = plain.index(b"\x00\x00\x00\x03") + 4  # after leader_epoch 3
    tagged = plain[:end] + b"\x01\x09\x01\x07" + plain[end + 1 :]
    assert R.decode(tagged, version=11).topics[0].partitions[0].offset == 42  # what kafka-python reads
    assert bodies.read_list_offsets(memoryview(tagged), 11) is None


def handed_over(sent, answer_bytes: bytes, flexible: bool):
    """``answer_bytes`` (an answer to ``sent``, the request kafka-python would send) as kafka-python's
    own parser hands it over, as its connection runs it: the answer's header read, and the class to
    decode the body with asked of the request's header."""
    from kafka.protocol.api_header import ResponseHeader
    from kafka.protocol.parser import KafkaProtocol

    parser = KafkaProtocol(client_id="kafkatxn")
    correlation_id = parser.send_request(sent)
    body = ResponseHeader(correlation_id=correlation_id).encode(flexible=flexible) + answer_bytes
    ((got_id, answer),) = parser.receive_bytes(len(body).to_bytes(4, "big") + body)
    assert got_id == correlation_id
    return answer


def test_kafka_pythons_parser_hands_over_a_list_offsets_answer_read_by_the_wire():
    """A ListOffsets sent through the Wire: kafka-python's own parser (as its connection runs it)
    reads the answer's header and asks the request's header for the class to decode it with, which
    reads the body with wire/bodies.py; a version it does not read is kafka-python's, as before."""
    from kafka.protocol.consumer.offsets import ListOffsetsResponse as R

    from kafkatxn.kafka.wire.offsets_codec import _decode_list_offsets

    request = p.ListOffsets(tuple(TopicPartition("orders", i) for i in range(300)), True)
    expected = list_offsets_answer(ANSWERS["many"], throttle_ms=5)
    for version in (4, 5, 6, 9, 11):
        w = wire.Wire(None)
        sent = w._reused(1, request)
        sent.API_VERSION = version
        answer = handed_over(sent, bytes(expected.encode(version=version)), R.flexible_version_q(version))
        assert isinstance(answer, wire_client.Read) == (version >= 6)
        assert answer.throttle_time_ms == 5  # what kafka-python's connection throttles by
        assert w._decode(request, answer) == _decode_list_offsets(request, R.decode(bytes(expected.encode(version=version)), version=version))


# -- Metadata answers read from their bytes (wire/bodies.py) ------------------------------------------


def metadata_answer(rf: int = 3, shrunk: bool = False, offline: bool = False, racks: bool = False, throttle_ms: int = 0,
                    reordered: bool = False):
    """kafka-python's MetadataResponse: topics of ``rf`` replicas (one partition's in-sync list
    shrunk, one with an offline replica, a topic's in-sync lists in another order), an internal topic,
    a topic in error with no partitions, and one of 200 leaderless partitions with a name over 127 bytes."""
    import uuid

    from kafka.protocol.metadata import MetadataResponse as M

    T = M.MetadataResponseTopic
    P = T.MetadataResponsePartition

    def part(i: int, reps: list[int], isr: list[int] | None = None, off: tuple = ()) -> Any:
        return P(error_code=0, partition_index=i, leader_id=reps[0] if reps else -1, leader_epoch=4, replica_nodes=reps,
                 isr_nodes=reps if isr is None else isr, offline_replicas=list(off))

    topics = []
    for t in range(4):
        parts = []
        for i in range(150):
            reps = [((i + k) % 5) + 1 for k in range(rf)]
            parts.append(part(i, reps, reps[:-1] if shrunk and t == 2 and i == 70 else reps[::-1] if reordered and t == 3 else None,
                              reps[-1:] if offline and t == 1 and i == 7 else ()))
        topics.append(T(error_code=0, name=f"topic-{t}", topic_id=uuid.uuid4(), is_internal=False, partitions=parts))
    topics.append(T(error_code=0, name="__transaction_state", topic_id=uuid.uuid4(), is_internal=True,
                    partitions=[part(i, [1]) for i in range(50)]))
    topics.append(T(error_code=29, name="denied", topic_id=uuid.uuid4(), is_internal=False, partitions=[]))
    topics.append(T(error_code=0, name="x" * 200, topic_id=uuid.uuid4(), is_internal=False, partitions=[part(i, []) for i in range(200)]))
    brokers = [M.MetadataResponseBroker(node_id=b, host=f"broker-{b}.example", port=9000 + b, rack=f"r{b}" if racks else None)
               for b in (3, 1, 2)]
    return M(throttle_time_ms=throttle_ms, brokers=brokers, cluster_id="cid", controller_id=2, topics=topics)


METADATA_ANSWERS = {
    "three-replicas": {}, "one-replica": {"rf": 1}, "racks": {"racks": True}, "isr-shrunk": {"shrunk": True},
    "offline": {"offline": True}, "no-replicas": {"rf": 0}, "isr-reordered": {"reordered": True},
}


@pytest.mark.parametrize("kw", METADATA_ANSWERS.values(), ids=METADATA_ANSWERS.keys())
def test_a_metadata_answer_read_from_its_bytes_is_what_the_decoder_makes_of_kafka_pythons(kw):
    from kafka.protocol.metadata import MetadataResponse as M

    from kafkatxn.kafka.wire import bodies
    from kafkatxn.kafka.wire.metadata_codec import _decode_metadata

    for version in range(1, M.max_version + 1):
        raw = bytes(metadata_answer(throttle_ms=11, **kw).encode(version=version))
        read = bodies.read_metadata(memoryview(raw), version)
        if version < bodies.METADATA_READ_FROM:
            assert read is None  # kafka-python's to decode
            continue
        decoded = _decode_metadata(p.Metadata(), M.decode(raw, version=version))
        # Read as columns, a topic at a time; the metadata made of them is the decoder's, in the session's
        # order, its PartitionInfos made on first use with the TopicPartitions made of the columns.
        assert read[1] == 11 and read[0][:3] == decoded[:3] and type(read[0].partitions) is MetadataColumns
        md = cluster_metadata(read[0], 1)
        assert type(md) is ColumnMetadata and "partitions" not in md.__dict__
        expected = ClusterMetadata(*decoded[:3], in_topic_order(decoded.partitions), 1)
        assert md.tps == expected.tps and md.leaders == expected.leaders and md.topics() == expected.topics()
        assert md.data_partitions() == selection_of(expected)
        assert md.transaction_log == expected.transaction_log
        assert md == expected and md.partitions == expected.partitions
        assert type(md.partitions) is InTopicOrder and md.partitions.tps is md.tps
        assert [type(x) for x in md.partitions[:1]] == [PartitionInfo]
        # Every replica in sync in the same order: the in-sync list is the replica list's tuple (one broker's: shared).
        first = md.partitions[0]
        assert not first.replicas or (first.isr is first.replicas) == (first.isr == first.replicas)
        if kw.get("rf") == 1:
            assert len({id(x.replicas) for x in md.partitions if x.replicas}) < 10  # about one per broker, not per partition


def selection_of(md: Any) -> tuple[list, list]:
    """Every partition but the internal topics', in partition order, and their leaders (selection's own way)."""
    chosen = [x for x in md.partitions if not x.internal]
    return [x.tp for x in chosen], [x.leader for x in chosen]


def test_a_topics_partitions_read_again_from_the_same_bytes_are_the_last_answers_objects(monkeypatch):
    """The exporter asks metadata every scrape, of whichever broker: the answers of two brokers order
    their topics apart, a topic's partitions are the same bytes. Those bytes again are the last answer's
    PartitionInfos again (immutable, shared); a topic whose partitions changed is read anew, and only the
    last answer's topics are kept."""
    from kafka.protocol.metadata import MetadataResponse as M

    from kafkatxn.kafka.wire import bodies
    from kafkatxn.kafka.wire.metadata_codec import _decode_metadata

    monkeypatch.setattr(metadata_columns, "_MADE_TOPICS", [{}])
    answer = metadata_answer(rf=3)
    first = cluster_metadata(bodies.read_metadata(memoryview(bytes(answer.encode(version=12))), 12)[0], 1)
    other = M(throttle_time_ms=0, brokers=list(reversed(answer.brokers)), cluster_id="cid", controller_id=2,
              topics=list(reversed(answer.topics)))  # another broker's order
    T, P = M.MetadataResponseTopic, M.MetadataResponseTopic.MetadataResponsePartition
    moved = answer.topics[1]
    other.topics[-2] = T(error_code=0, name=moved.name, topic_id=moved.topic_id, is_internal=False, partitions=[
        P(error_code=0, partition_index=p.partition_index, leader_id=p.replica_nodes[1] if p.partition_index == 3 else p.leader_id,
          leader_epoch=p.leader_epoch, replica_nodes=p.replica_nodes, isr_nodes=p.isr_nodes, offline_replicas=p.offline_replicas)
        for p in moved.partitions])  # partition 3's leader moved
    raw = bytes(other.encode(version=12))
    second = cluster_metadata(bodies.read_metadata(memoryview(raw), 12)[0], 1)
    decoded = _decode_metadata(p.Metadata(), M.decode(raw, version=12))
    assert second == ClusterMetadata(*decoded[:3], in_topic_order(decoded.partitions), 1)
    before = {pi.tp: pi for pi in first.partitions}
    for pi in second.partitions:
        if pi.topic == moved.name:
            assert pi is not before[pi.tp] and (pi.leader != before[pi.tp].leader) == (pi.partition == 3)
        elif pi.replicas:  # the leaderless topic's partitions have no replicas: read one at a time, not kept
            assert pi is before[pi.tp]
    gone = M(throttle_time_ms=0, brokers=answer.brokers, cluster_id="cid", controller_id=2, topics=answer.topics[:1])
    cluster_metadata(bodies.read_metadata(memoryview(bytes(gone.encode(version=12))), 12)[0], 1).partitions  # noqa: B018
    assert {name for name, _ in metadata_columns._MADE_TOPICS[0]} == {answer.topics[0].name}


def test_a_metadata_answer_not_in_order_is_left_in_its_order_for_the_session_to_order():
    """Kafka names a topic's partitions in order, each topic once: where an answer does not, the wire
    leaves its partitions as they came, and the session orders them (the same ClusterMetadata either way)."""
    from kafka.protocol.metadata import MetadataResponse as M

    from kafkatxn.kafka.wire import bodies
    from kafkatxn.kafka.wire.metadata_codec import _decode_metadata

    answer = metadata_answer(rf=3)
    ordered = cluster_metadata(bodies.read_metadata(memoryview(bytes(answer.encode(version=12))), 12)[0], 1)
    T = M.MetadataResponseTopic

    def topic(t: Any, partitions: list) -> Any:
        return T(error_code=0, name=t.name, topic_id=t.topic_id, is_internal=t.is_internal, partitions=partitions)

    shuffled, twice = answer.topics[2], answer.topics[3]
    for topics in ([*answer.topics[:2], topic(shuffled, list(reversed(shuffled.partitions))), *answer.topics[3:]],
                   [*answer.topics[:3], topic(twice, twice.partitions[:70]), *answer.topics[4:], topic(twice, twice.partitions[70:])]):
        raw = bytes(M(throttle_time_ms=0, brokers=answer.brokers, cluster_id="cid", controller_id=2, topics=topics).encode(version=12))
        read = bodies.read_metadata(memoryview(raw), 12)[0]
        assert read == _decode_metadata(p.Metadata(), M.decode(raw, version=12))  # as the answer names them
        assert type(read.partitions) is tuple
        md = cluster_metadata(read, 1)
        assert md.partitions == ordered.partitions and md.tps == ordered.partitions.tps


def test_a_metadata_answer_with_tagged_fields_is_left_to_kafka_python():
    from kafka.protocol.metadata import MetadataResponse as M

    from kafkatxn.kafka.wire import bodies

    raw = bytes(metadata_answer(rf=1).encode(version=13))
    assert bodies.read_metadata(memoryview(raw), 13) is not None
    tagged = raw[:-1] + b"\x01\x09\x01\x07"  # the answer's own tagged fields: one unknown tag
    assert M.decode(tagged, version=13).brokers  # what kafka-python reads
    assert bodies.read_metadata(memoryview(tagged), 13) is None


def test_kafka_pythons_parser_hands_over_a_metadata_answer_read_by_the_wire():
    from kafka.protocol.metadata import MetadataResponse as M

    from kafkatxn.kafka.wire.metadata_codec import _decode_metadata

    expected = metadata_answer(racks=True, throttle_ms=5)
    for version in (8, 11, 12, 13):
        sent = wire.Wire(None)._reused(None, p.Metadata())  # as the wire sends it (its body written: WRITTEN_PER_SEND)
        assert type(sent).__name__ == "MetadataRequest"
        sent.API_VERSION = version
        answer = handed_over(sent, bytes(expected.encode(version=version)), M.flexible_version_q(version))
        assert isinstance(answer, wire_client.Read) == (version >= 12)
        assert answer.throttle_time_ms == 5
        reference = _decode_metadata(p.Metadata(), M.decode(bytes(expected.encode(version=version)), version=version))
        decoded = wire.Wire(None)._decode(p.Metadata(), answer)
        if version < 12:
            assert decoded == reference
        else:  # read as columns: the metadata made of them is the decoder's, in the session's order
            assert type(decoded.partitions) is MetadataColumns
            assert cluster_metadata(decoded, 1) == ClusterMetadata(*reference[:3], in_topic_order(reference.partitions), 1)


# -- DescribeProducers answers read from their bytes (wire/bodies.py) ---------------------------------


def describe_producers_answer(kind: str, throttle_ms: int = 0):
    """kafka-python's DescribeProducersResponse over 6 topics of 100 partitions: none with producers
    (``empty``), one each (``one``), three each (``three``), 0-2 with errors and an error message (``mixed``), or one
    partition of every other topic (``sparse``); a topic name over 127 bytes, a topic with none."""
    from kafka.protocol.admin.transactions import DescribeProducersResponse as R

    T = R.TopicResponse
    P = T.PartitionResponse

    def producers(pid: int, k: int) -> list:
        return [P.ProducerState(producer_id=pid + j, producer_epoch=j, last_sequence=5, last_timestamp=1_700_000_000_000 + j,
                                coordinator_epoch=-1 if j else 3, current_txn_start_offset=-1 if j % 2 else 17) for j in range(k)]

    topics = []
    for t in range(6):
        parts = []
        for i in range(100):
            k = {"empty": 0, "one": 1, "three": 3, "mixed": (i * t) % 3, "sparse": int(i == 7 and t % 2 == 0)}[kind]
            error = 6 if kind == "mixed" and i == 3 else 0
            message = "not the leader" if kind == "mixed" and i == 4 and t == 1 else None
            parts.append(P(partition_index=i, error_code=error, error_message=message, active_producers=producers(1000 * t + i, k)))
        topics.append(T(name=f"t{t}" if t != 2 else "y" * 200, partitions=parts))
    topics.append(T(name="no-partitions", partitions=[]))
    return R(throttle_time_ms=throttle_ms, topics=topics)


@pytest.mark.parametrize("kind", ["empty", "one", "three", "mixed", "sparse"])
def test_a_describe_producers_answer_read_from_its_bytes_is_what_the_decoder_makes_of_kafka_pythons(kind):
    from kafka.protocol.admin.transactions import DescribeProducersResponse as R

    from kafkatxn.kafka.wire import producers_answers
    from kafkatxn.kafka.wire.producers_codec import _decode_describe_producers

    request = p.DescribeProducers((TP0,))
    for version in range(0, R.max_version + 1):
        raw = bytes(describe_producers_answer(kind, throttle_ms=13).encode(version=version))
        assert producers_answers.read_describe_producers(memoryview(raw), version) == (
            _decode_describe_producers(request, R.decode(raw, version=version)), 13)


def test_a_describe_producers_answer_with_tagged_fields_is_left_to_kafka_python():
    from kafka.protocol.admin.transactions import DescribeProducersResponse as R

    from kafkatxn.kafka.wire import producers_answers

    raw = bytes(describe_producers_answer("one").encode(version=0))
    tagged = raw[:-1] + b"\x01\x09\x01\x07"  # the answer's own tagged fields: one unknown tag
    assert R.decode(tagged, version=0).topics
    assert producers_answers.read_describe_producers(memoryview(tagged), 0) is None


def test_kafka_pythons_parser_hands_over_a_describe_producers_answer_read_by_the_wire():
    from kafka.protocol.admin.transactions import DescribeProducersResponse as R

    from kafkatxn.kafka.wire.producers_codec import _decode_describe_producers

    request = p.DescribeProducers(tuple(TopicPartition("orders", i) for i in range(300)))
    expected = describe_producers_answer("mixed", throttle_ms=5)
    w = wire.Wire(None)
    sent = w._reused(1, request)  # kept (its body encoded once) and its answers read by the wire
    sent.API_VERSION = 0
    answer = handed_over(sent, bytes(expected.encode(version=0)), flexible=True)
    assert isinstance(answer, wire_client.Read) and answer.throttle_time_ms == 5
    assert w._decode(request, answer) == _decode_describe_producers(request, R.decode(bytes(expected.encode(version=0)), version=0))


def test_the_deferred_kafka_package_still_serves_its_names():
    """kafka-python's network and protocol modules import without its package __init__ (which
    client_package defers); code beside kafkatxn in one process (a test, a Spark job) that asks the
    package for its names gets them: the first such read runs the package's own __init__."""
    code = (
        "import sys, logging\n"
        "import kafkatxn.kafka.wire\n"
        "import kafka.net.manager, kafka.net.selector, kafka.net.sasl.oauth, kafka.future\n"
        "import kafka.protocol.metadata, kafka.protocol.consumer.offsets, kafka.protocol.api_message\n"
        "from kafka import errors\n"
        "assert 'kafka.producer' not in sys.modules, 'the network layer or a submodule read ran the package init'\n"
        "from kafka import KafkaProducer, KafkaAdminClient\n"
        "import kafka\n"
        "print(KafkaProducer.__name__, KafkaAdminClient.__name__, kafka.__version__, errors.__name__)\n"
        "try:\n"
        "    kafka.no_such_name\n"
        "except AttributeError:\n"
        "    print('AttributeError')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    producer, admin, version, errors, missing = proc.stdout.split()
    assert (producer, admin, errors, missing) == ("KafkaProducer", "KafkaAdminClient", "kafka.errors", "AttributeError")
    assert version[0].isdigit()


def test_the_deferred_protocol_packages_import_one_api_module_and_still_serve_their_names():
    """kafka-python's protocol packages admin, consumer and producer are registered with their
    __init__ deferred (bound on kafka.protocol as the import system would): importing one API's module
    builds that API's classes only, and kafka-python's network layer, whose broker_version_data reads
    two names from the packages to make requests it never sends, imports neither module defining them
    (client_package.MADE_LATER); read by anything else, they come from those modules (DEFERRED).
    The network package and its metrics packages likewise: kafka.net.metrics's four stats come from
    their own modules, no proxy, sensor or reporter is imported.
    The first read of another name runs the package's own __init__, which binds the same objects."""
    code = (
        "import sys\n"
        "import kafkatxn.kafka.wire\n"
        "from kafkatxn.kafka.wire.client_package import DEFERRED\n"
        "import kafka.net.manager, kafka.protocol\n"
        "assert not {'kafka.protocol.admin.groups', 'kafka.protocol.consumer.group'} & set(sys.modules)\n"
        "import kafka.protocol.admin.transactions, kafka.protocol.consumer.offsets, kafka.protocol.producer.transaction\n"
        "assert kafka.protocol.admin is sys.modules['kafka.protocol.admin'], 'not bound on its parent'\n"
        "unsent = {'kafka.protocol.admin.topics', 'kafka.protocol.admin.acl', 'kafka.protocol.admin.cluster',\n"
        "          'kafka.protocol.consumer.metadata', 'kafka.protocol.producer.produce',\n"
        "          'kafka.net.socks5', 'kafka.net.compat', 'kafka.metrics.metrics', 'kafka.metrics.stats.sensor'}\n"
        "assert not unsent & set(sys.modules), sorted(unsent & set(sys.modules))\n"
        "served = {(package, name): getattr(sys.modules[package], name)\n"
        "          for package, names in DEFERRED.items() if package != 'kafka' for name in names}\n"
        "assert not unsent & set(sys.modules), 'serving a name ran a package init'\n"
        "from kafka.protocol.admin import CreateTopicsRequest, ListGroupsRequest\n"
        "from kafka.protocol.consumer import *\n"
        "from kafka.protocol.producer import ProduceRequest\n"
        "from kafka.net import Socks5Proxy\n"
        "from kafka.metrics import Metrics\n"
        "from kafka.metrics.stats import Sensor\n"
        "for (package, name), got in served.items():\n"
        "    assert sys.modules[package].__dict__[name] is got, (package, name)\n"
        "assert OffsetFetchRequest is served[('kafka.protocol.consumer', 'OffsetFetchRequest')]\n"
        "try:\n"
        "    kafka.protocol.admin.no_such_name\n"
        "except AttributeError:\n"
        "    pass\n"
        "print(CreateTopicsRequest.__name__, ProduceRequest.__name__, len(served))\n"
    )
    assert python_prints(code) == ["CreateTopicsRequest", "ProduceRequest", "6"]


def test_the_version_checks_broker_version_data_makes_are_kafka_pythons_requests_made_when_first_read():
    """broker_version_data makes VERSION_CHECKS' requests of ListGroupsRequest and OffsetFetchRequest
    at its import, for brokers older than ApiVersions, and no module of kafka-python reads them: served
    stand-ins (client_package.MADE_LATER), they are the same requests made when first read, and the
    group APIs' modules are imported then, not with kafka-python's network layer."""
    code = (
        "import pathlib, sys\n"
        "import kafkatxn.kafka.wire\n"
        "import kafka.net.manager\n"
        "from kafka.protocol import broker_version_data\n"
        "root = pathlib.Path(broker_version_data.__file__).parent.parent\n"
        "readers = sorted(str(f.relative_to(root)) for f in root.rglob('*.py') if 'VERSION_CHECKS' in f.read_text())\n"
        "assert readers == ['protocol/broker_version_data.py'], readers\n"
        "assert not {'kafka.protocol.admin.groups', 'kafka.protocol.consumer.group'} & set(sys.modules)\n"
        "checks = broker_version_data.VERSION_CHECKS\n"
        "from kafka.protocol.admin.groups import ListGroupsRequest\n"
        "from kafka.protocol.consumer.group import OffsetFetchRequest\n"
        "from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest\n"
        "real = (((0, 9), ListGroupsRequest[0]()), ((0, 8, 2), FindCoordinatorRequest[0]('kafka-python-default-group')),\n"
        "        ((0, 8, 1), OffsetFetchRequest[0]('kafka-python-default-group', [])), ((0, 8, 0), MetadataRequest[0]([])))\n"
        "assert [v for v, _ in checks] == [v for v, _ in real]\n"
        "assert [r.encode() for _, r in checks] == [r.encode() for _, r in real]\n"
        "assert [repr(r) for _, r in checks] == [repr(r) for _, r in real]\n"
        "assert [(r.API_KEY, r.API_VERSION) for _, r in checks] == [(r.API_KEY, r.API_VERSION) for _, r in real]\n"
        "from kafka.protocol.admin import ListGroupsRequest as served\n"
        "assert served is ListGroupsRequest\n"
        "print(len(checks))\n"
    )
    assert python_prints(code) == ["4"]


def test_the_metrics_and_sasl_modules_run_when_first_called_or_read_by_another_module():
    """kafka.net.metrics and kafka.protocol.sasl are registered unexecuted (client_package.DEFERRED_MODULES):
    kafka-python's connection and manager, which only call their names (metrics the wire never asks for,
    the SASL login's requests), are served stand-ins whose first call runs the module and answers as the
    real class; any other read (a module beside kafkatxn, kafka.net's own __init__) gets the real names."""
    code = (
        "import sys\n"
        "import kafkatxn.kafka.wire\n"
        "import kafka.net.manager, kafka.net.selector\n"
        "import kafka.net.connection as connection, kafka.net.manager as manager\n"
        "from kafkatxn.kafka.wire.client_package import DEFERRED_MODULES\n"
        "unrun = [m for m in DEFERRED_MODULES if '__getattr__' in sys.modules[m].__dict__]\n"
        "assert unrun == list(DEFERRED_MODULES), unrun\n"
        "assert 'kafka.metrics.stats.avg' not in sys.modules\n"
        "request = connection.SaslHandshakeRequest(mechanism='PLAIN', max_version=1)\n"
        "assert '__getattr__' not in sys.modules['kafka.protocol.sasl'].__dict__, 'the first call runs the module'\n"
        "from kafka.protocol.sasl import SaslAuthenticateRequest, SaslBytesRequest, SaslHandshakeRequest\n"
        "assert type(request) is SaslHandshakeRequest and request.encode(version=1) == SaslHandshakeRequest(mechanism='PLAIN', max_version=1).encode(version=1)\n"
        "assert type(connection.SaslAuthenticateRequest(b't')) is SaslAuthenticateRequest\n"
        "assert type(connection.SaslBytesRequest(b't')) is SaslBytesRequest\n"
        "from kafka.net import KafkaConnectionMetrics, KafkaManagerMetrics\n"
        "assert isinstance(KafkaConnectionMetrics, type) and isinstance(KafkaManagerMetrics, type)\n"
        "assert '__getattr__' not in sys.modules['kafka.net.metrics'].__dict__\n"
        "from kafka.metrics import Metrics\n"
        "sensors = manager.KafkaManagerMetrics(Metrics(), 'kafkatxn', {})\n"
        "assert type(sensors) is KafkaManagerMetrics\n"
        "assert not hasattr(sys.modules['kafka.protocol.sasl'], '__path__')\n"
        "print(len(unrun))\n"
    )
    assert python_prints(code) == ["2"]


def python_prints(code: str) -> list[str]:
    """What a fresh interpreter running ``code`` prints, split into words (it must exit 0)."""
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_the_sasl_package_runs_its_init_at_the_first_sasl_login_and_serves_every_mechanism_then():
    """kafka.net.sasl's __init__ (every mechanism: GSSAPI's, AWS MSK's with hashlib and hmac) is
    deferred: kafka-python's connection imports get_sasl_mechanism at once and calls it only in its
    SASL login, so it is served a stand-in (client_package.CALLED_LATER) whose first call runs the
    __init__; then it answers as the real one does, mechanism by mechanism, and the package serves
    its own names (register_sasl_mechanism, SASL_MECHANISMS)."""
    code = (
        "import inspect, sys\n"
        "import kafkatxn.kafka.wire\n"
        "import kafka.net.manager, kafka.net.selector, kafka.net.sasl.oauth\n"
        "import kafka.net.connection as connection\n"
        "loaded = {'kafka.net.sasl.gssapi', 'kafka.net.sasl.msk', 'kafka.net.sasl.scram', 'hashlib', 'hmac'} & set(sys.modules)\n"
        "assert not loaded, sorted(loaded)\n"
        "login = inspect.getsource(connection.KafkaConnection._sasl_authenticate)\n"
        "assert \"get_sasl_mechanism(self.config['sasl_mechanism'])\" in login\n"
        "assert inspect.getsource(connection).count('get_sasl_mechanism') == 2, 'called elsewhere than the login'\n"
        "names = ['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512', 'GSSAPI', 'OAUTHBEARER', 'AWS_MSK_IAM']\n"
        "got = [connection.get_sasl_mechanism(name) for name in names]\n"
        "import kafka.net.sasl as sasl\n"
        "assert got == [sasl.SASL_MECHANISMS[name] for name in names] == [sasl.get_sasl_mechanism(name) for name in names]\n"
        "sasl.register_sasl_mechanism('X-TEST', object)\n"
        "assert connection.get_sasl_mechanism('X-TEST') is object\n"
        "print(' '.join(m.__name__ for m in got))\n"
    )
    assert python_prints(code) == ["SaslMechanismPlain", "SaslMechanismScram", "SaslMechanismScram", "SaslMechanismGSSAPI",
                                   "SaslMechanismOAuth", "SaslMechanismAwsMskIam"]


def test_every_schema_kafka_python_ships_reads_as_its_load_json_reads_it():
    """The wire has kafka-python build its classes from schemas read by schema_json (its comment
    regex's two passes over every text were ~3 % of lso): every schema kafka-python ships reads as
    the same dictionary (its licence and doc comments, and its common structs resolved, included), and
    a schema of another package, or one that is not there, is kafka-python's own load_json's."""
    from kafka.protocol import api_data

    from kafkatxn.kafka.wire import schema_json

    kafka_load_json = sys.modules["kafka.protocol.schemas.load_json"].load_json
    assert api_data.load_json.__module__ == schema_json.__name__, "the wire's import did not install the reader"
    resources = Path(schema_json._resources())
    names = sorted(path.stem for path in resources.glob("*.json"))
    assert len(names) > 100 and "ListOffsetsRequest" in names
    read = [(name, api_data.load_json(name)) for name in names]
    assert [(name, kafka_load_json(name)) for name in names] == read
    assert sum("commonStructs" in data for _, data in read) and all("license" in data for _, data in read)
    for name, package in (("NoSuchRequest", None), ("ListOffsetsRequest", "kafka.protocol.schemas.resources")):
        try:
            expected: Any = kafka_load_json(name, package)
        except Exception as exc:  # noqa: BLE001 - the same exception, whatever it is
            expected = type(exc)
        try:
            got: Any = api_data.load_json(name, package)
        except Exception as exc:  # noqa: BLE001
            got = type(exc)
        assert got == expected, name


def test_a_kafka_python_that_reads_its_schemas_otherwise_keeps_its_own_reading(monkeypatch):
    """Without the names schema_json stands on (a release that moved them), the wire's import leaves
    kafka-python's reading as it is: the classes are built as kafka-python builds them."""
    from kafka.protocol import api_data

    from kafkatxn.kafka.wire import schema_json

    kafka_load_json = sys.modules["kafka.protocol.schemas.load_json"].load_json
    monkeypatch.setattr(api_data, "load_json", kafka_load_json)
    monkeypatch.delattr(sys.modules["kafka.protocol.schemas.load_json"], "_resolve_common_structs")
    schema_json.read_schemas_faster()
    assert api_data.load_json is kafka_load_json
    monkeypatch.undo()
    assert api_data.load_json.__module__ == schema_json.__name__


def test_every_field_of_every_schema_is_named_as_kafka_pythons_regex_names_it_once_per_name():
    """BaseField.underscore_name, installed by the wire's import (schema_json.once_per_name), gives
    kafka-python's own name for every field name of every schema it ships, working each out once."""
    import json
    import pathlib

    from kafka.protocol.schemas.fields.base import BaseField

    from kafkatxn.kafka.wire import schema_json

    named = BaseField.__dict__["underscore_name"].__func__
    assert named.__module__ == schema_json.__name__
    kafkas = named.__wrapped__

    def field_names(fields: list) -> list[str]:
        return [n for f in fields for n in [f["name"], *field_names(f.get("fields", []))]]

    resources = pathlib.Path(schema_json._resources())
    names = set()
    for path in resources.glob("*.json"):
        data = json.loads("".join(line for line in path.read_text(encoding="utf-8").splitlines(True)
                                          if not line.lstrip().startswith("//")))
        names.update(field_names(data.get("fields", [])))
        names.update(n for struct in data.get("commonStructs", []) for n in [struct["name"], *field_names(struct["fields"])])
    assert len(names) > 200
    for name in sorted(names):
        assert BaseField.underscore_name(name) == kafkas(BaseField, name) == BaseField.underscore_name(name), name
    calls = []
    once = schema_json.once_per_name(lambda cls, name: calls.append(name) or name.lower())
    assert [once(BaseField, n) for n in ("ErrorCode", "Name", "ErrorCode")] == ["errorcode", "name", "errorcode"]
    assert calls == ["ErrorCode", "Name"]


def test_the_comment_blocks_are_the_regexs():
    """schema_json.comment_spans finds what kafka-python's comment regex finds, on texts made of the
    pieces that decide it: white space of every kind (a line start's \\s* crosses newlines), '//' at
    and after a line's start, other text, lines without a newline at the end."""
    import random
    import re

    from kafkatxn.kafka.wire.schema_json import comment_spans

    regex = re.compile(r"(?m)((?:^\s*//.*\n?)+)")
    pieces = [" ", "\t", "\n", "\r", "\x0b", "\x85", "\u2028", "\x1c", "/", "//", "// c\n", "\n\n", "a", '"', "{"]
    rnd = random.Random(38)
    texts = ["", "//", "// a", "\n// a\n\n  // b\n}\n", "{\n  // a\n  \"b\": 1 // c\n}", "x//\n//"]
    texts += ["".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 30))) for _ in range(20_000)]
    for text in texts:
        assert comment_spans(text) == [m.span() for m in regex.finditer(text)], repr(text)


def offset_fetch_answer(kind: str, throttle_ms: int = 0):
    """kafka-python's batched OffsetFetchResponse: groups of every shape the reader meets."""
    from kafka.protocol.consumer import OffsetFetchResponse as R

    G = R.OffsetFetchResponseGroup
    T = G.OffsetFetchResponseTopics
    P = T.OffsetFetchResponsePartitions

    def part(i: int, offset: int, metadata: str | None = "", error: int = 0):
        return P(partition_index=i, committed_offset=offset, committed_leader_epoch=-1 if i % 2 else 4, metadata=metadata, error_code=error)

    groups = []
    for g in range(5):
        topics = []
        for t in range(3):
            rows = []
            for i in range(150 if kind == "wide" else 20):  # wide: a partition count over a one-byte varint's
                offset = g * 100 + t * 10 + i
                metadata: str | None = {"plain": "", "null": None, "same": "m" * 7, "mixed": ("x" * (i % 3)) if i % 4 else None,
                                        "long": "y" * 300, "wide": ""}[kind]
                error = 0
                if kind == "mixed" and i == 5:
                    offset, error = -1, 88  # UNSTABLE_OFFSET_COMMIT on one partition
                if kind == "mixed" and i == 6:
                    offset = -1  # no commit
                if kind == "mixed" and i == 7 and t == 1:
                    error = 3
                rows.append(part(i, offset, metadata, error))
            topics.append(T(name=f"t{t}" if t != 2 else "z" * 200, partitions=rows))
        topics.append(T(name="no-partitions", partitions=[]))
        groups.append(G(group_id=f"group-{g}" if g != 3 else "g" * 150, error_code=0, topics=topics))
    groups.append(G(group_id="refused", error_code=30, topics=[]))
    groups.append(G(group_id="empty", error_code=0, topics=[]))
    return R(throttle_time_ms=throttle_ms, groups=groups)


@pytest.mark.parametrize("kind", ["plain", "null", "same", "mixed", "long", "wide"])
def test_an_offset_fetch_answer_read_from_its_bytes_is_what_the_decoder_makes_of_kafka_pythons(kind, monkeypatch):
    """Read twice: the second time each group is the one kept by its bytes (group_answers.MEMO), where it was kept."""
    from kafka.protocol.consumer import OffsetFetchResponse as R

    from kafkatxn.kafka.wire import group_answers
    from kafkatxn.kafka.wire.answer_memo import BlockMemo
    from kafkatxn.kafka.wire.groups_codec import _decode_offset_fetch

    monkeypatch.setattr(group_answers, "MEMO", BlockMemo(group_answers.MEMO.limit))
    answer = offset_fetch_answer(kind, throttle_ms=11)
    request = p.OffsetFetch(tuple(g.group_id for g in answer.groups))
    for version in range(R.max_version + 1):
        if version < 2 or version > 9:
            continue  # the versions the wire sends: v2-v7 one group (kafka-python's), v8-v9 batched
        if version < group_answers.OFFSET_FETCH_READ_FROM:
            assert group_answers.read_offset_fetch(memoryview(b"\x00" * 8), version) is None
            continue
        raw = bytes(answer.encode(version=version))
        expected = _decode_offset_fetch(request, R.decode(raw, version=version))
        first = group_answers.read_offset_fetch(memoryview(raw), version)
        read = group_answers.read_offset_fetch(memoryview(raw), version)
        for got in (first, read):
            assert got == (expected, 11)
            assert [list(g.offsets.items()) for g in got[0].groups] == [list(g.offsets.items()) for g in expected.groups]  # same order
        # Kept: the groups whose lengths are one byte each (these have a topic name of 200 bytes but the last two).
        assert [a is b for a, b in zip(first[0].groups, read[0].groups)] == [False] * 5 + [True, True]
    if kind == "mixed":
        assert read[0].groups[0].unstable == frozenset(TopicPartition(t, 5) for t in ("t0", "t1", "z" * 200))


def test_an_offset_fetch_group_read_again_from_the_same_bytes_is_the_group_read_before(monkeypatch):
    """Groups whose bytes are those of a group read before are that group (one that committed since is
    read anew); groups whose partitions' metadata differ in length are never kept, and always read right."""
    from kafka.protocol.consumer import OffsetFetchResponse as R

    from kafkatxn.kafka.wire import group_answers
    from kafkatxn.kafka.wire.answer_memo import BlockMemo
    from kafkatxn.kafka.wire.groups_codec import _decode_offset_fetch

    monkeypatch.setattr(group_answers, "MEMO", BlockMemo(1_000))
    G = R.OffsetFetchResponseGroup
    T = G.OffsetFetchResponseTopics
    P = T.OffsetFetchResponsePartitions

    def answer(moved: int) -> bytes:
        groups = [G(group_id=f"g{g}", error_code=0, topics=[
            T(name=f"t{t}", partitions=[P(partition_index=i, committed_offset=100 * g + i + (g == moved), committed_leader_epoch=-1,
                                           metadata="m" * (i % 2 if g == 2 else 1), error_code=0) for i in range(g + 1)])
            for t in range(2)]) for g in range(4)]
        return bytes(R(throttle_time_ms=0, groups=[*groups, G(group_id="gone", error_code=69, topics=[])]).encode(version=9))

    def read(raw: bytes) -> tuple:
        got = group_answers.read_offset_fetch(memoryview(raw), 9)
        names = tuple(g.group_id for g in got[0].groups)
        assert got == (_decode_offset_fetch(p.OffsetFetch(names), R.decode(raw, version=9)), 0)
        return got[0].groups

    first, again, moved = read(answer(-1)), read(answer(-1)), read(answer(1))
    assert [a is b for a, b in zip(first, again)] == [True, True, False, True, True]  # g2: metadata of two lengths
    assert [a is b for a, b in zip(first, moved)] == [True, False, False, True, True]
    assert moved[1].offsets[TopicPartition("t0", 0)] == 101
    # Offsets + 1 each: g0, g1, g2 (kept, never found), g3, gone; g1 moved took its own entry's place (kept by name).
    assert group_answers.MEMO.held == (2 + 1) + (4 + 1) + (6 + 1) + (8 + 1) + (0 + 1)
    # A kept group is handed to every later answer with its bytes: a reader cannot change it for them.
    with pytest.raises(TypeError):
        first[0].offsets[TopicPartition("t0", 0)] = -1  # type: ignore[index]
    assert read(answer(-1))[0].offsets[TopicPartition("t0", 0)] == 0


def test_an_offset_fetch_reads_long_runs_a_partition_at_a_time_and_keeps_few_run_formats(monkeypatch):
    """A run's format holds ~100 bytes per partition: a run longer than _RUN_LONGEST is unpacked a
    partition at a time, and the formats kept hold _RUNS_KEPT_PARTITIONS partitions at most; either
    way the answer is the decoder's."""
    from kafka.protocol.consumer import OffsetFetchResponse as R

    from kafkatxn.kafka.wire import group_answers
    from kafkatxn.kafka.wire.groups_codec import _decode_offset_fetch

    from kafkatxn.kafka.wire.answer_memo import BlockMemo

    monkeypatch.setattr(group_answers, "MEMO", BlockMemo(0))  # every group read
    monkeypatch.setattr(group_answers, "_RUN_LONGEST", 100)
    monkeypatch.setattr(group_answers, "_RUNS_KEPT_PARTITIONS", 30)
    monkeypatch.setattr(group_answers, "_RUNS", {})
    monkeypatch.setattr(group_answers, "_RUNS_PARTITIONS", [0])
    for kind in ("wide", "plain", "same"):  # runs of 150 (long), then of 20 (kept, one format), of 20 with metadata (another)
        answer = offset_fetch_answer(kind)
        raw = bytes(answer.encode(version=9))
        request = p.OffsetFetch(tuple(g.group_id for g in answer.groups))
        assert group_answers.read_offset_fetch(memoryview(raw), 9) == (_decode_offset_fetch(request, R.decode(raw, version=9)), 0)
        assert sum(n for n, _ in group_answers._RUNS) == group_answers._RUNS_PARTITIONS[0] <= 30
    assert list(group_answers._RUNS) == [(20, 7)]  # the plain runs' format let go for the next one's


def test_an_offset_fetch_answer_unstable_for_a_whole_group_or_with_tagged_fields_is_left_to_kafka_python():
    """A group answered UNSTABLE_OFFSET_COMMIT as a whole is unstable on every partition the request
    asked: the decoder, which has the request, names them."""
    from kafka.protocol.consumer import OffsetFetchResponse as R

    from kafkatxn.kafka.wire import group_answers

    answer = offset_fetch_answer("plain")
    raw = bytes(answer.encode(version=8))
    assert group_answers.read_offset_fetch(memoryview(raw), 8) is not None
    G = R.OffsetFetchResponseGroup
    whole = R(throttle_time_ms=0, groups=[*answer.groups, G(group_id="held", error_code=88, topics=[])])
    assert group_answers.read_offset_fetch(memoryview(bytes(whole.encode(version=8))), 8) is None
    tagged = raw[:-1] + b"\x01\x09\x01\x07"  # the answer's own tagged fields: one unknown tag
    assert R.decode(tagged, version=8).groups
    assert group_answers.read_offset_fetch(memoryview(tagged), 8) is None


def test_kafka_pythons_parser_hands_over_an_offset_fetch_answer_read_by_the_wire():
    from kafka.protocol.consumer import OffsetFetchResponse as R

    from kafkatxn.kafka.wire.groups_codec import _decode_offset_fetch

    expected = offset_fetch_answer("mixed", throttle_ms=5)
    request = p.OffsetFetch(tuple(g.group_id for g in expected.groups))
    w = wire.Wire(None)
    sent = w._reused(1, request)  # kept (its body encoded once) and its answers read by the wire
    sent.API_VERSION = 8
    answer = handed_over(sent, bytes(expected.encode(version=8)), flexible=True)
    assert isinstance(answer, wire_client.Read) and answer.throttle_time_ms == 5
    assert w._decode(request, answer) == _decode_offset_fetch(request, R.decode(bytes(expected.encode(version=8)), version=8))
    stable = p.OffsetFetch(("group-0",), stable=((TopicPartition("t0", 5),),))
    sent = w._encode(stable)  # not kept; its answers are read by the wire all the same
    assert sent.header_class is not None


def test_an_offset_fetch_body_is_written_only_for_the_batched_fetch_of_every_committed_offset():
    """A stable fetch names its partitions and one group a request is v2-v7: kafka-python writes those."""
    from kafkatxn.kafka.wire import bodies

    assert bodies.WRITERS[p.OffsetFetch][1] is bodies.offset_fetch_body
    assert bodies.offset_fetch_body(p.OffsetFetch(("ab",)), 8) == b"\x02\x03ab\x00\x00\x00\x00"
    for request, version in ((p.OffsetFetch(("ab",), stable=((TP0,),)), 8), (p.OffsetFetch(("ab",), batched=False), 7),
                             (p.OffsetFetch(("ab",)), 7)):
        with pytest.raises(ValueError):
            bodies.offset_fetch_body(request, version)


def test_an_answers_topic_partitions_are_kept_once_a_process_and_shared(monkeypatch):
    from kafkatxn import model
    from kafkatxn.kafka.wire import names

    monkeypatch.setattr(model, "_kept", {})
    monkeypatch.setattr(model, "_kept_count", 0)
    first = list(names.topic_partitions("kept", [2, 0, 1]))
    assert first == [TopicPartition("kept", 2), TopicPartition("kept", 0), TopicPartition("kept", 1)]
    assert all(type(tp) is TopicPartition for tp in first)
    again = list(names.topic_partitions("kept", [1, 2]))
    assert again[0] is first[2] and again[1] is first[0]  # made once, shared
    assert list(names.topic_partitions("kept", [])) == []
    # Not partition numbers to keep a table of: made as they are, nothing kept.
    assert list(names.topic_partitions("odd", [-1, 0])) == [TopicPartition("odd", -1), TopicPartition("odd", 0)]
    assert list(names.topic_partitions("kept", [-1])) == [TopicPartition("kept", -1)]
    monkeypatch.setattr(model, "KEPT_PARTITIONS_LIMIT", 5)
    assert list(names.topic_partitions("big", [7])) == [TopicPartition("big", 7)] and "big" not in model._kept
    assert list(names.topic_partitions("next", [3])) == [TopicPartition("next", 3)]  # past the limit: emptied first
    assert list(model._kept) == ["next"]
    # The metadata's routing shares them.
    info = model.PartitionInfo("next", 3, 1, (1,), (1,))
    assert model.topic_partitions([info])[0] is model._kept["next"][3]


def list_groups_answer(error_code: int = 0, throttle_ms: int = 0):
    """kafka-python's ListGroupsResponse: groups of every protocol type and state, an empty protocol
    type and state, a group id over 127 bytes (a two-byte length), one of non-ASCII text, and null strings."""
    from kafka.protocol.admin.groups import ListGroupsResponse as R

    G = R.ListedGroup
    groups = [G(group_id=f"group-{i}", protocol_type=("consumer", "connect", "")[i % 3],
                group_state=("Stable", "Empty", "PreparingRebalance", "")[i % 4], group_type=("classic", "consumer")[i % 2])
              for i in range(40)]
    groups += [G(group_id="g" * 200, protocol_type="consumer", group_state="Stable", group_type="classic"),
               G(group_id="gruppe-ä", protocol_type="consumer", group_state="Empty", group_type="consumer"),
               G(group_id="no-state", protocol_type="consumer", group_state=None, group_type=None)]  # null strings
    return R(throttle_time_ms=throttle_ms, error_code=error_code, groups=groups)


@pytest.mark.parametrize("error_code", [0, 14])
def test_a_list_groups_answer_read_from_its_bytes_is_what_the_decoder_makes_of_kafka_pythons(error_code, monkeypatch):
    from kafka.protocol.admin.groups import ListGroupsResponse as R

    from kafkatxn.kafka.wire import group_answers
    from kafkatxn.kafka.wire.answer_memo import BlockMemo
    from kafkatxn.kafka.wire.groups_codec import _decode_list_groups

    monkeypatch.setattr(group_answers, "LISTINGS", BlockMemo(1_000))
    answer = list_groups_answer(error_code, throttle_ms=9)
    read_at = []
    for version in range(R.max_version + 1):
        raw = bytes(answer.encode(version=version))
        read = group_answers.read_list_groups(memoryview(raw), version)
        if version < group_answers.LIST_GROUPS_READ_FROM:
            assert read is None  # not flexible: kafka-python's
            continue
        read_at.append(version)
        assert read == (_decode_list_groups(p.ListGroups(), R.decode(raw, version=version)), 9)
        assert len(read[0].groups) == 43 and read[0].groups[-2].group_id == "gruppe-ä"
        assert group_answers.read_list_groups(memoryview(bytes(raw)), version) is read  # the same bytes again: kept
    assert read_at == [3, 4, 5]
    changed = bytes(list_groups_answer(error_code, throttle_ms=10).encode(version=5))  # another throttle time
    assert group_answers.read_list_groups(memoryview(changed), 5)[1] == 10


def test_a_list_groups_answer_with_tagged_fields_is_left_to_kafka_python():
    from kafka.protocol.admin.groups import ListGroupsResponse as R

    from kafkatxn.kafka.wire import group_answers

    raw = bytes(list_groups_answer().encode(version=5))
    assert group_answers.read_list_groups(memoryview(raw), 5) is not None
    tagged = raw[:-1] + b"\x01\x09\x01\x07"  # the answer's own tagged fields: one unknown tag
    assert R.decode(tagged, version=5).groups
    assert group_answers.read_list_groups(memoryview(tagged), 5) is None


def test_kafka_pythons_parser_hands_over_a_list_groups_answer_read_by_the_wire():
    from kafka.protocol.admin.groups import ListGroupsResponse as R

    from kafkatxn.kafka.wire.groups_codec import _decode_list_groups

    expected = list_groups_answer(throttle_ms=4)
    w = wire.Wire(None)
    sent = w._encode(p.ListGroups())  # built per send; its answers read by the wire
    sent.API_VERSION = 5
    answer = handed_over(sent, bytes(expected.encode(version=5)), flexible=True)
    assert isinstance(answer, wire_client.Read) and answer.throttle_time_ms == 4
    assert w._decode(p.ListGroups(), answer) == _decode_list_groups(p.ListGroups(), R.decode(bytes(expected.encode(version=5)), version=5))


def test_a_connection_begun_ahead_that_is_refused_leaves_no_backoff_for_the_rounds_own_send():
    """wire.brokers.open_connections: a broker whose connection, begun ahead, is refused is left as if never
    begun (kafka-python's reconnect backoff would otherwise fail the round's send at once with
    NodeNotReadyError instead of connecting again). A real refused port: nothing listens on it."""
    import socket
    import time

    from kafka.net.selector import NetworkSelector

    from kafkatxn.kafka.wire import brokers
    from kafkatxn.kafka.wire.receiving import Manager

    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens on it now
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    net = NetworkSelector()
    # A backoff far longer than the test: one left behind would still hold when it looks.
    manager = Manager(net, bootstrap_servers=f"127.0.0.1:{port}", reconnect_backoff_ms=10_000)
    net.start()
    try:
        w = wire.Wire(manager, net)
        wire_client._know_brokers(manager, [BrokerInfo(5, "127.0.0.1", port, None)])

        async def begin() -> None:
            brokers.open_connections(manager, [5])

        manager.run(begin)
        deadline = time.monotonic() + 5
        while 5 in manager._conns and time.monotonic() < deadline:  # refused: the manager forgets it
            time.sleep(0.01)
        time.sleep(0.2)  # the awaiting step runs after kafka-python's own update_backoff
        assert 5 not in manager._conns
        assert manager.connection_delay(5) == 0  # kafka-python set one (~10 s here); it was cleared
    finally:
        w.close()
