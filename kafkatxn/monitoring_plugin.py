"""The monitoring-plugins conventions ``kafkatxn check`` speaks: threshold range expressions
(https://www.monitoring-plugins.org/doc/guidelines.html#THRESHOLDFORMAT) and performance data.
Pure: parsing and formatting only; what the thresholds mean for a cluster is :mod:`kafkatxn.check`'s.
"""

from __future__ import annotations

import math
import re
from typing import Callable, Iterable

from kafkatxn.durations import parse_duration_ms
from kafkatxn.errors import UsageError
from kafkatxn.model import FrozenRecord, record


# Records (model.Record), not @dataclass(frozen=True): the two classes' generated methods were ~7 M
# instructions of check's start, before its bootstrap (check_ranges parses its options first).
@record
class Range(FrozenRecord):
    """A monitoring-plugins threshold: alert when the value is outside ``start:end`` (inside with ``@``).

    ``10`` → outside 0..10, ``10:`` → below 10, ``~:10`` → above 10, ``10:20`` → outside 10..20,
    ``@10:20`` → within 10..20 (ends included).
    """

    start: float
    end: float
    inside: bool = False
    text: str = ""  # as written, for perfdata and messages
    start_text: str = "0"
    end_text: str = ""

    def __init__(self, start: float, end: float, inside: bool = False, text: str = "", start_text: str = "0",
                 end_text: str = "") -> None:
        self.__dict__.update(start=start, end=end, inside=inside, text=text, start_text=start_text, end_text=end_text)

    @classmethod
    def parse(cls, text: str, number: Callable[[str], float] | None = None, what: str = "threshold") -> "Range":
        """Parse ``text``; ``number`` converts one endpoint (default: a plain number)."""
        convert = number or _plain_number
        raw = str(text).strip()
        if not raw:
            raise UsageError(f"empty {what}; use a range such as 10, 10:, ~:10, 10:20 or @10:20")
        body = raw
        inside = body.startswith("@")
        if inside:
            body = body[1:]
        if ":" in body:
            start_text, end_text = body.split(":", 1)
        else:
            start_text, end_text = "0", body
        try:
            start = -math.inf if start_text == "~" else convert(start_text) if start_text else 0.0
            end = math.inf if end_text == "" and ":" in body else convert(end_text)
        except (ValueError, UsageError):
            raise UsageError(
                f"bad {what} {raw!r}; use a range such as 10, 10:, ~:10, 10:20 or @10:20"
            ) from None
        if start > end:
            raise UsageError(f"bad {what} {raw!r}: the start of the range is above its end")
        return cls(start, end, inside, raw, start_text or "0", end_text)

    def alerts(self, value: float) -> bool:
        """True when ``value`` should raise this threshold's state."""
        within = self.start <= value <= self.end
        return within if self.inside else not within

    def perfdata(self) -> str:
        """The range in perfdata, in the perfdata's unit (durations become seconds)."""
        start = "~" if self.start == -math.inf else number_text(self.start)
        end = "" if self.end == math.inf else number_text(self.end)
        prefix = "@" if self.inside else ""
        if not self.inside and self.start == 0 and self.end != math.inf:
            return end
        return f"{prefix}{start}:{end}"

    def describe(self) -> str:
        """For messages: ``> 1000``, ``< 10``, ``outside 10:20``, ``within 10:20``."""
        if self.inside:
            return f"within {self.text.lstrip('@')}"
        if self.end == math.inf:
            return f"< {self.start_text}"
        if self.start == -math.inf or self.start == 0:  # counts and ages are never negative
            return f"> {self.end_text}"
        return f"outside {self.text}"


def _plain_number(text: str) -> float:
    value = float(text)
    if math.isnan(value):  # every comparison with NaN is false: the threshold would always alert
        raise ValueError("not a number")
    return value


def duration_seconds(text: str) -> float:
    """A range endpoint given as a duration (``90s``, ``15m``, bare number = seconds), in seconds."""
    return parse_duration_ms(text) / 1000


def parse_count_range(text: str | None, what: str) -> Range | None:
    return None if text is None or str(text).strip().lower() in ("", "none", "off") else Range.parse(text, what=what)


def parse_duration_range(text: str | None, what: str) -> Range | None:
    if text is None or str(text).strip().lower() in ("", "none", "off"):
        return None
    return Range.parse(text, number=duration_seconds, what=what)


def check_ranges(
    lso_lag_warn: str | None,
    lso_lag_crit: str | None,
    txn_age_warn: str | None,
    txn_age_crit: str | None,
    producer_ids_warn: str | None,
    producer_ids_crit: str | None,
    group_lag_warn: str | None = None,
    group_lag_crit: str | None = None,
) -> tuple[Range | None, ...]:
    """``check``'s threshold options parsed (``none``/``off`` disables one), in the order of
    ``check.Thresholds``' fields: the CLI parses them, a usage error, before it begins the bootstrap
    and imports :mod:`kafkatxn.check` (the snapshot, the verdicts) while the broker answers."""
    return (
        parse_count_range(lso_lag_warn, "--lso-lag-warn"),
        parse_count_range(lso_lag_crit, "--lso-lag-crit"),
        parse_duration_range(txn_age_warn, "--txn-age-warn"),
        parse_duration_range(txn_age_crit, "--txn-age-crit"),
        parse_count_range(producer_ids_warn, "--producer-ids-warn"),
        parse_count_range(producer_ids_crit, "--producer-ids-crit"),
        parse_count_range(group_lag_warn, "--group-lag-warn"),
        parse_count_range(group_lag_crit, "--group-lag-crit"),
    )


def number_text(value: float | int) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".")
    return str(value)


@record
class PerfDatum(FrozenRecord):
    """One ``'label'=value[UOM];warn;crit;min;max`` item."""

    label: str
    value: float | int
    uom: str = ""
    warn: str = ""  # a range expression in the perfdata's unit, or empty
    crit: str = ""
    min: float | int | None = None
    max: float | int | None = None

    def __init__(self, label: str, value: float | int, uom: str = "", warn: str = "", crit: str = "",
                 min: float | int | None = None, max: float | int | None = None) -> None:  # noqa: A002 - perfdata's names
        self.__dict__.update(label=label, value=value, uom=uom, warn=warn, crit=crit, min=min, max=max)

    def format(self) -> str:
        label = self.label.replace("'", "''")
        if re.search(r"[\s'=]", self.label):
            label = f"'{label}'"
        fields = [
            f"{label}={number_text(self.value)}{self.uom}",
            self.warn,
            self.crit,
            "" if self.min is None else number_text(self.min),
            "" if self.max is None else number_text(self.max),
        ]
        return ";".join(fields).rstrip(";")


def format_perfdata(items: Iterable[PerfDatum]) -> str:
    return " ".join(item.format() for item in items)
