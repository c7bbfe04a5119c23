"""Java trust and key stores (JKS, JCEKS, PKCS12) read in memory, as Kafka's Java clients read them.

``ssl.truststore.location`` and ``ssl.keystore.location`` name a store whose type
(``ssl.*store.type``) is declared or, as in Java, defaults to JKS. The JVM does not trust the
declared type: since JDK 9 its JKS and PKCS12 key stores each open the other format, told apart by
the file's first bytes. So does this (:func:`store_format`), and it says when the declaration
differs. A store is opened with its password (``ssl.truststore.password``; ``ssl.keystore.password``,
and ``ssl.key.password`` for the private key, Kafka's default for it being the store password), and
its lines are replaced by the in-memory PEM settings both clients take:
``ssl.truststore.certificates`` (librdkafka's ``ssl.ca.pem``), ``ssl.keystore.certificate.chain``
and ``ssl.keystore.key`` (``ssl.certificate.pem``, ``ssl.key.pem``). Key material is never written
to a file: kafka-python gets an :class:`ssl.SSLContext` (:func:`ssl_context`) that loads it through
an anonymous memory file (``memfd_create``), closed as soon as it is read.

JKS and JCEKS are read with purejks (the pure-Python, maintained fork of pyjks), PKCS#12 with
cryptography. Both are imported only when a store is read.
"""

from __future__ import annotations

import base64
import datetime as _dt
import os
import ssl
from dataclasses import replace
from pathlib import Path
from typing import Mapping

from kafkatxn.config.properties import _JAVA_TRIMMED, PropertyLine
from kafkatxn.errors import UsageError
from kafkatxn.records import FrozenRecord, record
from kafkatxn.redact import register_secret

# Java's key store files by their first bytes; a PKCS#12 file is one DER SEQUENCE (0x30) with a
# long-form length (0x80-0x84) or a short one. PEM is text with a "-----BEGIN" line.
_STORE_MAGIC = ((b"\xfe\xed\xfe\xed", "JKS"), (b"\xce\xce\xce\xce", "JCEKS"))
STORE_TYPES = ("JKS", "PKCS12", "JCEKS")
# Since JDK 9 a JKS key store opens PKCS12 files and a PKCS12 one JKS files (keystore.type.compat).
_JAVA_OPENS = {"JKS": {"JKS", "PKCS12"}, "PKCS12": {"JKS", "PKCS12"}, "JCEKS": {"JCEKS"}}
_ROLES = {
    "ssl.truststore.location": ("ssl.truststore.type", "ssl.truststore.password"),
    "ssl.keystore.location": ("ssl.keystore.type", "ssl.keystore.password"),
}
_KEY_PASSWORD = "ssl.key.password"


def store_format(data: bytes) -> str | None:
    """``JKS``, ``JCEKS``, ``PKCS12`` or ``PEM`` from a store file's first bytes; None when none of them."""
    for magic, name in _STORE_MAGIC:
        if data.startswith(magic):
            return name
    if len(data) > 6 and data[0] == 0x30 and (data[1] < 0x80 or 0x81 <= data[1] <= 0x84) and data[2 + max(0, data[1] - 0x80)] == 0x02:
        return "PKCS12"  # SEQUENCE { version INTEGER, ... }
    if b"-----BEGIN " in data[:4096]:
        return "PEM"
    return None


@record
class _Opened(FrozenRecord):
    certificates: list[bytes]  # DER: the trusted certificates, or the key entry's chain (its own first)
    key: bytes | None = None  # the key entry's private key, PKCS#8 DER
    alias: str | None = None  # the key entry's alias

    def __init__(self, certificates: list[bytes], key: bytes | None = None, alias: str | None = None) -> None:
        self.__dict__.update(certificates=certificates, key=key, alias=alias)


class _Refused(Exception):
    """What is wrong with a store, in words for the user; the caller adds where."""


