"""A command's requests replayed with no client work: the floor of "the brokers answering the requests it needs".

    python bench/wire_replay.py record OUT -- lso -b HOST:PORT   # run kafkatxn in-process, its traffic to OUT
    python bench/wire_replay.py replay OUT [--runs 3]           # send the same bytes again, print seconds

Issue 38 measures a command against its floor: the CLI's start-up plus the brokers answering its
requests, "the same requests sent by a minimal client, or the brokers' own request-time metrics".
The metrics (``TotalTimeMs``, the busiest broker's sum) leave out that a command cannot ask
everything at once: it needs the metadata before it knows the leaders, the producers before it
knows which transactions to describe. The replay keeps exactly that order and nothing else: each
recorded request is sent again, byte for byte, to the same address, as soon as every answer the
command had received before sending it is in, on a fresh connection per recorded connection (the
requests the command sent on one connection share one here too: a broker works on them one at a
time in both). No parsing, no building, no imports: what is left of the command's time over the
replay is the client's own work.

Recording patches ``socket.socket``'s send and receive (kafka-python's transport calls them) in
the recording process only, for TCP connections. Only read-only APIs are replayed; a recording with
any other request is refused, so a replay can never write to a cluster.
"""

from __future__ import annotations

import argparse
import os
import pickle
import runpy
import selectors
import socket
import statistics
import struct
import sys
import threading
import time
import weakref
from dataclasses import asdict, dataclass, field
from pathlib import Path

# API keys that read and never change a cluster (Kafka's protocol numbering).
READ_ONLY_APIS = {
    1: "Fetch", 2: "ListOffsets", 3: "Metadata", 9: "OffsetFetch", 10: "FindCoordinator", 15: "DescribeGroups",
    16: "ListGroups", 17: "SaslHandshake", 18: "ApiVersions", 29: "DescribeAcls", 32: "DescribeConfigs",
    36: "SaslAuthenticate", 60: "DescribeCluster", 61: "DescribeProducers", 65: "DescribeTransactions",
    66: "ListTransactions", 69: "ConsumerGroupDescribe",
}


@dataclass
class Request:
    connection: int
    address: tuple
    api_key: int
    correlation_id: int
    frame: bytes
    sent_at: float  # when its last byte left, in the recording
    answered_at: float | None = None  # when its answer's last byte arrived; None: never answered


@dataclass
class Recording:
    requests: list[Request] = field(default_factory=list)
    started_at: float | None = None  # when the recording process began running kafkatxn (interpreter up)
    ended_at: float | None = None  # when kafkatxn returned

    def idle(self) -> list[tuple[float, str, str]]:
        """The stretches when no request was in flight: the command's own work on its critical path
        (milliseconds, what was answered last, what was sent next), from ``started_at`` to ``ended_at``."""
        answered = [r for r in self.requests if r.answered_at is not None]  # one never answered is not waited for
        events = sorted([(r.sent_at, 1, r) for r in answered] + [(r.answered_at, -1, r) for r in answered],
                        key=lambda e: (e[0], -e[1]))
        out: list[tuple[float, str, str]] = []
        in_flight, since, last = 0, self.started_at, "start"
        for at, step, request in events:
            if step == 1 and in_flight == 0 and since is not None:
                out.append(((at - since) * 1000, last, api_name(request.api_key)))
            in_flight += step
            if in_flight == 0:
                since, last = at, api_name(request.api_key)
        if self.ended_at is not None and in_flight == 0 and since is not None:
            out.append(((self.ended_at - since) * 1000, last, "exit"))
        return out

    def schedule(self) -> list[tuple[int, Request]]:
        """Each request with how many answers, in the recording's order of arrival, it waited for."""
        arrivals = sorted(r.answered_at for r in self.requests if r.answered_at is not None)
        ordered = sorted(self.requests, key=lambda r: r.sent_at)
        out = []
        for request in ordered:
            waited = sum(1 for at in arrivals if at < request.sent_at)
            out.append((waited, request))
        return out

    def rounds(self) -> int:
        """Times the command waited for answers before it could ask more (its sequential rounds)."""
        return len({waited for waited, _ in self.schedule()})


