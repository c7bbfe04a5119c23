"""Human durations (``90s``, ``10m``, ``1h30m``, ``250ms``) for every option that takes a time."""

from __future__ import annotations

import re

from kafkatxn.errors import UsageError

_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


def parse_duration_ms(text: str | int | float) -> int:
    """Milliseconds for ``text``; a bare number means seconds."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if text < 0:
            raise UsageError(f"duration must not be negative: {text}")
        return int(text * 1000)
    raw = str(text).strip().lower()
    if not raw:
        raise UsageError("empty duration; use e.g. 90s, 10m, 1h")
    if re.fullmatch(r"\d+(?:\.\d+)?", raw):
        return int(float(raw) * 1000)
    pos = 0
    total = 0.0
    for match in _PART.finditer(raw):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_MS[match.group(2)]
        pos = match.end()
    if pos != len(raw) or pos == 0:
        raise UsageError(f"bad duration {text!r}; use e.g. 250ms, 90s, 10m, 1h30m, 7d")
    return int(total)


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
