"""Abort hanging transactions and fence transactional ids, safely.

Both actions follow the same steps, in one place (:mod:`kafkatxn.remedy.driver`): plan from a fresh
snapshot, show the plan, get confirmation (the caller's ``confirm``), check the state again right
before acting, write a durable audit intent, act, verify, write the audit result. Deciding is pure
(:mod:`kafkatxn.remedy.decide`: :func:`decide_abort`, :func:`coordinator_refusal`,
:func:`decide_fence`, :func:`verify_abort`, :func:`verify_fence`) and tested without a broker.
:mod:`~kafkatxn.remedy.abort` writes ABORT markers for hanging transactions only (a marker behind a
live coordinator's back would lose the data of a transaction its producer later commits);
:mod:`~kafkatxn.remedy.fence` ends the transactions a coordinator tracks by bumping their id's epoch;
:mod:`~kafkatxn.remedy.restore` writes the COMMIT marker of a transaction its coordinator's log shows committed.
"""

from kafkatxn.errors import UsageError
from kafkatxn.remedy.decide import (
    DEFAULT_FENCE_TIMEOUT_MS, FAILING_OUTCOMES, UNFINISHED_STATES, AbortDecision, AbortTarget, Action, FenceDecision, Outcome,
    Verification, already_aborted, coordinator_refusal, decide_abort, decide_fence, exit_code, fence_timeout_ms,
    marker_coordinator_epoch, matching_ids, validate_target, verify_abort, verify_fence,
)
from kafkatxn.remedy.driver import Confirm, Declined, RemedyResult
from kafkatxn.remedy.abort import AbortRow, HangingScope, abort  # noqa: E402 - the function, not the module, is `remedy.abort`
from kafkatxn.remedy.fence import FenceRow, _describe, fence  # noqa: E402 - the function, not the module, is `remedy.fence`
from kafkatxn.remedy.restore import restore_commit  # noqa: E402

__all__ = [
    "DEFAULT_FENCE_TIMEOUT_MS", "FAILING_OUTCOMES", "UNFINISHED_STATES", "AbortDecision", "AbortRow", "AbortTarget", "Action",
    "Confirm", "Declined", "FenceDecision", "FenceRow", "HangingScope", "Outcome", "RemedyResult", "UsageError", "Verification",
    "abort", "already_aborted", "coordinator_refusal", "decide_abort", "decide_fence", "exit_code", "fence", "fence_timeout_ms",
    "marker_coordinator_epoch", "matching_ids", "restore_commit", "validate_target", "verify_abort", "verify_fence",
]
