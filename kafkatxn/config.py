"""One connection config for both Kafka clients.

Settings come from flags, environment variables (``KAFKATXN_*``) and named profiles, in that
order of precedence. Client properties are read from a properties file that may use librdkafka
keys or the Java client keys people already pass to ``kafka-*.sh --command-config``; both are
normalised to librdkafka keys here and translated once more for kafka-python.
"""

from __future__ import annotations

import base64
import datetime as _dt
import getpass
import os
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping

from kafkatxn.config_providers import REFERENCE, is_provider_key, resolve_references
from kafkatxn.durations import parse_duration_ms
from kafkatxn.errors import UsageError
from kafkatxn.redact import register_secret

DEFAULT_TIMEOUT_MS = 30_000

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

# librdkafka keys accepted as they are.
LIBRDKAFKA_KEYS = {
    "bootstrap.servers",
    "security.protocol",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "ssl.ca.location",
    "ssl.ca.pem",
    "ssl.certificate.location",
    "ssl.certificate.pem",
    "ssl.key.location",
    "ssl.key.pem",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "client.id",
}

# Java client keys that only tune the Java client and have no meaning for this tool.
JAVA_KEYS_IGNORED = {
    "request.timeout.ms",
    "default.api.timeout.ms",
    "retries",
    "retry.backoff.ms",
    "connections.max.idle.ms",
    "metadata.max.age.ms",
    "ssl.protocol",
    "ssl.enabled.protocols",
    "ssl.truststore.type",
    "ssl.keystore.type",
}

# librdkafka key -> the kafka-python argument carrying the same setting as it is.
KAFKA_PYTHON_ARGUMENTS = {
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "ssl.ca.location": "ssl_cafile",
    "ssl.ca.pem": "ssl_cadata",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
}

# Keys only librdkafka knows: their values are used exactly as read (Kafka trims the values of its own keys).
LIBRDKAFKA_ONLY_KEYS = {
    "sasl.mechanisms", "sasl.username", "sasl.password", "ssl.ca.location", "ssl.ca.pem",
    "ssl.certificate.location", "ssl.certificate.pem", "ssl.key.location", "ssl.key.pem",
}

SECRET_KEYS = {"sasl.password", "ssl.key.password", "ssl.key.pem", "ssl.keystore.key", "sasl.jaas.config"}

# Secrets may come from the environment instead of a file (never from argv: see `refuse_secret_argument`).
SECRET_ENVIRONMENT = {
    "sasl.password": "KAFKATXN_SASL_PASSWORD",
    "sasl.jaas.config": "KAFKATXN_SASL_JAAS_CONFIG",
    "ssl.key.password": "KAFKATXN_SSL_KEY_PASSWORD",
    "ssl.keystore.password": "KAFKATXN_SSL_KEYSTORE_PASSWORD",
}

# What Java's String.trim() removes: every character up to and including the space (and nothing else,
# unlike str.strip(), which also removes e.g. a no-break space a password may end in).
_JAVA_TRIMMED = "".join(map(chr, range(0x21)))

_PROPERTY_NAME = re.compile(r"[a-z][a-z0-9_-]*(?:\.[a-z0-9_-]+)+")

_JAAS = re.compile(
    r"^\s*(?P<module>[\w.$]+)\s+(?P<flag>required|requisite|sufficient|optional)(?P<opts>.*?);?\s*$",
    re.S,
)
_JAAS_OPTION = re.compile(r"""\s*([\w.]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s;]+)""")
_JAAS_MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule": "PLAIN",
    "org.apache.kafka.common.security.scram.ScramLoginModule": "SCRAM",
}


def is_secret(key: str) -> bool:
    return key in SECRET_KEYS or "password" in key or "secret" in key


def mask(key: str, value: str) -> str:
    return "******" if is_secret(key) and value else value


@dataclass(frozen=True)
class PropertyLine:
    source: str
    line: int  # 0: the source has no lines (a profile table, an environment variable)
    key: str
    value: str

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}" if self.line else self.source


