"""The ``kafkatxn`` entry point: assembles the command groups and maps every outcome to an exit code."""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import traceback
from difflib import get_close_matches
from typing import Annotated

import typer
from typer.core import TyperGroup

try:  # typer >= 0.20 vendors click; its usage errors are the ones raised
    from typer._click.exceptions import UsageError as ClickUsageError
except ImportError:  # pragma: no cover - older typer on real click
    from click.exceptions import UsageError as ClickUsageError

from kafkatxn import collection
from kafkatxn.cli.options import shared_parameters
from kafkatxn.errors import EXIT_UNKNOWN, EXIT_USAGE, InputError, KafkatxnError
from kafkatxn.redact import redact

# Every command: its module and the line `kafkatxn --help` shows for it, in that order. A module is
# imported only when its command runs (or is completed): start-up pays for typer and the shared
# options, not for every command's library. tests/unit/test_startup_imports.py checks each line
# against the command's own help. A module that fails to import is a bug: it raises.
COMMANDS: dict[str, tuple[str, str]] = {
    "cluster": ("cluster_cmd", "Cluster id, controller, brokers, Kafka version, transaction APIs and settings."),
    "completion": ("completion_cmd", "Print the completion script, e.g."),
    "producers": ("producers_cmd", "Active producers per partition: ids, epochs, sequences, last write and its age, open transaction start."),
    "transactions": ("transactions_cmd", "Transactions as their coordinators see them (ListTransactions, DescribeTransactions)."),
    "lso": ("lso_cmd", "Last stable offset lag: per partition, HW - LSO and the open transaction pinning the LSO."),
    "diagnose": ("diagnose_cmd", "Why has my read_committed consumer group (or Spark query: --spark-checkpoint) stopped, and what do I do?"),
    "hanging": ("hanging_cmd", "Find hanging transactions: open on a partition, but not tracked by their coordinator."),
    "abort": ("remedy_cmd", "Abort a hanging transaction by writing an ABORT marker to its partition."),
    "fence": ("remedy_cmd", "Fence transactional ids: bump their epoch, aborting any open transaction."),
    "restore-commit": ("restore_cmd", "Restore a lost COMMIT marker: commit an open transaction its coordinator committed."),
    "check": ("check_cmd", "One status line for cron, Nagios/Icinga and runbooks: hanging transactions (critical), LSO lag, transaction age, active producer ids."),
    "exporter": ("exporter_cmd", "Prometheus exporter: LSO lag, transactions, hanging transactions, active producer ids, consumer-group lag; gathered at scrape time with a short cache."),
    "audit": ("audit_cmd", "Audit transactional ids in the transaction log: shared ids, unstable ids, inventory conflicts."),
    "config": ("config_cmd", "Connection settings: flags > environment > profile."),
}


def load_commands(module_name: str) -> dict:
    """The click commands a command module registers, by name."""
    holder = typer.Typer(rich_markup_mode=None, add_completion=False, pretty_exceptions_enable=False)
    importlib.import_module(f"kafkatxn.cli.{module_name}").register(holder)
    return dict(typer.main.get_group(holder).commands)


