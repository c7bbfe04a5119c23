"""Where connection settings come from: Java properties constructs, config providers, secret sources.

Properties: java.util.Properties' format as Kafka's tools read --command-config (ISO-8859-1 bytes,
escapes, continuations, trailing spaces). Config providers: Kafka's ${provider:[path:]key} syntax with
its file, directory and environment providers, and their params. Secrets: never from -X; from the
environment, a prompt, a file; files holding them should be private.
"""

from __future__ import annotations

import os

import pytest

from kafkatxn import config
from kafkatxn.cli.app import FLAGS
from kafkatxn.errors import InputError, UsageError

FILE = "org.apache.kafka.common.config.provider.FileConfigProvider"
DIR = "org.apache.kafka.common.config.provider.DirectoryConfigProvider"
ENV = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"
PROVIDERS = f"config.providers=file,env,dir\nconfig.providers.file.class={FILE}\nconfig.providers.env.class={ENV}\nconfig.providers.dir.class={DIR}\n"


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("KAFKATXN_CONFIG", raising=False)
    for variable in config.SECRET_ENVIRONMENT.values():
        monkeypatch.delenv(variable, raising=False)


def write(path, text: str | bytes, mode: int = 0o600):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode("iso-8859-1"))
    path.chmod(mode)
    return path


# -- java.util.Properties ---------------------------------------------------------------------------


def test_every_java_construct_reads_as_java_reads_it():
    text = (
        "# comment\n"
        "! another comment\n"
        "   \n"
        "sasl\\u002emechanism : PLAIN\n"  # \u escape in a key, ':' separator with spaces
        "security.protocol SASL_SSL   \n"  # whitespace separator, trailing spaces (Kafka trims its keys)
        "sasl.username\t=\tb\\u00f6b\n"
        "sasl.password=p\\u00e4ss \\\n"  # continuation: leading whitespace of the next line dropped
        "      word\\ \\ \n"  # escaped trailing spaces
        "key\\ with\\:odd\\=chars=v\n"
        "empty.value\n"
    )
    lines = config.parse_properties(text, "f")
    assert [(p.line, p.key, p.value) for p in lines] == [
        (4, "sasl.mechanism", "PLAIN"),
        (5, "security.protocol", "SASL_SSL   "),
        (6, "sasl.username", "b\u00f6b"),
        (7, "sasl.password", "p\u00e4ss word  "),
        (9, "key with:odd=chars", "v"),
        (10, "empty.value", ""),
    ]
    settings = config.normalize_properties([p for p in lines if p.key not in ("key with:odd=chars", "empty.value")])
    assert settings["security.protocol"] == "SASL_SSL"  # Kafka's ConfigDef trims the values of its keys
    assert settings["sasl.password"] == "p\u00e4ss word  "  # librdkafka's keys are taken as they are


def test_kafka_keys_are_trimmed_as_javas_string_trim_does():
    lines = [config.PropertyLine("f", 1, "ssl.key.password", "\x01kp\u00a0\x1f "), config.PropertyLine("f", 2, "sasl.password", " pw\u00a0 ")]
    settings = config.normalize_properties(lines)
    assert settings["ssl.key.password"] == "kp\u00a0"  # trim() removes <= U+0020 only; a no-break space stays
    assert settings["sasl.password"] == " pw\u00a0 "


def test_line_numbers_count_cr_crlf_and_continuations():
    text = "a=1\r\nb=2\rc=x\\\r\n  y\nd=4"
    assert [(p.key, p.line) for p in config.parse_properties(text)] == [("a", 1), ("b", 2), ("c", 3), ("d", 5)]


