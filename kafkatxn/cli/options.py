"""Option declarations shared by the commands, and the duration type.

The connection and output options (``-b``, ``-c``, ``--profile``, ``-X``, ``--timeout``, ``-o``,
``--no-headers``, ``--debug``) are declared once here and accepted both before the command (as
Kafka's tools take them: ``kafkatxn --bootstrap-server B lso``) and after it. Selection options that
several commands take (``--topic``, ``--partition``, ``--broker-id``, ``--max-transaction-timeout``)
are declared once too, so they read and validate the same everywhere.
"""

import enum
import inspect
from typing import Annotated, Any, Optional

import typer

from kafkatxn.errors import INT32_MAX, UsageError

CONNECTION = "Connection"
OUTPUT = "Output"
SELECT = "Selection"


def parse_duration(value: Any, option: str | None = None) -> int:
    """``250ms``, ``90s``, ``10m``, ``1h30m``, ``7d`` as milliseconds. A bare number given for an
    ``option`` is refused (which unit would it be? Kafka's tools differ); a bad value is a usage
    error that names the option (typer adds "Invalid value for '--option'")."""
    if isinstance(value, int):
        return value
    from kafkatxn.durations import is_bare_number, parse_duration_ms, unit_required

    if option is not None and is_bare_number(value):
        raise typer.BadParameter(unit_required(value, option))
    try:
        return parse_duration_ms(value)
    except UsageError as exc:
        raise typer.BadParameter(str(exc)) from None


def duration_option(*names: str, help: str, **kwargs: Any) -> Any:
    """A ``typer.Option`` whose value arrives as milliseconds (an int); it takes a unit, always."""
    return typer.Option(*names, parser=lambda value: parse_duration(value, names[0]), metavar="DURATION", help=help, **kwargs)


def check_timeout_unit(value: Optional[str]) -> Optional[str]:
    """``--timeout`` reaches the library as text (profiles may set it too); on the command line and
    in KAFKATXN_TIMEOUT it takes a unit like every other duration."""
    from kafkatxn.durations import is_bare_number, unit_required

    if value is not None and is_bare_number(value):
        raise typer.BadParameter(unit_required(value, "--timeout"))
    return value


Topics = Annotated[
    Optional[list[str]],
    typer.Option("--topic", "-t", metavar="TOPIC", help="Only these topics (repeatable).", rich_help_panel=SELECT),
]
Partition = Annotated[
    Optional[int],
    typer.Option("--partition", "-p", min=0, max=INT32_MAX, metavar="N", help="Only this partition of the one --topic.",
                 rich_help_panel=SELECT),
]
BrokerId = Annotated[
    Optional[int],
    typer.Option("--broker-id", min=0, max=INT32_MAX, metavar="ID",
                 help="Only partitions with a replica on this broker, asking it instead of each leader.", rich_help_panel=SELECT),
]
ProbeMaxGap = Annotated[
    int,
    typer.Option(
        "--probe-max-gap", min=0, metavar="N",
        help="Group lag: read gaps of up to N offsets between a committed offset and the LSO to tell "
        "transaction markers and aborted records from real lag (0: never read).",
    ),
]
LagThreshold = Annotated[
    int,
    typer.Option(
        "--lag-threshold", min=1, metavar="N",
        help="Group lag: a group lagging by fewer than N messages (read_committed lag, per partition) changes no exit "
        "code; the row still says lagging. The default stays quiet for a consumer committing every second "
        "(auto-commit) of a partition taking under 1,000 records a second.",
    ),
]
# kafka-transactions.sh spells it --transactional-id (describe) and --transactionalId
# (force-terminate): runbooks written for Kafka's tool work here unchanged.
SparkCheckpoints = Annotated[
    Optional[list[str]],
    typer.Option("--spark-checkpoint", metavar="[NAME=]PATH",
                 help="A Structured Streaming query's checkpoint (repeatable; local, hdfs://, s3a://, gs://, abfs://): the query "
                 "is a reader beside the groups, its position the Kafka offsets its last committed batch ended at. "
                 "Spark keeps no query name in a checkpoint: NAME= gives one. Given here, groups are read only when named (check: with "
                 "--groups); a profile's spark_checkpoints are read beside every group.",
                 show_default=False),
]
SparkWriters = Annotated[
    Optional[list[str]],
    typer.Option("--spark-writer", metavar="NAME=APPLICATION/QUERY[@LEDGER_TOPIC]",
                 help="The query NAME (--spark-checkpoint NAME=PATH) writes through kafkatxn's exactly-once writer: its "
                 "ledger's last committed batch is shown beside the checkpoint's (repeatable; the ledger topic defaults "
                 "to kafkatxn-spark-ledger).", show_default=False),
]


