"""InitProducerId for a transactional id: what fencing it sends to the id's coordinator."""

from __future__ import annotations

from typing import Any

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka.wire.names import error_name


def _init_producer_id(_wire: Any, request: p.InitProducerId) -> Any:
    from kafka.protocol.producer.transaction import InitProducerIdRequest

    # producer_id/epoch -1 (v3+): a new producer's first call, as init_transactions sends it; no 2PC
    # (v6's enable2_pc/keep_prepared_txn false: a prepared transaction is aborted, as by earlier versions).
    return InitProducerIdRequest(
        transactional_id=request.transactional_id, transaction_timeout_ms=request.transaction_timeout_ms,
        producer_id=-1, producer_epoch=-1, enable2_pc=False, keep_prepared_txn=False,
    )


def _decode_init_producer_id(_request: p.InitProducerId, resp: Any) -> p.InitProducerIdResponse:
    return p.InitProducerIdResponse(error_name(resp.error_code), resp.producer_id, resp.producer_epoch)


CODECS = {p.InitProducerId: (_init_producer_id, _decode_init_producer_id)}
