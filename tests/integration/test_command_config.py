"""One ``--command-config`` file, two readers: kafkatxn and Kafka's own ``kafka-transactions.sh``.

Each test writes a properties file, makes a SCRAM user whose password only an exact reading of that
file yields, and has both kafkatxn and TransactionsCommand (from the kafka-tools jar, as
kafka-transactions.sh runs it) log in with it on the SASL_SSL listener. Both getting in proves they
read the same credentials; a control file both must be refused with shows they misread alike.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest

from harness.security import SCRAM_MODULE, SecureKafka
from tests.support.secure_commands import Run, run_kafkatxn

pytestmark = pytest.mark.integration

TRANSACTIONS_COMMAND = "org.apache.kafka.tools.TransactionsCommand"
FILE = "org.apache.kafka.common.config.provider.FileConfigProvider"
ENV = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"
DIR = "org.apache.kafka.common.config.provider.DirectoryConfigProvider"


def java_escape(text: str) -> str:
    """Non-ASCII characters as \\uXXXX, as Java's Properties.store writes them."""
    return "".join(c if ord(c) < 128 else f"\\u{ord(c):04x}" for c in text)


def write_private(path: Path, data: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode("ascii"))
    path.chmod(0o600)
    return path


def kafka_transactions(secure: SecureKafka, properties: Path):
    return secure.cluster.run_tool(  # type: ignore[attr-defined]
        TRANSACTIONS_COMMAND, "--bootstrap-server", secure.bootstrap("scram"), "--command-config", str(properties), "list",
        timeout=120,
    )


def kafkatxn_list(secure: SecureKafka, properties: Path, tmp_path: Path) -> Run:
    argv = ["transactions", "list", "-b", secure.bootstrap("scram"), "-c", str(properties), "--timeout", "20s", "-o", "json"]
    return run_kafkatxn("transactions list", argv, cwd=tmp_path)


def assert_both_log_in(secure: SecureKafka, properties: Path, tmp_path: Path) -> None:
    java = kafka_transactions(secure, properties)
    assert java.returncode == 0, f"kafka-transactions.sh refused {properties}:\n{java.stderr[-3000:]}"
    assert "TransactionalId" in java.stdout, java.stdout
    ours = kafkatxn_list(secure, properties, tmp_path)
    assert ours.code == 0, ours.describe()
    assert isinstance(json.loads(ours.stdout), list)


def test_every_java_properties_construct_means_what_kafka_transactions_sh_reads(kafka_secure: SecureKafka, tmp_path):
    tag = secrets.token_hex(6)
    # Spaces, separator and comment characters, non-ASCII: each must survive the properties format.
    first, second = f"Pw-{tag} ", ":=#!\u00e4\u00df\u20ac end"  # the line continues after the space
    user = kafka_secure.add_scram_user(f"kt-java-{tag}", first + second)
    jaas = (
        f"{SCRAM_MODULE} required \\\n"  # continuation: the next line's leading whitespace is dropped
        f'        username="kt\\u002djava-{tag}" \\\n'  # \u escape of an ASCII character
        f'        password="{java_escape(first)}\\\n'  # a space before the backslash is kept
        f'            {java_escape(second)}";\n'
    )
    text = (
        "# kafkatxn parity file: every java.util.Properties construct\n"
        "! a comment of the other kind\n"
        "\n"
        "security.protocol : SASL_SSL   \n"  # ':' separator; trailing spaces (Kafka trims its own keys)
        "sasl\\u002emechanism   SCRAM-SHA-512\n"  # whitespace separator, escaped key
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location\t=\t{kafka_secure.pki.ca}\n"
        f"sasl.jaas.config = {jaas}"
    )
    properties = write_private(tmp_path / "java-constructs.properties", text)
    assert_both_log_in(kafka_secure, properties, tmp_path)

    # Control: the same file with the non-ASCII characters as raw UTF-8. Kafka's tools read the file as
    # ISO-8859-1 (Properties.load(InputStream)), so the password they send is not the user's; nor is ours.
    raw = write_private(tmp_path / "utf8.properties", text.replace(java_escape(second), second).encode("utf-8"))
    java = kafka_transactions(kafka_secure, raw)
    assert java.returncode != 0 and "Authentication failed" in java.stdout + java.stderr, java.stderr[-2000:]
    ours = kafkatxn_list(kafka_secure, raw, tmp_path)
    assert ours.code == 3, ours.describe()
    assert "ISO-8859-1" in ours.stderr  # the warning says why
    assert user.password not in ours.stdout + ours.stderr


def test_config_provider_references_resolve_for_kafkatxn_and_kafka_transactions_sh(kafka_secure: SecureKafka, tmp_path, monkeypatch):
    tag = secrets.token_hex(6)
    env_part, file_part, dir_part = f"env-{tag}", "file part ends in a space ", f"dir-{tag}"
    kafka_secure.add_scram_user(f"kt-providers-{tag}", env_part + file_part + dir_part)
    monkeypatch.setenv("KT_PARITY_PASSWORD", env_part)  # both processes inherit it
    secret_file = write_private(
        tmp_path / "secrets" / "client-secrets.properties",
        f"user=kt-providers-{tag}\npassword.tail={file_part}\ntruststore={kafka_secure.pki.ca}\n",
    )
    write_private(tmp_path / "secrets" / "dir" / "password.end", dir_part)  # the whole file, no newline
    text = (
        "config.providers=file,env,dir\n"
        f"config.providers.file.class={FILE}\n"
        f"config.providers.env.class={ENV}\n"
        "config.providers.env.param.allowlist.pattern=KT_PARITY_.*\n"
        f"config.providers.dir.class={DIR}\n"
        f"config.providers.dir.param.allowed.paths={tmp_path / 'secrets'}\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location=${{file:{secret_file}:truststore}}\n"
        f'sasl.jaas.config={SCRAM_MODULE} required username="${{file:{secret_file}:user}}" '
        f'password="${{env:KT_PARITY_PASSWORD}}${{file:{secret_file}:password.tail}}${{dir:{tmp_path / "secrets" / "dir"}:password.end}}";\n'
    )
    properties = write_private(tmp_path / "providers.properties", text)
    assert_both_log_in(kafka_secure, properties, tmp_path)

    # Where Kafka would send the unresolved reference as the password, kafkatxn names it and stops.
    monkeypatch.delenv("KT_PARITY_PASSWORD")
    refused = kafkatxn_list(kafka_secure, properties, tmp_path)
    assert refused.code == 64, refused.describe()
    assert f"{properties}:11: ${{env:KT_PARITY_PASSWORD}} (in sasl.jaas.config): environment variable KT_PARITY_PASSWORD is not set" in refused.stderr
    assert file_part not in refused.stderr and dir_part not in refused.stderr
