"""The ``kafkatxn`` entry point: assembles the command groups and maps every outcome to an exit code."""

from __future__ import annotations

import importlib
import inspect
import logging
import sys
import traceback
from typing import Annotated

import typer

try:  # typer >= 0.20 vendors click; its usage errors are the ones raised
    from typer._click.exceptions import UsageError as ClickUsageError
except ImportError:  # pragma: no cover - older typer on real click
    from click.exceptions import UsageError as ClickUsageError

from kafkatxn import __version__
from kafkatxn.cli.options import shared_parameters
from kafkatxn.errors import EXIT_UNKNOWN, EXIT_USAGE, KafkatxnError
from kafkatxn.redact import redact

app = typer.Typer(
    name="kafkatxn",
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

# Every command module, in the order --help lists them. A module that fails to import is a bug, not
# a missing feature: it raises.
COMMAND_MODULES = (
    "cluster_cmd", "config_cmd", "completion_cmd", "producers_cmd", "transactions_cmd", "lso_cmd",
    "hanging_cmd", "remedy_cmd", "diagnose_cmd", "check_cmd", "exporter_cmd", "audit_cmd",
)


def _register_commands() -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(f"kafkatxn.cli.{name}").register(app)


_register_commands()


def _error(message: str) -> None:
    # One line, whatever the message quotes (a value with a newline in it, a multi-line library error).
    print(f"kafkatxn: error: {' '.join(redact(message).splitlines())}", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
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
        code = EXIT_USAGE
    except typer.Abort:
        _error("aborted; nothing was changed")
        code = EXIT_USAGE
    except KafkatxnError as exc:
        if debug:
            traceback.print_exc()
        _error(str(exc))
        code = exc.exit_code
    except KeyboardInterrupt:
        _error("interrupted")
        code = 130
    except Exception as exc:  # noqa: BLE001 - one line unless --debug
        if debug:
            traceback.print_exc()
        _error(f"unexpected {type(exc).__name__}: {exc} (rerun with --debug for details)")
        code = EXIT_UNKNOWN
    finally:
        logging.shutdown()
    sys.stdout.flush()
    sys.exit(code)
