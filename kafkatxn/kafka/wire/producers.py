"""DescribeProducers (KIP-664), one request per leader."""

from __future__ import annotations

from typing import Any

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka.wire.names import error_name
from kafkatxn.model import ProducerState, TopicPartition


def _describe_producers(_wire: Any, request: p.DescribeProducers) -> Any:
    from kafka.protocol.admin.transactions import DescribeProducersRequest

    topics = [
        DescribeProducersRequest.TopicRequest(name=t, partition_indexes=ps) for t, ps in p.by_topic(request.partitions).items()
    ]
    return DescribeProducersRequest(topics=topics)


def _decode_describe_producers(_request: p.DescribeProducers, resp: Any) -> p.DescribeProducersResponse:
    out = []
    append, answer, state = out.append, p.PartitionProducers, ProducerState
    for topic in resp.topics:
        name = topic.name
        for part in topic.partitions:
            producers = tuple([
                state(s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp, s.coordinator_epoch,
                      s.current_txn_start_offset)
                for s in part.active_producers
            ])
            append(answer(TopicPartition(name, part.partition_index), error_name(part.error_code) if part.error_code else None,
                          producers))
    return p.DescribeProducersResponse(tuple(out))


CODECS = {p.DescribeProducers: (_describe_producers, _decode_describe_producers)}