def api_name(api_key: int) -> str:
    return READ_ONLY_APIS.get(api_key, f"API {api_key}")


def frames(chunks: list[tuple[float, bytes]]) -> list[tuple[float, bytes]]:
    """Size-prefixed Kafka frames out of a stream's chunks, each with the time of the chunk that completed it.
    A frame cut short at the end of the stream is dropped."""
    out: list[tuple[float, bytes]] = []
    buffer = bytearray()
    for at, data in chunks:
        buffer += data
        while len(buffer) >= 4:
            (size,) = struct.unpack_from(">i", buffer, 0)
            if len(buffer) < 4 + size:
                break
            out.append((at, bytes(buffer[: 4 + size])))
            del buffer[: 4 + size]
    return out


def assemble(traffic: dict[int, dict]) -> Recording:
    """A recording out of each TCP connection's sent and received chunks: requests matched to their
    answers by correlation id (Kafka answers a connection's requests in order)."""
    recording = Recording()
    for connection, stream in sorted(traffic.items()):
        answers = {}
        for at, frame in frames(stream["received"]):
            (correlation_id,) = struct.unpack_from(">i", frame, 4)
            answers.setdefault(correlation_id, at)
        for at, frame in frames(stream["sent"]):
            api_key, _version, correlation_id = struct.unpack_from(">hhi", frame, 4)
            recording.requests.append(Request(connection, stream["address"], api_key, correlation_id, frame, at,
                                              answers.get(correlation_id)))
    return recording


def refuse_writes(recording: Recording) -> None:
    writes = sorted({r.api_key for r in recording.requests if r.api_key not in READ_ONLY_APIS})
    if writes:
        raise SystemExit(f"refusing to replay: the recording has requests of API keys {writes}, not read-only")


