"""The wire's client: bootstrap on one kept connection, and sending typed requests many at once.

Requests go through kafka-python's connection manager (``kafka.net.manager.KafkaConnectionManager``
on its own ``NetworkSelector`` IO thread): the one way to have many requests to many brokers in
flight at once. This module is the only one that touches kafka-python's objects beyond its protocol
classes; each private name it uses says in a comment why no public one does the job, and
``tests/unit/test_wire_contract.py`` scans this package and exercises every one of them.
"""

from __future__ import annotations

import functools
import logging
import time
from collections import defaultdict
from typing import Any, Callable, NamedTuple, Sequence

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka.unreachable import (
    FAIL_FAST_S, NoBrokersAvailable, listener_answers_in_tls, nothing_listens,
)
from kafkatxn.kafka.wire.bodies import READERS, WRITERS
from kafkatxn.kafka.wire.brokers import _answered_by, _know_brokers, _metadata_of, begin_the_others
from kafkatxn.kafka.wire.codecs import DECODERS, ENCODERS
from kafkatxn.kafka.wire.metadata_codec import _api_versions_response
from kafkatxn.kafka.wire.reading import (
    Read, _encoding_body_once, _negotiate_again, _reading_answers, _walking_small, _write_body_ahead,
)
from kafkatxn.kafka.wire.refusal import is_refusal
from kafkatxn.model import BrokerInfo

log = logging.getLogger("kafkatxn.wire")

Request = Any  # one of the request types of kafkatxn.kafka.protocol

# Bootstrap logins the broker closes before they complete, in a row, taken for a refused login.
LOGINS_CUT_SHORT = 3
# A TLS alert record's first four bytes (0x15 0x03 0x03 0x00), as a plaintext client reads them: a frame size.
TLS_ALERT_AS_FRAME_LENGTH = 0x15030300


# The per-leader requests over thousands of partitions are costly to build as kafka-python objects
# and as costly again to encode (ListOffsets: a struct with tagged fields per partition). The
# exporter sends the same ones every scrape, so the Wire keeps the last few it built, each encoding
# its body once per version (:func:`_encoding_body_once`); kafka-python sets only the header and
# version on a request as it sends it. A batched OffsetFetch (all of a coordinator's groups, v8+)
# too. One per group (older brokers) is not kept: thousands of them would push the others out.
# ListOffsets is not built as a kafka-python object at all: its body is written by :mod:`.bodies`
# (the same bytes), which a one-shot command needs as much as a scrape.
REUSED_REQUESTS = (p.ListOffsets, p.DescribeProducers, p.OffsetFetch)
# 2 ListOffsets, 1-2 DescribeProducers and an OffsetFetch per broker of a few brokers
REUSED_LIMIT = 24
# Requests whose body the wire writes (.bodies' WRITERS) but which are built per send, not kept: a
# Fetch names its partitions' positions, which move (kafka-python's object per partition, and the
# encoder it compiles the first time, are what writing it saves); a Metadata is a few bytes (the
# encoder kafka-python would compile for them is what writing it saves).
WRITTEN_PER_SEND = (p.Fetch, p.Metadata)


# The largest response frame taken: kafka-python's admin client's default (the connection manager's
# own, 1 MB, is less than a big cluster's Metadata or a Fetch of the transaction log).
RECEIVE_MESSAGE_MAX_BYTES = 100_000_000


def _written_per_send(request: Request) -> Any:
    """A request of :data:`WRITTEN_PER_SEND` as kafka-python's: its body written (.bodies' WRITERS), its
    answers read where the wire reads them; its class, body and writer its own, none kept."""
    shell, body = WRITERS[type(request)]
    return _encoding_body_once(shell(request), {}, {}, {}, functools.partial(body, request), READERS.get(type(request)))


