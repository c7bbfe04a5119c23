"""The exporter's HTTP(S) server: one event loop for connections, a bounded pool for requests.

A thread per connection let every connection cost a thread and the accept loop a thread start, and
the listen backlog was socketserver's 5: with a couple of thousand clients connecting, the kernel
dropped new connections (a scrape's SYN waits 1, 3, 7, 15 s to be sent again) and the scrapes that
got in shared the interpreter with a couple of thousand threads. Here one thread accepts (backlog
:data:`BACKLOG`), does TLS handshakes and reads each request's head without blocking, under a
deadline per connection (:data:`HEAD_TIMEOUT_S` from accept to the blank line that ends the head),
so a slow or silent client costs a socket, never a thread. A connection whose head is complete goes
to one of at most :data:`WORKERS` threads, which run the WSGI application with wsgiref's handler
(one request per connection) on a blocking socket with :data:`REQUEST_TIMEOUT_S` per read
or write.
"""

from __future__ import annotations

import errno
import io
import logging
import queue
import resource
import selectors
import socket
import ssl
import threading
import time
from typing import Callable
from wsgiref.simple_server import WSGIRequestHandler

from kafkatxn.web_config import WebConfigError, WebConfigFile, ssl_reason

log = logging.getLogger("kafkatxn.exporter")

REQUEST_TIMEOUT_S = 30.0  # each socket read or write while a worker answers a request
HEAD_TIMEOUT_S = 10.0  # from accept to a complete request head, the TLS handshake included
MAX_HEAD_BYTES = 64 * 1024  # a longer head goes to a worker, whose handler refuses it (414/431)
WORKERS = 32  # requests answered at once; more wait in a queue, not in threads
BACKLOG = 4096  # the kernel caps it at net.core.somaxconn
_ACCEPT_PAUSE_S = 0.1  # out of file descriptors: stop accepting for this long


class _Handler(WSGIRequestHandler):
    timeout = REQUEST_TIMEOUT_S
    head = b""  # what the event loop read already

    def setup(self) -> None:
        super().setup()
        self.rfile.close()
        self.rfile = io.BufferedReader(_PrefixedReader(self.head, self.connection))

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the base class's name
        log.debug("%s %s", self.address_string(), format % args)


