"""The one sequence every destructive action follows, with the audit log written here and only here.

    plan → confirm → recheck (right before acting) → audit intent → act → verify → audit result

:func:`run` drives a :class:`Remedy`; the remedy says what its steps mean, the driver says when they
happen and what the audit log gets:

- ``plan`` decides each item from a fresh view; a refusal is recorded as a result with no intent
  (nothing was attempted), a dry run or a plan with nothing to do ends here, the caller's
  ``confirm`` sees the plan rows, and the time it took is added back to the deadline (which is for
  the network, not for the person reading the plan; ``--yes`` takes none);
- ``recheck`` asks again right before acting: :meth:`Recheck.refused` is recorded like a plan-time
  refusal, :meth:`Recheck.ended` (nothing to do after all) is not recorded, :meth:`Recheck.go`
  carries the state the intent records;
- the intent is on disk before ``act``; whatever ``act`` raises ends the item as ``unknown`` on
  record (it may or may not have taken effect); :meth:`Acted.ended` is a result without verifying;
- ``verify`` reads the state after, and its outcome is the result's.

A new action is a plan and an act. Restoring a lost COMMIT marker, say::

    class RestoreCommit(Remedy):
        name = "restore-commit"                          # the audit log's action
        acting = Action.RESTORE                          # what the plan decides for an item to act on

        def plan(self, cluster, audit):                  # items from decide_restore (pure) over gather's facts
            return Plan([_RestoreItem(t, decide_restore(t, ...)) for t in self.targets], missing)

        def recheck(self, cluster, item):                # the same decision, on facts asked again
            again = decide_restore(item.target, ...)
            return Recheck.go({"producer": ...}) if again.action is Action.RESTORE else Recheck.refused(again.reason)

        def act(self, cluster, item):
            cluster.write_commit_marker(...)             # one facade call
            return Acted()

        def verify(self, cluster, item):
            return verify_restore(...), {"last_stable_offset": ...}

    def restore_commit(cluster, targets, *, audit, confirm, dry_run=False) -> RemedyResult:
        return run(RestoreCommit(targets), cluster, audit=audit, confirm=confirm, dry_run=dry_run)

The items a plan returns carry ``decision`` (``action``, ``reason``), ``outcome`` and ``reason``
(set by the driver), ``row()`` (the output row) and ``audit_target()``; ``plan_state()`` is what a
plan-time refusal records.
"""

from __future__ import annotations

import abc
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

from kafkatxn.auditlog import AuditLog
from kafkatxn.errors import EXIT_USAGE, KafkatxnError
from kafkatxn.model import Missing
from kafkatxn.remedy.decide import Action, Outcome, Verification, exit_code

if TYPE_CHECKING:  # capability modules are handed the facade; they do not import it
    from kafkatxn.kafka import Cluster

Confirm = Callable[[list[Any]], bool]


class Decision(Protocol):
    action: Action
    reason: str


class Item(Protocol):
    decision: Decision
    outcome: Outcome | None
    reason: str

    def row(self) -> Any: ...

    def audit_target(self) -> dict[str, Any]: ...

    def plan_state(self) -> Any: ...


@dataclass
class Plan:
    items: Sequence[Item]
    missing: list[Missing] = field(default_factory=list)


@dataclass(frozen=True)
class Recheck:
    """What asking again right before acting found: go (with the state the intent records), or an end."""

    ended: Outcome | None = None  # REFUSED (recorded), or an outcome with nothing to do (not recorded)
    reason: str = ""
    state: Any = None  # the state the intent or the refusal records
    plan: dict[str, Any] | None = None  # what exactly is about to be sent, for the intent

    @classmethod
    def go(cls, state_before: Any, plan: dict[str, Any] | None = None) -> "Recheck":
        return cls(None, "", state_before, plan)

    @classmethod
    def refused(cls, reason: str, state: Any = None) -> "Recheck":
        return cls(Outcome.REFUSED, reason, state)

    @classmethod
    def nothing(cls, outcome: Outcome, reason: str) -> "Recheck":
        return cls(outcome, reason)


@dataclass(frozen=True)
class Acted:
    """What the act did: done (verify next; ``note`` leads the result's reason), or ended without verifying."""

    note: str = ""
    ended: Outcome | None = None
    reason: str = ""
    state: Any = None  # what the result records when ended

    @classmethod
    def ending(cls, outcome: Outcome, reason: str, state: Any = None) -> "Acted":
        return cls("", outcome, reason, state)


