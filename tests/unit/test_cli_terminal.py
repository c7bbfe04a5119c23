"""Made for a terminal, without a terminal: every command on one cluster state (the shared fake,
with a hanging and a long-running transaction) at 80 and 120 columns, no line wider, no suggested
command split across lines; durations with units; did-you-mean; 'n' at a prompt; check's UNKNOWN.
tests/integration/test_terminal.py does the same in a real terminal (tmux) on real brokers."""

from __future__ import annotations

import io
import json
import re
import sys
import time
from typing import ClassVar

import pytest
import typer

from kafkatxn import output
from kafkatxn.cli import app as app_mod
from kafkatxn.cli.common import CommandContext
from tests.support.cli_helpers import run_cli
from tests.support.fake_kafka import FakeCluster, KafkaModel
from kafkatxn.model import ProducerState, TopicPartition, TransactionDescription

# Every command that reads the cluster, as an on-call engineer would run it.
COMMAND_LINES = (
    ["cluster"], ["producers"], ["producers", "--summary"], ["transactions", "list"],
    ["transactions", "list", "--describe"], ["transactions", "describe", "orders-app-stuck", "payments-writer-eu-central-0001"], ["lso"], ["lso", "--groups"],
    ["diagnose"], ["hanging"], ["check"], ["check", "--groups"], ["abort", "-t", "orders", "-p", "0", "--start-offset", "120", "--dry-run"],
    ["abort", "-t", "orders", "-p", "0", "--start-offset", "10", "--dry-run"],
    ["abort", "--all-hanging", "--dry-run"], ["fence", "orders-app-stuck", "--dry-run"], ["config", "show"],
)
SUGGESTED = re.compile(r"kafkatxn (?:fence|abort|lso|diagnose|hanging)\b[^;`)\n\"]*")


MAX = 900_000


def demo_state() -> KafkaModel:
    """The 3 a.m. page: orders-0 pinned by a transaction its coordinator still tracks (long-running,
    the one `abort` refuses and suggests fencing), orders-1 by one no coordinator knows (hanging),
    a group behind each, and a healthy payments partition with a transaction in flight."""
    now = int(time.time() * 1000)
    m = KafkaModel(brokers=(1, 2, 3))
    m.add_transaction_log([1, 2, 3])
    orders0, orders1, payments = TopicPartition("orders", 0), TopicPartition("orders", 1), TopicPartition("payments-eu-central", 0)
    m.add_partition("orders", 0, leader=1, lso=120, hw=4_000)
    m.add_partition("orders", 1, leader=2, lso=40, hw=990)
    m.add_partition("payments-eu-central", 0, leader=3, lso=77, hw=79)
    m.producers[orders0] = [ProducerState(4001, 2, 17, now - 2 * MAX, 5, 120)]
    m.transactions["orders-app-stuck"] = TransactionDescription(
        "orders-app-stuck", 1, "Ongoing", 4001, 2, MAX, now - 3 * MAX, frozenset([orders0]))
    m.producers[orders1] = [ProducerState(4002, 0, 3, now - 2 * MAX, 1, 40)]
    m.producers[payments] = [ProducerState(4003, 0, 9, now - 500, 1, 77)]
    m.transactions["payments-writer-eu-central-0001"] = TransactionDescription(
        "payments-writer-eu-central-0001", 3, "Ongoing", 4003, 0, 60_000, now - 500, frozenset([payments]))
    m.groups["ledger-consumers"] = {orders0: 120}
    m.groups["billing"] = {orders1: 40}
    return m


@pytest.fixture
def fake(monkeypatch, tmp_path):
    cluster = FakeCluster(demo_state())
    monkeypatch.setattr(CommandContext, "cluster", property(lambda self: cluster))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    return cluster


def run(capsys, *args: str):
    return run_cli(capsys, *args, "-b", "fake:9092")


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("line", COMMAND_LINES, ids=" ".join)
def test_every_command_fits_the_terminal_and_keeps_commands_whole(capsys, monkeypatch, fake, columns, line):
    monkeypatch.setenv("COLUMNS", str(columns))
    with monkeypatch.context() as tty:  # as at a terminal: its width (COLUMNS), check's terminal form
        tty.setattr(sys.stdout, "isatty", lambda: True)
        shown = run(capsys, *line)
    assert shown.code in (0, 1, 2, 3), shown.stderr
    lines = shown.stdout.splitlines()
    assert lines, shown.stderr
    assert [x for x in lines if len(x) > columns] == []
    # A command the output suggests (its JSON has it whole) is whole on one line of the table.
    structured = run(capsys, *line, "-o", "json").stdout
    assert not [x for x in lines if re.search(r"\bkafkatxn$", x.rstrip())]  # never split right after the program name
    if line[0] in ("abort", "fence"):  # a suggested command is never in a cell: it is alone on its line
        unquoted = [re.sub(r"`kafkatxn [^`]*`", "", x) for x in lines]  # a quoted reference stays in its cell, whole
        assert all(x.strip().startswith("kafkatxn ") for x in unquoted if "kafkatxn " in x), shown.stdout
        assert not [x for x in lines if x.count("`") % 2], shown.stdout
    for command in {m.group(0).rstrip(" '.") for m in SUGGESTED.finditer(structured)}:
        if " ".join(command.split()[:2]) in shown.stdout or line[0] == "diagnose":  # shown (not in a dropped column)
            assert any(command in x for x in lines), (command, shown.stdout)


