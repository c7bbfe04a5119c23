"""What every command shares: connection and output options, the context built from them.

Each command is declared with :func:`command`, which adds the shared options to its signature, so
``kafkatxn <command> --bootstrap-server … -o json`` works the same everywhere.
"""

from __future__ import annotations

import atexit
import functools
import gc
import inspect
import sys
import typing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

import typer

from kafkatxn import collection, config as config_mod
from kafkatxn.errors import KafkatxnError
from kafkatxn.exitcodes import exit_code
from kafkatxn.cli.options import SHARED_NAMES, OutputFormat, shared_parameters
from kafkatxn.output import render

if TYPE_CHECKING:
    from kafkatxn.kafka import Cluster
    from kafkatxn.kafka.bootstrap_ahead import BootstrapAhead
    from kafkatxn.model import Missing


@dataclass
class CommandContext:
    """Options shared by all commands, and the cluster they lead to (opened on first use)."""

    bootstrap_server: str | None = None
    command_config: str | None = None
    profile: str | None = None
    timeout: str | None = None
    properties: list[str] = field(default_factory=list)
    ask_password: bool = False
    output: str = "table"
    no_headers: bool = False
    wide: bool = False
    debug: bool = False
    _config: config_mod.ConnectionConfig | None = None
    _cluster: Cluster | None = None
    _ahead: BootstrapAhead | None = None  # begun by connect_ahead before the facade was imported

    @property
    def config(self) -> config_mod.ConnectionConfig:
        if self._config is None:
            self._config = config_mod.resolve(
                bootstrap_servers=self.bootstrap_server,
                command_config=self.command_config,
                profile=self.profile,
                timeout=self.timeout,
                overrides=self.properties,
                ask_password=self.ask_password,
                prompt=terminal_prompt() if self.ask_password else None,
            )
            for warning in self._config.warnings:
                self.note(f"kafkatxn: warning: {warning}")
            _debug_log("connection settings: %s", self._config.masked())
        return self._config

    @property
    def cluster(self) -> Cluster:
        if self._cluster is None:
            collection.pause()  # the Kafka client's modules, imported here: long-lived, as main's start
            try:
                from kafkatxn.kafka import Cluster
            finally:
                collection.resume()
            self._cluster = Cluster(self.config) if self._ahead is None else Cluster(self.config, ahead=self._ahead)
            self._ahead = None
        return self._cluster

    def connect_ahead(self, every_broker: bool = False) -> None:
        """Begin the bootstrap now, on the IO thread, with the wire alone (``kafkatxn.kafka.bootstrap_ahead``):
        the facade, the command's library and what reads the answers import while the broker connects
        and answers. Called once the command's options are checked: a usage or configuration error
        (raised here, as :attr:`config` resolves) still comes before anything is sent. ``every_broker``:
        a command that will ask every broker (no filter narrows it) has the other brokers' connections
        begun as the metadata arrives."""
        if self._ahead is not None:
            return
        config = self.config
        collection.pause()  # the wire's modules: long-lived, as the facade's (cluster)
        try:
            from kafkatxn import kafka
            from kafkatxn.kafka import bootstrap_ahead
        finally:
            collection.resume()
        if self._cluster is not None or "Cluster" in vars(kafka):  # the facade is there already (or a stand-in for it)
            self.cluster.connect_ahead(every_broker)
        else:
            self._ahead = bootstrap_ahead.begin(config, every_broker=every_broker)

    def close(self) -> None:
        if self._ahead is not None and self._ahead.wire is not None:  # begun, and no cluster made to take it
            self._ahead.wire.close()
        self._ahead = None
        if self._cluster is not None:
            self._cluster.close()
            if self.debug:
                counts = ", ".join(f"{k}={v}" for k, v in sorted(self._cluster.requests.items()))
                _debug_log("requests sent: %s", counts or "none")

    def render(self, rows: Any, row_type: type | None = None, empty_message: str | None = None,
               missing: Sequence[Missing] = ()) -> None:
        """``missing``: the parts that did not answer; an empty table then says "not determined"."""
        render(rows, self.output, no_headers=self.no_headers, row_type=row_type, empty_message=empty_message, wide=self.wide,
               missing=missing)

    def note(self, message: str) -> None:
        """A line for people on stderr; kept out of stdout so pipes stay clean."""
        print(message, file=sys.stderr)

    def debug_note(self, message: str) -> None:
        _debug_log(message)




def terminal_prompt() -> config_mod.Prompt | None:
    """How ``--ask-password`` asks: on the terminal, without echo (the prompt on stderr, so a pipe
    on stdout stays clean); None without a terminal, so the library says what to use instead."""
    if not sys.stdin.isatty():
        return None

    def ask(text: str) -> str:
        import getpass  # only --ask-password asks

        return getpass.getpass(text, stream=sys.stderr)

    return ask


