"""The kafka-python request classes the wire makes its own: a kept request's body encoded once per
version (or written by :mod:`.bodies`), and the answers the wire reads from their bytes
(:mod:`.bodies`) instead of kafka-python's decoding them. Each is a subclass of kafka-python's class
with the same slots, made once per class (:mod:`.client` sends them)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, NamedTuple


def _encoding_body_once(
    built: Any, bodies: dict[int, dict[int, bytes]], classes: dict[type, type],
    writers: dict[int, Callable[[int], bytes]], write: Callable[[int], bytes] | None = None,
    read: Callable[[memoryview, int], Any] | None = None,
) -> Any:
    """``built`` (a kafka-python request) made to encode its body once per version, into ``bodies``
    (the Wire's, by ``id(built)``), and its header (a new correlation id each send) every time: the
    bytes are what kafka-python's ``encode`` writes (tests/unit/test_wire_contract.py compares them).
    With ``write`` (kept in ``writers``, the Wire's, by ``id(built)``), the body at a version is what
    it returns (:mod:`.bodies`), not kafka-python's encoding of ``built``; with ``read`` (the same for
    every request of its class), its answers are read by it (:func:`_header_reading_answers`).
    Its class becomes a subclass with the same slots (one per Wire and class, in ``classes``), made
    with ``init=False`` as kafka-python makes its versioned classes, so no registry sees it.

    The class is swapped on the built object (``__class__``): kafka-python has no way to reuse an
    encoded body, the codecs build its own classes, and its connection writes what ``encode(header=True,
    framed=True)`` returns, which is what the subclass overrides."""
    from kafka.protocol.api_message import ApiMessage

    cls = type(built)
    once = classes.get(cls)
    if once is None:
        def encode(self: Any, version: int | None = None, header: bool = False, framed: bool = False) -> bytes:
            if version is not None:
                self.API_VERSION = version
            at = self.API_VERSION
            by_version = bodies[id(self)]
            body = by_version.get(at)
            if body is None:
                written = writers.get(id(self))
                body = by_version[at] = written(at) if written is not None else bytes(ApiMessage.encode(self))
            return _framed(self, body, header, framed)

        attrs: dict[str, Any] = {"__slots__": (), "encode": encode}
        if read is not None:  # its answers read by the wire (.bodies), not decoded by kafka-python
            header = _header_reading_answers(read)
            attrs["header_class"] = property(lambda self: header)
        once = classes[cls] = type(cls.__name__, (cls,), attrs, init=False)
    built.__class__ = once
    bodies[id(built)] = {}
    if write is not None:
        writers[id(built)] = write
    return built


def _write_body_ahead(built: Any, bodies: dict[int, dict[int, bytes]], writers: dict[int, Callable[[int], bytes]],
                      version: int) -> None:
    """The body of ``built`` (made by :func:`_encoding_body_once` with a writer) at ``version`` written
    now, before it is sent: its ``encode`` at that version takes it."""
    by_version, written = bodies.get(id(built)), writers.get(id(built))
    if by_version is not None and written is not None and version not in by_version:
        by_version[version] = written(version)


def _framed(request: Any, body: bytes, header: bool, framed: bool) -> bytes:
    """``body`` as kafka-python's ``encode(header=..., framed=...)`` returns it: after the request's header
    (a new correlation id each send) and the frame's size; one copy of the body (ListOffsets': 175 KB
    at 10,000 partitions), not two."""
    head = request.encode_header(flexible=request.flexible_version_q(request.API_VERSION)) if header else b""
    if framed:
        return b"".join(((len(head) + len(body)).to_bytes(4, "big"), head, body))
    return head + body if header else body


class Read(NamedTuple):
    """An answer the wire read from its bytes (:mod:`.bodies`): the typed answer, and the throttle
    time kafka-python's connection looks for on every answer it hands over."""

    typed: Any
    throttle_time_ms: int


class _ReadingAnswers:
    """What kafka-python's parser takes an answer's class for: it reads the response header with
    kafka-python's class at the version sent, then the body with ``read``; a body ``read`` does not
    take (an old version, tagged fields) is kafka-python's to decode, as before."""

    def __init__(self, answer_class: Any, read: Callable[[memoryview, int], Any], version: int):
        self.answer_class, self.read, self.version = answer_class, read, version

    def parse_header(self, data: Any) -> Any:
        return self.answer_class.parse_header(data)

    def decode(self, data: Any) -> Any:
        # kafka-python's buffer of the frame (a bytearray of its own, not written again): its bytes where they
        # are, not copied twice by read() (2.5 MB an lso at 30,000 partitions)
        raw = memoryview(data)[data.tell() :] if isinstance(data, bytearray) else memoryview(data.read())
        try:
            done = self.read(raw, self.version)
        except (IndexError, ValueError, struct.error):  # not what it expects: kafka-python's, whose error is the answer's
            done = None
        return self.answer_class.decode(raw) if done is None else Read(*done)


def _header_reading_answers(read: Callable[[memoryview, int], Any]) -> type:
    """kafka-python's request header class, whose answers are read by ``read``. kafka-python's
    parser asks the header of a request in flight for the class to decode its answer with
    (``get_response_class``); that is the one way to have its bytes without patching kafka-python.
    The header is kafka-python's own (its fields, its bytes); made with ``init=False`` as
    kafka-python makes its versioned classes."""
    from kafka.protocol.api_header import RequestHeader

    def get_response_class(self: Any) -> Any:
        answer_class = RequestHeader.get_response_class(self)
        return None if answer_class is None else _ReadingAnswers(answer_class, read, self.request_api_version)

    return type(RequestHeader.__name__, (RequestHeader,), {"__slots__": (), "get_response_class": get_response_class}, init=False)


