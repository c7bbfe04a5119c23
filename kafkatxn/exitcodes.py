"""How findings and missing parts become an exit code: one policy for every command.

0 ok · 1 findings (warning) · 2 critical findings · 3 could not determine · 64 usage.
A confirmed critical finding stands even when parts of the cluster did not answer (it pages
either way); otherwise a missing part makes the answer undetermined, because what is missing
could hide a finding, so it outranks warnings.
"""

from __future__ import annotations

import enum
from typing import Iterable, Sized

from kafkatxn.errors import EXIT_CRITICAL, EXIT_OK, EXIT_UNKNOWN, EXIT_USAGE, EXIT_WARNING

__all__ = ["EXIT_CRITICAL", "EXIT_OK", "EXIT_UNKNOWN", "EXIT_USAGE", "EXIT_WARNING", "SEVERITY", "Status", "exit_code", "worst"]


class Status(enum.IntEnum):
    OK = EXIT_OK
    WARNING = EXIT_WARNING
    CRITICAL = EXIT_CRITICAL
    UNKNOWN = EXIT_UNKNOWN


SEVERITY = {Status.OK: 0, Status.WARNING: 1, Status.UNKNOWN: 2, Status.CRITICAL: 3}


def worst(statuses: Iterable[Status | int]) -> Status:
    return max((Status(s) for s in statuses), key=SEVERITY.__getitem__, default=Status.OK)


def exit_code(findings: Status | int = Status.OK, missing: Sized = (), undetermined: bool = False) -> int:
    """The exit code for the worst finding (``findings``) plus the parts that did not answer
    (``missing``) or verdicts that could not be decided (``undetermined``)."""
    parts = [Status(findings)]
    if len(missing) or undetermined:
        parts.append(Status.UNKNOWN)
    return int(worst(parts))