def parse_properties(text: str, source: str = "<properties>") -> list[PropertyLine]:
    """Keys and values exactly as ``java.util.Properties.load`` reads them, each with its line number.

    javaproperties implements the format (``=``, ``:`` or whitespace separators, ``#``/``!``
    comments, ``\\`` continuations, ``\\uXXXX`` escapes, trailing spaces kept); the line numbers are
    counted here from the source text of each element it yields. Only \\n, \\r and \\r\\n end a line,
    as in Java.
    """
    out: list[PropertyLine] = []
    line = 1
    try:
        import javaproperties  # only a properties file needs it

        for element in javaproperties.parse(text):
            if isinstance(element, javaproperties.KeyValue):
                out.append(PropertyLine(source, line, element.key, element.value))
            elif isinstance(element, javaproperties.Whitespace) and element.source.lstrip(" \t\f") == "\\":
                # A last line of nothing but a backslash: Java's LineReader drops the backslash and still
                # returns the (empty) line, so Properties gets the key "" (javaproperties skips it).
                out.append(PropertyLine(source, line, "", ""))
            line += len(_LINE_END.findall(element.source))
    except javaproperties.InvalidUEscapeError:
        # Java says "Malformed \\uxxxx encoding."; the escape itself is not echoed: it may be part of a secret.
        raise UsageError(f"{source}:{line}: malformed \\uxxxx escape") from None
    return out


_LINE_END = re.compile(r"\r\n|\r|\n")


def normalize_properties(props: list[PropertyLine]) -> dict[str, str]:
    """librdkafka-keyed settings from librdkafka or Java client properties; refuses what cannot map."""
    out: dict[str, str] = {}
    # Kafka's ConfigDef trims every value of the keys it defines; librdkafka-only keys are taken as
    # they are, so a password may end in a space.
    props = [p if p.key in LIBRDKAFKA_ONLY_KEYS else replace(p, value=p.value.strip(_JAVA_TRIMMED)) for p in props]
    truststore_type = keystore_type = "PEM"
    for p in props:
        if p.key == "ssl.truststore.type":
            truststore_type = p.value.upper()
        if p.key == "ssl.keystore.type":
            keystore_type = p.value.upper()
    for p in props:
        key, value = p.key, p.value
        if is_provider_key(key) or key == value == "":
            continue  # declares config providers (references were resolved before); "" is what a stray backslash makes
        if "\x00" in value:
            # Java would take it; librdkafka's C strings would end there and use a different value.
            raise UsageError(f"{p.where}: the value of {key} holds a NUL character (\\u0000), which the clients cannot use")
        if key in LIBRDKAFKA_KEYS:
            out[key] = value
        elif key == "sasl.mechanism":
            out["sasl.mechanisms"] = value
        elif key == "sasl.jaas.config":
            username, password = _parse_jaas(p)
            out["sasl.username"] = username
            out["sasl.password"] = password
        elif key == "ssl.truststore.location":
            if truststore_type != "PEM":
                raise UsageError(
                    f"{p.where}: ssl.truststore.type={truststore_type} cannot be used by the Python clients; "
                    "export the CA as PEM (keytool -exportcert -rfc) and set ssl.truststore.type=PEM or ssl.ca.location"
                )
            out["ssl.ca.location"] = value
        elif key == "ssl.truststore.certificates":
            out["ssl.ca.pem"] = value
        elif key == "ssl.keystore.location":
            if keystore_type != "PEM":
                raise UsageError(
                    f"{p.where}: ssl.keystore.type={keystore_type} cannot be used by the Python clients; "
                    "convert the key store to PEM and set ssl.certificate.location and ssl.key.location"
                )
            # A PEM key store holds the certificate chain and the private key in one file.
            out["ssl.certificate.location"] = value
            out["ssl.key.location"] = value
        elif key == "ssl.keystore.certificate.chain":
            out["ssl.certificate.pem"] = value
        elif key == "ssl.keystore.key":
            out["ssl.key.pem"] = value
        elif key in ("ssl.keystore.password", "ssl.truststore.password"):
            if key == "ssl.keystore.password" and "ssl.key.password" not in out:
                out["ssl.key.password"] = value
        elif key in JAVA_KEYS_IGNORED:
            continue
        elif _PROPERTY_NAME.fullmatch(key):
            raise UsageError(f"{p.where}: unsupported property {key!r}")
        else:
            # Not shaped like a property name: perhaps a stray secret on a line of its own.
            raise UsageError(f"{p.where}: unsupported property (not shown: it does not look like a property name)")
    _validate(out, props)
    return out