def test_a_command_in_a_reason_is_printed_below_the_table_on_its_own_line():
    @typing_free_row
    class Outcome:
        topic: str
        reason: str

    text = output.render_to_string(
        [Outcome("orders", "its coordinator still tracks it and will complete it; to end it now: kafkatxn fence 'orders-app-stuck'")],
        "table", width=60)
    assert "kafkatxn" not in "\n".join(text.splitlines()[:-1])  # not in any cell
    assert re.search(r"now:\s+\[1\]", text)  # the cell points at it
    lines = text.splitlines()
    assert lines[-2:] == ["[1]:", "  kafkatxn fence 'orders-app-stuck'"]
    assert all(len(x) <= 60 for x in lines)
    # Structured output keeps the reason as the library wrote it.
    assert json.loads(output.render_to_string([Outcome("o", "x: kafkatxn fence 'a'")], "json"))[0]["reason"] == "x: kafkatxn fence 'a'"


def typing_free_row(cls):
    from dataclasses import dataclass

    return dataclass(frozen=True)(cls)


def test_width_is_the_terminals_then_columns_then_120(monkeypatch):
    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.delenv("COLUMNS", raising=False)
    assert output.terminal_width(io.StringIO()) == 120
    monkeypatch.setattr(output.shutil, "get_terminal_size", lambda fallback: __import__("os").terminal_size((87, 30)))
    assert output.terminal_width(Tty()) == 87
    monkeypatch.setenv("COLUMNS", "80")
    assert output.terminal_width(io.StringIO()) == 80
    monkeypatch.setenv("COLUMNS", "junk")
    assert output.terminal_width(io.StringIO()) == 120


def test_narrow_tables_drop_secondary_columns_then_abbreviate_headers_then_wrap_only_inside_cells():
    @typing_free_row
    class Row:
        topic: str
        partition: int
        producer_id: int
        last_sequence: int
        transactional_id: str
        reason: str

    rows = [Row("orders-" + "x" * 20, i, 1000 + i, 41, f"payments-writer-{i:04d}-" + "y" * 20,
                "coordinator does not track this partition") for i in range(2)]
    at_120 = output.render_to_string(rows, "table", width=120).splitlines()[0].split()
    at_80 = output.render_to_string(rows, "table", width=80)
    assert "producer_id" in at_120 and "last_sequence" not in at_120
    header = at_80.splitlines()[0].split()
    assert {"topic", "pid", "txn_id", "reason"} <= set(header)  # abbreviated, still there
    assert all(len(x) <= 80 for x in at_80.splitlines())


@pytest.mark.parametrize("option_line", [
    ["hanging", "--max-transaction-timeout", "15"],
    ["abort", "--all-hanging", "--max-transaction-timeout", "15"],
    ["transactions", "list", "--min-duration", "90"],
    ["transactions", "history", "some-id", "--since", "1"],
    ["lso", "--critical-age", "60"],
    ["lso", "--interval", "2"],
    ["exporter", "--cache-ttl", "10"],
    ["audit", "--fence-window", "10"],
    ["check", "--txn-age-warn", "300"],
    ["check", "--txn-age-crit", "@60:900"],
    ["cluster", "--timeout", "30"],
])
def test_every_duration_option_refuses_a_bare_number(capsys, option_line):
    result = run_cli(capsys, *option_line, "-b", "fake:9092")
    assert result.code == 64
    assert len(result.stderr.strip().splitlines()) == 1
    option = next(w for w in option_line if w.startswith("--") and w not in ("--all-hanging",))
    assert option in result.stderr and "give a unit" in result.stderr
    if option == "--max-transaction-timeout":
        assert "15m is Kafka's tool's meaning" in result.stderr and "minutes" in result.stderr


def test_every_duration_option_is_covered_above():
    durations = {p.opts[0] for cmd in app_mod.leaf_commands().values() for p in cmd.params if p.metavar == "DURATION"}
    covered = {"--max-transaction-timeout", "--min-duration", "--critical-age", "--interval", "--cache-ttl", "--fence-window",
               "--timeout", "--since"}
    others = {"--scrape-timeout", "--for", "--storm-window", "--id-expiration"}
    assert durations <= covered | others, durations - covered - others


@pytest.mark.parametrize("line", COMMAND_LINES, ids=" ".join)
def test_machine_output_keeps_durations_as_integers_under_ms_keys(capsys, fake, line):
    result = run(capsys, *line, "-o", "json")
    if line[0] == "check" or not result.stdout.strip():
        return
    doc = json.loads(result.stdout)

    def walk(value, key=""):
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, k)
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        else:
            if key.endswith("_ms"):
                assert value is None or (isinstance(value, int) and not isinstance(value, bool)), (key, value)
            if isinstance(value, str):
                assert not re.fullmatch(r"-?\d+(?:ms|s|m\d\ds|h\d\dm|d\d\dh)", value), (key, value)  # no "6m40s"

    walk(doc)


