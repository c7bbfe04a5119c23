"""The coordinator's APIs (ListTransactions, FindCoordinator for transactional ids, DescribeTransactions)
and WriteTxnMarkers."""

from __future__ import annotations

from typing import Any

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka.wire.names import error_name
from kafkatxn.model import TopicPartition

# The transaction version kafkatxn's markers declare (WriteTxnMarkers v2+): see _write_abort_marker.
MARKER_TRANSACTION_VERSION = 0


def _list_transactions(_wire: Any, request: p.ListTransactions) -> Any:
    from kafka.protocol.admin.transactions import ListTransactionsRequest

    kwargs: dict[str, Any] = {
        "state_filters": list(request.states),
        "producer_id_filters": list(request.producer_ids),
        "min_version": 0,
    }
    if request.min_duration_ms is not None:
        kwargs["duration_filter"] = int(request.min_duration_ms)
        kwargs["min_version"] = 1
    if request.pattern is not None:
        kwargs["transactional_id_pattern"] = request.pattern
        kwargs["min_version"] = 2
    return ListTransactionsRequest(**kwargs)


def find_coordinator(keys: tuple[str, ...], key_type: int, batched: bool) -> Any:
    """FindCoordinator for ``keys`` (key type 0: groups, 1: transactional ids): every key in one
    request from v4 on (``batched``), one key per request before."""
    from kafka.protocol.metadata import FindCoordinatorRequest

    if batched:
        return FindCoordinatorRequest(key_type=key_type, coordinator_keys=list(keys), min_version=4)
    (key,) = keys
    return FindCoordinatorRequest(key=key, key_type=key_type, max_version=3)


def coordinators(keys: tuple[str, ...], batched: bool, resp: Any) -> list[tuple[str, str | None, int]]:
    """``(key, error, node id)`` per key of a FindCoordinator answer, batched or not."""
    if batched:
        return [(c.key, error_name(c.error_code), c.node_id) for c in resp.coordinators]
    (key,) = keys
    return [(key, error_name(resp.error_code), resp.node_id)]


def _find_coordinators(_wire: Any, request: p.FindTransactionCoordinators) -> Any:
    return find_coordinator(request.transactional_ids, 1, request.batched)


def _describe_transactions(_wire: Any, request: p.DescribeTransactions) -> Any:
    from kafka.protocol.admin.transactions import DescribeTransactionsRequest

    return DescribeTransactionsRequest(transactional_ids=list(request.transactional_ids))


def _write_abort_marker(_wire: Any, request: p.WriteAbortMarker) -> Any:
    from kafka.protocol.producer.transaction import WriteTxnMarkersRequest

    marker_cls = WriteTxnMarkersRequest.WritableTxnMarker
    marker = marker_cls(
        producer_id=request.producer_id,
        producer_epoch=request.producer_epoch,
        transaction_result=request.commit,
        topics=[marker_cls.WritableTxnMarkerTopic(name=request.tp.topic, partition_indexes=[request.tp.partition])],
        coordinator_epoch=request.coordinator_epoch,
        # v2 (KIP-1228) says which transaction version the marker ends. 0 asks the leader for the
        # check a marker of the open transaction's own epoch passes (epoch >= the partition's); a
        # version-2 marker must carry a bumped epoch, which would fence the producer on this partition.
        transaction_version=MARKER_TRANSACTION_VERSION,
    )
    return WriteTxnMarkersRequest(markers=[marker])


def _decode_list_transactions(_request: p.ListTransactions, resp: Any) -> p.ListTransactionsResponse:
    return p.ListTransactionsResponse(
        error_name(resp.error_code),
        tuple(p.ListedTransaction(t.transactional_id, t.producer_id, t.transaction_state) for t in resp.transaction_states),
    )


def _decode_find_coordinators(request: p.FindTransactionCoordinators, resp: Any) -> p.FindTransactionCoordinatorsResponse:
    return p.FindTransactionCoordinatorsResponse(
        tuple(p.Coordinator(*c) for c in coordinators(request.transactional_ids, request.batched, resp))
    )


def _decode_describe_transactions(_request: p.DescribeTransactions, resp: Any) -> p.DescribeTransactionsResponse:
    return p.DescribeTransactionsResponse(tuple(
        p.TransactionState(
            t.transactional_id, error_name(t.error_code), t.transaction_state, t.producer_id, t.producer_epoch,
            t.transaction_timeout_ms, t.transaction_start_time_ms,
            frozenset(TopicPartition(topic.topic, part) for topic in t.topics for part in topic.partitions),
        )
        for t in resp.transaction_states
    ))


def _decode_write_abort_marker(_request: p.WriteAbortMarker, resp: Any) -> p.WriteAbortMarkerResponse:
    for result in resp.markers:
        for topic in result.topics:
            for part in topic.partitions:
                if part.error_code:
                    return p.WriteAbortMarkerResponse(error_name(part.error_code))
    return p.WriteAbortMarkerResponse(None)


CODECS = {
    p.ListTransactions: (_list_transactions, _decode_list_transactions),
    p.FindTransactionCoordinators: (_find_coordinators, _decode_find_coordinators),
    p.DescribeTransactions: (_describe_transactions, _decode_describe_transactions),
    p.WriteAbortMarker: (_write_abort_marker, _decode_write_abort_marker),
}
