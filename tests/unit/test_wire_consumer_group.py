"""ConsumerGroupDescribe (API 69, KIP-848) on the wire, without a broker: kafka-python 3.0 has no class
for it, so kafkatxn/kafka/wire/consumer_group_codec.py writes the request and reads the answer itself.

The answers here are built by a writer of this file's own, field by field from Apache Kafka's
ConsumerGroupDescribeResponse.json (v0-v1, flexible from 0: compact arrays and strings, a tagged-field
section after every struct; v1 adds the members' MemberType), never by the code under test; the request
is sent and its answer handed over by kafka-python's own protocol parser, and its version picked by
kafka-python's own negotiation, as its connection does with every request.
"""

from __future__ import annotations

import struct
import uuid

import pytest

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka import wire
from kafkatxn.kafka.wire import consumer_group_codec as codec
from kafkatxn.kafka.wire.describe_codec import group_ids_body
from kafkatxn.kafka.wire.reading import Read
from kafkatxn.model import TopicPartition
from tests.support.flexible_bytes import arr, i8, i16, i32, s, tags

O0, O1, P3 = TopicPartition("orders", 0), TopicPartition("orders", 1), TopicPartition("payments", 3)


# -- a writer of the answer, from ConsumerGroupDescribeResponse.json ------------------------------


def assignment(*tps: TopicPartition, tagged: bytes = b"\x00") -> bytes:
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    topics = [uuid.uuid4().bytes + s(t) + arr([i32(i) for i in ps]) + b"\x00" for t, ps in by_topic.items()]
    return arr(topics) + tagged


def member(version: int, owned: tuple[TopicPartition, ...], target: tuple[TopicPartition, ...], *, regex: str | None = None,
           instance: str | None = None, tagged: bytes = b"\x00") -> bytes:
    return (s(str(uuid.uuid4())) + s(instance) + s(None) + i32(7) + s("client-1") + s("/10.0.0.1")
            + arr([s("orders"), s("payments")]) + s(regex) + assignment(*owned) + assignment(*target)
            + (i8(1) if version >= 1 else b"") + tagged)


def group(group_id: str, state: str, members: list[bytes], error: int = 0, message: str | None = None, tagged: bytes = b"\x00") -> bytes:
    return (i16(error) + s(message) + s(group_id) + s(state) + i32(5) + i32(5) + s("uniform") + arr(members)
            + i32(-2147483648) + tagged)


def answer(groups: list[bytes], throttle_ms: int = 0, tagged: bytes = b"\x00") -> bytes:
    return i32(throttle_ms) + arr(groups) + tagged


def sample(version: int) -> bytes:
    return answer([
        group("billing", "Stable", [
            member(version, (O0, P3), (O0, P3), instance="i-1"),
            member(version, (O1,), (O1,), regex="^orders$", tagged=tags((3, b"xyz"))),
        ], tagged=tags((0, b"\x01\x02"))),
        # A member owning nothing yet; the target not what it has: its owned partitions are read.
        group("moving", "Reconciling", [member(version, (), (O0,)), member(version, (O1,), ())]),
        group("gone", "", [], error=69, message="Group gone not found."),
        group("secret", "", [], error=30, message=None),
    ], throttle_ms=12, tagged=tags((1, b"\x00" * 4)))


EXPECTED = p.DescribeGroupsResponse((
    p.DescribedGroup("billing", None, "Stable", "consumer", frozenset({O0, O1, P3})),
    p.DescribedGroup("moving", None, "Reconciling", "consumer", frozenset({O1})),
    p.DescribedGroup("gone", "GROUP_ID_NOT_FOUND"),
    p.DescribedGroup("secret", "GROUP_AUTHORIZATION_FAILED"),
))


# -- the request ---------------------------------------------------------------------------------


def test_the_request_body_is_the_schemas_at_both_versions():
    # GroupIds: compact array (2 + 1) of compact strings; IncludeAuthorizedOperations false; no tagged fields.
    assert group_ids_body(("g1", "billing")) == b"\x03\x03g1\x08billing\x00\x00"
    assert group_ids_body(()) == b"\x01\x00\x00"
    request = wire.Wire(None)._encode(p.ConsumerGroupDescribe(("g1",)))
    assert request.encode(version=0) == request.encode(version=1) == b"\x02\x03g1\x00\x00"
    with pytest.raises(ValueError):
        request.encode(version=2)


