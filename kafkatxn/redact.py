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

_SECRETS: set[str] = set()
_ASSIGNMENT = re.compile(r"""(?i)\b((?:sasl[._])?password|ssl[._]key[._]password|secret)(["']?\s*[=:]\s*)("[^"]*"|'[^']*'|[^\s,;}]+)""")


def register_secret(value: str | None) -> None:
    if value and len(value) >= 1:
        _SECRETS.add(value)


def redact(text: str) -> str:
    for secret in sorted(_SECRETS, key=len, reverse=True):
        text = text.replace(secret, "******")
    return _ASSIGNMENT.sub(lambda m: f"{m.group(1)}{m.group(2)}******", text)


def redacting_formatter(fmt: str) -> "logging.Formatter":
    """A log formatter whose every line passes through :func:`redact`. Built on demand: logging is
    imported only when --debug asks for it (it costs every command start otherwise)."""
    import logging

    class RedactingFormatter(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            return redact(super().format(record))

    return RedactingFormatter(fmt)
