"""JKS, JCEKS and PKCS12 trust and key stores read as Kafka's Java clients read them (issue 27, 1).

Every store here is written by the JDK's own keytool (harness/stores.py), once for the module. A
store becomes in-memory PEM for both clients; its type comes from its first bytes, as in the JVM;
what is wrong with it is one line naming the user's key, file and line, never a password (exit 64).
"""

from __future__ import annotations

import os
import secrets
import socket
import ssl
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from harness.security import make_pki
from harness.stores import (
    client_stores,
    export_certificate,
    keytool,
    secret_key_store,
    self_signed_keystore,
    truststore,
)
from kafkatxn import config
from kafkatxn.config.stores import store_format
from kafkatxn.errors import UsageError
from tests.support.cli_helpers import run_cli

pytestmark = pytest.mark.skipif(keytool() is None and not os.environ.get("CI"), reason="needs the JDK's keytool")

STORE_PW = f"storePw-{secrets.token_hex(6)}"
KEY_PW = f"keyPw-{secrets.token_hex(6)}"
WRONG_PW = f"wrongPw-{secrets.token_hex(6)}"


@pytest.fixture(autouse=True)
def isolated_config_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("KAFKATXN_CONFIG", raising=False)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """The test PKI as stores, and keytool's own self-signed, expired, legacy and key-less stores."""
    root = tmp_path_factory.mktemp("stores")
    pki = make_pki(root / "pki", key_password=f"pemKeyPw-{secrets.token_hex(6)}")
    d = root / "own"
    with ThreadPoolExecutor(3) as pool:
        jobs = {
            "client": pool.submit(client_stores, pki, root / "stores", STORE_PW, KEY_PW),
            "jks": pool.submit(self_signed_keystore, d / "self.jks", "JKS", STORE_PW, KEY_PW),
            "p12": pool.submit(self_signed_keystore, d / "self.p12", "PKCS12", STORE_PW),
            "legacy": pool.submit(self_signed_keystore, d / "legacy.p12", "PKCS12", STORE_PW, legacy=True),
            "expired": pool.submit(self_signed_keystore, d / "expired.jks", "JKS", STORE_PW, start="-30d", days=1),
            "jceks": pool.submit(secret_key_store, d / "secret.jceks", STORE_PW),
        }
        out = {name: job.result() for name, job in jobs.items()}
    expired_pem = d / "expired-cert.pem"
    expired_pem.write_bytes(export_certificate(out["expired"], "JKS", STORE_PW))
    out["expired_trust"] = truststore(d / "expired-trust.jks", expired_pem, "JKS", STORE_PW)
    out["pki"] = pki
    return out


def load(tmp_path: Path, text: str, name: str = "client.properties") -> tuple[Path, config.ConnectionConfig]:
    path = tmp_path / name
    path.write_text(text)
    path.chmod(0o600)
    return path, config.resolve(bootstrap_servers="127.0.0.1:9093", command_config=str(path))


def refused(tmp_path: Path, text: str) -> tuple[Path, str]:
    path = tmp_path / "client.properties"
    path.write_text(text)
    path.chmod(0o600)
    with pytest.raises(UsageError) as err:
        config.resolve(bootstrap_servers="127.0.0.1:9093", command_config=str(path))
    message = str(err.value)
    assert "\n" not in message
    for secret in (STORE_PW, KEY_PW, WRONG_PW):
        assert secret not in message
    return path, message


def props(role: str, path: Path, store_type: str | None = None, password: str | None = STORE_PW, key_password: str | None = None) -> str:
    lines = [f"ssl.{role}.location={path}"]
    if store_type:
        lines.insert(0, f"ssl.{role}.type={store_type}")
    if password is not None:
        lines.append(f"ssl.{role}.password={password}")
    if key_password is not None:
        lines.append(f"ssl.key.password={key_password}")
    return "".join(line + "\n" for line in lines)


def certificates(pem: str) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(pem.encode())


# -- format detection ----------------------------------------------------------------------------


