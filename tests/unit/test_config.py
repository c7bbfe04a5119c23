"""Connection config: properties parsing, Java/librdkafka key mapping, profiles, precedence."""

from __future__ import annotations

import pytest

from kafkatxn import config
from kafkatxn.cli.app import FLAGS
from kafkatxn.errors import InputError, UsageError


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.fixture(autouse=True)
def isolated_config_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("KAFKATXN_CONFIG", raising=False)


JAVA_STYLE = """\
# the file people already pass to kafka-*.sh --command-config
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
    username="alice" \\
    password="s3cr=t;x";
ssl.truststore.type=PEM
ssl.truststore.location=/etc/kafka/ca.pem
ssl.endpoint.identification.algorithm=
request.timeout.ms=20000
"""

LIBRDKAFKA_STYLE = """\
security.protocol=sasl_ssl
sasl.mechanisms=SCRAM-SHA-512
sasl.username=alice
sasl.password=s3cr=t;x
ssl.ca.location=/etc/kafka/ca.pem
ssl.endpoint.identification.algorithm=none
"""


def test_java_and_librdkafka_files_resolve_to_the_same_settings(tmp_path):
    java = config.read_properties_file(write(tmp_path, "java.properties", JAVA_STYLE))
    rdk = config.read_properties_file(write(tmp_path, "rdk.properties", LIBRDKAFKA_STYLE))
    assert java == rdk
    assert java["sasl.username"] == "alice"
    assert java["sasl.password"] == "s3cr=t;x"
    assert java["security.protocol"] == "SASL_SSL"


def test_both_styles_give_the_same_kafka_python_arguments(tmp_path):
    java = config.resolve("h:9092", command_config=str(write(tmp_path, "j.properties", JAVA_STYLE)))
    rdk = config.resolve("h:9092", command_config=str(write(tmp_path, "r.properties", LIBRDKAFKA_STYLE)))
    kw = java.kafka_python()
    assert kw == rdk.kafka_python()
    assert kw["sasl_mechanism"] == "SCRAM-SHA-512"
    assert kw["sasl_plain_password"] == "s3cr=t;x"
    assert kw["ssl_cafile"] == "/etc/kafka/ca.pem"
    assert kw["ssl_check_hostname"] is False
    assert java.librdkafka()["sasl.mechanisms"] == "SCRAM-SHA-512"


def test_plain_jaas_without_quotes(tmp_path):
    text = "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=bob password=pw;\n"
    props = config.read_properties_file(write(tmp_path, "p.properties", text))
    assert (props["sasl.username"], props["sasl.password"]) == ("bob", "pw")


def test_pem_keystore_maps_to_certificate_and_key(tmp_path):
    text = "security.protocol=SSL\nssl.keystore.type=PEM\nssl.keystore.location=/k/client.pem\nssl.key.password=kp\n"
    props = config.read_properties_file(write(tmp_path, "p.properties", text))
    assert props["ssl.certificate.location"] == props["ssl.key.location"] == "/k/client.pem"
    assert props["ssl.key.password"] == "kp"


