"""Checks of user input that need no cluster: a bad name or regex is a usage error before anything is sent."""

from __future__ import annotations

import re
import warnings

from kafkatxn.errors import UsageError

_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}", re.ASCII)


def check_topic_name(name: str) -> None:
    """Kafka's rule for topic names: a name outside it cannot exist, so asking for one is a usage error."""
    if not _TOPIC_NAME.fullmatch(name) or name in (".", ".."):
        raise UsageError(f"bad topic name {shorten(name)!r}: topic names are 1-249 characters of A-Z a-z 0-9 . _ -")


def compile_regex(pattern: str, what: str) -> re.Pattern[str]:
    """``pattern`` compiled, or a usage error naming ``what`` (e.g. ``--pattern``). Besides re.error,
    re raises OverflowError (``a{99999999999}``) and RecursionError (deep nesting)."""
    try:
        with warnings.catch_warnings():  # "FutureWarning: Possible nested set" would be a second stderr line
            warnings.simplefilter("ignore", FutureWarning)
            return re.compile(pattern)
    except (re.error, OverflowError, RecursionError) as exc:
        raise UsageError(f"bad {what} regex {shorten(pattern)!r}: {exc}") from None


def shorten(text: str, keep: int = 60) -> str:
    return text if len(text) <= keep else f"{text[:keep - 20]}…{text[-10:]}"
