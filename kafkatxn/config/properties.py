"""Client properties as Kafka reads them: ``java.util.Properties`` lines, JAAS, librdkafka keys.

A properties file may use librdkafka keys or the Java client keys people already pass to
``kafka-*.sh --command-config``; both are normalised to librdkafka keys here. The bottom of
:mod:`kafkatxn.config`: it imports no other module of the package.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from kafkatxn.errors import InputError, UsageError

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

# Keys only librdkafka knows: their values are used exactly as read (Kafka trims the values of its own keys).
LIBRDKAFKA_ONLY_KEYS = {
    "sasl.mechanisms", "sasl.username", "sasl.password", "ssl.ca.location", "ssl.ca.pem",
    "ssl.certificate.location", "ssl.certificate.pem", "ssl.key.location", "ssl.key.pem",
}

SECRET_KEYS = {"sasl.password", "ssl.key.password", "ssl.key.pem", "ssl.keystore.key", "sasl.jaas.config"}

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


# Reserved by Kafka for config providers (kafkatxn.config.providers), never client settings.
CONFIG_PROVIDERS = "config.providers"


def is_provider_key(key: str) -> bool:
    """``config.providers`` and ``config.providers.*``: reserved by Kafka, never client settings."""
    return key == CONFIG_PROVIDERS or key.startswith(CONFIG_PROVIDERS + ".")


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
    # Set when the line comes from an input the caller names in its own terms (the CLI's ``-X``):
    # errors about the line are then InputErrors with ``{input}`` where the source would be.
    input: str | None = None

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}" if self.line else self.source

    def error(self, message: str) -> UsageError:
        """``where: message``; for a line of a named input, an :class:`InputError` its caller words."""
        if self.input is None:
            return UsageError(f"{self.where}: {message}")
        where = f"{{{self.input}}}:{self.line}" if self.line else f"{{{self.input}}}"
        return InputError(f"{where}: " + message.replace("{", "{{").replace("}", "}}"))


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
    store_types = dict.fromkeys(_PEM_ONLY, "PEM")
    store_types.update((p.key, p.value.upper()) for p in props if p.key in _PEM_ONLY)
    for p in props:
        key, value = p.key, p.value
        if is_provider_key(key) or key == value == "":
            continue  # declares config providers (references were resolved before); "" is what a stray backslash makes
        if "\x00" in value:
            # Java would take it; librdkafka's C strings would end there and use a different value.
            raise p.error(f"the value of {key} holds a NUL character (\\u0000), which the clients cannot use")
        if key in LIBRDKAFKA_KEYS:
            out[key] = value
        elif key == "sasl.mechanism":
            out["sasl.mechanisms"] = value
        elif key == "sasl.jaas.config":
            username, password = _parse_jaas(p)
            out["sasl.username"] = username
            out["sasl.password"] = password
        elif key == "ssl.truststore.location":
            _require_pem(p, store_types)
            out["ssl.ca.location"] = value
        elif key == "ssl.truststore.certificates":
            out["ssl.ca.pem"] = value
        elif key == "ssl.keystore.location":
            _require_pem(p, store_types)
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
            raise p.error(f"unsupported property {key!r}")
        else:
            # Not shaped like a property name: perhaps a stray secret on a line of its own.
            raise p.error("unsupported property (not shown: it does not look like a property name)")
    _validate(out, props)
    return out


# The Python clients read PEM stores only; what to do instead, by the key naming a store's type.
_PEM_ONLY = {
    "ssl.truststore.type": "export the CA as PEM (keytool -exportcert -rfc) and set ssl.truststore.type=PEM or ssl.ca.location",
    "ssl.keystore.type": "convert the key store to PEM and set ssl.certificate.location and ssl.key.location",
}


def _require_pem(p: PropertyLine, store_types: dict[str, str]) -> None:
    """Refuse the ``ssl.*store.location`` line ``p`` when its store is not PEM."""
    type_key = p.key.replace(".location", ".type")
    if store_types[type_key] != "PEM":
        raise p.error(f"{type_key}={store_types[type_key]} cannot be used by the Python clients; {_PEM_ONLY[type_key]}")


def _parse_jaas(p: PropertyLine) -> tuple[str, str]:
    match = _JAAS.match(p.value)
    if not match:
        raise p.error("cannot parse sasl.jaas.config; expected '<LoginModule> required username=\"…\" password=\"…\";'")
    module = match.group("module")
    if module not in _JAAS_MODULES:
        raise p.error(f"sasl.jaas.config login module {module} is not supported (PLAIN and SCRAM are)")
    options = {k: _unquote(v) for k, v in _JAAS_OPTION.findall(match.group("opts"))}
    if "username" not in options or "password" not in options:
        raise p.error("sasl.jaas.config needs username and password")
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
    lines = {p.key: p for p in props}

    def fail(keys: tuple[str, ...], message: str) -> UsageError:
        for k in keys:
            if k in lines:
                return lines[k].error(message)
        return UsageError(f"properties: {message}")

    protocol = settings.get("security.protocol")
    if protocol is not None:
        settings["security.protocol"] = protocol.upper()
        if protocol.upper() not in SECURITY_PROTOCOLS:
            raise fail(("security.protocol",), f"security.protocol must be one of {', '.join(SECURITY_PROTOCOLS)}")
    mechanism = settings.get("sasl.mechanisms")
    if mechanism is not None:
        settings["sasl.mechanisms"] = mechanism.upper()
        if mechanism.upper() not in SASL_MECHANISMS:
            raise fail(
                ("sasl.mechanism", "sasl.mechanisms"),
                f"SASL mechanism {mechanism} is not supported ({', '.join(SASL_MECHANISMS)} are)",
            )
    algo = settings.get("ssl.endpoint.identification.algorithm")
    if algo is not None:
        settings["ssl.endpoint.identification.algorithm"] = "https" if algo.lower() == "https" else "none"


