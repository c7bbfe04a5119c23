"""``<command> --help``: the command's own options, its examples, and the shared options named once.

The connection and output options are the same for every command (``kafkatxn --help`` lists them
in full); a command's help names them in one line instead of repeating them.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperCommand

from kafkatxn.cli.options import SHARED_NAMES

SHARED_LINE = ("-b, -c, --profile, -X, --ask-password, --timeout, -o, --no-headers, --wide, --debug: "
               "the same for every command, before or after it; listed in full by")

# Two or three lines to copy per command (each within 80 columns).
EXAMPLES: dict[str, tuple[str, ...]] = {
    "cluster": ("kafkatxn -b kafka:9092 cluster", "kafkatxn -b kafka:9092 cluster -o json"),
    "producers": ("kafkatxn -b kafka:9092 producers --topic orders",
                  "kafkatxn -b kafka:9092 producers --broker-id 1 --wide"),
    "transactions list": ("kafkatxn -b kafka:9092 transactions list --state Ongoing",
                          "kafkatxn -b kafka:9092 transactions list --min-duration 10m --describe",
                          "kafkatxn -b kafka:9092 transactions list --pattern 'orders-.*' -o json"),
    "transactions describe": ("kafkatxn -b kafka:9092 transactions describe orders-app-1",
                              "kafkatxn -b kafka:9092 transactions describe --transactional-id a b"),
    "transactions history": ("kafkatxn -b kafka:9092 transactions history orders-app-1 --since 1h",
                             "kafkatxn -b kafka:9092 transactions history orders-app-1 --follow",
                             "kafkatxn -b kafka:9092 transactions history --pattern 'orders-.*' -o json"),
    "lso": ("kafkatxn -b kafka:9092 lso --topic orders",
            "kafkatxn -b kafka:9092 lso --groups --sort age",
            "kafkatxn -b kafka:9092 lso --topic orders --watch --interval 5s"),
    "diagnose": ("kafkatxn -b kafka:9092 diagnose --group ledger",
                 "kafkatxn -b kafka:9092 diagnose --topic orders -o json"),
    "hanging": ("kafkatxn -b kafka:9092 hanging",
                "kafkatxn -b kafka:9092 hanging --topic orders --max-transaction-timeout 15m",
                "kafkatxn -b kafka:9092 hanging -o csv > hanging.csv"),
    "abort": ("kafkatxn -b kafka:9092 abort -t orders -p 0 --start-offset 42 --dry-run",
              "kafkatxn -b kafka:9092 abort --all-hanging --topic orders"),
    "restore-commit": ("kafkatxn -b kafka:9092 restore-commit -t orders -p 0 --start-offset 42 -y",
                       "kafkatxn restore-commit -t orders -p 0 --start-offset 42 --dry-run"),
    "fence": ("kafkatxn -b kafka:9092 fence orders-app-stuck --dry-run",
              "kafkatxn -b kafka:9092 fence --pattern 'orders-app-.*'"),
    "check": ("kafkatxn -b kafka:9092 check",
              "kafkatxn -b kafka:9092 check --groups --txn-age-warn 5m --txn-age-crit 15m",
              "kafkatxn -b kafka:9092 check --textfile /var/lib/node_exporter/kafkatxn.prom"),
    "exporter": ("kafkatxn -b kafka:9092 exporter --listen :9799",
                 "kafkatxn -b kafka:9092 exporter --group-lag --cache-ttl 15s"),
    "audit": ("kafkatxn -b kafka:9092 audit --inventory apps.csv --report ./audit",
              "kafkatxn -b kafka:9092 audit --capture ./txnlog --for 10m"),
    "config show": ("kafkatxn --profile prod config show", "kafkatxn -c client.properties config show -o json"),
}


class CommandHelp(TyperCommand):
    """A command's help: its own options, then one line for the shared ones, then its examples."""

    def format_options(self, ctx: Any, formatter: Any) -> None:
        rows = [r for p in self.get_params(ctx) if p.name not in SHARED_NAMES for r in [p.get_help_record(ctx)] if r]
        if rows:
            with formatter.section("Options"):
                formatter.write_dl(rows)
        with formatter.section("Connection and output options"):
            formatter.write_text(SHARED_LINE)
            formatter.write(f"{'':>{formatter.current_indent}}kafkatxn --help\n")

    def format_epilog(self, ctx: Any, formatter: Any) -> None:
        super().format_epilog(ctx, formatter)
        examples = EXAMPLES.get(ctx.command_path.split(" ", 1)[-1], ())
        if examples:
            with formatter.section("Examples"):
                for line in examples:
                    formatter.write(f"{'':>{formatter.current_indent}}{line}\n")