def test_a_mistyped_command_gets_did_you_mean(capsys):
    result = run_cli(capsys, "transaction", "list")
    assert result.code == 64 and "Did you mean 'transactions'?" in result.stderr
    result = run_cli(capsys, "transactions", "lsit")
    assert result.code == 64 and "Did you mean 'list'?" in result.stderr


def test_answering_n_at_the_prompt_changes_nothing_and_exits_0(capsys, monkeypatch, fake):
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr(typer, "confirm", lambda *a, **k: False)
    result = run(capsys, "abort", "--all-hanging")
    assert result.code == 0, result.stderr
    assert "nothing was changed" in result.stderr
    result = run(capsys, "fence", "orders-app-stuck")
    assert result.code == 0 and "nothing was changed" in result.stderr


@pytest.mark.parametrize("args", [["--lso-lag-warn", "abc"], ["--txn-age-crit", "15"], ["--topic-regex", "("]])
def test_check_with_a_bad_threshold_prints_a_nagios_unknown_line(capsys, args):
    result = run_cli(capsys, "check", *args, "-b", "fake:9092")
    assert result.code == 64
    assert result.stdout.startswith("KAFKATXN UNKNOWN - ") and len(result.stdout.splitlines()) == 1
    as_json = run_cli(capsys, "check", *args, "-b", "fake:9092", "-o", "json")
    assert as_json.stdout == ""  # a json reader gets no status line to choke on


@pytest.mark.parametrize("line, needed", [
    (["hanging"], ["start_offset"]),  # abort --start-offset takes it
    (["lso", "--groups"], ["committed", "lso", "hw", "lag"]),
    (["lso"], ["hw", "lso", "lag"]),
])
def test_at_80_columns_the_columns_to_act_on_stay_and_the_hidden_ones_are_named(capsys, monkeypatch, fake, line, needed):
    monkeypatch.setenv("COLUMNS", "80")
    shown = run(capsys, *line)
    header = next(x for x in shown.stdout.splitlines() if x.startswith("topic") or x.startswith("group")).split()
    assert set(needed) <= set(header), shown.stdout
    rows = {(r["topic"], r.get("part") or r.get("partition")): r for r in parse_records_of(shown.stdout)}
    if line == ["hanging"]:
        assert rows[("orders", "1")]["start_offset"] == "40"
    # What was left out is named, with the way to see it.
    note = " ".join(shown.stdout.split("(left out to fit 80 columns: ", 1)[1].split())
    assert "--wide shows them" in note and "txn_age" in note, shown.stdout
    wide = run(capsys, *line, "--wide")
    assert "left out" not in wide.stdout and "txn_age" in wide.stdout


def parse_records_of(stdout: str) -> list[dict[str, str]]:
    from tests.support.cli_helpers import parse_table

    lines = stdout.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith(("topic", "group")))
    return parse_table("\n".join(lines[start:]))


def test_the_columns_a_row_type_keeps_are_declared_on_it_and_no_headers_tables_carry_no_note():
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Row:
        TABLE_KEEPS: ClassVar[tuple[str, ...]] = ("offset_to_act_on",)
        topic: str
        partition: int
        offset_to_act_on: int
        something_else: str
        reason: str

    rows = [Row("orders-" + "x" * 20, 0, 123456, "y" * 30, "coordinator does not track this partition")]
    text = output.render_to_string(rows, "table", width=70)
    assert "offset_to_act_on" in text.splitlines()[0] and "123456" in text
    assert text.splitlines()[-1] == "(left out to fit 70 columns: something_else; --wide shows them)"
    assert "left out" not in output.render_to_string(rows, "table", width=70, no_headers=True)
    assert "something_else" in output.render_to_string(rows, "table", width=70, wide=True)


@pytest.mark.parametrize("line, table", [
    (["hanging"], "HANGING"),
    (["abort", "--all-hanging", "--dry-run"], None),
    (["lso", "--groups", "billing"], None),
    (["producers", "--topic", "orders", "--partition", "1"], None),
])
def test_an_incomplete_answer_never_renders_as_an_empty_verdict_table(capsys, monkeypatch, fake, line, table):
    """Broker 2 (orders-1's leader, where the hanging transaction is) does not answer."""
    fake.model.down.add(2)
    shown = run(capsys, *line, "--timeout", "2s")
    assert shown.code == 3, shown.stderr
    lines = shown.stdout.splitlines()
    said = lines[lines.index(table) + 1] if table else lines[0]
    assert re.fullmatch(r"not determined \(\d+ parts? missing, see below\)", said), shown.stdout
    assert "(none)" not in shown.stdout and "nothing" not in shown.stdout and "no " not in shown.stdout
    assert "timed out" in shown.stderr  # what "below" points at
