"""A round's requests sent in a sliding window per connection, on the IO thread (``client.Wire._round``).

kafka-python's connection fails a send beyond ``max_in_flight_requests_per_connection`` in flight
(it pauses the connection). Each connection keeps up to that many in flight here, and its next request
goes out as soon as one of its own answers lands: a broker with more requests than that waits on its
own answers, not on the slowest of every broker's (as it did when a round went out in waves).
"""

from __future__ import annotations

import functools
import time
from collections import deque
from typing import Any, Callable, Mapping, Sequence


async def send_in_windows(
    manager: Any,
    lanes: Mapping[Any, Sequence[int]],
    window: int,
    deadline: float,
    send: Callable[[Any, int], Any],
    land: Callable[[int, Any, BaseException | None], None],
    first_sent: Callable[[], None],
    new_future: Callable[[], Any],
) -> None:
    """Every request of ``lanes`` (node -> its request indexes, in the order the nodes go first) sent,
    each connection with up to ``window`` in flight, and each outcome handed to ``land(i, value, error)``
    as it lands, until ``deadline`` (monotonic): what is still out then lands with the wait's timeout.

    ``send(node, i)`` sends one (its count, its kafka-python request) and returns its future, or None
    when the send failed at once (the caller took that as its answer). ``first_sent()`` runs once the
    first window of every node is out. ``new_future()`` is a kafka-python future: what the round
    sleeps on while nothing has landed (set by the answers' callbacks, which run on this thread in the
    middle of a connection's read: the round sends again only once resumed, the connection unpaused)."""
    waiting = {node: deque(indexes) for node, indexes in lanes.items()}  # not sent yet, per node
    in_flight = dict.fromkeys(lanes, 0)
    node_of: dict[int, Any] = {}
    outstanding: dict[int, Any] = {}  # sent, not landed: request index -> its future
    landed: deque[int] = deque()  # indexes whose futures are done, in the order they were done
    wake: list[Any] = [None]

    def done(i: int, _outcome: Any) -> None:
        if i in outstanding:
            landed.append(i)
            if wake[0] is not None and not wake[0].is_done:
                wake[0].success(None)

    def fill(node: Any) -> None:
        queue = waiting[node]
        while queue and in_flight[node] < window:
            i = queue.popleft()
            fut = send(node, i)
            if fut is None:
                continue
            in_flight[node] += 1
            node_of[i] = node
            outstanding[i] = fut
            fut.add_both(functools.partial(done, i))  # at once when it is done already (a failed send)

    for node in lanes:
        fill(node)
    first_sent()
    while outstanding:
        if not landed:
            wake[0] = new_future()
            try:  # each wait ends at the deadline
                await manager.wait_for(wake[0], max(int((deadline - time.monotonic()) * 1000), 1))
            except Exception as exc:  # noqa: BLE001 - the deadline: what is still out lands with its timeout
                late = list(outstanding)
                outstanding.clear()
                landed.clear()
                for i in late:
                    in_flight[node_of[i]] -= 1
                    land(i, None, type(exc)(*exc.args))
                for node in dict.fromkeys(node_of[i] for i in late):
                    fill(node)  # sent as a wave sent late was: each then waits its millisecond
                continue
        answers = []
        while landed:  # first each freed slot's next request sent, then the answers read
            i = landed.popleft()
            fut = outstanding.pop(i)
            in_flight[node_of[i]] -= 1
            fill(node_of[i])
            answers.append((i, fut))
        for i, fut in answers:
            land(i, fut.value, fut.exception)
