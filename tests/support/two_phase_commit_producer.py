"""A real producer whose transactions use two-phase commit (KIP-939), for the integration tests.

No released Kafka client opens one yet: kafka-clients up to 4.4.0 has the
``transaction.two.phase.commit.enable`` setting but never puts ``Enable2Pc`` in its
InitProducerId request (nothing in the jar calls ``InitProducerIdRequestData.setEnable2Pc``), and
librdkafka has no 2PC at all. kafka-python 3.x's producer knows InitProducerId v6 but sends at most
v4, so this module makes its first InitProducerId a v6 request with ``enable2_pc`` set. Everything
else (AddPartitionsToTxn, Produce, the coordinator's bookkeeping) is the real client and broker.

The broker must run with ``transaction.two.phase.commit.enable=true`` and, while InitProducerId v6
is still marked unstable (Kafka 4.x), ``unstable.api.versions.enable=true``. The coordinator then
records the transaction timeout as 2147483647 ms, which is how kafkatxn recognises 2PC.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from kafka import KafkaProducer
from kafka.producer import transaction_manager as _tm

BROKER_SETTINGS = {
    "transaction.two.phase.commit.enable": "true",
    "unstable.api.versions.enable": "true",
}


class _TwoPhaseCommitInit(_tm.InitProducerIdHandler):
    def __init__(self, transaction_manager, transaction_timeout_ms, is_epoch_bump=False):
        super().__init__(transaction_manager, transaction_timeout_ms, is_epoch_bump)
        if not is_epoch_bump:
            self.request = _tm.InitProducerIdRequest(
                transactional_id=self.transactional_id,
                transaction_timeout_ms=transaction_timeout_ms,
                producer_id=-1,
                producer_epoch=-1,
                enable2_pc=True,
                keep_prepared_txn=False,
                min_version=6,
                max_version=6,
            )


@contextmanager
def two_phase_commit_init() -> Iterator[None]:
    """While active, transactional kafka-python producers initialise with Enable2Pc=true."""
    original = _tm.InitProducerIdHandler
    _tm.InitProducerIdHandler = _TwoPhaseCommitInit
    try:
        yield
    finally:
        _tm.InitProducerIdHandler = original


def open_two_phase_commit_transaction(bootstrap: str, transactional_id: str, topic: str, partition: int,
                                      records: int = 3) -> KafkaProducer:
    """Begin a 2PC transaction, write ``records`` to ``topic``/``partition`` and leave it open (the
    caller plays the external transaction manager that has not decided yet). Returns the producer;
    close it with ``close(timeout=0)`` (closing does not end the transaction)."""
    with two_phase_commit_init():
        producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id, acks="all")
        producer.init_transactions()
    producer.begin_transaction()
    for i in range(records):
        producer.send(topic, value=f"2pc-{i}".encode(), partition=partition)
    producer.flush(timeout=30)
    return producer