def _parse_jaas(p: PropertyLine) -> tuple[str, str]:
    match = _JAAS.match(p.value)
    if not match:
        raise UsageError(f"{p.where}: cannot parse sasl.jaas.config; expected '<LoginModule> required username=\"…\" password=\"…\";'")
    module = match.group("module")
    if module not in _JAAS_MODULES:
        raise UsageError(f"{p.where}: sasl.jaas.config login module {module} is not supported (PLAIN and SCRAM are)")
    options = {k: _unquote(v) for k, v in _JAAS_OPTION.findall(match.group("opts"))}
    if "username" not in options or "password" not in options:
        raise UsageError(f"{p.where}: sasl.jaas.config needs username and password")
    return options["username"], options["password"]


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return _STREAM_TOKENIZER_ESCAPE.sub(_stream_tokenizer_unescape, value[1:-1])
    return value


# Kafka parses sasl.jaas.config with java.io.StreamTokenizer, whose quoted strings take C-like escapes:
# \a \b \f \n \r \t \v, octal \0-\377, and a backslash before anything else stands for that character.
_STREAM_TOKENIZER_ESCAPE = re.compile(r"\\([0-3][0-7]{0,2}|[4-7][0-7]?|.)", re.S)
_STREAM_TOKENIZER_CHARS = {"a": "\x07", "b": "\b", "f": "\x0c", "n": "\n", "r": "\r", "t": "\t", "v": "\x0b"}


def _stream_tokenizer_unescape(match: re.Match[str]) -> str:
    code = match.group(1)
    if code[0] in "01234567":
        return chr(int(code, 8))
    return _STREAM_TOKENIZER_CHARS.get(code, code)


def _validate(settings: dict[str, str], props: list[PropertyLine]) -> None:
    where = {p.key: p.where for p in props}

    def at(*keys: str) -> str:
        for k in keys:
            if k in where:
                return where[k]
        return "properties"

    protocol = settings.get("security.protocol")
    if protocol is not None:
        settings["security.protocol"] = protocol.upper()
        if protocol.upper() not in SECURITY_PROTOCOLS:
            raise UsageError(f"{at('security.protocol')}: security.protocol must be one of {', '.join(SECURITY_PROTOCOLS)}")
    mechanism = settings.get("sasl.mechanisms")
    if mechanism is not None:
        settings["sasl.mechanisms"] = mechanism.upper()
        if mechanism.upper() not in SASL_MECHANISMS:
            raise UsageError(
                f"{at('sasl.mechanism', 'sasl.mechanisms')}: SASL mechanism {mechanism} is not supported "
                f"({', '.join(SASL_MECHANISMS)} are)"
            )
    algo = settings.get("ssl.endpoint.identification.algorithm")
    if algo is not None:
        settings["ssl.endpoint.identification.algorithm"] = "https" if algo.lower() == "https" else "none"


def load_properties_file(path: str | Path, warnings: list[str] | None = None) -> list[PropertyLine]:
    """The lines of a ``--command-config`` file, read as Kafka's tools read it.

    ``Utils.loadProps`` hands Java's ``Properties.load`` an InputStream, which decodes ISO-8859-1:
    so does this. Other characters are written as ``\\uXXXX``; a file with UTF-8 in it gets a warning,
    as does a file holding a secret that group or others can read.
    """
    path = Path(path).expanduser()
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"command config file {path} does not exist") from None
    except OSError as exc:
        raise UsageError(f"cannot read command config file {path}: {exc.__class__.__name__}") from None
    lines = parse_properties(data.decode("iso-8859-1"), str(path))
    if warnings is not None:
        if not data.isascii() and _is_utf8(data):
            warnings.append(
                f"{path} holds UTF-8 text; Kafka's tools and kafkatxn read properties files as ISO-8859-1 "
                "(write other characters as \\uXXXX)"
            )
        if any(_literal_secret(p) for p in lines):
            warning = private_file_warning(path)
            if warning:
                warnings.append(warning)
    return lines


