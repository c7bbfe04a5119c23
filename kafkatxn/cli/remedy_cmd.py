"""``kafkatxn abort`` and ``kafkatxn fence``: the destructive commands."""

import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from kafkatxn import auditlog, remedy
from kafkatxn.cli.options import MaxTransactionTimeout, TransactionalIdOptions, merge_transactional_ids
from kafkatxn.cli.common import CommandContext, command, fail_if_missing
from kafkatxn.errors import INT16_MAX, INT32_MAX, INT64_MAX, UsageError
from kafkatxn.output import render_to_string, terminal_width

TARGET = "Transaction"
SAFETY = "Safety"

YesOption = Annotated[bool, typer.Option("--yes", "-y", help="Act without asking (for scripts).", rich_help_panel=SAFETY)]
DryRunOption = Annotated[bool, typer.Option("--dry-run", help="Only show the plan; change nothing.", rich_help_panel=SAFETY)]
TargetTopic = Annotated[Optional[str], typer.Option("--topic", "-t", metavar="TOPIC", help="Topic of the open transaction.", rich_help_panel=TARGET)]
TargetPartition = Annotated[Optional[int], typer.Option("--partition", "-p", min=0, max=INT32_MAX, metavar="N", help="Partition of the open transaction.", rich_help_panel=TARGET)]
StartOffset = Annotated[
    Optional[int], typer.Option("--start-offset", min=0, max=INT64_MAX, metavar="OFFSET", help="Offset where the transaction starts (see `kafkatxn hanging`).", rich_help_panel=TARGET)
]
AuditLogOption = Annotated[
    Optional[Path],
    typer.Option(
        "--audit-log", metavar="PATH", envvar="KAFKATXN_AUDIT_LOG", rich_help_panel=SAFETY,
        help="JSON-lines audit log to append to (default: $XDG_STATE_HOME/kafkatxn/audit.jsonl).",
    ),
]


def _open_audit_log(ctx: CommandContext, path: Optional[Path], dry_run: bool) -> auditlog.AuditLog:
    log = auditlog.AuditLog(path, bootstrap_servers=ctx.config.bootstrap_servers)
    if dry_run:
        unfinished = auditlog.unfinished_intents(log.records())
    else:
        log.check_writable()  # acting without an audit trail is not an option
        unfinished = log.close_unfinished()
    warning = auditlog.unfinished_warning(log.path, unfinished)
    if warning:
        ctx.note(warning)
    return log


def _confirmer(ctx: CommandContext, yes: bool, question: str):
    def confirm(plan_rows: list[Any]) -> bool:
        ctx.note("Plan:")
        ctx.note(render_to_string(plan_rows, "table", width=terminal_width(sys.stderr)).rstrip())
        if yes:
            return True
        if not sys.stdin.isatty():
            raise UsageError(
                "not acting without confirmation: stdin is not a terminal; pass --yes to act, or --dry-run to only show the plan"
            )
        return typer.confirm(question, default=False, err=True)

    return confirm


def _declined(ctx: CommandContext, act: Any) -> remedy.RemedyResult | None:
    """Run ``act``; a plan answered "n" at the prompt is no error: nothing was changed (exit 0)."""
    try:
        return act()
    except remedy.Declined:
        ctx.note("nothing was changed")
        return None


def _finish(ctx: CommandContext, act: Any, row_type: type, audit: auditlog.AuditLog, empty: str) -> int:
    """Run ``act`` (:func:`_declined`), render its rows and say where the audit log is."""
    result = _declined(ctx, act)
    if result is None:
        return 0
    ctx.render(result.rows, row_type, empty_message=empty, missing=result.missing)
    if result.acted:
        ctx.note(f"audit log: {audit.path}")
    fail_if_missing(ctx, result.missing, "view of the cluster")
    return result.exit_code


