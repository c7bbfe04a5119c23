"""Client properties as Kafka reads them: ``java.util.Properties`` lines, JAAS, librdkafka keys.

A properties file may use librdkafka keys or the Java client keys people already pass to
``kafka-*.sh --command-config``; both are normalised to librdkafka keys here. The bottom of
:mod:`kafkatxn.config`: it imports no other module of the package.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace

from kafkatxn.errors import InputError, UsageError
from kafkatxn.records import FrozenRecord, record

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
OAUTHBEARER, GSSAPI = "OAUTHBEARER", "GSSAPI"
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", OAUTHBEARER, GSSAPI)

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
}  # and OAUTH_LIBRDKAFKA_KEYS, KERBEROS_LIBRDKAFKA_KEYS

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
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule": OAUTHBEARER,
    "com.sun.security.auth.module.Krb5LoginModule": GSSAPI,
}

# -- SASL/OAUTHBEARER, OIDC client credentials (KIP-768): Java's keys -> librdkafka's ``oidc`` method --
# Kafka 4.x's properties win over OAuthBearerLoginModule's JAAS options (clientId, clientSecret, scope).
OAUTH_URL, OAUTH_CLIENT_ID, OAUTH_CLIENT_SECRET, OAUTH_SCOPE = (
    "sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret", "sasl.oauthbearer.scope",
)
OAUTH_METHOD, OAUTH_EXTENSIONS, OAUTH_SUB_CLAIM = "sasl.oauthbearer.method", "sasl.oauthbearer.extensions", "sasl.oauthbearer.sub.claim.name"
OAUTH_LIBRDKAFKA_KEYS = {OAUTH_URL, OAUTH_CLIENT_ID, OAUTH_CLIENT_SECRET, OAUTH_SCOPE, OAUTH_METHOD, OAUTH_EXTENSIONS, OAUTH_SUB_CLAIM}
# Read by kafkatxn's own token provider (kafkatxn.config.sasl_oauth); librdkafka has no such keys.
OAUTH_SCOPE_CLAIM, OAUTH_REFRESH_FACTOR = "sasl.oauthbearer.scope.claim.name", "sasl.login.refresh.window.factor"
KAFKATXN_ONLY_KEYS = frozenset({OAUTH_SCOPE_CLAIM, OAUTH_REFRESH_FACTOR, "sasl.kerberos.ccache"})  # GSSAPI's below
_OAUTH_JAVA_KEYS = {
    OAUTH_URL: OAUTH_URL, OAUTH_SCOPE: OAUTH_SCOPE, OAUTH_SUB_CLAIM: OAUTH_SUB_CLAIM, OAUTH_SCOPE_CLAIM: OAUTH_SCOPE_CLAIM,
    OAUTH_REFRESH_FACTOR: OAUTH_REFRESH_FACTOR,
    "sasl.oauthbearer.client.credentials.client.id": OAUTH_CLIENT_ID,
    "sasl.oauthbearer.client.credentials.client.secret": OAUTH_CLIENT_SECRET,
}
_OAUTH_JAAS_OPTIONS = {"clientId": OAUTH_CLIENT_ID, "clientSecret": OAUTH_CLIENT_SECRET, "scope": OAUTH_SCOPE}
_OAUTH_PACKAGE = "org.apache.kafka.common.security.oauthbearer."
# Java keys naming a class: Kafka's own client-credentials classes are understood, no other (3.x's old name too).
_OAUTH_CLASSES = {
    "sasl.login.callback.handler.class": (_OAUTH_PACKAGE + "OAuthBearerLoginCallbackHandler", _OAUTH_PACKAGE + "secured.OAuthBearerLoginCallbackHandler"),
    "sasl.oauthbearer.jwt.retriever.class": (_OAUTH_PACKAGE + "DefaultJwtRetriever", _OAUTH_PACKAGE + "ClientCredentialsJwtRetriever"),
}
# Java keys that tune only how the Java client retries and schedules its logins.
_OAUTH_IGNORED = {
    "sasl.login.connect.timeout.ms", "sasl.login.read.timeout.ms", "sasl.login.retry.backoff.ms", "sasl.login.retry.backoff.max.ms",
    "sasl.login.refresh.window.jitter", "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.buffer.seconds",
}
_OAUTH_JAAS = "kafkatxn.oauthbearer.jaas"  # set while reading when sasl.jaas.config is OAuthBearerLoginModule's

# -- SASL/GSSAPI (Kerberos): Krb5LoginModule's options -> librdkafka's keys, and the ticket cache ------
KERBEROS_SERVICE, KERBEROS_KEYTAB, KERBEROS_PRINCIPAL = "sasl.kerberos.service.name", "sasl.kerberos.keytab", "sasl.kerberos.principal"
KERBEROS_LIBRDKAFKA_KEYS = {KERBEROS_SERVICE, KERBEROS_KEYTAB, KERBEROS_PRINCIPAL}
KERBEROS_CCACHE = "sasl.kerberos.ccache"  # kafkatxn's own: Krb5LoginModule's ticketCache
_KERBEROS_IGNORED = {  # the Java client's relogin schedule and kinit command (MIT's library renews its own tickets)
    "sasl.kerberos.kinit.cmd", "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.ticket.renew.window.factor",
}
_KERBEROS_JAAS = "kafkatxn.kerberos.jaas"  # set while reading when sasl.jaas.config is Krb5LoginModule's


# Keys Kafka's clients read as numbers, by their ConfigDef type. kafkatxn uses few of them, but a value
# Java's clients would refuse (request.timeout.ms=abc) is refused too, naming its line: never dropped silently.
_INT, _LONG, _SHORT, _DOUBLE = "an int", "a long", "a short", "a double"
TYPED_KEYS = {
    "request.timeout.ms": _INT, "default.api.timeout.ms": _INT, "retries": _INT, "retry.backoff.ms": _LONG,
    "connections.max.idle.ms": _LONG, "metadata.max.age.ms": _LONG,
    "sasl.login.connect.timeout.ms": _INT, "sasl.login.read.timeout.ms": _INT, "sasl.login.retry.backoff.ms": _LONG,
    "sasl.login.retry.backoff.max.ms": _LONG, "sasl.login.refresh.window.jitter": _DOUBLE,
    "sasl.login.refresh.min.period.seconds": _SHORT, "sasl.login.refresh.buffer.seconds": _SHORT,
    OAUTH_REFRESH_FACTOR: _DOUBLE,
    "sasl.kerberos.min.time.before.relogin": _LONG, "sasl.kerberos.ticket.renew.jitter": _DOUBLE,
    "sasl.kerberos.ticket.renew.window.factor": _DOUBLE,
}
_BITS = {_INT: 32, _LONG: 64, _SHORT: 16}
# What Java's Double.parseDouble takes: decimal and hexadecimal forms, NaN and Infinity.
_JAVA_DOUBLE = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?\d+)[fFdD]?)")


def check_number(p: PropertyLine) -> None:
    """Refuse ``p`` when its key is one Kafka's clients read as a number and its value is not one."""
    kind = TYPED_KEYS.get(p.key)
    if kind is None:
        return
    value = p.value
    if kind == _DOUBLE:
        ok = _JAVA_DOUBLE.fullmatch(value) is not None
    else:
        bits = _BITS[kind]
        ok = re.fullmatch(r"[+-]?\d+", value) is not None and -(2 ** (bits - 1)) <= int(value) < 2 ** (bits - 1)
    if not ok:
        raise p.error(f"{p.key}={value!r} is not a number ({kind}, as Kafka's clients read it)")


