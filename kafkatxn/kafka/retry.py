"""Asking again: which answers are retried, how, and for how long — one policy for every API module.

:data:`RETRIES` says per Kafka API which error names are worth asking again and what comes first:
a pause (a coordinator loading its log partition, or busy), finding the coordinator again (it
moved), or fresh metadata (a partition's leader moved). The choices are those of Kafka's own admin
client (``CoordinatorStrategy``, ``DescribeTransactionsHandler``, ``ListTransactionsHandler``,
``FenceProducersHandler``, the consumer group handlers, ``DescribeProducersHandler``); an error not
in the table — an authorization failure above all — is never asked again (the caller names the part
missing, with the ACL it needs).

:func:`ask` is the one loop that asks again: rounds of a caller's request for the keys still
pending, the pauses between them from :class:`Backoff`.

A coordinator answers NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE or COORDINATOR_LOAD_IN_PROGRESS
while its log partition is being created (the first FindCoordinator on a cluster creates
``__transaction_state``, 50 partitions by default), elected or loaded. Each of those ends by
itself, in well under a second on an idle cluster and in seconds on a busy one, so one retry is
not enough and asking until the deadline would leave no time for the rest of the command.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Any, Callable, Generic, Hashable, Iterable, Mapping, TypeVar

from kafkatxn.kafka.session import LEADERSHIP_ERRORS
from kafkatxn.named_tuples import NamedTuple  # typing's, without compiling each class's __new__ (0.5 M instructions a class)

log = logging.getLogger("kafkatxn.cluster")

FIRST_PAUSE_S = 0.2
MAX_PAUSE_S = 1.0
# The share of the time left at the first try that the retries may take; the command's other
# work and its answer keep the rest of the deadline.
RETRY_SHARE = 0.5


class Backoff:
    """Pauses between tries: 0.2 s, 0.4 s, … then 1 s each, until ``share`` (``RETRY_SHARE``) of the
    time that was left when it was made has passed (or a pause would leave less than itself before
    the deadline). Make one per question, just before its first try."""

    def __init__(self, deadline: float, share: float = RETRY_SHARE):
        now = time.monotonic()
        self.deadline = deadline
        self.give_up = now + max(0.0, deadline - now) * share
        self.tries = 1

    def pause(self) -> bool:
        """Sleep before the next try and return True; False (at once) when it would not fit."""
        pause = min(FIRST_PAUSE_S * self.tries, MAX_PAUSE_S)
        now = time.monotonic()
        if now + pause >= self.give_up or self.deadline - now < 2 * pause:
            return False
        self.tries += 1
        time.sleep(pause)
        return True


# -- the table ----------------------------------------------------------------------------------

PAUSE = "ask again after a pause"
REFIND = "find the coordinator again, then ask again"
REFRESH = "fresh metadata, then ask the new leader"
# Not a Kafka error: the request got no answer (the broker failed, closed, froze, or left).
NO_ANSWER = "(no answer)"


class How(NamedTuple):
    """How an error is asked again: what comes first, and how many asks of one key the errors of
    this rule allow together (None: as long as the :class:`Backoff` allows)."""

    then: str
    asks: int | None = None


# A partition is asked at most this many times while its leader moves (the first ask, then with
# fresh metadata after pauses of 0.2, 0.4, 0.6 s): an election takes well under a second.
LEADER_ASKS = 4
# A coordinator that did not answer is asked once more, where FindCoordinator then says: a
# frozen one stays frozen (and is silent for the rest of the command), a moved one is named anew.
COORDINATOR_NO_ANSWER_ASKS = 2

_COORDINATOR = {
    "COORDINATOR_LOAD_IN_PROGRESS": How(PAUSE),
    "NOT_COORDINATOR": How(REFIND),
    "COORDINATOR_NOT_AVAILABLE": How(REFIND),
    NO_ANSWER: How(REFIND, COORDINATOR_NO_ANSWER_ASKS),
}
_LEADER = {**{error: How(REFRESH, LEADER_ASKS) for error in sorted(LEADERSHIP_ERRORS)}, NO_ANSWER: How(REFRESH, LEADER_ASKS)}

# Per API, the errors asked again and how; every other error is final.
RETRIES: Mapping[str, Mapping[str, How]] = {
    # While a coordinator's log partition is created or elected (CoordinatorStrategy retries both;
    # NOT_COORDINATOR is what a broker answers while __transaction_state is still being created).
    "FindCoordinator": {
        "COORDINATOR_LOAD_IN_PROGRESS": How(PAUSE), "COORDINATOR_NOT_AVAILABLE": How(PAUSE), "NOT_COORDINATOR": How(PAUSE),
        NO_ANSWER: How(PAUSE, COORDINATOR_NO_ANSWER_ASKS),  # any broker answers it: the next try goes to another
    },
    "DescribeTransactions": _COORDINATOR,
    "OffsetFetch": _COORDINATOR,
    "DescribeGroups": _COORDINATOR,
    # A fence waits for the abort it started (CONCURRENT_TRANSACTIONS, KAFKA-16570) and for a dead
    # coordinator's log partition to move to another broker (seconds): no answer is asked again too.
    "InitProducerId": {**_COORDINATOR, "CONCURRENT_TRANSACTIONS": How(PAUSE), NO_ANSWER: How(REFIND)},
    # Per broker: only loading is "not yet" (COORDINATOR_NOT_AVAILABLE there means shutting down).
    "ListTransactions": {"COORDINATOR_LOAD_IN_PROGRESS": How(PAUSE)},
    # Per broker, as the Java admin client's listConsumerGroups retries.
    "ListGroups": {"COORDINATOR_LOAD_IN_PROGRESS": How(PAUSE), "COORDINATOR_NOT_AVAILABLE": How(PAUSE)},
    "ListOffsets": _LEADER,
    "DescribeProducers": _LEADER,
    "Fetch": _LEADER,
}


def how(api: str, error: str | None, table: Mapping[str, Mapping[str, How]] = RETRIES) -> How | None:
    """How ``api``'s ``error`` is asked again; None: it is final."""
    return table[api].get(error) if error is not None else None