def test_the_format_comes_from_the_first_bytes_of_keytools_files(made):
    client = made["client"]
    got = {
        "jks": store_format(client.keystore["JKS"].read_bytes()),
        "jks truststore": store_format(client.truststore["JKS"].read_bytes()),
        "pkcs12": store_format(client.keystore["PKCS12"].read_bytes()),
        "pkcs12 named .jks": store_format(client.disguised_keystore.read_bytes()),
        "legacy pkcs12": store_format(made["legacy"].read_bytes()),
        "jceks": store_format(made["jceks"].read_bytes()),
        "pem": store_format(made["pki"].ca.read_bytes()),
    }
    assert got == {
        "jks": "JKS", "jks truststore": "JKS", "pkcs12": "PKCS12", "pkcs12 named .jks": "PKCS12",
        "legacy pkcs12": "PKCS12", "jceks": "JCEKS", "pem": "PEM",
    }


# -- trust stores ---------------------------------------------------------------------------------


@pytest.mark.parametrize("store_type", ["JKS", "PKCS12"])
def test_a_truststore_becomes_the_ca_in_memory(made, tmp_path, store_type):
    client = made["client"]
    _, conf = load(tmp_path, "security.protocol=SSL\n" + props("truststore", client.truststore[store_type], store_type))
    assert certificates(conf.settings["ssl.ca.pem"]) == x509.load_pem_x509_certificates(made["pki"].ca.read_bytes())
    assert not {"ssl.ca.location", "ssl.truststore.password"} & set(conf.settings)
    assert conf.warnings == []


def test_a_jks_truststore_without_a_password_is_read_as_java_reads_it(made, tmp_path):
    # Java opens a JKS store without a password, skipping only the integrity check.
    _, conf = load(tmp_path, props("truststore", made["client"].truststore["JKS"], "JKS", password=None))
    assert len(certificates(conf.settings["ssl.ca.pem"])) == 1


# -- key stores -----------------------------------------------------------------------------------


def _key_matches(conf: config.ConnectionConfig) -> x509.Certificate:
    key = serialization.load_pem_private_key(conf.settings["ssl.key.pem"].encode(), None)
    leaf = certificates(conf.settings["ssl.certificate.pem"])[0]
    public = serialization.PublicFormat.SubjectPublicKeyInfo
    assert key.public_key().public_bytes(serialization.Encoding.DER, public) == leaf.public_key().public_bytes(serialization.Encoding.DER, public)
    return leaf


@pytest.mark.parametrize("store_type", ["JKS", "PKCS12"])
def test_a_keystore_becomes_the_client_key_and_chain_in_memory(made, tmp_path, store_type):
    client = made["client"]
    key_password = KEY_PW if store_type == "JKS" else None  # keytool gives PKCS12 entries the store password
    _, conf = load(tmp_path, "security.protocol=SSL\n" + props("keystore", client.keystore[store_type], store_type, key_password=key_password))
    leaf = _key_matches(conf)
    assert leaf == x509.load_pem_x509_certificate(made["pki"].client_cert.read_bytes())
    assert len(certificates(conf.settings["ssl.certificate.pem"])) == 2  # the client's certificate, then the CA
    assert not {"ssl.key.password", "ssl.key.location", "ssl.certificate.location"} & set(conf.settings)
    assert conf.masked()["ssl.key.pem"] == "******"


def test_keytools_own_stores_and_old_keytools_pkcs12_are_read(made, tmp_path):
    for name, store_type, key_password in (("jks", "JKS", KEY_PW), ("p12", "PKCS12", None), ("legacy", "PKCS12", None)):
        _, conf = load(tmp_path, props("keystore", made[name], store_type, key_password=key_password), f"{name}.properties")
        exported = export_certificate(made[name], store_type, STORE_PW)
        assert _key_matches(conf) == x509.load_pem_x509_certificate(exported), name


def test_a_store_password_from_a_config_provider_opens_the_store(made, tmp_path):
    secret_file = tmp_path / "secrets.properties"
    secret_file.write_text(f"store={STORE_PW}\nkey={KEY_PW}\n")
    text = (
        "config.providers=file\n"
        "config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider\n"
        + props("keystore", made["client"].keystore["JKS"], "JKS", f"${{file:{secret_file}:store}}", f"${{file:{secret_file}:key}}")
    )
    _, conf = load(tmp_path, text)
    _key_matches(conf)


# -- declared types that lie ----------------------------------------------------------------------


def test_a_jks_named_pkcs12_store_without_a_type_is_read_by_its_magic_with_a_warning(made, tmp_path):
    client = made["client"]
    text = props("truststore", client.disguised_truststore) + props("keystore", client.disguised_keystore)
    path, conf = load(tmp_path, text)
    _key_matches(conf)
    assert conf.warnings == [
        f"{path}:1: ssl.truststore.location={client.disguised_truststore} is a PKCS12 store, not JKS (Java's default "
        "when ssl.truststore.type is not set); read as such, as Java does",
        f"{path}:3: ssl.keystore.location={client.disguised_keystore} is a PKCS12 store, not JKS (Java's default "
        "when ssl.keystore.type is not set); read as such, as Java does",
    ]