def read_properties_file(path: str | Path, warnings: list[str] | None = None) -> dict[str, str]:
    """librdkafka-keyed settings of one properties file, config provider references resolved."""
    return normalize_properties(resolve_references(load_properties_file(path, warnings)))


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _literal_secret(p: PropertyLine) -> bool:
    """A secret written into the file itself, not a config provider reference to one."""
    return is_secret(p.key) and bool(p.value.strip()) and not REFERENCE.search(p.value)


def private_file_warning(path: Path) -> str | None:
    """A warning when ``path`` (which holds a secret) is readable by group or others, as ssh gives one."""
    try:
        mode = path.stat().st_mode & 0o777
    except OSError:
        return None
    if not mode & 0o044:
        return None
    who = "group and others" if mode & 0o044 == 0o044 else "others" if mode & 0o004 else "its group"
    return f"{path} holds secrets and is readable by {who} (mode {mode:04o}); chmod 600 {path}"


def client_certificate_problem(settings: dict[str, str], now: _dt.datetime | None = None) -> str | None:
    """Why brokers would refuse the configured client certificate (expired, not yet valid), or None.

    Brokers refuse an expired certificate with a bare TLS alert (certificate_unknown): only the
    client can say what is wrong with it, so failed handshakes ask here.
    """
    location = settings.get("ssl.certificate.location")
    try:
        text = Path(location).expanduser().read_text(encoding="ascii", errors="replace") if location else settings.get("ssl.certificate.pem", "")
        validity = _certificate_validity(text)
    except (OSError, ValueError, IndexError):
        return None  # unreadable or not a certificate: the client library reports that itself
    if validity is None:
        return None
    not_before, not_after = validity
    now = now or _dt.datetime.now(_dt.timezone.utc)
    where = f" ({location})" if location else ""
    if now > not_after:
        return f"client certificate expired on {not_after:%Y-%m-%d %H:%M:%S} UTC{where}"
    if now < not_before:
        return f"client certificate is not valid before {not_before:%Y-%m-%d %H:%M:%S} UTC{where}"
    return None


def _certificate_validity(pem: str) -> tuple[_dt.datetime, _dt.datetime] | None:
    """notBefore and notAfter of the first PEM certificate; a few lines of DER instead of a dependency."""
    match = re.search(r"-----BEGIN CERTIFICATE-----(.+?)-----END CERTIFICATE-----", pem, re.S)
    if not match:
        return None
    der = base64.b64decode("".join(match.group(1).split()))

    def tlv(pos: int) -> tuple[int, int, int]:  # tag, value start, value end
        tag, length, pos = der[pos], der[pos + 1], pos + 2
        if length & 0x80:
            n = length & 0x7F
            length, pos = int.from_bytes(der[pos : pos + n], "big"), pos + n
        return tag, pos, pos + length

    _, pos, _ = tlv(0)  # Certificate
    _, pos, _ = tlv(pos)  # tbsCertificate
    tag, _, end = tlv(pos)
    if tag == 0xA0:  # [0] version
        pos = end
    for _ in range(3):  # serialNumber, signature, issuer
        pos = tlv(pos)[2]
    _, pos, _ = tlv(pos)  # validity
    times = []
    for _ in range(2):
        tag, start, end = tlv(pos)
        text = der[start:end].decode("ascii").rstrip("Z")
        fmt = "%y%m%d%H%M%S" if tag == 0x17 else "%Y%m%d%H%M%S"  # UTCTime or GeneralizedTime
        times.append(_dt.datetime.strptime(text, fmt).replace(tzinfo=_dt.timezone.utc))
        pos = end
    return times[0], times[1]


def config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "kafkatxn"


def state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "kafkatxn"


def profiles_file() -> Path:
    return Path(os.environ.get("KAFKATXN_CONFIG") or config_dir() / "config.toml")