def test_every_typed_group_describe_request_is_counted_under_its_api_name():
    from kafka.protocol.api_key import ApiKey

    assert p.REQUEST_NAMES[p.ConsumerGroupDescribe] == "ConsumerGroupDescribe"
    assert ApiKey["ConsumerGroupDescribe"].value == codec.API_KEY == 69


@pytest.mark.parametrize("broker, expected", [((0, 0), 0), ((0, 1), 1), ((0, 5), 1)])
def test_kafka_pythons_negotiation_picks_the_highest_version_both_have(broker, expected):
    from kafka.protocol.api_key import ApiKey
    from kafka.protocol.broker_version_data import BrokerVersionData

    data = BrokerVersionData(api_versions={ApiKey["ConsumerGroupDescribe"].value: broker})
    assert data.api_version(wire.Wire(None)._encode(p.ConsumerGroupDescribe(("g",)))) == expected


def test_kafka_python_refuses_it_to_a_broker_without_api_69():
    import kafka.errors as Errors
    from kafka.protocol.broker_version_data import BrokerVersionData

    with pytest.raises(Errors.IncompatibleBrokerVersion):
        BrokerVersionData(api_versions={15: (0, 5)}).api_version(wire.Wire(None)._encode(p.ConsumerGroupDescribe(("g",))))


# -- the answer ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1])
def test_the_answer_is_read_as_describe_groups_answers_are(version):
    """Each group's error, state and its members' current assignments (not their targets); the
    tagged fields of any struct, unknown here, skipped by their size."""
    assert codec.read_answer(memoryview(sample(version)), version) == (EXPECTED, 12)


def test_a_version_1_answer_read_as_version_0_or_cut_short_is_refused():
    one = sample(1)
    with pytest.raises(ValueError):
        codec.read_answer(memoryview(one), 0)  # each member's MemberType left over, misread: not this answer
    for cut in (1, len(one) // 2, len(one) - 1):
        with pytest.raises(ValueError):
            codec.read_answer(memoryview(one[:cut]), 1)
    with pytest.raises(ValueError):
        codec.read_answer(memoryview(one + b"\x00"), 1)
    with pytest.raises(ValueError):
        codec.read_answer(memoryview(one), 2)


def sent_through_kafka_python(version: int, group_ids: tuple[str, ...], answer_bytes: bytes):
    """The request as kafka-python's connection sends it at ``version`` (its parser writes the header
    and the body), and ``answer_bytes`` as the parser hands the answer over (the flexible response
    header read, then the body by the class the request's header names)."""
    from kafka.protocol.api_header import ResponseHeader
    from kafka.protocol.parser import KafkaProtocol

    request = wire.Wire(None)._encode(p.ConsumerGroupDescribe(group_ids))
    request.API_VERSION = version
    parser = KafkaProtocol(client_id="kafkatxn")
    correlation_id = parser.send_request(request)
    out = parser.send_bytes()
    body = ResponseHeader(correlation_id=correlation_id).encode(flexible=True) + answer_bytes
    ((got_id, answer),) = parser.receive_bytes(len(body).to_bytes(4, "big") + body)
    assert got_id == correlation_id
    return out, correlation_id, answer


@pytest.mark.parametrize("version", [0, 1])
def test_kafka_pythons_parser_sends_the_request_and_hands_over_the_answer_read_here(version):
    out, correlation_id, answer = sent_through_kafka_python(version, ("billing", "moving"), sample(version))
    # Request header v2 (flexible): key, version, correlation id, client id (INT16 length), no tagged fields.
    header = struct.pack(">hhih", 69, version, correlation_id, 8) + b"kafkatxn" + b"\x00"
    assert out == struct.pack(">i", len(header) + 18) + header + b"\x03\x08billing\x07moving\x00\x00"
    assert type(answer) is Read and answer.throttle_time_ms == 12  # what kafka-python's connection throttles by
    typed = wire.Wire(None)._decode(p.ConsumerGroupDescribe(("billing", "moving")), answer)
    assert typed == EXPECTED


def test_an_answer_that_is_not_one_is_kafka_pythons_protocol_error():
    import kafka.errors as Errors

    with pytest.raises(Errors.KafkaProtocolError):
        sent_through_kafka_python(1, ("billing",), sample(1)[:-3])
