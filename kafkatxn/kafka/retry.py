"""How long an answer that says "not yet" is asked again: one policy for every coordinator loop.

A coordinator answers NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE or COORDINATOR_LOAD_IN_PROGRESS
while its log partition is being created (the first FindCoordinator on a cluster creates
``__transaction_state``, 50 partitions by default), elected or loaded. Each of those ends by
itself, in well under a second on an idle cluster and in seconds on a busy one, so one retry is
not enough and asking until the deadline would leave no time for the rest of the command.
"""

from __future__ import annotations

import time

FIRST_PAUSE_S = 0.2
MAX_PAUSE_S = 1.0
# The share of the time left at the first try that the retries may take; the command's other
# work and its answer keep the rest of the deadline.
RETRY_SHARE = 0.5


class Backoff:
    """Pauses between tries: 0.2 s, 0.4 s, … then 1 s each, until ``RETRY_SHARE`` of the time that
    was left when it was made has passed (or a pause would leave less than itself before the
    deadline). Make one per question, just before its first try."""

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
