"""What ends a bootstrap at once: a refused login or TLS handshake, which no retry cures."""

from __future__ import annotations

from kafkatxn.kafka.unreachable import answered_in_tls


def is_refusal(exc: BaseException) -> bool:
    """A bootstrap failure no retry cures: the broker refused the login or the TLS handshake."""
    import kafka.errors as Errors

    if isinstance(exc, (Errors.SaslAuthenticationFailedError, Errors.AuthorizationError, Errors.UnsupportedSaslMechanismError,
                        Errors.IllegalSaslStateError)):
        return True
    text = str(exc).upper()
    # ssl's errors ([SSL: ...], (_ssl.c:...)), and anything that broke the TLS handshake itself
    # (a timeout is not one: it ends the wait for the connection, not the handshake).
    return "SSL" in text or "CERTIFICATE" in text or "HANDSHAKE FAILED" in text or answered_in_tls(text)  # a TLS listener