def test_files_are_read_as_iso_8859_1_like_kafka_tools_and_utf8_gets_a_warning(tmp_path):
    raw = write(tmp_path / "utf8.properties", "sasl.username=b\u00f6b\n".encode("utf-8"))
    warnings: list[str] = []
    lines = config.load_properties_file(raw, warnings)
    assert lines[0].value == "b\u00c3\u00b6b"  # what Properties.load(InputStream) makes of UTF-8 bytes
    assert any("ISO-8859-1" in w and "\\uXXXX" in w for w in warnings)
    escaped = write(tmp_path / "escaped.properties", "sasl.username=b\\u00f6b\n")
    warnings.clear()
    assert config.load_properties_file(escaped, warnings)[0].value == "b\u00f6b"
    assert warnings == []


def test_a_stray_secret_on_a_line_of_its_own_is_not_echoed(tmp_path):
    path = write(tmp_path / "p.properties", "security.protocol=SSL\nHunter2Secret\n")
    with pytest.raises(UsageError) as err:
        config.read_properties_file(path)
    assert f"{path}:2:" in str(err.value) and "Hunter2Secret" not in str(err.value)


# -- config providers -------------------------------------------------------------------------------


def test_file_env_and_dir_references_resolve(tmp_path, monkeypatch):
    secrets = write(tmp_path / "secrets.properties", "user=alice\npw=s3cr\\u00e9t \n")
    (tmp_path / "dir").mkdir()
    write(tmp_path / "dir" / "key-password", "kp\n")
    monkeypatch.setenv("KT_TEST_PW", "from env")
    props = write(
        tmp_path / "client.properties",
        PROVIDERS
        + "sasl.mechanism=SCRAM-SHA-512\n"
        + "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        + f'   username="${{file:{secrets}:user}}" password="${{env:KT_TEST_PW}}-${{file:{secrets}:pw}}";\n'
        + f"ssl.key.password=${{dir:{tmp_path / 'dir'}:key-password}}\n",
    )
    settings = config.read_properties_file(props)
    assert settings["sasl.username"] == "alice"
    assert settings["sasl.password"] == "from env-s3cr\u00e9t "  # the provider's file is UTF-8 Properties
    assert settings["ssl.key.password"] == "kp"  # ssl.key.password is Kafka's: trimmed, as its ConfigDef does
    assert not any(k.startswith("config.providers") for k in settings)


@pytest.mark.parametrize(
    "reference, fragment",
    [
        ("${env:KT_NOT_SET}", "environment variable KT_NOT_SET is not set"),
        ("${env:some/path:KT_TEST_PW}", "Path is not supported for EnvVarConfigProvider, invalid value 'some/path'"),
        ("${file:/nonexistent/x.properties:pw}", "Could not read properties from file /nonexistent/x.properties"),
        ("${file:SECRETS:nokey}", "no property 'nokey' in"),
        ("${dir:/nonexistent:pw}", "The path /nonexistent is not a directory"),
        ("${dir:DIR:nofile}", "no file 'nofile' in directory"),
        ("${vault:secret/kafka:pw}", "no config provider named 'vault'"),
    ],
)
def test_unresolvable_references_are_usage_errors_naming_reference_and_line(tmp_path, monkeypatch, reference, fragment):
    secrets = write(tmp_path / "secrets.properties", "pw=TopSecretValue\n")
    (tmp_path / "dir").mkdir()
    monkeypatch.setenv("KT_TEST_PW", "TopSecretValue")
    reference = reference.replace("SECRETS", str(secrets)).replace("DIR", str(tmp_path / "dir"))
    path = write(tmp_path / "c.properties", PROVIDERS + "sasl.mechanism=PLAIN\nsasl.username=u\n" + f"sasl.password={reference}\n")
    with pytest.raises(UsageError) as err:
        config.read_properties_file(path)
    message = str(err.value)
    assert f"{path}:7: {reference} (in sasl.password): " in message
    assert fragment.replace("SECRETS", str(secrets)) in message
    assert "TopSecretValue" not in message


