"""The Fetch body the wire writes (kafkatxn/kafka/wire/fetch_body.py) is kafka-python's, at every version sent."""

import pytest

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka import wire
from kafkatxn.kafka.wire import fetch, fetch_body
from kafkatxn.model import TopicPartition

ORDERS, PAYMENTS = TopicPartition("orders", 0), TopicPartition("payments", 3)
# Over 127 partitions of a topic and a topic name over 127 bytes: two-byte lengths in flexible versions.
MANY = tuple(p.FetchOffset(TopicPartition(topic, i), i * 7) for topic in ("orders", "t" * 200, "p\u00e4yments") for i in range(300))

REQUESTS = [
    p.Fetch((p.FetchOffset(ORDERS, 5), p.FetchOffset(PAYMENTS, 9), p.FetchOffset(TopicPartition("orders", 2), 2**40, 77)), True, 1000, 100, 250),
    p.Fetch((p.FetchOffset(ORDERS, 0),), False),
    p.Fetch(MANY, True),
    p.Fetch((), False),
]


@pytest.mark.parametrize("request_", REQUESTS, ids=["mixed", "one", "many", "none"])
def test_a_fetch_body_is_kafka_pythons_at_every_version(request_):
    reference = fetch._fetch(None, request_)  # kafka-python's object, every partition in it
    for version in range(fetch.MIN_VERSION, fetch.MAX_VERSION + 1):
        assert fetch_body.fetch_body(request_, version) == bytes(reference.encode(version=version))
    with pytest.raises(ValueError):
        fetch_body.fetch_body(request_, fetch.MAX_VERSION + 1)


def test_a_fetch_goes_out_as_kafka_pythons_with_its_header_built_per_send_and_read_by_the_wire():
    request_ = REQUESTS[0]
    w = wire.Wire(None)
    sent, again = w._reused(1, request_), w._reused(1, request_)
    assert sent is not again and not w._built and not w._bodies and not w._writers  # nothing kept
    fresh = w._encode(request_)
    assert type(sent).__name__ == type(fresh).__name__ and isinstance(sent, type(fresh))
    assert (sent._min_version, sent._max_version) == (fresh._min_version, fresh._max_version) == (4, 12)
    for version in range(4, 13):
        sent.with_header(correlation_id=7, client_id="kafkatxn")
        fresh.with_header(correlation_id=7, client_id="kafkatxn")
        fresh.API_VERSION = version
        assert sent.encode(version=version, header=True, framed=True) == bytes(fresh.encode(version=version, header=True, framed=True))
    # Its answers are read from their bytes by the wire (.fetch_answers), as a Fetch built by the codec's.
    from kafkatxn.kafka.wire.fetch_answers import read_fetch

    assert sent.header.get_response_class().read is read_fetch