def register(app: typer.Typer) -> None:
    @command(app, "abort")
    def abort_command(
        ctx: CommandContext,
        topic: TargetTopic = None,
        partition: TargetPartition = None,
        start_offset: StartOffset = None,
        producer_id: Annotated[Optional[int], typer.Option("--producer-id", min=0, max=INT64_MAX, metavar="ID", help="Explicit form: producer id.", rich_help_panel=TARGET)] = None,
        producer_epoch: Annotated[Optional[int], typer.Option("--producer-epoch", min=0, max=INT16_MAX, metavar="N", help="Explicit form: producer epoch.", rich_help_panel=TARGET)] = None,
        coordinator_epoch: Annotated[
            Optional[int], typer.Option("--coordinator-epoch", min=-1, max=INT32_MAX, metavar="N", help="Explicit form: coordinator epoch for the marker.", rich_help_panel=TARGET)
        ] = None,
        all_hanging: Annotated[
            bool, typer.Option("--all-hanging", help="Abort every hanging transaction `kafkatxn hanging` finds (in --topic, --partition if given).", rich_help_panel=TARGET)
        ] = False,
        max_transaction_timeout: MaxTransactionTimeout = None,
        allow_unknown_outcome: Annotated[
            bool, typer.Option("--allow-unknown-outcome", rich_help_panel=SAFETY, help=(
                "Abort the named transaction even where its coordinator's log no longer shows how it ended "
                "(compacted) or cannot be read: you decide it was not committed."))
        ] = False,
        yes: YesOption = False,
        dry_run: DryRunOption = False,
        audit_log: AuditLogOption = None,
    ) -> int:
        """Abort a hanging transaction by writing an ABORT marker to its partition.

        Checks with DescribeProducers that exactly the named transaction is open, and with its
        coordinator that the coordinator does not track it (a tracked one is ended with
        `kafkatxn fence`) nor committed it (its log, __transaction_state, is read: a lost COMMIT
        marker is restored with `kafkatxn restore-commit`, never aborted); shows the plan and asks (--yes, --dry-run); checks again right before
        writing the marker; then verifies the transaction is gone and the LSO moved. Every abort
        appends intent and result records to the audit log. Exit 0 when done or when there is
        nothing to abort, 3 when refused (the state does not match) or not verified.
        """
        explicit = any(v is not None for v in (start_offset, producer_id, producer_epoch, coordinator_epoch))
        if all_hanging and explicit:
            raise UsageError("--all-hanging takes no --start-offset or producer options (--topic and --partition narrow it)")
        if all_hanging and partition is not None and topic is None:
            raise UsageError("--partition with --all-hanging needs --topic")
        targets = []
        if not all_hanging:
            if topic is None or partition is None:
                raise UsageError("name the transaction with --topic and --partition (and --start-offset), or pass --all-hanging")
            # The target checks itself as it is made (kafkatxn.remedy.decide.validate_target), before the audit log is opened.
            targets.append(remedy.AbortTarget(topic, partition, start_offset, producer_id, producer_epoch, coordinator_epoch))
        timeout_ms = max_transaction_timeout
        audit = _open_audit_log(ctx, audit_log, dry_run)
        return _finish(ctx, lambda: remedy.abort(
            ctx.cluster,
            targets,
            all_hanging=all_hanging,
            allow_unknown_outcome=allow_unknown_outcome,
            scope=remedy.HangingScope(topic, partition) if all_hanging else None,
            max_transaction_timeout_ms=timeout_ms,
            audit=audit,
            confirm=_confirmer(ctx, yes, "Write these ABORT markers?"),
            dry_run=dry_run,
        ), remedy.AbortRow, audit, "nothing to abort: no hanging transaction")

    @command(app, "fence")
    def fence_command(
        ctx: CommandContext,
        transactional_ids: Annotated[Optional[list[str]], typer.Argument(metavar="[TRANSACTIONAL_ID]...", help="Transactional ids to fence.", show_default=False)] = None,
        transactional_id_options: TransactionalIdOptions = None,
        pattern: Annotated[
            Optional[str], typer.Option("--pattern", metavar="REGEX", help="Fence every known id the regex matches in full.", rich_help_panel=TARGET)
        ] = None,
        allow_unknown: Annotated[
            bool, typer.Option("--allow-unknown", help="Also fence ids the cluster does not know (this creates them).", rich_help_panel=SAFETY)
        ] = False,
        allow_two_phase_commit: Annotated[
            bool, typer.Option("--allow-two-phase-commit", help="Also fence named ids whose two-phase-commit (KIP-939) transaction is open: this aborts it.", rich_help_panel=SAFETY)
        ] = False,
        yes: YesOption = False,
        dry_run: DryRunOption = False,
        audit_log: AuditLogOption = None,
    ) -> int:
        """Fence transactional ids: bump their epoch, aborting any open transaction.

        The live producer of each id is fenced (its next send or commit fails) and its open
        transaction is aborted by the coordinator. Shows the old and new producer id and epoch.
        Ids the cluster does not know are refused unless --allow-unknown (fencing creates them);
        an open two-phase-commit transaction is refused unless the id is named and
        --allow-two-phase-commit is given (its transaction manager may be about to commit it).
        CONCURRENT_TRANSACTIONS and COORDINATOR_LOAD_IN_PROGRESS are retried within --timeout,
        and the LSO of the partitions the transaction held is read afterwards.
        Shows the plan and asks (--yes, --dry-run); appends intent and result records to the
        audit log. Exit 0 when done, 3 when refused or not verified.
        """
        transactional_ids = merge_transactional_ids(transactional_ids, transactional_id_options)
        if transactional_ids and pattern is not None:
            raise UsageError("name transactional ids or pass --pattern, not both")
        if not transactional_ids and pattern is None:
            raise UsageError("name the transactional ids to fence, or pass --pattern REGEX")
        if pattern is not None:
            remedy.matching_ids([], pattern)  # a bad regex is a usage error before connecting
        audit = _open_audit_log(ctx, audit_log, dry_run)
        return _finish(ctx, lambda: remedy.fence(
            ctx.cluster,
            transactional_ids or [],
            pattern=pattern,
            allow_unknown=allow_unknown,
            allow_two_phase_commit=allow_two_phase_commit,
            audit=audit,
            confirm=_confirmer(ctx, yes, "Fence these transactional ids?"),
            dry_run=dry_run,
        ), remedy.FenceRow, audit, "nothing to fence: no transactional id matches")