class Remedy(abc.ABC):
    """One destructive action: what its plan, recheck, act and verify mean (:func:`run` orders them)."""

    name: str  # the action, as the audit log records it
    acting: Action  # the plan's action for an item to act on

    @abc.abstractmethod
    def plan(self, cluster: Cluster, audit: AuditLog) -> Plan: ...

    def before_acting(self, cluster: Cluster) -> None:
        """Once, after the confirmation and before the first recheck (e.g. a broker setting the act needs)."""

    @abc.abstractmethod
    def recheck(self, cluster: Cluster, item: Any) -> Recheck: ...

    @abc.abstractmethod
    def act(self, cluster: Cluster, item: Any) -> Acted: ...

    def no_answer(self, item: Any, exc: BaseException) -> str:
        """The reason when ``act`` raised: the request may or may not have taken effect."""
        return f"{self.name} got no answer: {exc}"

    @abc.abstractmethod
    def verify(self, cluster: Cluster, item: Any) -> tuple[Verification, Any]:
        """The verdict on the state after the act, and that state (for the audit result)."""


@dataclass
class RemedyResult:
    rows: list[Any]
    missing: list[Missing] = field(default_factory=list)
    acted: bool = False

    @property
    def exit_code(self) -> int:
        return exit_code((r.outcome for r in self.rows), incomplete=bool(self.missing))


class Declined(KafkatxnError):
    """The plan was not confirmed; nothing was changed."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str = "not confirmed; nothing was changed"):
        super().__init__(message)


def audit_refusal(audit: AuditLog, action: str, target: dict[str, Any], reason: str, state: Any = None) -> None:
    """A refusal on the audit log: a result record with no intent (nothing was attempted)."""
    audit.result(uuid.uuid4().hex, action, target, Outcome.REFUSED.value, state, reason)


def run(remedy: Remedy, cluster: Cluster, *, audit: AuditLog, confirm: Confirm, dry_run: bool = False) -> RemedyResult:
    """Plan, confirm, then recheck, act and verify each item; rows are the plan (dry run, nothing
    to do) or the outcomes. Declining raises :class:`Declined`."""
    audit.cluster_id = cluster.metadata().cluster_id
    plan = remedy.plan(cluster, audit)
    items = list(plan.items)
    plan_rows = [i.row() for i in items]
    if not dry_run:
        for i in items:
            if i.decision.action is Action.REFUSE:
                audit_refusal(audit, remedy.name, i.audit_target(), i.decision.reason, i.plan_state())
    actionable = [i for i in items if i.decision.action is remedy.acting]
    if dry_run or not actionable:
        return RemedyResult(plan_rows, plan.missing)
    asked = time.monotonic()
    if not confirm(plan_rows):
        raise Declined()
    cluster.exclude_from_deadline(time.monotonic() - asked)  # the deadline is for the network, not for the person reading the plan
    remedy.before_acting(cluster)
    for item in actionable:
        _carry_out(remedy, cluster, item, audit)
    return RemedyResult([i.row() for i in items], plan.missing, acted=True)


def _carry_out(remedy: Remedy, cluster: Cluster, item: Item, audit: AuditLog) -> None:
    """Recheck → intent → act → verify → result, for one item."""
    check = remedy.recheck(cluster, item)
    if check.ended is not None:
        item.outcome, item.reason = check.ended, check.reason
        if check.ended is Outcome.REFUSED:
            audit_refusal(audit, remedy.name, item.audit_target(), check.reason, check.state)
        return
    target = item.audit_target()
    action_id = audit.intent(remedy.name, target, check.state, plan=check.plan)
    try:
        acted = remedy.act(cluster, item)
    except Exception as exc:  # noqa: BLE001 - whatever happened, the intent gets its result
        item.outcome, item.reason = Outcome.UNKNOWN, remedy.no_answer(item, exc)
        audit.result(action_id, remedy.name, target, item.outcome.value, None, item.reason)
        if not isinstance(exc, KafkatxnError):
            raise
        return
    if acted.ended is not None:
        item.outcome, item.reason = acted.ended, acted.reason
        audit.result(action_id, remedy.name, target, item.outcome.value, acted.state, item.reason)
        return
    verdict, state_after = remedy.verify(cluster, item)
    item.outcome, item.reason = verdict.outcome, acted.note + verdict.detail
    audit.result(action_id, remedy.name, target, item.outcome.value, state_after, item.reason)
