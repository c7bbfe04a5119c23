"""The IO thread's socket reads and selector look-ups, with fewer system calls than kafka-python's.

Every system call the IO thread makes lets go of the GIL, and while the main thread runs Python (a
pass over 30,000 partitions, the imports of the next requests' modules) the IO thread waits up to the
switch interval (5 ms) to have it back. kafka-python's plain-TCP transport reads 4 KB a ``recv`` (an
`lso` at 30,000 partitions: ~660 of them for six 175-350 KB answers, each a copy joined again), and its
selector looks a socket up before each wait on it, which for a socket not waited on (every wait: it is
unregistered after each) raises a ``KeyError`` whose message is the socket's ``repr``: a
``getsockname`` and a ``getpeername`` each time, twice (~130 calls an `lso`). Here a connection reads
what has arrived in one ``recv_into`` of a buffer of its own, and the selector's look-up raises its
``KeyError`` without a message. The bytes handed over, and what kafka-python does with them, are the same.
A connection's first request, ApiVersions, is encoded without the encoder kafka-python compiles for it
(:func:`walk_api_versions`).
"""

from __future__ import annotations

import logging
import selectors
import time
from typing import Any, NamedTuple

import kafka.errors as Errors
from kafka.net.manager import KafkaConnectionManager
from kafka.net.transport import KafkaTCPTransport

log = logging.getLogger(KafkaTCPTransport.__module__)  # kafka-python's transport's: its messages, as before

# A connection's receive buffer: most answers in one read (a ListOffsets answer at 10,000 partitions
# is 175-350 KB); a larger one takes a few reads, one a wake-up of the selector.
RECEIVE_BUFFER_BYTES = 256 * 1024


class QuietSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    """The platform's selector whose ``get_key`` of a file object not registered raises a ``KeyError``
    naming it without formatting it (kafka-python's selector asks before every wait, expecting one).
    Given as kafka-python's ``selector`` option."""

    def get_key(self, fileobj: Any) -> selectors.SelectorKey:
        if self.get_map() is None:
            raise RuntimeError("Selector is closed")
        key = self._fd_to_key.get(self._fileobj_lookup(fileobj))
        if key is None:
            raise KeyError(fileobj)  # as the stdlib's, but no repr() of a socket: two system calls
        return key


class ReadingInBulk(KafkaTCPTransport):
    """kafka-python's plain-TCP transport reading into a buffer of its own: ``recv_into`` until none is
    left or the buffer is full (kafka-python's loop: a ``recv`` of 4 KB at a time until none is left,
    then a join). Reading on until none is left, as kafka-python does, takes what arrived meanwhile:
    each wake-up of the selector costs more (two ``epoll_ctl``, its tasks) than the read that finds nothing.
    A request is written as it is encoded (:meth:`write`)."""

    def write(self, data: Any) -> None:
        """``data`` sent at once when nothing waits to go before it, as asyncio's transports send; what the
        socket does not take then goes as kafka-python sends it (its write task, when the socket is
        writable). kafka-python's transport sends only from that task, after the IO loop's step: a round's
        every request encoded before its first goes (``check``'s ten at 30,000 partitions, each broker idle
        until then), not each as it is encoded."""
        if self._writing or self._write_buffer or not self._write or self._closed or not data:
            return super().write(data)
        self._write_buffer.append(data)
        _sent, err = self._sock_send()
        if err:
            self.abort(error=err)  # as kafka-python's write task does with a failed send
            return None
        self.last_write = time.monotonic()
        if self._write_buffer:  # the rest when the socket is writable
            self._writing = True
            self._write_task = self._net.call_soon(self._write_to_sock)
        return None

    def _sock_recv(self) -> tuple[bytes, Any]:
        inbox = getattr(self, "inbox", None)
        if inbox is None:
            inbox = self.inbox = memoryview(bytearray(RECEIVE_BUFFER_BYTES))
        filled, err = 0, None
        while filled < RECEIVE_BUFFER_BYTES:
            try:
                n = self._sock.recv_into(inbox[filled:])
            except (BlockingIOError, InterruptedError):
                break
            except BaseException as e:  # noqa: BLE001 - as kafka-python's: the connection's error
                log.exception("%s: Error receiving network data closing socket", self)
                err = Errors.KafkaConnectionError(e)
                break
            if not n:
                log.error("%s: socket disconnected", self)
                err = Errors.KafkaConnectionError("socket disconnected")
                break
            filled += n
        # A copy: the parser keeps no view of it, but a debug log record would keep it past the next read.
        return bytes(inbox[:filled]), err