def record(out: Path, argv: list[str]) -> int:
    """Run ``kafkatxn ARGV`` in this process with its TCP traffic recorded to OUT; returns its exit code."""
    traffic: dict[int, dict] = {}
    numbers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
    lock = threading.Lock()

    def stream(sock: socket.socket) -> dict | None:
        if sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.type != socket.SOCK_STREAM:
            return None
        with lock:
            number = numbers.get(sock)
            if number is None:
                number = numbers[sock] = len(traffic)
                traffic[number] = {"address": sock.getpeername()[:2], "sent": [], "received": []}
            return traffic[number]

    original_send, original_recv, original_sendall = socket.socket.send, socket.socket.recv, socket.socket.sendall
    original_recv_into = socket.socket.recv_into

    def send(self, data, *args):
        sent = original_send(self, data, *args)
        if (s := stream(self)) is not None:
            s["sent"].append((time.perf_counter(), bytes(memoryview(data)[:sent])))
        return sent

    def sendall(self, data, *args):
        original_sendall(self, data, *args)
        if (s := stream(self)) is not None:
            s["sent"].append((time.perf_counter(), bytes(data)))

    def recv(self, size, *args):
        data = original_recv(self, size, *args)
        if data and (s := stream(self)) is not None:
            s["received"].append((time.perf_counter(), data))
        return data

    def recv_into(self, buffer, *args):  # the wire's own reads (kafkatxn.kafka.wire.receiving)
        n = original_recv_into(self, buffer, *args)
        if n and (s := stream(self)) is not None:
            s["received"].append((time.perf_counter(), bytes(memoryview(buffer)[:n])))
        return n

    def exit_now(code):  # a CLI that leaves by os._exit still hands over its recording
        raise SystemExit(code)

    original_exit = os._exit
    socket.socket.send, socket.socket.sendall, socket.socket.recv, os._exit = send, sendall, recv, exit_now
    socket.socket.recv_into = recv_into
    sys.argv = ["kafkatxn", *argv]
    code = 0
    started_at = time.perf_counter()
    try:
        runpy.run_module("kafkatxn", run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    finally:
        socket.socket.send, socket.socket.sendall, socket.socket.recv = original_send, original_sendall, original_recv
        socket.socket.recv_into = original_recv_into
        os._exit = original_exit
        sys.stdout.flush()
        ended_at = time.perf_counter()
        with lock:
            recording = assemble(traffic)
        out.write_bytes(pickle.dumps({"started_at": started_at, "ended_at": ended_at,  # plain data: read by any module
                                      "requests": [asdict(request) for request in recording.requests]}))
    return code


def replay(recording: Recording, timeout_s: float = 60.0) -> float:
    """Seconds from the first connection to the last answer, sending the recorded requests again in
    the recording's order of dependence on fresh connections. Raises TimeoutError past ``timeout_s``."""
    refuse_writes(recording)
    schedule = recording.schedule()
    # The answers a request waited for are the first N to have arrived in the recording.
    arrival_order = sorted((r for r in recording.requests if r.answered_at is not None), key=lambda r: r.answered_at)
    rank = {id(r): i for i, r in enumerate(arrival_order)}
    done = [False] * len(arrival_order)
    done_prefix = 0
    selector = selectors.DefaultSelector()
    sockets: dict[int, socket.socket] = {}
    buffers: dict[int, bytearray] = {}
    waiting: dict[int, list[Request]] = {}  # connection -> its answered requests, in order, not yet answered here
    next_to_send = 0
    started = time.perf_counter()
    deadline = started + timeout_s
    try:
        while True:
            while next_to_send < len(schedule) and schedule[next_to_send][0] <= done_prefix:
                request = schedule[next_to_send][1]
                sock = sockets.get(request.connection)
                if sock is None:
                    sock = socket.create_connection(request.address, timeout=timeout_s)
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    sockets[request.connection] = sock
                    buffers[request.connection] = bytearray()
                    waiting[request.connection] = []
                    selector.register(sock, selectors.EVENT_READ, request.connection)
                sock.sendall(request.frame)
                if request.answered_at is not None:
                    waiting[request.connection].append(request)
                next_to_send += 1
            if next_to_send == len(schedule) and done_prefix == len(arrival_order):
                return time.perf_counter() - started
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError(f"replay: {len(arrival_order) - sum(done)} answers missing after {timeout_s} s")
            for key, _ in selector.select(left):
                connection = key.data
                data = key.fileobj.recv(1 << 20)
                if not data:
                    raise ConnectionError(f"replay: {recording_address(sockets[connection])} closed the connection")
                buffer = buffers[connection]
                buffer += data
                while len(buffer) >= 4:
                    (size,) = struct.unpack_from(">i", buffer, 0)
                    if len(buffer) < 4 + size:
                        break
                    del buffer[: 4 + size]
                    answered = waiting[connection].pop(0)
                    done[rank[id(answered)]] = True
                while done_prefix < len(done) and done[done_prefix]:
                    done_prefix += 1
    finally:
        selector.close()
        for sock in sockets.values():
            sock.close()


def recording_address(sock: socket.socket) -> str:
    try:
        host, port = sock.getpeername()[:2]
        return f"{host}:{port}"
    except OSError:
        return "a broker"


def load(path: Path) -> Recording:
    saved = pickle.loads(path.read_bytes())
    return Recording([Request(**fields) for fields in saved["requests"]], saved["started_at"], saved["ended_at"])


def replay_s(path: Path, runs: int) -> tuple[float, list[float], int, list[tuple[float, str, str]]]:
    """The median of ``runs`` replays of a recording, the runs, the command's rounds, and the
    recorded run's stretches with nothing in flight (:meth:`Recording.idle`)."""
    recording = load(path)
    seconds = [replay(recording) for _ in range(runs)]
    return statistics.median(seconds), seconds, recording.rounds(), recording.idle()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="action", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("out", type=Path)
    rec.add_argument("argv", nargs=argparse.REMAINDER)
    rep = sub.add_parser("replay")
    rep.add_argument("recording", type=Path)
    rep.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if args.action == "record":
        argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
        return record(args.out, argv)
    median, seconds, rounds, idle = replay_s(args.recording, args.runs)
    print(f"replay {median:.3f} s (runs {', '.join(f'{s:.3f}' for s in seconds)}; {rounds} rounds)")
    print(f"recorded run: {sum(ms for ms, _, _ in idle):.0f} ms with nothing in flight: "
          + ", ".join(f"{ms:.0f} ({after} to {before})" for ms, after, before in idle))
    return 0


if __name__ == "__main__":
    sys.exit(main())
