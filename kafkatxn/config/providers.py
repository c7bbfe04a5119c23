"""Kafka's config providers: ``${provider:[path:]key}`` references in client properties.

The same properties file works with ``kafka-*.sh --command-config`` and with kafkatxn::

    config.providers=file,env,dir
    config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider
    config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider
    config.providers.dir.class=org.apache.kafka.common.config.provider.DirectoryConfigProvider
    sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
        username="${file:/etc/kafka/secrets.properties:user}" password="${env:KAFKA_PASSWORD}";
    ssl.key.password=${dir:/run/secrets:key-password}

What follows Kafka (AbstractConfig.resolveConfigVariables, ConfigTransformer and the three
providers of kafka-clients): the reference pattern; provider names taken from ``config.providers``
split at commas as they are; ``config.providers.<name>.class`` naming the implementation and
``config.providers.<name>.param.*`` configuring it (``allowed.paths`` of the file and directory
providers, ``allowlist.pattern`` of the environment provider, matched against the whole name);
files read as Java reads them (a properties file of the file provider as UTF-8 ``Properties``, a file
of the directory provider as its exact UTF-8 bytes, trailing newline included); Kafka's wording for
the errors it raises.

Where Kafka leaves a reference it cannot resolve in the value as it is (and the client then fails
later, e.g. with a refused login using the literal text as password), kafkatxn refuses the file
with a usage error naming the reference and the line, never the value.
"""

from __future__ import annotations

import os
import re
from dataclasses import field, replace
from pathlib import Path
from typing import Callable, Mapping

from kafkatxn.config.properties import CONFIG_PROVIDERS, PropertyLine
from kafkatxn.errors import UsageError
from kafkatxn.records import FRESH, Record, record

# org.apache.kafka.common.config.ConfigTransformer.DEFAULT_PATTERN
REFERENCE = re.compile(r"\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}")

FILE_PROVIDER = "org.apache.kafka.common.config.provider.FileConfigProvider"
DIRECTORY_PROVIDER = "org.apache.kafka.common.config.provider.DirectoryConfigProvider"
ENV_PROVIDER = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"
SUPPORTED = (FILE_PROVIDER, DIRECTORY_PROVIDER, ENV_PROVIDER)


def has_reference(value: str) -> bool:
    return REFERENCE.search(value) is not None


@record
class _Provider(Record):
    name: str
    cls: str
    params: dict[str, str]
    where: str
    allowed_paths: list[Path] | None = None
    allowlist: re.Pattern[str] | None = None
    cache: dict[str, dict[str, str]] = field(default_factory=dict)

    def __init__(self, name: str, cls: str, params: dict[str, str], where: str, allowed_paths: list[Path] | None = None,
                 allowlist: re.Pattern[str] | None = None, cache: dict[str, dict[str, str]] = FRESH) -> None:
        self.__dict__.update(name=name, cls=cls, params=params, where=where, allowed_paths=allowed_paths,
                             allowlist=allowlist, cache={} if cache is FRESH else cache)

    def lookup(self, path: str, key: str, fail: Callable[[str], UsageError], environ: Mapping[str, str]) -> str:
        if self.cls == ENV_PROVIDER:
            return self._env(path, key, fail, environ)
        if not path:
            raise fail(f"the {self.name} provider needs a path (${{{self.name}:PATH:KEY}})")
        target = self._allowed(path, fail)
        if self.cls == FILE_PROVIDER:
            data = self.cache.get(path)
            if data is None:
                try:
                    text = target.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError):
                    raise fail(f"Could not read properties from file {path}") from None
                import javaproperties  # only a file provider needs it

                try:
                    data = self.cache[path] = javaproperties.loads(text)
                except javaproperties.InvalidUEscapeError:
                    raise fail(f"malformed \\uxxxx encoding in {path}") from None
            if key not in data:
                raise fail(f"no property {key!r} in {path}")
            return data[key]
        # DirectoryConfigProvider: the file named `key` in the directory, its whole content.
        if not target.is_dir():
            raise fail(f"The path {path} is not a directory")
        entry = target / key
        if "/" in key or key in ("", ".", "..") or not entry.is_file():
            raise fail(f"no file {key!r} in directory {path}")
        try:
            return entry.read_bytes().decode("utf-8", errors="replace")
        except OSError:
            raise fail(f"Could not read file {entry} for property {key}") from None

    def _allowed(self, path: str, fail: Callable[[str], UsageError]) -> Path:
        # org.apache.kafka.common.config.internals.AllowedPaths.parseUntrustedPath
        parsed = Path(path)
        if self.allowed_paths is None:
            return parsed
        normalised = Path(os.path.normpath(path))
        if not any(normalised == a or a in normalised.parents for a in self.allowed_paths):
            raise fail(
                f"The path {path} is not allowed to be accessed "
                f"(config.providers.{self.name}.param.allowed.paths)"
            )
        return normalised

    def _env(self, path: str, key: str, fail: Callable[[str], UsageError], environ: Mapping[str, str]) -> str:
        if path:
            raise fail(f"Path is not supported for EnvVarConfigProvider, invalid value '{path}'")
        if self.allowlist is not None and not self.allowlist.fullmatch(key):
            raise fail(
                f"environment variable {key} is not allowed by "
                f"config.providers.{self.name}.param.allowlist.pattern"
            )
        if key not in environ:
            raise fail(f"environment variable {key} is not set")
        return environ[key]


