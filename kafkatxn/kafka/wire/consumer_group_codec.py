"""ConsumerGroupDescribe (API key 69, KIP-848): how a consumer group of the new protocol (ListGroups
v5+ types it ``consumer``) is described; DescribeGroups answers such a group GROUP_ID_NOT_FOUND
("not a classic group"), as Kafka's ``kafka-consumer-groups.sh`` knows (it describes consumer-type
groups with this API, classic ones with DescribeGroups).

kafka-python 3.0 has this API's key but no class for it: the request is written and the answer read
here, from Apache Kafka's ConsumerGroupDescribeRequest.json / ConsumerGroupDescribeResponse.json
(versions 0-1, flexible from 0: compact arrays and strings, tagged fields after every struct; v1,
KIP-1099, adds each member's MemberType to the answer and nothing to the request).
:class:`ConsumerGroupDescribeRequest` is what kafka-python's connection sends: the interface its
requests have (an API key, the versions it may go out at, a header, a body, the answer's reader),
with kafka-python's own request header (the bytes every request starts with) and response header;
``tests/unit/test_wire_consumer_group.py`` sends it through kafka-python's own protocol parser and
version negotiation, so a release that changes that interface fails there, not against a broker.

The answer is the typed :class:`~kafkatxn.kafka.protocol.DescribeGroupsResponse`, as DescribeGroups'
is: per group its error, state and the partitions its members are assigned now (each member's
``Assignment``, not its ``TargetAssignment``: what it owns, not what it will be given).
"""

from __future__ import annotations

import struct
from typing import Any

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka.varint import decode_uvarint, encode_uvarint
from kafkatxn.kafka.wire.names import error_name
from kafkatxn.kafka.wire.reading import Read
from kafkatxn.model import TopicPartition

API_KEY = 69
# The versions this module writes and reads (the request's validVersions); the connection picks the
# highest the broker also has, as for every request.
MIN_VERSION, MAX_VERSION = 0, 1
MEMBER_TYPE_VERSION = 1  # the answer's Member.MemberType (int8), after TargetAssignment
CONSUMER = "consumer"

_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_UUID_SIZE = 16


def request_body(group_ids: tuple[str, ...]) -> bytes:
    """The request's body (the same at v0 and v1): GroupIds (compact array of compact strings),
    IncludeAuthorizedOperations false, no tagged fields."""
    out = [encode_uvarint(len(group_ids) + 1)]
    for g in group_ids:
        raw = g.encode("utf-8")
        out.append(encode_uvarint(len(raw) + 1) + raw)
    out.append(b"\x00\x00")  # IncludeAuthorizedOperations false; the body's tagged fields: none
    return b"".join(out)


# -- reading the answer ---------------------------------------------------------------------------


class _Reader:
    """A cursor over an answer's bytes; each read raises ValueError past the end (a truncated answer)."""

    __slots__ = ("data", "pos")

    def __init__(self, data: memoryview):
        self.data, self.pos = data, 0

    def _take(self, n: int) -> memoryview:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise ValueError("ConsumerGroupDescribe answer ends early")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def uvarint(self) -> int:
        try:
            value, self.pos = decode_uvarint(self.data, self.pos)
        except IndexError:
            raise ValueError("ConsumerGroupDescribe answer ends early") from None
        return value

    def int8(self) -> int:
        return _INT8.unpack(self._take(1))[0]

    def int16(self) -> int:
        return _INT16.unpack(self._take(2))[0]

    def int32(self) -> int:
        return _INT32.unpack(self._take(4))[0]

    def string(self) -> str | None:
        """A compact (nullable) string: its length + 1 (0: null), then its UTF-8 bytes."""
        n = self.uvarint()
        return None if n == 0 else str(self._take(n - 1), "utf-8")

    def count(self) -> int:
        """A compact array's length (a null array counts none)."""
        return max(self.uvarint() - 1, 0)

    def skip_uuid(self) -> None:
        self._take(_UUID_SIZE)

    def tagged_fields(self) -> None:
        """A struct's tagged fields: none this module reads, each skipped by its size."""
        for _ in range(self.uvarint()):
            self.uvarint()  # the tag
            self._take(self.uvarint())


def _assignment(r: _Reader, into: set[TopicPartition] | None) -> None:
    """An Assignment: TopicPartitions (TopicId, TopicName, Partitions), its tagged fields; the
    partitions added to ``into`` (None: read past)."""
    for _ in range(r.count()):
        r.skip_uuid()
        topic = r.string()
        partitions = [r.int32() for _ in range(r.count())]
        r.tagged_fields()
        if into is not None and topic is not None:
            into.update(TopicPartition(topic, i) for i in partitions)
    r.tagged_fields()


def _member(r: _Reader, version: int, assigned: set[TopicPartition]) -> None:
    r.string()  # MemberId
    r.string()  # InstanceId
    r.string()  # RackId
    r.int32()  # MemberEpoch
    r.string()  # ClientId
    r.string()  # ClientHost
    for _ in range(r.count()):  # SubscribedTopicNames
        r.string()
    r.string()  # SubscribedTopicRegex
    _assignment(r, assigned)  # Assignment: what the member owns now
    _assignment(r, None)  # TargetAssignment: what it is to be given, not what it has
    if version >= MEMBER_TYPE_VERSION:
        r.int8()  # MemberType
    r.tagged_fields()


