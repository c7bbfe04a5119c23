"""Requests sent before the call that makes them (:class:`RoundsAhead`, mixed into
:class:`kafkatxn.kafka.session.Session`): a request that rides with the next round
(:meth:`~RoundsAhead.send_ahead`), or a round begun now on the IO thread while the command goes on
(:meth:`~RoundsAhead.send_now`); either way the call that makes the same request to the same node
takes its answer instead of a round trip of its own. The same requests to the same brokers, fewer
round trips or less waiting (``tests/unit/test_rounds_ahead.py``).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from kafkatxn.kafka import protocol as proto

log = logging.getLogger("kafkatxn.cluster")

class HashedOnce(tuple):
    """A request's partitions (up to 10,000: a leader's ListOffsets, DescribeProducers), hashed once. A
    request sent ahead is a key of the run's rounds, looked up as it rides, lands and is taken (five to
    eight times), and a tuple's hash walks every partition each time: ~90 M instructions of ``check``'s
    first round at 30,000 partitions. Equal to, and hashed as, the tuple of the same partitions."""

    def __hash__(self) -> int:
        kept = self.__dict__
        found = kept.get("hash")
        if found is None:
            found = kept["hash"] = tuple.__hash__(self)
        return found


# What ``ProducerStateApi.offsets_and_producers_ahead`` sent its round for, before any TopicPartition was
# made: every partition of the metadata (its ``tps``), grouped when the call asks (``OffsetsApi._grouped_ahead``).
EVERY_PARTITION: Any = object()

_NOT_ANSWERED = object()
_IN_FLIGHT = object()  # an answer of a round begun by Session.send_now, not landed yet


def request_label(request: Any) -> str:
    """A request as ``--debug`` names it: its API, and the isolation level where the API has one
    (a ListOffsets by timestamp, where the level changes nothing, says so instead)."""
    name = proto.REQUEST_NAMES.get(type(request), type(request).__name__)
    if isinstance(request, proto.ListOffsetsAt):
        return f"{name} (by time)"
    level = getattr(request, "read_committed", None)
    if level is None:
        purpose = getattr(request, "purpose", "")
        return f"{name} ({purpose})" if purpose else name
    return f"{name} ({'read_committed' if level else 'read_uncommitted'})"


class RoundsAhead:
    """The requests of a run sent before their calls; the session's attributes they use are its own
    (``_answers``, ``_riding``, ``_ahead``, ``_in_flight``, ``silent``)."""

    def send_ahead(self, requests: Sequence[tuple[int | None, Any]]) -> None:
        """Requests this run is about to make that need nothing of the round in flight next: they go
        down with that round (after its own requests on each connection), and their answers wait
        for the call that makes the same request to the same node (as given: None is any broker),
        which then takes them instead of a round trip of its own. Overlapping rounds this way cuts
        the command's wall time, not what it asks: a request belongs here only when the call that
        makes it will come (one never asked for was sent for nothing), and only when nothing it must
        be read after is still to come (its answer is of the moment it rides, not of the call's).
        Outside a run nothing is sent ahead; a run's end drops what was not taken. A request riding
        already, or gone down and not taken yet, is not added again."""
        if self._answers is not None:
            for given, request in requests:
                if (given, type(request), request) not in self._ahead and (given, request) not in self._riding:
                    self._riding.append((given, request))

    def send_now(self, requests: Sequence[tuple[int, Any]]) -> None:
        """Requests this run makes next, sent now, their round trip on the IO thread while the command
        goes on (imports what reads their answers): the call that makes the same request to the same
        node takes its answer, waiting for it if it is still on its way. The same requests, sent
        earlier: only the ones the call will make belong here (the call's own requests, built the
        same way). The requests sent ahead (:meth:`send_ahead`) go with this round. Outside a run, or
        where the round cannot begin, nothing is sent: the call sends its requests itself. A run's
        end drops what was not taken; a request gone down already and not taken yet is not sent again."""
        if self._answers is not None and self._ahead:
            requests = [(node, request) for node, request in requests if (node, type(request), request) not in self._ahead]
        if self._answers is None or not requests:
            return
        try:
            wire = self.wire
            budget = self.broker_budget_s()
        except Exception:  # noqa: BLE001 - raised again where the call itself sends
            return
        own = [(node, node, request) for node, request in requests if node not in self.silent]  # (given, node, request)
        riding = list(self._riding)
        riders, given = self._riders([(node, request) for node, _, request in own])
        to_send = own + [(given[-1 - i], node, request) for i, node, request in riders]
        if log.isEnabledFor(logging.DEBUG):
            for _, node, request in to_send:
                log.debug("request %s to broker %s (sent ahead of its call)", request_label(request), node)
        try:
            begun = wire.begin_send_all([(node, request) for _, node, request in to_send], time.monotonic() + budget, self._count)
        except Exception:  # noqa: BLE001 - the call sends them itself, and meets what this met
            self._riding = riding  # to go with the call's round, as without this one
            return
        self._ahead.update(((given, type(request), request), _IN_FLIGHT) for given, _, request in to_send)
        self._in_flight.append((to_send, begun, budget))

    def answers_pending(self) -> bool:
        """Whether a round begun by :meth:`send_now` is still waiting for answers: what the command
        does meanwhile is free while it is, and delays the round's reading once it is not."""
        return any(not begun.done() for _, begun, _ in self._in_flight)

    def _land(self) -> None:
        """The answers of the rounds begun by :meth:`send_now`, waited for and kept for their calls
        (a broker that did not answer in time silent, as :meth:`_send_all` takes it)."""
        while self._in_flight:
            to_send, begun, budget = self._in_flight.pop(0)
            try:
                answers = begun.end()
            except Exception as exc:
                for given, _, request in to_send:
                    self._ahead.pop((given, type(request), request), None)
                raise self.errors.translate(exc, "sending requests") from exc
            for (given, node, request), answer in zip(to_send, answers):
                self._ahead[(given, type(request), request)] = self._answered(node, answer, budget)

    def _drop_ahead(self) -> None:
        self._riding.clear()
        self._ahead.clear()
        self._in_flight.clear()  # their answers, when they come, are no one's

    def _taken_ahead(self, node: int | None, request: Any) -> Any:
        """The answer of ``request`` to ``node`` sent ahead (:meth:`send_ahead`, :meth:`send_now`), taken
        once (waited for when still on its way); else _NOT_ANSWERED."""
        if not self._ahead:
            return _NOT_ANSWERED
        key = (node, type(request), request)
        kept = self._ahead.get(key, _NOT_ANSWERED)
        if kept is _IN_FLIGHT:
            self._land()
        return self._ahead.pop(key, _NOT_ANSWERED)

    def _riders(self, requests: Sequence[tuple[int | None, Any]]) -> tuple[list[tuple[int, int | None, Any]], list[int | None]]:
        """The requests sent ahead (:meth:`send_ahead`) that go with this round, as ``(-1 - n, node,
        request)``, and the node each was given: not one of the round's own (sent once, as the
        round's), nor to a silent broker (answered so at once). One for any broker goes to the broker
        this round gives fewest requests (the first of :meth:`brokers_to_ask` among equals): a connection
        keeps five in flight (``wire/windows.py``), and a sixth on the connection of a leader with two
        DescribeProducers waits for one of that leader's answers (in waves, it waited for the whole
        round's: ``check``, 13 ms at 30,000 partitions)."""
        if not self._riding:
            return [], []
        riding, self._riding = self._riding, []
        own = {(given, type(request), request) for given, request in requests}
        going: list[tuple[int | None, Any, tuple]] = []
        for given, request in riding:
            key = (given, type(request), request)
            if key in own or key in self._ahead:
                continue
            own.add(key)
            going.append((given, request, key))
        any_broker = self._any_broker()
        load = Counter(any_broker if given is None else given for given, _ in requests)
        load.update(given for given, _, _ in going if given is not None)
        out: list[tuple[int, int | None, Any]] = []
        given_nodes: list[int | None] = []
        for given, request, key in going:
            if given is None:
                node = self._least_loaded(load)
                load[node] += 1
            else:
                node = given
            if node is not None and node in self.silent:
                self._ahead[key] = self.silent[node]
                continue
            given_nodes.append(given)
            out.append((-len(given_nodes), node, request))
        return out, given_nodes

    def _least_loaded(self, load: Counter) -> int | None:
        """Of the brokers a request for any broker may go to, the one ``load`` counts fewest requests
        for (the first among equals); None: the client picks."""
        candidates = self.brokers_to_ask(self._metadata or self._last_metadata)
        return min(candidates, key=lambda b: load[b]) if candidates else None
