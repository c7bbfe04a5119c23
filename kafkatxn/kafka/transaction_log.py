"""What ``__transaction_state`` holds of given transactional ids: the log partitions that own them,
read by the one reader of the log (:func:`kafkatxn.kafka.log_reader.read_transaction_log`) under the
command's deadline. Mixed into :class:`kafkatxn.kafka.facade.Cluster`.

Reading needs READ on Topic ``__transaction_state`` (DESCRIBE to see its partitions in the metadata);
an id whose partition could not be read is a :class:`Missing` (naming the partition), never an error
that ends the command.
"""

from __future__ import annotations

import time
from typing import Iterable

from kafkatxn.model import TRANSACTION_STATE_TOPIC, Missing, Partial, TopicPartition, TransactionalId, TransactionLogHistory

ACL_READ_LOG = f"READ on Topic {TRANSACTION_STATE_TOPIC}"
# A log partition's read may take this share of the time left; the rest is kept for the command's
# other requests (a leader that does not answer costs a share, not the deadline).
LOG_READ_SHARE = 0.5


class TransactionLogApi:
    def transaction_log_histories(self, transactional_ids: Iterable[str]) -> Partial[dict[str, TransactionLogHistory]]:
        """Per id, its records in the log partition that owns it (``abs(hashCode) % partitions``)."""
        from kafkatxn.audit.txnlog import coordinator_partition
        from kafkatxn.audit.txnlog_records import TxnLogRecord
        from kafkatxn.kafka.log_reader import read_transaction_log

        tids = sorted(set(transactional_ids))
        if not tids:
            return Partial({})
        count = sum(1 for p in self.metadata().partitions if p.topic == TRANSACTION_STATE_TOPIC)
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
            self.requests["Fetch"] += 1
            try:
                for chunk in read_transaction_log(self.config.librdkafka(), [part], timeout_ms=left_ms):
                    for entry in chunk:
                        r = entry.record
                        if type(r) is not TxnLogRecord:
                            undecoded += 1
                        elif r.transactional_id in records:
                            records[r.transactional_id].append(r)
            except (RuntimeError, TimeoutError) as exc:
                # The reader says its failure in one redacted line; an authorization failure names the ACL.
                acl = _acl_needed(str(exc))
                why = f"{subject} not read: " + (f"not authorized: needs {acl}" if acl else str(exc))
                missing += [Missing(TransactionalId(tid), why, acl=acl) for tid in ids]
                continue
            out.update({tid: TransactionLogHistory(tid, part, tuple(records[tid]), undecoded) for tid in ids})
        return Partial(out, missing)


def _acl_needed(failure: str) -> str:
    """The ACL a refused read needs, from the reader's one line (librdkafka's words for the error):
    READ on the log, or DESCRIBE on the group id the reader's consumer names (it never joins it)."""
    from kafkatxn.kafka.log_reader import _CONSUMER_FIXED

    text = failure.lower()
    if "topic authorization" in text:
        return ACL_READ_LOG
    if "group authorization" in text:
        return f"DESCRIBE on Group {_CONSUMER_FIXED['group.id']}"
    return ""
