"""``kafkatxn check``: one status for cron and Nagios/Icinga (``kafkatxn exporter`` is in exporter_cmd)."""

# Annotations evaluated as defined (no __future__ import): the options' Annotated[...] are made once, not
# compiled from their text at every start.
import sys
from typing import Annotated, Optional

import typer

from kafkatxn import collection, defaults
from kafkatxn.cli.options import MaxTransactionTimeout, SparkCheckpoints
from kafkatxn.cli.common import CommandContext, command
from kafkatxn.monitoring_plugin import check_ranges
from kafkatxn.validation import compile_regex
from kafkatxn.errors import UsageError
from kafkatxn.output import terminal_width, wrap_text

THRESHOLDS = "Thresholds (range expressions: N, N:, ~:N, N:M, @N:M; 'none' disables)"
SCOPE = "Scope"


TopicRegex = Annotated[
    Optional[str],
    typer.Option("--topic-regex", metavar="REGEX", help="Only topics matching this regex (searched, not anchored).",
                 rich_help_panel=SCOPE),
]
OnlyLagging = Annotated[
    bool, typer.Option("--only-lagging", help="Metrics: per-partition series only where the LSO lags.", rich_help_panel=SCOPE)
]
PerTopic = Annotated[
    bool, typer.Option("--per-topic", help="Metrics: per-topic LSO lag series instead of per-partition.", rich_help_panel=SCOPE)
]


def gather_snapshot(*args, **kwargs):
    """:func:`kafkatxn.facts_cluster.gather_snapshot`, imported as it is first called: after the
    bootstrap has begun (``Session.connect_ahead``), whose time the import then takes."""
    from kafkatxn import facts_cluster

    return facts_cluster.gather_snapshot(*args, **kwargs)


def _age_range(option: str):
    """A callback: a transaction-age range takes durations with their units (``5m``, ``90s:15m``)."""

    def check_units(value: Optional[str]) -> Optional[str]:
        from kafkatxn.durations import is_bare_number, unit_required

        for end in (value or "").lstrip("@").split(":"):
            if is_bare_number(end.lstrip("~")):
                raise typer.BadParameter(unit_required(end.lstrip("~").strip(), option))
        return value

    return check_units


GroupRegex = Annotated[
    Optional[str],
    typer.Option("--group-regex", metavar="REGEX", help="Group lag: only consumer groups matching this regex (searched).",
                 rich_help_panel=SCOPE),
]


def for_terminal(nagios_text: str, width: int) -> str:
    """The plugin output for a person at a terminal: the same lines wrapped to ``width``, the
    performance data last, after ``|`` (Nagios reads its own one-line form: stdout is no terminal)."""
    first, *details = nagios_text.splitlines()
    status, _, perfdata = first.partition(" | ")
    lines = wrap_text(status, width) + [line for detail in details for line in wrap_text(detail, width)]
    if perfdata:
        lines += wrap_text("| " + perfdata, width)
    return "\n".join(lines) + "\n"


