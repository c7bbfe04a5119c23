"""Error translation: whatever either Kafka client raised becomes one clear, redacted line.

librdkafka reports authentication, TLS and transport failures through its error callback rather
than the failing call; the translator keeps those and consults them when a call fails.
"""

from __future__ import annotations

import os
import re
from typing import Any, Callable

from kafkatxn.config import ConnectionConfig, client_certificate_problem
from kafkatxn.errors import (
    AuthenticationError,
    ClusterError,
    DeadlineExceeded,
    KafkatxnError,
    UnreachableError,
)
from kafkatxn.kafka.unreachable import answered_in_tls, is_no_brokers_error
from kafkatxn.model import Missing, Subject
from kafkatxn.redact import redact

# The patterns below read a failure's words only: kept as text, each is compiled by ``re`` where it is
# first used (and cached there), not at import (the eight here and in unreachable.py were 6.8 M
# instructions of every command's start before its first request).
# A TLS alert from the broker: it refused the handshake (often: our client certificate).
_TLS_ALERT = r"(?i)SSL alert number \d+|\b(?:sslv3|tlsv1\d?|ssl/tls) alert\b"
_LIBRDKAFKA_STATE = r"\s*\(after \d+ms in state \w+\)"

_ERRNO = r"(?:^|:)\s*(\d+) E[A-Z]+\s*$"

_TRANSPORT_CODES = ("_TRANSPORT", "_ALL_BROKERS_DOWN", "_RESOLVE")

# A listener that does not speak what security.protocol says. TLS to a plaintext listener: the
# broker reads the ClientHello as a huge request and closes (Python's ssl, librdkafka's words).
_NOT_TLS = (
    r"(?i)UNEXPECTED_EOF_WHILE_READING|WRONG_VERSION_NUMBER|EOF occurred in violation of protocol|unexpected eof while reading"
    r"|connecting to a PLAINTEXT broker listener|Disconnected during SSL handshake|SSL handshake failed: Disconnected"
)
# SASL to a listener without it: SaslHandshake answered ILLEGAL_SASL_STATE (error 34).
_NOT_SASL = r"(?i)IllegalSaslState|ILLEGAL_SASL_STATE|Request not valid (?:given|in) current SASL state"
# Plaintext to a TLS listener: the broker closes before answering ApiVersions.
_SPEAKS_TLS = r"(?i)connecting to a SSL listener"


# Kafka's authorization errors. Authorization is not authentication: the login succeeded, the
# principal may not do this one thing, so it is one part that did not answer (a typed Missing
# naming the ACL), never an error that ends the command.
AUTHORIZATION_ERRORS = frozenset({
    "TOPIC_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED",
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "DELEGATION_TOKEN_AUTHORIZATION_FAILED",
})


def authorization_error(error: object) -> bool:
    """Whether a Kafka error name, or a client exception carrying one, is an authorization failure."""
    if isinstance(error, BaseException):
        error = kafka_error_code(error) or type(error).__name__
    name = str(error or "")
    # kafka-python names its exceptions after the error (TopicAuthorizationFailedError).
    return name in AUTHORIZATION_ERRORS or (name.endswith("AuthorizationFailedError"))


def part_missing(subject: Subject, error: object, acl: str) -> Missing:
    """The part ``subject`` did not answer with ``error`` (a Kafka error name or an exception):
    when that is an authorization failure, reason "not authorized: needs <acl>" and ``acl`` set."""
    if authorization_error(error):
        return Missing(subject, f"not authorized: needs {acl}", acl=acl)
    if isinstance(error, BaseException):
        return Missing(subject, plain_reason(error))
    return Missing(subject, str(error))


def is_timeout(exc: BaseException) -> bool:
    """A request that got no answer in time (either client's timeout classes)."""
    return "Timeout" in type(exc).__name__ or "TimedOut" in type(exc).__name__


def clean(text: object) -> str:
    """One line, without anything that looks like a credential."""
    return redact(" ".join(str(text).split()))


def kafka_error_code(exc: BaseException) -> str | None:
    """The librdkafka error name (e.g. ``_TRANSPORT``) carried by a confluent-kafka exception."""
    arg = exc.args[0] if exc.args else None
    if arg is not None and hasattr(arg, "name") and hasattr(arg, "code"):
        try:
            return arg.name()
        except Exception:  # noqa: BLE001
            return None
    return None


def _error_code_name(err: Any) -> str:
    try:
        return err.name()
    except Exception:  # noqa: BLE001
        return ""


