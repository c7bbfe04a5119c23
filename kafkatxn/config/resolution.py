"""One connection config from flags, environment variables (``KAFKATXN_*``) and a named profile,
in that order of precedence.

Inputs are named here as the caller's parameters (``bootstrap_servers``, ``overrides``,
``ask_password``, ...): errors about them are :class:`~kafkatxn.errors.InputError` templates that
the CLI words with its own flags (``--bootstrap-server``, ``-X``, ``--ask-password``, ...). This
module asks nobody anything: a password to type is asked for by the ``prompt`` its caller passes.
"""

from __future__ import annotations

import os
import re
from typing import Callable, Mapping

from kafkatxn.config.clients import DEFAULT_TIMEOUT_MS, ConnectionConfig
from kafkatxn.config.files import literal_secret, load_properties_file, private_file_warning
from kafkatxn.config.profiles import load_profile, profiles_file
from kafkatxn.config.properties import PropertyLine, is_secret, normalize_properties
from kafkatxn.config.providers import REFERENCE, resolve_references
from kafkatxn.config.stores import read_stores
from kafkatxn.durations import parse_duration_ms
from kafkatxn.errors import InputError, UsageError
from kafkatxn.redact import register_secret

# Secrets may come from the environment instead of a file (never from argv: see `refuse_secret_argument`).
SECRET_ENVIRONMENT = {
    "sasl.password": "KAFKATXN_SASL_PASSWORD",
    "sasl.jaas.config": "KAFKATXN_SASL_JAAS_CONFIG",
    "ssl.key.password": "KAFKATXN_SSL_KEY_PASSWORD",
    "ssl.keystore.password": "KAFKATXN_SSL_KEYSTORE_PASSWORD",
}

# What ask_password asks for: the SASL password when SASL is configured, else the client key's password.
ASKED_PASSWORDS = ("sasl.password", "ssl.key.password")

# Asks a person for a secret: shown the prompt text, returns what they typed; EOFError or
# KeyboardInterrupt when nothing comes. The CLI's asks on the terminal, without echo.
Prompt = Callable[[str], str]


class SecretNeeded(InputError):
    """``ask_password`` was asked for, but the caller has no way to ask (no ``prompt``: no terminal)."""

    def __init__(self, key: str, variable: str):
        self.key, self.variable = key, variable
        super().__init__(
            "{ask_password} needs a terminal; without one, set {variable} or put {key} in the {command_config} file",
            key=key,
            variable=variable,
        )


def resolve(
    bootstrap_servers: str | None = None,
    command_config: str | None = None,
    profile: str | None = None,
    timeout: str | None = None,
    overrides: list[str] | None = None,
    ask_password: bool = False,
    environ: Mapping[str, str] | None = None,
    prompt: Prompt | None = None,
) -> ConnectionConfig:
    """Combine flag/env values (already merged by the CLI layer) with the profile.

    Precedence: flag > environment > profile. Properties from the profile's ``properties`` table
    are overlaid by its ``command_config`` file, then by the flag/env command config file, then by
    the secret environment variables (``KAFKATXN_SASL_PASSWORD``, ...), then by ``overrides``
    (``key=value``, never secrets), then by the password ``prompt`` returns when ``ask_password``
    (:class:`SecretNeeded` without a prompt). Config provider references are resolved over all of
    them together, as Kafka does over one properties map.
    """
    environ = os.environ if environ is None else environ
    warnings: list[str] = []
    profile_name, prof = load_profile(profile)
    sources: dict[str, str] = {}
    lines: list[PropertyLine] = []

    prof_props = prof.get("properties", {})
    if prof_props:
        source = f"{profiles_file()} profiles.{profile_name}.properties"
        lines += [PropertyLine(source, 0, str(k), str(v)) for k, v in prof_props.items()]
        if any(literal_secret(p) for p in lines):
            warning = private_file_warning(profiles_file())
            if warning:
                warnings.append(warning)
    prof_file = prof.get("command_config")
    for f in (prof_file if not command_config else None, command_config):
        if f:
            lines += load_properties_file(f, warnings)
            sources["command_config"] = str(f)
    for key, variable in SECRET_ENVIRONMENT.items():
        if environ.get(variable):
            lines.append(PropertyLine(f"environment variable {variable}", 0, key, environ[variable]))
            sources[key] = variable
    for i, item in enumerate(overrides or (), 1):
        if "=" not in item:
            raise InputError("{overrides} expects key=value (an argument without '=' is not shown: it may be a secret)")
        k, v = item.split("=", 1)
        refuse_secret_argument(k.strip(), v)
        lines.append(PropertyLine("overrides", i, k.strip(), v.strip(), input="overrides"))
    lines = resolve_references(lines, environ)
    lines = read_stores(lines, warnings)  # JKS/PKCS12 stores read into PEM settings, errors at the user's key and line
    settings = normalize_properties(lines)

    if ask_password:
        key, value = _ask_password(settings, prompt)
        settings[key] = value
        sources[key] = "ask_password"

    servers = bootstrap_servers or prof.get("bootstrap_servers") or settings.pop("bootstrap.servers", None)
    settings.pop("bootstrap.servers", None)
    if not servers:
        raise InputError(
            "no cluster given: pass {bootstrap_servers} HOST:PORT, set KAFKATXN_BOOTSTRAP_SERVERS, or use {profile}"
        )
    given = str(servers)
    servers = ",".join(s.strip() for s in given.split(",") if s.strip())
    if not servers:
        raise UsageError(f"bad bootstrap servers {given!r}; expected HOST:PORT[,HOST:PORT...]")
    for server in servers.split(","):
        match = re.fullmatch(r"(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.\-]+):(\d{1,5})", server, re.ASCII)
        if not match or not 0 < int(match.group(2)) <= 65535:
            raise UsageError(f"bad bootstrap server {server!r}; expected HOST:PORT (port 1-65535)")

    timeout_value = timeout if timeout is not None else prof.get("timeout")
    try:
        timeout_ms = parse_duration_ms(timeout_value) if timeout_value is not None else DEFAULT_TIMEOUT_MS
    except UsageError as exc:
        if timeout is not None:
            raise
        raise UsageError(f"{profiles_file()} profiles.{profile_name}.timeout: {exc}") from None
    if timeout_ms <= 0:
        raise InputError("{timeout} must be positive")
    for key, value in settings.items():
        if is_secret(key):
            register_secret(value)
    return ConnectionConfig(servers, settings, timeout_ms, profile_name, sources, warnings, *_spark_queries(prof, profile_name))