def read_stores(lines: list[PropertyLine], warnings: list[str] | None = None) -> list[PropertyLine]:
    """``lines`` with each JKS, JCEKS or PKCS12 trust or key store read and replaced by PEM settings.

    A store declared PEM, or a PEM file without a declared type, is left as it is (the clients read
    the file). Anything wrong with a store, its password or its entries is one
    :class:`~kafkatxn.errors.UsageError` naming the user's key, file and line; never a password.
    """
    last = {p.key: p for p in lines}  # a later line of a key overrides an earlier one
    replaced: dict[str, list[PropertyLine]] = {}
    for location_key, (type_key, password_key) in _ROLES.items():
        location = last.get(location_key)
        if location is None:
            continue
        declared = last.get(type_key)
        declared_type = _trim(declared.value).upper() if declared else None
        if declared_type == "PEM":
            continue
        path = _trim(location.value)
        shown = f"{location.key}={path}"
        try:
            data = Path(os.path.expanduser(path)).read_bytes()  # an unknown ~user left as written
        except FileNotFoundError:
            raise location.error(f"{shown}: no such file" + (f" (a {declared_type} store, says {type_key})" if declared_type else "")) from None
        except OSError as exc:
            raise location.error(f"{shown}: cannot read it ({exc.strerror or exc.__class__.__name__})") from None
        found = store_format(data)
        if found == "PEM":
            if declared_type is None:
                continue  # read as PEM when no type is declared (Java's JKS default would not open it)
            raise location.error(f"{shown} is a PEM file, not a {declared_type} store: set {type_key}=PEM")
        if found is None:
            raise location.error(f"{shown} is not a JKS, JCEKS or PKCS12 store, nor a PEM file")
        if declared is not None and declared_type not in STORE_TYPES:
            raise declared.error(f"{type_key}={declared_type} is not a store type kafkatxn reads (JKS, PKCS12, JCEKS or PEM)")
        if warnings is not None and declared_type != found:
            java = declared_type or "JKS"
            says = f"as {type_key} says" if declared_type else f"Java's default when {type_key} is not set"
            tail = "read as such, as Java does" if found in _JAVA_OPENS[java] else f"Java would refuse it: set {type_key}={found}"
            if declared_type is not None or found != "JKS":
                warnings.append(f"{location.where}: {shown} is a {found} store, not {java} ({says}); {tail}")
        password = last.get(password_key)
        key_password = last.get(_KEY_PASSWORD) if location_key == "ssl.keystore.location" else None
        for secret in (password, key_password):
            if secret is not None:
                register_secret(_trim(secret.value))
        try:
            if location_key == "ssl.truststore.location":
                opened = _open_truststore(found, data, password)
                replaced[location_key] = [replace(location, key="ssl.truststore.certificates", value=_pem(opened.certificates))]
            else:
                opened = _open_keystore(found, data, password, key_password)
                assert opened.key is not None
                key_pem = _pem([opened.key], "PRIVATE KEY")
                register_secret(key_pem)
                replaced[location_key] = [
                    replace(location, key="ssl.keystore.certificate.chain", value=_pem(opened.certificates)),
                    replace(location, key="ssl.keystore.key", value=key_pem),
                ]
        except _Refused as refused:
            raise location.error(f"{shown} ({found}): {refused}") from None
    if not replaced:
        return lines
    dropped = {k for location_key in replaced for k in (location_key, *_ROLES[location_key])}
    if "ssl.keystore.location" in replaced:
        dropped.add(_KEY_PASSWORD)
    out = [p for p in lines if p.key not in dropped]
    for new in replaced.values():
        out += new
    return out


def _trim(value: str) -> str:
    return value.strip(_JAVA_TRIMMED)  # Kafka trims the values of its own keys


def _password(line: PropertyLine | None) -> str | None:
    return _trim(line.value) if line is not None else None


def _open_truststore(found: str, data: bytes, password: PropertyLine | None) -> _Opened:
    """Every certificate of a trust store: its trusted certificate entries, and the certificate of
    each key entry (Java's trust managers take both)."""
    if found == "PKCS12":
        store = _load_pkcs12(data, password, "ssl.truststore.password")
        certificates = ([store.cert.certificate] if store.cert else []) + [c.certificate for c in store.additional_certs]
        ders = [c.public_bytes(_der()) for c in certificates]
    else:
        keystore = _load_jks(data, password, "ssl.truststore.password", verify=password is not None)
        ders = [entry.cert for entry in keystore.certs.values()]
        ders += [entry.cert_chain[0][1] for entry in keystore.private_keys.values() if entry.cert_chain]
    if not ders:
        raise _Refused("holds no trusted certificate (import the CA with keytool -importcert)")
    dates = [_validity(der) for der in ders]
    now = _dt.datetime.now(_dt.timezone.utc)
    if all(not_after < now for _, not_after in dates):
        latest = max(not_after for _, not_after in dates)
        raise _Refused(f"every trusted certificate in it has expired (the last on {latest:%Y-%m-%d %H:%M:%S} UTC)")
    return _Opened(ders)


