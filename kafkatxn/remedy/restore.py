"""Restore a lost COMMIT marker: a COMMIT marker (WriteTxnMarkers) on the partition of a transaction
its coordinator committed (:mod:`kafkatxn.lost_commit`: the coordinator's log shows ``PrepareCommit``
of that producer id and epoch with this partition in it) while the partition never got the marker
(an unclean leader election, the compaction/replication race of Kafka 3.9-4.2).

Abort's path, step for step (:class:`kafkatxn.remedy.abort.Abort`: the named transaction must be
open; plan, confirm, recheck with the coordinator and its log right before acting, audit intent,
marker to the partition's leader, verify the LSO moved past its start, audit result), with the other
marker and the opposite coordinator-side rule: only a transaction whose verdict is a lost COMMIT
marker gets one; a hanging one (the log shows an abort, or never this partition) is refused, and so
is one the log cannot tell about.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from kafkatxn import verdicts
from kafkatxn.auditlog import AuditLog
from kafkatxn.errors import InputError
from kafkatxn.remedy.abort import Abort
from kafkatxn.remedy.decide import AbortTarget, Action, Outcome, restore_refusal
from kafkatxn.remedy.driver import Confirm, RemedyResult, run

if TYPE_CHECKING:  # capability modules are handed the facade; they do not import it
    from kafkatxn.kafka import Cluster


class RestoreCommit(Abort):
    name = "restore-commit"
    acting = Action.RESTORE
    commit = True
    done = Outcome.RESTORED
    nothing_to_do = Outcome.NOTHING_TO_RESTORE

    def refusal(self, c: verdicts.Classification) -> str | None:
        return restore_refusal(c)


def restore_commit(
    cluster: Cluster,
    targets: Sequence[AbortTarget],
    *,
    max_transaction_timeout_ms: int | None = None,
    audit: AuditLog,
    confirm: Confirm,
    dry_run: bool = False,
) -> RemedyResult:
    """Plan, confirm, write the COMMIT marker and verify; rows are the plan (dry run, declined) or the outcomes."""
    if not targets:
        raise InputError("name the transaction: {topic}, {partition} and {start_offset}")
    remedy = RestoreCommit(targets, False, None, max_transaction_timeout_ms)
    return run(remedy, cluster, audit=audit, confirm=confirm, dry_run=dry_run)
