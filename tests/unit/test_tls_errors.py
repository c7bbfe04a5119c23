"""Refused TLS handshakes and logins become one line that says why (no broker needed).

Brokers refuse an expired client certificate with a bare alert (certificate_unknown, 46) that
librdkafka reports as a transport error and retries until the deadline: the facade must stop at
once and name the expired certificate, which only the client can see.
"""

from __future__ import annotations

import datetime as dt

import pytest
from confluent_kafka import KafkaError

from harness.security import make_pki
from kafkatxn.config import ConnectionConfig, client_certificate_problem
from kafkatxn.errors import AuthenticationError
from kafkatxn.kafka import Cluster

ALERT_46 = (
    "ssl://127.0.0.1:9093/bootstrap: Receive failed: error:0A000416:SSL routines::ssl/tls alert certificate "
    "unknown: SSL alert number 46 (after 0ms in state APIVERSION_QUERY)"
)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def cluster_with(settings: dict[str, str]) -> Cluster:
    return Cluster(ConnectionConfig("127.0.0.1:9093", settings, 5000))


def test_an_expired_certificate_is_named_with_its_date(pki):
    problem = client_certificate_problem({"ssl.certificate.location": str(pki.expired_cert)})
    assert problem is not None and problem.startswith("client certificate expired on ")
    assert str(pki.expired_cert) in problem


def test_the_certificate_in_a_pem_keystore_is_found_after_the_key(pki):
    # ssl.keystore.location maps to ssl.certificate.location: key first, then the certificate.
    assert "expired" in (client_certificate_problem({"ssl.certificate.location": str(pki.expired_keystore)}) or "")
    assert client_certificate_problem({"ssl.certificate.location": str(pki.client_keystore_encrypted)}) is None


def test_valid_missing_unreadable_and_inline_certificates(pki, tmp_path):
    assert client_certificate_problem({"ssl.certificate.location": str(pki.client_cert)}) is None
    assert client_certificate_problem({}) is None
    assert client_certificate_problem({"ssl.certificate.location": str(tmp_path / "nope.pem")}) is None
    (tmp_path / "junk.pem").write_text("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    assert client_certificate_problem({"ssl.certificate.location": str(tmp_path / "junk.pem")}) is None
    assert "expired" in (client_certificate_problem({"ssl.certificate.pem": pki.expired_cert.read_text()}) or "")


def test_not_yet_valid(pki):
    long_ago = dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc)
    problem = client_certificate_problem({"ssl.certificate.location": str(pki.client_cert)}, now=long_ago)
    assert problem is not None and "not valid before" in problem


def test_a_broker_alert_with_an_expired_certificate_says_certificate_expired(pki):
    cluster = cluster_with({"security.protocol": "SSL", "ssl.certificate.location": str(pki.expired_cert)})
    cluster.errors.on_client_error(KafkaError(KafkaError._TRANSPORT, ALERT_46))
    with pytest.raises(AuthenticationError) as raised:
        cluster.errors.raise_auth_errors()
    message = str(raised.value)
    assert message.startswith("TLS handshake failed: client certificate expired on ")
    assert "SSL alert number 46" in message and "after 0ms" not in message and "\n" not in message


def test_a_broker_alert_with_a_valid_certificate_is_still_a_tls_failure(pki):
    cluster = cluster_with({"security.protocol": "SSL", "ssl.certificate.location": str(pki.client_cert)})
    cluster.errors.on_client_error(KafkaError(KafkaError._TRANSPORT, ALERT_46))
    with pytest.raises(AuthenticationError, match=r"^TLS handshake failed: .*SSL alert number 46"):
        cluster.errors.raise_auth_errors()


def test_a_plain_transport_error_is_not_an_authentication_failure():
    # A broker that is down must stay "unreachable" (and be retried until the deadline).
    cluster = cluster_with({})
    cluster.errors.on_client_error(KafkaError(KafkaError._TRANSPORT, "127.0.0.1:9093/bootstrap: Connect to ipv4#127.0.0.1:9093 failed: Connection refused"))
    cluster.errors.raise_auth_errors()  # does not raise


def test_kafka_python_alerts_name_the_expired_certificate(pki):
    cluster = cluster_with({"security.protocol": "SSL", "ssl.certificate.location": str(pki.expired_cert)})
    exc = ConnectionError("[SSL: SSLV3_ALERT_CERTIFICATE_UNKNOWN] sslv3 alert certificate unknown (_ssl.c:2580)")
    with pytest.raises(AuthenticationError, match="client certificate expired on"):
        cluster.errors.raise_if_auth_in(exc)


# -- kafka-python bootstraps alone (lso, hanging, producers, transactions): its failures say why too --


