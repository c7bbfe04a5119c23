"""``kafkatxn exporter``: Prometheus metrics of one cluster on /metrics, of any profile on /probe."""

from __future__ import annotations

import faulthandler
import sys
from typing import Annotated, Optional

import typer

from kafkatxn import config as config_mod
from kafkatxn import defaults
from kafkatxn.cli.check_cmd import SCOPE, GroupRegex, OnlyLagging, PerTopic, TopicRegex
from kafkatxn.cli.common import CommandContext, command
from kafkatxn.cli.options import MaxTransactionTimeout, SparkCheckpoints, SparkWriters, duration_option, spark_writers
from kafkatxn.errors import UsageError
from kafkatxn.validation import compile_regex

HTTP = "HTTP"
SHUTDOWN_GRACE_S = 1.0  # beyond the scrape deadline, for a gather to return once its deadline passed
DRAIN_WRITE_S = 5.0  # then for the answer to be made and written (60 MB at 5,000 groups: well under 1 s)


def register(app: typer.Typer) -> None:
    @command(app, "exporter")
    def exporter_command(
        ctx: CommandContext,
        listen: Annotated[str, typer.Option("--listen", metavar="ADDR:PORT", help="Where to serve /metrics and /probe.",
                                            rich_help_panel=HTTP)] = defaults.EXPORTER_LISTEN,
        web_config_file: Annotated[Optional[str], typer.Option(
            "--web-config-file", metavar="PATH",
            help="TLS and basic auth in the Prometheus exporter-toolkit format (node_exporter's web-config.yml); "
                 "read again on every connection.", rich_help_panel=HTTP)] = None,
        cache_ttl: Annotated[int, duration_option(
            "--cache-ttl", help="Serve a gathered snapshot to scrapes for this long (per cluster).")] = defaults.EXPORTER_CACHE_TTL,
        scrape_timeout: Annotated[int, duration_option(
            "--scrape-timeout", help="Deadline of one gather; keep it below Prometheus' scrape_timeout.")] = defaults.EXPORTER_SCRAPE_TIMEOUT,
        topic_regex: TopicRegex = None,
        only_lagging: OnlyLagging = False,
        per_topic: PerTopic = False,
        max_transaction_timeout: MaxTransactionTimeout = None,
        group_lag: Annotated[bool, typer.Option(
            "--group-lag/--no-group-lag", help="Transaction-aware consumer-group lag metrics (kafkatxn_group_*).",
            rich_help_panel=SCOPE)] = True,
        group_regex: GroupRegex = None,
        per_group: Annotated[bool, typer.Option(
            "--per-group", help="Metrics: per-group sums only, no per-partition group series.", rich_help_panel=SCOPE)] = False,
        per_family: Annotated[bool, typer.Option(
            "--per-family", help="Transactional-id churn (kafkatxn_transactional_ids, _new) per id family.",
            rich_help_panel=SCOPE)] = False,
        spark_checkpoints: SparkCheckpoints = None,
        writers: SparkWriters = None,
    ) -> int:
        """Prometheus exporter: LSO lag, transactions, hanging transactions, active producer ids, consumer-group lag; gathered
        at scrape time with a short cache. /metrics serves the cluster given here (-b, --profile, the
        default profile); /probe?profile=NAME serves the cluster of any kafkatxn profile. Runs until
        interrupted; kafkatxn_up is 0 while a cluster cannot be reached."""
        from kafkatxn import exporter, exporter_http, exporter_metrics
        from kafkatxn.kafka import check_client_settings

        # Everything that can be wrong is a usage error before anything listens.
        exporter_http.parse_listen(listen)
        for regex, option in ((topic_regex, "--topic-regex"), (group_regex, "--group-regex")):
            if regex:
                compile_regex(regex, option)  # also in probe-only mode, where no gatherer is made yet
        web_config = exporter_http.WebConfigFile(web_config_file) if web_config_file else None
        if scrape_timeout <= 0:
            raise UsageError("--scrape-timeout must be more than 0")
        cache_ttl_s, scrape_timeout_s = cache_ttl / 1000, scrape_timeout / 1000
        max_timeout_ms = max_transaction_timeout  # milliseconds (options.MaxTransactionTimeout)
        options = exporter_metrics.ExportOptions(only_lagging, per_topic, per_group, per_family)

        given_writers = spark_writers(writers)  # a usage error before anything listens

        def collector_for(config: config_mod.ConnectionConfig):
            # Client settings librdkafka refuses: a scrape could only answer them with HTTP 500.
            check_client_settings(config)
            # /probe?profile=NAME: that profile's queries; /metrics: those given here, else the profile's.
            mine = bool(spark_checkpoints) and config is given
            queries = spark_checkpoints if mine else config.spark_checkpoints
            writing = given_writers if mine and writers else spark_writers(None, config.spark_writers)
            gatherer = exporter.ClusterGatherer(config, scrape_timeout_s, topic_regex, max_timeout_ms, group_lag, group_regex,
                                                queries, writing)
            return exporter.SnapshotCollector(gatherer, options, cache_ttl_s), gatherer.close

        metrics = close_metrics = given = None
        if _cluster_given(ctx):
            given = ctx.config
            metrics, close_metrics = collector_for(given)
        probes = exporter_http.ProbeTargets(lambda name: config_mod.resolve(profile=name), collector_for)
        app = exporter_http.ExporterApp(metrics, probes, web_config)
        exporter.pin_mmap_threshold()  # RSS stays flat over days of scrapes
        # A process that runs for days: if a native library ever crashes it, stderr names the Python
        # stack of every thread (file, line and function only, no values).
        _dump_stacks_on_crash()
        try:
            # Stopped: a scrape under way finishes its gather (bounded by its timeout) and gets its
            # answer before the clients are closed below, from this thread.
            exporter_http.serve(app, listen, on_ready=lambda url: ctx.note(f"kafkatxn exporter: serving {url}"),
                                drain_s=scrape_timeout_s + SHUTDOWN_GRACE_S + DRAIN_WRITE_S)
        finally:
            if close_metrics is not None:
                close_metrics()
            probes.close()
        return 0


def _dump_stacks_on_crash() -> None:
    try:
        faulthandler.enable(sys.__stderr__, all_threads=True)
    except (AttributeError, ValueError, OSError):  # no real stderr (embedded, closed): nothing to write to
        pass


def _cluster_given(ctx: CommandContext) -> bool:
    """Whether /metrics has a cluster: connection flags or variables, or a default profile. Without
    one the exporter only answers /probe (a multi-target exporter needs no cluster of its own)."""
    if any(value is not None for value in (ctx.bootstrap_server, ctx.profile, ctx.command_config)) or ctx.properties:
        return True  # even an empty one: resolving it then says what is wrong
    return config_mod.load_profile(None)[0] is not None
