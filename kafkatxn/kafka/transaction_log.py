"""What ``__transaction_state`` holds: one log partition read or followed over the wire's Fetch, and
the records of given transactional ids in the partitions that own them, read under the command's
deadline by the one reader of the log (:func:`kafkatxn.kafka.log_fetch.read_fetched`, decoding with
:mod:`kafkatxn.kafka.txnlog`). Mixed into :class:`kafkatxn.kafka.facade.Cluster`.

Reading needs READ on Topic ``__transaction_state`` (DESCRIBE to see its partitions in the metadata);
an id whose partition could not be read is a :class:`Missing` (naming the partition), never an error
that ends the command.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable, Collection, Iterable, Iterator, Mapping

from kafkatxn.kafka.client_errors import authorization_error, clean
from kafkatxn.model import TRANSACTION_STATE_TOPIC, Missing, Partial, TopicPartition, TransactionalId, TransactionLogHistory

if TYPE_CHECKING:
    from kafkatxn.txnlog_records import DecodeCounts, TxnLogEntry
    from kafkatxn.kafka.protocol import FetchedPartition

ACL_READ_LOG = f"READ on Topic {TRANSACTION_STATE_TOPIC}"
# A log partition's read may take this share of the time left; the rest is kept for the command's
# other requests (a leader that does not answer costs a share, not the deadline).
LOG_READ_SHARE = 0.5
# One page of a log partition: a Fetch of at most this much of it (~50,000 records of the log).
LOG_FETCH_BYTES = 4 * 1024 * 1024


class FacadeLog:
    """A log topic's partitions fetched through the facade: leaders from its metadata, its per-broker
    budget, leadership errors and silent leaders asked again with fresh metadata (as the probe does)."""

    def __init__(self, cluster: Any, topic: str, follow: bool = False):
        self.cluster = cluster
        self.topic = topic
        self.follow = follow  # no command deadline: each poll gets the connection timeout afresh

    def fetch(self, positions: Mapping[int, int], max_wait_ms: int = 0) -> dict[int, FetchedPartition]:
        """One Fetch per leader; a partition whose leader moved or did not answer is asked again on
        the one policy (``retry.RETRIES["Fetch"]``). A refusal, or a partition still not answered,
        is raised as a LogReadError."""
        from kafkatxn.kafka import retry
        from kafkatxn.kafka.retry import NO_ANSWER, Failed

        c = self.cluster
        if self.follow:
            c.deadline = time.monotonic() + c.config.timeout_s + max_wait_ms / 1000
            c.silent.clear()
        wanted = {TopicPartition(self.topic, p): o for p, o in positions.items()}

        def send(pending: list[TopicPartition]) -> tuple[dict[TopicPartition, Any], dict[TopicPartition, Failed]]:
            answers, failed = c.fetch_from_leaders({tp: wanted[tp] for tp in pending}, False, LOG_FETCH_BYTES, max_wait_ms=max_wait_ms)
            # Another error is the reader's to handle (an offset out of range, a refused partition).
            out = {tp: part for tp, part in answers.items() if retry.how("Fetch", part.error) is None}
            failures = {tp: Failed(part.error, part) for tp, part in answers.items() if tp not in out}
            failures.update((tp, Failed(None if m.acl else NO_ANSWER, m)) for tp, m in failed.items())
            return out, failures

        fetched = retry.ask(wanted, send, "Fetch", c.deadline, refresh=lambda: c.metadata(refresh=True))
        refused = [m for m in fetched.failed.values() if isinstance(m, Missing) and m.acl]
        if refused:
            raise _failure(refused[0].subject, "TOPIC_AUTHORIZATION_FAILED", f"not authorized: needs READ on Topic {self.topic}")
        if fetched.failed:
            tp = next(tp for tp in wanted if tp in fetched.failed)
            last = fetched.failed[tp]
            if isinstance(last, Missing):
                raise _failure(tp, None, last.reason)
            raise _failure(tp, last.error, last.error)
        return {tp.partition: part for tp, part in fetched.answers.items()}

    def offset_at(self, partition: int, timestamp_ms: int) -> int:
        tp = TopicPartition(self.topic, partition)
        found = self.cluster.offsets_at([tp], timestamp_ms)
        if tp in found.value:
            return found.value[tp]
        m = found.missing[0]
        raise _failure(tp, "TOPIC_AUTHORIZATION_FAILED" if m.acl else None, m.reason)


def _failure(tp: object, code: str | None, reason: str) -> Exception:
    from kafkatxn.kafka.log_fetch import LogReadError

    return LogReadError(f"reading {tp} failed: {clean(reason)}", code)


class TransactionLogApi:
    def read_log_partition(
        self, partition: int, *, start_time_ms: int | None = None, topic: str = TRANSACTION_STATE_TOPIC,
        transactional_ids: Collection[str] | None = None, counts: DecodeCounts | None = None,
        next_offsets: dict[int, int] | None = None, timeout_s: float | None = None,
    ) -> Iterator[list[TxnLogEntry]]:
        """One ``__transaction_state`` partition, decoded, from its beginning or ``start_time_ms`` to its
        end now, within the command's deadline and ``timeout_s`` (when given), by
        :func:`kafkatxn.kafka.log_fetch.read_fetched` (over Fetch; its LogReadError carries Kafka's
        error name)."""
        from kafkatxn.kafka.log_fetch import read_fetched

        self.requests["ReadTransactionLog"] += 1
        return read_fetched(
            FacadeLog(self, topic), [partition], start_time_ms=start_time_ms, topic=topic,
            timeout_ms=max(1, int(min(self.remaining_s(), timeout_s or float("inf")) * 1000)),
            transactional_ids=transactional_ids, counts=counts, next_offsets=next_offsets,
        )

    def follow_log_partitions(
        self, start_offsets: dict[int, int], *, topic: str = TRANSACTION_STATE_TOPIC, transactional_ids: Collection[str] | None = None,
        counts: DecodeCounts | None = None, stop: Callable[[], bool] | None = None,
    ) -> Iterator[list[TxnLogEntry]]:
        """Records written to these log partitions from these offsets on, as they come: no deadline
        (``stop`` or the caller ends it); one chunk per poll, maybe empty."""
        from kafkatxn.kafka.log_fetch import follow_fetched

        return follow_fetched(FacadeLog(self, topic, follow=True), start_offsets, topic=topic, counts=counts,
                              transactional_ids=transactional_ids, stop=stop)

    def transaction_log_histories(self, transactional_ids: Iterable[str]) -> Partial[dict[str, TransactionLogHistory]]:
        """Per id, its records in the log partition that owns it (``abs(hashCode) % partitions``)."""
        from kafkatxn.verdicts import coordinator_partition
        from kafkatxn.txnlog_records import TxnLogRecord
        from kafkatxn.kafka.log_fetch import read_fetched

        tids = sorted(set(transactional_ids))
        if not tids:
            return Partial({})
        count = len(self.metadata().transaction_log)
        if not count:
            why = f"{TRANSACTION_STATE_TOPIC} is not in the metadata (not authorized: needs DESCRIBE on Topic {TRANSACTION_STATE_TOPIC})"
            return Partial({}, [Missing(TransactionalId(t), why) for t in tids])
        owners: dict[int, list[str]] = {}
        for tid in tids:
            owners.setdefault(coordinator_partition(tid, count), []).append(tid)
        out: dict[str, TransactionLogHistory] = {}
        missing: list[Missing] = []
        for part, ids in sorted(owners.items()):
            subject = TopicPartition(TRANSACTION_STATE_TOPIC, part)
            left_ms = int((self.deadline - time.monotonic()) * 1000 * LOG_READ_SHARE)
            if left_ms <= 0:
                missing += [Missing(TransactionalId(tid), f"{subject} not read: the deadline passed (raise --timeout)") for tid in ids]
                continue
            records: dict[str, list[TxnLogRecord]] = {tid: [] for tid in ids}
            undecoded = 0
            try:
                for chunk in read_fetched(FacadeLog(self, TRANSACTION_STATE_TOPIC), [part], timeout_ms=left_ms):
                    for entry in chunk:
                        r = entry.record
                        if type(r) is not TxnLogRecord:
                            undecoded += 1
                        elif r.transactional_id in records:
                            records[r.transactional_id].append(r)
            except (RuntimeError, TimeoutError) as exc:
                # The reader says its failure in one redacted line; an authorization failure names the ACL.
                acl = ACL_READ_LOG if authorization_error(getattr(exc, "code", None) or "") else ""
                why = f"{subject} not read: " + (f"not authorized: needs {acl}" if acl else str(exc))
                missing += [Missing(TransactionalId(tid), why, acl=acl) for tid in ids]
                continue
            out.update({tid: TransactionLogHistory(tid, part, tuple(records[tid]), undecoded) for tid in ids})
        return Partial(out, missing)