def idna_as_ascii(host: str) -> bool:
    """Whether the IDNA codec encodes ``host`` as its ASCII bytes, without an error: an ASCII name whose
    labels are 1-63 characters long (the last may be empty: a trailing dot), as ``encodings.idna`` checks."""
    if not host.isascii():
        return False
    *labels, last = host.split(".")
    return all(0 < len(label) < 64 for label in labels) and len(last) < 64


class Address(NamedTuple):
    """Where :meth:`Manager._build_transport` connects: the node's host and port."""

    host: Any
    port: int


class Manager(KafkaConnectionManager):
    """kafka-python's connection manager whose plain-TCP connections read in bulk (:class:`ReadingInBulk`).
    ``_build_transport`` is private: kafka-python has no option for a transport's class, and the
    transport is made there, before the connection begins reading it."""

    async def _build_transport(self, node: Any, timeout_at: Any = None) -> Any:
        if self.config["security_protocol"] == "PLAINTEXT" and type(node.host) is str and idna_as_ascii(node.host):
            # Looked up as bytes: ``socket.getaddrinfo`` encodes a str host with the IDNA codec, whose first
            # use imports encodings.idna, stringprep and unicodedata (~5 M instructions) on the IO thread
            # before the first request; an ASCII name's bytes are what it would send. A plain connection
            # reads its transport's host nowhere (a SASL login does, TLS names the server with it: str).
            node = Address(node.host.encode(), node.port)  # all kafka-python's _build_transport reads of the node
        transport = await super()._build_transport(node, timeout_at=timeout_at)
        if type(transport) is KafkaTCPTransport:  # TLS reads through its own loop (want-read, records)
            transport.__class__ = ReadingInBulk
        return transport

    def get_connection(self, node_id: Any, timeout_ms: Any = None, pop_on_close: bool = True,
                       refresh_metadata_on_err: bool = False, reset_backoff_on_connect: bool = True) -> Any:
        """A connection whose loss starts no metadata refresh of kafka-python's own: the wire reads the
        cluster's metadata itself and tells the manager its brokers (``client._know_brokers``). kafka-python's
        default starts, at the first connection closed with an error, a refresh loop that sends a Metadata
        at once and every ``metadata_max_age_ms`` after, which nothing asked for (an exporter keeps it for
        its life), and whose broker-only answer can drop a broker the wire's metadata names."""
        return super().get_connection(node_id, timeout_ms=timeout_ms, pop_on_close=pop_on_close,
                                      refresh_metadata_on_err=refresh_metadata_on_err,
                                      reset_backoff_on_connect=reset_backoff_on_connect)


def walk_api_versions() -> None:
    """The ApiVersions request kafka-python's connection sends first (``KafkaConnection._get_api_versions``,
    between connect and the bootstrap's Metadata) encoded by its schema walker (:func:`.reading._walking_class`),
    not by the encoder kafka-python compiles the first time (~1.2 ms on the IO thread, every run). Its
    answer (~80 API keys) stays with kafka-python's compiled decoder (ApiVersionsResponse decodes itself):
    walked, it costs more than compiling. The connection builds the request from its module's
    ``ApiVersionsRequest``, which has no public replacement: set there to the walking subclass."""
    import kafka.net.connection as connection
    from kafka.protocol.metadata import ApiVersionsRequest

    from kafkatxn.kafka.wire.reading import _walking_class

    connection.ApiVersionsRequest = _walking_class(ApiVersionsRequest)
