"""``kafkatxn diagnose``: from a stopped read_committed consumer group to the command that fixes it."""

import textwrap
import time
from typing import Annotated, Optional

import typer

from kafkatxn import diagnose, lso
from kafkatxn.cli.common import CommandContext, command, incomplete_note
from kafkatxn.cli.options import MaxTransactionTimeout, ProbeMaxGap, Topics
from kafkatxn.output import render_to_string
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
        probe_max_gap: ProbeMaxGap = lso.DEFAULT_PROBE_MAX_GAP,
        max_transaction_timeout: MaxTransactionTimeout = None,
    ) -> int:
        """Why has my read_committed consumer group stopped, and what do I do?

        Per group and partition: committed offset, LSO, high watermark, messages behind, and whether
        the gap is real lag, phantom lag (transaction markers, aborted records) or a block behind an
        open transaction. Per pinning transaction: who holds it, its coordinator's state, age,
        timeout, the `hanging` verdict, every group and partition it holds, and the next step as a
        command to copy, with its risk. Exit 0 nothing blocked or lagging; 1 lagging, or blocked
        within timeouts; 2 blocked by a hanging or overdue transaction; 3 undetermined.
        """
        for topic in topics or []:
            check_topic_name(topic)  # a name that cannot exist is a usage error before any request
        result = diagnose.run(ctx.cluster, groups, topics, probe_max_gap, max_transaction_timeout)
        if ctx.output == "table":
            print(text_report(result, ctx.wide), end="")
        else:
            ctx.render(result.report())
        if result.missing:
            ctx.note(incomplete_note(result.missing, "answer"))
        return result.exit_code


WIDTH = 120


def _field(label: str, text: str) -> list[str]:
    """``  label        text``, wrapped to the terminal width with the text's column kept
    (commands, which start with ``$``, are never broken)."""
    head = f"  {label:<12} "
    if text.startswith("$"):
        return [head + text]
    return textwrap.wrap(text, WIDTH, initial_indent=head, subsequent_indent=" " * len(head), break_on_hyphens=False)


def _local(ms: int | None) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ms / 1000)) if ms is not None else ""


def text_report(d: diagnose.Diagnosis, wide: bool = False) -> str:
    """What people read: groups, the partitions that need attention, each pinning transaction and its next step."""
    out = [d.summary, ""]
    if d.groups:
        out.append(render_to_string(d.groups, "table", wide=wide).rstrip("\n"))
        out.append("")
    shown = [p for p in d.partitions if p.gap is not diagnose.Gap.none]
    if shown:
        from tabulate import tabulate

        lines = tabulate(
            [[p.group, f"{p.topic}-{p.partition}", p.committed_offset, p.last_stable_offset, p.high_watermark,
              p.lag_messages, p.lag_to_hw_messages, p.gap.value] for p in shown],
            headers=["group", "partition", "committed", "lso", "hw", "lag", "lag_to_hw", "gap"],
            tablefmt="simple", disable_numparse=True,
        ).splitlines()
        out.extend(lines[:2])
        for line, p in zip(lines[2:], shown):
            out.append(line)
            out.extend(textwrap.wrap(p.explanation, WIDTH, initial_indent="    ", subsequent_indent="      "))
        out.append("")
    for t in d.transactions:
        name = t.transactional_id or f"producer {t.producer_id} (no transactional id)"
        out.append(f"TRANSACTION {name}  producer {t.producer_id} epoch {t.producer_epoch}")
        out += _field("verdict", f"{t.verdict.value}: {t.reason}")
        if t.coordinator_id is not None:
            out += _field("coordinator", f"broker {t.coordinator_id}, state {t.coordinator_state}")
        age = format_duration_ms(t.age_ms) if t.age_ms is not None else "unknown to a coordinator"
        timing = f"{age}; last write {format_duration_ms(t.last_write_age_ms)} ago"
        if t.transaction_timeout_ms is not None:
            timing += f"; timeout {format_duration_ms(t.transaction_timeout_ms)}"
        if t.aborts_at_ms is not None:
            timing += f"; the coordinator aborts it at {_local(t.aborts_at_ms)}"
        out += _field("age", timing)
        out += _field("holds", f"{', '.join(t.groups)} on {', '.join(t.partitions)} (LSO lag {t.lso_lag_messages})")
        if t.action is diagnose.Action.wait and t.until_ms is not None:
            out += _field("next step", f"wait until {_local(t.until_ms)}; watch it with")
            out += _field("", f"$ {t.command}")
        elif t.action is diagnose.Action.undecided:
            out += _field("next step", t.command)
        else:
            out += _field("next step", f"$ {t.command}")
        out += _field("risk", t.risk)
        if t.release_command:
            out += _field("release now", f"$ {t.release_command}")
            out += _field("its risk", diagnose.RISK[diagnose.Action.fence])
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"
