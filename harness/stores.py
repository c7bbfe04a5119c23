"""Java key and trust stores written by the JDK's own ``keytool``, as Java shops hand them over.

    stores = client_stores(pki, workdir / "stores")          # from harness.security's PEM test PKI
    stores.truststore["JKS"], stores.keystore["PKCS12"], stores.disguised_keystore, ...

Passwords reach keytool through its environment (``-storepass:env``), never its argv: the secrets
leak tests sample every process's command line. Every file is mode 0600; a private key passes
through a PEM or PKCS#12 file only inside the (0700) directory of the store being made.

``keytool`` comes with the JDK that scripts/test installs (the harness runs Kafka's own tools with it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

STORE_TYPES = ("JKS", "PKCS12")


def keytool() -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "keytool").exists():
        return str(Path(java_home) / "bin" / "keytool")
    return shutil.which("keytool")


def run_keytool(*args: str, passwords: dict[str, str], java_options: tuple[str, ...] = ()) -> None:
    """keytool with ``args``; each ``-xxxpass:env NAME`` in them finds its password in ``passwords``."""
    tool = keytool()
    if tool is None:
        raise RuntimeError("keytool not found: install a JDK (scripts/test installs openjdk-17-jdk-headless)")
    env = {**os.environ, **passwords}
    done = subprocess.run(
        [tool, *(f"-J{o}" for o in java_options), *args],
        capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"keytool {args[0]} failed: {done.stdout[-1500:]}{done.stderr[-1500:]}")


def _private(path: Path) -> Path:
    path.chmod(0o600)
    return path


def truststore(path: Path, ca_pem: Path, store_type: str, password: str | None, alias: str = "ca") -> Path:
    """A trust store holding the certificate(s) in ``ca_pem`` as trusted certificate entries
    (``password`` None: keytool's ``changeit``, for a reader that opens it without one, as Java may)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    certificates = x509.load_pem_x509_certificates(Path(ca_pem).read_bytes())
    for i, certificate in enumerate(certificates):
        one = path.parent / f".{path.name}.{i}.pem"
        one.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        try:
            run_keytool(
                "-importcert", "-noprompt", "-alias", alias if i == 0 else f"{alias}{i}", "-file", str(one),
                "-keystore", str(path), "-storetype", store_type, "-storepass:env", "KT_STOREPASS",
                passwords={"KT_STOREPASS": password or "changeit"},
            )
        finally:
            one.unlink()
    return _private(path)


def keystore(
    path: Path,
    certificate_pem: Path,
    key_pem: Path,
    store_type: str,
    store_password: str,
    key_password: str | None = None,
    *,
    chain_pem: Path | None = None,
    key_pem_password: str | None = None,
    alias: str = "client",
) -> Path:
    """A key store with one private key entry (``key_pem`` with ``certificate_pem`` and ``chain_pem``).

    keytool cannot import a PEM key: the key goes into a PKCS#12 file first (cryptography), which
    ``keytool -importkeystore`` converts into the store of ``store_type``; ``key_password`` (JKS only:
    keytool refuses separate key passwords in PKCS12 stores) protects the entry.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = serialization.load_pem_private_key(Path(key_pem).read_bytes(), key_pem_password.encode() if key_pem_password else None)
    certificate = x509.load_pem_x509_certificate(Path(certificate_pem).read_bytes())
    chain = x509.load_pem_x509_certificates(Path(chain_pem).read_bytes()) if chain_pem else None
    source = path.parent / f".{path.name}.source.p12"
    source.touch(mode=0o600)
    source.write_bytes(pkcs12.serialize_key_and_certificates(
        alias.encode(), key, certificate, chain, serialization.BestAvailableEncryption(store_password.encode()),  # type: ignore[arg-type]
    ))
    try:
        args = [
            "-importkeystore", "-noprompt", "-srckeystore", str(source), "-srcstoretype", "PKCS12",
            "-srcstorepass:env", "KT_STOREPASS", "-srcalias", alias, "-destalias", alias,
            "-destkeystore", str(path), "-deststoretype", store_type, "-deststorepass:env", "KT_STOREPASS",
        ]
        passwords = {"KT_STOREPASS": store_password}
        if key_password is not None and store_type != "PKCS12":
            args += ["-srckeypass:env", "KT_STOREPASS", "-destkeypass:env", "KT_KEYPASS"]
            passwords["KT_KEYPASS"] = key_password
        run_keytool(*args, passwords=passwords)
    finally:
        source.unlink()
    return _private(path)


def self_signed_keystore(
    path: Path,
    store_type: str,
    store_password: str,
    key_password: str | None = None,
    *,
    common_name: str = "kafkatxn-store-test",
    start: str | None = None,
    days: int = 30,
    legacy: bool = False,
    alias: str = "client",
) -> Path:
    """A key store whose one entry keytool generates itself (``-genkeypair``, EC P-256).

    ``start`` is keytool's ``-startdate`` (``-30d`` with ``days=1``: a certificate expired long
    ago); ``legacy`` writes a PKCS12 store with the algorithms keytool used before JDK 12 (RC2/3DES,
    which OpenSSL 3 reads only through its legacy provider).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    args = [
        "-genkeypair", "-alias", alias, "-keyalg", "EC", "-groupname", "secp256r1", "-dname", f"CN={common_name}",
        "-validity", str(days), "-keystore", str(path), "-storetype", store_type, "-storepass:env", "KT_STOREPASS",
        "-keypass:env", "KT_KEYPASS",
    ]
    if start:
        args += ["-startdate", start]
    run_keytool(
        *args,
        passwords={"KT_STOREPASS": store_password, "KT_KEYPASS": key_password or store_password},
        java_options=("-Dkeystore.pkcs12.legacy",) if legacy else (),
    )
    return _private(path)


