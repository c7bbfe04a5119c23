"""Why no bootstrap server answered, told apart from a silence: pure, no Kafka client imported.

The wire raises :class:`NoBrokersAvailable`; the error translator words it.
"""

from __future__ import annotations

import re
from typing import Sequence


def is_no_brokers_error(exc: BaseException) -> bool:
    return type(exc).__name__ == "NoBrokersAvailable" or "Unable to bootstrap" in str(exc)


class NoBrokersAvailable(ConnectionError):
    """No bootstrap server answered; ``last_error`` is the last reason seen, ``reasons`` the last one
    per address, and ``nothing_listens`` says every address refused or did not resolve (so the
    command ended before its deadline)."""

    def __init__(self, servers: Sequence[str], last_error: BaseException | None,
                 reasons: dict[str, BaseException] | None = None, nothing_listens: bool = False):
        super().__init__(f"Unable to bootstrap from {list(servers)}" + (f": {last_error}" if last_error else ""))
        self.last_error = last_error
        self.reasons = dict(reasons or {})
        self.nothing_listens = nothing_listens


# Connection refused, or a name that does not resolve, at every bootstrap address for this long:
# nothing is there to answer, and waiting out --timeout would only hide a typo'd address. Long
# enough to ride over a broker's restart blip, short enough for a person to get their answer at once.
FAIL_FAST_S = 1.0
_NOTHING_LISTENS = ("ECONNREFUSED", "ENETUNREACH", "EHOSTUNREACH", "EADDRNOTAVAIL", "DNS RESOLUTION", "CONNECTION REFUSED")


def nothing_listens(exc: BaseException) -> bool:
    """The address refused the connection or did not resolve: an answer, not a silence."""
    text = f"{type(exc).__name__}: {exc}".upper()
    return any(marker in text for marker in _NOTHING_LISTENS)


# A TLS listener's answer to a plaintext request is a TLS record (0x15 alert or 0x16 handshake,
# version 0x03 0x0N); a plaintext client reads its first four bytes as a huge frame size.
_FRAME_SIZE = r"(?i)(?:frame length|response size)\D{0,3}(\d+)"  # compiled where first used (client_errors.py)


def answered_in_tls(text: str) -> bool:
    """Whether a client's "invalid frame length/response size N" is a TLS record read as a Kafka frame."""
    match = re.search(_FRAME_SIZE, text)
    return match is not None and (int(match.group(1)) >> 16) in (0x1503, 0x1603)


# A plaintext ApiVersions v0 request (correlation id 1, client id "kafkatxn"), as any Kafka client's
# first bytes: a Kafka listener answers it, a TLS listener answers with a TLS alert record.
_PLAINTEXT_HELLO = bytes.fromhex("00000012" "0012" "0000" "00000001" "0008") + b"kafkatxn"


def listener_answers_in_tls(host: str, port: int, timeout_s: float) -> bool:
    """Whether the listener at host:port answers a plaintext Kafka request with a TLS record.

    A TLS listener sends its alert and closes at once; a client library that reads the alert in the
    same read as the close reports only "socket disconnected". A socket of our own reads the bytes
    before the close, so the mismatch is named instead of waited out."""
    import socket

    if timeout_s <= 0:
        return False
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(_PLAINTEXT_HELLO)
            first = sock.recv(5)
    except OSError:
        return False
    return len(first) >= 2 and first[0] in (0x15, 0x16) and first[1] == 0x03
