"""``kafkatxn hanging``."""

import typer

from kafkatxn import hanging
from kafkatxn.cli.options import BrokerId, MaxTransactionTimeout, Partition, Topics
from kafkatxn.cli.common import CommandContext, command, fail_if_missing
from kafkatxn.errors import EXIT_CRITICAL, EXIT_OK, EXIT_WARNING


def register(app: typer.Typer) -> None:
    @command(app, "hanging")
    def hanging_command(
        ctx: CommandContext,
        broker_id: BrokerId = None,
        topic: Topics = None,
        partition: Partition = None,
        max_transaction_timeout: MaxTransactionTimeout = None,
    ) -> int:
        """Find hanging transactions: open on a partition, but not tracked by their coordinator.

        Such a transaction is never completed: the partition's last stable offset stays pinned and
        read_committed consumers stall. With no selection the whole cluster is scanned, internal
        topics included. Transactions whose coordinator still tracks them although they are past
        the maximum timeout are listed as long-running. Exit 2 when any transaction hangs, 1 when
        only long-running ones are found, 3 when part of the cluster did not answer.
        Release a hanging transaction with `kafkatxn abort`.
        """
        result = hanging.find_hanging(
            ctx.cluster,
            broker_id=broker_id,
            topics=topic,
            partition=partition,
            max_transaction_timeout_ms=max_transaction_timeout,
        )
        ctx.render(result.report())
        incomplete = fail_if_missing(ctx, result.missing, "scan for hanging transactions")
        if result.hanging:
            return EXIT_CRITICAL  # a found hanging transaction outweighs parts that did not answer
        if incomplete is not None:
            return incomplete
        return EXIT_WARNING if result.long_running else EXIT_OK