def _open_keystore(found: str, data: bytes, password: PropertyLine | None, key_password: PropertyLine | None) -> _Opened:
    if password is None or not _trim(password.value):
        # Kafka's tools refuse a key store without a password before connecting; so does this.
        raise _Refused("ssl.keystore.password is not set (Kafka's tools need it too)")
    if found == "PKCS12":
        store = _load_pkcs12(data, password, "ssl.keystore.password")
        if store.key is None or store.cert is None:
            raise _Refused("holds no private key entry (is it a trust store?)")
        from cryptography.hazmat.primitives import serialization

        key = store.key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        chain = [store.cert.certificate] + [c.certificate for c in store.additional_certs]
        alias = (store.cert.friendly_name or b"").decode("utf-8", "replace") or None
        opened = _Opened([c.public_bytes(_der()) for c in chain], key, alias)
    else:
        keystore = _load_jks(data, password, "ssl.keystore.password", verify=True)
        if not keystore.private_keys:
            raise _Refused("holds no private key entry (is it a trust store?)")
        alias, entry = next(iter(keystore.private_keys.items()))  # the first, in the file's order
        secret = _password(key_password) if key_password is not None else _password(password)
        import jks

        try:
            entry.decrypt(secret)
        except jks.util.DecryptionFailureException:
            which = _KEY_PASSWORD if key_password is not None else "ssl.keystore.password (ssl.key.password is not set)"
            raise _Refused(f"{which} does not decrypt the private key of entry '{alias}' (wrong key password)") from None
        except jks.util.UnexpectedAlgorithmException:
            raise _Refused(f"the private key of entry '{alias}' is protected by an algorithm kafkatxn cannot read") from None
        opened = _Opened([der for _, der in entry.cert_chain], entry.pkey_pkcs8, alias)
    if not opened.certificates:
        raise _Refused(f"the private key entry '{opened.alias}' has no certificate")
    not_before, not_after = _validity(opened.certificates[0])
    now = _dt.datetime.now(_dt.timezone.utc)
    entry_name = f"entry '{opened.alias}'" if opened.alias else "the private key entry"
    if now > not_after:
        raise _Refused(f"the certificate of {entry_name} expired on {not_after:%Y-%m-%d %H:%M:%S} UTC; renew it")
    if now < not_before:
        raise _Refused(f"the certificate of {entry_name} is not valid before {not_before:%Y-%m-%d %H:%M:%S} UTC")
    return opened


def _load_pkcs12(data: bytes, password: PropertyLine | None, password_key: str):
    from cryptography.hazmat.primitives.serialization import pkcs12

    secret = _password(password)
    try:
        return pkcs12.load_pkcs12(data, secret.encode("utf-8") if secret else None)
    except ValueError as exc:
        if "deserialize" in str(exc):
            raise _Refused("the file is damaged (not a readable PKCS12 store)") from None
        if password is None:
            raise _Refused(f"{password_key} is not set and the store needs one") from None
        legacy = ""
        if os.environ.get("CRYPTOGRAPHY_OPENSSL_NO_LEGACY"):
            legacy = ", or the store uses old keytool's RC2/3DES encryption, which CRYPTOGRAPHY_OPENSSL_NO_LEGACY turns off"
        raise _Refused(f"{password_key} does not open it (wrong password{legacy})") from None


