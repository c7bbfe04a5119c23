"""Certificates, SASL users and listener presets for brokers with SASL_SSL and mutual TLS.

    pki = make_pki(workdir / "pki")
    users = SaslUsers.random()
    setup = secure_setup(pki, users)                 # SASL_SSL (SCRAM-SHA-512 + PLAIN) and mTLS
    cluster = KafkaCluster(workdir, listeners=setup.listeners, format_arguments=setup.format_arguments)

Inter-broker and controller traffic stays on a PLAINTEXT listener (the first one), so the harness's
own admin client and test set-up code need no credentials; only the clients under test use TLS/SASL.

Everything is PEM, which Kafka (``ssl.keystore.type=PEM``), librdkafka and Python's ssl all read.
Keys are EC P-256: generating them is instant, unlike RSA.
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from .broker import Listener

PLAIN_LISTENER = "PLAINTEXT"
SASL_LISTENER = "SASL_SSL"  # SCRAM-SHA-512 and PLAIN on one listener
SCRAM_LISTENER = "SCRAM"  # with separate_sasl_listeners=True
PLAIN_SASL_LISTENER = "SASLPLAIN"
MTLS_LISTENER = "MTLS"

SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"

_DAY = _dt.timedelta(days=1)


# -- certificates ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pki:
    """Files of a test PKI. ``*_keystore`` files hold the private key and then the certificate chain."""

    directory: Path
    ca: Path  # the CA brokers and clients trust
    other_ca: Path  # an unrelated CA: a client trusting only this one cannot verify the brokers
    broker_keystore: Path  # unencrypted PKCS#8 key + cert (127.0.0.1, localhost) + CA
    client_cert: Path
    client_key: Path  # unencrypted
    client_keystore: Path  # unencrypted key + cert, one file (Java ssl.keystore.location style)
    client_key_encrypted: Path  # PKCS#8 encrypted with key_password
    client_keystore_encrypted: Path  # encrypted key + cert, one file
    key_password: str
    expired_cert: Path  # signed by `ca`, valid until yesterday
    expired_key: Path
    expired_keystore: Path


def make_pki(directory: Path, key_password: str | None = None) -> Pki:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    key_password = key_password or f"keypass-{secrets.token_hex(8)}"
    now = _dt.datetime.now(_dt.timezone.utc)

    ca_key, ca_cert = _ca("kafkatxn test CA", now)
    other_key, other_cert = _ca("kafkatxn unrelated CA", now)
    del other_key  # only its certificate is ever used, as the wrong trust anchor

    broker_key, broker_cert = _leaf(
        "kafkatxn test broker", ca_key, ca_cert, now - _DAY, now + 365 * _DAY,
        sans=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
        usages=[ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH],
    )
    client_key, client_cert = _leaf(
        "kafkatxn-client", ca_key, ca_cert, now - _DAY, now + 365 * _DAY, usages=[ExtendedKeyUsageOID.CLIENT_AUTH]
    )
    expired_key, expired_cert = _leaf(
        "kafkatxn-expired-client", ca_key, ca_cert, now - 30 * _DAY, now - _DAY, usages=[ExtendedKeyUsageOID.CLIENT_AUTH]
    )

    def write(name: str, *parts: bytes) -> Path:
        path = directory / name
        path.write_bytes(b"".join(parts))
        path.chmod(0o600)
        return path

    ca_pem = _cert_pem(ca_cert)
    plain_client_key = _key_pem(client_key)
    encrypted_client_key = _key_pem(client_key, key_password)
    return Pki(
        directory=directory,
        ca=write("ca.pem", ca_pem),
        other_ca=write("other-ca.pem", _cert_pem(other_cert)),
        broker_keystore=write("broker-keystore.pem", _key_pem(broker_key), _cert_pem(broker_cert), ca_pem),
        client_cert=write("client.pem", _cert_pem(client_cert)),
        client_key=write("client.key", plain_client_key),
        client_keystore=write("client-keystore.pem", plain_client_key, _cert_pem(client_cert)),
        client_key_encrypted=write("client-encrypted.key", encrypted_client_key),
        client_keystore_encrypted=write("client-keystore-encrypted.pem", encrypted_client_key, _cert_pem(client_cert)),
        key_password=key_password,
        expired_cert=write("expired.pem", _cert_pem(expired_cert)),
        expired_key=write("expired.key", _key_pem(expired_key)),
        expired_keystore=write("expired-keystore.pem", _key_pem(expired_key), _cert_pem(expired_cert)),
    )


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kafkatxn tests"), x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _ca(common_name: str, now: _dt.datetime) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name(common_name)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _DAY)
        .not_valid_after(now + 3650 * _DAY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _leaf(
    common_name: str,
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    not_before: _dt.datetime,
    not_after: _dt.datetime,
    sans: list[x509.GeneralName] | None = None,
    usages: list[x509.ObjectIdentifier] | None = None,
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=True, key_cert_sign=False, crl_sign=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()), critical=False  # type: ignore[arg-type]
        )
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    if usages:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey, password: str | None = None) -> bytes:
    # PKCS#8 either way: Kafka's PEM key stores read nothing else, OpenSSL and Python's ssl read both.
    encryption = serialization.BestAvailableEncryption(password.encode()) if password else serialization.NoEncryption()
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


# -- SASL users --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SaslUser:
    name: str
    password: str


@dataclass(frozen=True)
class SaslUsers:
    """One SCRAM-SHA-512 user (created at format time) and one PLAIN user (listener JAAS config)."""

    scram: SaslUser
    plain: SaslUser

    @classmethod
    def random(cls) -> "SaslUsers":
        # Distinctive, random passwords: a leak check can search output for them without false hits.
        # Only [A-Za-z0-9-]: `kafka-storage format --add-scram` has its own quoting rules.
        return cls(
            SaslUser("kt-scram-user", f"scramPw-{secrets.token_hex(10)}"),
            SaslUser("kt-plain-user", f"plainPw-{secrets.token_hex(10)}"),
        )

    def format_arguments(self) -> list[str]:
        return ["--add-scram", f"SCRAM-SHA-512=[name={self.scram.name},password={self.scram.password}]"]


# -- listener presets --------------------------------------------------------------------------


@dataclass(frozen=True)
class SecureSetup:
    listeners: list[Listener]
    format_arguments: list[str]
    broker_config: dict[str, str]
    sasl_listeners: dict[str, str]  # mechanism -> listener name
    mtls_listener: str | None


def _tls_broker_properties(pki: Pki) -> dict[str, str]:
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.broker_keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca),
    }


def _jaas(module: str, **options: str) -> str:
    return f"{module} required " + " ".join(f'{k}="{v}"' for k, v in options.items()) + ";"


def secure_setup(pki: Pki, users: SaslUsers, *, separate_sasl_listeners: bool = False, mtls: bool = True, sasl: bool = True) -> SecureSetup:
    """Listeners for SASL_SSL (SCRAM-SHA-512 and PLAIN, on one listener or two) and mutual TLS.

    The first listener is PLAINTEXT and carries inter-broker traffic; the controller listener is
    PLAINTEXT too. Client properties on each listener are librdkafka keys for ``client_config()``.
    """
    tls = _tls_broker_properties(pki)
    scram_broker = {"scram-sha-512.sasl.jaas.config": f"{SCRAM_MODULE} required;"}
    plain_broker = {"plain.sasl.jaas.config": _jaas(PLAIN_MODULE, **{f"user_{users.plain.name}": users.plain.password})}
    scram_client = {"sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": users.scram.name, "sasl.password": users.scram.password}
    plain_client = {"sasl.mechanisms": "PLAIN", "sasl.username": users.plain.name, "sasl.password": users.plain.password}
    tls_client = {"ssl.ca.location": str(pki.ca)}

    listeners = [Listener(PLAIN_LISTENER, "PLAINTEXT")]
    sasl_listeners: dict[str, str] = {}
    if sasl and separate_sasl_listeners:
        listeners.append(Listener(SCRAM_LISTENER, "SASL_SSL", {**tls, "sasl.enabled.mechanisms": "SCRAM-SHA-512", **scram_broker}, {**tls_client, **scram_client}))
        listeners.append(Listener(PLAIN_SASL_LISTENER, "SASL_SSL", {**tls, "sasl.enabled.mechanisms": "PLAIN", **plain_broker}, {**tls_client, **plain_client}))
        sasl_listeners = {"SCRAM-SHA-512": SCRAM_LISTENER, "PLAIN": PLAIN_SASL_LISTENER}
    elif sasl:
        listeners.append(
            Listener(
                SASL_LISTENER, "SASL_SSL",
                {**tls, "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN", **scram_broker, **plain_broker},
                {**tls_client, **scram_client},
            )
        )
        sasl_listeners = {"SCRAM-SHA-512": SASL_LISTENER, "PLAIN": SASL_LISTENER}
    if mtls:
        listeners.append(
            Listener(
                MTLS_LISTENER, "SSL", {**tls, "ssl.client.auth": "required"},
                {**tls_client, "ssl.certificate.location": str(pki.client_cert), "ssl.key.location": str(pki.client_key)},
            )
        )
    return SecureSetup(
        listeners=listeners,
        format_arguments=users.format_arguments() if sasl else [],
        # Listener-prefixed settings carry everything; the global mechanism list must not offer GSSAPI.
        broker_config={"sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN"} if sasl else {},
        sasl_listeners=sasl_listeners,
        mtls_listener=MTLS_LISTENER if mtls else None,
    )


# -- client properties files -------------------------------------------------------------------

MODES = ("scram", "plain", "mtls")
STYLES = ("librdkafka", "java")


def client_properties(
    pki: Pki,
    users: SaslUsers,
    mode: str,
    style: str,
    *,
    password: str | None = None,
    ca: Path | None = None,
    keystore: str = "encrypted",
) -> dict[str, str]:
    """Client properties for ``--command-config`` in librdkafka or Java ``--command-config`` keys.

    mode: scram | plain | mtls. ``password`` replaces the SASL password (wrong-password tests),
    ``ca`` the trusted CA file (unknown-CA tests). ``keystore`` (mtls): ``encrypted`` (key + key
    password), ``plain`` (unencrypted key) or ``expired`` (a certificate past its validity).
    """
    if mode not in MODES or style not in STYLES:
        raise ValueError(f"mode must be one of {MODES}, style one of {STYLES}")
    ca_path = str(ca or pki.ca)
    if mode in ("scram", "plain"):
        user = users.scram if mode == "scram" else users.plain
        secret = user.password if password is None else password
        mechanism = "SCRAM-SHA-512" if mode == "scram" else "PLAIN"
        if style == "librdkafka":
            return {
                "security.protocol": "SASL_SSL",
                "sasl.mechanisms": mechanism,
                "sasl.username": user.name,
                "sasl.password": secret,
                "ssl.ca.location": ca_path,
            }
        module = SCRAM_MODULE if mode == "scram" else PLAIN_MODULE
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": mechanism,
            "sasl.jaas.config": _jaas(module, username=user.name, password=secret),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": ca_path,
            # Java-only tuning keys people keep in these files; kafkatxn ignores them.
            "request.timeout.ms": "20000",
        }
    cert, key, combined, key_password = {
        "encrypted": (pki.client_cert, pki.client_key_encrypted, pki.client_keystore_encrypted, pki.key_password),
        "plain": (pki.client_cert, pki.client_key, pki.client_keystore, None),
        "expired": (pki.expired_cert, pki.expired_key, pki.expired_keystore, None),
    }[keystore]
    if style == "librdkafka":
        props = {
            "security.protocol": "SSL",
            "ssl.ca.location": ca_path,
            "ssl.certificate.location": str(cert),
            "ssl.key.location": str(key),
        }
        if key_password:
            props["ssl.key.password"] = key_password
        return props
    props = {
        "security.protocol": "SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": ca_path,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(combined),
    }
    if key_password:
        props["ssl.key.password"] = key_password
    return props


def write_properties(path: Path, properties: Mapping[str, str]) -> Path:
    """A Java .properties file (backslashes escaped, one line per key)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{k}={v.replace(chr(92), chr(92) * 2)}\n" for k, v in properties.items()))
    path.chmod(0o600)
    return path


