from __future__ import annotations

import pytest

from kafkatxn.durations import format_duration_ms, parse_duration_ms
from kafkatxn.errors import UsageError


@pytest.mark.parametrize(
    "text, ms",
    [("90s", 90_000), ("10m", 600_000), ("1h", 3_600_000), ("1h30m", 5_400_000), ("250ms", 250), ("7d", 604_800_000),
     ("30", 30_000), ("1.5s", 1500), (" 2M ", 120_000)],
)
def test_human_durations(text, ms):
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "abc", "10 m", "1x", "m10", "-5s", "10m5", "1h-2m"])
def test_bad_durations_are_usage_errors(text):
    with pytest.raises(UsageError):
        parse_duration_ms(text)


@pytest.mark.parametrize("ms, text", [(850, "850ms"), (5000, "5s"), (200_000, "3m20s"), (3_720_000, "1h02m"), (90_000_000, "1d01h"), (-1, "")])
def test_format(ms, text):
    assert format_duration_ms(ms) == text
