"""harness.hanging_maker's wait for a commit's markers, over a stub coordinator (no broker)."""

from __future__ import annotations

import pytest

from harness import hanging_maker as hm
from kafkatxn.model import DescribedTransactions, Missing, Partial, TransactionDescription


class Coordinator:
    """Answers DescribeTransactions for one id with the next of ``states`` (the last one repeated)."""

    def __init__(self, states: list[str | None]):
        self.states = states
        self.asked = 0

    def describe_transactions(self, transactional_ids):
        (tid,) = transactional_ids
        state = self.states[min(self.asked, len(self.states) - 1)]
        self.asked += 1
        if state is None:
            return Partial(DescribedTransactions(), [Missing(tid, "coordinator did not answer")])
        return Partial(DescribedTransactions(found={tid: TransactionDescription(tid, 1, state, 7, 0, 10_000, -1, frozenset())}))


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_returns_once_the_coordinator_completed_the_commit():
    coordinator, clock = Coordinator(["PrepareCommit", None, "PrepareCommit", "CompleteCommit"]), Clock()
    hm.wait_until_committed(coordinator, "t", timeout_s=5, sleep=clock.sleep, clock=clock)
    assert coordinator.asked == 4


def test_a_commit_stuck_in_prepare_commit_is_a_clear_error_at_the_timeout():
    coordinator, clock = Coordinator(["PrepareCommit"]), Clock()
    with pytest.raises(hm.HangingMakerError, match=r"commit of 't' was not complete within 2 s: PrepareCommit"):
        hm.wait_until_committed(coordinator, "t", timeout_s=2, sleep=clock.sleep, clock=clock)
    assert 2 <= clock.now <= 2.1
