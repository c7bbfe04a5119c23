"""``kafkatxn diagnose``: from a stopped read_committed consumer group to the command that fixes it."""

import sys
import textwrap
import time
from typing import Annotated, Optional

import typer

from kafkatxn import diagnose, diagnose_rows, gaps, facts_lso, verdicts_groups
from kafkatxn.cli.common import CommandContext, command, incomplete_note
from kafkatxn.cli.options import LagThreshold, MaxTransactionTimeout, ProbeMaxGap, SparkCheckpoints, SparkWriters, Topics, spark_writers
from kafkatxn.output import render_to_string, table_text, terminal_width
from kafkatxn.durations import format_duration_ms
from kafkatxn.validation import check_topic_name


def register(app: typer.Typer) -> None:
    @command(app, "diagnose")
    def diagnose_command(
        ctx: CommandContext,
        groups: Annotated[
            Optional[list[str]],
            typer.Option("--group", "-g", metavar="GROUP", help="Only this consumer group (repeatable; default: every group)."),
        ] = None,
        topics: Topics = None,
        probe_max_gap: ProbeMaxGap = facts_lso.DEFAULT_PROBE_MAX_GAP,
        max_transaction_timeout: MaxTransactionTimeout = None,
        lag_threshold: LagThreshold = verdicts_groups.DEFAULT_LAG_THRESHOLD,
        spark_checkpoints: SparkCheckpoints = None,
        writers: SparkWriters = None,
    ) -> int:
        """Why has my read_committed consumer group (or Spark query: --spark-checkpoint) stopped, and what do I do?

        Per group and partition: committed offset, LSO, high watermark, messages behind, and whether
        the gap is real lag, phantom lag (transaction markers, aborted records) or a block behind an
        open transaction. Per pinning transaction: who holds it, its coordinator's state, age,
        timeout, the `hanging` verdict, every group and partition it holds, and the next step as a
        command to copy, with its risk. A group whose stable offset fetch answers UNSTABLE_OFFSET_COMMIT is
        blocked by the transaction open on its __consumer_offsets partition. Exit 0 nothing blocked, lagging
        by less than --lag-threshold, or waiting on a transaction in flight (tracked by its coordinator,
        within its timeout); 1 lagging by more, or blocked within timeouts; 2 blocked by a hanging or overdue
        transaction; 3 undetermined.
        """
        for topic in topics or []:
            check_topic_name(topic)  # a name that cannot exist is a usage error before any request
        # The profile's queries are read beside every group; those given here, beside the groups named.
        from_profile = not spark_checkpoints and bool(ctx.config.spark_checkpoints)
        writing = spark_writers(writers, ctx.config.spark_writers)  # a usage error before the cluster is asked
        result = diagnose.run(ctx.cluster, groups, topics, probe_max_gap, max_transaction_timeout, lag_threshold,
                              spark_checkpoints or ctx.config.spark_checkpoints, every_group=from_profile, spark_writers=writing)
        if ctx.output == "table":
            print(text_report(result, ctx.wide, terminal_width(sys.stdout)), end="")
        else:
            ctx.render(result.report())
        if result.missing:
            ctx.note(incomplete_note(result.missing, "answer"))
        return result.exit_code


def _field(label: str, text: str, width: int) -> list[str]:
    """``  label        text``, wrapped to ``width`` with the text's column kept."""
    head = f"  {label:<12} "
    return textwrap.wrap(text, width, initial_indent=head, subsequent_indent=" " * len(head), break_on_hyphens=False)


def _command(label: str, text: str, command: str, width: int) -> list[str]:
    """A command to copy: its label and words, then the command alone on its own line."""
    return _field(label, f"{text}:" if text else "run:", width) + [f"    $ {command}"]


def _local(ms: int | None) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ms / 1000)) if ms is not None else ""


_PARTITION_COLUMNS = ("group", "partition", "committed", "lso", "hw", "lag", "lag_to_hw", "gap")


def text_report(d: diagnose.Diagnosis, wide: bool = False, width: int = 120) -> str:
    """What people read within ``width``: groups, the partitions that need attention, each pinning
    transaction and its next step (commands on lines of their own)."""
    if not d.groups and d.missing:  # nothing was read: the one line on stderr says what to fix
        return ""
    out = textwrap.wrap(d.summary, width) + [""]
    if d.groups:
        out.append(render_to_string(d.groups, "table", wide=wide, width=width).rstrip("\n"))
        out.append("")
    if d.queries:  # the Spark queries among the readers: which query each spark:<name> row is
        out.append(render_to_string(d.queries, "table", wide=wide, width=width).rstrip("\n"))
        out.append("")
    shown = [p for p in d.partitions if p.gap is not gaps.Gap.none]
    if shown:
        cells = [dict(zip(_PARTITION_COLUMNS, (p.group, f"{p.topic}-{p.partition}", p.committed_offset, p.last_stable_offset,
                                               p.high_watermark, p.lag_messages, p.lag_to_hw_messages, p.gap.value)))
                 for p in shown]
        lines = table_text(_PARTITION_COLUMNS, cells, wide=wide, width=width).splitlines()
        explained = [textwrap.wrap(p.explanation, width, initial_indent="    ", subsequent_indent="      ") for p in shown]
        if len(lines) == 2 + len(shown):  # one line per row: each explanation under its row
            out.extend(lines[:2])
            for line, explanation in zip(lines[2:], explained):
                out += [line, *explanation]
        else:
            out += lines + [line for explanation in explained for line in explanation]
        out.append("")
    for t in d.transactions:
        name = t.transactional_id or f"producer {t.producer_id} (no transactional id)"
        out += textwrap.wrap(f"TRANSACTION {name}  producer {t.producer_id} epoch {t.producer_epoch}", width)
        out += _field("verdict", f"{t.verdict.value}: {t.reason}", width)
        if t.coordinator_id is not None:
            out += _field("coordinator", f"broker {t.coordinator_id}, state {t.coordinator_state}", width)
        age = format_duration_ms(t.age_ms) if t.age_ms is not None else "unknown to a coordinator"
        timing = f"{age}; last write {format_duration_ms(t.last_write_age_ms)} ago"
        if t.transaction_timeout_ms is not None:
            timing += f"; timeout {format_duration_ms(t.transaction_timeout_ms)}"
        if t.aborts_at_ms is not None:
            timing += f"; the coordinator aborts it at {_local(t.aborts_at_ms)}"
        out += _field("age", timing, width)
        out += _field("holds", f"{', '.join(t.groups)} on {', '.join(t.partitions)} (LSO lag {t.lso_lag_messages})", width)
        if t.history:
            out += _field("history", t.history, width)
        if t.action is diagnose_rows.Action.wait and t.until_ms is not None:
            out += _command("next step", f"wait until {_local(t.until_ms)}; watch it with", t.command, width)
        elif t.action is diagnose_rows.Action.abort and t.until_ms is not None:
            out += _command("next step", f"from {_local(t.until_ms)}, when it hangs unless it ends, run", t.command, width)
        elif t.action is diagnose_rows.Action.undecided:
            out += _field("next step", t.command, width)
        else:
            out += _command("next step", "", t.command, width)
        out += _field("risk", t.risk, width)
        if t.release_command:
            out += _command("release now", "", t.release_command, width)
            out += _field("its risk", t.release_risk or diagnose_rows.RISK[diagnose_rows.Action.fence], width)
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"