_READING_CLASSES: dict[type, type] = {}  # a kafka-python request class -> its subclass whose answers the wire reads


def _reading_answers(built: Any, read: Callable[[memoryview, int], Any]) -> Any:
    """``built`` (a kafka-python request that is not kept, a Metadata) with its answers read by
    ``read`` (:func:`_header_reading_answers`): its class becomes a subclass with the same slots,
    made once per class, with ``init=False`` as kafka-python makes its versioned classes."""
    cls = type(built)
    reading = _READING_CLASSES.get(cls)
    if reading is None:
        header = _header_reading_answers(read)
        reading = _READING_CLASSES[cls] = type(cls.__name__, (cls,), {"__slots__": (), "header_class": property(lambda self: header)},
                                               init=False)
    built.__class__ = reading
    return built


def _negotiate_again(built: Any) -> None:
    """A kept request's version cleared, so the connection negotiates it again as for a new request
    (the broker may have been upgraded since). Private ``_version``: kafka-python's ``API_VERSION``
    setter refuses None, and its connection picks a version only for a request without one."""
    built._version = None


# -- small requests and answers in kafka-python's schema walkers, not the codecs it compiles ----------
# kafka-python compiles an encoder per request class and version, and a decoder per answer class and
# version, the first time one goes out or comes in: generated source parsed and compiled, 0.4-2.4 ms
# each on the IO thread (an `lso` at 30,000 partitions: 8, for ListTransactions, FindCoordinator,
# DescribeTransactions and DescribeConfigs, ~50M of the IO thread's ~385M instructions). A few
# strings and numbers are cheaper walked by its schema (``DataContainer.encode``/``decode``, which
# its compiled codecs stand in for: the same bytes, the same objects, tests/unit/test_wire_contract.py
# compares them); a large one is compiled for, as before.
SMALL_ITEMS = 64  # a request walked: at most this many list items (at every level)
SMALL_ANSWER_BYTES = 4096  # an answer walked: at most this many bytes


def _items_within(message: Any, budget: int) -> int:
    """``budget`` less the list items in ``message`` (a kafka-python message, at every level);
    negative once past it (counting stops there)."""
    from kafka.protocol.data_container import DataContainer

    for name in type(message).fields:
        value = getattr(message, name, None)
        if isinstance(value, list):
            budget -= len(value)
            for item in value:
                if budget < 0:
                    return budget
                if isinstance(item, DataContainer):
                    budget = _items_within(item, budget)
        elif isinstance(value, DataContainer):
            budget = _items_within(value, budget)
        if budget < 0:
            return budget
    return budget


class _WalkingSmallAnswers:
    """What kafka-python's parser takes an answer's class for (as :class:`_ReadingAnswers`): a small
    answer decoded by its schema walker, a large one (or of a class with a decode of its own,
    ApiVersions') by kafka-python's compiled decoder."""

    def __init__(self, answer_class: Any, version: int):
        self.answer_class, self.version = answer_class, version

    def parse_header(self, data: Any) -> Any:
        return self.answer_class.parse_header(data)

    def decode(self, data: Any) -> Any:
        from kafka.protocol.api_message import ApiMessage

        cls, version = self.answer_class, self.version
        if len(data) - data.tell() > SMALL_ANSWER_BYTES or cls.decode.__func__ is not ApiMessage.decode.__func__:
            return cls.decode(data)
        flexible = cls.flexible_version_q(version)
        # DataContainer's decode (the schema walker), past ApiMessage's (the compiled decoder)
        return super(ApiMessage, cls).decode(data, version=version, compact=flexible, tagged=flexible, data_class=cls[None])


_WALKING_CLASSES: dict[type, type] = {}  # a kafka-python request class -> its subclass that walks small ones


def _walking_small(built: Any) -> Any:
    """``built`` (a kafka-python request whose body the wire neither writes nor whose answers it reads)
    encoded by kafka-python's schema walker when small, and its small answers decoded by it
    (:class:`_WalkingSmallAnswers`): its class becomes :func:`_walking_class`'s subclass."""
    from kafka.protocol.api_message import ApiMessage

    cls = type(built)
    if not isinstance(built, ApiMessage) or cls.encode is not ApiMessage.encode:
        return built  # not kafka-python's message, or one that encodes itself (.describe_codec's)
    built.__class__ = _walking_class(cls)
    return built


def _walking_class(cls: type) -> type:
    """kafka-python's request class ``cls`` as a subclass with the same slots whose small requests and
    answers are walked by their schema, made once per class, with ``init=False`` as kafka-python makes
    its versioned classes."""
    from kafka.protocol.api_header import RequestHeader
    from kafka.protocol.data_container import DataContainer

    walking = _WALKING_CLASSES.get(cls)
    if walking is None:
        def encode(self: Any, version: int | None = None, header: bool = False, framed: bool = False) -> Any:
            if version is not None:
                self.API_VERSION = version
            if self.API_VERSION is None or _items_within(self, SMALL_ITEMS) < 0:
                return cls.encode(self, header=header, framed=framed)  # kafka-python's compiled encoder
            flexible = self.flexible_version_q(self.API_VERSION)
            return _framed(self, DataContainer.encode(self, version=self.API_VERSION, compact=flexible, tagged=flexible), header, framed)

        def get_response_class(self: Any) -> Any:
            answer_class = RequestHeader.get_response_class(self)
            return None if answer_class is None else _WalkingSmallAnswers(answer_class, self.request_api_version)

        header = type(RequestHeader.__name__, (RequestHeader,), {"__slots__": (), "get_response_class": get_response_class}, init=False)
        walking = _WALKING_CLASSES[cls] = type(cls.__name__, (cls,), {"__slots__": (), "encode": encode,
                                                                         "header_class": property(lambda self: header)}, init=False)
    return walking
