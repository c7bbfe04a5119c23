"""What changes a transaction: WriteTxnMarkers and fencing a transactional id (InitProducerId).

One Kafka API family per module (as kminion has one file per API), mixed into
:class:`kafkatxn.kafka.facade.Cluster`; the sending, deadline and error translation are the
:class:`kafkatxn.kafka.session.Session`'s.
"""

from __future__ import annotations

import logging

from kafkatxn.kafka import protocol as proto
from kafkatxn.model import TopicPartition

log = logging.getLogger("kafkatxn.cluster")


class MarkersApi:
    def write_abort_marker(
        self, tp: TopicPartition, producer_id: int, producer_epoch: int, coordinator_epoch: int, leader: int
    ) -> str | None:
        """WriteTxnMarkers(ABORT) for one producer on one partition, sent to its leader.

        Returns None on success or the broker's error name.
        """
        (resp,) = self._send_all([(leader, proto.WriteAbortMarker(tp, producer_id, producer_epoch, coordinator_epoch))])
        if isinstance(resp, BaseException):
            self.errors.raise_if_auth_in(resp)
            raise self.errors.translate(resp, f"writing the abort marker to broker {leader}")
        return resp.error

    def fence_transactional_id(self, transactional_id: str, transaction_timeout_ms: int) -> None:
        """Bump the epoch of ``transactional_id`` (InitProducerId through a transactional producer).

        The coordinator aborts the id's open transaction and fences its live producer; this returns
        once that abort has completed. Describe the id before and after to see the old and new
        producer id and epoch.
        """
        from confluent_kafka import KafkaException, Producer

        # librdkafka logs fatal errors itself; they reach the user as one translated line instead,
        # and its log lines only with --debug (the NullHandler keeps logging's stderr fallback out).
        librdkafka_log = logging.getLogger("kafkatxn.librdkafka")
        if not librdkafka_log.handlers:
            librdkafka_log.addHandler(logging.NullHandler())
        conf = self.config.librdkafka(
            **{"transactional.id": transactional_id, "transaction.timeout.ms": transaction_timeout_ms, "logger": librdkafka_log}
        )
        # librdkafka refuses a transactional producer whose socket timeout exceeds its transaction timeout.
        conf["socket.timeout.ms"] = min(int(conf["socket.timeout.ms"]), transaction_timeout_ms + 100)
        what = f"fencing transactional id {transactional_id!r}"
        try:
            producer = Producer(conf)
        except KafkaException as exc:
            raise self.errors.translate(exc, what) from exc
        try:
            producer.init_transactions(self.remaining_s())
        except KafkaException as exc:
            raise self.errors.translate(exc, what) from exc
        finally:
            self.requests["InitProducerId"] += 1
            try:
                producer.close()
            except KafkaException:  # a failed producer repeats its fatal error on close
                log.debug("closing the fencing producer failed", exc_info=True)