def test_a_reference_without_config_providers_is_refused(tmp_path):
    path = write(tmp_path / "c.properties", "sasl.password=${env:HOME}\n")
    with pytest.raises(UsageError, match=r"c.properties:1: \$\{env:HOME\} \(in sasl.password\) refers to config provider 'env', but config.providers"):
        config.read_properties_file(path)


def test_other_provider_classes_are_refused(tmp_path):
    path = write(tmp_path / "c.properties", "config.providers=v\nconfig.providers.v.class=com.example.VaultConfigProvider\n")
    with pytest.raises(UsageError, match=r":2: config provider class com.example.VaultConfigProvider is not supported"):
        config.read_properties_file(path)


def test_provider_names_are_split_as_kafka_splits_them(tmp_path, monkeypatch):
    # "file, env" declares " env", which has no class: Kafka skips it and leaves ${env:...} unresolved.
    monkeypatch.setenv("KT_TEST_PW", "x")
    path = write(
        tmp_path / "c.properties",
        f"config.providers=file, env\nconfig.providers.file.class={FILE}\nconfig.providers.env.class={ENV}\nsasl.password=${{env:KT_TEST_PW}}\n",
    )
    with pytest.raises(UsageError, match="no config provider named 'env'"):
        config.read_properties_file(path)


def test_env_allowlist_pattern_matches_the_whole_name(tmp_path, monkeypatch):
    monkeypatch.setenv("KAFKA_PW", "ok")
    monkeypatch.setenv("KAFKA_PW_OTHER", "no")
    base = f"config.providers=env\nconfig.providers.env.class={ENV}\nconfig.providers.env.param.allowlist.pattern=KAFKA_PW\n"
    assert config.read_properties_file(write(tmp_path / "a.properties", base + "sasl.password=${env:KAFKA_PW}\n"))["sasl.password"] == "ok"
    with pytest.raises(UsageError, match="KAFKA_PW_OTHER is not allowed by config.providers.env.param.allowlist.pattern"):
        config.read_properties_file(write(tmp_path / "b.properties", base + "sasl.password=${env:KAFKA_PW_OTHER}\n"))


def test_allowed_paths_of_file_and_directory_providers(tmp_path):
    inside = tmp_path / "allowed"
    write(inside / "s.properties", "pw=in\n")
    write(tmp_path / "outside.properties", "pw=out\n")
    base = f"config.providers=file\nconfig.providers.file.class={FILE}\nconfig.providers.file.param.allowed.paths={inside}\n"
    ok = write(tmp_path / "ok.properties", base + f"sasl.password=${{file:{inside}/s.properties:pw}}\n")
    assert config.read_properties_file(ok)["sasl.password"] == "in"
    sneaky = write(tmp_path / "sneaky.properties", base + f"sasl.password=${{file:{inside}/../outside.properties:pw}}\n")
    with pytest.raises(UsageError, match="is not allowed to be accessed"):
        config.read_properties_file(sneaky)
    relative = write(tmp_path / "rel.properties", base.replace(str(inside), "relative/dir"))
    with pytest.raises(UsageError, match="Path relative/dir is not absolute"):
        config.read_properties_file(relative)


def test_providers_declared_in_a_profile_serve_the_command_config_file(tmp_path, monkeypatch):
    monkeypatch.setenv("KT_TEST_PW", "pw-from-env")
    profiles = tmp_path / "xdg" / "kafkatxn" / "config.toml"
    write(profiles, f'[profiles.p]\nbootstrap_servers = "h:1"\n[profiles.p.properties]\n"config.providers" = "env"\n"config.providers.env.class" = "{ENV}"\n')
    props = write(tmp_path / "c.properties", "sasl.mechanism=PLAIN\nsasl.username=u\nsasl.password=${env:KT_TEST_PW}\n")
    cfg = config.resolve(profile="p", command_config=str(props))
    assert cfg.settings["sasl.password"] == "pw-from-env"
    assert "config.providers" not in cfg.settings


