"""What the group describe APIs kafka-python 3.0 has no classes for share: ConsumerGroupDescribe (API 69,
:mod:`.consumer_group_codec`) and StreamsGroupDescribe (API 89, :mod:`.streams_group_codec`). Each
writes its request and reads its answer here, from Apache Kafka's schemas (flexible from v0: compact
arrays and strings, tagged fields after every struct).

:class:`DescribeRequest` is what kafka-python's connection sends: the interface its requests have (an
API key, the versions it may go out at, a header, a body, the answer's reader), with kafka-python's own
request header (the bytes every request starts with) and response header;
``tests/unit/test_wire_consumer_group.py`` sends one through kafka-python's own protocol parser and
version negotiation, so a release that changes that interface fails there, not against a broker.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from kafkatxn.kafka.varint import decode_uvarint, encode_uvarint
from kafkatxn.kafka.wire.reading import Read

_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_UUID_SIZE = 16


def group_ids_body(group_ids: tuple[str, ...]) -> bytes:
    """A describe request's body as written here (ConsumerGroupDescribe v0-v1, StreamsGroupDescribe v0):
    GroupIds (compact array of compact strings), IncludeAuthorizedOperations false, no tagged fields."""
    out = [encode_uvarint(len(group_ids) + 1)]
    for g in group_ids:
        raw = g.encode("utf-8")
        out.append(encode_uvarint(len(raw) + 1) + raw)
    out.append(b"\x00\x00")
    return b"".join(out)


class Reader:
    """A cursor over an answer's bytes; each read raises ValueError past the end (a truncated answer),
    naming the API."""

    __slots__ = ("data", "pos", "api")

    def __init__(self, data: memoryview, api: str):
        self.data, self.pos, self.api = data, 0, api

    def _take(self, n: int) -> memoryview:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise ValueError(f"{self.api} answer ends early")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def uvarint(self) -> int:
        try:
            value, self.pos = decode_uvarint(self.data, self.pos)
        except IndexError:
            raise ValueError(f"{self.api} answer ends early") from None
        return value

    def int8(self) -> int:
        return _INT8.unpack(self._take(1))[0]

    def int16(self) -> int:
        return _INT16.unpack(self._take(2))[0]

    def int32(self) -> int:
        return _INT32.unpack(self._take(4))[0]

    def int64(self) -> int:
        return _INT64.unpack(self._take(8))[0]

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
        """A struct's tagged fields: none read here, each skipped by its size."""
        for _ in range(self.uvarint()):
            self.uvarint()  # the tag
            self._take(self.uvarint())

    def end(self) -> None:
        if self.pos != len(self.data):
            raise ValueError(f"{self.api} answer has bytes left over")


class _Answer:
    """What kafka-python's parser takes for an answer's class: it reads the response header (flexible:
    the correlation id, then tagged fields), then the body with ``read`` (body, version) -> (typed
    answer, throttle time)."""

    def __init__(self, version: int, read: Callable[[memoryview, int], tuple[Any, int]]):
        self.version, self.read = version, read

    @staticmethod
    def parse_header(data: Any) -> Any:
        from kafka.protocol.api_header import ResponseHeader

        return ResponseHeader.decode(data, flexible=True)

    def decode(self, data: Any) -> Read:
        return Read(*self.read(memoryview(data.read()), self.version))


_HEADERS: dict[int, type] = {}  # per API key: kafka-python's request header whose answers are read here, made once


def _header_class(api_key: int, read: Callable[[memoryview, int], tuple[Any, int]]) -> type:
    """kafka-python's request header (its fields, its bytes), whose ``get_response_class`` (what its
    parser asks an answer's class of) is :class:`_Answer`: kafka-python has no response class for
    these APIs. Made with ``init=False`` as kafka-python makes its versioned classes."""
    made = _HEADERS.get(api_key)
    if made is None:
        from kafka.protocol.api_header import RequestHeader

        def get_response_class(self: Any) -> _Answer:
            return _Answer(self.request_api_version, read)

        made = _HEADERS[api_key] = type(RequestHeader.__name__, (RequestHeader,),
                                        {"__slots__": (), "get_response_class": get_response_class}, init=False)
    return made


class DescribeRequest:
    """One describe request as kafka-python's connection sends a request: it reads ``API_KEY``,
    ``min_version``/``max_version`` (the versions written here) and the per-request bounds
    ``_min_version``/``_max_version`` (kafka-python's names: none narrower here) to pick the version
    (``BrokerVersionData.api_version``), sets ``API_VERSION``, then ``with_header``, ``encode`` and
    ``expect_response``, and keeps ``header`` to read the answer with. Each API's class is made by
    :func:`describe_codecs`."""

    API_KEY = -1
    name = ""
    min_version = 0
    max_version = 0
    _min_version = None
    _max_version = None
    read_answer: Callable[[memoryview, int], tuple[Any, int]]

    def __init__(self, group_ids: tuple[str, ...]):
        self.group_ids = tuple(group_ids)
        self.API_VERSION: int | None = None
        self.header: Any = None

    def expect_response(self) -> bool:
        return True

    def with_header(self, correlation_id: int = 0, client_id: str = "kafkatxn") -> None:
        header = _header_class(self.API_KEY, type(self).read_answer)
        self.header = header(request_api_key=self.API_KEY, request_api_version=self.API_VERSION,
                             correlation_id=correlation_id, client_id=client_id)

    def encode(self, version: int | None = None, header: bool = False, framed: bool = False) -> bytes:
        if version is not None:
            self.API_VERSION = version
        if self.API_VERSION is None or not self.min_version <= self.API_VERSION <= self.max_version:
            raise ValueError(f"{self.name} cannot go out at version {self.API_VERSION}")
        data = group_ids_body(self.group_ids)
        if header:  # made by with_header at the version the connection picked
            data = self.header.encode(flexible=True) + data
        return len(data).to_bytes(4, "big") + data if framed else data

    def __repr__(self) -> str:
        return f"{type(self).__name__}(v{self.API_VERSION}, group_ids={list(self.group_ids)!r})"


def describe_codecs(typed: type, name: str, api_key: int, versions: tuple[int, int],
                    read_answer: Callable[[memoryview, int], tuple[Any, int]]) -> dict[type, tuple[Callable, Callable]]:
    """The wire's codec of the typed request ``typed`` (its ``group_ids``): a :class:`DescribeRequest`
    of API ``name`` (``api_key``, the ``versions`` written and read here) whose answers ``read_answer``
    reads; the wire hands the typed answer it makes over as it is."""
    request = type(f"{name}Request", (DescribeRequest,), {
        "API_KEY": api_key, "name": name, "min_version": versions[0], "max_version": versions[1],
        "read_answer": staticmethod(read_answer),
    })

    def encoded(_wire: Any, typed_request: Any) -> DescribeRequest:
        return request(typed_request.group_ids)

    def decoded(_typed_request: Any, resp: Any) -> Any:
        return resp

    return {typed: (encoded, decoded)}
