"""The harness's topic creation asks again what a broker refused for a while (a Kafka 2.8 controller's
UNKNOWN_SERVER_ERROR under CI's load) and stops at once on a refusal that will not pass. The
AdminClient here is a stand-in for the answers alone: what brokers answer is tested against them."""

from __future__ import annotations

from concurrent.futures import Future

import pytest
from confluent_kafka import KafkaError, KafkaException

from harness import scenarios


class _Admin:
    def __init__(self, answers):
        self.answers, self.asked = list(answers), 0

    def __call__(self, _config):
        return self

    def create_topics(self, new_topics, operation_timeout):
        self.asked += 1
        future: Future = Future()
        answer = self.answers.pop(0)
        if answer is None:
            future.set_result(None)
        else:
            future.set_exception(KafkaException(answer if isinstance(answer, KafkaError) else KafkaError(answer)))
        return {new_topics[0].topic: future}


def _created(monkeypatch, answers):
    admin = _Admin(answers)
    monkeypatch.setattr(scenarios, "AdminClient", admin)
    monkeypatch.setattr(scenarios.time, "sleep", lambda _s: None)
    scenarios.create_topic("127.0.0.1:9", "orders")
    return admin.asked


def test_a_topic_refused_for_a_while_is_asked_again_until_made(monkeypatch):
    assert _created(monkeypatch, [KafkaError.UNKNOWN, KafkaError(KafkaError.REQUEST_TIMED_OUT, retriable=True), None]) == 3


def test_a_topic_made_by_an_attempt_that_failed_is_there(monkeypatch):
    assert _created(monkeypatch, [KafkaError.UNKNOWN, KafkaError.TOPIC_ALREADY_EXISTS]) == 2


def test_a_refusal_that_will_not_pass_is_raised_at_once(monkeypatch):
    with pytest.raises(KafkaException):
        _created(monkeypatch, [KafkaError.INVALID_REPLICATION_FACTOR, None])
