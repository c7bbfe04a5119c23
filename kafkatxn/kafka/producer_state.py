"""DescribeProducers, batched per leader.

One Kafka API family per module (as kminion has one file per API), mixed into
:class:`kafkatxn.kafka.facade.Cluster`; the sending, deadline and error translation are the
:class:`kafkatxn.kafka.session.Session`'s.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from typing import Any, Iterable

from kafkatxn.errors import UnsupportedBrokerError
from kafkatxn.kafka import protocol as proto
from kafkatxn.kafka.errors import part_missing
from kafkatxn.kafka.session import LEADERSHIP_ERRORS
from kafkatxn.model import Broker, Missing, Partial, ProducerState, TopicPartition

log = logging.getLogger("kafkatxn.cluster")

# One request per leader up to this many partitions. Kafka's own tool sends 500 a request: 60
# requests at 30,000 partitions, where one per leader makes 3 (bench/bench_scale.py).
DESCRIBE_PRODUCERS_BATCH = 10_000


class ProducerStateApi:
    def describe_producers(
        self, partitions: Iterable[TopicPartition], broker_id: int | None = None
    ) -> Partial[dict[TopicPartition, list[ProducerState]]]:
        """DescribeProducers, batched per leader (or sent to ``broker_id``), ≤10,000 partitions a request."""
        # dict.fromkeys keeps the order given: partitions usually come sorted (metadata order), and
        # sorting a sorted run is linear where sorting a set of 30,000 costs 40 ms.
        tps = sorted(dict.fromkeys(partitions))
        if not tps:
            return Partial({})
        if self.wire.max_version("DescribeProducers") < 0:
            raise UnsupportedBrokerError("the broker does not support DescribeProducers (needs Apache Kafka 2.8 or newer)")
        if broker_id is not None:  # a broker's own view, whoever leads: not the run's facts
            requests, missing = self._producer_requests(tps, broker_id)
            return self._producer_answers(requests, self._send_all(requests), missing, retry=False)
        known, ask = self.remembered("DescribeProducers", tps)
        if not ask:
            return Partial(known)
        requests, missing = self._producer_requests(ask, None)
        return self.with_remembered_producers(known, self._producer_answers(requests, self._send_all(requests), missing))

    def with_remembered_producers(
        self, known: dict[TopicPartition, list[ProducerState]], answer: Partial[dict[TopicPartition, list[ProducerState]]]
    ) -> Partial[dict[TopicPartition, list[ProducerState]]]:
        """``answer`` kept for the run, with what the run knew already."""
        self.remember("DescribeProducers", answer.value)
        return Partial({**known, **answer.value}, answer.missing) if known else answer

    def _producer_requests(
        self, tps: list[TopicPartition], broker_id: int | None
    ) -> tuple[list[tuple[int, proto.DescribeProducers]], list[Missing]]:
        missing: list[Missing] = []
        by_node: dict[int, list[TopicPartition]] = defaultdict(list)
        if broker_id is not None:
            by_node[broker_id] = tps
        else:
            leaders = self.metadata().leaders
            for tp in tps:
                leader = leaders.get(tp, -1)
                if leader < 0:
                    missing.append(Missing(tp, "no leader"))
                elif leader in self.silent:  # a broker that did not answer earlier in this command
                    missing.append(Missing(tp, f"{self.silent[leader].plain_reason} (broker {leader})"))
                else:
                    by_node[leader].append(tp)
        requests = [
            (node, proto.DescribeProducers(tuple(node_tps[i : i + DESCRIBE_PRODUCERS_BATCH])))
            for node, node_tps in by_node.items()
            for i in range(0, len(node_tps), DESCRIBE_PRODUCERS_BATCH)
        ]
        return requests, missing

    def _producer_answers(
        self, requests: list[tuple[int, proto.DescribeProducers]], responses: list[Any], missing: list[Missing],
        retry: bool = True,
    ) -> Partial[dict[TopicPartition, list[ProducerState]]]:
        """The answers; with ``retry``, partitions whose leader did not answer, left or moved are
        asked once more where fresh metadata says their leader is now."""
        out: dict[TopicPartition, list[ProducerState]] = {}
        again: list[TopicPartition] = []
        for (node, request), resp in zip(requests, responses):
            if not self._arrived(resp, Broker(node), missing):
                # Each partition of the batch is missing, by name: verdicts look partitions up.
                reason = f"{missing.pop().reason} (broker {node})"
                missing.extend(Missing(tp, reason) for tp in request.partitions)
                again.extend(request.partitions)
                continue
            for part in resp.partitions:
                if part.error:
                    missing.append(part_missing(part.tp, part.error, f"READ on Topic {part.tp.topic}"))
                    if part.error in LEADERSHIP_ERRORS:
                        again.append(part.tp)
                else:
                    out[part.tp] = list(part.producers)
        if not (retry and again) or time.monotonic() >= self.deadline:
            return Partial(out, missing)
        self.metadata(refresh=True)
        asked = set(again)
        requests, second_missing = self._producer_requests(sorted(asked), None)
        second = self._producer_answers(requests, self._send_all(requests), second_missing, retry=False)
        out.update(second.value)
        return Partial(out, [m for m in missing if m.subject not in asked] + list(second.missing))