# -- secrets: never in argv -------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["sasl.password", "ssl.key.password", "sasl.jaas.config", "ssl.keystore.password", "ssl.truststore.password", "ssl.keystore.key"])
def test_x_refuses_secrets_and_says_where_to_put_them(key):
    with pytest.raises(InputError) as err:
        config.resolve("h:1", overrides=[f"{key}=Hunter2Secret"])
    assert "Hunter2Secret" not in str(err.value) and "-X" not in str(err.value)
    message = err.value.worded(FLAGS)  # as the CLI says it
    assert message.startswith(f"-X {key} refused: secrets are not taken from the command line")
    assert "--command-config" in message and "${env:VAR}" in message and "Hunter2Secret" not in message
    if key in config.SECRET_ENVIRONMENT:
        assert config.SECRET_ENVIRONMENT[key] in message


def test_x_takes_a_reference_to_a_secret(tmp_path, monkeypatch):
    monkeypatch.setenv("KT_TEST_PW", "pw")
    props = write(tmp_path / "c.properties", f"config.providers=env\nconfig.providers.env.class={ENV}\nsasl.mechanism=PLAIN\nsasl.username=u\n")
    cfg = config.resolve("h:1", command_config=str(props), overrides=["sasl.password=${env:KT_TEST_PW}"])
    assert cfg.settings["sasl.password"] == "pw"


def test_an_x_argument_without_equals_is_not_echoed():
    with pytest.raises(UsageError) as err:
        config.resolve("h:1", overrides=["Hunter2Secret"])
    assert "Hunter2Secret" not in str(err.value)


def test_secret_environment_variables_override_the_file(tmp_path, monkeypatch):
    props = write(tmp_path / "c.properties", "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username=u\nsasl.password=from-file\n")
    monkeypatch.setenv("KAFKATXN_SASL_PASSWORD", "from-env")
    monkeypatch.setenv("KAFKATXN_SSL_KEY_PASSWORD", "key-from-env")
    cfg = config.resolve("h:1", command_config=str(props))
    assert cfg.settings["sasl.password"] == "from-env"
    assert cfg.settings["ssl.key.password"] == "key-from-env"
    assert cfg.sources["sasl.password"] == "KAFKATXN_SASL_PASSWORD"
    assert cfg.masked()["sasl.password"] == "******"


def test_ask_password_prompts_for_the_sasl_password(tmp_path):
    props = write(tmp_path / "c.properties", "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username=alice\n")
    prompts = []
    cfg = config.resolve("h:1", command_config=str(props), ask_password=True, prompt=lambda text: prompts.append(text) or "typed")
    assert cfg.settings["sasl.password"] == "typed" and prompts == ["SASL password for alice: "]


def test_ask_password_prompts_for_the_key_password_without_sasl(tmp_path):
    props = write(tmp_path / "c.properties", "security.protocol=SSL\nssl.key.location=/k.pem\nssl.certificate.location=/c.pem\n")
    assert config.resolve("h:1", command_config=str(props), ask_password=True, prompt=lambda text: "typed").settings["ssl.key.password"] == "typed"


@pytest.mark.parametrize("answer, says", [(EOFError, "--ask-password got no password"), (KeyboardInterrupt, "--ask-password got no password"), ("", "--ask-password got an empty password")])
def test_ask_password_without_an_answer_is_refused(tmp_path, answer, says):
    props = write(tmp_path / "c.properties", "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username=alice\n")

    def prompt(text: str) -> str:
        if isinstance(answer, str):
            return answer
        raise answer

    with pytest.raises(InputError) as raised:
        config.resolve("h:1", command_config=str(props), ask_password=True, prompt=prompt)
    assert raised.value.worded(FLAGS) == says


