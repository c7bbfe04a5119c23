"""``kafkatxn audit``: transactional-id uniqueness and stability, audited with Spark."""

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import typer

from kafkatxn.cli.options import duration_option
from kafkatxn.cli.common import CommandContext, command
from kafkatxn.errors import UsageError
from kafkatxn.output import Report

INPUT = "Input"
SPARK = "Spark"
RULES = "Rules"


@dataclass(frozen=True)
class SummaryRow:
    finding: str
    severity: str
    count: int


def build_report(result, storm_severity: str = "critical") -> Report:
    facts = {
        "sources": result.sources,
        "records": result.records,
        "transactional_ids": result.transactional_ids,
        "unknown_records": result.unknown_records,
        "corrupt_records": result.corrupt_records,
        "first_record_ms": result.first_record_ms,
        "last_record_ms": result.last_record_ms,
    }
    summary = [
        SummaryRow("shared_id", "critical", len(result.shared_ids)),
        SummaryRow("init_storm", storm_severity, len(result.init_storms)),
        SummaryRow("unstable_ids", "warning", len(result.unstable_ids)),
        SummaryRow("inventory", "warning", len(result.inventory)),
    ]
    return Report(
        facts,
        {
            "summary": summary,
            "shared_ids": result.shared_ids,
            "init_storms": result.init_storms,
            "unstable_ids": result.unstable_ids,
            "families": result.families,
            "inventory": result.inventory,
        },
    )


DEFAULT_ID_EXPIRATION_MS = 7 * 86_400_000  # Kafka's default transactional.id.expiration.ms


def _broker_id_expiration_ms(ctx: CommandContext) -> int | None:
    """The largest transactional.id.expiration.ms the brokers report (None if none said)."""
    configs = ctx.cluster.broker_configs(["transactional.id.expiration.ms"])
    values = [
        int(v.value)
        for per_broker in configs.value.values()
        for name, v in per_broker.items()
        if name == "transactional.id.expiration.ms" and v.value and v.value.isdigit()
    ]
    return max(values) if values else None


