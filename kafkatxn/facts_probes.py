"""The read_committed probes' answers kept from one gather to the next (:class:`ProbeMemo`, the
exporter's): a part of the fact layer's group facts (:mod:`kafkatxn.facts_lso`, whose
``finish_group_snapshot`` asks it which gaps need no probe and which log starts it needs).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping

from kafkatxn.model import TopicPartition
from kafkatxn.verdicts_groups import Offsets


class ProbeMemo:
    """The read_committed probes' answers kept from one gather to the next (the exporter's, whose
    scrapes ask the same gaps again: 5.2 s of a scrape at 20,000 groups x 20 partitions).

    An answer is the first record a read_committed consumer gets from a start offset below the LSO,
    or None when it reaches the LSO without one. It is taken again only while the cluster itself
    says the gap is as it was probed: the partition's LSO and high watermark both as they were
    then (nothing written or ended since, and a log rewritten to the same two offsets is
    improbable), and for a record found, the log start, read afresh in this gather, not past it
    (retention or DeleteRecords removed nothing up to it). A gap the probe found nothing in needs
    no more: a log start moved into it only shortens it, and a consumer reset to the new start
    finds nothing either. Whatever else could change a gap's records with both offsets standing (a
    compacted topic's tombstone expiring, a topic deleted and made again to the same offsets) is
    bounded by ``max_age_s``: an answer older is probed again. Only the answers of the last gather
    are kept, and none across clusters (``cluster_id``)."""

    def __init__(self, max_age_s: float = 300.0, clock: Callable[[], float] = time.monotonic):
        self.max_age_s, self._clock = max_age_s, clock
        # (partition, start) -> (LSO, HW, first readable offset or None, when probed)
        self._kept: dict[tuple[TopicPartition, int], tuple[int, int, int | None, float]] = {}
        self._next: dict[tuple[TopicPartition, int], tuple[int, int, int | None, float]] = {}
        self._valid: dict[tuple[TopicPartition, int], tuple[int, int, int | None, float]] | None = None  # to_check's
        self._cluster_id: str | None = None

    def for_cluster(self, cluster_id: str | None) -> ProbeMemo:
        """This memo for ``cluster_id``: another cluster's answers (or an unnamed one's) are dropped."""
        if cluster_id is None or cluster_id != self._cluster_id:
            self._kept = {}
        self._next = {}  # a gather that failed before its end left its answers here: only this one's are kept
        self._valid = None
        self._cluster_id = cluster_id
        return self

    def to_check(self, rounds: Iterable[Mapping[TopicPartition, int]], offsets: Mapping[TopicPartition, Offsets]) -> list[TopicPartition]:
        """The partitions whose log start :meth:`answers` needs: those a kept answer found a record on, in
        the rounds' order.
        The kept answers still valid (LSO and HW as they were, not too old) are looked up here, once
        per gap (100,000 at 20,000 groups x 20 partitions), for :meth:`answers`."""
        now, max_age = self._clock(), self.max_age_s
        kept_get, offsets_get = self._kept.get, offsets.get
        valid: dict[tuple[TopicPartition, int], tuple[int, int, int | None, float]] = {}
        for starts in rounds:
            for key in starts.items():  # (partition, start): the key the answers are kept by
                kept = kept_get(key)
                if kept is None:
                    continue
                o = offsets_get(key[0])
                if o is not None and now - kept[3] <= max_age and kept[0] == o.last_stable_offset and kept[1] == o.high_watermark:
                    valid[key] = kept
        self._valid = valid
        return list(dict.fromkeys(key[0] for key, kept in valid.items() if kept[2] is not None))

    def recorded(self) -> list[TopicPartition]:
        """The partitions a kept answer found a record on, each once: their log starts are read in the
        next gather (:meth:`answers` takes only the valid ones, :meth:`to_check`'s)."""
        return list(dict.fromkeys(key[0] for key, kept in self._kept.items() if kept[2] is not None))

    def answers(self, starts: Mapping[TopicPartition, int], offsets: Mapping[TopicPartition, Offsets],
                log_start: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        """The answers still true of ``starts``, partition by partition, with the log starts read in
        this gather (:meth:`to_check`'s, which found the valid ones; a partition without one is probed again)."""
        valid = self._valid if self._valid is not None else self._validated(starts, offsets)
        known: dict[TopicPartition, int | None] = {}
        keep = self._next
        for key in starts.items():
            kept = valid.get(key)
            if kept is None:
                continue
            first = kept[2]
            if first is None or log_start.get(key[0], first + 1) <= first:
                known[key[0]] = first
                keep[key] = kept
        return known

    def _validated(self, starts: Mapping[TopicPartition, int], offsets: Mapping[TopicPartition, Offsets]) -> dict:
        """The kept answers of ``starts`` still valid, when :meth:`to_check` was not asked first."""
        self.to_check([starts], offsets)
        valid, self._valid = self._valid, None
        return valid or {}

    def probed(self, starts: Mapping[TopicPartition, int], answers: Mapping[TopicPartition, int | None],
               offsets: Mapping[TopicPartition, Offsets]) -> None:
        """Keep what was probed now, with the offsets it was probed at."""
        now = self._clock()
        for tp, answer in answers.items():
            o = offsets.get(tp)
            if o is not None:
                self._next[(tp, starts[tp])] = (o.last_stable_offset, o.high_watermark, answer, now)

    def gathered(self) -> None:
        """A gather's probes are done: its answers are the ones kept."""
        self._kept, self._next, self._valid = self._next, {}, None
