"""GSSAPI (Kerberos): Krb5LoginModule's JAAS forms mapped to kafka-python's arguments and MIT's credential
environment, the errors for what cannot be followed, and the one line for commands that need librdkafka
(whose PyPI wheels have no GSSAPI). Logins against a real KDC: tests/integration/test_sasl_gssapi.py."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from kafkatxn import config
from kafkatxn.config.kerberos import LIBRDKAFKA_HAS_NO_GSSAPI, NO_GSSAPI_PACKAGE
from kafkatxn.errors import UsageError

KRB5 = "com.sun.security.auth.module.Krb5LoginModule"


def java_file(tmp_path: Path, jaas: str, *lines: str) -> Path:
    path = tmp_path / "client.properties"
    text = ["security.protocol=SASL_PLAINTEXT", "sasl.mechanism=GSSAPI", "sasl.kerberos.service.name=kafka",
            f"sasl.jaas.config={jaas}", *lines]
    path.write_text("\n".join(text) + "\n")
    return path


@pytest.fixture
def keytab(tmp_path) -> Path:
    path = tmp_path / "client.keytab"
    path.write_bytes(b"\x05\x02")
    path.chmod(0o600)
    return path


def test_the_keytab_form_gives_the_keytab_as_mits_client_keytab_and_tickets_in_memory(tmp_path, keytab, monkeypatch):
    monkeypatch.setenv("KRB5CCNAME", "FILE:/tmp/users-own-cache")
    monkeypatch.delenv("KRB5_CLIENT_KTNAME", raising=False)
    path = java_file(tmp_path, f'{KRB5} required useKeyTab=true storeKey=true keyTab="{keytab}" principal="kt@EXAMPLE.COM";',
                     "sasl.kerberos.min.time.before.relogin=60000")
    cfg = config.resolve("h:1", command_config=str(path))
    assert {k: v for k, v in cfg.settings.items() if "kerberos" in k} == {
        "sasl.kerberos.service.name": "kafka", "sasl.kerberos.keytab": str(keytab), "sasl.kerberos.principal": "kt@EXAMPLE.COM",
    }
    if importlib.util.find_spec("gssapi") is None:
        pytest.skip("the [gssapi] extra is not installed")
    kw = cfg.kafka_python()
    assert (kw["sasl_mechanism"], kw["sasl_kerberos_service_name"]) == ("GSSAPI", "kafka")
    import os

    assert os.environ["KRB5_CLIENT_KTNAME"] == f"FILE:{keytab}"
    assert os.environ["KRB5CCNAME"].startswith("MEMORY:")  # nothing the keytab gets is written to disk
    config.check_settings_as_librdkafka(cfg.settings)  # kafka-python serves it: not refused as librdkafka would


def test_the_ticket_cache_form_names_the_cache_and_jaas_service_name_is_taken(tmp_path, monkeypatch):
    monkeypatch.delenv("KRB5CCNAME", raising=False)
    path = tmp_path / "client.properties"
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n"
        f'sasl.jaas.config={KRB5} required useTicketCache=true ticketCache="/run/user/1000/krb5cc" serviceName="kafka-prod";\n'
    )
    cfg = config.resolve("h:1", command_config=str(path))
    assert cfg.settings["sasl.kerberos.service.name"] == "kafka-prod"
    if importlib.util.find_spec("gssapi") is None:
        pytest.skip("the [gssapi] extra is not installed")
    cfg.kafka_python()
    import os

    assert os.environ["KRB5CCNAME"] == "FILE:/run/user/1000/krb5cc"


@pytest.mark.parametrize("jaas, extra, line, says", [
    (f"{KRB5} required;", (), 4, "Krb5LoginModule needs useKeyTab=true (with keyTab and principal) or useTicketCache=true"),
    (f'{KRB5} required useKeyTab=true principal="kt";', (), 4, "Krb5LoginModule with useKeyTab=true needs keyTab="),
    (f'{KRB5} required useKeyTab=true keyTab="KEYTAB";', (), 4, "Krb5LoginModule with useKeyTab=true needs principal="),
    (f'{KRB5} required useKeyTab=true keyTab="/nonexistent/kt.keytab" principal="kt";', (), 4,
     "the keytab /nonexistent/kt.keytab does not exist"),
    (f"{KRB5} required useTicketCache=true;", ("drop-service",), 2,
     "GSSAPI needs sasl.kerberos.service.name (the brokers' Kerberos service name, often kafka)"),
    (f"{KRB5} required useTicketCache=true;", ("plain",), 4, "sasl.jaas.config is Krb5LoginModule's: it needs sasl.mechanism=GSSAPI"),
])
def test_what_cannot_be_followed_is_one_line_naming_the_key(tmp_path, keytab, jaas, extra, line, says):
    path = java_file(tmp_path, jaas.replace("KEYTAB", str(keytab)))
    text = path.read_text()
    if "drop-service" in extra:
        text = text.replace("sasl.kerberos.service.name=kafka\n", "")
    if "plain" in extra:
        text = text.replace("sasl.mechanism=GSSAPI", "sasl.mechanism=PLAIN")
    path.write_text(text)
    with pytest.raises(UsageError) as refused:
        config.resolve("h:1", command_config=str(path))
    assert str(refused.value).startswith(f"{path}:{line}: ") and says in str(refused.value), str(refused.value)


def test_a_command_that_needs_librdkafka_says_so_in_one_line(tmp_path, keytab):
    cfg = config.resolve("h:1", command_config=str(java_file(
        tmp_path, f'{KRB5} required useKeyTab=true keyTab="{keytab}" principal="kt";')))
    with pytest.raises(UsageError) as refused:
        cfg.librdkafka()
    assert str(refused.value) == LIBRDKAFKA_HAS_NO_GSSAPI
    with pytest.raises(UsageError) as refused:
        cfg.librdkafka(need="consumer group offsets")
    assert str(refused.value).endswith("this command needs confluent-kafka for consumer group offsets")


def test_a_gssapi_config_is_refused_only_where_a_librdkafka_client_is_built(tmp_path, keytab):
    """The exporter's up-front check builds no librdkafka client for GSSAPI (the wire serves it);
    a fence, the cluster description and broker configs need none either."""
    from kafkatxn.kafka import check_client_settings
    from kafkatxn.kafka.facade import Cluster

    if importlib.util.find_spec("gssapi") is None:  # the check builds kafka-python's GSSAPI arguments
        pytest.skip("the [gssapi] extra is not installed")
    cfg = config.resolve("h:1", command_config=str(java_file(
        tmp_path, f'{KRB5} required useKeyTab=true keyTab="{keytab}" principal="kt";')))
    check_client_settings(cfg)  # nothing sent, nothing refused
    with Cluster(cfg) as cluster, pytest.raises(UsageError) as refused:
        cluster.build_admin()
    assert str(refused.value) == LIBRDKAFKA_HAS_NO_GSSAPI


def test_without_the_gssapi_package_the_extra_is_named(tmp_path, keytab, monkeypatch):
    cfg = config.resolve("h:1", command_config=str(java_file(
        tmp_path, f'{KRB5} required useKeyTab=true keyTab="{keytab}" principal="kt";')))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gssapi" else real(name, *a))
    with pytest.raises(UsageError) as refused:
        cfg.kafka_python()
    assert str(refused.value) == NO_GSSAPI_PACKAGE and "kafkatxn[gssapi]" in NO_GSSAPI_PACKAGE