@pytest.mark.parametrize(
    "text, line, fragment",
    [
        ("security.protocol=SSL\njustakey\n", 2, "unsupported property (not shown"),
        ("security.protocol=SSL\nthis has a space separator\n", 2, "unsupported property (not shown"),
        ("security.protocol=SSL\nsasl.mechanism\\\n  =PLAIN\nwhat.is.this   x\n", 4, "unsupported property 'what.is.this'"),
        ("sasl.jaas.config=\\u00zz\n", 1, "malformed \\uxxxx"),
        ("a.b.c=1\n", 1, "unsupported property 'a.b.c'"),
        ("ssl.truststore.type=JKS\nssl.truststore.location=/x.jks\n", 2, "JKS"),
        ("sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required;\n", 1, "Krb5LoginModule needs useKeyTab=true"),
        ("sasl.mechanism=GSSAPI\n", 1, "GSSAPI"),
        ("security.protocol=TLS\n", 1, "security.protocol"),
        # A value Kafka's clients would refuse is refused, even for a key kafkatxn does not use.
        ("security.protocol=SSL\n# timeouts\nrequest.timeout.ms=abc\n", 3, "request.timeout.ms='abc' is not a number (an int"),
        ("retries=1.5\n", 1, "retries='1.5' is not a number (an int"),
        ("default.api.timeout.ms=2147483648\n", 1, "default.api.timeout.ms='2147483648' is not a number (an int"),
        ("metadata.max.age.ms=\n", 1, "metadata.max.age.ms='' is not a number (a long"),
        ("sasl.login.refresh.buffer.seconds=40000\n", 1, "(a short"),
        ("sasl.kerberos.ticket.renew.jitter=0,05\n", 1, "sasl.kerberos.ticket.renew.jitter='0,05' is not a number (a double"),
        ("sasl.login.refresh.window.factor=high\n", 1, "sasl.login.refresh.window.factor='high' is not a number"),
        ("ssl.endpoint.identification.algorithm=htps\n", 1, "must be https, or empty"),
        ("sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required useKeyTab=yes keyTab=/k principal=p;\n", 1,
         "useKeyTab must be true or false"),
    ],
)
def test_bad_properties_name_the_line(tmp_path, text, line, fragment):
    path = write(tmp_path, "bad.properties", text)
    with pytest.raises(UsageError) as err:
        config.read_properties_file(path)
    assert f"{path}:{line}:" in str(err.value)
    assert fragment in str(err.value)


def test_numbers_are_read_as_kafkas_clients_read_them(tmp_path):
    path = write(tmp_path, "ok.properties", "request.timeout.ms=+30000\nretry.backoff.ms= 100 \nretries=-1\n"
                 "sasl.login.refresh.window.jitter=.05\nsasl.kerberos.ticket.renew.jitter=1e-2d\n"
                 "sasl.kerberos.ticket.renew.window.factor=0x1p-1\nsasl.login.refresh.min.period.seconds=60\n")
    assert config.read_properties_file(path) == {}  # all read, all Java-only tuning


def test_a_bad_number_on_the_command_line_or_in_a_profile_is_a_usage_error(tmp_path, capsys):
    from tests.support.cli_helpers import run_cli

    path = write(tmp_path, "c.properties", "security.protocol=PLAINTEXT\nrequest.timeout.ms=abc\n")
    shown = run_cli(capsys, "cluster", "-b", "localhost:1", "--command-config", str(path))
    assert shown.code == 64 and shown.stdout == ""
    assert shown.stderr.strip() == f"kafkatxn: error: {path}:2: request.timeout.ms='abc' is not a number (an int, as Kafka's clients read it)"
    profiles(tmp_path, "[profiles.p]\nbootstrap_servers='a:1'\ntimeout='soon'\n")
    with pytest.raises(UsageError, match=r"config.toml profiles.p.timeout: bad duration 'soon'"):
        config.resolve(profile="p")


def test_malformed_line_is_not_echoed_because_it_may_hold_a_secret(tmp_path):
    path = write(tmp_path, "bad.properties", "security.protocol=SASL_SSL\nhunter2\n")
    with pytest.raises(UsageError) as err:
        config.read_properties_file(path)
    assert "hunter2" not in str(err.value)


def test_whitespace_separator_is_accepted_as_java_does():
    # java.util.Properties.load reads "key value" like "key=value"; files written for kafka-*.sh may use it.
    lines = config.parse_properties("security.protocol SASL_SSL\nsasl.mechanism   SCRAM-SHA-512\n")
    assert [(p.key, p.value) for p in lines] == [("security.protocol", "SASL_SSL"), ("sasl.mechanism", "SCRAM-SHA-512")]


def test_continuation_comments_and_separators():
    lines = config.parse_properties("# c\n! c2\na = 1\nb: 2\nc=x\\\n  y\nd=trailing\\\\\n")
    assert [(p.key, p.value, p.line) for p in lines] == [("a", "1", 3), ("b", "2", 4), ("c", "xy", 5), ("d", "trailing\\", 7)]