def spark_writers(specs: list[str] | None, profile: tuple[str, ...] = ()) -> list:
    """``--spark-writer`` values (else the profile's), parsed; a malformed one is a usage error."""
    from kafkatxn import spark_readers

    try:
        return [spark_readers.parse_writer(s) for s in (specs or profile)]
    except ValueError as exc:
        raise UsageError(str(exc)) from None


TransactionalIdOptions = Annotated[
    Optional[list[str]],
    typer.Option("--transactional-id", "--transactionalId", metavar="ID",
                 help="A transactional id, as kafka-transactions.sh takes it (repeatable; same as naming it as an argument).",
                 show_default=False),
]


def merge_transactional_ids(arguments: list[str] | None, options: list[str] | None) -> list[str]:
    """Ids given as arguments and with --transactional-id, in the order given, each once."""
    return list(dict.fromkeys([*(arguments or []), *(options or [])]))


MaxTransactionTimeout = Annotated[
    Optional[int],
    duration_option(
        "--max-transaction-timeout",
        help="Open transactions idle longer than this are checked with their coordinator "
        "(default: the brokers' transaction.max.timeout.ms).",
        rich_help_panel=SELECT,
    ),
]


class OutputFormat(str, enum.Enum):
    table = "table"
    json = "json"
    jsonl = "jsonl"
    csv = "csv"
    tsv = "tsv"



# (parameter name, type, default, the option): the connection and output options of every command.
_SHARED: tuple[tuple[str, Any, Any, Any], ...] = (
    ("bootstrap_server", Optional[str], None, typer.Option(
        "--bootstrap-server", "-b", envvar="KAFKATXN_BOOTSTRAP_SERVERS", metavar="HOST:PORT[,…]",
        help="Brokers to connect to.", rich_help_panel=CONNECTION, show_envvar=True)),
    ("command_config", Optional[str], None, typer.Option(
        "--command-config", "-c", envvar="KAFKATXN_COMMAND_CONFIG", metavar="FILE",
        help="Client properties file (librdkafka or Java --command-config keys).", rich_help_panel=CONNECTION)),
    ("profile", Optional[str], None, typer.Option(
        "--profile", envvar="KAFKATXN_PROFILE", metavar="NAME",
        help="Named profile from ~/.config/kafkatxn/config.toml.", rich_help_panel=CONNECTION)),
    ("property_overrides", Optional[list[str]], None, typer.Option(
        "--property", "-X", metavar="KEY=VALUE", help="Client property, overriding the file (never a secret).",
        rich_help_panel=CONNECTION)),
    ("ask_password", bool, False, typer.Option(
        "--ask-password", help="Prompt for the SASL (or client key) password; never pass secrets with -X.",
        rich_help_panel=CONNECTION)),
    ("timeout", Optional[str], None, typer.Option(
        "--timeout", envvar="KAFKATXN_TIMEOUT", metavar="DURATION",
        help="Deadline for the whole command's network calls (default 30s).", rich_help_panel=CONNECTION,
        callback=check_timeout_unit)),
    ("output", OutputFormat, OutputFormat.table, typer.Option(
        "--output", "-o", envvar="KAFKATXN_OUTPUT", help="Output format.", rich_help_panel=OUTPUT)),
    ("no_headers", bool, False, typer.Option("--no-headers", help="Omit header rows (table, csv, tsv).", rich_help_panel=OUTPUT)),
    ("wide", bool, False, typer.Option(
        "--wide", help="Tables: every column (default: the ones to act on, fitting the terminal).", rich_help_panel=OUTPUT)),
    ("debug", bool, False, typer.Option(
        "--debug", envvar="KAFKATXN_DEBUG", help="Log details and show tracebacks on stderr.", rich_help_panel=OUTPUT)),
)


def shared_parameters() -> list[inspect.Parameter]:
    """The shared options as keyword-only parameters, for a command's (or the root's) signature."""
    return [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[type_, option])
        for name, type_, default, option in _SHARED
    ]


SHARED_NAMES = frozenset(p.name for p in shared_parameters())
