"""A client whose security.protocol the listener does not speak gets one line naming the broker and
security.protocol (issue 24, 6), whichever client library saw it. The texts are what Python's ssl,
kafka-python and librdkafka say (seen against the harness's listeners)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from kafka.errors import IllegalSaslStateError, KafkaConnectionError

from kafkatxn.config import ConnectionConfig
from kafkatxn.errors import AuthenticationError
from kafkatxn.kafka.client_errors import ErrorTranslator

BROKER = "127.0.0.1:9092"


def translator(protocol: str) -> ErrorTranslator:
    return ErrorTranslator(ConnectionConfig(BROKER, {"security.protocol": protocol}, 5000))


@pytest.mark.parametrize("protocol", ["SSL", "SASL_SSL"])
@pytest.mark.parametrize("error", [
    KafkaConnectionError("Handshake failed: [SSL: UNEXPECTED_EOF_WHILE_READING] EOF occurred in violation of protocol (_ssl.c:992)"),
    KafkaConnectionError("Handshake failed: [SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1006)"),
])
def test_tls_to_a_plaintext_listener(protocol, error):
    with pytest.raises(AuthenticationError) as err:
        translator(protocol).translate(error, "connecting")
    assert str(err.value) == f"the broker at {BROKER} does not speak TLS: check security.protocol ({protocol} here)"


def test_plaintext_to_a_tls_listener_reads_a_tls_record_as_a_frame_size():
    from kafka.errors import KafkaError as PyKafkaError
    from kafkatxn.kafka.wire import is_refusal

    class InvalidReceiveError(PyKafkaError):
        pass

    error = InvalidReceiveError("Invalid frame length: 352518912")  # 0x15030300: a TLS 1.2 alert record
    assert is_refusal(error)  # no retry until the deadline
    with pytest.raises(AuthenticationError) as err:
        translator("SASL_PLAINTEXT").translate(error, "connecting")
    assert str(err.value) == f"the broker at {BROKER} speaks TLS: check security.protocol (SASL_PLAINTEXT here; SSL or SASL_SSL)"
    # Any other invalid size is not TLS.
    assert not is_refusal(InvalidReceiveError("Invalid frame length: 2000000000"))


def test_sasl_to_a_listener_without_sasl():
    with pytest.raises(AuthenticationError) as err:
        translator("SASL_PLAINTEXT").translate(IllegalSaslStateError("[Error 34] IllegalSaslStateError"), "connecting")
    got = str(err.value)
    assert got == f"the broker at {BROKER} does not speak SASL on this listener: check security.protocol (SASL_PLAINTEXT here)"
    assert "Error 34" not in got and "IllegalSasl" not in got


class Err:
    """A librdkafka error as its error callback hands it over."""

    def __init__(self, code: str, text: str):
        self._code, self._text = code, text

    def name(self) -> str:
        return self._code

    def str(self) -> str:
        return self._text


@pytest.mark.parametrize("protocol, code, text, says", [
    ("SASL_SSL", "_SSL", "sasl_ssl://127.0.0.1:9092/bootstrap: SSL handshake failed: Disconnected: connecting to a PLAINTEXT "
     "broker listener? (after 3ms in state SSL_HANDSHAKE)", "does not speak TLS"),
    ("PLAINTEXT", "_TRANSPORT", "127.0.0.1:9092/bootstrap: Disconnected while requesting ApiVersion: might be caused by incorrect "
     "security.protocol configuration (connecting to a SSL listener?) or broker version is < 0.10 (see api.version.request) "
     "(after 2ms in state APIVERSION_QUERY)", "speaks TLS"),
    ("SASL_PLAINTEXT", "_AUTHENTICATION", "sasl_plaintext://127.0.0.1:9092/bootstrap: SASL SCRAM-SHA-512 mechanism handshake "
     "failed: Broker: Request not valid in current SASL state: broker's supported mechanisms: (after 0ms in state AUTH_HANDSHAKE)",
     "does not speak SASL"),
    # A TLS alert record (0x15 0x03 0x03 ..) read as a Kafka response's size.
    ("PLAINTEXT", "_TRANSPORT", "127.0.0.1:9092/bootstrap: Receive failed: Invalid response size 352518912 (0..100000000): "
     "increase receive.message.max.bytes (after 3ms in state APIVERSION_QUERY)", "speaks TLS"),
])
def test_librdkafka_reports_are_worded_the_same(protocol, code, text, says):
    t = translator(protocol)
    t.on_client_error(Err(code, text))
    with pytest.raises(AuthenticationError) as err:
        t.raise_auth_errors()
    assert str(err.value).startswith(f"the broker at {BROKER} {says}")
    assert f"check security.protocol ({protocol} here" in str(err.value)


def test_a_matching_protocol_keeps_the_old_words():
    # An EOF during a TLS handshake is a mismatch only when the client spoke TLS.
    got = translator("PLAINTEXT").translate(KafkaException(KafkaError(KafkaError._TIMED_OUT)), "connecting")
    assert "security.protocol" not in str(got)
    with pytest.raises(AuthenticationError) as err:
        translator("SSL").translate(KafkaConnectionError("Handshake failed: certificate verify failed"), "connecting")
    assert "does not speak" not in str(err.value) and "certificate verify failed" in str(err.value)


def test_a_tls_alert_that_arrives_with_the_close_is_still_named_at_once(tmp_path):
    """A TLS listener answers a plaintext request with its alert and closes at once; a client that
    reads both in one read reported "socket disconnected" until --timeout. This listener sends exactly
    that (the alert and the close together), on every connection."""
    import socket
    import subprocess
    import sys
    import threading
    import time

    alert = bytes.fromhex("15030300020250")  # TLS 1.2 alert record: fatal, protocol_version
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                try:
                    conn.recv(1024)
                    conn.sendall(alert)
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "kafkatxn", "hanging", "-b", f"127.0.0.1:{port}", "--timeout", "10s"],
                              capture_output=True, text=True, timeout=60, cwd=tmp_path)
        took = time.monotonic() - started
    finally:
        stop.set()
        thread.join()
        server.close()
    assert done.returncode == 3, done.stderr
    assert f"the broker at 127.0.0.1:{port} speaks TLS: check security.protocol (PLAINTEXT here" in done.stderr, done.stderr
    assert took < 8, f"{took:.1f}s of a 10s timeout: {done.stderr}"