def retriable(api: str, error: str | None, asked: int, table: Mapping[str, Mapping[str, How]] = RETRIES) -> bool:
    """Whether a key that got ``error`` on its ``asked``-th ask is asked again."""
    rule = how(api, error, table)
    return rule is not None and (rule.asks is None or asked < rule.asks)


# -- the driver ---------------------------------------------------------------------------------

K = TypeVar("K", bound=Hashable)


class Failed(NamedTuple):
    """A key's failure in one round: Kafka's error name (or :data:`NO_ANSWER`, or None for one that
    nothing cures, such as a partition without a leader), what the caller reports if it stays the
    key's last answer (a ``Missing``, an exception), and the API that answered when not the round's
    own (FindCoordinator inside a coordinator API's round)."""

    error: str | None
    last: Any
    api: str | None = None


class Asked(Generic[K]):
    """Per key an answer, or the last failure's ``last``; ``retried`` the failures asked again, in order.
    (A plain class: a ``@dataclass`` compiles its methods as the module is imported, ~3 M instructions
    before every command's first request.)"""

    __slots__ = ("answers", "failed", "retried")

    def __init__(self) -> None:
        self.answers: dict[K, Any] = {}
        self.failed: dict[K, Any] = {}
        self.retried: list[Failed] = []

    def failed_in(self, keys: Iterable[K]) -> list[Any]:
        """The failures in the order of ``keys``."""
        failed = self.failed
        return [failed[k] for k in keys if k in failed] if failed else []


Round = Callable[[list[K]], "tuple[Mapping[K, Any], Mapping[K, Failed]]"]


def ask(
    keys: Iterable[K],
    send: Round,
    api: str,
    deadline: float,
    *,
    refind: Callable[[list[K]], None] | None = None,
    refresh: Callable[[], None] | None = None,
    share: float = RETRY_SHARE,
    table: Mapping[str, Mapping[str, How]] = RETRIES,
    distinct: bool = False,
) -> Asked[K]:
    """Rounds of ``send`` for the keys still pending, until each has an answer or a final failure.

    ``send(keys)`` asks once for ``keys`` and returns the answers and the failures by key (a key in
    neither counts as answered with nothing: it is not asked again). Between rounds: a pause from one
    :class:`Backoff` (``share`` of the time left now), then ``refind(keys)`` once for the keys whose
    coordinator is to be found again (forget it: the next round's FindCoordinator places them) and
    ``refresh()`` once when a leader moved. When the pauses run out, each key still failing keeps
    its last failure. ``distinct``: ``keys`` hold each key once already (30,000 partitions are not
    put through a dict again)."""
    pending = list(keys) if distinct else list(dict.fromkeys(keys))
    out: Asked[K] = Asked()
    answers, failed = out.answers, out.failed
    asked: Counter[tuple[K, How]] = Counter()
    backoff: Backoff | None = None
    while pending:
        if backoff is None:
            backoff = Backoff(deadline, share)
        got, failures = send(pending)
        answers.update(got)
        if failed:
            for k in got:
                failed.pop(k, None)
        again: list[K] = []
        refound: list[K] = []
        fresh_metadata = False
        retried: list[Failed] = []
        for k, failure in failures.items():
            failed[k] = failure.last
            rule = how(failure.api or api, failure.error, table)
            if rule is None:
                continue
            if rule.asks is not None:  # counted per rule: a key loading twice may still be asked again once unanswered
                asked[k, rule] += 1
                if asked[k, rule] >= rule.asks:
                    continue
            again.append(k)
            retried.append(failure)
            if rule.then == REFIND:
                refound.append(k)
            elif rule.then == REFRESH:
                fresh_metadata = True
        if not again or not backoff.pause():
            break
        out.retried.extend(retried)
        log.debug("%s: asking again for %d of %d keys", api, len(again), len(pending))
        if refound and refind is not None:
            refind(refound)
        if fresh_metadata and refresh is not None:
            refresh()
        pending = again
    return out