def test_ask_password_without_a_prompt_says_a_secret_is_needed_and_what_to_use_instead(tmp_path):
    props = write(tmp_path / "c.properties", "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username=alice\n")
    with pytest.raises(config.SecretNeeded) as raised:
        config.resolve("h:1", command_config=str(props), ask_password=True)
    assert (raised.value.key, raised.value.variable) == ("sasl.password", "KAFKATXN_SASL_PASSWORD")
    assert raised.value.worded(FLAGS) == (
        "--ask-password needs a terminal; without one, set KAFKATXN_SASL_PASSWORD or put sasl.password in the --command-config file"
    )
    with pytest.raises(InputError) as raised:
        config.resolve("h:1", ask_password=True)
    assert raised.value.worded(FLAGS).startswith("--ask-password found nothing that needs a password")


def test_cli_ask_password_prompts_on_the_terminal_without_echo(tmp_path, monkeypatch, capsys):
    from tests.support.cli_helpers import run_cli

    props = write(tmp_path / "c.properties", "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username=alice\n")
    asked = []
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("getpass.getpass", lambda prompt, stream=None: asked.append((prompt, stream)) or "Hunter2Typed")
    result = run_cli(capsys, "config", "show", "-b", "h:1", "-c", str(props), "--ask-password", "-o", "json")
    assert result.code == 0, result.stderr
    import sys

    assert asked == [("SASL password for alice: ", sys.stderr)]
    assert '"sasl.password"' in result.stdout and "Hunter2Typed" not in result.stdout + result.stderr


# -- files holding secrets are private --------------------------------------------------------------


@pytest.mark.parametrize("mode, warned", [(0o600, False), (0o400, False), (0o640, True), (0o604, True), (0o644, True)])
def test_a_readable_properties_file_with_a_secret_gets_a_warning(tmp_path, mode, warned):
    props = write(tmp_path / "c.properties", "sasl.mechanism=PLAIN\nsasl.username=u\nsasl.password=pw\n", mode)
    cfg = config.resolve("h:1", command_config=str(props))
    assert any(f"{props} holds secrets and is readable" in w and f"{mode:04o}" in w and "chmod 600" in w for w in cfg.warnings) == warned


def test_a_readable_file_without_a_literal_secret_gets_no_warning(tmp_path, monkeypatch):
    monkeypatch.setenv("KT_TEST_PW", "pw")
    props = write(
        tmp_path / "c.properties",
        f"config.providers=env\nconfig.providers.env.class={ENV}\nsasl.mechanism=PLAIN\nsasl.username=u\nsasl.password=${{env:KT_TEST_PW}}\n",
        0o644,
    )
    assert config.resolve("h:1", command_config=str(props)).warnings == []


def test_a_readable_profile_file_with_a_secret_gets_a_warning(tmp_path):
    profiles = write(tmp_path / "xdg" / "kafkatxn" / "config.toml", '[profiles.p]\nbootstrap_servers = "h:1"\n[profiles.p.properties]\n"sasl.password" = "pw"\n', 0o644)
    (warning,) = config.resolve(profile="p").warnings
    assert str(profiles) in warning and "0644" in warning
    os.chmod(profiles, 0o600)
    assert config.resolve(profile="p").warnings == []


def test_a_nul_character_is_refused_because_librdkafka_would_cut_the_value_there(tmp_path):
    path = write(tmp_path / "c.properties", b"client.id=ab\\u0000cd\nsasl.password=x\x00y\n")
    with pytest.raises(UsageError, match=r"c.properties:1: the value of client.id holds a NUL"):
        config.read_properties_file(path)


# -- through the CLI: one line on stderr, the right exit code ---------------------------------------


def test_cli_refuses_a_secret_in_x_with_one_line_and_exit_64(capsys):
    from tests.support.cli_helpers import run_cli

    result = run_cli(capsys, "config", "show", "-b", "h:1", "-X", "sasl.password=Hunter2Secret")
    assert result.code == 64
    (line,) = result.stderr.splitlines()
    assert line.startswith("kafkatxn: error: -X sasl.password refused: secrets are not taken from the command line")
    assert "KAFKATXN_SASL_PASSWORD" in line and "--ask-password" in line
    assert "Hunter2Secret" not in result.stdout + result.stderr