# Reserved by Kafka for config providers (kafkatxn.config.providers), never client settings.
CONFIG_PROVIDERS = "config.providers"


def is_provider_key(key: str) -> bool:
    """``config.providers`` and ``config.providers.*``: reserved by Kafka, never client settings."""
    return key == CONFIG_PROVIDERS or key.startswith(CONFIG_PROVIDERS + ".")


def is_secret(key: str) -> bool:
    return key in SECRET_KEYS or "password" in key or "secret" in key


def mask(key: str, value: str) -> str:
    return "******" if is_secret(key) and value else value


@record
class PropertyLine(FrozenRecord):
    source: str
    line: int  # 0: the source has no lines (a profile table, an environment variable)
    key: str
    value: str
    # Set when the line comes from an input the caller names in its own terms (the CLI's ``-X``):
    # errors about the line are then InputErrors with ``{input}`` where the source would be.
    input: str | None = None

    def __init__(self, source: str, line: int, key: str, value: str, input: str | None = None) -> None:
        self.__dict__.update(source=source, line=line, key=key, value=value, input=input)

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
    login_jaas: dict[str, str] = {}  # the properties win over OAuthBearerLoginModule's (and Krb5LoginModule's) options
    for p in props:
        key, value = p.key, p.value
        if is_provider_key(key) or key == value == "":
            continue  # declares config providers (references were resolved before); "" is what a stray backslash makes
        check_number(p)
        if "\x00" in value:
            # Java would take it; librdkafka's C strings would end there and use a different value.
            raise p.error(f"the value of {key} holds a NUL character (\\u0000), which the clients cannot use")
        if key in LIBRDKAFKA_KEYS or key in OAUTH_LIBRDKAFKA_KEYS or key in KERBEROS_LIBRDKAFKA_KEYS:
            out[key] = value
        elif key == "sasl.mechanism":
            out["sasl.mechanisms"] = value
        elif key == "sasl.jaas.config" and _jaas_module(p) == OAUTHBEARER:
            login_jaas = _oauth_jaas(p)
        elif key == "sasl.jaas.config" and _jaas_module(p) == GSSAPI:
            login_jaas = _kerberos_jaas(p)
        elif key == "sasl.jaas.config":
            username, password = _parse_jaas(p)
            out["sasl.username"] = username
            out["sasl.password"] = password
            login_jaas = {}
        elif key in _OAUTH_CLASSES:
            if value not in _OAUTH_CLASSES[key]:
                raise p.error(f"{key} {value} is not supported (kafkatxn logs in with OIDC client credentials, as {_OAUTH_CLASSES[key][0]})")
            out[key] = value
        elif key in _OAUTH_JAVA_KEYS:
            out[_OAUTH_JAVA_KEYS[key]] = value
        elif key in _OAUTH_IGNORED or key in _KERBEROS_IGNORED:
            continue
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
    out = {**login_jaas, **out}
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


