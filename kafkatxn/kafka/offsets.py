"""ListOffsets (high watermark and last stable offset, per leader, in one round trip) and the
read_committed probe that tells transaction markers and aborted records from real lag.

One Kafka API family per module (as kminion has one file per API), mixed into
:class:`kafkatxn.kafka.facade.Cluster`; the sending, deadline and error translation are the
:class:`kafkatxn.kafka.session.Session`'s.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from typing import Any, Iterable, Mapping, Sequence

from kafkatxn.errors import KafkatxnError
from kafkatxn.kafka import protocol as proto
from kafkatxn.kafka.errors import clean, part_missing
from kafkatxn.model import Broker, Missing, Partial, ProducerState, TopicPartition
from kafkatxn.kafka.session import LEADERSHIP_ERRORS

log = logging.getLogger("kafkatxn.cluster")


# Tries per partition while leaders move (the first, then with fresh metadata after a growing pause).
LEADER_ATTEMPTS = 4
LEADER_RETRY_PAUSE_S = 0.2


class OffsetsApi:
    def first_readable_offsets(self, starts: Mapping[TopicPartition, int]) -> Partial[dict[TopicPartition, int | None]]:
        """Per partition, the offset of the first record a read_committed consumer gets from ``starts[tp]``
        on, or None when it reaches the end (the LSO) without one: everything in between is
        transaction markers or aborted records.

        One assign-only consumer (it joins no group and commits nothing); it stops reading a
        partition at its first record, so the cost is the gap, up to one fetch per partition.
        """
        found = self._first_records(starts, read_committed=True)
        return Partial({tp: (m[0] if m is not None else None) for tp, m in found.value.items()}, found.missing)

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
        self, starts: Mapping[TopicPartition, int], read_committed: bool
    ) -> Partial[dict[TopicPartition, tuple[int, int] | None]]:
        """Per partition, ``(offset, timestamp)`` of the first record read from ``starts[tp]`` on, or
        None at the end. One assign-only consumer, under the deadline; a partition stops at its first record."""
        import uuid

        from confluent_kafka import Consumer, KafkaError, TopicPartition as CTP

        pending = {tp: off for tp, off in starts.items()}
        if not pending:
            return Partial({})
        conf = self.config.librdkafka(
            error_cb=self.errors.on_client_error,
            **{
                "group.id": f"kafkatxn-probe-{uuid.uuid4().hex}",  # required by librdkafka, never joined
                "isolation.level": "read_committed" if read_committed else "read_uncommitted",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",  # a start below the log start: read from there, as the group would
                "fetch.wait.max.ms": 100,
                "max.partition.fetch.bytes": 65536,
                "fetch.max.bytes": 4 * 1024 * 1024,
            },
        )
        consumer = Consumer(conf)
        out: dict[TopicPartition, tuple[int, int] | None] = {}
        missing: list[Missing] = []
        leaders = self.metadata().leaders
        self.requests["Fetch"] += len({leaders.get(tp) for tp in pending})  # at least one per leader
        try:
            consumer.assign([CTP(tp.topic, tp.partition, off) for tp, off in pending.items()])
            while pending and time.monotonic() < self.deadline:
                self.errors.raise_auth_errors()
                messages = consumer.consume(num_messages=1000, timeout=min(0.05, max(0.0, self.deadline - time.monotonic())))
                done = []
                for m in messages:
                    tp = TopicPartition(m.topic() or "", m.partition() if m.partition() is not None else -1)
                    if tp not in pending:
                        continue
                    err = m.error()
                    if err is None:
                        if m.offset() < pending[tp]:
                            continue  # the rest of a batch that began before the start
                        out[tp] = (m.offset(), m.timestamp()[1])
                    elif err.code() == KafkaError._PARTITION_EOF:
                        out[tp] = None
                    else:
                        missing.append(Missing(tp, clean(err.str())))
                    del pending[tp]
                    done.append(CTP(tp.topic, tp.partition))
                if done:
                    consumer.pause(done)  # stop fetching what is decided
        except KafkatxnError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise self.errors.translate(exc, "reading partitions") from exc
        finally:
            consumer.close()
        missing.extend(Missing(tp, f"timed out reading from offset {off}") for tp, off in pending.items())
        return Partial(out, missing)

    def list_offsets(self, partitions: Iterable[TopicPartition], read_committed: bool) -> Partial[dict[TopicPartition, int]]:
        """Latest offset per partition: the high watermark (read_uncommitted) or the LSO (read_committed).

        One ListOffsets request per leader, all in flight together.
        """
        both = self._latest_offsets(partitions, (read_committed,))[0]
        return Partial({tp: offsets[0] for tp, offsets in both.value.items()}, both.missing)

    def stable_and_high_offsets(self, partitions: Iterable[TopicPartition]) -> Partial[dict[TopicPartition, tuple[int, int]]]:
        """``(last stable offset, high watermark)`` per partition in one round trip.

        Each leader gets the read_committed request first, then the read_uncommitted one, on the
        same connection; a broker answers a connection's requests in order and the HW only grows,
        so every pair has LSO <= HW.
        """
        return self._latest_offsets(partitions, (True, False))[0]  # type: ignore[return-value]

    def offsets_and_producers(
        self, partitions: Iterable[TopicPartition]
    ) -> tuple[Partial[dict[TopicPartition, tuple[int, int]]], Partial[dict[TopicPartition, list[ProducerState]]] | None]:
        """:meth:`stable_and_high_offsets` and :meth:`describe_producers` of the same partitions, the
        DescribeProducers requests sent with the first ListOffsets ones: a leader works on its
        DescribeProducers while the client decodes its ListOffsets answers, instead of a round trip
        after them (``check`` and the exporter need both). The producers are None when the brokers
        do not support DescribeProducers; ask :meth:`describe_producers` then, for its error."""
        tps = list(dict.fromkeys(partitions))
        if self.wire.max_version("DescribeProducers") < 0:
            return self.stable_and_high_offsets(tps), None
        producer_requests, producers_missing = self._producer_requests(sorted(tps), None)
        pairs, responses = self._latest_offsets(tps, (True, False), producer_requests)
        return pairs, self._producer_answers(producer_requests, responses, producers_missing)  # type: ignore[return-value]

    def _latest_offsets(
        self, partitions: Iterable[TopicPartition], levels: tuple[bool, ...], also: Sequence[tuple[int, Any]] = (),
        earliest: bool = False,
    ) -> tuple[Partial[dict[TopicPartition, tuple[int, ...]]], list[Any]]:
        """The offsets at ``levels`` (the latest, or with ``earliest`` the log start offsets), and the
        answers to ``also``: other requests sent in the first round trip, after the ListOffsets ones."""
        tps = list(dict.fromkeys(partitions))
        also_answers: list[Any] = []
        found: dict[TopicPartition, list[int | None]] = {}
        errors: dict[TopicPartition, str] = {}
        pending = tps
        for attempt in range(LEADER_ATTEMPTS):
            # After a leadership error or a broker that did not answer, another try with fresh
            # metadata: a leader moved, or is being elected (a short pause lets the election finish).
            if attempt > 0:
                time.sleep(LEADER_RETRY_PAUSE_S * attempt)
            leaders = self.metadata(refresh=attempt > 0).leaders
            by_node: dict[int, list[TopicPartition]] = defaultdict(list)
            for tp in pending:
                leader = leaders.get(tp)
                if leader is None:
                    errors[tp] = "unknown topic or partition"
                elif leader < 0:
                    errors[tp] = "no leader"
                elif leader in self.silent:  # still led by a broker that did not answer: not asked again
                    errors[tp] = str(Missing(Broker(leader), self.silent[leader].plain_reason))
                else:
                    by_node[leader].append(tp)
            requests = [
                (node, proto.ListOffsets(tuple(node_tps), committed, earliest))
                for node, node_tps in by_node.items() for committed in levels
            ]
            retry: list[TopicPartition] = []
            extra = list(also) if attempt == 0 else []
            responses = self._send_all(requests + extra) if requests or extra else []
            if extra:
                responses, also_answers = responses[: len(requests)], responses[len(requests) :]
            for i, resp in enumerate(responses):
                node, level = requests[i][0], i % len(levels)
                failed: list[Missing] = []
                if not self._arrived(resp, Broker(node), failed):
                    for tp in by_node[node]:
                        errors[tp] = str(failed[0])
                    retry.extend(by_node[node])  # fresh metadata may name a leader that answers
                    continue
                for part in resp.partitions:
                    if part.error:
                        errors[part.tp] = part.error
                        if part.error in LEADERSHIP_ERRORS:
                            retry.append(part.tp)
                    else:
                        found.setdefault(part.tp, [None] * len(levels))[level] = part.offset
            pending = list(dict.fromkeys(retry))
            if not pending or time.monotonic() + LEADER_RETRY_PAUSE_S * (attempt + 1) >= self.deadline:
                break
            for tp in pending:
                found.pop(tp, None)  # ask again at every level: a pair must come from one leader
        out = {tp: tuple(v) for tp, v in found.items() if None not in v}
        missing = [part_missing(tp, errors.get(tp, "no answer"), f"DESCRIBE on Topic {tp.topic}") for tp in tps if tp not in out]
        return Partial(out, missing), also_answers  # type: ignore[arg-type]