def test_a_declared_type_that_differs_is_said_and_the_file_read_as_what_it_is(made, tmp_path):
    path, conf = load(tmp_path, props("keystore", made["client"].keystore["JKS"], "PKCS12", key_password=KEY_PW))
    _key_matches(conf)
    assert conf.warnings == [
        f"{path}:2: ssl.keystore.location={made['client'].keystore['JKS']} is a JKS store, not PKCS12 "
        "(as ssl.keystore.type says); read as such, as Java does"
    ]


# -- what is wrong: one line each, exit 64 --------------------------------------------------------


def test_wrong_store_passwords_are_named_never_shown(made, tmp_path):
    client = made["client"]
    for store_type in ("JKS", "PKCS12"):
        path, message = refused(tmp_path, props("truststore", client.truststore[store_type], store_type, WRONG_PW))
        assert message == (
            f"{path}:2: ssl.truststore.location={client.truststore[store_type]} ({store_type}): "
            "ssl.truststore.password does not open it (wrong password)"
        )
        path, message = refused(tmp_path, props("keystore", client.keystore[store_type], store_type, WRONG_PW))
        assert message.endswith(f"({store_type}): ssl.keystore.password does not open it (wrong password)"), message


def test_a_wrong_key_password_names_the_entry(made, tmp_path):
    path, message = refused(tmp_path, props("keystore", made["client"].keystore["JKS"], "JKS", key_password=WRONG_PW))
    assert message == (
        f"{path}:2: ssl.keystore.location={made['client'].keystore['JKS']} (JKS): "
        "ssl.key.password does not decrypt the private key of entry 'client' (wrong key password)"
    )
    # No ssl.key.password: Kafka tries the store password, which is not the key's here.
    _, message = refused(tmp_path, props("keystore", made["client"].keystore["JKS"], "JKS"))
    assert "ssl.keystore.password (ssl.key.password is not set) does not decrypt the private key of entry 'client'" in message


def test_a_keystore_without_its_password_is_refused_as_kafkas_tools_refuse_it(made, tmp_path):
    _, message = refused(tmp_path, props("keystore", made["client"].keystore["PKCS12"], "PKCS12", password=None))
    assert message.endswith("(PKCS12): ssl.keystore.password is not set (Kafka's tools need it too)")


def test_stores_without_the_expected_entry(made, tmp_path):
    _, message = refused(tmp_path, props("truststore", made["jceks"], "JCEKS"))
    assert message.endswith("(JCEKS): holds no trusted certificate (import the CA with keytool -importcert)")
    for store_type in ("JKS", "PKCS12"):
        _, message = refused(tmp_path, props("keystore", made["client"].truststore[store_type], store_type))
        assert message.endswith(f"({store_type}): holds no private key entry (is it a trust store?)")


def test_expired_certificates(made, tmp_path):
    _, message = refused(tmp_path, props("keystore", made["expired"], "JKS"))
    assert " (JKS): the certificate of entry 'client' expired on " in message and message.endswith(" UTC; renew it")
    _, message = refused(tmp_path, props("truststore", made["expired_trust"], "JKS"))
    assert " (JKS): every trusted certificate in it has expired (the last on " in message


