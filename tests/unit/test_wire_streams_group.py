"""StreamsGroupDescribe (API 89, KIP-1071): kafka-python 3.0 has no class for it, so
kafkatxn/kafka/wire/streams_group_codec.py writes the request and reads the answer itself, at version
0 in Kafka 4.4's layout (its generated StreamsGroupDescribeResponseData schema). The answers below are
built field by field in that layout; tests/integration/test_streams_group.py reads a real broker's."""

from __future__ import annotations

import struct

import pytest

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka import wire
from kafkatxn.kafka.wire import streams_group_codec as codec
from kafkatxn.model import TopicPartition
from tests.support.flexible_bytes import arr, i16, i32, s, tags


T = tags()  # no tagged fields


def topic_info(name: str) -> bytes:
    return s(name) + i32(0) + i16(0) + arr([s("cleanup.policy") + s("compact") + T]) + T


def subtopology(sid: str, sources: list[str], repartition_sources: list[str]) -> bytes:
    return (s(sid) + arr([s(t) for t in sources]) + arr([s("app-repartition")])  # RepartitionSinkTopics
            + arr([topic_info("app-store-changelog")]) + arr([topic_info(t) for t in repartition_sources]) + T)


def tasks(entries: list[tuple[str, list[int]]]) -> bytes:
    return arr([s(sid) + arr([i32(x) for x in parts]) + T for sid, parts in entries])


def assignment(active, standby=(), warmup=()) -> bytes:
    return tasks(list(active)) + tasks(list(standby)) + tasks(list(warmup)) + T


def member(active, standby=(), endpoint: bool = True) -> bytes:
    task_offset = s("0") + i32(1) + struct.pack(">q", 42) + T
    return (s("m-1") + i32(3) + s(None) + s("rack-a") + s("client") + s("/10.0.0.1") + i32(1) + s("process-1")
            + ((b"\x01" + s("app-host") + struct.pack(">H", 8080) + T) if endpoint else b"\xff")
            + arr([s("zone") + s("a") + T]) + arr([task_offset]) + arr([task_offset])
            + assignment(active, standby) + assignment([("0", [7, 8, 9])])  # TargetAssignment: not held yet
            + b"\x00" + T)


def group(error: int, gid: str, state: str, topology: bytes | None, members: list[bytes]) -> bytes:
    return (i16(error) + s(None) + s(gid) + s(state) + i32(5) + i32(5)
            + (b"\xff" if topology is None else b"\x01" + topology) + arr(members) + i32(-2147483648) + T)


TOPOLOGY = i32(1) + arr([subtopology("0", ["orders"], []), subtopology("1", [], ["app-repartition"])]) + T


def sample() -> bytes:
    return i32(12) + arr([
        group(0, "app", "Stable", TOPOLOGY, [
            member([("0", [0, 1])], standby=[("1", [0])]),
            member([("1", [2])], endpoint=False),
        ]),
        group(0, "fresh", "NotReady", None, []),
        group(69, "gone", "", None, []),  # GROUP_ID_NOT_FOUND
    ]) + T


def test_an_answer_is_read_to_the_partitions_the_members_active_tasks_read():
    answer, throttle_ms = codec.read_answer(memoryview(sample()), 0)
    assert throttle_ms == 12
    assert answer == p.DescribeGroupsResponse((
        # Standby tasks and the target assignment read no input: only the active tasks' partitions,
        # of each sub-topology's source topics and repartition source topics.
        p.DescribedGroup("app", None, "Stable", "streams", frozenset({
            TopicPartition("orders", 0), TopicPartition("orders", 1), TopicPartition("app-repartition", 2)})),
        p.DescribedGroup("fresh", None, "NotReady", "streams", frozenset()),
        p.DescribedGroup("gone", "GROUP_ID_NOT_FOUND"),
    ))


def test_what_is_not_such_an_answer_is_an_error_not_a_guess():
    one = sample()
    for cut in (3, 20, len(one) - 1):
        with pytest.raises(ValueError):
            codec.read_answer(memoryview(one[:cut]), 0)
    with pytest.raises(ValueError):
        codec.read_answer(memoryview(one + b"\x00"), 0)
    with pytest.raises(ValueError):
        codec.read_answer(memoryview(one), 1)  # v1 is not read here


def test_the_request_goes_out_at_version_0_through_kafka_pythons_parser_and_its_answer_is_read_here():
    from kafka.protocol.api_header import ResponseHeader
    from kafka.protocol.api_key import ApiKey
    from kafka.protocol.broker_version_data import BrokerVersionData
    from kafka.protocol.parser import KafkaProtocol

    assert ApiKey["StreamsGroupDescribe"].value == codec.API_KEY == 89
    assert p.REQUEST_NAMES[p.StreamsGroupDescribe] == "StreamsGroupDescribe"
    request = wire.Wire(None)._encode(p.StreamsGroupDescribe(("app", "fresh")))
    # 4.4 brokers have versions 0-1: version 0 is picked, the one read here.
    assert BrokerVersionData(api_versions={89: (0, 1)}).api_version(request) == 0
    request.API_VERSION = 0
    parser = KafkaProtocol(client_id="kafkatxn")
    correlation_id = parser.send_request(request)
    out = parser.send_bytes()
    header = struct.pack(">hhih", 89, 0, correlation_id, 8) + b"kafkatxn" + T
    body = b"\x03\x04app\x06fresh\x00\x00"  # GroupIds, IncludeAuthorizedOperations false, no tagged fields
    assert out == struct.pack(">i", len(header) + len(body)) + header + body
    answer_bytes = ResponseHeader(correlation_id=correlation_id).encode(flexible=True) + sample()
    ((got_id, answer),) = parser.receive_bytes(len(answer_bytes).to_bytes(4, "big") + answer_bytes)
    assert got_id == correlation_id and answer.throttle_time_ms == 12
    typed = wire.Wire(None)._decode(p.StreamsGroupDescribe(("app", "fresh")), answer)
    assert typed == codec.read_answer(memoryview(sample()), 0)[0]
