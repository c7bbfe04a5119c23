"""bench/wire_replay.py's floor: frames cut out of a stream, requests matched to answers, the order a
replay keeps, and its refusal of anything that writes. The replay itself runs against real brokers
in bench_scale.py."""

from __future__ import annotations

import importlib.util
import os
import socket
import struct
import sys
import threading
import time
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "bench" / "wire_replay.py"
_SPEC = importlib.util.spec_from_file_location("wire_replay", _PATH)
wire_replay = importlib.util.module_from_spec(_SPEC)
sys.modules["wire_replay"] = wire_replay  # dataclasses look their module up
_SPEC.loader.exec_module(wire_replay)


def request_frame(api_key: int, correlation_id: int, body: bytes = b"") -> bytes:
    payload = struct.pack(">hhi", api_key, 0, correlation_id) + body
    return struct.pack(">i", len(payload)) + payload


def answer_frame(correlation_id: int, body: bytes = b"") -> bytes:
    payload = struct.pack(">i", correlation_id) + body
    return struct.pack(">i", len(payload)) + payload


def test_frames_are_cut_where_their_sizes_say_and_timed_by_the_chunk_that_completes_them():
    one, two = request_frame(3, 1, b"x" * 10), request_frame(2, 2, b"y" * 3)
    stream = one + two
    chunks = [(1.0, stream[:5]), (2.0, stream[5:len(one) + 2]), (3.0, stream[len(one) + 2:])]
    assert wire_replay.frames(chunks) == [(2.0, one), (3.0, two)]


def test_a_frame_cut_short_by_the_end_of_the_stream_is_dropped():
    one = request_frame(3, 1, b"abc")
    assert wire_replay.frames([(1.0, one), (2.0, one[:-1])]) == [(1.0, one)]


def traffic() -> dict[int, dict]:
    # Connection 0: Metadata (answered at 2), then ListOffsets sent after it (answered at 5).
    # Connection 1: ListOffsets sent after the Metadata answer (answered at 4), then an ApiVersions never answered.
    return {
        0: {"address": ("127.0.0.1", 9092),
            "sent": [(1.0, request_frame(3, 7)), (3.0, request_frame(2, 8))],
            "received": [(2.0, answer_frame(7)), (5.0, answer_frame(8))]},
        1: {"address": ("127.0.0.1", 9093),
            "sent": [(3.5, request_frame(2, 1)), (4.5, request_frame(18, 2))],
            "received": [(4.0, answer_frame(1))]},
    }


def test_requests_are_matched_to_their_answers_by_correlation_id_per_connection():
    recording = wire_replay.assemble(traffic())
    got = {(r.connection, r.api_key, r.correlation_id): (r.sent_at, r.answered_at) for r in recording.requests}
    assert got == {(0, 3, 7): (1.0, 2.0), (0, 2, 8): (3.0, 5.0), (1, 2, 1): (3.5, 4.0), (1, 18, 2): (4.5, None)}


def test_each_request_waits_for_the_answers_that_had_arrived_before_the_command_sent_it():
    schedule = wire_replay.assemble(traffic()).schedule()
    assert [(waited, r.api_key, r.correlation_id) for waited, r in schedule] == [
        (0, 3, 7),  # the metadata: nothing before it
        (1, 2, 8), (1, 2, 1),  # both ListOffsets after the metadata's answer only
        (2, 18, 2),  # after the metadata's and connection 1's ListOffsets' answers
    ]
    assert wire_replay.assemble(traffic()).rounds() == 3


def test_the_stretches_with_nothing_in_flight_are_the_commands_own_work():
    recording = wire_replay.assemble(traffic())
    recording.started_at, recording.ended_at = 0.5, 6.0
    idle = [(round(ms), after, before) for ms, after, before in recording.idle()]
    # The ApiVersions never answered is not waited for: the command was idle after the last ListOffsets.
    assert idle == [(500, "start", "Metadata"), (1000, "Metadata", "ListOffsets"), (1000, "ListOffsets", "exit")]


def test_a_recording_with_a_request_that_writes_is_never_replayed():
    writes = traffic()
    writes[1]["sent"].append((6.0, request_frame(26, 3)))  # EndTxn
    with pytest.raises(SystemExit, match=r"\[26\]"):
        wire_replay.replay(wire_replay.assemble(writes))


def test_recording_a_run_without_brokers_restores_the_socket_and_keeps_the_exit_code(tmp_path):
    send, exit_ = socket.socket.send, os._exit
    out = tmp_path / "run.rec"
    assert wire_replay.record(out, ["--version"]) == 0
    assert (socket.socket.send, os._exit) == (send, exit_)
    recording = wire_replay.load(out)
    assert recording.requests == [] and recording.started_at <= recording.ended_at
    assert wire_replay.replay(recording) < 1.0
    assert wire_replay.record(out, ["no-such-command"]) == 64


def test_a_recorded_connections_requests_are_replayed_on_one_connection_as_the_command_sent_them():
    """The floor is not "each request on a connection of its own": a broker works on one connection's
    requests one at a time, in the replay as in the command (issue 38's comparison depends on it)."""
    server = socket.create_server(("127.0.0.1", 0))
    address = server.getsockname()
    carried: list[int] = []  # requests each accepted connection carried

    def answer(conn: socket.socket) -> None:
        n, buffer = 0, b""
        with conn:
            while data := conn.recv(65536):
                buffer += data
                while len(buffer) >= 8 and len(buffer) >= 4 + struct.unpack_from(">i", buffer)[0]:
                    size, (correlation_id,) = struct.unpack_from(">i", buffer)[0], struct.unpack_from(">i", buffer, 8)
                    buffer = buffer[4 + size:]
                    n += 1
                    conn.sendall(answer_frame(correlation_id))
        carried.append(n)

    def accept() -> None:
        for _ in range(2):
            conn, _ = server.accept()
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    recorded = {  # two big reads on connection 0 (one broker's), one on connection 1
        0: {"address": address, "sent": [(1.0, request_frame(2, 1)), (1.1, request_frame(2, 2))],
            "received": [(2.0, answer_frame(1)), (3.0, answer_frame(2))]},
        1: {"address": address, "sent": [(1.2, request_frame(61, 1))], "received": [(2.5, answer_frame(1))]},
    }
    try:
        wire_replay.replay(wire_replay.assemble(recorded), timeout_s=10)
        acceptor.join(10)
    finally:
        server.close()
    deadline = time.monotonic() + 10
    while len(carried) < 2 and time.monotonic() < deadline:  # the replay closed them: each thread counts its last
        time.sleep(0.01)
    assert sorted(carried) == [1, 2]
