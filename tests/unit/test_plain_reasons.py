"""No client library's class name reaches a user: every exception either client raises for one part
of an answer becomes words (issue 23: "UnknownBrokerIdError: UnknownBrokerIdError: 3" was the
user's one line of explanation)."""

from __future__ import annotations

import re

import kafka.errors as Errors
import pytest

from kafkatxn.config import ConnectionConfig
from kafkatxn.kafka.client_errors import ErrorTranslator, plain_reason
from kafkatxn.kafka.session import BrokerSilent

CLASS_NAME = re.compile(r"\b[A-Z][a-z]+(?:[A-Z][a-z]+)*(?:Error|Exception)\b")


@pytest.mark.parametrize("exc, words", [
    (Errors.UnknownBrokerIdError(3), "not in the cluster's metadata"),
    (Errors.KafkaConnectionError("111 ECONNREFUSED"), "Connection refused"),
    (Errors.KafkaTimeoutError("Timed out after 4000 ms"), "timed out"),
    (Errors.RequestTimedOutError(), "timed out"),
    (Errors.NodeNotReadyError(2), "no connection"),
    (Errors.IllegalStateError("Socket disconnected"), "Socket disconnected"),
    (BrokerSilent(3, 4.0), "timed out"),
    (RuntimeError("KafkaError: something odd"), "something odd"),
])
def test_a_part_that_failed_is_said_in_words(exc, words):
    reason = plain_reason(exc)
    assert words in reason and not CLASS_NAME.search(reason), reason


def test_every_kafka_python_error_class_translates_without_its_name():
    translator = ErrorTranslator(ConnectionConfig(bootstrap_servers="b:9092"))
    for cls in vars(Errors).values():
        if not (isinstance(cls, type) and issubclass(cls, Errors.KafkaError)) or "Auth" in cls.__name__ or "Sasl" in cls.__name__:
            continue  # authentication and authorization end the command with their own line
        try:
            exc = cls("detail")
        except TypeError:
            exc = cls()
        line = str(translator.translate(exc, "sending requests"))
        assert not CLASS_NAME.search(line), (cls.__name__, line)


def test_a_librdkafka_error_is_its_message_not_its_repr():
    from confluent_kafka import KafkaError, KafkaException

    exc = KafkaException(KafkaError(KafkaError._TRANSPORT, "Failed while waiting for response from broker: Local: Broker transport failure"))
    assert plain_reason(exc) == "Failed while waiting for response from broker: Local: Broker transport failure"
    assert "KafkaError{" in str(exc)  # what reached the user before
    assert plain_reason(KafkaException(KafkaError(KafkaError._TIMED_OUT))) == "timed out"


def test_unreachable_with_a_timed_out_last_attempt_names_no_class():
    from kafkatxn.kafka.unreachable import NoBrokersAvailable

    translator = ErrorTranslator(ConnectionConfig(bootstrap_servers="b:9092"))
    exc = NoBrokersAvailable(["b:9092"], Errors.RequestTimedOutError("Request timed out after 0 ms"), {})
    line = str(translator.translate(exc, "connecting"))
    assert "timed out" in line and not CLASS_NAME.search(line), line
