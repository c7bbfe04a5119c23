"""``kafkatxn hanging``.

No ``from __future__ import annotations`` here: typer must see the real ``Annotated`` options
through the signature that ``cli.common.command`` rebuilds.
"""

from typing import Annotated, Optional

import typer

from kafkatxn import hanging
from kafkatxn.cli.common import CommandContext, command, fail_if_missing
from kafkatxn.durations import parse_duration_ms
from kafkatxn.errors import EXIT_CRITICAL, EXIT_OK, EXIT_UNKNOWN, EXIT_WARNING, INT32_MAX

SELECT = "Selection"


def register(app: typer.Typer) -> None:
    @command(app, "hanging")
    def hanging_command(
        ctx: CommandContext,
        broker_id: Annotated[
            Optional[int],
            typer.Option("--broker-id", min=0, max=INT32_MAX, metavar="ID", help="Only partitions with a replica on this broker, asking it.", rich_help_panel=SELECT),
        ] = None,
        topic: Annotated[
            Optional[list[str]],
            typer.Option("--topic", "-t", metavar="TOPIC", help="Only these topics (repeatable).", rich_help_panel=SELECT),
        ] = None,
        partition: Annotated[
            Optional[int],
            typer.Option("--partition", "-p", min=0, max=INT32_MAX, metavar="N", help="Only this partition of the one --topic.", rich_help_panel=SELECT),
        ] = None,
        max_transaction_timeout: Annotated[
            Optional[str],
            typer.Option(
                "--max-transaction-timeout", metavar="DURATION",
                help="Open transactions idle longer than this are checked with their coordinator "
                "(default: the brokers' transaction.max.timeout.ms).",
            ),
        ] = None,
    ) -> int:
        """Find hanging transactions: open on a partition, but not tracked by their coordinator.

        Such a transaction is never completed: the partition's last stable offset stays pinned and
        read_committed consumers stall. With no selection the whole cluster is scanned, internal
        topics included. Transactions whose coordinator still tracks them although they are past
        the maximum timeout are listed as long-running (also while their coordinator completes them,
        and two-phase-commit transactions). A candidate is hanging only when every coordinator that
        could own its transactional id answered; otherwise it is listed as undetermined, with the
        part that did not answer. Exit 2 when any transaction hangs, 3 when any is undetermined or
        part of the cluster did not answer, 1 when only long-running ones are found.
        Release a hanging transaction with `kafkatxn abort`.
        """
        timeout_ms = parse_duration_ms(max_transaction_timeout) if max_transaction_timeout is not None else None
        result = hanging.find_hanging(
            ctx.cluster,
            broker_id=broker_id,
            topics=topic,
            partition=partition,
            max_transaction_timeout_ms=timeout_ms,
        )
        ctx.render(result.report())
        for row in result.undetermined:
            ctx.note(
                f"undetermined: producer {row.producer_id} on {row.topic}-{row.partition} from offset {row.start_offset}: "
                f"{row.reason}"
            )
        incomplete = fail_if_missing(ctx, result.missing, "scan for hanging transactions")
        if result.hanging:
            return EXIT_CRITICAL  # a found hanging transaction outweighs parts that did not answer
        if incomplete is not None or result.undetermined:
            return EXIT_UNKNOWN
        return EXIT_WARNING if result.long_running else EXIT_OK
