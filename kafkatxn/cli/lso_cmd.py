"""``kafkatxn lso``: LastStableOffsetLag per partition, or transaction-aware consumer-group lag."""

import enum
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, Callable, Optional

import typer

from kafkatxn import collection, defaults
from kafkatxn.cli.options import LagThreshold, ProbeMaxGap, SparkCheckpoints, duration_option, parse_duration
from kafkatxn.cli.common import CommandContext, command, incomplete_note
from kafkatxn.errors import EXIT_UNKNOWN, ClusterError, UsageError
from kafkatxn.exitcodes import exit_code
from kafkatxn.model import Missing
from kafkatxn.output import render_to_string

if TYPE_CHECKING:  # imported while the offsets' round trip is in flight (_partition_report)
    from kafkatxn import facts_lso, lso
    from kafkatxn.kafka import Cluster

DEFAULT_INTERVAL = "2s"
CLEAR_SCREEN = "\x1b[H\x1b[2J"


class SortKey(str, enum.Enum):
    lag = "lag"
    age = "age"


class Sample:
    """One measurement, ready to render. (A plain class: a ``@dataclass`` compiles its methods as this
    module is imported, 3.3 M instructions before lso's first request.)"""

    __slots__ = ("rows", "row_type", "exit_code", "missing", "snapshot", "empty_message", "notes")

    def __init__(self, rows: list[Any], row_type: type, exit_code: int, missing: list[Missing],
                 snapshot: "facts_lso.LsoSnapshot", empty_message: str, notes: list[str] | None = None):
        self.rows = rows
        self.row_type = row_type
        self.exit_code = exit_code
        self.missing = missing
        self.snapshot = snapshot
        self.empty_message = empty_message
        self.notes = [] if notes is None else notes



