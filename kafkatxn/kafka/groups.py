"""Consumer groups over the wire: the group list, committed offsets, members' assignments and the
log start offsets a group without commits could start from.

ListGroups goes to every broker (each lists the groups it coordinates, which is also where their
other requests go); FindCoordinator (key type 0) places the groups no broker listed, all in one
request from v4 on; OffsetFetch (v8+) and DescribeGroups carry all of a coordinator's groups in one
request, so 5,000 groups cost a few requests per broker, not several per group. A KIP-848 consumer
group (ListGroups v5+ types it ``consumer``) is described with ConsumerGroupDescribe (API 69), as
Kafka's ``kafka-consumer-groups.sh`` describes it: DescribeGroups answers it GROUP_ID_NOT_FOUND. A Kafka
Streams application on the streams protocol (KIP-1071) is listed too, and described with
StreamsGroupDescribe (API 89). One Kafka API
family per module (as kminion has one file per API), mixed into
:class:`kafkatxn.kafka.facade.Cluster`; the sending, the per-broker budget, the deadline and error
translation are the :class:`kafkatxn.kafka.session.Session`'s.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

from kafkatxn.errors import ClusterError, DeadlineExceeded
from kafkatxn.kafka import protocol as proto
from kafkatxn.kafka.client_errors import is_timeout, part_missing
from kafkatxn.kafka import retry
from kafkatxn.kafka.retry import NO_ANSWER, Failed
from kafkatxn.model import Missing, Part, Partial, TopicPartition

T = TypeVar("T")

# The groups that read by committed offsets: consumer groups, those that only commit offsets (""), and
# Kafka Streams applications on the streams rebalance protocol (KIP-1071; on by default from Kafka 4.2,
# ``group.protocol=streams``), which ListGroups lists with protocol type "streams": an exactly-once
# application reads read_committed and is held behind an open transaction as a consumer group is.
# Kafka's kafka-consumer-groups.sh lists only the first two (kafka-streams-groups.sh the third).
READER_PROTOCOL_TYPES = frozenset({"consumer", "", "streams"})
# A streams group is described by StreamsGroupDescribe (API 89: its members' active tasks, the partitions
# they read); DescribeGroups and ConsumerGroupDescribe both answer it GROUP_ID_NOT_FOUND. On a broker
# without that API it is read by its committed offsets only (not described).
STREAMS_PROTOCOL_TYPE = "streams"
STABLE = "Stable"
# A group ListGroups lists as Empty has no member (KIP-518's state, v4+): describing it could only
# answer Empty, no assignment. So of a classic group (or a v4 listing's, which names no type) and
# of a KIP-848 consumer group and a streams group alike (their Empty: no member either; KIP-848's
# states are Empty, Assigning, Reconciling, Stable, Dead; KIP-1071's add NotReady).
EMPTY = "Empty"
CLASSIC_TYPES = frozenset({"classic", ""})
# ListGroups v5+'s type of a KIP-848 consumer group: ConsumerGroupDescribe's to describe, not DescribeGroups'.
CONSUMER_TYPE = "consumer"
DESCRIBED_TYPES = CLASSIC_TYPES | {CONSUMER_TYPE, STREAMS_PROTOCOL_TYPE}
# What either describe API answers a group that is not of its kind (DescribeGroups v6+: "not a
# classic group"; ConsumerGroupDescribe: "not a consumer group") or no longer exists.
NOT_FOUND = "GROUP_ID_NOT_FOUND"
# A group neither API finds is gone, as DescribeGroups before v6 answers a group that is: Dead.
DEAD = "Dead"
# Each kind of group by the describe API of its protocol, in the order one coordinator's requests go.
_DESCRIBE_REQUESTS = (("", proto.DescribeGroups), (CONSUMER_TYPE, proto.ConsumerGroupDescribe),
                      (STREAMS_PROTOCOL_TYPE, proto.StreamsGroupDescribe))


def group_part(group: str) -> Part:
    return Part(f"group {group}")


def describe_group_acl(group: str) -> str:
    return f"DESCRIBE on Group {group}"


def describe_group_topics_acl(group: str) -> str:
    """What TOPIC_AUTHORIZATION_FAILED in a group's description needs: Kafka describes a consumer group
    (ConsumerGroupDescribe) only to a principal that may describe every topic in its members' current
    and target assignments, a streams group (StreamsGroupDescribe) every topic of its topology."""
    return f"DESCRIBE on every Topic of Group {group}"


class GroupsApi:
    # (deadline, group -> coordinator) learnt from ListGroups and FindCoordinator in this command
    # (a scrape restarts the deadline, a prompt extends it: then they are asked again).
    _group_coordinators: tuple[float, dict[str, int]] = (0.0, {})
    # (deadline, groups) ListGroups listed Empty in this command (classic or consumer ones: EMPTY), as the coordinators.
    _listed_empty: tuple[float, frozenset[str]] = (0.0, frozenset())
    # (deadline, group -> kind) the groups ListGroups typed consumer (KIP-848: CONSUMER_TYPE) or listed with
    # protocol type "streams" (KIP-1071: STREAMS_PROTOCOL_TYPE) in this command; classic ones are not in it.
    _listed_kinds: tuple[float, dict[str, str]] = (0.0, {})

    def list_groups(self) -> list[str]:
        """Every consumer group, or an error when a broker's part of the list is missing (see
        :meth:`list_groups_partial` for the list with the missing part named instead)."""
        listed = self.list_groups_partial()
        if listed.missing:
            raise ClusterError(f"listing consumer groups failed: {listed.missing[0].reason}")
        return listed.value

    def list_groups_partial(self) -> Partial[list[str]]:
        """The consumer groups the brokers listed, with the Kafka Streams applications' streams groups
        (READER_PROTOCOL_TYPES; ListGroups on every broker: each lists the groups it coordinates). A broker that answers "not yet" (COORDINATOR_LOAD_IN_PROGRESS right after
        ``__consumer_offsets`` is created) is asked again on the one policy (``retry.RETRIES``); a
        broker that still does not list its groups then (an error, frozen, dead) leaves them out,
        named in the missing part ``consumer groups`` (a group missing from an incomplete list is
        not unknown). When no broker answers at all, the error that ends the command."""
        brokers = [b.id for b in self.metadata().brokers]
        failures: list[BaseException] = []

        def send(asked: list[int]) -> tuple[dict[int, list[Any]], dict[int, Failed]]:
            listed: dict[int, list[Any]] = {}
            failed: dict[int, Failed] = {}
            for broker, resp in zip(asked, self._send_all([(b, proto.ListGroups()) for b in asked])):
                if isinstance(resp, BaseException):
                    failed[broker] = Failed(NO_ANSWER, self.errors.reason(resp))  # authentication failures end the command
                    failures.append(resp)
                elif resp.error:
                    failed[broker] = Failed(resp.error, resp.error)
                else:
                    listed[broker] = [g for g in resp.groups if g.protocol_type in READER_PROTOCOL_TYPES]
            return listed, failed

        asked = retry.ask(brokers, send, "ListGroups", self.deadline)
        listed = {g.group_id: broker for broker, groups in asked.answers.items() for g in groups}
        unlisted: dict[int, str] = asked.failed  # broker -> why its groups are not listed
        self._learn_coordinators(listed)
        self._listed_empty = (self.deadline, frozenset(
            g.group_id for groups in asked.answers.values() for g in groups if g.state == EMPTY and g.group_type in DESCRIBED_TYPES
        ))
        self._listed_kinds = (self.deadline, {
            g.group_id: STREAMS_PROTOCOL_TYPE if g.protocol_type == STREAMS_PROTOCOL_TYPE else CONSUMER_TYPE
            for groups in asked.answers.values() for g in groups
            if g.group_type == CONSUMER_TYPE or g.protocol_type == STREAMS_PROTOCOL_TYPE
        })
        names = sorted(listed)
        if not unlisted:
            return Partial(names)
        if len(failures) == len(brokers) and len(unlisted) == len(brokers):
            # Nothing answered: say so as every other request does (unreachable, deadline).
            if all(isinstance(f, DeadlineExceeded) or is_timeout(f) for f in failures):  # BrokerSilent too
                raise self.errors.translate(TimeoutError(), "listing consumer groups")
            raise self.errors.translate(failures[0], "listing consumer groups")
        ids = sorted(unlisted)
        named = "; ".join(f"broker {b}: {unlisted[b]}" for b in ids)
        reason = f"the groups coordinated by {'broker' if len(ids) == 1 else 'brokers'} " \
            f"{', '.join(map(str, ids))} were not listed ({named})"
        return Partial(names, [Missing(Part("consumer groups"), reason)])

    def list_groups_ahead(self) -> None:
        """:meth:`list_groups_partial`'s ListGroups to every broker the last metadata named, sent with the next
        round (``Session.send_ahead``): an exporter scrape's Metadata, whose brokers they are unless one came or
        went since the scrape before (one new is asked by the call itself; one gone was asked for nothing, once).
        Without it, a round trip of its own between the scrape's Metadata and its OffsetFetch. Nothing is sent
        before any metadata was read (a first scrape: which brokers to ask is not known yet)."""
        known = self._metadata or self._last_metadata
        if known is not None:
            self.send_ahead([(b.id, proto.ListGroups()) for b in known.brokers])

    def group_offsets(self, groups: Iterable[str]) -> Partial[dict[str, dict[TopicPartition, int]]]:
        """Committed offsets per group (a partition without a commit is left out): OffsetFetch at each
        group's coordinator, all its groups in one request (v8+; one per group before)."""
        batched = self.wire.max_version("OffsetFetch") >= 8

        def requests(node_groups: tuple[str, ...]) -> list[proto.OffsetFetch]:
            return [proto.OffsetFetch(node_groups)] if batched else [proto.OffsetFetch((g,), batched=False) for g in node_groups]

        answered = self._at_coordinators(groups, "OffsetFetch", requests)
        # Each group's own dict, copied in C: the wire's reader hands the read-only mappings it keeps from one
        # scrape to the next (group_answers.MEMO), which dict() would walk key by key (100,000 offsets at 5,000
        # groups: 14-20 ms of CPU before the offsets' round is sent, against 3-4 ms).
        return Partial({g: a.offsets.copy() for g, a in answered.value.items()}, answered.missing)

    def unstable_offsets(self, partitions: Mapping[str, Iterable[TopicPartition]]) -> Partial[dict[str, frozenset[TopicPartition]]]:
        """Per group, the partitions whose committed offset a read_committed consumer cannot fetch
        now: OffsetFetch with ``require_stable`` (KIP-447, v7+; the consumer's own request) answers
        UNSTABLE_OFFSET_COMMIT while a transactional offset commit (``sendOffsetsToTransaction``)
        is pending there. Brokers before v7 have no such answer, and no consumer waits on one:
        every group is stable there."""
        wanted = {g: tuple(sorted(set(tps))) for g, tps in partitions.items()}
        wanted = {g: tps for g, tps in wanted.items() if tps}
        if not wanted:
            return Partial({})
        version = self.wire.max_version("OffsetFetch")
        if version < 7:
            return Partial({g: frozenset() for g in wanted})

        def requests(node_groups: tuple[str, ...]) -> list[proto.OffsetFetch]:
            if version >= 8:
                return [proto.OffsetFetch(node_groups, stable=tuple(wanted[g] for g in node_groups))]
            return [proto.OffsetFetch((g,), batched=False, stable=(wanted[g],)) for g in node_groups]

        answered = self._at_coordinators(wanted, "OffsetFetch", requests)
        return Partial({g: a.unstable for g, a in answered.value.items()}, answered.missing)

    def group_assignments(self, groups: Iterable[str]) -> Partial[dict[str, frozenset[TopicPartition]]]:
        """Per Stable group, the partitions its members are assigned (DescribeGroups, or
        ConsumerGroupDescribe for the KIP-848 consumer groups ListGroups typed ``consumer``: all of a
        coordinator's groups in one request of each); groups that are empty, rebalancing or dead are
        left out: their members hold no settled assignment. KIP-848's Assigning and Reconciling are
        its rebalancing (members moving to a new target assignment; a partition being moved is in no
        member's current assignment): left out as the classic protocol's PreparingRebalance and
        CompletingRebalance are, so Stable means the same of both. A group this command's ListGroups
        listed Empty (v4+) is not described: it has no member (most groups that only commit offsets,
        as Spark's, Flink's or a tool's: 5,000 groups' DescribeGroups were the group pass's largest answer)."""
        answered = self._described(self._to_describe(groups))
        return Partial({g: d.assigned for g, d in answered.value.items() if d.state == STABLE}, answered.missing)

    def _described(self, groups: list[str]) -> Partial[dict[str, proto.DescribedGroup]]:
        """Each group's description, by the API of its kind (:meth:`_describe_requests`). A group an
        API answers GROUP_ID_NOT_FOUND is not of its kind (it moved between the protocols since it
        was listed: KIP-848's online upgrade and downgrade) or is gone: it is asked once more with the
        other API (DescribeGroups for a consumer or streams group, ConsumerGroupDescribe for a classic
        one), and one neither finds is Dead (left out), as DescribeGroups before v6 answers a group
        that is gone. Any other error is the group's missing part."""
        kinds = self._describe_kinds()
        first = self._at_coordinators(groups, "DescribeGroups", lambda node_groups: self._describe_requests(node_groups, kinds),
                                      answered=frozenset({NOT_FOUND}))
        not_found = [g for g, d in first.value.items() if d.error == NOT_FOUND]
        if not not_found:
            return first
        found = {g: d for g, d in first.value.items() if d.error is None}
        has_consumer_describe = self.wire.max_version("ConsumerGroupDescribe") >= 0
        other = [g for g in not_found if g in kinds or has_consumer_describe]
        flipped = {g: CONSUMER_TYPE for g in other if g not in kinds}
        again = self._at_coordinators(other, "DescribeGroups", lambda node_groups: self._describe_requests(node_groups, flipped),
                                      answered=frozenset({NOT_FOUND}))
        for g in not_found:
            d = again.value.get(g)
            if d is not None and d.error is None:
                found[g] = d
            elif d is not None or g not in other:  # neither API finds it
                found[g] = proto.DescribedGroup(g, None, DEAD)
        return Partial(found, [*first.missing, *again.missing])

    def _listed_now(self, listed: tuple[float, T], none: T) -> T:
        """What this command's listing kept in ``listed`` (``none`` when another command listed it)."""
        deadline, kept = listed
        return kept if deadline == self.deadline else none

    def _listed_kinds_now(self) -> dict[str, str]:
        """This command's listing's consumer and streams groups, by kind."""
        return self._listed_now(self._listed_kinds, {})

    def _streams_not_described(self) -> bool:
        """Whether the broker has no StreamsGroupDescribe: its streams groups are then not described."""
        return self.wire.max_version("StreamsGroupDescribe") < 0

    def _describe_kinds(self) -> dict[str, str]:
        """The groups not described by DescribeGroups, by the API that describes them: KIP-848's consumer
        groups (ConsumerGroupDescribe), and the streams groups where the broker has StreamsGroupDescribe
        (without it they are not described: :meth:`_to_describe`)."""
        kinds = self._listed_kinds_now()
        if kinds and self._streams_not_described():
            return {g: kind for g, kind in kinds.items() if kind != STREAMS_PROTOCOL_TYPE}
        return kinds

    @staticmethod
    def _describe_requests(node_groups: tuple[str, ...], kinds: Mapping[str, str]) -> list[Any]:
        """One coordinator's describe requests: DescribeGroups for the classic groups (and those a
        listing before ListGroups v5 does not type), ConsumerGroupDescribe for the consumer groups and
        StreamsGroupDescribe for the streams groups in ``kinds``; one request of each API at most."""
        if not kinds:
            return [proto.DescribeGroups(node_groups)]
        by_kind: dict[str, list[str]] = defaultdict(list)
        for g in node_groups:
            by_kind[kinds.get(g, "")].append(g)
        return [request(tuple(by_kind[kind])) for kind, request in _DESCRIBE_REQUESTS if by_kind.get(kind)]

    def _to_describe(self, groups: Iterable[str]) -> list[str]:
        """Of ``groups`` (once each, in order), those described: not those listed Empty, nor the
        streams groups where the broker has no StreamsGroupDescribe (neither other API knows them)."""
        wanted = list(dict.fromkeys(groups))
        left_out = self._listed_now(self._listed_empty, frozenset())
        kinds = self._listed_kinds_now()
        if kinds and self._streams_not_described():
            left_out = left_out | {g for g, kind in kinds.items() if kind == STREAMS_PROTOCOL_TYPE}
        if not left_out:
            return wanted
        return [g for g in wanted if g not in left_out]

    def group_assignments_ahead(self, groups: Iterable[str]) -> None:
        """The DescribeGroups and ConsumerGroupDescribe :meth:`group_assignments` will send for ``groups``, sent with the next round
        (``Session.send_ahead``): the committed offsets' OffsetFetch, at the same coordinators, which
        answer a connection's requests in order (read after the commits, as the call reads them). Only
        when this command knows every group's coordinator (ListGroups placed them): the requests are
        then the call's own; otherwise it finds them first, and nothing goes ahead."""
        known = self._known_coordinators()
        by_node: dict[int, list[str]] = defaultdict(list)
        for g in self._to_describe(groups):  # in the order the call places them (_at_coordinators)
            node = known.get(g)
            if node is None:
                return
            by_node[node].append(g)
        kinds = self._describe_kinds()
        self.send_ahead([(node, r) for node, node_groups in by_node.items() for r in self._describe_requests(tuple(node_groups), kinds)])

    def log_start_offsets(self, partitions: Iterable[TopicPartition]) -> Partial[dict[TopicPartition, int]]:
        """The log start offset of each partition (ListOffsets EARLIEST, one request per leader):
        where a consumer with ``auto.offset.reset=earliest`` and no committed offset starts."""
        tps = sorted(dict.fromkeys(partitions))  # in order already (gather.log_starts'), the sort is one pass
        if not tps:
            return Partial({})
        found = self._latest_offsets(tps, (False,), earliest=True)[0]
        return Partial({tp: offsets[0] for tp, offsets in found.value.items()}, found.missing)

    # -- coordinators --------------------------------------------------------------------------

    def _known_coordinators(self) -> dict[str, int]:
        deadline, known = self._group_coordinators
        if deadline != self.deadline:
            known = {}
            self._group_coordinators = (self.deadline, known)
        return known

    def _learn_coordinators(self, coordinators: dict[str, int]) -> None:
        self._known_coordinators().update(coordinators)

    def _find_group_coordinators(self, groups: Sequence[str], failed: dict[str, Failed]) -> dict[str, int]:
        """Each group's coordinator: the one known in this command, else FindCoordinator's answer.
        Returns the placed groups; the failures of the rest are noted in ``failed``."""
        known = self._known_coordinators()
        placed = {g: known[g] for g in groups if g in known}
        unknown = [g for g in groups if g not in known]
        if not unknown:
            return placed
        if self.wire.max_version("FindCoordinator") >= 4:
            requests = [(None, proto.FindGroupCoordinators(tuple(unknown)))]
        else:
            requests = [(None, proto.FindGroupCoordinators((g,), batched=False)) for g in unknown]
        for (_node, request), resp in zip(requests, self._send_all(requests)):
            if isinstance(resp, BaseException):
                reason = f"FindCoordinator: {self.errors.reason(resp)}"
                failed.update((g, Failed(NO_ANSWER, Missing(group_part(g), reason), "FindCoordinator")) for g in request.group_ids)
                continue
            for c in resp.coordinators:
                if c.error is None:
                    placed[c.group_id] = known[c.group_id] = c.node_id
                else:
                    why = part_missing(group_part(c.group_id), c.error, describe_group_acl(c.group_id))
                    failed[c.group_id] = Failed(c.error, why, "FindCoordinator")
        return placed

    def _at_coordinators(
        self, groups: Iterable[str], api: str, requests_for: Callable[[tuple[str, ...]], list[Any]],
        answered: frozenset[str] = frozenset(),
    ) -> Partial[dict[str, Any]]:
        """Each group's answer from its coordinator (``requests_for`` makes the requests of ``api``
        for one coordinator's groups, or of an API its retries are ``api``'s; each response's ``groups``
        carry ``group_id`` and ``error``; an error in ``answered`` is the group's answer, not a failure).

        Asked again on the one policy (``retry.RETRIES``): a coordinator that moved or did not answer
        is found again, one loading its log is asked again after a pause. A refusal is the part's
        missing reason naming the ACL (``DESCRIBE on Group g``); a silent coordinator makes each of
        its groups a missing part."""
        wanted = list(dict.fromkeys(groups))

        def send(pending: list[str]) -> tuple[dict[str, Any], dict[str, Failed]]:
            out: dict[str, Any] = {}
            failed: dict[str, Failed] = {}
            placed = self._find_group_coordinators(pending, failed)
            by_node: dict[int, list[str]] = defaultdict(list)
            for g, node in placed.items():
                by_node[node].append(g)
            requests = [(node, r) for node, node_groups in by_node.items() for r in requests_for(tuple(node_groups))]
            for (node, request), resp in zip(requests, self._send_all(requests) if requests else []):
                if isinstance(resp, BaseException):
                    reason = f"coordinator {node}: {self.errors.reason(resp)}"
                    failed.update((g, Failed(NO_ANSWER, Missing(group_part(g), reason))) for g in request.group_ids)
                    continue
                for answer in resp.groups:
                    g = answer.group_id
                    if answer.error is None or answer.error in answered:
                        out[g] = answer
                    else:
                        acl = describe_group_topics_acl(g) if answer.error == "TOPIC_AUTHORIZATION_FAILED" else describe_group_acl(g)
                        failed[g] = Failed(answer.error, part_missing(group_part(g), answer.error, acl))
            return out, failed

        asked = retry.ask(wanted, send, api, self.deadline, refind=self._forget_coordinators)
        return Partial(asked.answers, asked.failed_in(wanted))

    def _forget_coordinators(self, groups: Iterable[str]) -> None:
        """The groups' coordinators are to be found again (they moved, or did not answer)."""
        known = self._known_coordinators()
        for g in groups:
            known.pop(g, None)
