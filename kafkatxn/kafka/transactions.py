"""The coordinator side: ListTransactions, FindCoordinator and DescribeTransactions.

One Kafka API family per module (as kminion has one file per API), mixed into
:class:`kafkatxn.kafka.facade.Cluster`; the sending, deadline and error translation are the
:class:`kafkatxn.kafka.session.Session`'s.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections import defaultdict
from typing import Iterable, Mapping

from kafkatxn.errors import UnsupportedBrokerError
from kafkatxn.kafka import protocol as proto
from kafkatxn.kafka.client_errors import part_missing
from kafkatxn.kafka import retry
from kafkatxn.kafka.retry import NO_ANSWER, Failed
from kafkatxn.model import (
    IDS_ALL, IDS_FILTERED, IDS_UNKNOWN, TRANSACTION_STATE_TOPIC, Broker, DescribedTransactions, ListTransactionsSupport,
    Missing, Part, Partial, TopicPartition, TransactionalId, TransactionDescription, TransactionListing,
)

log = logging.getLogger("kafkatxn.cluster")

# The probe's transactional id: random, so no transaction has it and no literal ACL names it; it
# begins with "~" so that no prefixed ACL an operator writes for real ids (``app-``, ``k``) covers it.
PROBE_ID_PREFIX = "~kafkatxn-visibility-probe-"
PROBE_ID_TRIES = 200  # random ids tried for one whose log partition has a live leader
LOG_PROBE_ID_PREFIX = "~kafkatxn-log-probe-"  # loaded_log_partitions' ids, one hashing to each log partition


@functools.cache
def log_probe_ids(partitions: int) -> tuple[str, ...]:
    """One id per ``__transaction_state`` partition, hashing to it (by position), for
    :meth:`TransactionsApi.loaded_log_partitions`. Fixed names: which ids they are does not matter,
    only where they hash (a real id of the same name would be described, which tells the same)."""
    from kafkatxn.verdicts import coordinator_partition  # here, not with the facade: see _probe_id

    out: dict[int, str] = {}
    n = 0
    while len(out) < partitions:
        probe = f"{LOG_PROBE_ID_PREFIX}{n}"
        out.setdefault(coordinator_partition(probe, partitions), probe)
        n += 1
    return tuple(out[p] for p in range(partitions))


def _log_probes(leaders: Mapping[int, int], purpose: str) -> list[tuple[int, proto.DescribeTransactions]]:
    """The requests of :meth:`TransactionsApi.loaded_log_partitions`: per leader, the probe ids of its partitions."""
    probes = log_probe_ids(max(leaders, default=-1) + 1)
    by_node: dict[int, list[str]] = defaultdict(list)
    for partition, leader in leaders.items():
        by_node[leader].append(probes[partition])
    return [(node, proto.DescribeTransactions(tuple(ids), purpose)) for node, ids in by_node.items()]


def describe_acl(transactional_id: str) -> str:
    return f"DESCRIBE on TransactionalId {transactional_id}"


class TransactionsApi:
    def list_transactions(
        self,
        broker_ids: Iterable[int] | None = None,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        min_duration_ms: int | None = None,
        pattern: str | None = None,
        purpose: str = "",
    ) -> tuple[Partial[list[TransactionListing]], ListTransactionsSupport]:
        """ListTransactions on every broker (each coordinates a slice of ``__transaction_state``).

        Duration and pattern filters go to the broker when every broker supports them
        (v1 and v2); otherwise they are left to the caller, as the returned support says.
        """
        ids = list(broker_ids) if broker_ids is not None else [b.id for b in self.metadata().brokers]
        filtered = min_duration_ms is not None or pattern is not None
        lowest = min((v for v in self._list_transactions_versions(ids, filtered) if v is not None), default=0)
        support = ListTransactionsSupport(
            duration_on_broker=min_duration_ms is not None and lowest >= 1,
            pattern_on_broker=pattern is not None and lowest >= 2,
        )
        request = proto.ListTransactions(
            tuple(states), tuple(producer_ids),
            int(min_duration_ms) if support.duration_on_broker and min_duration_ms is not None else None,
            pattern if support.pattern_on_broker else None,
            purpose,
        )
        out: list[TransactionListing] = []
        missing: list[Missing] = []
        remembered = self._remembered_listings(ids, request)
        for listing in remembered.values():
            out.extend(listing)
        asked = [i for i in ids if i not in remembered]

        def send(brokers: list[int]) -> tuple[dict[int, list[TransactionListing]], dict[int, Failed]]:
            listings: dict[int, list[TransactionListing]] = {}
            failed: dict[int, Failed] = {}
            for broker_id, resp in zip(brokers, self._send_all([(i, request) for i in brokers])):
                arrived: list[Missing] = []
                if not self._arrived(resp, Broker(broker_id), arrived):
                    failed[broker_id] = Failed(NO_ANSWER, arrived[0])
                elif resp.error:  # "not yet" from a coordinator loading its part of the log: asked again
                    failed[broker_id] = Failed(resp.error, Missing(Broker(broker_id), resp.error))
                else:
                    listings[broker_id] = [
                        TransactionListing(t.transactional_id, t.producer_id, t.state, broker_id) for t in resp.transactions
                    ]
            return listings, failed

        if asked:
            listed = retry.ask(asked, send, "ListTransactions", self.deadline)
            self.remember("ListTransactions", {(b, request): listing for b, listing in listed.answers.items()})
            for listing in listed.answers.values():
                out.extend(listing)
            missing.extend(listed.failed_in(asked))
        out.sort(key=lambda t: t.transactional_id)
        return Partial(out, missing), support

    def list_transactions_ahead(self) -> None:
        """The listing of every transaction on every broker (:meth:`list_transactions` unfiltered)
        sent with the next round (``Session.send_ahead``), when this run has not listed them yet
        and the bootstrap broker has ListTransactions: it needs only the metadata."""
        if self.wire.max_version("ListTransactions") < 0:
            return  # asked then, the listing says what is unsupported
        ids = [b.id for b in self.metadata().brokers]
        if self._answers is None or len(self._remembered_listings(ids, proto.ListTransactions())) == len(ids):
            return
        self.send_ahead([(i, proto.ListTransactions()) for i in ids])

    def _remembered_listings(self, ids: list[int], request: proto.ListTransactions) -> dict[int, list[TransactionListing]]:
        """Per broker, its listing for ``request`` this run: asked as is, or kept from an unfiltered
        listing (every transaction) and filtered here by producer id and state."""
        if self._answers is None:
            return {}
        exact, rest = self.remembered("ListTransactions", [(i, request) for i in ids])
        out = {key[0]: listing for key, listing in exact.items()}
        if request.min_duration_ms is None and request.pattern is None and rest:
            everything, _ = self.remembered("ListTransactions", [(key[0], proto.ListTransactions()) for key in rest])
            pids, states = set(request.producer_ids), set(request.states)
            for (broker_id, _), listing in everything.items():
                out[broker_id] = [t for t in listing if (not pids or t.producer_id in pids) and (not states or t.state in states)]
        return out

    def require_transaction_apis(self) -> None:
        """Raise :class:`UnsupportedBrokerError` when the brokers have no ListTransactions (before
        Kafka 3.0, KIP-664): nothing that needs the coordinators' side can be decided."""
        self._list_transactions_versions([b.id for b in self.metadata().brokers], filtered=False)

    def _list_transactions_versions(self, ids: list[int], filtered: bool) -> list[int | None]:
        """ListTransactions' highest version per broker (None: not known), or the error when none has it.
        Not ``filtered``, only whether any broker has it matters: when the bootstrap broker has it, no
        broker is asked (a broker not connected yet would be sent an ApiVersions of its own after the
        one its connection makes) and none is known."""
        if not filtered and self.wire.max_version("ListTransactions") >= 0:
            return [None] * len(ids)
        versions = self.api_versions(ids, probe=False).value  # ListTransactions itself finds a dead broker
        max_versions = [versions[i].versions.get("ListTransactions", (0, -1))[1] if i in versions else None for i in ids]
        if versions and all(v < 0 for v in max_versions if v is not None):
            raise UnsupportedBrokerError("the brokers do not support ListTransactions (needs Apache Kafka 3.0 or newer)")
        return max_versions

    def find_transaction_coordinators(self, transactional_ids: Iterable[str]) -> Partial[dict[str, int]]:
        tids = list(dict.fromkeys(transactional_ids))
        if not tids:
            return Partial({})
        missing: list[Missing] = []
        out, tids = self.remembered("FindCoordinator", tids)
        if not tids:
            return Partial(out)
        if self.wire.max_version("FindCoordinator") >= 4:
            requests = [(None, proto.FindTransactionCoordinators(tuple(tids)))]
        else:
            requests = [(None, proto.FindTransactionCoordinators((t,), batched=False)) for t in tids]
        for (_node, request), resp in zip(requests, self._send_all(requests)):
            if not self._arrived(resp, TransactionalId(request.transactional_ids[0]), missing):
                reason = missing.pop().reason
                missing.extend(Missing(TransactionalId(t), f"FindCoordinator: {reason}") for t in request.transactional_ids)
                continue
            for c in resp.coordinators:
                if c.error:
                    missing.append(part_missing(TransactionalId(c.transactional_id), c.error, describe_acl(c.transactional_id)))
                else:
                    out[c.transactional_id] = c.node_id
                    self.remember("FindCoordinator", {c.transactional_id: c.node_id})
        return Partial(out, missing)

    def describe_transactions(self, transactional_ids: Iterable[str]) -> Partial[DescribedTransactions]:
        """DescribeTransactions routed to each id's coordinator: what was described, the ids the
        coordinator does not know (TRANSACTIONAL_ID_NOT_FOUND), and as ``missing`` the ids that
        could not be asked.

        Ids whose coordinator moved, was loading or creating its log or did not answer are asked
        again on the one policy (``retry.RETRIES``), at the coordinator FindCoordinator names then.
        """
        return self._describe_transactions(transactional_ids)

    def _describe_transactions(self, transactional_ids: Iterable[str]) -> Partial[DescribedTransactions]:
        if self.wire.max_version("DescribeTransactions") < 0:  # before Kafka 3.0 (KIP-664)
            raise UnsupportedBrokerError("the brokers do not support DescribeTransactions (needs Apache Kafka 3.0 or newer)")
        known, asked = self.remembered("DescribeTransactions", list(dict.fromkeys(transactional_ids)))
        described = retry.ask(
            asked, self._describe_transactions_once, "DescribeTransactions", self.deadline,
            refind=lambda tids: self.forget("FindCoordinator", tids),
        ) if asked else retry.Asked()
        self.remember("DescribeTransactions", described.answers)
        result = DescribedTransactions()
        for tid, (description, error) in {**known, **described.answers}.items():
            if description is not None:
                result.found[tid] = description
            else:
                result.not_found[tid] = error
        return Partial(result, described.failed_in(asked))

    def _describe_transactions_once(
        self, transactional_ids: list[str]
    ) -> tuple[dict[str, tuple[TransactionDescription | None, str | None]], dict[str, Failed]]:
        """One round: FindCoordinator, then DescribeTransactions at each coordinator. Per id its
        ``(description, None)`` or ``(None, TRANSACTIONAL_ID_NOT_FOUND)``, or its failure."""
        coordinators = self.find_transaction_coordinators(transactional_ids)
        failed: dict[str, Failed] = {}
        for m in coordinators.missing:
            if isinstance(m.subject, TransactionalId):
                error = NO_ANSWER if m.reason.startswith("FindCoordinator: ") else m.reason
                failed[m.subject.id] = Failed(None if m.not_authorized else error, m, "FindCoordinator")
        by_node: dict[int, list[str]] = defaultdict(list)
        for tid, node in coordinators.value.items():
            by_node[node].append(tid)
        requests = [(node, proto.DescribeTransactions(tuple(ids))) for node, ids in by_node.items()]
        out: dict[str, tuple[TransactionDescription | None, str | None]] = {}
        for (node, request), resp in zip(requests, self._send_all(requests)):
            arrived: list[Missing] = []
            if not self._arrived(resp, Broker(node), arrived):
                reason = f"coordinator {node}: {arrived[0].reason}"
                failed.update((t, Failed(NO_ANSWER, Missing(TransactionalId(t), reason))) for t in request.transactional_ids)
                continue
            for txn in resp.transactions:
                if txn.error == "TRANSACTIONAL_ID_NOT_FOUND":
                    out[txn.transactional_id] = (None, txn.error)
                elif txn.error:
                    why = part_missing(TransactionalId(txn.transactional_id), txn.error, describe_acl(txn.transactional_id))
                    failed[txn.transactional_id] = Failed(txn.error, why)
                else:
                    out[txn.transactional_id] = (TransactionDescription(
                        txn.transactional_id, node, txn.state, txn.producer_id, txn.producer_epoch,
                        txn.timeout_ms, txn.start_time_ms, txn.partitions,
                    ), None)
        return out, failed

    def transactional_id_visibility(self) -> Partial[str]:
        """Whether ListTransactions shows this principal every transactional id: ``IDS_ALL``,
        ``IDS_FILTERED`` or ``IDS_UNKNOWN`` (the probe did not answer; ``missing`` says why).

        Kafka's ListTransactions (``KafkaApis.handleListTransactionsRequest``) silently drops every
        id the principal may not DESCRIBE; FindCoordinator and DescribeTransactions of such an id
        answer ``TRANSACTIONAL_ID_AUTHORIZATION_FAILED`` (``KafkaApis.getCoordinator``,
        ``handleDescribeTransactionsRequest``). Both ask the authorizer the same question for one
        id, so the probe is DescribeTransactions of a random id that no transaction has:

        - **denied**: the principal may not describe some id, so ListTransactions may leave out the
          one a producer id belongs to: ``IDS_FILTERED``. This is sound for every ACL shape: a
          literal ACL (``app-1``) or a prefixed one (``app-``) does not cover a random id beginning
          with ``~``; with no ACL at all and ``allow.everyone.if.no.acl.found=false`` it is denied.
        - **allowed** (``TRANSACTIONAL_ID_NOT_FOUND``): the principal may describe an arbitrary id:
          a super user, an ALLOW on the wildcard ``*``, no authorizer, or no ACL matching the id
          with ``allow.everyone.if.no.acl.found=true``: ``IDS_ALL``. What this cannot see: a DENY
          ACL for this principal on some other ids (DENY wins over the wildcard ALLOW in both
          ``StandardAuthorizer`` and ``AclAuthorizer``), or, with ``allow.everyone.if.no.acl.found``,
          ids that have ACLs naming only other principals. Finding those needs DescribeAcls, which
          needs DESCRIBE on the Cluster that a monitoring principal seldom has. Both are
          deliberate, unusual set-ups (a monitoring principal denied what it is to monitor); the
          README says so, and a principal meant to decide ``hanging`` should have the wildcard.

        The probe asks no coordinator to keep anything: DescribeTransactions of an unknown id
        creates nothing. One FindCoordinator and at most one DescribeTransactions, asked again only
        while the coordinator says "not yet" (on a cluster that never had a transaction, the first
        FindCoordinator creates ``__transaction_state``: NOT_COORDINATOR until it is loaded).
        """
        return self.describe_with_visibility(())[1]

    def describe_with_visibility(
        self, transactional_ids: Iterable[str]
    ) -> tuple[Partial[DescribedTransactions], Partial[str]]:
        """:meth:`describe_transactions` of the ids and :meth:`transactional_id_visibility`, the
        probe asked in the same requests (it is one more id); the visibility is asked once a run."""
        tids = list(dict.fromkeys(transactional_ids))
        kept, _ = self.remembered("Visibility", [None])
        if kept:
            return (self.describe_transactions(tids) if tids else Partial(DescribedTransactions())), kept[None]
        probe = self._probe_id()
        try:
            described = self._describe_transactions([*tids, probe])
        except UnsupportedBrokerError as exc:
            if tids:
                raise
            return Partial(DescribedTransactions()), Partial(IDS_UNKNOWN, [Missing(Part("transactional id visibility"), str(exc))])
        self.forget("DescribeTransactions", [probe])
        self.forget("FindCoordinator", [probe])
        visibility = self._visibility(probe, described)
        if visibility.value != IDS_UNKNOWN:  # a probe that did not answer is asked again
            self.remember("Visibility", {None: visibility})
        found = DescribedTransactions({t: d for t, d in described.value.found.items() if t != probe},
                                      {t: e for t, e in described.value.not_found.items() if t != probe})
        others = [m for m in described.missing if m.subject != TransactionalId(probe)]
        return Partial(found, others), visibility

    def _visibility(self, probe: str, described: Partial[DescribedTransactions]) -> Partial[str]:
        if probe in described.value.not_found or probe in described.value.found:
            return Partial(IDS_ALL)
        gaps = described.missing_for(TransactionalId(probe))
        if any(m.not_authorized for m in gaps):
            return Partial(IDS_FILTERED)
        reasons = "; ".join(m.reason for m in gaps) or "no answer"
        return Partial(IDS_UNKNOWN, [Missing(Part("transactional id visibility"), f"the probe did not answer: {reasons}")])

    def loaded_log_partitions(self, leaders: Mapping[int, int], purpose: str = "") -> Partial[frozenset[int]]:
        """Of the ``__transaction_state`` partitions (partition -> the broker the metadata names its
        leader), those that broker coordinates now, loaded; ``missing`` says why each other did not.

        The metadata can name a new leader before that broker has taken the partition over (KRaft's
        brokers apply the controller's record one after another, and a broker updates its metadata
        cache before its coordinator's election), and until then its ListTransactions leaves the
        partition's ids out without an error. DescribeTransactions of an id hashing to the
        partition, sent to that broker, tells (``TransactionStateManager.getTransactionState``):
        ``TRANSACTIONAL_ID_NOT_FOUND`` (or a description) only when it owns the partition and has
        loaded it, ``NOT_COORDINATOR`` before it has taken it over or while it gives it up,
        ``COORDINATOR_LOAD_IN_PROGRESS`` while loading. One round, never answered from the run.
        """
        probes = log_probe_ids(max(leaders, default=-1) + 1)
        partition_of = {probe: n for n, probe in enumerate(probes)}
        requests = _log_probes(leaders, purpose)
        loaded: set[int] = set()
        missing: list[Missing] = []
        for (node, request), resp in zip(requests, self._send_all(requests)):
            arrived: list[Missing] = []
            if not self._arrived(resp, Broker(node), arrived):
                missing.extend(Missing(TopicPartition(TRANSACTION_STATE_TOPIC, partition_of[t]), f"broker {node}: {arrived[0].reason}")
                               for t in request.transactional_ids)
                continue
            for txn in resp.transactions:
                partition = partition_of[txn.transactional_id]
                if txn.error in (None, "TRANSACTIONAL_ID_NOT_FOUND"):
                    loaded.add(partition)
                elif txn.error == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED":
                    missing.append(part_missing(TopicPartition(TRANSACTION_STATE_TOPIC, partition), txn.error,
                                                describe_acl(txn.transactional_id)))
                else:
                    missing.append(Missing(TopicPartition(TRANSACTION_STATE_TOPIC, partition),
                                           f"broker {node} did not coordinate it yet ({txn.error})"))
        told = loaded | {m.subject.partition for m in missing}
        missing.extend(Missing(TopicPartition(TRANSACTION_STATE_TOPIC, p), f"broker {leader} left its probe unanswered")
                       for p, leader in leaders.items() if p not in told)  # only a positive answer counts
        return Partial(frozenset(loaded), missing)

    def loaded_log_partitions_ahead(self, leaders: Mapping[int, int], purpose: str) -> None:
        """The probes of :meth:`loaded_log_partitions` sent with the next round (``Session.send_ahead``):
        that call then takes their answers."""
        self.send_ahead(_log_probes(leaders, purpose))

    def _probe_id(self) -> str:
        """A random id whose ``__transaction_state`` partition has a leader that has not gone silent
        in this command: any coordinator can answer the authorizer's question, so the probe is not
        sent to a log partition without one (it would wait out its backoff for nothing). Without the
        log in the metadata (a cluster that never had a transaction), any id."""
        # Imported here, as fetch_ahead and transaction_log import it: the verdicts are not needed to send a
        # command's first requests, and lso imports them with its library while its ListOffsets are in flight.
        from kafkatxn.verdicts import coordinator_partition

        leaders = {p.partition: p.leader for p in self.metadata().transaction_log}
        probe = f"{PROBE_ID_PREFIX}{uuid.uuid4().hex}"
        for _ in range(PROBE_ID_TRIES):
            leader = leaders.get(coordinator_partition(probe, len(leaders))) if leaders else None
            if leader is None or (leader >= 0 and leader not in self.silent):
                break
            probe = f"{PROBE_ID_PREFIX}{uuid.uuid4().hex}"
        return probe