class _PrefixedReader(io.RawIOBase):
    """The bytes already read, then the socket."""

    def __init__(self, prefix: bytes, sock: socket.socket):
        self._prefix = memoryview(prefix)
        self._sock = sock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._prefix:
            n = min(len(buffer), len(self._prefix))
            buffer[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        return self._sock.recv_into(buffer)


class _Connection:
    __slots__ = ("sock", "address", "deadline", "head", "handshaking")

    def __init__(self, sock: socket.socket, address, deadline: float, handshaking: bool):
        self.sock, self.address, self.deadline, self.handshaking = sock, address, deadline, handshaking
        self.head = bytearray()


def raise_open_files_limit() -> None:
    """Soft limit of open files up to the hard one (as Go programs, Prometheus' exporters among them,
    do at start): every waiting client holds a descriptor, and 1,024 is a common soft default."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        target = hard if hard != resource.RLIM_INFINITY else 1 << 20
        if soft != resource.RLIM_INFINITY and soft < target:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):  # not allowed here: the limit stays
        pass


class ExporterServer:
    """Serves ``app`` on ``address``; TLS when ``web_config`` says so (decided at start), with a
    context taken from the web configuration as it is at each connection."""

    def __init__(self, address: tuple, family: int, app: Callable, web_config: WebConfigFile | None = None):
        self.app = app
        self.web_config = web_config
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        try:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.socket.bind(address)
            self.socket.listen(BACKLOG)
        except OSError:
            self.socket.close()
            raise
        self.socket.setblocking(False)
        self.server_address = self.socket.getsockname()
        self.server_port = self.server_address[1]
        self.server_name = socket.getfqdn(self.server_address[0])
        self.base_environ = {"SERVER_NAME": self.server_name, "GATEWAY_INTERFACE": "CGI/1.1",
                             "SERVER_PORT": str(self.server_port), "REMOTE_HOST": "", "CONTENT_LENGTH": "",
                             "SCRIPT_NAME": ""}
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._selector.register(self.socket, selectors.EVENT_READ, self.socket)
        self._accepting = True
        self._accept_paused_until = 0.0
        self._stopping = False
        self._open_lock = threading.Condition()
        self._open = 0  # connections accepted and not yet closed (see drain)
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self._workers: list[threading.Thread] = []
        self._idle = 0  # workers not answering a request
        self._waiting = 0  # requests handed over and not yet taken by a worker
        self._workers_lock = threading.Lock()
        self._loop_thread: threading.Thread | None = None
        self._not_accepting = threading.Event()

    @property
    def tls(self) -> bool:
        return self.web_config is not None and self.web_config.tls

    def get_app(self) -> Callable:  # wsgiref's handler asks its server for the application
        return self.app

    # -- the loop ---------------------------------------------------------------------------------

    def start(self) -> None:
        self._loop_thread = threading.Thread(target=self._loop, name="kafkatxn-exporter-http", daemon=True)
        self._loop_thread.start()

    def _loop(self) -> None:
        connections: dict[socket.socket, _Connection] = {}
        next_sweep = 0.0
        while not self._stopping:
            now = time.monotonic()
            if not self._accepting and not self._not_accepting.is_set():
                if not self._accept_paused_until:
                    self._selector.unregister(self.socket)
                self._not_accepting.set()
            elif self._accept_paused_until and now >= self._accept_paused_until and self._accepting:
                self._accept_paused_until = 0.0
                self._selector.register(self.socket, selectors.EVENT_READ, self.socket)
            for key, _mask in self._selector.select(timeout=0.25):
                if key.data is None:
                    try:
                        while self._wake_r.recv(4096):
                            pass
                    except BlockingIOError:
                        pass
                elif key.data is self.socket:
                    self._accept(connections)
                else:
                    self._advance(key.data, connections)
            now = time.monotonic()
            if now >= next_sweep:
                next_sweep = now + 0.25
                for conn in [c for c in connections.values() if c.deadline <= now]:
                    log.debug("%s sent no complete request in %.0f s; closed", conn.address[0], HEAD_TIMEOUT_S)
                    self._drop(conn, connections)
        for conn in list(connections.values()):
            self._drop(conn, connections)

    def _accept(self, connections: dict) -> None:
        for _ in range(256):  # then let the connections already accepted move on
            try:
                sock, address = self.socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    log.warning("cannot accept connections for now: %s", exc.strerror)
                    self._selector.unregister(self.socket)
                    self._accept_paused_until = time.monotonic() + _ACCEPT_PAUSE_S
                # ECONNABORTED and the like: that client is gone
                return
            with self._open_lock:
                self._open += 1
            sock.setblocking(False)
            handshaking = False
            if self.tls:
                assert self.web_config is not None
                try:
                    context = self.web_config.ssl_context()
                except WebConfigError as exc:
                    log.error("refusing connections: %s", exc)
                    self._closed(sock)
                    continue
                try:
                    sock = context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
                except (OSError, ssl.SSLError) as exc:
                    log.info("TLS with %s failed: %s", address[0], ssl_reason(exc))
                    self._closed(sock)
                    continue
                handshaking = True
            conn = _Connection(sock, address, time.monotonic() + HEAD_TIMEOUT_S, handshaking)
            connections[sock] = conn
            self._selector.register(sock, selectors.EVENT_READ, conn)
            self._advance(conn, connections)

    def _advance(self, conn: _Connection, connections: dict) -> None:
        """Handshake and read what the connection has for us now; hand it over once its head is in."""
        sock = conn.sock
        try:
            if conn.handshaking:
                sock.do_handshake()  # type: ignore[attr-defined]
                conn.handshaking = False
            while True:
                data = sock.recv(MAX_HEAD_BYTES)
                if not data:  # the client went away
                    self._drop(conn, connections)
                    return
                start = max(len(conn.head) - 3, 0)  # only the new bytes and the three before them are looked at
                conn.head += data
                if conn.head.find(b"\n\n", start) >= 0 or conn.head.find(b"\n\r\n", start) >= 0 or len(conn.head) > MAX_HEAD_BYTES:
                    break
                if not isinstance(sock, ssl.SSLSocket) or not sock.pending():
                    return
        except (ssl.SSLWantReadError, BlockingIOError, InterruptedError):
            self._selector.modify(sock, selectors.EVENT_READ, conn)
            return
        except ssl.SSLWantWriteError:
            self._selector.modify(sock, selectors.EVENT_WRITE, conn)
            return
        except (OSError, ssl.SSLError) as exc:
            if conn.handshaking:
                log.info("TLS handshake with %s failed: %s", conn.address[0], ssl_reason(exc))
            self._drop(conn, connections)
            return
        self._selector.unregister(sock)
        del connections[sock]
        self._dispatch(conn)

    def _drop(self, conn: _Connection, connections: dict) -> None:
        connections.pop(conn.sock, None)
        try:
            self._selector.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        self._closed(conn.sock)

    def _closed(self, sock: socket.socket) -> None:
        try:
            sock.close()
        finally:
            with self._open_lock:
                self._open -= 1
                self._open_lock.notify_all()

    # -- the workers ------------------------------------------------------------------------------

    def _dispatch(self, conn: _Connection) -> None:
        with self._workers_lock:
            self._waiting += 1
            # Workers start as requests need them, up to WORKERS.
            if self._waiting > self._idle and len(self._workers) < WORKERS:
                worker = threading.Thread(target=self._work, name=f"kafkatxn-exporter-worker-{len(self._workers)}", daemon=True)
                self._workers.append(worker)
                self._idle += 1
                worker.start()
        self._requests.put(conn)

    def _work(self) -> None:
        while True:
            conn = self._requests.get()
            if conn is None:
                return
            with self._workers_lock:
                self._waiting -= 1
                self._idle -= 1
            try:
                self._answer(conn)
            finally:
                with self._workers_lock:
                    self._idle += 1

    def _answer(self, conn: _Connection) -> None:
        sock = conn.sock
        try:
            sock.setblocking(True)
            handler = _Handler.__new__(_Handler)
            handler.head = bytes(conn.head)
            handler.__init__(sock, conn.address, self)  # type: ignore[misc]  # reads, answers, flushes
        except Exception:  # noqa: BLE001 - one client's failure must not end the worker
            log.warning("error serving %s", conn.address[0], exc_info=log.isEnabledFor(logging.DEBUG))
        finally:
            if not isinstance(sock, ssl.SSLSocket):  # TLS: closed without close_notify
                try:
                    sock.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
            self._closed(sock)

    # -- stopping ---------------------------------------------------------------------------------

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass

    def shutdown(self) -> None:
        """Stop accepting connections; the ones accepted go on (see :meth:`drain`)."""
        self._accepting = False
        self._wake()
        if self._loop_thread is not None and self._loop_thread.is_alive():
            self._not_accepting.wait(5)

    def drain(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the connections accepted to be answered and closed (the
        workers are daemon threads, which nothing else waits for): a scrape under way when the
        exporter is stopped gets its whole answer. Whether none is left."""
        with self._open_lock:
            return self._open_lock.wait_for(lambda: self._open == 0, timeout=max(timeout_s, 0.0))

    def server_close(self) -> None:
        self._stopping = True
        self._wake()
        if self._loop_thread is not None:
            self._loop_thread.join(5)
        for _ in self._workers:
            self._requests.put(None)
        self._selector.close()
        self.socket.close()
        self._wake_r.close()
        self._wake_w.close()