def _load_jks(data: bytes, password: PropertyLine | None, password_key: str, verify: bool):
    import jks

    try:
        # No password: Java opens a JKS trust store without checking its integrity; so does this.
        return jks.KeyStore.loads(data, _password(password) if verify else None, try_decrypt_keys=False)
    except jks.util.KeystoreSignatureException:
        raise _Refused(f"{password_key} does not open it (wrong password)") from None
    except (jks.util.BadKeystoreFormatException, jks.util.UnsupportedKeystoreVersionException, jks.util.DuplicateAliasException):
        raise _Refused("the file is damaged (not a readable store)") from None


def _der():
    from cryptography.hazmat.primitives import serialization

    return serialization.Encoding.DER


def _validity(der: bytes) -> tuple[_dt.datetime, _dt.datetime]:
    from cryptography import x509

    try:
        certificate = x509.load_der_x509_certificate(der)
    except ValueError:
        raise _Refused("holds a certificate that cannot be read") from None
    return certificate.not_valid_before_utc, certificate.not_valid_after_utc


def _pem(ders: list[bytes], label: str = "CERTIFICATE") -> str:
    blocks = []
    for der in ders:
        text = base64.b64encode(der).decode("ascii")
        body = "\n".join(text[i : i + 64] for i in range(0, len(text), 64))
        blocks.append(f"-----BEGIN {label}-----\n{body}\n-----END {label}-----\n")
    return "".join(blocks)


# -- kafka-python: the same TLS material, from memory ----------------------------------------------


def ssl_context(settings: Mapping[str, str], check_hostname: bool = True) -> ssl.SSLContext:
    """The context kafka-python would build (``KafkaSSLTransport._build_ssl_context``), with the CA
    and the client's certificate and key taken from memory (``ssl.ca.pem``, ``ssl.certificate.pem``,
    ``ssl.key.pem``) where they are set.

    Python's ssl loads a certificate chain and key only from a path: they are written to an
    anonymous memory file (``memfd_create``: on no file system, private to this process) that is
    closed, and so gone, once loaded.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = check_hostname
    try:
        if settings.get("ssl.ca.location"):
            context.load_verify_locations(settings["ssl.ca.location"])
        elif settings.get("ssl.ca.pem"):
            context.load_verify_locations(cadata=settings["ssl.ca.pem"])
        else:
            context.load_default_certs()
    except (ssl.SSLError, OSError):
        raise UsageError("bad client settings: the trusted certificates (ssl.truststore.certificates / ssl.ca.pem) are not PEM certificates") from None
    password = settings.get(_KEY_PASSWORD)
    certificate, key = settings.get("ssl.certificate.pem"), settings.get("ssl.key.pem")
    if certificate or key:
        if not (certificate and key):
            raise UsageError("bad client settings: an in-memory client certificate needs both ssl.keystore.certificate.chain and ssl.keystore.key")
        try:
            with _memory_file((key.strip() + "\n" + certificate.strip() + "\n").encode()) as path:
                context.load_cert_chain(path, password=password)
        except (ssl.SSLError, OSError, ValueError):
            raise UsageError(
                "bad client settings: the client key and certificate (ssl.keystore.key / ssl.keystore.certificate.chain) "
                "cannot be read as PEM, or ssl.key.password does not decrypt the key"
            ) from None
    elif settings.get("ssl.certificate.location"):
        context.load_cert_chain(settings["ssl.certificate.location"], settings.get("ssl.key.location"), password=password)
    return context


class _memory_file:
    """A path to ``data`` that only this process can open and that vanishes on exit from the block:
    a memfd (``/proc/self/fd/N``), else the read end of a pipe holding it."""

    def __init__(self, data: bytes):
        self.data = data
        self.fds: list[int] = []

    def __enter__(self) -> str:
        if hasattr(os, "memfd_create"):
            fd = os.memfd_create("kafkatxn-tls", os.MFD_CLOEXEC)
            self.fds.append(fd)
            view = memoryview(self.data)
            while view:
                view = view[os.write(fd, view):]
            return f"/proc/self/fd/{fd}"
        read, write = os.pipe()  # elsewhere: a pipe, whose buffer holds a PEM key and chain
        self.fds += [read, write]
        os.write(write, self.data)
        os.close(write)
        self.fds.remove(write)
        return f"/dev/fd/{read}"

    def __exit__(self, *exc: object) -> None:
        for fd in self.fds:
            os.close(fd)
