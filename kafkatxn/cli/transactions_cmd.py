"""``kafkatxn transactions list|describe``: transactions as their coordinators see them."""

from typing import Annotated, Optional

import typer

from kafkatxn import transaction_listing
from kafkatxn.cli.options import TransactionalIdOptions, duration_option, merge_transactional_ids
from kafkatxn.cli.common import CommandContext, command, fail_if_missing
from kafkatxn.errors import EXIT_WARNING, INT64_MAX, UsageError

app = typer.Typer(
    help="Transactions as their coordinators see them (ListTransactions, DescribeTransactions).", no_args_is_help=True
)


def _complete_state(incomplete: str) -> list[str]:
    """The states (not file names) for ``--state <TAB>``; the option takes them in any case."""
    return [s for s in transaction_listing.TRANSACTION_STATES if s.lower().startswith(incomplete.lower())]


@command(app, "list")
def list_command(
    ctx: CommandContext,
    state: Annotated[
        Optional[list[str]],
        typer.Option(
            "--state", "-s", metavar="STATE", autocompletion=_complete_state,
            help=f"Only these states (repeatable): {', '.join(transaction_listing.TRANSACTION_STATES)}.",
        ),
    ] = None,
    producer_id: Annotated[
        Optional[list[int]], typer.Option("--producer-id", min=0, max=INT64_MAX, metavar="ID", help="Only these producer ids (repeatable).")
    ] = None,
    min_duration: Annotated[
        Optional[int],
        duration_option(
            "--min-duration",
            help="Only open transactions running longer than this (90s, 10m, 1h).",
        ),
    ] = None,
    pattern: Annotated[
        Optional[str],
        typer.Option("--pattern", metavar="REGEX", help="Only transactional ids the regex matches in full."),
    ] = None,
    describe: Annotated[
        bool,
        typer.Option("--describe", help="Add DescribeTransactions details: epoch, timeout, start, duration, partitions."),
    ] = False,
) -> int | None:
    """Transactional ids on every broker, like kafka-transactions.sh list, with filters.

    The brokers apply --min-duration (ListTransactions v1) and --pattern (v2) where they all
    can; otherwise this client does (--debug says which). Exit 3 when a broker did not answer.
    """
    min_duration_ms = min_duration
    result = transaction_listing.list_transactions(
        ctx.cluster,
        states=state or [],
        producer_ids=producer_id or [],
        min_duration_ms=min_duration_ms,
        pattern=pattern,
        describe=describe,
    )
    for note in result.notes:
        ctx.debug_note(note)
    row_type = transaction_listing.TransactionDetailRow if describe else transaction_listing.TransactionRow
    ctx.render(result.rows, row_type, empty_message="no transactions match", missing=result.missing)
    return fail_if_missing(ctx, result.missing, "transaction list")


@command(app, "describe")
def describe_command(
    ctx: CommandContext,
    transactional_ids: Annotated[Optional[list[str]], typer.Argument(metavar="[TRANSACTIONAL_ID]...", help="Ids to describe.", show_default=False)] = None,
    transactional_id_options: TransactionalIdOptions = None,
) -> int | None:
    """State of each transactional id at its coordinator, like kafka-transactions.sh describe.

    An id the coordinator does not know gets a row with status not_found; the others are still
    shown. Exit 0 when all were found, 1 when some were not found, 3 when a coordinator could not be
    asked.
    """
    transactional_ids = merge_transactional_ids(transactional_ids, transactional_id_options)
    if not transactional_ids:
        raise UsageError("name the transactional ids to describe (as arguments or with --transactional-id)")
    result = transaction_listing.describe_transactions(ctx.cluster, transactional_ids)
    ctx.render(result.rows, transaction_listing.TransactionDetailRow)
    code = fail_if_missing(ctx, result.missing, "transaction descriptions")
    if code is not None:
        return code
    if result.not_found:
        ctx.note(f"kafkatxn: transactional id not found: {', '.join(result.not_found)}")
        return EXIT_WARNING
    return None


@command(app, "history")
def history_command(
    ctx: CommandContext,
    transactional_ids: Annotated[Optional[list[str]], typer.Argument(metavar="[TRANSACTIONAL_ID]...", help="Ids whose history to show.", show_default=False)] = None,
    since: Annotated[Optional[int], duration_option("--since", help="Only records of the last DURATION (1h, 30m; default: the whole log).")] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Then show new records as they are written, until interrupted.")] = False,
    pattern: Annotated[
        Optional[str], typer.Option("--pattern", metavar="REGEX", help="Also the ids the coordinators list that the regex matches in full.")
    ] = None,
    log_topic: Annotated[str, typer.Option("--log-topic", hidden=True, help="Read this topic as the transaction log (a copy of it).")] = "__transaction_state",
) -> int | None:
    """What happened to transactional ids, from their coordinator's log (__transaction_state).

    Reads only the log partitions that own the ids, in this process (no Spark), and shows each
    record: time, state, producer id and epoch, partitions added, timeout, and the events it
    implies: initialised, partitions_added, committed, aborted_by_client, fenced_open_transaction,
    timed_out_by_coordinator, epoch_exhausted, expired, unknown_record. Needs READ on Topic
    __transaction_state. A narrow table leaves out the epoch and more (--wide shows every column).
    Exit 0 when every id has records, 1 when some have none, 3 when a log
    partition could not be read.
    """
    from kafkatxn import facts_history
    from kafkatxn.timeline import HistoryRow
    from kafkatxn.validation import compile_regex

    if not transactional_ids and pattern is None:
        raise UsageError("name the transactional ids (as arguments) or give --pattern REGEX")
    if pattern is not None:
        compile_regex(pattern, "--pattern")
    result = facts_history.read_history(ctx.cluster, transactional_ids or [], pattern, since, topic=log_topic)
    ctx.render(result.rows, HistoryRow, empty_message="no record of these ids in the transaction log", missing=result.missing)
    undecoded = result.counts.unknown_version + result.counts.corrupt
    if undecoded:
        ctx.note(f"kafkatxn: {result.counts.unknown_version} records of unknown versions and {result.counts.corrupt} corrupt records shown as unknown_record")
    code = fail_if_missing(ctx, result.missing, "transaction log")
    if code is not None:
        return code
    if follow:
        return _follow(ctx, result)
    if result.not_found:
        ctx.note(f"kafkatxn: no record in the transaction log for: {', '.join(result.not_found)}")
        return EXIT_WARNING
    return None


def _follow(ctx: CommandContext, result) -> int | None:
    """New rows as they come, each batch rendered alone (json: one object a line), flushed at once."""
    import sys

    from kafkatxn import facts_history
    from kafkatxn.output import render
    from kafkatxn.timeline import HistoryRow

    fmt = "jsonl" if ctx.output == "json" else ctx.output
    sys.stdout.flush()
    try:
        for rows in facts_history.follow(ctx.cluster, result):
            if rows:
                render(rows, fmt, no_headers=True, row_type=HistoryRow, wide=ctx.wide)
                sys.stdout.flush()
    except KeyboardInterrupt:
        return None
    return None


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="transactions")
