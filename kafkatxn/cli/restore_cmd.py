"""``kafkatxn restore-commit``: write the COMMIT marker a partition lost while its coordinator committed."""

import typer

from kafkatxn import remedy
from kafkatxn.cli.common import CommandContext, command
from kafkatxn.cli.options import MaxTransactionTimeout
from kafkatxn.cli.remedy_cmd import (
    AuditLogOption, DryRunOption, StartOffset, TargetPartition, TargetTopic, YesOption, _confirmer, _finish,
    _open_audit_log,
)
from kafkatxn.errors import UsageError


def register(app: typer.Typer) -> None:
    @command(app, "restore-commit")
    def restore_commit_command(
        ctx: CommandContext,
        topic: TargetTopic = None,
        partition: TargetPartition = None,
        start_offset: StartOffset = None,
        max_transaction_timeout: MaxTransactionTimeout = None,
        yes: YesOption = False,
        dry_run: DryRunOption = False,
        audit_log: AuditLogOption = None,
    ) -> int:
        """Restore a lost COMMIT marker: commit an open transaction its coordinator committed.

        For the transactions `kafkatxn hanging` lists as a lost COMMIT marker (an unclean leader
        election, or the compaction/replication race of Kafka 3.9-4.2, left the partition without
        it). Checks with DescribeProducers that exactly the named transaction is open, and with its
        coordinator's log (__transaction_state, READ needed) that the coordinator committed this
        producer id and epoch with this partition in it; anything else is refused (a hanging one is
        ended with `kafkatxn abort`). Shows the plan and asks (--yes, --dry-run); checks again right
        before writing the marker; then verifies the transaction is gone and the LSO moved. Appends
        intent and result records to the audit log. Exit 0 when done or when there is nothing to
        restore, 3 when refused or not verified.
        """
        if topic is None or partition is None or start_offset is None:
            raise UsageError("name the transaction with --topic, --partition and --start-offset (see `kafkatxn hanging`)")
        target = remedy.AbortTarget(topic, partition, start_offset)
        audit = _open_audit_log(ctx, audit_log, dry_run)
        return _finish(ctx, lambda: remedy.restore_commit(
            ctx.cluster,
            [target],
            max_transaction_timeout_ms=max_transaction_timeout,
            audit=audit,
            confirm=_confirmer(ctx, yes, "Write these COMMIT markers?"),
            dry_run=dry_run,
        ), remedy.AbortRow, audit, "nothing to restore")
