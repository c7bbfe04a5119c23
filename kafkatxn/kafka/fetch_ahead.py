"""Reads a command is about to make, sent ahead together: one Fetch per leader and isolation level.

The verdicts read two things from the logs once the coordinators have answered: the first record of
a transaction no coordinator dates (its age) and the ``__transaction_state`` partition of an id whose
commit may have been lost. Both are known at the same moment, so they go down in one Fetch per
leader; the readers (``first_record_timestamps``, the log reader) then find their first page in the
run (:meth:`kafkatxn.kafka.session.Session.one_run`) and ask the brokers only for the rest.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from kafkatxn.kafka import protocol as proto
from kafkatxn.kafka.offsets import FETCH_MAX_BYTES, FETCH_PARTITION_BYTES
from kafkatxn.model import TRANSACTION_STATE_TOPIC, TopicPartition


def _complete(part: proto.FetchedPartition, offset: int, read_committed: bool) -> bool:
    """An answer a reader can take as its own: no error, and records, or the end of the log."""
    end = part.last_stable_offset if read_committed else part.high_watermark
    return part.error is None and (bool(part.batches) or offset >= end)


class FetchAheadApi:
    def fetch_ahead(self, reads: Mapping[TopicPartition, tuple[int, int]], read_committed: bool = False) -> None:
        """Fetch each partition from its offset with its own byte limit (``reads[tp] = (offset,
        max_bytes)``), one request per leader, and keep the answers for the run. Outside a run it
        sends nothing (nobody would find them). What fails is left to the reader, which asks again
        and names it: an answer kept is one it would have taken."""
        if self._answers is None or not reads:
            return
        # Once a run: a read fetched ahead already (kept or not) is not sent again.
        _known, ask = self.remembered("FetchAhead", [(tp, offset, read_committed) for tp, (offset, _) in reads.items()])
        by_node, _unplaced = self._by_leader([tp for tp, _, _ in ask])
        requests = []
        for node, tps in by_node.items():
            # The small reads first: a broker fills a response in the order asked.
            tps = sorted(tps, key=lambda tp: (reads[tp][1], tp))
            limit = max(FETCH_MAX_BYTES, sum(reads[tp][1] for tp in tps))
            requests.append((node, proto.Fetch(tuple(proto.FetchOffset(tp, *reads[tp]) for tp in tps), read_committed, limit,
                                               FETCH_PARTITION_BYTES)))
        for (_node, _request), resp in zip(requests, self._send_all(requests) if requests else []):
            if isinstance(resp, BaseException) or resp.error is not None:
                continue
            self.remember("Fetch", {(part.tp, reads[part.tp][0], read_committed): part for part in resp.partitions
                                    if part.tp in reads and _complete(part, reads[part.tp][0], read_committed)})
            self.remember("FetchAhead", {(part.tp, reads[part.tp][0], read_committed): True for part in resp.partitions
                                         if part.tp in reads and part.error is None})
            # Every answer carries its partition's LSO and high watermark of that moment, whatever the level.
            self.remember("FetchedOffsets", {part.tp: (part.last_stable_offset, part.high_watermark) for part in resp.partitions
                                             if part.error is None and 0 <= part.last_stable_offset <= part.high_watermark})

    def offsets_fetched_ahead(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, tuple[int, int]]:
        """``(LSO, HW)`` of the partitions this run fetched ahead, as their Fetch answers gave them."""
        known, _ask = self.remembered("FetchedOffsets", list(partitions))
        return known

    def fetch_ahead_for_verdicts(self, first_records: Mapping[TopicPartition, int], log_ids: Iterable[str]) -> None:
        """The reads the verdicts make next, ahead in one Fetch per leader: the records at
        ``first_records`` (transactions' start offsets, to date them) and the first page of the
        ``__transaction_state`` partitions that own ``log_ids`` (whether their coordinator committed)."""
        from kafkatxn.kafka.transaction_log import LOG_FETCH_BYTES
        from kafkatxn.verdicts import coordinator_partition

        reads = {tp: (offset, FETCH_PARTITION_BYTES) for tp, offset in first_records.items()}
        count = len(self.metadata().transaction_log) if log_ids else 0
        for tid in log_ids if count else ():
            reads[TopicPartition(TRANSACTION_STATE_TOPIC, coordinator_partition(tid, count))] = (0, LOG_FETCH_BYTES)
        self.fetch_ahead(reads)
