"""The exporter's ``--web-config-file``: the Prometheus exporter-toolkit format (node_exporter's
``web-config.yml``), read as the toolkit reads it: ``tls_server_config`` (certificate, key,
client-certificate verification, minimum TLS 1.2) and ``basic_auth_users`` (bcrypt hashes, checked
with the ``bcrypt`` library). The file is read again for every connection and request, so
certificates and users change without a restart.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import ssl
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from kafkatxn.errors import UsageError

TLS_VERSIONS = {"TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
CLIENT_AUTH_TYPES = {
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
# Go's crypto/tls can ask for a certificate without verifying it; OpenSSL through Python's ssl cannot,
# and a certificate nobody verifies guards nothing, so these are refused rather than half-done.
UNVERIFIED_CLIENT_AUTH_TYPES = ("RequestClientCert", "RequireAnyClientCert")
TLS_KEYS = {"cert_file", "key_file", "client_auth_type", "client_ca_file", "min_version", "max_version",
            "prefer_server_cipher_suites"}
UNSUPPORTED_TLS_KEYS = {"cert", "key", "client_ca", "cipher_suites", "curve_preferences", "client_allowed_sans"}
# The toolkit allows only these response headers in http_server_config.headers.
ALLOWED_HEADERS = ("Strict-Transport-Security", "X-Content-Type-Options", "X-Frame-Options", "X-XSS-Protection",
                   "Content-Security-Policy")
BCRYPT_HASH = re.compile(r"\$2[abxy]?\$\d\d\$[./A-Za-z0-9]{53}")


class WebConfigError(UsageError):
    """The web configuration file cannot be used (exit 64 at start; refusals afterwards)."""


@dataclass(frozen=True)
class TLSSettings:
    cert_file: Path
    key_file: Path
    client_auth_type: str = "NoClientCert"
    client_ca_file: Path | None = None
    min_version: str = "TLS12"
    max_version: str | None = None

    def files(self) -> tuple[Path, ...]:
        return tuple(p for p in (self.cert_file, self.key_file, self.client_ca_file) if p is not None)

    def context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = TLS_VERSIONS[self.min_version]
        if self.max_version:
            context.maximum_version = TLS_VERSIONS[self.max_version]
        context.load_cert_chain(str(self.cert_file), str(self.key_file))
        context.verify_mode = CLIENT_AUTH_TYPES[self.client_auth_type]
        if self.client_ca_file is not None:
            context.load_verify_locations(cafile=str(self.client_ca_file))
        return context


@dataclass(frozen=True)
class WebConfig:
    tls: TLSSettings | None = None
    users: Mapping[str, bytes] = field(default_factory=dict)  # user -> bcrypt hash
    headers: tuple[tuple[str, str], ...] = ()


def parse_web_config(text: str, path: Path) -> WebConfig:
    """Validate a web configuration as the toolkit does (unknown keys are errors); relative file
    names are relative to the file's directory, as in the toolkit. Builds the TLS context once so a
    missing or mismatched certificate or key is reported here."""
    import yaml

    def fail(message: str) -> WebConfigError:
        return WebConfigError(f"--web-config-file {str(path)!r}: {message}")

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise fail(f"not valid YAML{where}: {getattr(exc, 'problem', None) or exc}") from None
    doc = {} if doc is None else doc
    if not isinstance(doc, dict):
        raise fail("expected a mapping with tls_server_config, http_server_config, basic_auth_users")
    unknown = set(doc) - {"tls_server_config", "http_server_config", "basic_auth_users"}
    if unknown:
        raise fail(f"unknown key(s): {', '.join(sorted(map(str, unknown)))}")

    def mapping(key: str, value: object) -> dict:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise fail(f"{key} must be a mapping")
        return value

    tls = _parse_tls(mapping("tls_server_config", doc.get("tls_server_config")), path.parent, fail)

    users: dict[str, bytes] = {}
    for user, hashed in mapping("basic_auth_users", doc.get("basic_auth_users")).items():
        if not isinstance(user, str) or not user or ":" in user:
            raise fail(f"basic_auth_users: bad user name {user!r} (a non-empty string without ':')")
        if not isinstance(hashed, str) or not BCRYPT_HASH.fullmatch(hashed):
            # Never echo the value: it may be a password written in by mistake.
            raise fail(f"basic_auth_users.{user}: not a bcrypt hash (make one with: htpasswd -nBC 10 '' | tr -d ':')")
        users[user] = hashed.encode()

    http = mapping("http_server_config", doc.get("http_server_config"))
    unknown = set(http) - {"http2", "headers"}
    if unknown:
        raise fail(f"http_server_config: unknown key(s): {', '.join(sorted(map(str, unknown)))}")
    headers = []
    for name, value in mapping("http_server_config.headers", http.get("headers")).items():
        allowed = {h.lower(): h for h in ALLOWED_HEADERS}
        if not isinstance(name, str) or name.lower() not in allowed:
            raise fail(f"http_server_config.headers: {name!r} is not one of {', '.join(ALLOWED_HEADERS)}")
        if not isinstance(value, str) or "\n" in value or "\r" in value:
            raise fail(f"http_server_config.headers.{name}: expected a one-line string")
        headers.append((allowed[name.lower()], value))
    return WebConfig(tls, users, tuple(headers))


def _parse_tls(section: dict, base: Path, fail: Callable[[str], WebConfigError]) -> TLSSettings | None:
    if not section:
        return None
    unsupported = set(section) & UNSUPPORTED_TLS_KEYS
    if unsupported:
        raise fail(f"tls_server_config: {', '.join(sorted(unsupported))} not supported by kafkatxn "
                   "(use cert_file, key_file, client_ca_file)")
    unknown = set(section) - TLS_KEYS
    if unknown:
        raise fail(f"tls_server_config: unknown key(s): {', '.join(sorted(map(str, unknown)))}")

    def file(key: str) -> Path | None:
        value = section.get(key)
        if value in (None, ""):
            return None
        if not isinstance(value, str):
            raise fail(f"tls_server_config.{key} must be a file name")
        return base / value

    cert, key, ca = file("cert_file"), file("key_file"), file("client_ca_file")
    if cert is None or key is None:
        raise fail("tls_server_config needs both cert_file and key_file")
    auth = section.get("client_auth_type") or ("RequireAndVerifyClientCert" if ca else "NoClientCert")
    if auth in UNVERIFIED_CLIENT_AUTH_TYPES:
        raise fail(f"tls_server_config.client_auth_type {auth} accepts certificates nobody verifies; "
                   "use VerifyClientCertIfGiven or RequireAndVerifyClientCert")
    if auth not in CLIENT_AUTH_TYPES:
        raise fail(f"tls_server_config.client_auth_type {auth!r}: use one of {', '.join(CLIENT_AUTH_TYPES)}")
    if auth != "NoClientCert" and ca is None:
        raise fail(f"tls_server_config.client_auth_type {auth} needs client_ca_file")
    if auth == "NoClientCert" and ca is not None:
        raise fail("tls_server_config.client_ca_file is set but client_auth_type is NoClientCert")
    versions = {}
    for name, default in (("min_version", "TLS12"), ("max_version", None)):
        value = section.get(name) or default
        if value is not None and value not in TLS_VERSIONS:
            raise fail(f"tls_server_config.{name} {value!r}: use TLS12 or TLS13 (nothing older than TLS 1.2 is served)")
        versions[name] = value
    if versions["max_version"] and TLS_VERSIONS[versions["max_version"]] < TLS_VERSIONS[versions["min_version"]]:
        raise fail("tls_server_config.max_version is below min_version")
    settings = TLSSettings(cert, key, auth, ca, versions["min_version"], versions["max_version"])
    try:
        settings.context()
    except (OSError, ssl.SSLError) as exc:
        raise fail(f"tls_server_config: cannot load the certificate, key or CA: {ssl_reason(exc)}") from None
    return settings


def ssl_reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError):
        return exc.reason or exc.strerror or type(exc).__name__
    if isinstance(exc, OSError):
        return f"{exc.strerror or exc}{f' ({exc.filename})' if exc.filename else ''}"
    return str(exc)


class WebConfigFile:
    """The web configuration file, read again whenever it is needed (each TLS handshake and each
    request, as the toolkit does); parsed and its TLS context built only when its text or the
    certificate files changed. A file that turns bad later refuses every request until it is fixed."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._text: str | None = None
        self._config = WebConfig()
        self._context_key: tuple | None = None
        self._context: ssl.SSLContext | None = None
        self.tls = self.current().tls is not None  # a bad file is a usage error at start

    def current(self) -> WebConfig:
        try:
            text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8"
            raise WebConfigError(f"--web-config-file {str(self.path)!r}: cannot read it: {reason}") from None
        with self._lock:
            if text != self._text:
                self._config = parse_web_config(text, self.path)
                self._text = text
            return self._config

    def ssl_context(self) -> ssl.SSLContext:
        tls = self.current().tls
        if tls is None:
            raise WebConfigError(f"--web-config-file {str(self.path)!r}: tls_server_config was removed; "
                                 "restart the exporter to serve plain HTTP")
        key = (tls, tuple(_stamp(p) for p in tls.files()))
        with self._lock:
            if key != self._context_key:
                try:
                    self._context = tls.context()
                except (OSError, ssl.SSLError) as exc:
                    raise WebConfigError(f"--web-config-file {str(self.path)!r}: {ssl_reason(exc)}") from None
                self._context_key = key
            assert self._context is not None
            return self._context


