"""The session every Kafka request of one command goes through: the deadline, kafka-python's wire
(every request of a command; confluent-kafka's admin client is built only to check the settings as
librdkafka would, :func:`kafkatxn.kafka.facade.check_client_settings`), sending everything in flight
at once, and turning what failed into typed ``Missing`` parts or one translated error.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import Counter, deque
from collections.abc import Mapping
from itertools import groupby, repeat
from operator import call, itemgetter
from typing import Any, Sequence

from kafkatxn import collection
from kafkatxn.config import ConnectionConfig
from kafkatxn.errors import DeadlineExceeded, KafkatxnError, UsageError
from kafkatxn.kafka import bootstrap_ahead, protocol as proto
from kafkatxn.kafka.bootstrap_ahead import BootstrapAhead
from kafkatxn.kafka.client_errors import ErrorTranslator, clean, is_timeout, kafka_error_code
from kafkatxn.leader_map import LeaderMap, whole_leaders
from kafkatxn.metadata_columns import ColumnMetadata, MetadataColumns
from kafkatxn.model import BrokerApis, ClusterMetadata, InTopicOrder, Missing, Subject
from kafkatxn.kafka.rounds_ahead import _NOT_ANSWERED, RoundsAhead, request_label
from kafkatxn.kafka.wire import Wire

log = logging.getLogger("kafkatxn.cluster")

# The one list of errors that fresh metadata can cure (a leader moved or is being elected): every
# API module that retries a partition at its new leader uses this one.
LEADERSHIP_ERRORS = frozenset({
    "UNKNOWN_TOPIC_OR_PARTITION", "LEADER_NOT_AVAILABLE", "NOT_LEADER_OR_FOLLOWER", "REPLICA_NOT_AVAILABLE",
    "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH", "OFFSET_NOT_AVAILABLE",
})

# A round trip gives each broker this share of the time left when it starts (at least
# MIN_BROKER_BUDGET_S, at most what is left). A broker that does not answer within it is silent for
# the rest of the command: one frozen broker costs one share, not the deadline, and the round trips
# after it still have time for the brokers that answer.
BROKER_SHARE = 0.5
MIN_BROKER_BUDGET_S = 1.0
_TABLE = "table"  # in a run's answers, (API, _TABLE, table): a table of that API's answers (Session.remember_table)

# A confirmation that took this long was read by a person (see Session.exclude_from_deadline).
PERSON_PAUSE_S = 1.0
class BrokerSilent(DeadlineExceeded):
    """A broker that did not answer within its share of the deadline; later requests to it in the
    same command fail at once with this, instead of waiting again."""

    def __init__(self, broker_id: int, budget_s: float):
        self.broker_id = broker_id
        self.plain_reason = "timed out"  # the part's reason: its subject names the broker
        super().__init__(f"broker {broker_id} {self.plain_reason}")


_TOPIC, _INDEX = itemgetter(0), itemgetter(1)  # of a PartitionInfo, taken in C


def group_by_leader(partitions: Sequence[Any], leaders: Mapping[Any, int], silent: Mapping[int, Any]) -> dict[int, list[Any]] | None:
    """``partitions`` by their leader in ``leaders``, in the order given (the leaders in the order
    they first lead one), made in C: one pass of dict look-ups and list appends, no Python step per
    partition (30,000 and more a command). None when a partition has no leader to ask (unknown,
    none, or ``silent``): the caller's own loop names those. Every partition of a metadata read as columns
    (``leader_map.LeaderMap``): grouped from its columns, each leader's with its topics' runs."""
    if isinstance(leaders, LeaderMap) and partitions == leaders.metadata.tps:  # the same TopicPartitions: by identity, in C
        return leaders.metadata.all_by_leader(silent)
    if len(partitions) > 16:  # many looked up: in C, the dict of every partition made first if it is not
        leaders = whole_leaders(leaders)
    return group_by_leader_column(partitions, list(map(leaders.get, partitions)), silent)


def group_by_leader_column(partitions: Sequence[Any], leader_of: Sequence[int | None], silent: Mapping[int, Any]) -> dict[int, list[Any]] | None:
    """:func:`group_by_leader` of ``partitions`` whose leaders are the column ``leader_of`` (None: unknown)."""
    nodes = dict.fromkeys(leader_of)
    if None in nodes or any(node < 0 or node in silent for node in nodes):
        return None
    by_node: dict[int, list[Any]] = {node: [] for node in nodes}
    appends = {node: tps.append for node, tps in by_node.items()}
    deque(map(call, map(appends.__getitem__, leader_of), partitions), maxlen=0)
    return by_node


def cluster_metadata(md: proto.MetadataResponse, answered_by: int | None) -> ClusterMetadata:
    if type(md.partitions) is MetadataColumns:  # the wire's reading: its PartitionInfos made on first use
        return ColumnMetadata(md.cluster_id, md.controller_id, md.brokers, md.partitions, answered_by)
    return ClusterMetadata(md.cluster_id, md.controller_id, md.brokers, in_topic_order(md.partitions), answered_by)


def in_topic_order(partitions: Sequence[Any]) -> tuple[Any, ...]:
    """``partitions`` (PartitionInfos) sorted by topic and partition number, as ``sorted`` with that
    key and as stable: an answer names a topic's partitions in a row, so its topics are sorted (a few
    hundred) and each topic's run by partition number, in C (a sort of 30,000 partitions by a key
    tuple made per partition: 6-12 ms of every command's metadata, against half that). What the wire
    read in that order already (:class:`InTopicOrder`, a topic at a time) is as it is."""
    if type(partitions) is InTopicOrder:
        return partitions
    runs: dict[str, list[Any]] = {}
    for name, run in groupby(partitions, _TOPIC):
        known = runs.get(name)
        if known is None:
            runs[name] = list(run)
        else:
            known.extend(run)
    out: list[Any] = []
    for name in sorted(runs):
        run = runs[name]
        run.sort(key=_INDEX)  # stable, as the sort of the whole was; a run in order already: one pass
        out += run
    return tuple(out)


class Session(RoundsAhead):
    """The deadline, the clients and the sending of one command run (or one exporter scrape)."""

    def __init__(self, config: ConnectionConfig, wire: Wire | None = None, ahead: BootstrapAhead | None = None):
        """``ahead``: the bootstrap the command began before it imported the facade (its deadline is the run's)."""
        self.config = config
        self.deadline = ahead.deadline if ahead is not None else time.monotonic() + config.timeout_s
        self._admin = None
        self._wire = wire
        # A bootstrap begun ahead (connect_ahead): the wire, and its end (which raises what it met).
        self._bootstrapping: tuple[Wire | None, Any] | None = (ahead.wire, ahead.end) if ahead is not None else None
        self._metadata: ClusterMetadata | None = None
        self._last_metadata: ClusterMetadata | None = None  # kept across restart_deadline: who to ask first
        self._api_versions: dict[int, BrokerApis] = {}
        self.errors = ErrorTranslator(config, poll=self._poll)
        self.requests: Counter[str] = Counter()
        self.silent: dict[int, BrokerSilent] = {}  # brokers that used up their share; see BROKER_SHARE
        self.failed: set[int] = set()  # brokers a request failed at (refused, closed): asked last for "any broker"
        # (when, answer) of the last topic-visibility probe: kept across scrapes (MetadataApi.topic_list_filtered)
        self._topics_filtered_cache: tuple[float, bool] | None = None
        self._visibility_probe_ahead: str | None = None  # the probe's name, when sent ahead (MetadataApi.topic_list_filtered_ahead)
        # What this run was answered, by (API, key): see one_run. None outside a run.
        self._answers: dict[tuple, Any] | None = None
        self._answered_apis: set[str] = set()  # the APIs _answers holds any answer of
        # Requests of this run sent ahead (see send_ahead): to go with the next round, and the answers
        # of those gone, by (node as given, type, request), until the call that makes them takes them.
        self._riding: list[tuple[int | None, Any]] = []
        self._ahead: dict[tuple[int | None, type, Any], Any] = {}
        # The partitions OffsetsApi.stable_and_high_offsets_ahead sent ListOffsets for, as (those, the metadata
        # whose leaders grouped them, that grouping): the call that sends the same takes the grouping. Or
        # (offsets.EVERY_PARTITION, the metadata, None): every partition, grouped when the call asks.
        self._offsets_grouped_ahead: tuple[Any, ClusterMetadata, dict[int, list] | None] | None = None
        # Rounds begun by send_now and not landed: (their requests, their end, the brokers' budget).
        self._in_flight: list[tuple[list[tuple[int, int | None, Any]], Any, float]] = []

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._bootstrapping is not None:  # begun ahead, never used
            pending, self._bootstrapping = self._bootstrapping[0], None
            if pending is not None:
                pending.close()
        if self._wire is not None:
            try:
                self._wire.close()
            except Exception:  # closing must never hide the real outcome
                log.debug("closing kafka-python client failed", exc_info=True)
            self._wire = None
        self._admin = None

    def restart_deadline(self, timeout_s: float | None = None) -> None:
        """Start a fresh deadline (the exporter does this once per scrape, ``lso --watch`` per sample, abort
        after a prompt): a pass over the cluster begins, for the wire's memos of answers too."""
        from kafkatxn.kafka.wire.answer_memo import begin_passes

        self.deadline = time.monotonic() + (timeout_s if timeout_s is not None else self.config.timeout_s)
        begin_passes()
        self._metadata = None
        self._drop_ahead()
        self._api_versions.clear()
        self.errors.client_errors.clear()
        self.silent.clear()
        self.failed.clear()

    def exclude_from_deadline(self, seconds: float) -> None:
        """Time spent outside the network (a person reading a prompt) is added back to the deadline.
        A pause a person could notice also forgets what this command learned of the cluster: it may
        have changed meanwhile (``--yes`` costs no time and keeps it)."""
        self.deadline += seconds
        if seconds >= PERSON_PAUSE_S:
            if self._answers is not None:
                self._answers = {}
                self._answered_apis.clear()
            self._drop_ahead()
            self._metadata = None
            self._api_versions.clear()
            self.silent.clear()
            self.failed.clear()

    @contextlib.contextmanager
    def one_run(self):
        """Within the block, a key (a partition, a transactional id, a broker) asked of an API again
        is answered from the first answer instead of the brokers: the paths of one command or one
        scrape share their facts, and agree. Only answers are kept (a part that did not answer is
        asked again); a run inside a run is the outer one. A question that must see the cluster as
        it is now (whether a transaction ended since, a recheck before acting) is asked
        :meth:`afresh`, and ``abort``, ``fence`` and ``restore-commit`` act outside any run.
        Cyclic garbage collection waits while the run is in flight (:mod:`kafkatxn.collection`)."""
        if self._answers is not None:
            yield
            return
        self._answers = {}
        collection.pause()
        try:
            yield
        finally:
            self._answers = None
            self._answered_apis.clear()
            self._drop_ahead()
            collection.resume()

    def will_ask(self, *apis: str) -> None:
        """The command will send these APIs (``ListOffsets``, ``Fetch``, ...): their kafka-python
        modules are imported now. Called after :meth:`connect_ahead`, while the bootstrap is in flight."""
        from kafkatxn.kafka.wire.client_package import import_protocol

        import_protocol(apis)

    def will_ask_while_waiting(self, *apis: str) -> None:
        """:meth:`will_ask`, one API at a time while a round begun by ``send_now`` is still waiting for
        answers (``answers_pending``); the rest import where they are first sent, as without it: a
        command that may not send them (lso with no partition lagging) pays nothing once its answers are in."""
        from kafkatxn.kafka.wire.client_package import import_protocol

        for api in apis:
            if not self.answers_pending():
                return
            import_protocol((api,))

    @contextlib.contextmanager
    def afresh(self):
        """Calls in the block ask the brokers, whatever this run was answered; their answers are
        then the run's."""
        kept, self._answers = self._answers, None
        try:
            yield
        finally:
            if kept is not None:
                self._answers = kept

    def remembered(self, api: str, keys: Sequence[Any]) -> tuple[dict[Any, Any], list[Any]]:
        """Of ``keys`` asked of ``api``, the answers this run has (by key), and the keys to ask."""
        if self._answers is None or api not in self._answered_apis:
            return {}, list(keys)
        known: dict[Any, Any] = {}
        ask: list[Any] = []
        for key in keys:
            answer = self._answers.get((api, key), _NOT_ANSWERED)
            if answer is _NOT_ANSWERED:
                ask.append(key)
            else:
                known[key] = answer
        return known, ask

    def remember(self, api: str, answers: dict[Any, Any]) -> None:
        """Keep ``answers`` (by key) of ``api`` for the rest of the run (nothing outside a run)."""
        if self._answers is not None:  # 30,000 partitions' producer states a pass: keyed in C, no Python step each
            self._answers.update(zip(zip(repeat(api), answers), answers.values()))
            self._answered_apis.add(api)

    def remember_table(self, api: str, table: Any, answers: Mapping[Any, Any]) -> None:
        """Keep ``answers`` (by key) of ``api`` asked as ``table`` says (ListOffsets: the isolation
        levels) for the rest of the run, as one table: 30,000 partitions' offsets kept by one dict
        update, not a key made and kept each (nothing outside a run); a read-only table that is not a
        dict (``offset_table.OffsetTable``, no one changes it) kept as it is."""
        if self._answers is None:
            return
        key = (api, _TABLE, table)
        kept = self._answers.get(key)
        if kept is None and not isinstance(answers, dict):  # read-only (an OffsetTable): kept as it is, not copied
            self._answers[key] = answers
        else:
            if kept is None:
                kept = self._answers[key] = {}
            elif not isinstance(kept, dict):  # more answers join a read-only table: a dict of both
                kept = self._answers[key] = dict(kept.items())
            kept.update(answers.items() if not isinstance(answers, dict) else answers)
        self._answered_apis.add(api)

    def remembered_in_table(self, api: str, table: Any, keys: Sequence[Any]) -> dict[Any, Any]:
        """Of ``keys`` asked of ``api`` as ``table`` says, the answers this run has (by key)."""
        found = self._answers.get((api, _TABLE, table)) if self._answers is not None and api in self._answered_apis else None
        return {key: found[key] for key in keys if key in found} if found else {}

    def to_ask_in_table(self, api: str, table: Any, keys: Sequence[Any]) -> tuple[dict[Any, Any], list[Any]]:
        """:meth:`remembered_in_table`, and the keys to ask (as :meth:`remembered` says them)."""
        known = self.remembered_in_table(api, table, keys)
        return known, ([key for key in keys if key not in known] if known else list(keys))

    def answered_any(self, api: str) -> bool:
        """Whether this run holds any answer of ``api``: when not, 30,000 keys need not be looked up."""
        return api in self._answered_apis

    def forget(self, api: str, keys: Sequence[Any]) -> None:
        """Drop what the run was answered for ``keys`` (a coordinator that moved since)."""
        if self._answers is not None:
            for key in keys:
                self._answers.pop((api, key), None)

    @contextlib.contextmanager
    def deadline_within(self, seconds: float):
        """Calls in the block end within ``seconds`` (DeadlineExceeded), the rest of the deadline
        being kept for what comes after them."""
        outer = self.deadline
        self.deadline = min(outer, time.monotonic() + seconds)
        try:
            yield
        finally:
            self.deadline = outer

    def remaining_s(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self.errors.deadline_exceeded()
        return left

    def _poll(self) -> None:
        if self._admin is not None:
            self._admin.poll(0)

    def build_admin(self):
        """confluent-kafka's admin client, built once (building it checks librdkafka's settings)."""
        if self._admin is None:
            from confluent_kafka import KafkaException
            from confluent_kafka.admin import AdminClient

            from kafkatxn.kafka.client_logs import routed

            try:
                self._admin = AdminClient(routed(self.config.librdkafka(error_cb=self.errors.on_client_error)))
            except KafkaException as exc:
                # librdkafka checks its settings when the client is built (e.g. PLAIN without a
                # username): what it refuses there is the user's to fix, before anything is sent.
                if kafka_error_code(exc) == "_INVALID_ARG":
                    raise UsageError(f"bad client settings: {clean(exc.args[0].str())}") from None
                raise self.errors.translate(exc, "creating the client") from exc
        return self._admin

    @property
    def wire(self) -> Wire:
        """The kafka-python side: bootstrapped on first use, within the deadline, with the metadata.

        One connection to a bootstrap server carries the login, the Metadata and then the requests
        to that broker; a refused login or TLS handshake ends the command at once. A command that
        needs only the wire (``lso``, ``hanging``, ``producers``, ``transactions``) never builds
        the confluent-kafka client, nor imports it.
        """
        if self._wire is None:
            if self._bootstrapping is None:
                self.connect_ahead()
            _, end = self._bootstrapping  # type: ignore[misc]
            self._bootstrapping = None
            try:
                wire, md, answered = end()
            except KafkatxnError:  # a usage error, the deadline: raised as it is
                raise
            except Exception as exc:  # noqa: BLE001 - translated into one line
                raise self.errors.translate(exc, "connecting") from exc
            self._wire = wire
            self.requests["Metadata"] += 1
            self._metadata = self._last_metadata = cluster_metadata(md, answered)
        return self._wire

    def connect_ahead(self, every_broker: bool = False) -> None:
        """Begin the bootstrap (:attr:`wire`) now, on the IO thread, and return: what the command
        does next that needs no answer (importing the modules that read its answers) takes the time
        the broker takes to connect and answer the metadata, instead of coming before it. Whatever
        beginning it raises is raised where the wire is first used, as it would have been.
        ``every_broker``: a command that will ask every broker has their connections begun as the
        metadata arrives, not as its first round is sent."""
        if self._wire is not None or self._bootstrapping is not None:
            return
        begun = bootstrap_ahead.begin(self.config, self.deadline, self.remaining_s, every_broker)
        self._bootstrapping = (begun.wire, begun.end)

    def broker_budget_s(self) -> float:
        """How long one broker may take to answer a round trip starting now (see BROKER_SHARE)."""
        left = self.remaining_s()
        return min(left, max(MIN_BROKER_BUDGET_S, left * BROKER_SHARE))

    def _any_broker(self) -> int | None:
        """Where a request for any broker goes: the one that answered the metadata, else another
        listed broker that has not gone silent (None: the client picks)."""
        md = self._metadata or self._last_metadata
        if md is None:
            return None
        return next(iter(self.brokers_to_ask(md)), None)

    def brokers_to_ask(self, md: ClusterMetadata | None) -> list[int]:
        """Brokers for a request any broker can answer, best first: the one that answered the
        metadata, then the others; those a request failed at last; silent ones not at all."""
        if md is None:
            return []
        known = list(dict.fromkeys(([md.answered_by] if md.answered_by is not None else []) + [b.id for b in md.brokers]))
        return sorted((b for b in known if b not in self.silent), key=lambda b: b in self.failed)

    def _send_all(self, requests: Sequence[tuple[int | None, Any]]) -> list[Any]:
        """Every request in flight at once; each typed response, or the exception it failed with.

        Each broker gets :meth:`broker_budget_s`; one that does not answer within it is noted in
        ``silent`` and every later request to it in this command fails at once with
        :class:`BrokerSilent` (the caller names its parts missing, or asks their new leader).
        """
        wire = self.wire
        budget = self.broker_budget_s()  # raises once the deadline has passed
        results: list[Any] = [None] * len(requests)
        to_send: list[tuple[int, int | None, Any]] = []
        for i, (given, request) in enumerate(requests):
            kept = self._taken_ahead(given, request)
            if kept is not _NOT_ANSWERED:  # went down with an earlier round
                results[i] = kept
                continue
            node = self._any_broker() if given is None else given
            if node is not None and node in self.silent:
                results[i] = self.silent[node]
            else:
                to_send.append((i, node, request))
        if not to_send:
            return results
        riders, riders_given = self._riders(requests)  # index -1 - n: the n-th request sent ahead with this round
        to_send += riders

        if log.isEnabledFor(logging.DEBUG):  # the requests a command sends, in order (--debug)
            for _, node, request in to_send:
                log.debug("request %s to broker %s", request_label(request), node)

        try:
            answers = wire.send_all([(node, request) for _, node, request in to_send], time.monotonic() + budget, self._count)
        except Exception as exc:  # noqa: BLE001
            raise self.errors.translate(exc, "sending requests") from exc
        for (i, node, request), answer in zip(to_send, answers):
            answer = self._answered(node, answer, budget)
            if i >= 0:
                results[i] = answer
            else:
                given = riders_given[-1 - i]
                self._ahead[(given, type(request), request)] = answer
        return results

    def _count(self, name: str) -> None:
        self.requests[name] += 1

    def _answered(self, node: int | None, answer: Any, budget: float) -> Any:
        """``answer`` of ``node`` as a round takes it: a timeout makes the broker silent for the rest of
        the command (the answer is then its :class:`BrokerSilent`); another failure marks it failed."""
        if node is not None and isinstance(answer, BaseException):
            if is_timeout(answer):
                answer = self.silent.setdefault(node, BrokerSilent(node, budget))
                log.debug("broker %s is silent for the rest of the command", node)
            else:
                self.failed.add(node)
        return answer

    def _arrived(self, result: Any, subject: Subject, missing: list[Missing]) -> bool:
        """True for a response; for an exception, note ``subject`` as missing (auth errors end the command)."""
        if isinstance(result, BaseException):
            missing.append(Missing(subject, self.errors.reason(result)))
            return False
        return True