def _group(r: _Reader, version: int) -> p.DescribedGroup:
    error = error_name(r.int16())
    r.string()  # ErrorMessage: words; the error's name is what the facade reads
    group_id = r.string() or ""
    state = r.string() or ""
    r.int32()  # GroupEpoch
    r.int32()  # AssignmentEpoch
    r.string()  # AssignorName
    assigned: set[TopicPartition] = set()
    for _ in range(r.count()):
        _member(r, version, assigned)
    r.int32()  # AuthorizedOperations (not asked for)
    r.tagged_fields()
    if error:
        return p.DescribedGroup(group_id, error)
    return p.DescribedGroup(group_id, None, state, CONSUMER, frozenset(assigned))


def read_answer(data: memoryview, version: int) -> tuple[p.DescribeGroupsResponse, int]:
    """The answer's body at ``version``: the typed answer and its throttle time. ValueError when the
    bytes are not such an answer (cut short, or bytes left over)."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"ConsumerGroupDescribe v{version} is not read here")
    r = _Reader(data)
    throttle_ms = r.int32()
    groups = tuple(_group(r, version) for _ in range(r.count()))
    r.tagged_fields()
    if r.pos != len(data):
        raise ValueError("ConsumerGroupDescribe answer has bytes left over")
    return p.DescribeGroupsResponse(groups), throttle_ms


# -- what kafka-python's connection sends ----------------------------------------------------------


class _Answer:
    """What kafka-python's parser takes for an answer's class: it reads the response header (flexible:
    the correlation id, then tagged fields), then the body."""

    def __init__(self, version: int):
        self.version = version

    @staticmethod
    def parse_header(data: Any) -> Any:
        from kafka.protocol.api_header import ResponseHeader

        return ResponseHeader.decode(data, flexible=True)

    def decode(self, data: Any) -> Read:
        return Read(*read_answer(memoryview(data.read()), self.version))


_HEADER: list[type] = []  # kafka-python's request header class whose answers this module reads, made once


def _header_class() -> type:
    """kafka-python's request header (its fields, its bytes), whose ``get_response_class`` (what its
    parser asks an answer's class of) is :class:`_Answer`: kafka-python has no response class for
    API 69. Made with ``init=False`` as kafka-python makes its versioned classes."""
    if not _HEADER:
        from kafka.protocol.api_header import RequestHeader

        def get_response_class(self: Any) -> _Answer:
            return _Answer(self.request_api_version)

        _HEADER.append(type(RequestHeader.__name__, (RequestHeader,), {"__slots__": (), "get_response_class": get_response_class},
                            init=False))
    return _HEADER[0]


class ConsumerGroupDescribeRequest:
    """One ConsumerGroupDescribe as kafka-python's connection sends a request: it reads ``API_KEY``,
    ``min_version``/``max_version`` (the versions written here) and the per-request bounds
    ``_min_version``/``_max_version`` (kafka-python's names: none narrower here) to pick the version
    (``BrokerVersionData.api_version``), sets ``API_VERSION``, then ``with_header``, ``encode`` and
    ``expect_response``, and keeps ``header`` to read the answer with."""

    API_KEY = API_KEY
    name = "ConsumerGroupDescribe"
    min_version = MIN_VERSION
    max_version = MAX_VERSION
    _min_version = None
    _max_version = None

    def __init__(self, group_ids: tuple[str, ...]):
        self.group_ids = tuple(group_ids)
        self.API_VERSION: int | None = None
        self.header: Any = None

    def expect_response(self) -> bool:
        return True

    def with_header(self, correlation_id: int = 0, client_id: str = "kafkatxn") -> None:
        self.header = _header_class()(request_api_key=API_KEY, request_api_version=self.API_VERSION,
                                      correlation_id=correlation_id, client_id=client_id)

    def encode(self, version: int | None = None, header: bool = False, framed: bool = False) -> bytes:
        if version is not None:
            self.API_VERSION = version
        if self.API_VERSION is None or not MIN_VERSION <= self.API_VERSION <= MAX_VERSION:
            raise ValueError(f"ConsumerGroupDescribe cannot go out at version {self.API_VERSION}")
        data = request_body(self.group_ids)
        if header:  # made by with_header at the version the connection picked
            data = self.header.encode(flexible=True) + data
        return len(data).to_bytes(4, "big") + data if framed else data

    def __repr__(self) -> str:
        return f"ConsumerGroupDescribeRequest(v{self.API_VERSION}, group_ids={list(self.group_ids)!r})"


def _consumer_group_describe(_wire: Any, request: p.ConsumerGroupDescribe) -> ConsumerGroupDescribeRequest:
    return ConsumerGroupDescribeRequest(request.group_ids)


def _decoded(_request: p.ConsumerGroupDescribe, resp: Any) -> Any:
    """The answer is read by :class:`_Answer` (the wire hands its typed answer over as it is)."""
    return resp


CODECS = {p.ConsumerGroupDescribe: (_consumer_group_describe, _decoded)}
