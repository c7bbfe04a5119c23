"""DescribeProducers, batched per leader, and the round that sends it with the ListOffsets of both isolation
levels (``check``'s and the exporter's :meth:`ProducerStateApi.offsets_and_producers`).

One Kafka API family per module (as kminion has one file per API), mixed into
:class:`kafkatxn.kafka.facade.Cluster`; the sending, deadline and error translation are the
:class:`kafkatxn.kafka.session.Session`'s.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any, Iterable, Mapping, Sequence

from kafkatxn.errors import UnsupportedBrokerError
from kafkatxn.kafka import protocol as proto
from kafkatxn.kafka import retry
from kafkatxn.kafka.retry import NO_ANSWER, Failed
from kafkatxn.kafka.rounds_ahead import EVERY_PARTITION, HashedOnce
from kafkatxn.kafka.client_errors import part_missing
from kafkatxn.kafka.offsets import _offsets_requests
from kafkatxn.kafka.session import group_by_leader
from kafkatxn.metadata_columns import ColumnMetadata, LeaderRuns
from kafkatxn.model import Broker, Missing, Partial, ProducerState, TopicPartition, is_in_partition_order
from kafkatxn.producer_table import ProducerTable

log = logging.getLogger("kafkatxn.cluster")


def _columns(partitions: Sequence[proto.PartitionProducers]) -> tuple[Sequence[TopicPartition], Sequence[str | None], Sequence[tuple]]:
    """A DescribeProducers answer's partitions as (TopicPartitions, error names, producers): the columns
    the wire read them into (``wire.producers_answers.ProducerColumns``) as they are, or rows taken apart
    (the fake's, kafka-python's decoding)."""
    columns = getattr(partitions, "columns", None)
    if columns is not None:
        return columns
    return tuple(zip(*partitions)) or ((), (), ())  # type: ignore[return-value]


def _whole_table(requests: list[tuple[int, proto.DescribeProducers]], responses: list[Any],
                 grouped_by: Mapping[TopicPartition, int] | None) -> ProducerTable | None:
    """The answers to ``requests`` (sent by the leaders ``grouped_by``) as one table, when every one arrived
    without a partition's error; else None."""
    columns = []
    for resp in responses:
        if isinstance(resp, BaseException):
            return None
        tps, errors, producers = _columns(resp.partitions)
        if any(errors):
            return None
        columns.append((tps, producers))
    return ProducerTable(columns, [node for node, _ in requests], grouped_by) if len(columns) == len(requests) else None


def _every_partition_of(md: Any, partitions: Any) -> bool:
    """Whether ``partitions`` are the TopicPartitions of the metadata ``md`` read as columns: in partition
    order, each once (``wire.bodies`` reads an answer as columns only so), compared by identity in C."""
    return type(md) is ColumnMetadata and (partitions is md.tps or partitions == md.tps)


# One request per leader up to this many partitions: a round trip per leader, not one per 500
# partitions as Kafka's own tool sends them.
DESCRIBE_PRODUCERS_BATCH = 10_000


def _batches(partitions: Sequence[TopicPartition]) -> list[Any]:
    """A leader's ``partitions`` in requests of :data:`DESCRIBE_PRODUCERS_BATCH`. Its topics' runs (a
    ``metadata_columns.LeaderRuns``, or the one a ``LedPartitions`` grouped from the metadata's columns was
    written from) are cut by ``LeaderRuns.batches``: the same objects each call, so the call takes the
    requests sent ahead, and each body is written a topic at a time by ``wire.bodies``; others are sliced."""
    written = partitions if type(partitions) is LeaderRuns else getattr(partitions, "written", None)
    if written is not None:
        return written.batches(DESCRIBE_PRODUCERS_BATCH)
    return [HashedOnce(partitions[i : i + DESCRIBE_PRODUCERS_BATCH]) for i in range(0, len(partitions), DESCRIBE_PRODUCERS_BATCH)]