def test_missing_file_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        config.read_properties_file(tmp_path / "nope.properties")


def test_no_bootstrap_is_a_usage_error():
    with pytest.raises(InputError) as raised:
        config.resolve()
    # The library names its inputs; the CLI words them with its flags.
    assert raised.value.worded(FLAGS) == (
        "no cluster given: pass --bootstrap-server HOST:PORT, set KAFKATXN_BOOTSTRAP_SERVERS, or use --profile"
    )
    assert "--" not in str(raised.value)


@pytest.mark.parametrize("servers", ["localhost", "a:b", "h:9092,", "h:9092 x"])
def test_bad_bootstrap_is_a_usage_error(servers):
    if servers == "h:9092,":
        assert config.resolve(servers).bootstrap_servers == "h:9092"
        return
    with pytest.raises(UsageError):
        config.resolve(servers)


def profiles(tmp_path, text):
    path = tmp_path / "xdg" / "kafkatxn" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    return path


def test_profile_supplies_what_flags_do_not(tmp_path):
    props = write(tmp_path, "prod.properties", "security.protocol=SSL\nssl.ca.location=/ca.pem\n")
    profiles(
        tmp_path,
        f"""
default_profile = "prod"
[profiles.prod]
bootstrap_servers = "prod1:9093,prod2:9093"
command_config = "{props}"
timeout = "45s"
[profiles.prod.properties]
"client.id" = "oncall"
""",
    )
    cfg = config.resolve()
    assert cfg.profile == "prod"
    assert cfg.bootstrap_servers == "prod1:9093,prod2:9093"
    assert cfg.timeout_ms == 45_000
    assert cfg.settings["security.protocol"] == "SSL"
    assert cfg.settings["client.id"] == "oncall"
    # flags (and env, which the CLI layer merges into the same arguments) win over the profile
    cfg = config.resolve("flag:1", timeout="5s", overrides=["client.id=x"])
    assert (cfg.bootstrap_servers, cfg.timeout_ms, cfg.settings["client.id"]) == ("flag:1", 5000, "x")


def test_unknown_profile_lists_the_known_ones(tmp_path):
    profiles(tmp_path, "[profiles.a]\nbootstrap_servers='a:1'\n[profiles.b]\nbootstrap_servers='b:1'\n")
    with pytest.raises(UsageError, match=r"profile 'c' not found .*profiles: a, b"):
        config.resolve(profile="c")


def test_masked_hides_secrets(tmp_path):
    cfg = config.resolve("h:1", command_config=str(write(tmp_path, "j.properties", JAVA_STYLE)))
    shown = cfg.masked()
    assert shown["sasl.password"] == "******"
    assert "s3cr=t;x" not in repr(shown)
    assert shown["sasl.username"] == "alice"


def test_librdkafka_config_carries_the_deadline():
    cfg = config.resolve("h:1", timeout="7s")
    conf = cfg.librdkafka()
    assert conf["socket.timeout.ms"] == 7000
    assert conf["bootstrap.servers"] == "h:1"


@pytest.mark.parametrize("settings,says", [
    ({"security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN", "sasl.username": "u"}, "sasl.username and sasl.password must be set"),
    ({"security.protocol": "SASL_PLAINTEXT"}, "GSSAPI needs sasl.kerberos.service.name"),  # librdkafka's default mechanism
    ({"security.protocol": "SSL", "ssl.ca.location": "/nonexistent/ca.pem"}, "ssl.ca.location: no such file /nonexistent/ca.pem"),
])
def test_what_librdkafka_refuses_when_a_client_is_built_is_refused_without_one(settings, says):
    """A command served by kafka-python alone builds no librdkafka client: its checks run anyway."""
    with pytest.raises(UsageError, match=says):
        config.check_settings_as_librdkafka(settings)


def test_client_files_are_not_checked_when_tls_is_off():
    config.check_settings_as_librdkafka({"ssl.ca.location": "/nonexistent/ca.pem"})
    config.check_settings_as_librdkafka({"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "u", "sasl.password": ""})
