"""Consumer groups (confluent-kafka): the group list, committed offsets, members' assignments and
the log start offsets a group without commits could start from.

One Kafka API family per module (as kminion has one file per API), mixed into
:class:`kafkatxn.kafka.facade.Cluster`; the sending, deadline and error translation are the
:class:`kafkatxn.kafka.session.Session`'s.
"""

from __future__ import annotations

import logging
import time
from typing import Iterable

from kafkatxn.errors import ClusterError, KafkatxnError
from kafkatxn.kafka.errors import clean
from kafkatxn.model import Missing, Part, Partial, TopicPartition
from kafkatxn.kafka import protocol as proto
from kafkatxn.kafka.session import NOT_ARRIVED

log = logging.getLogger("kafkatxn.cluster")


class GroupsApi:
    def list_groups(self) -> list[str]:
        """Every consumer group, or an error when a broker's part of the list is missing (see
        :meth:`list_groups_partial` for the list with the missing part named instead)."""
        listed = self.list_groups_partial()
        if listed.missing:
            raise ClusterError(f"listing consumer groups failed: {listed.missing[0].reason}")
        return listed.value

    def list_groups_partial(self) -> Partial[list[str]]:
        """The consumer groups the brokers listed. Brokers that answer with an error (e.g.
        COORDINATOR_LOAD_IN_PROGRESS right after ``__consumer_offsets`` is created) are asked again
        within half the time left; a broker still not answering then (frozen, dead) leaves the groups
        it coordinates out, named as the missing part ``consumer groups`` (a group missing from an
        incomplete list is not unknown)."""
        give_up = time.monotonic() + max(0.0, self.deadline - time.monotonic()) / 2
        while True:
            try:
                # librdkafka answers once every broker has: a dead one must fail within the give-up time.
                wait_s = max(0.5, give_up - time.monotonic())
                result = self._wait(self.admin.list_consumer_groups(request_timeout=wait_s), "listing groups")
            except KafkatxnError:
                raise
            except Exception as exc:  # noqa: BLE001
                raise self.errors.translate(exc, "listing consumer groups") from exc
            self.requests["ListGroups"] += 1
            listed = sorted(g.group_id for g in result.valid)
            if not result.errors:
                return Partial(listed)
            # KafkaError objects: their str() is a repr; .str() is the message.
            reasons = "; ".join(sorted({clean(e.str() if hasattr(e, "str") else str(e)) for e in result.errors}))
            if time.monotonic() >= give_up or self.deadline - time.monotonic() < 0.5:
                if all(getattr(e, "name", lambda: "")() in ("_TIMED_OUT", "_TRANSPORT", "_ALL_BROKERS_DOWN") for e in result.errors) \
                        and len(result.errors) >= len(self.metadata().brokers):
                    from confluent_kafka import KafkaException

                    # Nothing answered in time: say so as every other request does (unreachable, deadline).
                    raise self.errors.translate(KafkaException(result.errors[0]), "listing consumer groups")
                return Partial(listed, [Missing(Part("consumer groups"), self._unlisted_reason(reasons))])
            log.debug("listing consumer groups: retrying after %s", reasons)
            time.sleep(0.25)

    def _unlisted_reason(self, reasons: str) -> str:
        """Why part of the group list is missing, naming the brokers that do not answer (librdkafka's
        per-broker errors do not say which broker they came from; the reader needs to know whose
        groups are left out). One ApiVersions round trip, only when a part is already missing."""
        try:
            brokers = [b.id for b in self.metadata().brokers]
            answers = self._send_all([(b, proto.ApiVersions()) for b in brokers])
        except Exception:  # noqa: BLE001 - the list is incomplete either way; say what is known
            log.debug("probing brokers after an incomplete group list failed", exc_info=True)
            return f"some brokers did not list theirs: {reasons}"
        silent = {b: self.errors.reason(a) for b, a in zip(brokers, answers) if isinstance(a, BaseException)}
        if not silent:
            return f"some brokers did not list theirs: {reasons}"
        named = "; ".join(f"broker {b}: {why}" for b, why in sorted(silent.items()))
        return f"the groups coordinated by {'broker' if len(silent) == 1 else 'brokers'} " \
            f"{', '.join(map(str, sorted(silent)))} were not listed ({named})"

    def group_offsets(self, groups: Iterable[str]) -> Partial[dict[str, dict[TopicPartition, int]]]:
        """Committed offsets per group (offsets < 0 mean nothing committed)."""
        from confluent_kafka import ConsumerGroupTopicPartitions

        out: dict[str, dict[TopicPartition, int]] = {}
        missing: list[Missing] = []
        # All groups in flight at once (the call takes one group): N groups cost one round trip, not N.
        pending = {
            group: self.admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group)], request_timeout=self.remaining_s()
            )[group]
            for group in dict.fromkeys(groups)
        }
        for group, future in pending.items():
            result = self._wait_or_note(future, Part(f"group {group}"), missing, f"DESCRIBE on Group {group}")
            if result is NOT_ARRIVED:
                continue
            out[group] = {
                TopicPartition(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0
            }
        return Partial(out, missing)

    def group_assignments(self, groups: Iterable[str]) -> Partial[dict[str, frozenset[TopicPartition]]]:
        """Per Stable group, the partitions its members are assigned (DescribeConsumerGroups); groups
        that are empty, rebalancing or dead are left out: their members hold no settled assignment."""
        from confluent_kafka import ConsumerGroupState

        out: dict[str, frozenset[TopicPartition]] = {}
        missing: list[Missing] = []
        wanted = list(dict.fromkeys(groups))
        if not wanted:
            return Partial(out, missing)
        pending = self.admin.describe_consumer_groups(wanted, request_timeout=self.remaining_s())
        self.requests["DescribeGroups"] += 1
        for group, future in pending.items():
            result = self._wait_or_note(future, Part(f"group {group}"), missing, f"DESCRIBE on Group {group}")
            if result is NOT_ARRIVED or result.state != ConsumerGroupState.STABLE:
                continue
            out[group] = frozenset(
                TopicPartition(tp.topic, tp.partition)
                for member in result.members
                for tp in (member.assignment.topic_partitions if member.assignment else ())
            )
        return Partial(out, missing)

    def log_start_offsets(self, partitions: Iterable[TopicPartition]) -> Partial[dict[TopicPartition, int]]:
        """The log start offset of each partition (ListOffsets EARLIEST): where a consumer with
        ``auto.offset.reset=earliest`` and no committed offset starts."""
        from confluent_kafka.admin import OffsetSpec
        from confluent_kafka import TopicPartition as CkTopicPartition

        tps = sorted(set(partitions))
        out: dict[TopicPartition, int] = {}
        missing: list[Missing] = []
        if not tps:
            return Partial(out, missing)
        pending = self.admin.list_offsets(
            {CkTopicPartition(tp.topic, tp.partition): OffsetSpec.earliest() for tp in tps}, request_timeout=self.remaining_s()
        )
        self.requests["ListOffsets"] += 1
        for ck_tp, future in pending.items():
            tp = TopicPartition(ck_tp.topic, ck_tp.partition)
            result = self._wait_or_note(future, tp, missing, f"DESCRIBE on Topic {tp.topic}")
            if result is not NOT_ARRIVED:
                out[tp] = result.offset
        return Partial(out, missing)
