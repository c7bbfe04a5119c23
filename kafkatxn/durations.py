"""Human durations (``90s``, ``10m``, ``1h30m``, ``250ms``) for every option that takes a time."""

from __future__ import annotations

import re

from kafkatxn.errors import UsageError

_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
# ASCII digits only: "٣s" is not a duration anyone means.
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)", re.ASCII)
_NUMBER = re.compile(r"\d+(?:\.\d+)?", re.ASCII)
# Longer than any timeout or window means a typo; and it keeps every value a finite int64 (float("9"*400) is inf).
MAX_DURATION_MS = 100 * 365 * 86_400_000


def parse_duration_ms(text: str | int | float) -> int:
    """Milliseconds for ``text``; a bare number means seconds."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if text < 0:
            raise UsageError(f"duration must not be negative: {text}")
        return _at_most_max(text * 1000, text)
    raw = str(text).strip().lower()
    if not raw:
        raise UsageError("empty duration; use e.g. 90s, 10m, 1h")
    if _NUMBER.fullmatch(raw):
        return _at_most_max(float(raw) * 1000, text)
    pos = 0
    total = 0.0
    for match in _PART.finditer(raw):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_MS[match.group(2)]
        pos = match.end()
    if pos != len(raw) or pos == 0:
        raise UsageError(f"bad duration {text!r}; use e.g. 250ms, 90s, 10m, 1h30m, 7d")
    return _at_most_max(total, text)


def is_bare_number(text: object) -> bool:
    """True for ``15`` or ``1.5``: a duration without its unit, which the command line refuses."""
    return _NUMBER.fullmatch(str(text).strip()) is not None


def unit_required(text: object, option: str) -> str:
    """The one-line reason a bare number is refused for ``option``. Kafka's own
    ``kafka-transactions.sh find-hanging --max-transaction-timeout`` takes minutes; a runbook line
    copied from it must not silently mean seconds here."""
    raw = str(text).strip()
    if option == "--max-transaction-timeout":
        return (f"give a unit: {raw}m is Kafka's tool's meaning (kafka-transactions.sh find-hanging takes minutes), "
                f"{raw}s is seconds")
    return f"give a unit, e.g. {raw}s, {raw}m or {raw}ms"


def _at_most_max(ms: float, text: object) -> int:
    if not ms <= MAX_DURATION_MS:  # also catches inf and nan
        shown = text if len(str(text)) <= 40 else f"{str(text)[:20]}…{str(text)[-10:]}"
        raise UsageError(f"duration {shown!r} is too long (at most 100 years)")
    return int(ms)


def format_duration_ms(ms: int | None) -> str:
    """Short human form for tables: ``1h02m``, ``3m20s``, ``850ms``."""
    if ms is None or ms < 0:
        return ""
    if ms < 1000:
        return f"{ms}ms"
    seconds = ms // 1000
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"