class ProducerStateApi:
    def describe_producers(
        self, partitions: Iterable[TopicPartition], broker_id: int | None = None
    ) -> Partial[dict[TopicPartition, list[ProducerState]]]:
        """DescribeProducers, batched per leader (or sent to ``broker_id``), ≤10,000 partitions a request."""
        # dict.fromkeys keeps the order given: partitions usually come sorted (metadata order), and
        # sorting a sorted run is linear where sorting a set is not. Every partition of a metadata read as
        # columns is in partition order, each once, already (hanging's): neither put through a dict nor sorted.
        known_md = self._metadata  # (none asked for here: the first round's requests ask it where not known)
        every = broker_id is None and type(partitions) is list and known_md is not None and _every_partition_of(known_md, partitions)
        tps = list(partitions) if every else sorted(dict.fromkeys(partitions))
        if not tps:
            return Partial({})
        if self.wire.max_version("DescribeProducers") < 0:
            raise UnsupportedBrokerError("the broker does not support DescribeProducers (needs Apache Kafka 2.8 or newer)")
        if broker_id is not None:  # a broker's own view, whoever leads: not the run's facts (never asked elsewhere)
            requests, missing = self._producer_requests(tps, broker_id)
            answers, failed = self._producer_split(requests, self._send_all(requests), missing)
            return Partial(answers, [f.last for f in failed.values()])
        known, ask = self.to_ask_in_table("DescribeProducers", None, tps)
        if not ask:
            return Partial(known)
        # The first round sent here, as retry.ask would send it: answered whole, it is kept as its columns
        # (a ProducerTable, as check's), not a list and a dict entry made for each partition.
        requests, missing = self._producer_requests(ask, None)
        responses = self._send_all(requests) if requests else []
        leaders = self._metadata.leaders if self._metadata is not None else None  # the ones the requests were sent by
        return self.with_remembered_producers(known, self._producer_answers(ask, (requests, responses, missing), leaders))

    def describe_producers_ahead(self, partitions: Iterable[TopicPartition]) -> None:
        """The requests :meth:`describe_producers` of ``partitions`` makes first (every leader's), sent now
        (``Session.send_now``): the brokers answer while the command imports what reads the answers.
        Nothing is sent when the run holds producer states already or a partition has no leader to
        ask: the call then asks as it always does."""
        if self.answered_any("DescribeProducers") or self.wire.max_version("DescribeProducers") < 0:
            return
        requests, missing = self._producer_requests(sorted(dict.fromkeys(partitions)), None)
        if requests and not missing:
            self.send_now(requests)

    def offsets_and_producers(
        self, partitions: Iterable[TopicPartition]
    ) -> tuple[Partial[dict[TopicPartition, tuple[int, int]]], Partial[dict[TopicPartition, list[ProducerState]]] | None]:
        """:meth:`stable_and_high_offsets` and :meth:`describe_producers` of the same partitions, the
        DescribeProducers requests sent with the first ListOffsets ones: a leader works on its
        DescribeProducers while the client decodes its ListOffsets answers, instead of a round trip
        after them (``check`` and the exporter need both). The producers are None when the brokers
        do not support DescribeProducers; ask :meth:`describe_producers` then, for its error."""
        # In partition order already, each once (the metadata's, most often): neither put through a dict nor sorted.
        ordered = type(partitions) is list and (_every_partition_of(self.metadata(), partitions) or is_in_partition_order(partitions))
        tps = list(partitions) if ordered else list(dict.fromkeys(partitions))
        if self.wire.max_version("DescribeProducers") < 0:
            return self.stable_and_high_offsets(tps), None
        known, ask = self.to_ask_in_table("DescribeProducers", None, tps if ordered else sorted(tps))
        grouped = self._grouped_ahead(ask)  # as offsets_and_producers_ahead grouped them: not again
        leaders = self.metadata().leaders  # (theirs, then)
        producer_requests, producers_missing = self._producer_requests(ask, None, grouped and grouped[1]) if ask else ([], {})
        pairs, responses = self._latest_offsets(tps, (True, False), producer_requests, distinct=True)
        producers = self._producer_answers(ask, (producer_requests, responses, producers_missing), leaders) if ask else Partial({})
        return pairs, self.with_remembered_producers(known, producers)  # type: ignore[return-value]

    def offsets_and_producers_ahead(self, partitions: list[TopicPartition] | None = None) -> None:
        """The round :meth:`offsets_and_producers` of ``partitions`` (in partition order, each once: the
        metadata's) makes first, sent now (``Session.send_now``, with what rides along): the brokers answer
        while the command does what needs nothing of them (``check`` imports the log's readers). Nothing
        is sent when the run holds offsets or producer states already, DescribeProducers is not supported
        or a partition has no leader to ask: the call then asks as it always does. Without ``partitions``:
        every partition of a metadata read as columns (its :attr:`~ColumnMetadata.tps`, the call's), the
        round written from each leader's topics' runs (``ColumnMetadata.all_runs_by_leader``) before any
        of their TopicPartitions is made: those are made while the brokers answer."""
        if self.answered_any("ListOffsets") or self.answered_any("DescribeProducers") or self.wire.max_version("DescribeProducers") < 0:
            return
        md = self.metadata()
        if partitions is None:
            runs = md.all_runs_by_leader(self.silent) if type(md) is ColumnMetadata else None
            if runs:  # the requests the call makes of md.all_by_leader, whose leaders' partitions were written from these
                producer_requests, _ = self._producer_requests([], None, runs)
                self.send_now(_offsets_requests(runs, (True, False), False) + producer_requests)
                self._offsets_grouped_ahead = (EVERY_PARTITION, md, None)
            return
        if _every_partition_of(md, partitions):  # from its columns: no leaders' dict made, no order checked
            by_node = md.all_by_leader(self.silent)
        elif is_in_partition_order(partitions):
            by_node = group_by_leader(partitions, md.leaders, self.silent)
        else:
            return
        if by_node:
            producer_requests, _ = self._producer_requests(partitions, None, by_node)
            self.send_now(_offsets_requests(by_node, (True, False), False) + producer_requests)  # in the call's order
            self._offsets_grouped_ahead = (list(partitions), md, by_node)

    def with_remembered_producers(
        self, known: dict[TopicPartition, list[ProducerState]], answer: Partial[dict[TopicPartition, list[ProducerState]]]
    ) -> Partial[dict[TopicPartition, list[ProducerState]]]:
        """``answer`` kept for the run, with what the run knew already."""
        self.remember_table("DescribeProducers", None, answer.value)  # 30,000 partitions a pass: one table
        return Partial({**known, **answer.value}, answer.missing) if known else answer

    def _producer_requests(
        self, tps: list[TopicPartition], broker_id: int | None, grouped: dict[int, list[TopicPartition]] | None = None,
    ) -> tuple[list[tuple[int, proto.DescribeProducers]], dict[TopicPartition, Failed]]:
        """The requests, one per leader (or to ``broker_id``) and batch; the partitions with no leader
        to ask (none, or silent: not asked again). ``grouped``: ``tps`` by their leader already."""
        missing: dict[TopicPartition, Failed] = {}
        by_node: dict[int, list[TopicPartition]] = defaultdict(list)
        if broker_id is not None:
            by_node[broker_id] = tps
        elif grouped is not None or (grouped := group_by_leader(tps, self.metadata().leaders, self.silent)) is not None:  # usually: all led, in C
            by_node.update(grouped)
        else:
            leaders = self.metadata().leaders
            for tp in tps:
                leader = leaders.get(tp, -1)
                if leader < 0:
                    missing[tp] = Failed(None, Missing(tp, "no leader"))
                elif leader in self.silent:  # a broker that did not answer earlier in this command
                    missing[tp] = Failed(None, Missing(tp, f"{self.silent[leader].plain_reason} (broker {leader})"))
                else:
                    by_node[leader].append(tp)
        requests = [(node, proto.DescribeProducers(batch)) for node, node_tps in by_node.items() for batch in _batches(node_tps)]
        return requests, missing

    def _producer_split(
        self, requests: list[tuple[int, proto.DescribeProducers]], responses: list[Any], failed: dict[TopicPartition, Failed],
    ) -> tuple[dict[TopicPartition, list[ProducerState]], dict[TopicPartition, Failed]]:
        """One round's answers, and its failures added to ``failed``."""
        out: dict[TopicPartition, list[ProducerState]] = {}
        for (node, request), resp in zip(requests, responses):
            arrived: list[Missing] = []
            if not self._arrived(resp, Broker(node), arrived):
                # Each partition of the batch is missing, by name: verdicts look partitions up.
                reason = f"{arrived[0].reason} (broker {node})"
                failed.update((tp, Failed(NO_ANSWER, Missing(tp, reason))) for tp in request.partitions)
                continue
            tps, errors, producers = _columns(resp.partitions)
            if not any(errors):  # usually: 10,000 answers taken in C
                out.update(zip(tps, map(list, producers)))
                continue
            for tp, error, states in zip(tps, errors, producers):
                if error:
                    failed[tp] = Failed(error, part_missing(tp, error, f"READ on Topic {tp.topic}"))
                else:
                    out[tp] = list(states)
        return out, failed

    def _producer_answers(
        self, tps: list[TopicPartition], first: tuple[list[tuple[int, proto.DescribeProducers]], list[Any], dict[TopicPartition, Failed]] | None = None,
        grouped_by: Mapping[TopicPartition, int] | None = None,
    ) -> Partial[dict[TopicPartition, list[ProducerState]]]:
        """The producers of ``tps`` at their leaders, asked again on the one policy (a leader that
        did not answer, left or moved: where fresh metadata says it is now). ``first``: the first
        round's requests, their responses and the partitions without a leader, when already sent: a first
        round every leader answered whole, without an error, is the answer as its columns (a
        :class:`~kafkatxn.producer_table.ProducerTable`), no list made nor partition hashed for the many
        without producer state (``grouped_by``: the leaders the first round's requests were sent by)."""
        if first is not None and not first[2]:
            whole = _whole_table(*first[:2], grouped_by)
            if whole is not None:
                return Partial(whole)

        def send(pending: list[TopicPartition]) -> tuple[dict[TopicPartition, list[ProducerState]], dict[TopicPartition, Failed]]:
            nonlocal first
            if first is not None:
                requests, responses, failed = first
                first = None
            else:
                requests, failed = self._producer_requests(pending, None)
                responses = self._send_all(requests) if requests else []
            return self._producer_split(requests, responses, failed)

        # tps: once each (every caller's are a run's keys still to ask, of partitions made distinct)
        asked = retry.ask(tps, send, "DescribeProducers", self.deadline, refresh=lambda: self.metadata(refresh=True), distinct=True)
        return Partial(asked.answers, asked.failed_in(tps))