def _connect_failure(exc: BaseException) -> str:
    """Why a connection failed, without Python's errno prefix (``Connection refused``)."""
    while isinstance(exc.__cause__ or exc.__context__, OSError) and not isinstance(exc, OSError):
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    if isinstance(exc, OSError) and exc.strerror:
        return clean(exc.strerror)
    errno = re.search(_ERRNO, str(exc))  # kafka-python: KafkaConnectionError('111 ECONNREFUSED')
    if errno:
        return os.strerror(int(errno.group(1)))
    if "DNS" in str(exc).upper():
        return "the name does not resolve"
    return "timed out" if is_timeout(exc) else _without_class_names(exc)


class ErrorTranslator:
    """Turns client exceptions into kafkatxn errors for one connection config."""

    def __init__(self, config: ConnectionConfig, poll: Callable[[], None] = lambda: None):
        self.config = config
        self.client_errors: list[Any] = []
        self.poll = poll  # serves librdkafka's error callback

    def on_client_error(self, err: Any) -> None:
        self.client_errors.append(err)

    def transport_failure(self) -> str | None:
        for err in reversed(self.client_errors):
            if _error_code_name(err) in _TRANSPORT_CODES:
                text = clean(err.str())
                # librdkafka prefixes with the client's name and broker: keep the reason.
                reason = text.rsplit(": ", 1)[-1] if ": " in text else text
                return re.sub(_LIBRDKAFKA_STATE, "", reason)
        return None

    def listener_mismatch(self, text: str) -> AuthenticationError | None:
        """The one line for a listener that does not speak what ``security.protocol`` says, or None."""
        protocol = str(self.config.settings.get("security.protocol", "PLAINTEXT")).upper()
        at = f"the broker at {self.config.bootstrap_servers}"
        if protocol.endswith("SSL") and re.search(_NOT_TLS, text):
            return AuthenticationError(f"{at} does not speak TLS: check security.protocol ({protocol} here)")
        if protocol.startswith("SASL") and re.search(_NOT_SASL, text):
            return AuthenticationError(f"{at} does not speak SASL on this listener: check security.protocol ({protocol} here)")
        if not protocol.endswith("SSL") and (re.search(_SPEAKS_TLS, text) or answered_in_tls(text)):
            return AuthenticationError(f"{at} speaks TLS: check security.protocol ({protocol} here; SSL or SASL_SSL)")
        return None

    def raise_auth_errors(self) -> None:
        for err in self.client_errors:
            mismatch = self.listener_mismatch(err.str())
            if mismatch is not None:
                raise mismatch
            code = _error_code_name(err)
            if code in ("_AUTHENTICATION", "SASL_AUTHENTICATION_FAILED"):
                raise AuthenticationError(f"authentication failed: {clean(err.str())}")
            # With TLS 1.3 a broker refuses a client certificate after the client thinks the
            # handshake is done: librdkafka reports that alert as a transport error, and retries it
            # until the deadline. It is as final as a failed handshake.
            if code == "_SSL" or (code == "_TRANSPORT" and re.search(_TLS_ALERT, err.str())):
                raise self.tls_error(clean(err.str()))

    def tls_error(self, text: str) -> AuthenticationError:
        text = re.sub(_LIBRDKAFKA_STATE, "", text)
        problem = client_certificate_problem(self.config.settings)
        if problem and re.search(_TLS_ALERT, text):
            # The broker only says certificate_unknown; the client can say why.
            return AuthenticationError(f"TLS handshake failed: {problem}; the broker refused it ({text})")
        return AuthenticationError(f"TLS handshake failed: {text}")

    def raise_if_auth_in(self, exc: BaseException) -> None:
        try:
            self.raise_auth_errors()
        except AuthenticationError as auth:
            raise auth from exc
        name = type(exc).__name__
        text = clean(str(exc))
        mismatch = self.listener_mismatch(f"{name}: {text}")
        if mismatch is not None:
            raise mismatch from exc
        if name == "UnsupportedSaslMechanismError":  # kafka-python: the listener does not offer ours
            mechanism = self.config.settings.get("sasl.mechanisms", "GSSAPI")
            raise AuthenticationError(f"authentication failed: the broker does not enable SASL mechanism {mechanism}") from exc
        if "Authentication" in name or "SASL" in text.upper() and "AUTH" in text.upper():
            raise AuthenticationError(f"authentication failed: {text or name}") from exc
        if "SSL" in name or "CERTIFICATE" in text.upper():
            raise self.tls_error(text or name) from exc

    def deadline_exceeded(self) -> DeadlineExceeded:
        return DeadlineExceeded(
            f"timed out after {self.config.timeout_ms / 1000:g}s talking to {self.config.bootstrap_servers} "
            "(raise --timeout or check the cluster)"
        )

    def translate(self, exc: BaseException, what: str) -> KafkatxnError:
        """One clear error for anything either client raised."""
        if isinstance(exc, KafkatxnError):
            return exc
        self.raise_if_auth_in(exc)
        name = type(exc).__name__
        text = clean(str(exc))
        code = kafka_error_code(exc)
        servers = self.config.bootstrap_servers
        timeout_s = f"{self.config.timeout_ms / 1000:g}s"
        if is_no_brokers_error(exc) and getattr(exc, "nothing_listens", False):
            # Ended at once, not at the deadline: say so, and name each address's own reason.
            reasons = {address: _connect_failure(reason) for address, reason in exc.reasons.items()}
            if len(set(reasons.values())) == 1:
                detail = next(iter(reasons.values()))
            else:
                detail = "; ".join(f"{address}: {reason}" for address, reason in reasons.items())
            return UnreachableError(f"cannot reach any broker at {servers}: {detail} (check the bootstrap servers)")
        if is_no_brokers_error(exc):
            # kafka-python raises this as a timeout, but the cause is that no broker answered.
            last = getattr(exc, "last_error", None)
            detail = f": {_connect_failure(last)}" if last is not None else ""
            return UnreachableError(f"cannot reach any broker at {servers} within {timeout_s}{detail}")
        if code in _TRANSPORT_CODES:
            self.poll()
            detail = self.transport_failure() or clean(exc.args[0].str())
            return UnreachableError(f"cannot reach any broker at {servers}: {detail}")
        if code == "_TIMED_OUT":
            exc = TimeoutError()
            name = "Timeout"
        if "Timeout" in name or "timed out" in text.lower() or isinstance(exc, TimeoutError):  # concurrent.futures' too (3.11+)
            unreachable = self.transport_failure()
            if unreachable:
                return UnreachableError(f"cannot reach any broker at {servers} within {timeout_s}: {unreachable}")
            return DeadlineExceeded(
                f"timed out after {timeout_s} {what} ({servers}); check that the cluster is reachable or raise --timeout"
            )
        return ClusterError(f"{what} failed: {plain_reason(exc)}")

    def reason(self, exc: BaseException) -> str:
        """Why one part of a fan-out answer failed (auth failures end the command instead)."""
        self.raise_if_auth_in(exc)
        return plain_reason(exc)