@dataclass
class SecureKafka:
    """A running cluster with SASL_SSL and mTLS listeners, and what clients need to use them."""

    cluster: object  # KafkaCluster
    pki: Pki
    users: SaslUsers
    setup: SecureSetup

    def bootstrap(self, mode: str) -> str:
        if mode == "mtls":
            assert self.setup.mtls_listener is not None
            return self.cluster.bootstrap_servers_for(self.setup.mtls_listener)  # type: ignore[attr-defined]
        mechanism = "SCRAM-SHA-512" if mode == "scram" else "PLAIN"
        return self.cluster.bootstrap_servers_for(self.setup.sasl_listeners[mechanism])  # type: ignore[attr-defined]

    @property
    def plaintext_bootstrap(self) -> str:
        return self.cluster.bootstrap_servers_for(PLAIN_LISTENER)  # type: ignore[attr-defined]

    def properties(self, mode: str, style: str, **kwargs: object) -> dict[str, str]:
        return client_properties(self.pki, self.users, mode, style, **kwargs)  # type: ignore[arg-type]

    def secrets(self) -> list[str]:
        return [self.users.scram.password, self.users.plain.password, self.pki.key_password]

    def add_scram_user(self, name: str, password: str, timeout: float = 30) -> SaslUser:
        """A SCRAM-SHA-512 user made at run time (AlterUserScramCredentials over the PLAINTEXT listener).

        Unlike ``kafka-storage format --add-scram``, any password works: spaces, ``:=#!``, non-ASCII.
        """
        from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

        admin = self.cluster.admin_client()  # type: ignore[attr-defined]
        upsert = UserScramCredentialUpsertion(name, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password.encode("utf-8"))
        admin.alter_user_scram_credentials([upsert], request_timeout=timeout)[name].result(timeout)
        # The broker applies the credential from the metadata log: wait until it describes it.
        deadline = time.monotonic() + timeout
        while True:
            try:
                described = admin.describe_user_scram_credentials([name], request_timeout=timeout)[name].result(timeout)
                if described.scram_credential_infos:
                    return SaslUser(name, password)
            except Exception:  # noqa: BLE001 - RESOURCE_NOT_FOUND until it is there
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.2)


