"""What changes a transaction: WriteTxnMarkers and fencing a transactional id (FindCoordinator and
InitProducerId), all on the wire, with the waiting each needs: for a partition's leader before a
marker, for a busy or moved coordinator to fence.

One Kafka API family per module (as kminion has one file per API), mixed into
:class:`kafkatxn.kafka.facade.Cluster`; the sending, deadline and error translation are the
:class:`kafkatxn.kafka.session.Session`'s.
"""

from __future__ import annotations

import logging
import time

from kafkatxn.errors import ClusterError
from kafkatxn.kafka import protocol as proto
from kafkatxn.kafka import retry
from kafkatxn.kafka.retry import NO_ANSWER, Failed
from kafkatxn.model import ProducerState, TopicPartition

log = logging.getLogger("kafkatxn.cluster")

# Waiting for a partition's new leader may use this share of the deadline; the rest is kept for the
# marker and its verification. Brokers notice a dead leader within their session timeout (seconds).
LEADER_WAIT_SHARE = 2 / 3
LEADER_POLL_S = 0.5
# The share of the time left that a fence's retries may take (retry.RETRIES["InitProducerId"] says
# which answers are retried): all of it but the last pauses, as the fence is the command's action.
FENCE_SHARE = 1.0


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
                # Asked of that broker only: the producers must be the ones the leader named reports
                # (a retry elsewhere would answer for a new leader while this names the old one).
                described = self.describe_producers([tp], broker_id=info.leader)
                if tp in described.value:
                    return info.leader, described.value[tp], ""
                why = "; ".join(map(str, described.missing)) or f"no answer from broker {info.leader}"
            if not self.pause_while_facts_settle():
                return None, None, why

    def pause_while_facts_settle(self) -> bool:
        """One pause before asking again (from fresh metadata) while leaders or coordinators move
        after a broker died; False, without pausing, once the share of the deadline for waiting
        (:data:`LEADER_WAIT_SHARE`) is spent: the rest is kept for the action and its verification."""
        stop_at = self.deadline - self.config.timeout_s * (1 - LEADER_WAIT_SHARE)
        if time.monotonic() + LEADER_POLL_S >= stop_at:
            return False
        time.sleep(LEADER_POLL_S)
        return True

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
        """:meth:`fence_transactional_id` until it succeeds, fails with what the one policy
        (``retry.RETRIES["InitProducerId"]``) does not ask again, or the pauses near the deadline;
        returns what was retried (for the user to see). A coordinator answering
        CONCURRENT_TRANSACTIONS is completing the abort this fence started (or one before it): this
        returns only once InitProducerId succeeds, which means that abort completed, as a
        transactional producer's init_transactions does. NOT_COORDINATOR (and a coordinator that did
        not answer) is found again first."""
        tried: list[str] = []

        def send(tids: list[str]) -> tuple[dict[str, None], dict[str, Failed]]:
            try:
                self.fence_transactional_id(transactional_id, transaction_timeout_ms)
                return {transactional_id: None}, {}
            except FenceNotDone as exc:
                tried.append(exc.kafka_error)
                return {}, {transactional_id: Failed(exc.error, exc, exc.api)}

        # A fence is the action itself: its retries may take the whole deadline (verify asks anew).
        fenced = retry.ask([transactional_id], send, "InitProducerId", self.deadline, share=FENCE_SHARE)
        if transactional_id in fenced.failed:
            raise fenced.failed[transactional_id]
        return tried

    def fence_transactional_id(self, transactional_id: str, transaction_timeout_ms: int) -> None:
        """Bump the epoch of ``transactional_id``: FindCoordinator, then InitProducerId at the
        coordinator, on the wire (once; :meth:`fence_transactional_id_retrying` retries).

        The coordinator aborts the id's open transaction and fences its live producer; it answers
        once that abort has completed (CONCURRENT_TRANSACTIONS until then: :class:`FenceNotDone`).
        Describe the id before and after to see the old and new producer id and epoch.
        """
        what = f"fencing transactional id {transactional_id!r}"
        coordinators = self.find_transaction_coordinators([transactional_id])
        node = coordinators.value.get(transactional_id)
        if node is None:
            gap = next(iter(coordinators.missing), None)
            reason = gap.reason if gap is not None else "no coordinator named"
            # A Kafka error name, or "FindCoordinator: <why no broker answered>".
            error = NO_ANSWER if reason.startswith("FindCoordinator: ") else reason
            if retry.how("FindCoordinator", error) is not None:
                raise FenceNotDone(f"{what} failed: finding its coordinator: {reason}", reason, error, "FindCoordinator")
            raise ClusterError(f"{what} failed: finding its coordinator: {reason}")
        (resp,) = self._send_all([(node, proto.InitProducerId(transactional_id, transaction_timeout_ms))])
        if isinstance(resp, BaseException):
            self.errors.raise_if_auth_in(resp)
            # The coordinator died or froze: another broker takes its log partition over; ask again.
            raise FenceNotDone(f"{what} failed: coordinator {node}: {self.errors.reason(resp)}", f"no answer from broker {node}", NO_ANSWER)
        if resp.error is None:
            log.debug("fenced %r: producer id %s epoch %s", transactional_id, resp.producer_id, resp.producer_epoch)
            return
        if retry.how("InitProducerId", resp.error) is not None:
            raise FenceNotDone(f"{what} failed: coordinator {node} answered {resp.error}", resp.error, resp.error)
        if resp.error == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED":
            raise ClusterError(f"{what} failed: not authorized: needs WRITE on TransactionalId {transactional_id}")
        raise ClusterError(f"{what} failed: {INIT_PRODUCER_ID_ERRORS.get(resp.error, resp.error)}")


class FenceNotDone(ClusterError):
    """InitProducerId not done, for a reason a later try cures (a busy, loading or moved coordinator):
    ``kafka_error`` in the user's words, ``error`` as the retry table names it, of ``api``."""

    def __init__(self, message: str, kafka_error: str, error: str, api: str = "InitProducerId"):
        super().__init__(message)
        self.kafka_error = kafka_error
        self.error = error
        self.api = api


# What InitProducerId's errors mean, in the user's terms (Kafka's name where it says enough).
INIT_PRODUCER_ID_ERRORS = {
    "INVALID_TRANSACTION_TIMEOUT": "the transaction timeout is larger than the brokers' transaction.max.timeout.ms "
                                   "(INVALID_TRANSACTION_TIMEOUT)",
}
