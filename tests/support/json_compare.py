"""Comparing two commands' JSON documents: without what moves with the clock, and where they differ."""

from __future__ import annotations

import re


def without_times(doc):
    """A command's JSON without what moves with the clock (ages, dates, durations, the performance data)."""
    if isinstance(doc, dict):
        return {k: without_times(v) for k, v in doc.items()
                if not any(w in k for w in ("age", "_at", "until", "duration", "perfdata"))}
    if isinstance(doc, list):
        return [without_times(v) for v in doc]
    return re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", "<date>", doc) if isinstance(doc, str) else doc


def differences(a, b, path="") -> list[str]:
    """Where two JSON documents differ, by path."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in differences(a.get(k), b.get(k), f"{path}.{k}")]
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]