def _jaas_options(p: PropertyLine) -> tuple[str, dict[str, str]]:
    """The kind of a ``sasl.jaas.config``'s login module (``PLAIN``, ``SCRAM``, ``OAUTHBEARER``) and its options."""
    match = _JAAS.match(p.value)
    if not match:
        raise p.error("cannot parse sasl.jaas.config; expected '<LoginModule> required username=\"…\" password=\"…\";'")
    module = match.group("module")
    if module not in _JAAS_MODULES:
        raise p.error(f"sasl.jaas.config login module {module} is not supported (the PLAIN, SCRAM and OAUTHBEARER login modules are)")
    return _JAAS_MODULES[module], {k: _unquote(v) for k, v in _JAAS_OPTION.findall(match.group("opts"))}


def _jaas_module(p: PropertyLine) -> str:
    return _jaas_options(p)[0]


def _oauth_jaas(p: PropertyLine) -> dict[str, str]:
    """OAuthBearerLoginModule's options as settings; ``extension_NAME=value`` are SASL extensions. Other
    options are ignored, as Java ignores them (a misspelt clientSecret is then reported missing)."""
    options = _jaas_options(p)[1]
    settings = {_OAUTH_JAAS_OPTIONS[k]: v for k, v in options.items() if k in _OAUTH_JAAS_OPTIONS}
    extensions = [f"{k[len('extension_'):]}={v}" for k, v in options.items() if k.startswith("extension_")]
    if extensions:
        settings[OAUTH_EXTENSIONS] = ",".join(extensions)
    return {**settings, _OAUTH_JAAS: "1"}


def _kerberos_jaas(p: PropertyLine) -> dict[str, str]:
    """Krb5LoginModule's options as settings: a keytab (``useKeyTab=true keyTab=… principal=…``) and/or
    a ticket cache (``useTicketCache=true``, ``ticketCache=…``); ``serviceName``. Others are ignored, as
    the logins they tune (storeKey, doNotPrompt, renewTGT, …) are MIT's library's here."""
    options = _jaas_options(p)[1]
    settings = {_KERBEROS_JAAS: "1"}
    for flag in ("useKeyTab", "useTicketCache"):
        if options.get(flag, "false").lower() not in ("true", "false"):
            raise p.error(f"sasl.jaas.config: {flag} must be true or false, not {options[flag]!r}")
    if options.get("useKeyTab", "").lower() == "true":
        for option, key in (("keyTab", KERBEROS_KEYTAB), ("principal", KERBEROS_PRINCIPAL)):
            if not options.get(option):
                raise p.error(f"sasl.jaas.config: Krb5LoginModule with useKeyTab=true needs {option}=…")
            settings[key] = options[option]
    if options.get("useTicketCache", "").lower() == "true":
        settings[KERBEROS_CCACHE] = options.get("ticketCache") or ""
    if len(settings) == 1:
        raise p.error(
            "sasl.jaas.config: Krb5LoginModule needs useKeyTab=true (with keyTab and principal) or useTicketCache=true: "
            "kafkatxn does not prompt for a Kerberos password"
        )
    if options.get("serviceName"):
        settings[KERBEROS_SERVICE] = options["serviceName"]
    return settings