def register(app: typer.Typer) -> None:
    @command(app, "audit")
    def audit_command(
        ctx: CommandContext,
        master: Annotated[
            Optional[str],
            typer.Option("--master", metavar="URL", help="Spark master (default local[*], or spark-submit's).", rich_help_panel=SPARK),
        ] = None,
        history: Annotated[
            Optional[list[str]],
            typer.Option("--history", metavar="DIR", help="Captured history directory (repeatable).", rich_help_panel=INPUT),
        ] = None,
        no_live: Annotated[
            bool, typer.Option("--no-live", help="Do not read the cluster's live log.", rich_help_panel=INPUT)
        ] = False,
        inventory: Annotated[
            Optional[str],
            typer.Option("--inventory", metavar="FILE", help="CSV/JSON: application, instance, transactional_id or prefix.", rich_help_panel=INPUT),
        ] = None,
        report: Annotated[
            Optional[str],
            typer.Option("--report", metavar="DIR", help="Write report.json and Parquet (ids, findings) here."),
        ] = None,
        capture: Annotated[
            Optional[str],
            typer.Option("--capture", metavar="DIR", help="First append the live log to this history directory (streaming), then audit it.", rich_help_panel=INPUT),
        ] = None,
        capture_for: Annotated[
            Optional[int],
            duration_option("--for", help="How long --capture runs (default: until caught up).", rich_help_panel=INPUT),
        ] = None,
        min_fences: Annotated[
            int, typer.Option("--min-fences", min=1, help="Fences within --fence-window that make a shared id.", rich_help_panel=RULES)
        ] = 3,
        fence_window: Annotated[
            int, duration_option("--fence-window", help="Window for --min-fences.", rich_help_panel=RULES)
        ] = "10m",
        min_family_size: Annotated[
            int, typer.Option("--min-family-size", min=2, help="Smallest family of ids judged unstable.", rich_help_panel=RULES)
        ] = 5,
        storm_inits: Annotated[
            int, typer.Option("--storm-inits", min=2, help="InitProducerIds within --storm-window that make a re-initialisation storm.", rich_help_panel=RULES)
        ] = 6,
        storm_window: Annotated[
            int, duration_option("--storm-window", help="Window for --storm-inits.", rich_help_panel=RULES)
        ] = "10m",
        storm_factor: Annotated[
            float, typer.Option("--storm-factor", min=1.0, help="A storm also needs this many times the inits of the id's family siblings.", rich_help_panel=RULES)
        ] = 2.0,
        storm_severity: Annotated[
            str, typer.Option("--storm-severity", metavar="critical|warning", help="Severity of a re-initialisation storm.", rich_help_panel=RULES)
        ] = "critical",
        id_expiration: Annotated[
            Optional[int],
            duration_option(
                "--id-expiration",
                help="How long an unused id keeps producer state (default: the brokers' "
                "transactional.id.expiration.ms, or 7d when the cluster is not read).",
                rich_help_panel=RULES,
            ),
        ] = None,
    ) -> int:
        """Audit transactional ids in the transaction log: shared ids, unstable ids, inventory conflicts.

        Reads __transaction_state (one Spark partition per log partition) and/or captured
        histories, on Spark local[*] by default, --master, or spark-submit (kafkatxn/cli/spark_submit.py
        takes the same options). Shared ids (fenced again and again) and re-initialisation storms
        (an id initialised again and again: two instances taking turns, or a crash loop) are
        critical, exit 2 (--storm-severity warning: exit 1); unstable id families (with the
        framework whose naming they match: Kafka Streams, Flink, random per run) and inventory
        conflicts are warnings, exit 1; exit 3 when the log could not be read or PySpark is missing.
        """
        from kafkatxn.audit import rules
        from kafkatxn.audit.job import Inputs, audit, build_session, require_pyspark, under_spark_submit

        if no_live and not history and not capture:
            raise UsageError("--no-live needs --history DIR or --capture DIR: there is nothing else to audit")
        if capture_for is not None and not capture:
            raise UsageError("--for goes with --capture DIR")
        if storm_severity not in (rules.SEVERITY_CRITICAL, rules.SEVERITY_WARNING):
            raise UsageError(f"--storm-severity must be critical or warning, not {storm_severity!r}")
        declarations = rules.read_inventory(inventory) if inventory else None
        capture_ms = capture_for if capture_for is not None else 0
        config = ctx.config if (capture or not no_live) else None
        require_pyspark()
        for h in history or []:  # before Spark starts: a typo is one line at once, not a Spark start-up first
            if not Path(os.path.expanduser(h)).is_dir():
                raise UsageError(f"history directory {h} does not exist")
        if config is not None:
            # Ask the cluster before Spark starts: a refused login or a dead cluster is one line at
            # once, not a Spark start-up followed by the error; and the brokers say how long ids live.
            broker_expiration_ms = _broker_id_expiration_ms(ctx)
            if id_expiration is None:
                id_expiration = broker_expiration_ms
        params = rules.AuditParams(
            min_fences=min_fences,
            fence_window_ms=fence_window,
            min_family_size=min_family_size,
            storm_min_inits=storm_inits,
            storm_window_ms=storm_window,
            storm_family_factor=storm_factor,
            storm_severity=storm_severity,
            id_expiration_ms=id_expiration if id_expiration is not None else DEFAULT_ID_EXPIRATION_MS,
        )
        if not under_spark_submit():  # spark-submit merges our stderr into stdout: keep JSON output clean
            ctx.note(f"kafkatxn: starting Spark on {master or 'local[*]'}")
        spark, created = build_session(master)
        try:
            histories = list(history or [])
            if capture:
                from kafkatxn.audit.capture import capture as run_capture

                done = run_capture(spark, config, capture, capture_ms)
                ctx.note(f"kafkatxn: captured {done.records_captured} records into {done.directory}")
                histories.append(capture)
                config = None  # the capture holds everything the live log had
            inputs = Inputs(config=None if no_live else config, history=histories)
            result = audit(spark, inputs, params, declarations, report)
        finally:
            if created:
                spark.stop()
        if result.unknown_records or result.corrupt_records:
            ctx.note(
                f"kafkatxn: skipped {result.unknown_records} records of unknown versions and "
                f"{result.corrupt_records} corrupt records"
            )
        ctx.render(build_report(result, storm_severity))
        return result.exit_code