# What a client's exception means for one part of an answer, in words: its class name never
# reaches the user (the "UnknownBrokerIdError: UnknownBrokerIdError: 3").
_PLAIN_REASONS = {
    "UnknownBrokerIdError": "the broker is not in the cluster's metadata (it left, or was fenced)",
    "NodeNotReadyError": "no connection to the broker (reconnecting after a failure)",
    "KafkaConnectionError": "the connection to the broker was lost",
    "CancelledError": "the request was cancelled (connection closed)",
    "StaleMetadata": "the client's metadata is out of date",
    "NoBrokersAvailable": "no broker answered",
}
_CLASS_NAME = r"\b(?:[A-Z][A-Za-z]*(?:Error|Exception)|Kafka[A-Z][A-Za-z]*)\b:?\s*"


def plain_reason(exc: BaseException) -> str:
    """One line saying why a request failed, without any client library's class name."""
    name = type(exc).__name__
    if getattr(exc, "plain_reason", None):
        return exc.plain_reason  # type: ignore[attr-defined]
    if kafka_error_code(exc) is not None:  # confluent-kafka: its KafkaError's own words, not its repr
        text = clean(exc.args[0].str())
        return "timed out" if kafka_error_code(exc) == "_TIMED_OUT" else re.sub(_LIBRDKAFKA_STATE, "", text)
    if is_timeout(exc):
        return "timed out"
    if name in _PLAIN_REASONS:
        base = _PLAIN_REASONS[name]
        if name == "KafkaConnectionError":
            detail = _connect_failure(exc)
            return f"{base}: {detail}" if detail and name not in detail else base
        return base
    return _without_class_names(exc)


def _without_class_names(exc: BaseException) -> str:
    return re.sub(_CLASS_NAME, "", clean(str(exc))).strip(" :") or "failed"