def register(app: typer.Typer) -> None:
    @command(app, "check")
    def check_command(
        ctx: CommandContext,
        lso_lag_warn: Annotated[str, typer.Option("--lso-lag-warn", metavar="RANGE", help="Per-partition LSO lag (messages).",
                                                  rich_help_panel=THRESHOLDS)] = defaults.CHECK_LSO_LAG_WARN,
        lso_lag_crit: Annotated[str, typer.Option("--lso-lag-crit", metavar="RANGE", rich_help_panel=THRESHOLDS)] = defaults.CHECK_LSO_LAG_CRIT,
        txn_age_warn: Annotated[str, typer.Option("--txn-age-warn", metavar="RANGE",
                                                  help="Age of open transactions; durations with a unit (90s, 10m).",
                                                  rich_help_panel=THRESHOLDS, callback=_age_range("--txn-age-warn"))] = defaults.CHECK_TXN_AGE_WARN,
        txn_age_crit: Annotated[str, typer.Option("--txn-age-crit", metavar="RANGE", rich_help_panel=THRESHOLDS,
                                                                  callback=_age_range("--txn-age-crit"))] = defaults.CHECK_TXN_AGE_CRIT,
        producer_ids_warn: Annotated[Optional[str], typer.Option(
            "--producer-ids-warn", metavar="RANGE", help="Active producer ids per broker (producer-state memory).",
            rich_help_panel=THRESHOLDS)] = None,
        producer_ids_crit: Annotated[Optional[str], typer.Option("--producer-ids-crit", metavar="RANGE",
                                                                 rich_help_panel=THRESHOLDS)] = None,
        textfile: Annotated[Optional[str], typer.Option(
            "--textfile", metavar="PATH.prom",
            help="Also write the exporter's metrics here, atomically, for node_exporter's textfile collector.")] = None,
        topic_regex: TopicRegex = None,
        only_lagging: OnlyLagging = False,
        per_topic: PerTopic = False,
        max_transaction_timeout: MaxTransactionTimeout = None,
        groups: Annotated[bool, typer.Option(
            "--groups", help="Also consumer groups (all, or --group-regex): a blocked group is critical; "
            "--group-lag-warn/--group-lag-crit on read_committed lag.", rich_help_panel=SCOPE)] = False,
        group_regex: GroupRegex = None,
        group_lag_warn: Annotated[Optional[str], typer.Option(
            "--group-lag-warn", metavar="RANGE", help="With --groups: read_committed lag per group and partition (messages).",
            rich_help_panel=THRESHOLDS)] = None,
        group_lag_crit: Annotated[Optional[str], typer.Option("--group-lag-crit", metavar="RANGE", rich_help_panel=THRESHOLDS)] = None,
        spark_checkpoints: SparkCheckpoints = None,
    ) -> int:
        """One status line for cron, Nagios/Icinga and runbooks: hanging transactions (critical), LSO lag,
        transaction age, active producer ids. Exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN."""
        ranges = check_ranges(
            lso_lag_warn, lso_lag_crit, txn_age_warn, txn_age_crit, producer_ids_warn, producer_ids_crit,
            group_lag_warn, group_lag_crit,
        )
        groups = groups or group_regex is not None
        if group_regex:
            compile_regex(group_regex, "--group-regex")
        if textfile is not None and not textfile.endswith(".prom"):
            raise UsageError(f"--textfile {textfile!r} must end in .prom (node_exporter reads only *.prom)")
        if topic_regex:
            compile_regex(topic_regex, "--topic-regex")  # a usage error before the cluster is asked
        # The bootstrap goes on on the IO thread while the facade, the pass, what its requests need and
        # the check's decisions are imported.
        ctx.connect_ahead(every_broker=True)  # the pass asks every broker
        cluster = ctx.cluster
        cluster.will_ask("ListOffsets", "DescribeProducers", "ListTransactions", "DescribeTransactions", "FindCoordinator", "Fetch",
                         *(() if max_transaction_timeout is not None else ("DescribeConfigs",)),
                         *(("ListGroups", "OffsetFetch", "DescribeGroups") if groups else ()))
        from kafkatxn import check

        thresholds = check.Thresholds(*ranges)
        spark_checkpoints = spark_checkpoints or ctx.config.spark_checkpoints
        # Without a group lag range, a metrics file or a Spark query, check decides on the held places and
        # the largest lag alone: the 100,000 samples of 5,000 groups are not made.
        held_only = thresholds.group_lag_warn is None and thresholds.group_lag_crit is None and textfile is None \
            and not spark_checkpoints
        with collection.one_shot():
            snapshot = gather_snapshot(cluster, topic_regex, max_transaction_timeout,
                                       groups=groups, group_regex=group_regex,
                                       spark_checkpoints=spark_checkpoints, held_groups_only=held_only)
            result = check.evaluate(snapshot, thresholds)
            if textfile is not None:
                from kafkatxn import exporter, exporter_metrics

                exporter.write_textfile(textfile, snapshot, exporter_metrics.ExportOptions(only_lagging, per_topic))
            if ctx.output == "table":
                text = result.nagios_text()
                sys.stdout.write(for_terminal(text, terminal_width(sys.stdout)) if sys.stdout.isatty() else text)
            else:
                ctx.render(result.report())
            return result.exit_code