def _configure(name: str, cls_line: PropertyLine, params: dict[str, str]) -> _Provider:
    cls = cls_line.value
    if cls not in SUPPORTED:
        raise cls_line.error(
            f"config provider class {cls} is not supported by kafkatxn "
            "(FileConfigProvider, DirectoryConfigProvider and EnvVarConfigProvider are)"
        )
    provider = _Provider(name, cls, params, cls_line.where)
    prefix = f"config.providers.{name}.param."
    if cls in (FILE_PROVIDER, DIRECTORY_PROVIDER) and params.get("allowed.paths"):
        allowed = []
        for item in params["allowed.paths"].split(","):
            normalised = Path(os.path.normpath(item)) if item else Path(item)
            if not normalised.is_absolute():
                raise cls_line.error(f"{prefix}allowed.paths: Path {normalised} is not absolute")
            if not normalised.exists():
                raise cls_line.error(f"{prefix}allowed.paths: Path {normalised} does not exist")
            allowed.append(normalised)
        provider.allowed_paths = allowed
    if cls == ENV_PROVIDER and "allowlist.pattern" in params:
        try:
            provider.allowlist = re.compile(params["allowlist.pattern"])
        except re.error:
            raise cls_line.error(f"{prefix}allowlist.pattern is not a valid regular expression") from None
    return provider


def resolve_references(lines: list[PropertyLine], environ: Mapping[str, str] | None = None) -> list[PropertyLine]:
    """``lines`` with every ``${provider:[path:]key}`` replaced, as Kafka's clients would replace them.

    Providers are declared by the lines themselves (the last line for a key wins, as in one
    properties map). Without ``config.providers`` nothing is replaced, as in Kafka, but a value
    holding a reference is refused: Kafka would send the reference text itself as the setting.
    """
    environ = os.environ if environ is None else environ
    merged = {p.key: p for p in lines}
    declared = merged.get(CONFIG_PROVIDERS)
    providers: dict[str, _Provider] = {}
    if declared is not None and declared.value:
        for name in declared.value.split(","):
            cls_line = merged.get(f"config.providers.{name}.class")
            if cls_line is None:
                continue  # Kafka skips a provider without a class
            prefix = f"config.providers.{name}.param."
            params = {k[len(prefix):]: p.value for k, p in merged.items() if k.startswith(prefix) and len(k) > len(prefix)}
            providers[name] = _configure(name, cls_line, params)

    out = []
    for line in lines:
        if not has_reference(line.value):
            out.append(line)
            continue

        def substitute(match: re.Match[str], line: PropertyLine = line) -> str:
            ref = match.group(0)
            name, path, key = match.group(1), match.group(3) or "", match.group(4)
            provider = providers.get(name)
            if provider is None:
                if not providers:
                    raise line.error(
                        f"{ref} (in {line.key}) refers to config provider {name!r}, but config.providers "
                        "declares none with a class (config.providers=NAME and config.providers.NAME.class=...)"
                    )
                raise line.error(
                    f"{ref} (in {line.key}): no config provider named {name!r} "
                    f"(config.providers declares {', '.join(sorted(providers))})"
                )
            # "KEY: value" would read as an assignment to the redaction of error lines: the key goes in brackets.
            return provider.lookup(path, key, lambda message: line.error(f"{ref} (in {line.key}): {message}"), environ)

        out.append(replace(line, value=REFERENCE.sub(substitute, line.value)))
    return out