def watch_loop(
    take_sample: Callable[["facts_lso.LsoSnapshot | None"], Sample],
    show: Callable[[int, Sample | None, str | None], None],
    interval_s: float,
    samples: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Sample every ``interval_s`` until ``samples`` are taken (or Ctrl-C); return the last sample's code.

    A sample the cluster could not answer (unreachable, timed out) is shown as an error and the
    watch goes on: the cluster may come back. The previous good snapshot stays the reference for
    ``lso_moved``.
    """
    previous = None  # the last good sample's snapshot
    code = EXIT_UNKNOWN
    number = 0
    try:
        while samples is None or number < samples:
            number += 1
            started = clock()
            try:
                sample = take_sample(previous)
            except ClusterError as exc:
                show(number, None, str(exc))
                code = exc.exit_code
            else:
                show(number, sample, None)
                previous = sample.snapshot
                code = sample.exit_code
            if samples is not None and number >= samples:
                break
            sleep(max(0.0, interval_s - (clock() - started)))
    except KeyboardInterrupt:
        pass
    return code


def register(app: typer.Typer) -> None:
    @command(app, "lso")
    def lso_command(
        ctx: CommandContext,
        group_names: Annotated[
            Optional[list[str]],
            typer.Argument(metavar="GROUP", help="With --groups: the consumer groups (default: every group)."),
        ] = None,
        topics: Annotated[
            Optional[list[str]], typer.Option("--topic", "-t", metavar="TOPIC", help="Only this topic (repeatable).")
        ] = None,
        groups: Annotated[
            bool,
            typer.Option(
                "--groups",
                help="Consumer-group lag against the LSO and the high watermark, with a verdict: "
                "caught_up, lagging, waiting on a transaction in flight, or blocked behind an open transaction (at the LSO, or on the group's __consumer_offsets partition).",
            ),
        ] = False,
        min_lag: Annotated[
            Optional[int],
            typer.Option(
                "--min-lag", min=0, metavar="N",
                help="Only partitions with at least N offsets of LSO lag (default 1); with --groups, rows with "
                "lag_to_lso_messages >= N, blocked rows always (default 0: every row).",
            ),
        ] = None,
        top: Annotated[Optional[int], typer.Option("--top", min=1, metavar="K", help="Show the first K rows only.")] = None,
        sort: Annotated[
            Optional[SortKey],
            typer.Option("--sort", help="lag: largest first (the default without --groups); age: oldest pinning transaction first."),
        ] = None,
        critical_age: Annotated[
            int, duration_option("--critical-age", help="Exit 2 when a pinning (or blocking) transaction is at least this old.")
        ] = defaults.LSO_CRITICAL_AGE,
        probe_max_gap: ProbeMaxGap = defaults.PROBE_MAX_GAP,
        lag_threshold: LagThreshold = defaults.LAG_THRESHOLD,
        watch: Annotated[
            bool, typer.Option("--watch", "-w", help="Refresh until Ctrl-C, showing whether each LSO moved since the previous sample.")
        ] = False,
        interval: Annotated[
            Optional[int],
            duration_option("--interval", "-n", help=f"Time between samples (implies --watch; default {DEFAULT_INTERVAL})."),
        ] = None,
        samples: Annotated[
            Optional[int], typer.Option("--samples", min=1, metavar="N", help="Stop after N samples (implies --watch).")
        ] = None,
        spark_checkpoints: SparkCheckpoints = None,
    ) -> int:
        """Last stable offset lag: per partition, HW - LSO and the open transaction pinning the LSO.

        Exit codes: 0 no lag (no group blocked or lagging by --lag-threshold or more; a group waiting on a
        transaction in flight, tracked by its coordinator within its timeout, is no finding); 1 lag (a group
        lagging by --lag-threshold or more, or blocked);
        2 pinned (or blocked) by a transaction at least --critical-age old, or a group blocked behind a
        hanging transaction, one that lost its COMMIT marker or one past its own timeout; 3 incomplete
        answer, or a pinning transaction whose verdict could not be determined.
        With --watch, the code of the last sample.
        """
        if (group_names or spark_checkpoints) and not groups:
            raise UsageError(f"{'group names (' + ' '.join(group_names) + ')' if group_names else '--spark-checkpoint'} need --groups")
        critical_age_ms = critical_age
        interval_ms = interval if interval is not None else parse_duration(DEFAULT_INTERVAL)
        if interval_ms <= 0:
            raise UsageError("--interval must be more than 0")
        watching = watch or interval is not None or samples is not None
        sort_key = sort.value if sort is not None else (None if groups else "lag")
        if not groups:
            from kafkatxn import selection

            selection.check_selection(topics)  # a usage error sends nothing
            # The bootstrap in flight while the facade, and then kafka-python's ListOffsets module, import.
            ctx.connect_ahead(every_broker=not topics)
        cluster = ctx.cluster

        def take_sample(previous: "facts_lso.LsoSnapshot | None") -> Sample:
            if groups:
                # Only groups are compared with Spark queries: lso alone does not pay for spark_readers.
                from kafkatxn import group_positions, lso, spark_readers

                # A query's position is read before the offsets it is compared with, as a group's commits are.
                # The profile's queries are read beside every group; those given here, beside the groups named.
                specs = spark_checkpoints or ctx.config.spark_checkpoints
                queries, unread = spark_readers.read_checkpoints(specs, cluster.deadline)
                report = lso.group_report(
                    cluster, group_names, topics, min_lag if min_lag is not None else 0, sort_key, top,
                    critical_age_ms, probe_max_gap, watching, previous, lag_threshold,
                    spark_readers.reader_positions(cluster, queries, topics) if specs else None, not spark_checkpoints,
                )
                report.missing[:0] = unread
                report.exit_code = exit_code(report.exit_code, unread)
                report.hints[:0] = spark_readers.query_notes(queries)
                row_type: type = lso.WatchedGroupLag if watching else group_positions.GroupLag
                empty = "no committed offsets" + (f" for group {', '.join(group_names)}" if group_names else
                                                  " of the Spark queries named" if spark_checkpoints else " in any group")
                if report.measured:  # there were rows: the filter removed every one
                    empty = (f"none of the {report.measured} group partitions measured has a lag_to_lso_messages of "
                             f"{min_lag} or more (--min-lag), nor is blocked")
            else:
                least = min_lag if min_lag is not None else 1
                report = _partition_report(cluster, topics, least, sort_key, top, critical_age_ms, watching, previous)
                from kafkatxn import lso  # imported by _partition_report, while its offsets were in flight

                row_type = lso.WatchedPartitionLag if watching else lso.PartitionLag
                empty = f"no partition with a last stable offset lag of {least} or more"
            ctx.debug_note(
                f"{len(report.snapshot.offsets)} partitions measured, {len(report.snapshot.open_transactions)} with LSO lag described"
            )
            # A lost COMMIT marker's next step (restore-commit, never abort), as hanging gives it.
            notes = list(report.hints) + ([incomplete_note(report.missing, "answer")] if report.missing else [])
            return Sample(report.rows, row_type, report.exit_code, report.missing, report.snapshot, empty, notes)

        if not watching:
            with collection.one_shot():
                sample = take_sample(None)
                ctx.render(sample.rows, row_type=sample.row_type, empty_message=sample.empty_message, missing=sample.missing)
                for note in sample.notes:
                    ctx.note(note)
                return sample.exit_code

        is_tty = sys.stdout.isatty()

        def take_watched_sample(previous: "facts_lso.LsoSnapshot | None") -> Sample:
            cluster.restart_deadline()  # every sample gets a whole --timeout of its own
            return take_sample(previous)

        def show(number: int, sample: Sample | None, error: str | None) -> None:
            frame = _frame(ctx, number, interval_ms, sample, error, is_tty)
            sys.stdout.write(frame)
            sys.stdout.flush()
            if not is_tty:
                for line in ([f"kafkatxn: error: {error}"] if error else sample.notes if sample else []):
                    ctx.note(line)

        return watch_loop(take_watched_sample, show, interval_ms / 1000, samples)


def _partition_report(cluster: "Cluster", topics: Sequence[str], *args: Any) -> "lso.LsoReport":
    """``lso.partition_report``, its offsets sent first: in one run, the chosen
    partitions' ListOffsets go down as the snapshot will ask them (``Cluster.stable_and_high_offsets_ahead``,
    in its order; every data partition's from the metadata's columns, ``Cluster.data_offsets_ahead``, their
    TopicPartitions made after the imports), and the library that reads their answers (the fact layer, the verdicts), and while
    they have not answered the protocol modules of the requests after them, are imported while the
    brokers answer, not before."""
    from kafkatxn import selection

    with cluster.one_run():
        selection.check_selection(topics)  # a usage error sends nothing
        cluster.connect_ahead()  # begun already by the command (CommandContext.connect_ahead): a no-op then
        cluster.will_ask("ListOffsets")  # kafka-python's request class, imported here rather than on the IO thread
        if topics:
            partitions, leaders = cluster.select_in_partition_order(topics)
            cluster.stable_and_high_offsets_ahead(partitions, leaders)
        else:  # every data partition: their offsets sent from the metadata's columns, before the partitions are made
            cluster.data_offsets_ahead()
        from kafkatxn import lso

        # What a partition that lags asks next, while the brokers have not answered (none lag, most often: not later).
        cluster.will_ask_while_waiting("DescribeProducers", "ListTransactions", "FindCoordinator", "DescribeTransactions", "Fetch",
                                       "DescribeConfigs")
        cluster.will_read_log_while_waiting()
        if not topics:  # after the imports: their file reads let the IO thread put the round on the wire meanwhile
            partitions, leaders = cluster.select_in_partition_order(topics)
            cluster.stable_and_high_offsets_ahead(partitions, leaders)
        cluster.route_while_waiting()

        return lso.partition_report(cluster, topics, *args, partitions=partitions)


def _frame(ctx: CommandContext, number: int, interval_ms: int, sample: Sample | None, error: str | None, is_tty: bool) -> str:
    """What one sample puts on stdout: on a terminal the whole screen, cleared first; otherwise the
    rows only (table output gets a header line per sample, so pipes stay parseable)."""
    body = ""
    if sample is not None:
        body = render_to_string(
            sample.rows, ctx.output, no_headers=ctx.no_headers, row_type=sample.row_type, empty_message=sample.empty_message,
            wide=ctx.wide, missing=sample.missing,
        )
    if not is_tty:
        if ctx.output == "table" and not ctx.no_headers:
            return f"# {time.strftime('%Y-%m-%dT%H:%M:%S%z')} sample {number}\n{body}"
        return body
    lines = [f"kafkatxn lso  every {interval_ms / 1000:g}s  {time.strftime('%H:%M:%S')}  sample {number}  (Ctrl-C to stop)", ""]
    if error:
        lines.append(f"error: {error}")
    if sample is not None:
        lines.extend(sample.notes)
    return CLEAR_SCREEN + "\n".join(lines) + ("\n" if lines else "") + body
