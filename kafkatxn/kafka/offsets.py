"""ListOffsets (high watermark and last stable offset, per leader, in one round trip; offsets by
time), and Fetch: the read_committed probe that tells transaction markers and aborted records from
real lag, and the first record of a transaction (its age).

One Kafka API family per module (as kminion has one file per API), mixed into
:class:`kafkatxn.kafka.facade.Cluster`; the sending, deadline and error translation are the
:class:`kafkatxn.kafka.session.Session`'s.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from itertools import filterfalse, repeat
from operator import itemgetter
from typing import Any

from kafkatxn.kafka import protocol as proto
from kafkatxn.kafka import retry
from kafkatxn.kafka.client_errors import part_missing
from kafkatxn.kafka.retry import NO_ANSWER, Failed
from kafkatxn.kafka.rounds_ahead import EVERY_PARTITION, HashedOnce
from kafkatxn.kafka.session import group_by_leader, group_by_leader_column
from kafkatxn.metadata_columns import ColumnMetadata, LeaderRuns
from kafkatxn.model import Broker, Missing, Partial, TopicPartition
from kafkatxn.offset_table import OffsetTable

log = logging.getLogger("kafkatxn.cluster")


# What one Fetch round asks of each partition and in all (a probe stops at its first record).
FETCH_PARTITION_BYTES = 64 * 1024
FETCH_MAX_BYTES = 4 * 1024 * 1024


def first_readable(
    part: proto.FetchedPartition, start: int, read_committed: bool, with_timestamp: bool = True
) -> tuple[tuple[int, int] | None, int]:
    """``((offset, timestamp), next)`` of the first record at or after ``start`` in one Fetch answer that
    a consumer at this isolation level gets, or ``(None, next)``: where the next fetch goes on.

    read_committed, as the Java consumer does: an aborted transaction's producer id is aborting from
    the transaction's first offset (the answer's ``aborted_transactions``) until its ABORT marker,
    and its transactional batches in between are skipped; control batches are never records.
    Without ``with_timestamp`` the timestamp is -1, and a batch with no gaps in its offsets is not
    read: its header says where its first record at or after ``start`` is."""
    aborted = sorted(part.aborted_transactions, key=lambda a: a.first_offset) if read_committed else []
    aborting: set[int] = set()
    i = 0
    after = start
    for batch in part.batches:
        if read_committed and batch.producer_id >= 0:
            while i < len(aborted) and aborted[i].first_offset <= batch.last_offset:
                aborting.add(aborted[i].producer_id)
                i += 1
            if batch.control == "ABORT":
                aborting.discard(batch.producer_id)
            elif batch.is_transactional and batch.producer_id in aborting:
                after = max(after, batch.last_offset + 1)
                continue
        if not batch.is_control:
            if not with_timestamp and batch.gapless:
                if batch.last_offset >= start:
                    first = max(start, batch.base_offset)
                    return (first, -1), first + 1
            else:
                for r in batch.records:
                    if r.offset >= start:
                        return (r.offset, r.timestamp), r.offset + 1
        after = max(after, batch.last_offset + 1)
    return None, after


def _offsets_requests(by_node: Mapping[int, Sequence[TopicPartition]], levels: tuple[bool, ...], earliest: bool,
                      ahead: Mapping[int, Sequence[TopicPartition]] | None = None) -> list[tuple[int, Any]]:
    """The ListOffsets of one round: per leader, one request per isolation level, in ``levels``' order
    (a leader answers a connection's requests in order: the LSO before the HW). A leader's partitions
    written from its runs before they were made (``metadata_columns.LedPartitions.written``), or equal to
    ``ahead``'s (those grouped ahead: compared by identity, in C), are the requests sent ahead again."""
    shared: dict[int, Any] = {}
    for node, node_tps in by_node.items():
        if ahead is not None and node in ahead and ahead[node] == node_tps:
            node_tps = ahead[node]
        # a leader's topics' runs (sent before any of their TopicPartitions was made) are written as they are
        written = shared[node] = node_tps if type(node_tps) is LeaderRuns else getattr(node_tps, "written", None)
        if written is None:
            written = shared[node] = HashedOnce(node_tps)  # one tuple for both levels
    return [(node, proto.ListOffsets(shared[node], committed, earliest)) for node in by_node for committed in levels]


def _fetches(by_node: Mapping[int, Sequence[TopicPartition]], positions: Mapping[TopicPartition, int], read_committed: bool,
             partition_max_bytes: int, max_wait_ms: int) -> list[tuple[int, proto.Fetch]]:
    """One Fetch per leader of its partitions, each from ``positions[tp]``."""
    return [
        (node, proto.Fetch(tuple(proto.FetchOffset(tp, positions[tp]) for tp in tps), read_committed, FETCH_MAX_BYTES,
                           partition_max_bytes, max_wait_ms))
        for node, tps in by_node.items()
    ]


class OffsetsApi:
    def first_readable_offsets(self, starts: Mapping[TopicPartition, int]) -> Partial[dict[TopicPartition, int | None]]:
        """Per partition, the offset of the first record a read_committed consumer gets from ``starts[tp]``
        on, or None when it reaches the end (the LSO) without one: everything in between is
        transaction markers or aborted records.

        Over the wire's Fetch (no consumer, no group); it stops reading a partition at its first
        record, so the cost is the gap: one round trip per leader per 64 KiB of it.
        """
        found = self._first_records(starts, read_committed=True, with_timestamp=False)
        return Partial({tp: (m[0] if m is not None else None) for tp, m in found.value.items()}, found.missing)

    def first_readable_offsets_ahead(self, starts: Mapping[TopicPartition, int]) -> None:
        """The first Fetch per leader :meth:`first_readable_offsets` will send for ``starts``, sent with the
        next round (``Session.send_ahead``): the call takes its answers instead of a round trip of its own
        (a gap longer than one answer reads on from there, as it would)."""
        if self._answers is None or not starts:
            return
        positions = dict(starts)
        if self.answered_any("Fetch"):  # what the run fetched ahead is answered from it (fetch_from_leaders)
            _ahead, ask = self.remembered("Fetch", [(tp, offset, True) for tp, offset in positions.items()])
            positions = {tp: offset for tp, offset, _ in ask}
        by_node, _unplaced = self._by_leader(positions)
        self.send_ahead(_fetches(by_node, positions, True, FETCH_PARTITION_BYTES, 0))

    def first_record_timestamps(self, starts: Mapping[TopicPartition, int]) -> Partial[dict[TopicPartition, int]]:
        """Per partition, the timestamp of the record at ``starts[tp]`` (a transaction's start offset:
        its first record), read_uncommitted; what could not be read is a missing part."""
        found = self._first_records(starts, read_committed=False)
        out = {tp: m[1] for tp, m in found.value.items() if m is not None and m[0] == starts[tp] and m[1] >= 0}
        missing = list(found.missing) + [
            Missing(tp, f"no record at offset {starts[tp]} (deleted or compacted)")
            for tp, m in found.value.items() if tp not in out
        ]
        return Partial(out, missing)

    def _first_records(
        self, starts: Mapping[TopicPartition, int], read_committed: bool, with_timestamp: bool = True
    ) -> Partial[dict[TopicPartition, tuple[int, int] | None]]:
        """Per partition, ``(offset, timestamp)`` of the first record a consumer at this isolation
        level reads from ``starts[tp]`` on, or None at the end (the LSO read_committed, else the high
        watermark). Fetch, one request per leader a round, each partition from where the last round
        left it, until each has its record or its end, under the deadline. read_committed skips what
        the Java consumer skips: control batches and the batches of aborted transactions. A start
        below the log start reads from there, as a group with ``auto.offset.reset=earliest`` would."""
        positions = dict(starts)
        out: dict[TopicPartition, tuple[int, int] | None] = {}
        missing: list[Missing] = []
        asked: dict[TopicPartition, int] = defaultdict(int)
        reset: set[TopicPartition] = set()  # sent back to the log start once
        refresh = False
        backoff: retry.Backoff | None = None
        why = "timed out reading from offset {}"
        while positions and time.monotonic() < self.deadline:
            before = dict(positions)
            answers, failed = self.fetch_from_leaders(positions, read_committed, FETCH_PARTITION_BYTES, refresh=refresh)
            refresh = False
            out_of_range = []
            again: dict[TopicPartition, Missing] = {}  # asked again on the one policy, with fresh metadata
            for tp, part in [*failed.items(), *answers.items()]:
                error = part if isinstance(part, Missing) else part.error
                if error is None:
                    try:
                        found, after = first_readable(part, positions[tp], read_committed, with_timestamp)
                    except proto.UnreadableRecords as exc:  # a corrupt batch: this partition's answer
                        missing.append(part_missing(tp, str(exc), f"READ on Topic {tp.topic}"))
                        del positions[tp]
                        continue
                    end = part.last_stable_offset if read_committed else part.high_watermark
                    if found is not None or after >= end:
                        out[tp] = found
                        del positions[tp]
                    else:
                        positions[tp] = after
                elif error == "OFFSET_OUT_OF_RANGE" and tp not in reset:
                    out_of_range.append(tp)
                else:
                    # A leader moved, left or did not answer: fresh metadata may name one that answers.
                    asked[tp] += 1
                    if isinstance(error, Missing):
                        code, last = (None if error.acl else NO_ANSWER), error
                    else:
                        code, last = error, part_missing(tp, error, f"READ on Topic {tp.topic}")
                    if retry.retriable("Fetch", code, asked[tp]):
                        again[tp] = last
                        refresh = True
                    else:
                        missing.append(last)
                        del positions[tp]
            if out_of_range:
                reset.update(out_of_range)
                log_starts = self.offsets_at(out_of_range, proto.EARLIEST)
                missing.extend(log_starts.missing)
                for tp in out_of_range:
                    first = log_starts.value.get(tp)
                    if first is not None and positions[tp] < first:
                        positions[tp] = first
                        continue
                    if first is not None:  # past the end: nothing to read there
                        out[tp] = None
                    del positions[tp]  # (its log start unknown: named missing above)
            if refresh:
                backoff = backoff or retry.Backoff(self.deadline)
                if not backoff.pause():  # the pauses ran out: each keeps its last error
                    for tp, error in again.items():
                        missing.append(error)
                        del positions[tp]
                    refresh = False
            elif positions == before and not out_of_range:  # answers that moved nothing on: asking again repeats them
                why = "no records returned from offset {} below the end"
                break
        missing.extend(Missing(tp, why.format(off)) for tp, off in positions.items())
        return Partial(out, missing)

    def fetch_from_leaders(
        self, positions: Mapping[TopicPartition, int], read_committed: bool, partition_max_bytes: int,
        refresh: bool = False, max_wait_ms: int = 0,
    ) -> tuple[dict[TopicPartition, proto.FetchedPartition], dict[TopicPartition, Missing]]:
        """One Fetch per leader, all in flight together, each partition from ``positions[tp]``: the
        answers, and a :class:`Missing` for each partition whose leader is unknown, silent or did not answer.
        A read this run fetched ahead (:meth:`~kafkatxn.kafka.fetch_ahead.FetchAheadApi.fetch_ahead`) is answered from it."""
        if not max_wait_ms:
            ahead, ask = self.remembered("Fetch", [(tp, offset, read_committed) for tp, offset in positions.items()])
            if ahead:
                positions = {tp: offset for tp, offset, _ in ask}
                answers, failed = self.fetch_from_leaders(positions, read_committed, partition_max_bytes, refresh) if positions else ({}, {})
                return {key[0]: part for key, part in ahead.items()} | answers, failed
        by_node, failed = self._by_leader(positions, refresh)
        requests = _fetches(by_node, positions, read_committed, partition_max_bytes, max_wait_ms)
        answers: dict[TopicPartition, proto.FetchedPartition] = {}
        for (node, request), resp in zip(requests, self._send_all(requests) if requests else []):
            arrived: list[Missing] = []
            if not self._arrived(resp, Broker(node), arrived):
                failed.update((f.tp, Missing(f.tp, f"{arrived[0].reason} (broker {node})")) for f in request.partitions)
            elif resp.error is not None:
                failed.update((f.tp, part_missing(f.tp, resp.error, f"READ on Topic {f.tp.topic}")) for f in request.partitions)
            else:
                answers.update((part.tp, part) for part in resp.partitions)
        return answers, failed

    def offsets_at(self, partitions: Iterable[TopicPartition], timestamp_ms: int) -> Partial[dict[TopicPartition, int]]:
        """ListOffsets by time, one request per leader: the first offset at or after ``timestamp_ms``
        (-1 when no record is that recent), or the log start with ``protocol.EARLIEST``."""
        tps = list(dict.fromkeys(partitions))
        by_node, failed = self._by_leader(tps)
        requests = [(node, proto.ListOffsetsAt(tuple(node_tps), timestamp_ms)) for node, node_tps in by_node.items()]
        out: dict[TopicPartition, int] = {}
        missing = list(failed.values())
        for (node, request), resp in zip(requests, self._send_all(requests) if requests else []):
            arrived: list[Missing] = []
            if not self._arrived(resp, Broker(node), arrived):
                missing.extend(Missing(tp, f"{arrived[0].reason} (broker {node})") for tp in request.partitions)
                continue
            for part in resp.partitions:
                if part.error:
                    missing.append(part_missing(part.tp, part.error, f"DESCRIBE on Topic {part.tp.topic}"))
                else:
                    out[part.tp] = part.offset
        return Partial(out, missing)

    def _by_leader(
        self, partitions: Iterable[TopicPartition], refresh: bool = False
    ) -> tuple[dict[int, list[TopicPartition]], dict[TopicPartition, Missing]]:
        """The partitions by leader, and those that have none to ask (unknown, leaderless, silent)."""
        leaders = self.metadata(refresh=refresh).leaders
        failed: dict[TopicPartition, Missing] = {}
        partitions = list(partitions)
        grouped = group_by_leader(partitions, leaders, self.silent)  # usually: every partition led by a broker that answers
        if grouped is not None:
            return grouped, failed
        by_node: dict[int, list[TopicPartition]] = defaultdict(list)
        for tp in partitions:
            leader = leaders.get(tp)
            if leader is None:
                failed[tp] = Missing(tp, "unknown topic or partition")
            elif leader < 0:
                failed[tp] = Missing(tp, "no leader")
            elif leader in self.silent:  # a broker that did not answer earlier in this command
                failed[tp] = Missing(tp, f"{self.silent[leader].plain_reason} (broker {leader})")
            else:
                by_node[leader].append(tp)
        return by_node, failed

    def list_offsets(self, partitions: Iterable[TopicPartition], read_committed: bool) -> Partial[dict[TopicPartition, int]]:
        """Latest offset per partition: the high watermark (read_uncommitted) or the LSO (read_committed).

        One ListOffsets request per leader, all in flight together.
        """
        both = self._latest_offsets(partitions, (read_committed,))[0]
        return Partial({tp: offsets[0] for tp, offsets in both.value.items()}, both.missing)

    def stable_and_high_offsets(self, partitions: Iterable[TopicPartition], high_first: type[tuple] | None = None) -> Partial[dict[TopicPartition, tuple[int, int]]]:
        """``(last stable offset, high watermark)`` per partition in one round trip; with ``high_first``
        (a named tuple of two fields), that named tuple of ``(high watermark, last stable offset)``
        instead, made straight from the answers' columns (30,000 a pass: no pair made first).

        Each leader gets the read_committed request first, then the read_uncommitted one, on the
        same connection; a broker answers a connection's requests in order and the HW only grows,
        so every pair has LSO <= HW.
        """
        return self._latest_offsets(partitions, (True, False), high_first=high_first)[0]  # type: ignore[return-value]

    def stable_and_high_offsets_ahead(self, partitions: Sequence[TopicPartition], leaders: Sequence[int] | None = None) -> None:
        """The requests :meth:`stable_and_high_offsets` of ``partitions`` (in that order) makes first,
        sent now (``Session.send_now``): the brokers answer while the command imports what reads the
        answers. Nothing is sent when the run holds offsets already or a partition has no leader to
        ask: the call then asks as it always does. ``leaders``: the current metadata's leader of each
        partition, beside it (``Cluster.select_in_partition_order``'s), the partitions then each once:
        not looked up, nor put through a dict; the metadata's own data partitions grouped from its
        columns (``ColumnMetadata.data_by_leader``): their requests, sent by ``Cluster.data_offsets_ahead``
        already, not sent again (``Session.send_now``)."""
        if self.answered_any("ListOffsets"):
            return
        md = self.metadata()
        if leaders is not None:
            tps, columns = list(partitions), type(md) is ColumnMetadata and partitions is md.data_partitions()[0]
            by_node = md.data_by_leader(self.silent) if columns else group_by_leader_column(tps, leaders, self.silent)
        else:
            tps = list(dict.fromkeys(partitions))
            by_node = group_by_leader(tps, md.leaders, self.silent)
        if by_node:
            self.send_now(_offsets_requests(by_node, (True, False), False))
            self._offsets_grouped_ahead = (tps, md, by_node)

    def _grouped_ahead(self, partitions: Any, md: Any = None) -> tuple[list[TopicPartition], dict[int, list[TopicPartition]]] | None:
        """``partitions`` once each and by leader, as :meth:`stable_and_high_offsets_ahead` grouped the same
        list by the leaders of the same metadata (``md``, by default the session's; none of them silent
        since): the call that sends its requests does not group 30,000 partitions again. None otherwise."""
        grouped = self._offsets_grouped_ahead
        if grouped is None or type(partitions) is not list or grouped[1] is not (md or self._metadata):
            return None
        if grouped[0] is EVERY_PARTITION:  # sent from the metadata's runs (offsets_and_producers_ahead): grouped now
            grouped = self._offsets_grouped_ahead = (grouped[1].tps, grouped[1], grouped[1].all_by_leader(self.silent))
        tps, _, by_node = grouped
        if by_node is None or any(node in self.silent for node in by_node) or partitions != tps:  # equal lists: compared by identity, in C
            return None
        return tps, by_node

    def log_start_offsets_ahead(self, partitions: Iterable[TopicPartition]) -> None:
        """The ListOffsets EARLIEST per leader that ``log_start_offsets`` of ``partitions`` will send,
        sent with the next round (``Session.send_ahead``): the call takes their answers instead of a
        round trip of its own. Nothing is sent when a partition has no leader to ask: the call then
        asks as it always does."""
        if self._answers is None:
            return
        tps = sorted(dict.fromkeys(partitions))  # as log_start_offsets orders them
        known = self._remembered_offsets(tps, (False,), True)
        pending = [tp for tp in tps if tp not in known] if known else tps
        by_node = group_by_leader(pending, self.metadata().leaders, self.silent) if pending else None
        if by_node:
            self.send_ahead(_offsets_requests(by_node, (False,), True))

    def _latest_offsets(
        self, partitions: Iterable[TopicPartition], levels: tuple[bool, ...], also: Sequence[tuple[int, Any]] = (),
        earliest: bool = False, distinct: bool = False, high_first: type[tuple] | None = None,
    ) -> tuple[Partial[dict[TopicPartition, tuple[int, ...]]], list[Any]]:
        """The offsets at ``levels`` (the latest, or with ``earliest`` the log start offsets), and the
        answers to ``also``: other requests sent in the first round trip, after the ListOffsets ones.
        ``distinct``: ``partitions`` are a list holding each partition once (not put through a dict again).
        ``high_first`` (levels ``(True, False)`` only): each pair that named tuple of the second level's
        offset then the first's (:meth:`stable_and_high_offsets`), kept for the run in a table of that shape."""
        shaped = _high_first_table(earliest) if high_first is not None else None
        grouped = self._grouped_ahead(partitions) if levels == (True, False) and not earliest else None
        tps = list(grouped[0]) if grouped is not None else list(partitions) if distinct else list(dict.fromkeys(partitions))
        known = self._remembered_offsets(tps, levels, earliest)
        if known and high_first is not None:
            known = dict(_as_high_first(high_first, known, known.values()))
        also_answers: list[Any] = []
        extra = list(also)
        whole: list[OffsetTable] = []  # the first round's answers, every one whole: their columns as they are
        rounds = 0

        def send(pending: list[TopicPartition]) -> tuple[dict[TopicPartition, tuple[int, ...]], dict[TopicPartition, Failed]]:
            nonlocal extra, also_answers, rounds
            rounds += 1
            failed: dict[TopicPartition, Failed] = {}
            md = self.metadata()
            leaders = md.leaders
            ahead = self._grouped_ahead(pending, md) if grouped is not None else None
            # usually: every partition led by a broker that answers
            by_node = ahead[1] if ahead is not None else group_by_leader(pending, leaders, self.silent)
            if by_node is None:
                by_node = defaultdict(list)
                for tp in pending:
                    leader = leaders.get(tp)
                    if leader is None:
                        failed[tp] = Failed(None, "unknown topic or partition")
                    elif leader < 0:
                        failed[tp] = Failed(None, "no leader")
                    elif leader in self.silent:  # still led by a broker that did not answer: not asked again
                        failed[tp] = Failed(None, str(Missing(Broker(leader), self.silent[leader].plain_reason)))
                    else:
                        by_node[leader].append(tp)
            sent = self._offsets_grouped_ahead[2] if ahead is None and self._offsets_grouped_ahead is not None else None
            requests = _offsets_requests(by_node, levels, earliest, sent)  # a leader's partitions as sent ahead: taken
            responses = self._send_all(requests + extra) if requests or extra else []
            if extra:  # sent with the first round only
                responses, also_answers = responses[: len(requests)], responses[len(requests) :]
                extra = []
            answers = []  # (level, TopicPartitions, error names, offsets) of each answer that arrived
            for i, resp in enumerate(responses):
                node = requests[i][0]
                arrived: list[Missing] = []
                if not self._arrived(resp, Broker(node), arrived):
                    # fresh metadata may name a leader that answers
                    failed.update((tp, Failed(NO_ANSWER, str(arrived[0]))) for tp in by_node[node])
                    continue
                answers.append((i % len(levels), *proto.offset_columns(resp.partitions)))
            if (len(levels) == 2 and len(answers) == len(responses) and not any(any(errors) for _, _, errors, _ in answers)
                    and all(answers[j][1] == answers[j + 1][1] for j in range(0, len(answers), 2))
                    and rounds == 1 and not failed and sum(len(answer[1]) for answer in answers) == 2 * len(pending)):
                # Usually: the first round, each leader's two answers whole, naming the same partitions in the
                # same order (the kept TopicPartitions: compared by identity, in C), every partition asked:
                # their columns are the answer (an OffsetTable), no pair made nor partition hashed here.
                tps, stable, high = [], [], []
                for j in range(0, len(answers), 2):
                    tps += answers[j][1]
                    stable += answers[j][3]
                    high += answers[j + 1][3]
                whole.append(OffsetTable(tps, high, stable, high_first))
                return {}, failed
            found: list[dict[TopicPartition, int]] = [{} for _ in levels]  # per level
            for level, tps, errors, offsets in answers:
                at_level = found[level]
                if not any(errors):  # 10,000 answers taken in C
                    at_level.update(zip(tps, offsets))
                    continue
                for tp, error, offset in zip(tps, errors, offsets):
                    if error:
                        failed[tp] = Failed(error, error)
                    else:
                        at_level[tp] = offset
            # A partition has its offsets when every level (one isolation level, or both) answered
            # for it in one round: a pair must come from one leader.
            first, *others = found
            if others:
                (second,) = others
                if not failed and first.keys() == second.keys():  # every pair whole, made in C
                    out = dict(zip(first, zip(first.values(), map(second.__getitem__, first))))
                else:
                    out = {tp: (offset, second[tp]) for tp, offset in first.items() if tp in second and tp not in failed}
            else:
                out = {tp: (offset,) for tp, offset in first.items()}
            if high_first is not None:
                out = dict(_as_high_first(high_first, out, out.values()))
            return out, failed

        pending = [tp for tp in tps if tp not in known] if known else tps
        asked = retry.ask(pending, send, "ListOffsets", self.deadline, refresh=lambda: self.metadata(refresh=True), distinct=True)
        if extra:  # nothing was pending: the other requests still go
            also_answers = self._send_all(extra)
        out: Mapping[TopicPartition, tuple[int, ...]] = whole[0] if whole else asked.answers
        self.remember_table("ListOffsets", shaped or (levels, earliest), out)
        if known:
            answered = dict(out.items()) if whole else out
            out = {tp: known[tp] if tp in known else answered[tp] for tp in tps if tp in known or tp in answered}
        elif whole:  # every partition asked was answered
            return Partial(out, []), also_answers  # type: ignore[arg-type]
        errors = asked.failed
        # The partitions without an answer (none, most often), found in C.
        missing = [part_missing(tp, errors.get(tp, "no answer"), f"DESCRIBE on Topic {tp.topic}") for tp in filterfalse(out.__contains__, tps)]
        return Partial(out, missing), also_answers  # type: ignore[arg-type]

    def _remembered_offsets(
        self, tps: list[TopicPartition], levels: tuple[bool, ...], earliest: bool
    ) -> dict[TopicPartition, tuple[int, ...]]:
        """What this run was answered for these levels; one level is also read from a pair of both,
        but a pair is never made of two answers (it must come from one leader, LSO <= HW)."""
        if self._answers is None or not self.answered_any("ListOffsets"):  # a run's first offsets: nothing to look up
            return {}
        out = self.remembered_in_table("ListOffsets", (levels, earliest), tps)
        if len(levels) == 1:
            position = 0 if levels[0] else 1
            pairs = self.remembered_in_table("ListOffsets", ((True, False), earliest), [tp for tp in tps if tp not in out] if out else tps)
            out.update({tp: (pair[position],) for tp, pair in pairs.items()})
        if levels in ((True, False), (True,), (False,)):  # and the pairs kept high first (stable_and_high_offsets' other shape)
            shaped = self.remembered_in_table("ListOffsets", _high_first_table(earliest), [tp for tp in tps if tp not in out] if out else tps)
            at = {(True, False): _SWAPPED, (True,): _STABLE_ALONE, (False,): _HIGH_ALONE}[levels]
            out.update(zip(shaped, map(at, shaped.values())))
        return out


def _high_first_table(earliest: bool) -> tuple[Any, ...]:
    """The run's table of the pairs kept high first (``high_first``): their levels, (True, False), read the
    other way round."""
    return ((True, False), earliest, "high first")


_SWAPPED = itemgetter(1, 0)  # (LSO, HW) <-> (HW, LSO)
_STABLE_ALONE, _HIGH_ALONE = itemgetter(slice(1, 2)), itemgetter(slice(0, 1))  # of (HW, LSO): (LSO,), (HW,)


def _as_high_first(shape: type[tuple], tps: Iterable[TopicPartition], pairs: Iterable[tuple[int, int]]) -> Iterable[tuple[TopicPartition, tuple]]:
    """``(tp, shape(HW, LSO))`` from each ``(LSO, HW)`` pair, in C (a named tuple's own __new__ is a Python step)."""
    return zip(tps, map(tuple.__new__, repeat(shape), map(_SWAPPED, pairs)))
