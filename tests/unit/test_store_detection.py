"""A trust or key store named without its type is read as Java reads it (issue 24, 6; read, no longer
refused, since issue 27): JKS by default, else what its first bytes say; errors name the user's key
and line, never librdkafka's. Stores keytool writes: tests/unit/test_stores.py."""

from __future__ import annotations

import datetime as dt

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

from kafkatxn import config
from kafkatxn.config.stores import store_format
from kafkatxn.errors import UsageError


def certificate_and_key():
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-ca")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + dt.timedelta(days=1)).sign(key, hashes.SHA256()))
    return cert, key


@pytest.fixture(autouse=True)
def isolated_config_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("KAFKATXN_CONFIG", raising=False)


@pytest.fixture
def stores(tmp_path):
    cert, key = certificate_and_key()
    paths = {
        "pem": tmp_path / "ca.pem",
        "jks": tmp_path / "truststore.jks",
        "jceks": tmp_path / "store.jceks",
        "p12": tmp_path / "keystore.p12",
        "junk": tmp_path / "junk.bin",
    }
    paths["pem"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    # A JKS file begins with the magic 0xFEEDFEED and version 2 (keytool's output; no JVM here to make one).
    paths["jks"].write_bytes(b"\xfe\xed\xfe\xed\x00\x00\x00\x02\x00\x00\x00\x01" + b"\x00" * 64)
    paths["jceks"].write_bytes(b"\xce\xce\xce\xce\x00\x00\x00\x02" + b"\x00" * 64)
    paths["p12"].write_bytes(pkcs12.serialize_key_and_certificates(
        b"client", key, cert, None, serialization.BestAvailableEncryption(b"changeit")))
    paths["junk"].write_bytes(b"\x01\x02\x03 not a store")
    return paths


def test_store_format_from_first_bytes(stores):
    got = {name: store_format(path.read_bytes()) for name, path in stores.items()}
    assert got == {"pem": "PEM", "jks": "JKS", "jceks": "JCEKS", "p12": "PKCS12", "junk": None}


def read(tmp_path, text):
    path = tmp_path / "client.properties"
    path.write_text(text)
    return path, lambda: config.read_properties_file(path)


def refusal(tmp_path, text) -> tuple[str, str]:
    """(the properties file, the one line its loading is refused with)."""
    path, load = read(tmp_path, text)
    with pytest.raises(UsageError) as err:
        load()
    return str(path), str(err.value)


def test_jks_truststore_without_a_type_is_read_as_jks_and_its_faults_named_at_the_users_key_and_line(tmp_path, stores):
    # Issue 27 made stores readable: what is wrong with one (here a JKS header with a bogus entry) is
    # said at the user's key and line, in Java's terms, never librdkafka's.
    path, message = refusal(tmp_path, f"security.protocol=SSL\nssl.truststore.location={stores['jks']}\n")
    assert message == f"{path}:2: ssl.truststore.location={stores['jks']} (JKS): the file is damaged (not a readable store)"
    assert "ssl.ca.location" not in message and "\n" not in message


def test_pkcs12_keystore_without_a_type_is_read_with_a_warning(tmp_path, stores):
    path = tmp_path / "client.properties"
    path.write_text(f"ssl.keystore.location={stores['p12']}\nssl.keystore.password=changeit\n")
    path.chmod(0o600)
    warnings: list[str] = []
    settings = config.read_properties_file(path, warnings)
    assert settings["ssl.key.pem"].startswith("-----BEGIN PRIVATE KEY-----")
    assert warnings == [
        f"{path}:1: ssl.keystore.location={stores['p12']} is a PKCS12 store, not JKS (Java's default when "
        "ssl.keystore.type is not set); read as such, as Java does"
    ]
    assert "changeit" not in " ".join(warnings)


def test_jceks_and_unknown_files_are_refused_at_their_line(tmp_path, stores):
    for name, fragment in (("jceks", r"\(JCEKS\): holds no trusted certificate"), ("junk", "is not a JKS, JCEKS or PKCS12 store, nor a PEM file")):
        path, load = read(tmp_path, f"ssl.truststore.location={stores[name]}\n")
        with pytest.raises(UsageError, match=fragment) as err:
            load()
        assert str(err.value).startswith(f"{path}:1: ssl.truststore.location=")


def test_missing_store_names_the_users_key_not_librdkafkas(tmp_path):
    path, load = read(tmp_path, "security.protocol=SSL\n# the CA\nssl.truststore.location=/nowhere/truststore.jks\n")
    with pytest.raises(UsageError) as err:
        load()
    assert str(err.value) == f"{path}:3: ssl.truststore.location=/nowhere/truststore.jks: no such file"


def test_pem_store_without_a_type_is_read_as_before(tmp_path, stores):
    _, load = read(tmp_path, f"security.protocol=SSL\nssl.truststore.location={stores['pem']}\n")
    assert load()["ssl.ca.location"] == str(stores["pem"])


def test_a_declared_type_is_taken_as_declared(tmp_path, stores):
    # Declared PEM: not opened here (as before); declared JKS: opened as a JKS store.
    _, load = read(tmp_path, "ssl.truststore.type=PEM\nssl.truststore.location=/etc/kafka/ca.pem\n")
    assert load()["ssl.ca.location"] == "/etc/kafka/ca.pem"
    _, load = read(tmp_path, f"ssl.truststore.type=JKS\nssl.truststore.location={stores['jks']}\n")
    with pytest.raises(UsageError, match=r"truststore.jks \(JKS\): the file is damaged"):
        load()


def test_the_same_check_applies_to_the_command_line_and_command_config(tmp_path, stores):
    with pytest.raises(UsageError, match=r"\(JKS\): the file is damaged"):
        config.resolve(bootstrap_servers="b:9092", overrides=[f"ssl.truststore.location={stores['jks']}"])
    path, _ = read(tmp_path, f"ssl.truststore.location={stores['jks']}\n")
    with pytest.raises(UsageError, match=f"{path}:1: ssl.truststore.location="):
        config.resolve(bootstrap_servers="b:9092", command_config=str(path))