class LazyCommands(TyperGroup):
    """The root group: commands come from :data:`COMMANDS`, each module loaded on first use."""

    def list_commands(self, ctx: typer.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: typer.Context, cmd_name: str):
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.commands.update(load_commands(COMMANDS[cmd_name][0]))
        return self.commands.get(cmd_name)

    def resolve_command(self, ctx: typer.Context, args: list[str]):
        """As typer's, with "Did you mean" drawn from every command, loaded or not."""
        try:
            return self._click_resolve_command(ctx, args)
        except ClickUsageError as exc:
            matches = get_close_matches(args[0], list(COMMANDS)) if args else []
            if matches:
                exc.message = f"{exc.message.rstrip('.')}. Did you mean {', '.join(map(repr, matches))}?"
            raise

    def format_commands(self, ctx: typer.Context, formatter) -> None:
        width = formatter.width - 6 - max(map(len, COMMANDS))
        rows = [(name, _short(line, width)) for name, (_module, line) in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def leaf_commands() -> dict[tuple[str, ...], object]:
    """Every runnable command by its path (``("transactions", "list")``), all modules loaded: for tests
    and tools that walk the whole CLI."""
    import typer._click as click

    root = typer.main.get_command(app)
    out: dict[tuple[str, ...], object] = {}

    def walk(cmd, path: tuple[str, ...]) -> None:
        if hasattr(cmd, "list_commands"):
            ctx = click.Context(cmd)
            for name in cmd.list_commands(ctx):
                walk(cmd.get_command(ctx, name), (*path, name))
        else:
            out[path] = cmd

    walk(root, ())
    return out


def _short(line: str, width: int) -> str:
    return line if len(line) <= width else line[: max(width - 3, 1)].rsplit(" ", 1)[0] + "..."


app = typer.Typer(
    name="kafkatxn",
    cls=LazyCommands,
    help="Operations CLI for transactional Apache Kafka clusters.\n\n"
    "Exit codes: 0 ok, 1 findings (warning), 2 critical findings, 3 could not determine, 64 usage error.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)




def _version(value: bool) -> None:
    if value:
        from kafkatxn import __version__

        print(f"kafkatxn {__version__}")
        raise typer.Exit(0)


def root(click_ctx: typer.Context, version: bool = False, **shared: object) -> None:
    """Operations CLI for transactional Apache Kafka clusters."""
    # The shared options given here (before the command) are read by each command from the root
    # context (cli.common.merge_shared); nothing to do now.


root.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [
        inspect.Parameter("click_ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context),
        inspect.Parameter(
            "version", inspect.Parameter.KEYWORD_ONLY, default=False,
            annotation=Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")],
        ),
        *shared_parameters(),
    ]
)
app.callback()(root)

# How the library's inputs are named on this command line (kafkatxn.errors.InputError).
FLAGS = {
    "partition": "--partition", "topic": "--topic", "topic_pattern": "--topic-regex",
    # connection settings (kafkatxn.config)
    "bootstrap_servers": "--bootstrap-server", "command_config": "--command-config", "profile": "--profile",
    "timeout": "--timeout", "overrides": "-X", "ask_password": "--ask-password",
    # abort and fence (kafkatxn.remedy)
    "start_offset": "--start-offset", "producer_id": "--producer-id", "producer_epoch": "--producer-epoch",
    "coordinator_epoch": "--coordinator-epoch", "all_hanging": "--all-hanging", "pattern": "--pattern",
    "allow_two_phase_commit": "--allow-two-phase-commit", "allow_unknown_outcome": "--allow-unknown-outcome",
}


def _error(message: str) -> None:
    # One line, whatever the message quotes (a value with a newline in it, a multi-line library error).
    print(f"kafkatxn: error: {' '.join(redact(message).splitlines())}", file=sys.stderr)


# Root options that take a value: the word after them is not the command.
_VALUED = frozenset({"-b", "--bootstrap-server", "-c", "--command-config", "--profile", "-X", "--property", "--timeout",
                     "-o", "--output"})


def _nagios_unknown(args: list[str], message: str) -> None:
    """``check`` is read by Nagios/Icinga from stdout: an error there is an UNKNOWN status line, not
    an empty status (the exit code stays the documented one)."""
    words = iter(args)
    command, output = None, os.environ.get("KAFKATXN_OUTPUT", "table")
    for word in words:
        if word in ("-o", "--output"):
            output = next(words, output)
        elif word.startswith("--output="):
            output = word.split("=", 1)[1]
        elif word in _VALUED:
            next(words, None)
        elif not word.startswith("-") and command is None:
            command = word
    if command == "check" and output == "table":
        print(f"KAFKATXN UNKNOWN - {' '.join(redact(message).splitlines())}")


def _debug_asked(args: list[str]) -> bool:
    """Whether --debug was given: as the command's options were parsed (``common.DEBUG_PARSED``), or, where an
    error came before they were, the word among the arguments."""
    common = sys.modules.get("kafkatxn.cli.common")
    parsed = common.DEBUG_PARSED[0] if common is not None else None
    return "--debug" in args if parsed is None else parsed


def main(argv: list[str] | None = None) -> None:
    # No cyclic collection while the command's modules import and its parameters are built: the
    # command resumes it as it freezes that heap (common.settle_heap), the finally below otherwise.
    collection.pause_while_starting()
    args = list(sys.argv[1:] if argv is None else argv)
    if "_KAFKATXN_COMPLETE" in os.environ:
        # A completion request from the shell script: typer's shell classes answer it (add_completion=False
        # leaves their set-up to us, and the completion command's module is otherwise loaded lazily).
        from typer._completion_classes import completion_init

        completion_init()
    common = sys.modules.get("kafkatxn.cli.common")
    if common is not None:  # a run before this one in the same process (a test, a caller of main)
        common.DEBUG_PARSED[0] = None
    command = typer.main.get_command(app)
    try:
        result = command.main(args=args, prog_name="kafkatxn", standalone_mode=False)
        code = result if isinstance(result, int) else 0
    except typer.Exit as exc:
        code = exc.exit_code
    except ClickUsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # bare `kafkatxn` or group: show the help
            print(exc.format_message(), file=sys.stderr)
            sys.exit(EXIT_USAGE)
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        _error(exc.format_message() + hint)
        _nagios_unknown(args, "usage error: " + exc.format_message())
        code = EXIT_USAGE
    except typer.Abort:
        _error("aborted; nothing was changed")
        code = EXIT_USAGE
    except KafkatxnError as exc:
        if _debug_asked(args):
            traceback.print_exc()
        _error(exc.worded(FLAGS) if isinstance(exc, InputError) else str(exc))
        _nagios_unknown(args, exc.worded(FLAGS) if isinstance(exc, InputError) else str(exc))
        code = exc.exit_code
    except KeyboardInterrupt:
        _error("interrupted")
        code = 130
    except Exception as exc:  # noqa: BLE001 - one line unless --debug
        if _debug_asked(args):
            traceback.print_exc()
        _error(f"unexpected {type(exc).__name__}: {exc} (rerun with --debug for details)")
        code = EXIT_UNKNOWN
    finally:
        collection.started()
        if "logging" in sys.modules:  # flush the handlers --debug or a Kafka client set up
            sys.modules["logging"].shutdown()
    sys.stdout.flush()
    if argv is None:  # the process's own command line: it ends here
        _leave(code)
    sys.exit(code)


def _leave(code: int) -> None:
    """End the process now that the command's output is flushed: the atexit handlers run, the
    interpreter's teardown (every module's dict cleared, every object of the run freed one by one:
    ~8 ms after an ``lso`` of 30,000 partitions) does not. Not with a Spark session's modules loaded
    (py4j and PySpark stop their JVM at teardown), nor while a thread that is not a daemon still runs
    (the interpreter would wait for it), nor under a profiler or tracer in this process (``python -m
    cProfile -o FILE -m kafkatxn ...`` writes FILE after the command returns: it wrote nothing)."""
    import atexit
    import threading

    if "pyspark" in sys.modules or any(not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        return
    if sys.getprofile() is not None or sys.gettrace() is not None:
        return
    sys.stderr.flush()
    atexit._run_exitfuncs()  # what an interpreter's exit runs before its teardown (logging's shutdown, our gc.freeze)
    os._exit(code)