def _stamp(path: Path) -> tuple:
    try:
        st = path.stat()
    except OSError:
        return (str(path), None)
    return (str(path), st.st_ino, st.st_mtime_ns, st.st_size)


class BasicAuth:
    """Checks ``Authorization: Basic`` against bcrypt hashes. Results are remembered (keyed by a
    SHA-256 of user, password and hash) because bcrypt is slow on purpose and Prometheus sends the
    same credentials every scrape; an unknown user costs a bcrypt check too, so timing does not
    tell which users exist."""

    MAX_CACHED = 1024

    def __init__(self) -> None:
        self._cache: dict[bytes, bool] = {}
        self._lock = threading.Lock()
        self._dummy: bytes | None = None

    def check(self, users: Mapping[str, bytes], header: str | None) -> bool:
        import bcrypt

        if not header or not header[:6].lower() == "basic ":
            return False
        try:
            user, sep, password = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        if not sep:
            return False
        hashed = users.get(user)
        if hashed is None:
            if self._dummy is None:
                self._dummy = bcrypt.hashpw(os.urandom(16).hex().encode(), bcrypt.gensalt(10))
            hashed = self._dummy
        key = hashlib.sha256(b"\0".join((user.encode(), password.encode(), hashed))).digest()
        with self._lock:
            known = self._cache.get(key)
        if known is None:
            try:
                known = bcrypt.checkpw(password.encode(), hashed)
            except ValueError:
                known = False
            with self._lock:
                if len(self._cache) >= self.MAX_CACHED:
                    self._cache.clear()
                self._cache[key] = known
        return known and user in users