def secret_key_store(path: Path, password: str) -> Path:
    """A JCEKS store holding only a secret (AES) key: no certificate, no private key."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    run_keytool(
        "-genseckey", "-alias", "secret", "-keyalg", "AES", "-keysize", "128", "-keystore", str(path),
        "-storetype", "JCEKS", "-storepass:env", "KT_STOREPASS", "-keypass:env", "KT_STOREPASS",
        passwords={"KT_STOREPASS": password},
    )
    return _private(path)


def export_certificate(store: Path, store_type: str, password: str, alias: str = "client") -> bytes:
    """The PEM certificate of ``alias`` in ``store``, as ``keytool -exportcert -rfc`` writes it."""
    tool = keytool()
    assert tool is not None
    done = subprocess.run(
        [tool, "-exportcert", "-rfc", "-alias", alias, "-keystore", str(store), "-storetype", store_type,
         "-storepass:env", "KT_STOREPASS"],
        capture_output=True, env={**os.environ, "KT_STOREPASS": password}, stdin=subprocess.DEVNULL, timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"keytool -exportcert failed: {done.stderr[-1500:]!r}")
    return done.stdout


# -- the client stores of a test PKI -----------------------------------------------------------------


@dataclass(frozen=True)
class ClientStores:
    """The test PKI's CA and client key as Java stores. Store and key passwords are distinctive and
    random (a leak check can search for them); the JKS key entry has its own key password."""

    directory: Path
    store_password: str
    key_password: str
    truststore: dict[str, Path]  # "JKS" | "PKCS12" -> a trust store holding the CA
    keystore: dict[str, Path]  # "JKS" | "PKCS12" -> the client's key, certificate and the CA
    disguised_keystore: Path  # keystore.jks that keytool wrote as PKCS12 (its default since JDK 9)
    disguised_truststore: Path  # truststore.jks, really PKCS12


def client_stores(pki, directory: Path, store_password: str, key_password: str) -> ClientStores:
    """Trust and key stores of ``pki`` (a :class:`harness.security.Pki`), both types, made in parallel."""
    from concurrent.futures import ThreadPoolExecutor

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    key_args = dict(chain_pem=pki.ca, key_pem_password=pki.key_password)
    with ThreadPoolExecutor(3) as pool:
        jobs = {
            ("trust", "JKS"): pool.submit(truststore, directory / "truststore-jks.jks", pki.ca, "JKS", store_password),
            ("trust", "PKCS12"): pool.submit(truststore, directory / "truststore-p12.p12", pki.ca, "PKCS12", store_password),
            ("key", "JKS"): pool.submit(
                keystore, directory / "keystore-jks.jks", pki.client_cert, pki.client_key_encrypted, "JKS",
                store_password, key_password, **key_args,
            ),
            ("key", "PKCS12"): pool.submit(
                keystore, directory / "keystore-p12.p12", pki.client_cert, pki.client_key_encrypted, "PKCS12",
                store_password, **key_args,
            ),
            ("key", "disguised"): pool.submit(
                keystore, directory / "keystore.jks", pki.client_cert, pki.client_key_encrypted, "PKCS12",
                store_password, **key_args,
            ),
            ("trust", "disguised"): pool.submit(truststore, directory / "truststore.jks", pki.ca, "PKCS12", store_password),
        }
        made = {k: f.result() for k, f in jobs.items()}
    return ClientStores(
        directory=directory,
        store_password=store_password,
        key_password=key_password,
        truststore={t: made[("trust", t)] for t in STORE_TYPES},
        keystore={t: made[("key", t)] for t in STORE_TYPES},
        disguised_keystore=made[("key", "disguised")],
        disguised_truststore=made[("trust", "disguised")],
    )