def test_cli_warns_about_a_readable_secrets_file_and_still_works(tmp_path, capsys):
    from tests.support.cli_helpers import run_cli

    props = write(tmp_path / "c.properties", "sasl.mechanism=PLAIN\nsasl.username=u\nsasl.password=Hunter2Secret\n", 0o644)
    result = run_cli(capsys, "config", "show", "-b", "h:1", "-c", str(props))
    assert result.code == 0
    assert result.stderr == f"kafkatxn: warning: {props} holds secrets and is readable by group and others (mode 0644); chmod 600 {props}\n"
    assert "Hunter2Secret" not in result.stdout + result.stderr


def test_cli_ask_password_without_a_terminal_is_a_usage_error(tmp_path, capsys):
    from tests.support.cli_helpers import run_cli

    props = write(tmp_path / "c.properties", "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username=u\n")
    result = run_cli(capsys, "config", "show", "-b", "h:1", "-c", str(props), "--ask-password")
    assert result.code == 64 and "--ask-password needs a terminal" in result.stderr


def test_cli_error_about_a_reference_in_a_password_key_is_not_masked_into_nonsense(tmp_path, capsys):
    from tests.support.cli_helpers import run_cli

    props = write(tmp_path / "c.properties", f"config.providers=env\nconfig.providers.env.class={ENV}\nsasl.password=${{env:KT_NOT_SET}}\n")
    result = run_cli(capsys, "config", "show", "-b", "h:1", "-c", str(props))
    assert result.code == 64
    assert result.stderr == (
        f"kafkatxn: error: {props}:3: ${{env:KT_NOT_SET}} (in sasl.password): environment variable KT_NOT_SET is not set\n"
    )


def test_jaas_quoted_strings_take_stream_tokenizer_escapes(tmp_path):
    # Kafka's JAAS parser (java.io.StreamTokenizer): \n is a newline, \101 octal, \q stands for q.
    path = write(tmp_path / "j.properties", 'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="u\\\\n1" password="p\\\\101\\\\q\\\\"";\n')
    settings = config.read_properties_file(path)
    assert (settings["sasl.username"], settings["sasl.password"]) == ("u\n1", 'pAq"')


def test_a_last_line_of_only_a_backslash_is_ignored_as_kafka_ignores_it():
    assert [(p.key, p.value) for p in config.parse_properties("a=1\n\t\\")] == [("a", "1"), ("", "")]
    assert config.normalize_properties(config.parse_properties("client.id=x\n \\")) == {"client.id": "x"}


def test_cli_ask_password_with_nothing_to_ask_for_says_so_unmasked(capsys):
    from tests.support.cli_helpers import run_cli

    result = run_cli(capsys, "config", "show", "-b", "h:1", "--ask-password")
    assert result.code == 64
    assert result.stderr == (
        "kafkatxn: error: --ask-password found nothing that needs a password (no SASL mechanism and no client key configured)\n"
    )


def test_errors_about_overrides_name_the_input_and_the_cli_words_it_as_x(capsys):
    from tests.support.cli_helpers import run_cli

    with pytest.raises(InputError) as raised:
        config.resolve("h:1", overrides=["client.id=x", "foo.bar={1}"])
    assert str(raised.value) == "overrides:2: unsupported property 'foo.bar'"
    assert raised.value.worded(FLAGS) == "-X:2: unsupported property 'foo.bar'"
    result = run_cli(capsys, "config", "show", "-b", "h:1", "-X", "sasl.mechanism=FOO")
    assert (result.code, result.stderr) == (64, "kafkatxn: error: -X:1: SASL mechanism FOO is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, GSSAPI are)\n")
    result = run_cli(capsys, "config", "show", "-b", "h:1", "--timeout", "0s")
    assert (result.code, result.stderr) == (64, "kafkatxn: error: --timeout must be positive\n")
