"""retry: the one table of what is asked again per API, the one driver that asks, and Backoff, its pauses."""

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


# -- the table -----------------------------------------------------------------------------------


def test_a_loading_coordinator_is_asked_again_after_a_pause_on_every_coordinator_api():
    for api in ("FindCoordinator", "DescribeTransactions", "OffsetFetch", "DescribeGroups", "InitProducerId", "ListTransactions", "ListGroups"):
        assert retry.how(api, "COORDINATOR_LOAD_IN_PROGRESS") == retry.How(retry.PAUSE), api


def test_a_coordinator_that_moved_is_found_again_where_a_coordinator_is_asked_by_key():
    for api in ("DescribeTransactions", "OffsetFetch", "DescribeGroups", "InitProducerId"):
        for error in ("NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE"):
            assert retry.how(api, error).then == retry.REFIND, (api, error)
    assert retry.how("InitProducerId", "CONCURRENT_TRANSACTIONS").then == retry.PAUSE  # the abort it started completes


def test_listtransactions_retries_only_loading_as_kafkas_handler_does():
    assert set(retry.RETRIES["ListTransactions"]) == {"COORDINATOR_LOAD_IN_PROGRESS"}


def test_a_leadership_error_gets_fresh_metadata_on_every_leader_api():
    for api in ("ListOffsets", "DescribeProducers", "Fetch"):
        for error in ("NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE", "UNKNOWN_TOPIC_OR_PARTITION", retry.NO_ANSWER):
            assert retry.how(api, error) == retry.How(retry.REFRESH, retry.LEADER_ASKS), (api, error)


def test_authorization_and_other_errors_are_never_retried():
    for api, rules in retry.RETRIES.items():
        for error in ("TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED", "TOPIC_AUTHORIZATION_FAILED",
                      "CLUSTER_AUTHORIZATION_FAILED", "TRANSACTIONAL_ID_NOT_FOUND", "INVALID_TRANSACTION_TIMEOUT", None):
            assert retry.how(api, error) is None, (api, error)
            assert not retry.retriable(api, error, 1)


def test_every_error_the_table_names_is_one_kafka_has():
    from kafkatxn.kafka import wire

    given = {wire.error_name(code) for code in range(1, 200)}
    named = {error for rules in retry.RETRIES.values() for error in rules} - {retry.NO_ANSWER}
    assert named - given == set()


def test_retriable_counts_the_asks_a_rule_allows():
    assert retry.retriable("ListOffsets", "NOT_LEADER_OR_FOLLOWER", retry.LEADER_ASKS - 1)
    assert not retry.retriable("ListOffsets", "NOT_LEADER_OR_FOLLOWER", retry.LEADER_ASKS)
    assert retry.retriable("DescribeTransactions", "COORDINATOR_LOAD_IN_PROGRESS", 1000)  # as long as Backoff allows


# -- the driver ----------------------------------------------------------------------------------


class Rounds:
    """A fake request: per key, the failures it answers in turn before its answer (or forever)."""

    def __init__(self, script: dict, forever: dict | None = None, api: str | None = None):
        self.script = {k: list(v) for k, v in script.items()}
        self.forever = forever or {}
        self.api = api
        self.sent: list[list] = []

    def __call__(self, pending):
        self.sent.append(list(pending))
        answers, failed = {}, {}
        for k in pending:
            if k in self.forever:
                failed[k] = retry.Failed(self.forever[k], f"{k}: {self.forever[k]}", self.api)
            elif self.script.get(k):
                error = self.script[k].pop(0)
                failed[k] = retry.Failed(error, f"{k}: {error}", self.api)
            else:
                answers[k] = f"answer {k}"
        return answers, failed


def test_a_key_answered_on_the_third_round(clock):
    now, slept = clock
    send = Rounds({"a": ["COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_LOAD_IN_PROGRESS"]})
    asked = retry.ask(["a", "b"], send, "DescribeTransactions", now[0] + 30)
    assert asked.answers == {"a": "answer a", "b": "answer b"} and asked.failed == {}
    assert send.sent == [["a", "b"], ["a"], ["a"]]  # an answered key is not asked again
    assert slept == [0.2, 0.4]
    assert [f.error for f in asked.retried] == ["COORDINATOR_LOAD_IN_PROGRESS"] * 2


def test_a_key_that_keeps_failing_ends_within_the_deadline_with_its_last_error(clock):
    now, slept = clock
    send = Rounds({}, forever={"a": "COORDINATOR_LOAD_IN_PROGRESS"})
    deadline = now[0] + 10
    asked = retry.ask(["a", "b"], send, "OffsetFetch", deadline)
    assert asked.answers == {"b": "answer b"}
    assert asked.failed == {"a": "a: COORDINATOR_LOAD_IN_PROGRESS"}
    assert now[0] - 1000 <= 5  # half the time left: the rest of the command keeps the other half
    assert len(send.sent) == len(slept) + 1


