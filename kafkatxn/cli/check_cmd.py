"""``kafkatxn check`` (one status for cron and Nagios/Icinga) and ``kafkatxn exporter`` (Prometheus)."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from kafkatxn import check, exporter
from kafkatxn.cli.common import CommandContext, command
from kafkatxn.cluster import check_client_settings, compile_regex
from kafkatxn.durations import parse_duration_ms
from kafkatxn.errors import UsageError

THRESHOLDS = "Thresholds (range expressions: N, N:, ~:N, N:M, @N:M; 'none' disables)"
SCOPE = "Scope"


def _duration_s(text: str, option: str) -> float:
    seconds = parse_duration_ms(text) / 1000
    if seconds <= 0:
        raise UsageError(f"{option} must be more than 0")
    return seconds


def _max_timeout_ms(text: str | None) -> int | None:
    return None if text is None else parse_duration_ms(text)


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
MaxTimeout = Annotated[
    Optional[str],
    typer.Option("--max-transaction-timeout", metavar="DURATION",
                 help="Age past which an open transaction is checked for hanging (default: the brokers' "
                      "transaction.max.timeout.ms).", rich_help_panel=SCOPE),
]


def register(app: typer.Typer) -> None:
    @command(app, "check")
    def check_command(
        ctx: CommandContext,
        lso_lag_warn: Annotated[str, typer.Option("--lso-lag-warn", metavar="RANGE", help="Per-partition LSO lag (messages).",
                                                  rich_help_panel=THRESHOLDS)] = "1000",
        lso_lag_crit: Annotated[str, typer.Option("--lso-lag-crit", metavar="RANGE", rich_help_panel=THRESHOLDS)] = "10000",
        txn_age_warn: Annotated[str, typer.Option("--txn-age-warn", metavar="RANGE",
                                                  help="Age of open transactions; durations (90s, 10m) or seconds.",
                                                  rich_help_panel=THRESHOLDS)] = "5m",
        txn_age_crit: Annotated[str, typer.Option("--txn-age-crit", metavar="RANGE", rich_help_panel=THRESHOLDS)] = "15m",
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
        max_transaction_timeout: MaxTimeout = None,
    ) -> int:
        """One status line for cron, Nagios/Icinga and runbooks: hanging transactions (critical), LSO lag,
        transaction age, active producer ids. Exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN."""
        thresholds = check.thresholds_from_options(
            lso_lag_warn, lso_lag_crit, txn_age_warn, txn_age_crit, producer_ids_warn, producer_ids_crit
        )
        if textfile is not None and not textfile.endswith(".prom"):
            raise UsageError(f"--textfile {textfile!r} must end in .prom (node_exporter reads only *.prom)")
        if topic_regex:
            compile_regex(topic_regex, "--topic-regex")  # a usage error before the cluster is asked
        snapshot = check.gather_snapshot(ctx.cluster, topic_regex, _max_timeout_ms(max_transaction_timeout))
        result = check.evaluate(snapshot, thresholds)
        if textfile is not None:
            exporter.write_textfile(textfile, snapshot, exporter.ExportOptions(only_lagging, per_topic))
        if ctx.output == "table":
            sys.stdout.write(result.nagios_text())
        else:
            ctx.render(result.report())
        return result.exit_code

    @command(app, "exporter")
    def exporter_command(
        ctx: CommandContext,
        listen: Annotated[str, typer.Option("--listen", metavar="ADDR:PORT", help="Where to serve /metrics.")] = exporter.DEFAULT_LISTEN,
        cache_ttl: Annotated[str, typer.Option("--cache-ttl", metavar="DURATION",
                                               help="Serve a gathered snapshot to scrapes for this long.")] = "10s",
        scrape_timeout: Annotated[str, typer.Option("--scrape-timeout", metavar="DURATION",
                                                    help="Deadline of one gather; keep it below Prometheus' scrape_timeout.")] = "8s",
        topic_regex: TopicRegex = None,
        only_lagging: OnlyLagging = False,
        per_topic: PerTopic = False,
        max_transaction_timeout: MaxTimeout = None,
        per_family: Annotated[bool, typer.Option(
            "--per-family", help="Transactional-id churn (kafkatxn_transactional_ids, _new) per id family.")] = False,
    ) -> int:
        """Prometheus exporter: LSO lag, transactions, hanging transactions, active producer ids; gathered
        at scrape time with a short cache. Runs until interrupted; kafkatxn_up is 0 while the cluster
        cannot be reached."""
        exporter.parse_listen(listen)  # a bad address is a usage error before anything starts
        # Likewise client settings librdkafka refuses: a scrape could only answer them with HTTP 500.
        check_client_settings(ctx.config)
        cache_ttl_s = parse_duration_ms(cache_ttl) / 1000
        gatherer = exporter.ClusterGatherer(
            ctx.config, _duration_s(scrape_timeout, "--scrape-timeout"), topic_regex,
            _max_timeout_ms(max_transaction_timeout),
        )
        collector = exporter.SnapshotCollector(gatherer, exporter.ExportOptions(only_lagging, per_topic, per_family), cache_ttl_s)
        try:
            exporter.serve(collector, listen, on_ready=lambda url: ctx.note(f"kafkatxn exporter: serving {url}"))
        finally:
            gatherer.close()
        return 0