def test_wrong_types_damaged_and_unknown_files(made, tmp_path):
    path, message = refused(tmp_path, props("truststore", made["pki"].ca, "PKCS12"))
    assert message == f"{path}:2: ssl.truststore.location={made['pki'].ca} is a PEM file, not a PKCS12 store: set ssl.truststore.type=PEM"
    for name, store_type in (("client-p12", "PKCS12"), ("client-jks", "JKS")):
        damaged = tmp_path / f"{name}-damaged"
        source = made["client"].keystore[store_type]
        damaged.write_bytes(source.read_bytes()[: len(source.read_bytes()) // 2])
        _, message = refused(tmp_path, props("keystore", damaged, store_type))
        assert message.endswith(f"({store_type}): the file is damaged (not a readable {'PKCS12 ' if store_type == 'PKCS12' else ''}store)"), message
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x01\x02\x03 not a store")
    _, message = refused(tmp_path, props("truststore", junk))
    assert message.endswith(f"ssl.truststore.location={junk} is not a JKS, JCEKS or PKCS12 store, nor a PEM file")
    path, message = refused(tmp_path, props("truststore", made["client"].truststore["JKS"], "BKS"))
    assert message == f"{path}:1: ssl.truststore.type=BKS is not a store type kafkatxn reads (JKS, PKCS12, JCEKS or PEM)"


def test_the_cli_exits_64_with_one_line(made, tmp_path, capsys):
    path = tmp_path / "client.properties"
    path.write_text("security.protocol=SSL\n" + props("keystore", made["client"].keystore["PKCS12"], "PKCS12", WRONG_PW))
    path.chmod(0o600)
    result = run_cli(capsys, "cluster", "-b", "127.0.0.1:9", "-c", str(path), "--timeout", "2s")
    assert result.code == 64, result
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(f"kafkatxn: error: {path}:3: ssl.keystore.location=")
    assert "wrong password" in result.stderr and WRONG_PW not in result.stderr + result.stdout


# -- both clients take the material from memory ----------------------------------------------------


def _memfds() -> list[str]:
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue
    return [link for link in out if "kafkatxn-tls" in link]


def test_kafka_python_gets_a_context_that_completes_a_mutual_tls_handshake_from_memory(made, tmp_path):
    """A TLS server requiring a client certificate signed by the test CA, as the mTLS broker does."""
    client, pki = made["client"], made["pki"]
    text = props("truststore", client.truststore["PKCS12"], "PKCS12") + props("keystore", client.keystore["JKS"], "JKS", key_password=KEY_PW)
    _, conf = load(tmp_path, "security.protocol=SSL\n" + text)
    before = set(os.listdir(tmp_path))
    kw = conf.kafka_python()
    assert _memfds() == []  # the memory file is gone once the key is loaded
    assert set(os.listdir(tmp_path)) == before and not {"ssl_cafile", "ssl_certfile", "ssl_keyfile"} & set(kw)
    # kafka-python takes the context as it is (tests/unit/test_wire_contract.py pins the rest of its settings).
    from kafka.admin import KafkaAdminClient
    from kafka.net.transport import KafkaSSLTransport

    assert set(kw) <= set(KafkaAdminClient.DEFAULT_CONFIG) and "ssl_context" in KafkaSSLTransport.DEFAULT_CONFIG

    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(pki.broker_keystore)
    server.load_verify_locations(pki.ca)
    server.verify_mode = ssl.CERT_REQUIRED
    listener = socket.create_server(("127.0.0.1", 0))
    seen: dict = {}

    def serve() -> None:
        conn, _ = listener.accept()
        with server.wrap_socket(conn, server_side=True) as tls:
            seen["peer"] = tls.getpeercert()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    with socket.create_connection(listener.getsockname(), timeout=10) as raw:
        with kw["ssl_context"].wrap_socket(raw, server_hostname="localhost") as tls:
            tls.do_handshake()
    thread.join(10)
    listener.close()
    subject = dict(x[0] for x in seen["peer"]["subject"])
    assert subject["commonName"] == "kafkatxn-client"


def test_librdkafka_takes_the_same_pem_strings(made, tmp_path):
    from confluent_kafka.admin import AdminClient

    client = made["client"]
    text = props("truststore", client.truststore["JKS"], "JKS") + props("keystore", client.keystore["PKCS12"], "PKCS12")
    _, conf = load(tmp_path, "security.protocol=SSL\n" + text)
    AdminClient(conf.librdkafka())  # librdkafka loads and checks ssl.ca.pem, ssl.certificate.pem and ssl.key.pem here
    bad = dict(conf.settings, **{"ssl.key.pem": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"})
    with pytest.raises(Exception):
        AdminClient(config.ConnectionConfig("127.0.0.1:9093", bad).librdkafka())


def test_the_in_memory_settings_are_shown_as_such(made, tmp_path):
    client = made["client"]
    _, conf = load(tmp_path, props("truststore", client.truststore["JKS"], "JKS") + props("keystore", client.keystore["PKCS12"], "PKCS12"))
    shown = conf.masked()
    assert shown["ssl.ca.pem"] == "1 PEM certificate(s), in memory"
    assert shown["ssl.certificate.pem"] == "2 PEM certificate(s), in memory"
    assert shown["ssl.key.pem"] == "******"