def test_the_last_failure_is_the_one_kept(clock):
    now, _slept = clock
    send = Rounds({"a": ["COORDINATOR_LOAD_IN_PROGRESS", "GROUP_AUTHORIZATION_FAILED"]})
    asked = retry.ask(["a"], send, "OffsetFetch", now[0] + 30)
    assert asked.failed == {"a": "a: GROUP_AUTHORIZATION_FAILED"} and len(send.sent) == 2


def test_not_coordinator_finds_the_coordinators_again_once_per_round(clock):
    now, _slept = clock
    send = Rounds({"a": ["NOT_COORDINATOR", "NOT_COORDINATOR"], "b": ["COORDINATOR_NOT_AVAILABLE"],
                   "c": ["COORDINATOR_LOAD_IN_PROGRESS"]})
    refound: list[list[str]] = []
    asked = retry.ask(["a", "b", "c"], send, "DescribeTransactions", now[0] + 30, refind=refound.append)
    assert set(asked.answers) == {"a", "b", "c"}
    assert refound == [["a", "b"], ["a"]]  # one re-find a round, of the keys that moved; a loading one keeps its coordinator


def test_authorization_is_never_retried(clock):
    now, slept = clock
    send = Rounds({}, forever={"a": "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"})
    refound: list = []
    asked = retry.ask(["a"], send, "DescribeTransactions", now[0] + 30, refind=refound.append)
    assert asked.failed == {"a": "a: TRANSACTIONAL_ID_AUTHORIZATION_FAILED"}
    assert send.sent == [["a"]] and slept == [] and refound == [] and asked.retried == []


def test_a_leadership_error_refreshes_the_metadata_once_a_round_and_stops_at_the_rules_asks(clock):
    now, _slept = clock
    send = Rounds({}, forever={"p0": "NOT_LEADER_OR_FOLLOWER", "p1": retry.NO_ANSWER})
    refreshed: list[int] = []
    asked = retry.ask(["p0", "p1"], send, "ListOffsets", now[0] + 30, refresh=lambda: refreshed.append(1))
    assert len(send.sent) == retry.LEADER_ASKS
    assert len(refreshed) == retry.LEADER_ASKS - 1
    assert asked.failed == {"p0": "p0: NOT_LEADER_OR_FOLLOWER", "p1": "p1: (no answer)"}


def test_a_coordinator_without_an_answer_is_asked_once_more_but_a_loading_one_as_the_pauses_allow(clock):
    now, _slept = clock
    send = Rounds({}, forever={"a": retry.NO_ANSWER})
    asked = retry.ask(["a"], send, "DescribeTransactions", now[0] + 30, refind=lambda keys: None)
    assert len(send.sent) == retry.COORDINATOR_NO_ANSWER_ASKS and "a" in asked.failed
    # counted per rule: a key that was loading is still asked again once after no answer
    send = Rounds({"a": ["COORDINATOR_LOAD_IN_PROGRESS"] * 3 + [retry.NO_ANSWER]})
    asked = retry.ask(["a"], send, "DescribeTransactions", now[0] + 30, refind=lambda keys: None)
    assert asked.answers == {"a": "answer a"} and len(send.sent) == 5


def test_an_error_of_another_api_in_the_round_follows_that_apis_rule(clock):
    now, _slept = clock
    # FindCoordinator's COORDINATOR_NOT_AVAILABLE (its log partition has no leader yet) is a pause,
    # not a re-find: there is no coordinator to forget.
    send = Rounds({"a": ["COORDINATOR_NOT_AVAILABLE"]}, api="FindCoordinator")
    refound: list = []
    asked = retry.ask(["a"], send, "DescribeTransactions", now[0] + 30, refind=refound.append)
    assert asked.answers == {"a": "answer a"} and refound == []


def test_no_keys_send_nothing(clock):
    now, _slept = clock
    send = Rounds({})
    assert retry.ask([], send, "ListOffsets", now[0] + 30).answers == {} and send.sent == []


def test_a_deadline_already_passed_asks_once_and_keeps_the_failure(clock):
    now, slept = clock
    send = Rounds({}, forever={"a": "COORDINATOR_LOAD_IN_PROGRESS"})
    asked = retry.ask(["a"], send, "ListGroups", now[0] - 1)
    assert send.sent == [["a"]] and slept == [] and "a" in asked.failed


def test_a_fence_may_use_all_but_the_last_pauses_of_the_deadline(clock):
    now, _slept = clock
    send = Rounds({}, forever={"app-1": "CONCURRENT_TRANSACTIONS"})
    retry.ask(["app-1"], send, "InitProducerId", now[0] + 10, share=1.0)
    assert 8 <= now[0] - 1000 < 10