def _reuse_key(node_id: int | None, request: Request) -> tuple:
    """What a kept request is found by (:meth:`Wire._reused`): the node, and the typed request with each
    tuple of its (10,000 partitions a ListOffsets) as its length and ends. Hashing the request itself
    hashed every partition twice a send (~40M instructions of the IO thread an `lso` at 30,000
    partitions); the request found is then compared whole, which stops at each kept TopicPartition's
    identity."""
    return (node_id, type(request), *((len(v), v[:1], v[-1:]) if type(v) is tuple else v for v in request))


def _mark_bootstrapped(manager: Any) -> None:
    """The manager told its bootstrap is done (:meth:`Wire.begin_bootstrap` does it on its own connection).
    Private ``_bootstrap_future``: kafka-python has no public way to say so, and a manager that thinks
    itself unbootstrapped runs its own bootstrap (a new connection, a Metadata, a close) in the
    background when its metadata refresh first starts (at the first lost connection)."""
    from kafka.future import Future

    manager._bootstrap_future = Future().success(True)


def _open_connection(manager: Any, node_id: int) -> Any:
    """The open connection to ``node_id``, or None (from kafka-python's list of open ones)."""
    return next((c for c in manager.least_used_connections() if c.node_id == node_id), None)


def _keep_as(manager: Any, conn: Any, bootstrap_id: str, node_id: int) -> None:
    """The bootstrap connection kept as broker ``node_id``'s (no second connection, login and
    ApiVersions to the broker that answered the bootstrap). Private ``_conns``: kafka-python keys a
    connection by the id it was opened for and has no public way to give it another; it is a dict
    by node id, which ``get_connection`` reads before opening one."""
    manager._conns.pop(bootstrap_id, None)
    conn.node_id = node_id
    manager._conns[node_id] = conn

    def forget(_: Any) -> None:
        if manager._conns.get(node_id) is conn:
            manager._conns.pop(node_id, None)

    conn.close_future.add_both(forget)


class Begun(NamedTuple):
    """A round begun on the IO thread (:meth:`Wire.begin_send_all`): whether its answers are all in,
    and its end, which waits for them and returns them as :meth:`Wire.send_all` does."""

    done: Callable[[], bool]
    end: Callable[[], list[Any]]