def load_profile(name: str | None) -> tuple[str | None, dict]:
    """The named (or default) profile from the profiles file; ``(None, {})`` when there is none."""
    path = profiles_file()
    if not path.exists():
        if name:
            raise UsageError(f"profile {name!r} not found: {path} does not exist")
        return None, {}
    import tomllib  # only when there is a profiles file

    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: {exc}") from None
    profiles = doc.get("profiles", {})
    chosen = name or doc.get("default_profile")
    if not chosen:
        return None, {}
    if chosen not in profiles:
        known = ", ".join(sorted(profiles)) or "none"
        raise UsageError(f"profile {chosen!r} not found in {path} (profiles: {known})")
    profile = profiles[chosen]
    if not isinstance(profile, dict):
        raise UsageError(f"{path}: profiles.{chosen} must be a table")
    return chosen, profile


@dataclass
class ConnectionConfig:
    bootstrap_servers: str
    settings: dict[str, str] = field(default_factory=dict)
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    profile: str | None = None
    sources: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # for people, on stderr (e.g. a secrets file others can read)

    @property
    def timeout_s(self) -> float:
        return self.timeout_ms / 1000

    def librdkafka(self, **extra: str | int | bool) -> dict:
        """Settings for confluent-kafka clients, with the deadline applied to every request."""
        conf: dict = {"bootstrap.servers": self.bootstrap_servers, "client.id": "kafkatxn"}
        conf.update(self.settings)
        # Within librdkafka's ranges (it refuses the client otherwise); the deadline still ends the command.
        conf.setdefault("socket.timeout.ms", min(max(self.timeout_ms, 10), 300_000))
        conf.setdefault("socket.connection.setup.timeout.ms", min(max(self.timeout_ms, 1000), 2_147_483_647))
        # librdkafka logs connection failures to stderr by default; we report them as one line instead.
        conf.setdefault("log_level", 0)
        conf.update(extra)
        return conf

    def kafka_python(self) -> dict:
        """The same settings as kafka-python keyword arguments."""
        s = self.settings
        kw: dict = {
            "bootstrap_servers": self.bootstrap_servers.split(","),
            "client_id": s.get("client.id", "kafkatxn"),
            "request_timeout_ms": max(self.timeout_ms, 1000),
            "security_protocol": s.get("security.protocol", "PLAINTEXT"),
        }
        for key, argument in KAFKA_PYTHON_ARGUMENTS.items():
            if key in s:
                kw[argument] = s[key]
        if s.get("ssl.endpoint.identification.algorithm") == "none":
            kw["ssl_check_hostname"] = False
        if "ssl.certificate.pem" in s or "ssl.key.pem" in s:
            raise UsageError(
                "inline PEM client certificates (ssl.keystore.key / ssl.certificate.pem) are not supported by "
                "kafka-python; point ssl.certificate.location and ssl.key.location at files"
            )
        return kw

    def masked(self) -> dict[str, str]:
        shown = {"bootstrap.servers": self.bootstrap_servers, "timeout": f"{self.timeout_ms}ms"}
        if self.profile:
            shown["profile"] = self.profile
        for key, value in sorted(self.settings.items()):
            shown[key] = mask(key, value)
        return shown


