"""Keep secrets out of everything we print or log.

Secret values (SASL passwords, key passwords, inline keys) are registered when the connection
config is resolved; every log line and error line passes through :func:`redact`. A process-wide set
is deliberate: the clients log from their own threads, and a secret must never leak through any of them.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import logging

MASK = "******"
# A secret this long is masked wherever it appears. A shorter one (a one-letter test password) only
# where it stands as a whole token, so that the words around it are not mangled ("the ******roker").
WHOLE_TOKEN_BELOW = 8
# What may stand next to a whole token: what separates words, values, quotes and a URL's user:pw@host.
_EDGE = r"""\s"'=:,;(){}\[\]<>@/"""
_SECRETS: set[str] = set()
_ASSIGNMENT = re.compile(r"""(?i)\b((?:sasl[._])?password|ssl[._]key[._]password|secret)(["']?\s*[=:]\s*)("[^"]*"|'[^']*'|[^\s,;}]+)""")
_compiled: tuple[frozenset[str], list[str], re.Pattern[str] | None] = (frozenset(), [], None)


def register_secret(value: str | None) -> None:
    if value:
        _SECRETS.add(value)


def _matchers() -> tuple[list[str], re.Pattern[str] | None]:
    """The long secrets, longest first, and one pattern for the short ones' whole tokens (made again
    when the set of secrets changed)."""
    global _compiled
    key = frozenset(_SECRETS)
    if key != _compiled[0]:
        long = sorted((s for s in key if len(s) >= WHOLE_TOKEN_BELOW), key=len, reverse=True)
        # Longest first, so that one short secret inside another is not masked instead of it. One of
        # only blanks is no token: masking it would mask every space.
        short = sorted((s for s in key if len(s) < WHOLE_TOKEN_BELOW and s.strip()), key=len, reverse=True)
        # A full stop ends a token only at the end of a sentence; inside a host name it does not.
        pattern = re.compile(rf"(?<![^{_EDGE}])(?:{'|'.join(map(re.escape, short))})(?=[{_EDGE}]|\.(?:\s|$)|$)") if short else None
        _compiled = (key, long, pattern)
    return _compiled[1], _compiled[2]


def redact(text: str) -> str:
    long, short = _matchers()
    text = _mask_all(long, text)
    if short is not None:
        text = short.sub(MASK, text)
    # Last, the long ones again: masks may have joined what was left into one (a secret of asterisks).
    return _mask_all(long, _ASSIGNMENT.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text))


def _mask_all(secrets: list[str], text: str) -> str:
    for secret in secrets:
        while secret in text:
            text = text.replace(secret, MASK)
    return text


def redacting_formatter(fmt: str) -> "logging.Formatter":
    """A log formatter whose every line passes through :func:`redact`. Built on demand: logging is
    imported only when --debug asks for it (it costs every command start otherwise)."""
    import logging

    class RedactingFormatter(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            return redact(super().format(record))

    return RedactingFormatter(fmt)