def _spark_queries(prof: Mapping, profile_name: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A profile's ``spark_checkpoints``: a list of paths, or a table of query name = checkpoint path, or
    name = {checkpoint = path, writer = "application/query", ledger_topic = topic} (its exactly-once writer);
    as ``--spark-checkpoint`` and ``--spark-writer`` values."""
    value = prof.get("spark_checkpoints", {})
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value), ()
    if isinstance(value, dict) and all(isinstance(v, str) or isinstance(v, dict) and isinstance(v.get("checkpoint"), str)
                                       for v in value.values()):
        checkpoints = tuple(f"{n}={v if isinstance(v, str) else v['checkpoint']}" for n, v in value.items())
        writers = tuple(f"{n}={v['writer']}" + (f"@{v['ledger_topic']}" if v.get("ledger_topic") else "")
                        for n, v in value.items() if isinstance(v, dict) and isinstance(v.get("writer"), str))
        return checkpoints, writers
    raise UsageError(f"{profiles_file()} profiles.{profile_name}.spark_checkpoints: expected a table of name = \"path\" or a list of paths")


def refuse_secret_argument(key: str, value: str) -> None:
    """``overrides`` (the CLI's ``-X``) never take a secret: every local user can read a process's
    arguments (ps, /proc/PID/cmdline).

    A config provider reference (``-X sasl.password=${env:PW}``) names where the secret is, so it is let through.
    """
    if not is_secret(key) or REFERENCE.fullmatch(value.strip()):
        return
    ways = ["the {command_config} file (chmod 600)"]
    if key in SECRET_ENVIRONMENT:
        ways.append("the environment variable {variable}")
    if key in ASKED_PASSWORDS:
        ways.append("{ask_password}")
    ways.append("a config provider reference in the file ({references})")
    raise InputError(
        "{overrides} {key} refused: secrets are not taken from the command line, where other local users can read them; "
        f"use {', '.join(ways[:-1])} or {ways[-1]}",
        key=key,
        variable=SECRET_ENVIRONMENT.get(key, ""),
        references="${file:PATH:KEY}, ${env:VAR}, ${dir:DIR:FILE}",
    )


def _ask_password(settings: dict[str, str], prompt: Prompt | None) -> tuple[str, str]:
    protocol = settings.get("security.protocol", "")
    if protocol.startswith("SASL") or "sasl.mechanisms" in settings:
        key = "sasl.password"
        user = settings.get("sasl.username")
        text = f"SASL password for {user}: " if user else "SASL password: "
    elif "ssl.key.location" in settings:
        key = "ssl.key.password"
        text = f"Password for the client key {settings['ssl.key.location']}: "
    else:
        raise InputError("{ask_password} found nothing that needs a password (no SASL mechanism and no client key configured)")
    if prompt is None:
        raise SecretNeeded(key, SECRET_ENVIRONMENT[key])
    try:
        value = prompt(text)
    except (EOFError, KeyboardInterrupt):
        raise InputError("{ask_password} got no password") from None
    if not value:
        raise InputError("{ask_password} got an empty password")
    return key, value