def _given_on_command_line(click_ctx: Any, name: str) -> bool:
    source = click_ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def merge_shared(click_ctx: Any, values: dict[str, Any]) -> dict[str, Any]:
    """The shared options of a command, where each one given before the command (at the root, as
    ``kafkatxn -b B lso``) counts unless the same option is given after it. ``-X`` settings from
    both places apply, those after the command last."""
    root = click_ctx.find_root()
    if root is click_ctx:
        return values
    merged = dict(values)
    for name in SHARED_NAMES:
        if name not in root.params or not _given_on_command_line(root, name):
            continue
        if name == "property_overrides":
            merged[name] = list(root.params[name] or []) + list(values.get(name) or [])
        elif not _given_on_command_line(click_ctx, name):
            merged[name] = root.params[name]
    return merged


_HEAP_SETTLED = False


def settle_heap() -> None:
    """Take what the imports built out of the cyclic collector's sight, once per process.

    The modules, classes and protocol tables imported so far live until the process ends, yet
    every full collection walks them again: during a scan that builds tens of thousands of objects
    (``lso`` over 10,000 partitions) and once more at exit, when the interpreter collects before it
    tears the modules down. Frozen (``gc.freeze``), they are skipped. Objects made afterwards are
    collected as always; at exit the collector does not run (the process ends; streams are still
    flushed and atexit handlers still run).
    """
    global _HEAP_SETTLED
    if not _HEAP_SETTLED:
        _HEAP_SETTLED = True
        gc.freeze()
        atexit.register(gc.freeze)  # registered after logging's: runs before its shutdown, harmless either way
    collection.started()  # the collection main paused while the command started runs again


def command(app: typer.Typer, name: str | None = None, **kwargs: Any) -> Callable:
    """Register ``fn(ctx, **own_options)`` as a command with the shared options added.

    The function returns an exit code (or None for 0); errors raise :class:`KafkatxnError`.
    """

    def decorate(fn: Callable[..., int | None]) -> Callable:
        # Resolve string annotations (from `from __future__ import annotations`) so typer sees the
        # real Annotated[..., typer.Option(...)] objects instead of silently dropping the options.
        hints = typing.get_type_hints(fn, include_extras=True)
        own = [
            p.replace(annotation=hints.get(p.name, p.annotation))
            for p in list(inspect.signature(fn).parameters.values())[1:]
        ]

        @functools.wraps(fn)
        def wrapper(click_ctx: typer.Context, **values: Any) -> int:
            settle_heap()
            own_values = {k: v for k, v in values.items() if k not in SHARED_NAMES}
            shared = merge_shared(click_ctx, {k: v for k, v in values.items() if k in SHARED_NAMES})
            ctx = CommandContext(
                bootstrap_server=shared["bootstrap_server"],
                command_config=shared["command_config"],
                profile=shared["profile"],
                timeout=shared["timeout"],
                properties=list(shared["property_overrides"] or []),
                ask_password=shared["ask_password"],
                output=OutputFormat(shared["output"]).value,
                no_headers=shared["no_headers"],
                wide=shared["wide"],
                debug=shared["debug"],
            )
            DEBUG_PARSED[0] = ctx.debug
            if ctx.debug:
                enable_debug_logging()
            try:
                code = fn(ctx, **own_values)
            finally:
                ctx.close()
            raise typer.Exit(code or 0)

        context_param = inspect.Parameter("click_ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)
        wrapper.__signature__ = inspect.Signature([context_param] + own + shared_parameters())  # type: ignore[attr-defined]
        wrapper.__annotations__ = hints  # typer reads them too: evaluated once, not compiled again from their text
        from kafkatxn.cli.helptext import CommandHelp

        app.command(name, cls=CommandHelp, **kwargs)(wrapper)
        return fn

    return decorate


# --debug as the command's options were parsed (before the command, after it, KAFKATXN_DEBUG); None until they
# are: the entry point shows a traceback only then (``--pattern --debug`` names a pattern, asks for none).
DEBUG_PARSED: list[bool | None] = [None]


def _debug_log(message: str, *args: object) -> None:
    """Debug lines exist only under --debug (which imports logging); without it they go nowhere."""
    logging = sys.modules.get("logging")
    if logging is not None:
        logging.getLogger("kafkatxn").debug(message, *args)


def enable_debug_logging() -> None:
    import logging

    from kafkatxn.redact import redacting_formatter

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(redacting_formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    if not any(getattr(h, "_kafkatxn", False) for h in root.handlers):
        handler._kafkatxn = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    root.setLevel(logging.INFO)
    logging.getLogger("kafkatxn").setLevel(logging.DEBUG)


def incomplete_note(missing: Sequence[Missing], what: str) -> str:
    """One line naming the parts that did not answer (the first five)."""
    shown = "; ".join(map(str, missing[:5])) + (f"; and {len(missing) - 5} more" if len(missing) > 5 else "")
    return f"kafkatxn: incomplete {what}: {shown}"


def fail_if_missing(ctx: CommandContext, missing: Sequence[Missing], what: str) -> int | None:
    """Report parts the cluster did not answer for; the command then ends with exit 3."""
    if not missing:
        return None
    ctx.note(incomplete_note(missing, what))
    return exit_code(missing=missing)


__all__ = ["CommandContext", "OutputFormat", "command", "fail_if_missing", "incomplete_note", "KafkatxnError"]
