"""What changes a transaction: WriteTxnMarkers and fencing a transactional id (InitProducerId), with
the waiting each needs: for a partition's leader before a marker, for a busy coordinator to fence.

One Kafka API family per module (as kminion has one file per API), mixed into
:class:`kafkatxn.kafka.facade.Cluster`; the sending, deadline and error translation are the
:class:`kafkatxn.kafka.session.Session`'s.
"""

from __future__ import annotations

import logging
import time

from kafkatxn.errors import KafkatxnError
from kafkatxn.kafka import protocol as proto
from kafkatxn.kafka.errors import kafka_error_code
from kafkatxn.model import ProducerState, TopicPartition

log = logging.getLogger("kafkatxn.cluster")

# Waiting for a partition's new leader may use this share of the deadline; the rest is kept for the
# marker and its verification. Brokers notice a dead leader within their session timeout (seconds).
LEADER_WAIT_SHARE = 2 / 3
LEADER_POLL_S = 0.5
# What Admin.fenceProducers retries (KAFKA-16570): the coordinator is busy completing the previous
# transaction, or is loading its log partition. Retried within the deadline.
BUSY_COORDINATOR_ERRORS = frozenset({"CONCURRENT_TRANSACTIONS", "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR"})
FENCE_RETRY_BACKOFF_S = 0.2


class MarkersApi:
    def leader_and_producers(self, tp: TopicPartition) -> tuple[int | None, list[ProducerState] | None, str]:
        """The partition's leader, from fresh metadata, and the producers it reports: what a marker
        is checked against right before it is written.

        A leader that does not answer (it died, leadership is moving) is asked again as metadata
        changes, for a share of the command's deadline (:data:`LEADER_WAIT_SHARE`); then
        ``(None, None, why)``.
        """
        while True:
            info = next((p for p in self.metadata(refresh=True).partitions if p.tp == tp), None)
            if info is None or info.leader < 0:
                why = f"{tp} has no leader"
            else:
                described = self.describe_producers([tp])
                if tp in described.value:
                    return info.leader, described.value[tp], ""
                why = "; ".join(map(str, described.missing)) or f"no answer from broker {info.leader}"
            stop_at = self.deadline - self.config.timeout_s * (1 - LEADER_WAIT_SHARE)
            if time.monotonic() + LEADER_POLL_S >= stop_at:
                return None, None, why
            time.sleep(LEADER_POLL_S)

    def write_abort_marker(
        self, tp: TopicPartition, producer_id: int, producer_epoch: int, coordinator_epoch: int, leader: int, commit: bool = False
    ) -> str | None:
        """WriteTxnMarkers(ABORT) for one producer on one partition, sent to its leader; COMMIT when
        ``commit`` (a lost COMMIT marker restored: the request carries either result).

        Returns None on success or the broker's error name.
        """
        request = proto.WriteAbortMarker(tp, producer_id, producer_epoch, coordinator_epoch, commit)
        (resp,) = self._send_all([(leader, request)])
        if isinstance(resp, BaseException):
            self.errors.raise_if_auth_in(resp)
            raise self.errors.translate(resp, f"writing the {'commit' if commit else 'abort'} marker to broker {leader}")
        return resp.error

    def fence_transactional_id_retrying(self, transactional_id: str, transaction_timeout_ms: int) -> list[str]:
        """:meth:`fence_transactional_id` until it succeeds, fails with what a busy coordinator does
        not explain, or the deadline nears; returns the errors retried (for the user to see)."""
        retried: list[str] = []
        while True:
            try:
                self.fence_transactional_id(transactional_id, transaction_timeout_ms)
                return retried
            except KafkatxnError as exc:
                code = kafka_error_code(exc.__cause__) if exc.__cause__ is not None else None
                backoff = min(FENCE_RETRY_BACKOFF_S * 2 ** len(retried), 1.0)
                if code not in BUSY_COORDINATOR_ERRORS or self.deadline - time.monotonic() < backoff + 1.0:
                    raise
                retried.append(code)
                time.sleep(backoff)

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
