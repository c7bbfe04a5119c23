"""DescribeProducers (KIP-664), one request per leader."""

from __future__ import annotations

from operator import attrgetter
from typing import Any

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka.wire.names import made, topic_columns
from kafkatxn.model import ProducerState


def _describe_producers(_wire: Any, request: p.DescribeProducers) -> Any:
    from kafka.protocol.admin.transactions import DescribeProducersRequest

    topics = [
        DescribeProducersRequest.TopicRequest(name=t, partition_indexes=ps) for t, ps in p.by_topic(request.partitions).items()
    ]
    return DescribeProducersRequest(topics=topics)


_PARTITION = attrgetter("partition_index", "error_code", "active_producers")
_PRODUCER = attrgetter("producer_id", "producer_epoch", "last_sequence", "last_timestamp", "coordinator_epoch",
                       "current_txn_start_offset")


def _decode_describe_producers(_request: p.DescribeProducers, resp: Any) -> p.DescribeProducersResponse:
    # Every partition written to has a producer in the answer (30,000 at 30,000 partitions): made
    # column by column, with no Python-level step per partition or producer.
    out: list[p.PartitionProducers] = []
    for tps, errors, actives in topic_columns(resp.topics, _PARTITION):
        producers = [tuple(made(ProducerState, map(_PRODUCER, active))) for active in actives]
        out.extend(made(p.PartitionProducers, zip(tps, errors, producers)))
    return p.DescribeProducersResponse(tuple(out))


CODECS = {p.DescribeProducers: (_describe_producers, _decode_describe_producers)}