class Wire:
    """kafka-python's connection manager for one command run: send typed requests, many at once."""

    def __init__(self, manager: Any, net: Any = None):
        self._manager = manager
        self._net = net  # the manager's IO loop (kafka.net.selector.NetworkSelector), stopped by close()
        self._built: dict[tuple, Any] = {}  # by _reuse_key, least recently used first
        self._requests: dict[int, Request] = {}  # id of a kept request -> the typed request it was built for
        self._bodies: dict[int, dict[int, bytes]] = {}  # id of a kept request -> its body per version
        self._writers: dict[int, Callable[[int], bytes]] = {}  # id of a kept request -> its body's writer (.bodies)
        self._encoding_once: dict[type, type] = {}

    @classmethod
    def begin_bootstrap(
        cls, settings: dict, budget_ms: int, request_timeout_ms: int, every_broker: bool = False
    ) -> tuple["Wire", Callable[[], tuple["Wire", p.MetadataResponse, int | None]]]:
        """Bootstrap in one connection that stays open, on the IO thread; the caller goes on meanwhile.
        Returned: the wire (closed to give up), and its end, which waits for it and returns the
        wire, the cluster's metadata and the id of the broker that answered (None when the address
        is none of the advertised ones). ``every_broker``: as the metadata is read, the connections to
        the other brokers it names are begun too (:func:`.brokers.begin_the_others`), for a command that will
        ask every broker.

        kafka-python's own bootstrap connects (ApiVersions), asks Metadata, closes, and connects again
        for the first real request; it retries a refused login or TLS handshake until its timeout.
        Here one connection (ApiVersions, SASL, one Metadata) is kept as that broker's connection; a
        refused login or handshake is raised at once (:func:`is_refusal`); a server that does not
        answer gets its share of ``budget_ms`` and the next one is tried."""
        import kafka.errors as Errors
        from kafka.net.sasl.oauth import AbstractTokenProvider
        from kafka.net.selector import NetworkSelector

        from kafkatxn.kafka.wire.receiving import Manager, QuietSelector, walk_api_versions

        walk_api_versions()  # every connection's first request: no encoder compiled for it on the IO thread
        kw = {"receive_message_max_bytes": RECEIVE_MESSAGE_MAX_BYTES, **settings}
        provider = kw.get("sasl_oauth_token_provider")  # OAUTHBEARER: kafkatxn.config.sasl_oauth's, as kafka-python's type
        if provider is not None:  # a token now: a refused client or unreachable endpoint ends the command at once
            AbstractTokenProvider.register(type(provider))
            provider.token()
        kw["request_timeout_ms"] = max(min(request_timeout_ms, budget_ms), 1)
        net = NetworkSelector(**{**kw, "selector": QuietSelector})  # fewer system calls on the IO thread (.receiving)
        manager = Manager(net, **kw)
        _mark_bootstrapped(manager)  # done below, on our own connection
        net.start()
        deadline = time.monotonic() + max(budget_ms, 1) / 1000

        async def first_answer() -> tuple[Any, Any, Any]:
            servers = manager.cluster.bootstrap_brokers()
            last: BaseException | None = None
            reasons: dict[str, BaseException] = {}
            refused_since: float | None = None  # every address refused or did not resolve since then
            attempt = 0
            logins_cut = 0
            sasl = str(manager.config["security_protocol"]).upper().startswith("SASL")
            tls = str(manager.config["security_protocol"]).upper().endswith("SSL")
            probed: set = set()  # servers whose listener was checked for TLS by a socket of our own
            while time.monotonic() < deadline:
                server = servers[attempt % len(servers)]
                attempt += 1
                left = deadline - time.monotonic()
                # Several servers share the budget, so one that accepts and never answers cannot take it all.
                share_ms = max(int(left * 1000 / (1 if len(servers) == 1 else 2)), 1)
                manager.reset_backoff(server.node_id)
                conn = manager.get_connection(
                    server.node_id, timeout_ms=share_ms, refresh_metadata_on_err=False, reset_backoff_on_connect=False
                )
                try:
                    # Asked before the connection is up: kafka-python holds it and sends it as the connection's
                    # login ends (ApiVersions, SASL), in the step that reads the last answer (``send_buffered``),
                    # not a step of the IO loop later; its body is written then, at the version negotiated.
                    asked = _written_per_send(p.Metadata())  # its body written (.metadata_codec), its answer read (.bodies)
                    metadata_answer = conn.send_request(asked)
                    await manager.wait_for(conn.init_future, share_ms)
                    response = await manager.wait_for(metadata_answer, max(int((deadline - time.monotonic()) * 1000), 1))
                except Exception as exc:  # noqa: BLE001 - a refusal is final, anything else: the next server
                    during_login = sasl and conn.broker_version_data is not None and not conn.connected
                    conn.close(exc)  # at once, given an error: the manager forgets it (get_connection's pop_on_close)
                    if is_refusal(exc):
                        raise
                    if not tls and server.node_id not in probed and "Timeout" not in type(exc).__name__:
                        # Cut off before any answer: a TLS listener's alert may have been read with the close.
                        probed.add(server.node_id)
                        if listener_answers_in_tls(server.host, server.port, min(1.0, deadline - time.monotonic())):
                            raise Errors.KafkaConnectionError(
                                f"invalid frame length {TLS_ALERT_AS_FRAME_LENGTH} (a TLS alert record)") from exc
                    # A broker closes the connection after refusing a login, and kafka-python drops the
                    # refusal when it arrives in the same read as the close ("socket disconnected").
                    # A login cut short again and again is taken for what it almost always is.
                    logins_cut = logins_cut + 1 if during_login and "Timeout" not in type(exc).__name__ else 0
                    if logins_cut >= LOGINS_CUT_SHORT:
                        raise Errors.SaslAuthenticationFailedError(
                            f"the broker closed the connection during SASL {manager.config['sasl_mechanism']} "
                            f"authentication {logins_cut} times in a row (refused credentials?)"
                        ) from exc
                    last = exc
                    reasons[f"{server.host}:{server.port}"] = exc
                    log.debug("bootstrap from %s:%s failed (%s)", server.host, server.port, exc)
                    if len(reasons) == len(servers) and all(nothing_listens(e) for e in reasons.values()):
                        refused_since = refused_since if refused_since is not None else time.monotonic()
                        if time.monotonic() - refused_since >= FAIL_FAST_S:
                            raise NoBrokersAvailable(list(reasons), exc, reasons, nothing_listens=True)
                    else:
                        refused_since = None
                    if attempt % len(servers) == 0:
                        await net.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
                    continue
                if every_broker:
                    try:
                        begin_the_others(manager, server, conn, response)
                    except Exception:  # noqa: BLE001 - a head start only: the rounds connect as they always did
                        log.debug("beginning the other brokers' connections failed", exc_info=True)
                return server, conn, response
            raise NoBrokersAvailable([f"{s.host}:{s.port}" for s in servers], last, reasons)

        wire = cls(manager, net)
        try:
            started = manager.call_soon(first_answer)  # thread-safe: the IO thread runs it from now
        except BaseException:
            wire.close()
            raise

        async def answered() -> tuple[Any, Any, Any]:
            return await started

        def end() -> tuple["Wire", p.MetadataResponse, int | None]:
            try:
                server, conn, response = manager.run(answered)
            except BaseException:
                wire.close()
                raise
            return wire.kept_bootstrap(server, conn, response)

        return wire, end

    def kept_bootstrap(self, server: Any, conn: Any, response: Any) -> tuple["Wire", p.MetadataResponse, int | None]:
        """The bootstrap's answer read; its connection kept as the broker's that answered."""
        manager = self._manager
        md = _metadata_of(response)
        _know_brokers(manager, md.brokers)
        # The connection is the bootstrap server's; if that address is a broker's advertised one,
        # it becomes that broker's connection (no second connection, no second ApiVersions).
        answered = _answered_by(server, conn, md)
        if answered is not None and _open_connection(manager, answered) is None:
            _keep_as(manager, conn, server.node_id, answered)
        else:
            conn.close()
        return self, md, answered

    def close(self) -> None:
        """Close the connections on the IO thread that owns them, then stop it: closed from the
        calling thread while the IO thread still reads them, a TLS socket could be shut and freed on
        one thread while the other reads it (the exporter closes from its main thread at SIGTERM)."""
        self._built.clear()
        self._requests.clear()
        self._bodies.clear()
        self._writers.clear()
        manager = self._manager

        async def close_connections() -> None:
            manager.close()

        try:
            if not manager.closed:
                manager.run(close_connections)
        except Exception:  # noqa: BLE001 - a stopped or crashed loop: the closes below still run
            log.debug("closing the connections on the IO thread failed", exc_info=True)
        manager.close()
        if self._net is not None:
            self._net.close()

    def learn_brokers(self, brokers: Sequence[BrokerInfo]) -> None:
        """Brokers of fresh metadata become connectable (one fenced at bootstrap may lead again now)."""
        known = {b.node_id: BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in self._manager.cluster.brokers()}
        new = [b for b in brokers if b.id not in known]
        if new:
            _know_brokers(self._manager, [*known.values(), *new])

    def max_version(self, api_name: str) -> int:
        """The highest version of ``api_name`` the bootstrap broker supports, -1 if none."""
        from kafka.protocol.api_key import ApiKey

        data = self._manager.broker_version_data
        versions = data.api_versions.get(ApiKey[api_name].value) if data is not None else None
        return versions[1] if versions else -1

    def known_api_versions(self, node_id: int) -> p.ApiVersionsResponse | None:
        """The API versions broker ``node_id`` gave when its open connection was made, or None."""
        data = getattr(_open_connection(self._manager, node_id), "broker_version_data", None)
        if data is None or not data.api_versions:
            return None
        return _api_versions_response(data.api_versions)

    def finalized_features(self) -> dict[str, int]:
        """The cluster's finalized feature levels, from ApiVersions v3+ to any broker (as kafka-python's
        ``KafkaAdminClient.describe_features`` reads them)."""
        import kafka.errors as Errors

        timeout_ms = int(self._manager.config["request_timeout_ms"])
        (response,) = self.send_all([(None, self._encode(p.ApiVersions()))], time.monotonic() + timeout_ms / 1000)
        if isinstance(response, BaseException):
            raise response
        if response.error_code:
            raise Errors.for_code(response.error_code)(f"ApiVersionsRequest failed: {response}")
        return {f.name: f.max_version_level for f in response.finalized_features or ()}

    def send_all(
        self, requests: Sequence[tuple[int | None, Request]], deadline: float, count: Callable[[str], None] = lambda name: None
    ) -> list[Any]:
        """Send every request at once; return each typed response, or the exception it failed with.

        N brokers cost one round trip; one that does not answer costs at most the time left before
        ``deadline`` (monotonic). ``None`` as node means any broker."""
        return self._manager.run(self._round(requests, deadline, count))

    def begin_send_all(
        self, requests: Sequence[tuple[int | None, Request]], deadline: float, count: Callable[[str], None] = lambda name: None
    ) -> Begun:
        """:meth:`send_all` begun on the IO thread; the caller goes on meanwhile (:class:`Begun`)."""
        manager = self._manager
        started = manager.call_soon(self._round(requests, deadline, count))  # thread-safe: the IO thread runs it from now

        async def answered() -> list[Any]:
            return await started

        return Begun(lambda: started.is_done, lambda: manager.run(answered))

    def _round(
        self, requests: Sequence[tuple[int | None, Request]], deadline: float, count: Callable[[str], None]
    ) -> Callable[[], Any]:
        """The IO thread's part of :meth:`send_all`: every request sent, each connection keeping up to
        kafka-python's most in flight and sending its next as one of its own answers lands (.windows),
        each answer decoded as it lands."""
        from kafkatxn.kafka.wire.windows import send_in_windows  # on the main thread, with the first round, not before the bootstrap

        manager = self._manager
        window = max(int(manager.config.get("max_in_flight_requests_per_connection", 5)), 1)
        by_node: dict[int | None, list[int]] = defaultdict(list)
        for i, (node_id, _request) in enumerate(requests):
            by_node[node_id].append(i)

        async def run() -> list[Any]:
            from kafka.future import Future

            results: list[Any] = [None] * len(requests)
            # Brokers not connected yet first: their connections (connect, ApiVersions) begin before the
            # connected brokers' bodies are written, and theirs are written while they connect.
            connected = {c.node_id for c in manager.least_used_connections()}
            lanes = {node_id: by_node[node_id] for node_id in sorted(by_node, key=lambda node_id: node_id in connected)}
            ahead: list[Any] | None = []  # to brokers not connected yet, in their first window

            def send(node_id: int | None, i: int) -> Any:
                request = requests[i][1]
                count(p.REQUEST_NAMES.get(type(request), type(request).__name__.removesuffix("Request")))
                left_ms = max(int((deadline - time.monotonic()) * 1000), 1)
                wire_request = self._reused(node_id, request)
                try:  # a send can fail at once (a broker that left the metadata): that is this request's answer
                    fut = manager.send(wire_request, node_id=node_id, request_timeout_ms=left_ms)
                except Exception as exc:  # noqa: BLE001
                    results[i] = exc
                    return None
                if ahead is not None and node_id not in connected:
                    ahead.append(wire_request)
                return fut

            def first_sent() -> None:
                nonlocal ahead
                if ahead:  # after the connections' first steps, which are queued before it
                    manager.call_soon(self._write_ahead, ahead)
                ahead = None

            def land(i: int, value: Any, error: BaseException | None) -> None:
                try:
                    results[i] = error if error is not None else self._decode(requests[i][1], value)
                except Exception as exc:  # noqa: BLE001 - returned to the caller per request
                    results[i] = exc

            await send_in_windows(manager, lanes, window, deadline, send, land, first_sent, Future)
            return results

        return run

    # -- encoding ---------------------------------------------------------------------------------

    # A kafka-python request object (not one of ours) goes out as it is and its response comes back
    # undecoded: the test tools use this to make hanging transactions with raw InitProducerId/Produce.
    def _encode(self, request: Request) -> Any:
        encode = ENCODERS.get(type(request))
        if encode is None:
            return request
        built = encode(self, request)
        read = READERS.get(type(request))
        # A kept request's class is made by _encoding_body_once, which reads its answers too.
        if read is None:
            return _walking_small(built)
        return built if type(request) in WRITERS else _reading_answers(built, read)

    def _reused(self, node_id: int | None, request: Request) -> Any:
        """The kafka-python request for ``request`` to ``node_id``: built again only when not among
        the last :data:`REUSED_LIMIT` of the reused kinds sent."""
        if type(request) in WRITTEN_PER_SEND:
            return _written_per_send(request)
        # A stable OffsetFetch names the few groups held by a transaction now: not kept.
        if type(request) not in REUSED_REQUESTS or not getattr(request, "batched", True) or getattr(request, "stable", ()):
            return self._encode(request)
        key = _reuse_key(node_id, request)
        built = self._built.pop(key, None)
        if built is not None and self._requests.get(id(built)) != request:  # another request with the same key
            self._forget(built)
            built = None
        if built is None:
            written = WRITERS.get(type(request))
            if written is None:
                built = _encoding_body_once(self._encode(request), self._bodies, self._encoding_once, self._writers)
            else:  # no protocol object per partition: the body is written from the request (.bodies)
                shell, body = written
                built = _encoding_body_once(shell(request), self._bodies, self._encoding_once, self._writers,
                                            functools.partial(body, request), READERS.get(type(request)))
            self._requests[id(built)] = request
        else:
            _negotiate_again(built)
        self._built[key] = built
        while len(self._built) > REUSED_LIMIT:
            self._forget(self._built.pop(next(iter(self._built))))
        return built

    def _write_ahead(self, built: Sequence[Any]) -> None:
        """The bodies of kept requests to brokers still connecting, written at the version the
        bootstrap broker would take (a broker of the same cluster almost always takes the same): ready
        when the connection is, instead of written then (1-2 ms a ListOffsets of 10,000 partitions). A
        broker that takes another version has its body written as it is sent, as before."""
        data = self._manager.broker_version_data
        for request in built:
            if data is None or id(request) not in self._writers:
                continue
            try:
                version = data.api_version(request)
            except Exception:  # noqa: BLE001 - a version the bootstrap broker does not take: written as sent
                continue
            _write_body_ahead(request, self._bodies, self._writers, version)

    def _forget(self, built: Any) -> None:
        self._requests.pop(id(built), None)
        self._bodies.pop(id(built), None)
        self._writers.pop(id(built), None)

    def _decode(self, request: Request, response: Any) -> Any:
        if type(response) is Read:  # read from its bytes (.bodies): typed already
            return response.typed
        decode = DECODERS.get(type(request))
        return response if decode is None else decode(request, response)

    def software(self) -> tuple[str, str]:
        """The client software name and version this client tells brokers (ApiVersions v3)."""
        cfg = self._manager.config
        return cfg["client_software_name"], cfg["client_software_version"]