def resolve(
    bootstrap_servers: str | None = None,
    command_config: str | None = None,
    profile: str | None = None,
    timeout: str | None = None,
    overrides: list[str] | None = None,
    ask_password: bool = False,
    environ: Mapping[str, str] | None = None,
) -> ConnectionConfig:
    """Combine flag/env values (already merged by the CLI layer) with the profile.

    Precedence: flag > environment > profile. Properties from the profile's ``properties`` table
    are overlaid by its ``command_config`` file, then by the flag/env command config file, then by
    the secret environment variables (``KAFKATXN_SASL_PASSWORD``, ...), then by ``-X key=value``
    overrides (never secrets), then by the password typed at ``--ask-password``. Config provider
    references are resolved over all of them together, as Kafka does over one properties map.
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
        if any(_literal_secret(p) for p in lines):
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
            raise UsageError("-X expects key=value (an argument without '=' is not shown: it may be a secret)")
        k, v = item.split("=", 1)
        refuse_secret_argument(k.strip(), v)
        lines.append(PropertyLine("-X", i, k.strip(), v.strip()))
    settings = normalize_properties(resolve_references(lines, environ))

    if ask_password:
        key, value = _ask_password(settings)
        settings[key] = value
        sources[key] = "--ask-password"

    servers = bootstrap_servers or prof.get("bootstrap_servers") or settings.pop("bootstrap.servers", None)
    settings.pop("bootstrap.servers", None)
    if not servers:
        raise UsageError(
            "no cluster given: pass --bootstrap-server HOST:PORT, set KAFKATXN_BOOTSTRAP_SERVERS, or use --profile"
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
    timeout_ms = parse_duration_ms(timeout_value) if timeout_value is not None else DEFAULT_TIMEOUT_MS
    if timeout_ms <= 0:
        raise UsageError("--timeout must be positive")
    for key, value in settings.items():
        if is_secret(key):
            register_secret(value)
    return ConnectionConfig(servers, settings, timeout_ms, profile_name, sources, warnings)


def refuse_secret_argument(key: str, value: str) -> None:
    """``-X`` never takes a secret: every local user can read a process's arguments (ps, /proc/PID/cmdline).

    A config provider reference (``-X sasl.password=${env:PW}``) names where the secret is, so it is let through.
    """
    if not is_secret(key) or REFERENCE.fullmatch(value.strip()):
        return
    ways = ["the --command-config file (chmod 600)"]
    if key in SECRET_ENVIRONMENT:
        ways.append(f"the environment variable {SECRET_ENVIRONMENT[key]}")
    if key in ASKED_PASSWORDS:
        ways.append("--ask-password")
    ways.append("a config provider reference in the file (${file:PATH:KEY}, ${env:VAR}, ${dir:DIR:FILE})")
    raise UsageError(
        f"-X {key} refused: secrets are not taken from the command line, where other local users can read them; "
        f"use {', '.join(ways[:-1])} or {ways[-1]}"
    )


def check_settings_as_librdkafka(settings: Mapping[str, str]) -> None:
    """Refuse, before anything is sent, what librdkafka refuses when a client is built: a command
    served by kafka-python alone builds no librdkafka client, and kafka-python would only find these
    out while connecting (and retry them until the deadline)."""
    protocol = settings.get("security.protocol", "PLAINTEXT").upper()
    if protocol.startswith("SASL"):
        mechanism = settings.get("sasl.mechanisms", "GSSAPI")  # librdkafka's default
        if mechanism not in SASL_MECHANISMS:
            raise UsageError(
                f"bad client settings: SASL mechanism {mechanism} is not supported ({', '.join(SASL_MECHANISMS)} are; "
                "set sasl.mechanism)"
            )
        if settings.get("sasl.username") is None or settings.get("sasl.password") is None:
            raise UsageError("bad client settings: sasl.username and sasl.password must be set")
    if protocol in ("SSL", "SASL_SSL"):
        for key in ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location"):
            path = settings.get(key)
            if path is not None and path != "probe" and not os.path.exists(path):
                raise UsageError(f"bad client settings: {key}: no such file {path}")


# What --ask-password asks for: the SASL password when SASL is configured, else the client key's password.
ASKED_PASSWORDS = ("sasl.password", "ssl.key.password")


def _ask_password(settings: dict[str, str]) -> tuple[str, str]:
    protocol = settings.get("security.protocol", "")
    if protocol.startswith("SASL") or "sasl.mechanisms" in settings:
        key = "sasl.password"
        user = settings.get("sasl.username")
        prompt = f"SASL password for {user}: " if user else "SASL password: "
    elif "ssl.key.location" in settings:
        key = "ssl.key.password"
        prompt = f"Password for the client key {settings['ssl.key.location']}: "
    else:
        raise UsageError("--ask-password found nothing that needs a password (no SASL mechanism and no client key configured)")
    if not sys.stdin.isatty():
        variable = SECRET_ENVIRONMENT[key]
        raise UsageError(f"--ask-password needs a terminal; without one, set {variable} or put {key} in the --command-config file")
    try:
        value = getpass.getpass(prompt, stream=sys.stderr)
    except (EOFError, KeyboardInterrupt):
        raise UsageError("--ask-password got no password") from None
    if not value:
        raise UsageError("--ask-password got an empty password")
    return key, value
