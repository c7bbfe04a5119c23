"""retry.Backoff: the one policy for asking a coordinator again while it says "not yet"."""

from __future__ import annotations

import time

import pytest

from kafkatxn.kafka import retry


@pytest.fixture
def clock(monkeypatch):
    """time.monotonic and time.sleep of the retry module on a clock that moves only when slept."""
    now = [1000.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(round(seconds, 3))
        now[0] += seconds

    monkeypatch.setattr(retry.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(retry.time, "sleep", sleep)
    return now, slept


def test_pauses_grow_to_a_second_and_stop_at_half_the_time_left(clock):
    now, slept = clock
    backoff = retry.Backoff(deadline=now[0] + 20)
    while backoff.pause():
        pass
    assert slept == [0.2, 0.4, 0.6, 0.8, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]  # 9 s of the 10 s allowed
    assert now[0] - 1000 <= 10
    assert backoff.tries == len(slept) + 1


def test_no_pause_when_the_deadline_has_passed(clock):
    now, slept = clock
    backoff = retry.Backoff(deadline=now[0] - 1)
    assert backoff.pause() is False and slept == []


def test_a_short_deadline_allows_only_what_fits(clock):
    now, slept = clock
    backoff = retry.Backoff(deadline=now[0] + 1.2)  # half: 0.6 s
    assert backoff.pause() is True
    assert backoff.pause() is False  # 0.2 + 0.4 reaches the half
    assert slept == [0.2]


def test_the_real_clock_is_used_by_default():
    backoff = retry.Backoff(deadline=time.monotonic() + 0.3)
    started = time.monotonic()
    assert backoff.pause() is False  # 0.2 s passes half of 0.3 s
    assert time.monotonic() - started < 0.05
    backoff = retry.Backoff(deadline=time.monotonic() + 1)
    assert backoff.pause() is True
    assert 0.2 <= time.monotonic() - started < 0.4