def _parse_jaas(p: PropertyLine) -> tuple[str, str]:
    options = _jaas_options(p)[1]
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
    check_oauth(settings, fail)
    check_kerberos(settings, fail)
    algo = settings.get("ssl.endpoint.identification.algorithm")
    if algo is not None:
        # https verifies the host name; empty (Java) or none (librdkafka) turns that off; a typo must not.
        if algo.lower() not in ("https", "", "none"):
            raise fail(("ssl.endpoint.identification.algorithm",),
                       f"ssl.endpoint.identification.algorithm must be https, or empty to not verify host names (not {algo!r})")
        settings["ssl.endpoint.identification.algorithm"] = "https" if algo.lower() == "https" else "none"




def check_oauth(settings: dict[str, str], fail) -> None:
    """Complete and check OAUTHBEARER's settings. A Java file (OAuthBearerLoginModule's sasl.jaas.config)
    fetches tokens only with Kafka's login callback handler, as Kafka's clients do."""
    java_file = settings.pop(_OAUTH_JAAS, None) is not None
    handler = settings.pop("sasl.login.callback.handler.class", None)
    settings.pop("sasl.oauthbearer.jwt.retriever.class", None)
    if settings.get("sasl.mechanisms") != OAUTHBEARER:
        if java_file:
            raise fail(("sasl.jaas.config",), "sasl.jaas.config is OAuthBearerLoginModule's: it needs sasl.mechanism=OAUTHBEARER")
        settings.pop(OAUTH_SCOPE_CLAIM, None)
        settings.pop(OAUTH_REFRESH_FACTOR, None)
        return
    if java_file and handler is None:
        raise fail(("sasl.jaas.config",), (
            f"OAUTHBEARER needs sasl.login.callback.handler.class={_OAUTH_CLASSES['sasl.login.callback.handler.class'][0]}: "
            "without it Kafka's clients send unsecured test tokens, which kafkatxn does not"
        ))
    method = settings.setdefault(OAUTH_METHOD, "oidc")
    if method.lower() != "oidc":
        raise fail((OAUTH_METHOD,), f"{OAUTH_METHOD}={method} is not supported (oidc is: client credentials from a token endpoint)")
    settings[OAUTH_METHOD] = "oidc"
    url = settings.get(OAUTH_URL)
    if not url:
        raise fail(("sasl.mechanism", "sasl.mechanisms"), f"OAUTHBEARER needs {OAUTH_URL} (the OIDC provider's token endpoint)")
    if not url.lower().startswith(("http://", "https://")):
        raise fail((OAUTH_URL,), f"{OAUTH_URL} must be the http(s) URL of a token endpoint (token files are not supported)")
    for key, option, java_key in ((OAUTH_CLIENT_ID, "clientId", "client.id"), (OAUTH_CLIENT_SECRET, "clientSecret", "client.secret")):
        if not settings.get(key):
            wanted = f"{option} in sasl.jaas.config (or sasl.oauthbearer.client.credentials.{java_key})" if java_file else key
            raise fail(("sasl.jaas.config", key), f"OAUTHBEARER needs {wanted}")
    factor = settings.get(OAUTH_REFRESH_FACTOR, "0.8")
    if not re.fullmatch(r"0?\.[5-9]\d*|1(\.0*)?", factor):  # Kafka's bounds: 0.5 to 1.0
        raise fail((OAUTH_REFRESH_FACTOR,), f"{OAUTH_REFRESH_FACTOR} must be a number from 0.5 to 1.0")


def check_kerberos(settings: dict[str, str], fail) -> None:
    """Check GSSAPI's settings: Kafka's clients need the brokers' service name, and Krb5LoginModule goes with GSSAPI."""
    java_file = settings.pop(_KERBEROS_JAAS, None) is not None
    if settings.get("sasl.mechanisms") != GSSAPI:
        if java_file:
            raise fail(("sasl.jaas.config",), "sasl.jaas.config is Krb5LoginModule's: it needs sasl.mechanism=GSSAPI")
        settings.pop(KERBEROS_CCACHE, None)
        return
    if not settings.get(KERBEROS_SERVICE):
        raise fail(("sasl.mechanism", "sasl.mechanisms", "sasl.jaas.config"),
                   f"GSSAPI needs {KERBEROS_SERVICE} (the brokers' Kerberos service name, often kafka)")
    keytab = settings.get(KERBEROS_KEYTAB)
    if keytab is not None and not os.path.isfile(keytab):
        raise fail(("sasl.jaas.config", KERBEROS_KEYTAB), f"the keytab {keytab} does not exist")