def test_no_broker_answering_the_bootstrap_says_why_not_errno_names():
    from kafka.errors import KafkaConnectionError

    from kafkatxn.errors import UnreachableError
    from kafkatxn.kafka.wire import NoBrokersAvailable

    cluster = cluster_with({})
    error = cluster.errors.translate(NoBrokersAvailable(["127.0.0.1:9093"], KafkaConnectionError("111 ECONNREFUSED")), "connecting")
    assert isinstance(error, UnreachableError)
    assert str(error) == "cannot reach any broker at 127.0.0.1:9093 within 5s: Connection refused"


def test_a_mechanism_the_listener_does_not_enable_is_a_refused_login():
    from kafka.errors import UnsupportedSaslMechanismError

    cluster = cluster_with({"security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN"})
    with pytest.raises(AuthenticationError, match="authentication failed: the broker does not enable SASL mechanism PLAIN"):
        cluster.errors.translate(UnsupportedSaslMechanismError(), "connecting")


def test_kafka_python_refusals_end_the_bootstrap_and_other_failures_do_not():
    from kafka.errors import KafkaConnectionError, KafkaTimeoutError, SaslAuthenticationFailedError

    from kafkatxn.kafka.wire import is_refusal

    assert is_refusal(SaslAuthenticationFailedError("invalid credentials"))
    assert is_refusal(KafkaConnectionError("Handshake failed: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"))
    assert not is_refusal(KafkaConnectionError("111 ECONNREFUSED"))
    assert not is_refusal(KafkaConnectionError("socket disconnected"))
    assert not is_refusal(KafkaTimeoutError("Timed out after 1000 ms"))


# -- certificate dates, read by cryptography ---------------------------------------------------------


def make_certificate(not_before: dt.datetime, not_after: dt.datetime) -> tuple[bytes, bytes]:
    """A self-signed certificate valid between the two instants, and its key (both PEM)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kafkatxn-test-client")])
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(not_before).not_valid_after(not_after)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


UTC = dt.timezone.utc


@pytest.mark.parametrize(
    "not_before, not_after",
    [
        # UTCTime (before 2050) and GeneralizedTime (from 2050): both encodings of X.509 dates.
        (dt.datetime(2001, 2, 3, 4, 5, 6, tzinfo=UTC), dt.datetime(2011, 12, 13, 14, 15, 16, tzinfo=UTC)),
        (dt.datetime(2049, 1, 2, 3, 4, 5, tzinfo=UTC), dt.datetime(2061, 7, 8, 9, 10, 11, tzinfo=UTC)),
    ],
)
def test_certificate_dates_are_read_to_the_second(tmp_path, not_before, not_after):
    cert, key = make_certificate(not_before, not_after)
    path = tmp_path / "client.pem"
    path.write_bytes(key + cert)  # a PEM key store: the key first, then the certificate
    settings = {"ssl.certificate.location": str(path)}
    after = not_after + dt.timedelta(seconds=1)
    assert client_certificate_problem(settings, now=after) == f"client certificate expired on {not_after:%Y-%m-%d %H:%M:%S} UTC ({path})"
    before = not_before - dt.timedelta(seconds=1)
    assert client_certificate_problem(settings, now=before) == f"client certificate is not valid before {not_before:%Y-%m-%d %H:%M:%S} UTC ({path})"
    for inside in (not_before, not_after, not_before + (not_after - not_before) / 2):
        assert client_certificate_problem(settings, now=inside) is None
    assert client_certificate_problem({"ssl.certificate.pem": cert.decode()}, now=after) == (
        f"client certificate expired on {not_after:%Y-%m-%d %H:%M:%S} UTC"
    )


def test_an_expired_and_a_valid_certificate_made_now(tmp_path):
    now = dt.datetime.now(UTC).replace(microsecond=0)
    expired, _ = make_certificate(now - dt.timedelta(days=30), now - dt.timedelta(days=1))
    valid, _ = make_certificate(now - dt.timedelta(days=1), now + dt.timedelta(days=30))
    (tmp_path / "expired.pem").write_bytes(expired)
    (tmp_path / "valid.pem").write_bytes(valid)
    problem = client_certificate_problem({"ssl.certificate.location": str(tmp_path / "expired.pem")})
    assert problem == f"client certificate expired on {now - dt.timedelta(days=1):%Y-%m-%d %H:%M:%S} UTC ({tmp_path / 'expired.pem'})"
    assert client_certificate_problem({"ssl.certificate.location": str(tmp_path / "valid.pem")}) is None


def test_cryptography_is_not_imported_at_start_up():
    """Only a failed TLS handshake reads certificate dates: commands do not pay for cryptography."""
    import json
    import subprocess
    import sys

    code = (
        "import sys, json\n"
        "from kafkatxn.cli.app import main\n"
        "try:\n"
        "    main(['config', 'show', '-b', 'h:1', '-o', 'json'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "import kafkatxn.kafka.client_errors\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'cryptography')), file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert json.loads(proc.stderr.strip().splitlines()[-1]) == [], proc.stderr
