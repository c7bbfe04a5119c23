"""What the files behind the settings say about themselves: a properties file read as Kafka's tools
read it, files holding secrets that others can read, a client certificate out of its dates."""

from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path

from kafkatxn.config.properties import PropertyLine, is_secret, normalize_properties, parse_properties
from kafkatxn.config.providers import REFERENCE, resolve_references
from kafkatxn.config.stores import read_stores
from kafkatxn.errors import UsageError


def load_properties_file(path: str | Path, warnings: list[str] | None = None) -> list[PropertyLine]:
    """The lines of a ``--command-config`` file, read as Kafka's tools read it.

    ``Utils.loadProps`` hands Java's ``Properties.load`` an InputStream, which decodes ISO-8859-1:
    so does this. Other characters are written as ``\\uXXXX``; a file with UTF-8 in it gets a warning,
    as does a file holding a secret that group or others can read.
    """
    # os.path's expanduser leaves an unknown ~user as written (as a shell does); pathlib's raises.
    path = Path(os.path.expanduser(path))
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
        if any(literal_secret(p) for p in lines):
            warning = private_file_warning(path)
            if warning:
                warnings.append(warning)
    return lines


def read_properties_file(path: str | Path, warnings: list[str] | None = None) -> dict[str, str]:
    """librdkafka-keyed settings of one properties file, config provider references resolved; its
    key and trust stores read first, as Java reads them (:func:`~kafkatxn.config.stores.read_stores`)."""
    lines = read_stores(resolve_references(load_properties_file(path, warnings)), warnings)
    return normalize_properties(lines)


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def literal_secret(p: PropertyLine) -> bool:
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
        data = Path(os.path.expanduser(location)).read_bytes() if location else settings.get("ssl.certificate.pem", "").encode()
        validity = certificate_validity(data)
    except (OSError, ValueError):
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


_PEM_CERTIFICATE = b"-----BEGIN CERTIFICATE-----"


def certificate_validity(pem: bytes) -> tuple[_dt.datetime, _dt.datetime] | None:
    """notBefore and notAfter (UTC) of the first certificate in PEM text, which may hold a key
    before it (a PEM key store); None without one. ValueError when it cannot be read."""
    start = pem.find(_PEM_CERTIFICATE)
    if start < 0:
        return None
    from cryptography import x509  # only a failed TLS handshake asks: no command pays for it at start-up

    certificate = x509.load_pem_x509_certificate(pem[start:])
    return certificate.not_valid_before_utc, certificate.not_valid_after_utc