# -- authorization -----------------------------------------------------------------------------

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def authorizer_broker_config(*super_users: str) -> dict[str, str]:
    """KRaft's StandardAuthorizer, denying what no ACL allows. ``User:ANONYMOUS`` (the PLAINTEXT
    listener: inter-broker and controller traffic, and the harness's own set-up) is a super user."""
    return {
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": ";".join(["User:ANONYMOUS", *super_users]),
        "allow.everyone.if.no.acl.found": "false",
    }


@dataclass(frozen=True)
class Acl:
    """One ALLOW (or DENY) ACL for a principal: ``Acl("TOPIC", "orders", "READ")``,
    ``Acl("TRANSACTIONAL_ID", "app-", "DESCRIBE", "PREFIXED")``, ``Acl("CLUSTER", "kafka-cluster", "DESCRIBE_CONFIGS")``."""

    resource_type: str  # TOPIC | GROUP | CLUSTER | TRANSACTIONAL_ID
    name: str  # "*" for every resource of the type
    operation: str  # READ | DESCRIBE | DESCRIBE_CONFIGS | CLUSTER_ACTION | ...
    pattern: str = "LITERAL"  # or PREFIXED
    permission: str = "ALLOW"

    def binding(self, principal: str):
        from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

        return AclBinding(
            # confluent-kafka names Kafka's Cluster resource type BROKER (the same code, 4).
            ResourceType["BROKER" if self.resource_type == "CLUSTER" else self.resource_type], self.name, ResourcePatternType[self.pattern], principal, "*",
            AclOperation[self.operation], AclPermissionType[self.permission],
        )


def grant(admin, principal: str, acls: list[Acl], timeout: float = 30) -> None:
    """Create ``acls`` for ``principal`` (``User:name``) as a super user, and wait until the broker's
    authorizer has them (StandardAuthorizer applies ACLs from the metadata log, after the write)."""
    from confluent_kafka.admin import AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    if not acls:
        return
    for future in admin.create_acls([a.binding(principal) for a in acls], request_timeout=timeout).values():
        future.result(timeout)
    wanted = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, principal, None, AclOperation.ANY, AclPermissionType.ANY
    )
    deadline = time.monotonic() + timeout
    while len(admin.describe_acls(wanted, request_timeout=timeout).result(timeout)) < len(acls):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the broker did not apply the ACLs of {principal} within {timeout:g}s")
        time.sleep(0.2)
