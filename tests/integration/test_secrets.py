"""No SASL password or key password ever reaches output, logs or files, ``--debug`` included.

Every command runs with ``--debug`` against the ``kafka_secure`` broker, configured with distinctive
random secrets: a SCRAM password in a Java ``sasl.jaas.config``, a PLAIN password as librdkafka's
``sasl.password``, and an encrypted client key whose password comes as ``ssl.key.password`` or
``ssl.keystore.password`` (over SASL_SSL, where the key is loaded but not asked for, and over mTLS, where
the broker requires it). Refused logins (a wrong, equally distinctive password) and refused
properties files run too. Each process gets its own HOME, XDG directories, TMPDIR and working
directory; afterwards stdout, stderr, the exporter's /metrics and every file written there are
searched for each secret.
"""

from __future__ import annotations

import concurrent.futures
import os
import pty
import re
import secrets as _secrets
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.sasl import SaslKafka
from kafkatxn.config.kerberos import LIBRDKAFKA_HAS_NO_GSSAPI
from harness.security import SCRAM_MODULE, SecureKafka, write_properties
from tests.support.secure_commands import COMMANDS, HAVE_PYSPARK, Run, make_traffic, problem, run_command, run_kafkatxn
from tests.support.process_sampler import ArgvSampler
from tests.support.secure_files import store_files

pytestmark = pytest.mark.integration

WRONG_PASSWORD = f"wrongPw-{_secrets.token_hex(10)}"


@pytest.fixture(scope="module")
def traffic(kafka_secure: SecureKafka):
    made = make_traffic(kafka_secure)
    yield made
    made.close()


def _configs(secure: SecureKafka) -> dict[str, tuple[str, dict[str, str]]]:
    pki = secure.pki
    return {
        # SCRAM password inside sasl.jaas.config; the encrypted key opened with ssl.keystore.password.
        "scram-java": ("scram", {
            **secure.properties("scram", "java"),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(pki.client_keystore_encrypted),
            "ssl.keystore.password": pki.key_password,
        }),
        # PLAIN password as sasl.password; the encrypted key opened with ssl.key.password.
        "plain-librdkafka": ("plain", {
            **secure.properties("plain", "librdkafka"),
            "ssl.certificate.location": str(pki.client_cert),
            "ssl.key.location": str(pki.client_key_encrypted),
            "ssl.key.password": pki.key_password,
        }),
        # mTLS: the broker requires the certificate whose key needs the password.
        "mtls-java": ("mtls", secure.properties("mtls", "java", keystore="encrypted")),
    }


def _isolated_env(root: Path) -> dict[str, str]:
    for name in ("home", "config", "state", "cache", "tmp", "spark"):
        (root / name).mkdir(parents=True, exist_ok=True)
    return {
        "HOME": str(root / "home"),
        "XDG_CONFIG_HOME": str(root / "config"),
        "XDG_STATE_HOME": str(root / "state"),  # the default audit log lands here
        "XDG_CACHE_HOME": str(root / "cache"),
        "TMPDIR": str(root / "tmp"),
        "SPARK_LOCAL_DIRS": str(root / "spark"),
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),  # the HOME change must not lose the package
    }


def _files_with(root: Path, needle: bytes) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                if needle in path.read_bytes():
                    found.append(str(path))
            except OSError:
                continue
    return found


def test_no_secret_in_any_output_log_or_file(kafka_secure: SecureKafka, traffic, tmp_path, figures):
    secrets = {
        "SCRAM password": kafka_secure.users.scram.password,
        "PLAIN password": kafka_secure.users.plain.password,
        "key password": kafka_secure.pki.key_password,
        "wrong password": WRONG_PASSWORD,
    }
    inputs = tmp_path / "inputs"  # the properties files hold the secrets: outside the searched tree
    written = tmp_path / "written"
    jobs = []
    for name, (mode, props) in _configs(kafka_secure).items():
        properties = write_properties(inputs / f"{name}.properties", props)
        bootstrap = kafka_secure.bootstrap(mode)
        # Spark takes long to start: one audit, on the SCRAM/Java configuration, is enough to cover it.
        commands = [c for c in COMMANDS if c != "audit" or (name == "scram-java" and HAVE_PYSPARK)]
        for command in commands:
            jobs.append((f"{name} {command}", "run", command, bootstrap, properties, name))
        jobs.append((f"{name} config show", "config", None, bootstrap, properties, name))
    wrong = write_properties(inputs / "wrong.properties", kafka_secure.properties("scram", "java", password=WRONG_PASSWORD))
    for command in ("cluster", "transactions describe", "fence", "exporter"):
        jobs.append((f"wrong password {command}", "refused", command, kafka_secure.bootstrap("scram"), wrong, "wrong"))
    # A properties file refused before connecting: the error names the line, never the value.
    broken = inputs / "broken.properties"
    broken.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
        f'sasl.jaas.config=com.example.NoSuchLoginModule required username="u" password="{WRONG_PASSWORD}";\n'
    )
    jobs.append(("unsupported login module", "broken", "cluster", kafka_secure.bootstrap("plain"), broken, "broken"))
    garbled = inputs / "garbled.properties"
    garbled.write_text(f"security.protocol=SASL_SSL\nsasl.password {WRONG_PASSWORD}\nno separator {WRONG_PASSWORD}\n")
    jobs.append(("garbled properties line", "broken", "cluster", kafka_secure.bootstrap("plain"), garbled, "garbled"))

    def run(job) -> tuple[str, str, Run]:
        label, kind, command, bootstrap, properties, name = job
        root = written / label.replace(" ", "_")
        env = _isolated_env(root)
        if kind == "config":
            argv = ["config", "show", "-b", bootstrap, "-c", str(properties), "--debug"]
            return label, kind, run_kafkatxn("config show", argv, env=env, cwd=root)
        return label, kind, run_command(command, traffic, bootstrap, properties, root / "work", "--debug", env=env, cwd=root)

    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        # The audit first: Spark's start-up overlaps with everything else.
        jobs.sort(key=lambda j: j[2] != "audit")
        results = list(pool.map(run, jobs))

    leaks, failures = [], []
    for label, kind, result in results:
        for what, secret in secrets.items():
            for stream, text in (("stdout", result.stdout), ("stderr", result.stderr), ("/metrics", result.extra)):
                if secret in text:
                    leaks.append(f"{what} in {stream} of `{label}`")
        if kind == "run":
            # The runs must have worked, with debug logging on: a leak check of failed runs proves little.
            p = problem(result, traffic, kafka_secure.bootstrap(_configs(kafka_secure)[label.split()[0]][0]))
            if p or "connection settings:" not in result.stderr:
                failures.append(p or f"`{label}`: no debug log on stderr\n{result.describe()}")
        elif kind == "refused" and result.command != "exporter" and result.code != 3:
            failures.append(f"`{label}` should be refused with exit 3\n{result.describe()}")
        elif kind == "broken" and result.code != 64:
            failures.append(f"`{label}` should be a usage error (64)\n{result.describe()}")
        elif kind == "config" and ("******" not in result.stdout or result.code != 0):
            failures.append(f"`{label}` should show masked secrets\n{result.describe()}")
    files = [p for p in written.rglob("*") if p.is_file()]
    for what, secret in secrets.items():
        leaks.extend(f"{what} in file {path}" for path in _files_with(written, secret.encode()))
    figures["secrets leaked"] = f"{len(leaks)} (in {len(results)} --debug runs and {len(files)} files written)"
    assert not leaks, "\n".join(leaks)
    assert not failures, "\n\n".join(failures)
    # The search covered what the commands write: audit logs with records, the check's textfile, the audit report.
    names = {p.name for p in files}
    assert {"audit.jsonl", "kafkatxn.prom"} | ({"report.json"} if HAVE_PYSPARK else set()) <= names, sorted(names)[:50]


# -- a secret given each allowed way: in no argv, output or file -----------------------------------


def _run_on_pty(argv: list[str], env: dict[str, str], cwd: Path, answer: str, sampler: ArgvSampler) -> tuple[int, str, int]:
    """Run kafkatxn with a pseudo-terminal as its controlling terminal; type `answer` at the prompt."""
    pid, master = pty.fork()
    if pid == 0:  # the child: exec at once, nothing else
        os.chdir(cwd)
        os.execve(sys.executable, [sys.executable, "-m", "kafkatxn", *argv], {**os.environ, **env})
    output, answered = b"", False
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1)
        if not ready:
            continue
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        output += chunk
        if not answered and b"password" in output.lower():
            os.write(master, answer.encode() + b"\n")
            answered = True
    os.close(master)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), output.decode(errors="replace"), pid


def test_a_secret_given_each_allowed_way_is_in_no_argv_output_or_file(kafka_secure: SecureKafka, tmp_path, figures):
    password = f"eachWayPw-{_secrets.token_hex(10)}"
    user = kafka_secure.add_scram_user(f"kt-each-way-{_secrets.token_hex(4)}", password)
    inputs = tmp_path / "inputs"  # the files handing over the secret: outside the searched tree
    inputs.mkdir(mode=0o700)
    base = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user.name,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(kafka_secure.pki.ca),
    }
    providers = {
        "config.providers": "file,env,dir",
        "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
        "config.providers.env.class": "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
        "config.providers.dir.class": "org.apache.kafka.common.config.provider.DirectoryConfigProvider",
    }
    secret_file = write_properties(inputs / "secret.properties", {"pw": password})
    (inputs / "dir").mkdir()
    (inputs / "dir" / "pw").write_text(password)
    without = write_properties(inputs / "without-password.properties", base)
    profiles = inputs / "config.toml"
    profiles.write_text(
        f'[profiles.each]\nbootstrap_servers = "{kafka_secure.bootstrap("scram")}"\ncommand_config = "{without}"\n'
        f'[profiles.each.properties]\n"sasl.password" = "{password}"\n'
    )
    profiles.chmod(0o600)
    ways: dict[str, tuple[list[str], dict[str, str]]] = {
        "properties file": (["-c", str(write_properties(inputs / "literal.properties", {**base, "sasl.password": password}))], {}),
        "properties file, Java JAAS": (["-c", str(write_properties(inputs / "jaas.properties", {
            **base, "sasl.jaas.config": f'{SCRAM_MODULE} required username="{user.name}" password="{password}";'}))], {}),
        "config provider ${file:...}": (["-c", str(write_properties(inputs / "file-ref.properties", {
            **base, **providers, "sasl.password": f"${{file:{secret_file}:pw}}"}))], {}),
        "config provider ${dir:...}": (["-c", str(write_properties(inputs / "dir-ref.properties", {
            **base, **providers, "sasl.password": f"${{dir:{inputs / 'dir'}:pw}}"}))], {}),
        "config provider ${env:...}": (["-c", str(write_properties(inputs / "env-ref.properties", {
            **base, **providers, "sasl.password": "${env:KT_EACH_WAY_PASSWORD}"}))], {"KT_EACH_WAY_PASSWORD": password}),
        "environment variable": (["-c", str(without)], {"KAFKATXN_SASL_PASSWORD": password}),
        "profile": (["--profile", "each"], {"KAFKATXN_CONFIG": str(profiles)}),
        "--ask-password on a terminal": (["-c", str(without), "--ask-password"], {}),
    }
    written = tmp_path / "written"
    leaks, failures, sampled = [], [], []
    for way, (connection, extra_env) in ways.items():
        root = written / way.translate(str.maketrans(" ${}:./,", "________"))
        env = {**_isolated_env(root), **extra_env}
        argv = ["transactions", "list", "--timeout", "20s", "-o", "json", "--debug", *connection]
        if "--profile" not in connection:
            argv += ["-b", kafka_secure.bootstrap("scram")]
        with ArgvSampler(password.encode()) as sampler:
            if way.startswith("--ask-password"):
                code, output, pid = _run_on_pty(argv, env, root, password, sampler)
                streams = {"terminal": output}
            else:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "kafkatxn", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    stdin=subprocess.DEVNULL, env={**os.environ, **env}, cwd=root, text=True,
                )
                pid = proc.pid
                stdout, stderr = proc.communicate(timeout=90)
                code, streams = proc.returncode, {"stdout": stdout, "stderr": stderr}
        text = "\n".join(streams.values())
        if code != 0 or "connection settings:" not in text or '"transactional_id"' not in text and "[]" not in text:
            failures.append(f"{way}: exit {code}\n{text[-2000:]}")
        if not sampler.saw(pid):
            failures.append(f"{way}: the sampler never saw the command's process (pid {pid}) in {sampler.rounds} rounds")
        sampled.append(sampler.argv_reads[0])
        leaks += [f"{way}: the secret in the argv of pid {pid} ({program})" for pid, program in sampler.hits.items()]
        leaks += [f"{way}: the secret in {name}" for name, value in streams.items() if password in value]
        leaks += [f"{way}: the secret in file {path}" for path in _files_with(root, password.encode())]
    figures["secret given each allowed way"] = (
        f"{len(ways)} ways, {len(leaks)} leaks (argv of every process read at each of {min(sampled)}-{max(sampled)}"
        f" {sampler.argv_reads[1]} per run)"
    )
    assert not failures, "\n\n".join(failures)
    assert not leaks, "\n".join(leaks)


# -- Java key and trust stores: no store password, key password or key material anywhere ---------


def _key_material(settings: dict[str, str]) -> tuple[list[str], list[bytes]]:
    """What would give the client's private key away: its PEM body's first line and the whole body
    (text), its DER and its private scalar (bytes, any encoding of the key holds it)."""
    from cryptography.hazmat.primitives import serialization

    pem = settings["ssl.key.pem"]
    body = [line for line in pem.splitlines() if line and not line.startswith("-----")]
    key = serialization.load_pem_private_key(pem.encode(), None)
    scalar = key.private_numbers().private_value.to_bytes(32, "big")  # type: ignore[union-attr]
    der = key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return [body[0], "".join(body), scalar.hex()], [scalar, der]


def _recent_files_with(root: Path, needles: list[bytes], since: float, skip: Path) -> list[str]:
    found = []
    # os.walk skips a directory another process removes while it is read (/tmp is shared); rglob raised.
    for directory, _dirs, names in os.walk(root):
        for name in names:
            found += _file_with(Path(directory) / name, needles, since, skip)
    return found


def _file_with(path: Path, needles: list[bytes], since: float, skip: Path) -> list[str]:
    """``path`` once per needle it holds, if it is a regular file written since ``since`` outside ``skip``."""
    try:
        if skip in path.parents or not path.is_file() or path.is_symlink():
            return []
        stat = path.stat()
        if stat.st_mtime < since or stat.st_size > 20_000_000:
            return []
        data = path.read_bytes()
    except OSError:
        return []
    return [f"{path}" for needle in needles if needle in data]


def test_no_store_password_or_key_material_in_any_output_log_or_file(kafka_secure: SecureKafka, secure_stores, traffic, tmp_path, figures):
    """Java stores (issue 27): JKS and PKCS12 trust stores over SASL_SSL, JKS and PKCS12 key stores over
    mTLS, their passwords in the file, from a ``${file:…}`` reference and from
    KAFKATXN_SSL_KEYSTORE_PASSWORD; the key they hold is read into memory only (the Spark audit's
    executors included). Nothing of it in output, logs, argv, files in each run's HOME, TMPDIR, Spark
    directories and working directory, any file a run's processes hold open (memfds aside), nor in any
    file written under /tmp during the runs."""
    from kafkatxn import config

    inputs = tmp_path / "inputs"
    stores = secure_stores
    wrong = f"wrongStorePw-{_secrets.token_hex(10)}"
    secret_file = write_properties(inputs / "store-secrets.properties", {"store": stores.store_password})
    provider = {
        "config.providers": "file",
        "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
    }
    trust_jks = {"ssl.truststore.type": "JKS", "ssl.truststore.location": str(stores.truststore["JKS"])}
    styles = store_files(kafka_secure, stores)
    configs: dict[str, tuple[str, dict[str, str], dict[str, str]]] = {  # name -> (mode, properties, environment)
        "jks-keystore": ("mtls", {
            "security.protocol": "SSL", **trust_jks, "ssl.truststore.password": stores.store_password,
            "ssl.keystore.type": "JKS", "ssl.keystore.location": str(stores.keystore["JKS"]),
            "ssl.keystore.password": stores.store_password, "ssl.key.password": stores.key_password,
        }, {}),
        "pkcs12-keystore-file-provider": ("mtls", {
            **provider, "security.protocol": "SSL",
            "ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(stores.truststore["PKCS12"]),
            "ssl.truststore.password": f"${{file:{secret_file}:store}}",
            "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(stores.keystore["PKCS12"]),
            "ssl.keystore.password": f"${{file:{secret_file}:store}}",
        }, {}),
        "pkcs12-named-jks-environment": ("mtls", {
            "security.protocol": "SSL", **trust_jks, "ssl.keystore.location": str(stores.disguised_keystore),
        }, {"KAFKATXN_SSL_KEYSTORE_PASSWORD": stores.store_password}),
        "jks-truststore": ("scram", styles["jks-truststore"][1], {}),
        "pkcs12-truststore": ("scram", styles["pkcs12-truststore"][1], {}),
    }
    secrets = {"store password": stores.store_password, "key password": stores.key_password, "wrong password": wrong}
    key_texts: list[str] = []
    key_bytes: list[bytes] = [s.encode() for s in secrets.values()]  # searched for in files, with key_texts
    jobs = []
    for name, (mode, props, env) in configs.items():
        properties = write_properties(inputs / f"{name}.properties", props)
        bootstrap = kafka_secure.bootstrap(mode)
        commands = ["cluster", "lso --groups", "producers", "exporter"]
        if mode == "mtls":
            resolved = config.resolve(bootstrap_servers=bootstrap, command_config=str(properties), environ={**os.environ, **env})
            texts, raw = _key_material(resolved.settings)
            key_texts += texts
            key_bytes += raw
            commands += ["transactions list", "check"]
        # Spark's executors get the key in the data source's options: one audit, on the JKS key store, covers it.
        commands += ["audit"] if name == "jks-keystore" and HAVE_PYSPARK else []
        jobs += [(f"{name} {command}", "run", command, bootstrap, properties, env) for command in commands]
        jobs.append((f"{name} config show", "config", None, bootstrap, properties, env))
    jks_props = configs["jks-keystore"][1]
    for label, change in (("wrong store password", {"ssl.keystore.password": wrong}), ("wrong key password", {"ssl.key.password": wrong})):
        properties = write_properties(inputs / f"{label.replace(' ', '-')}.properties", {**jks_props, **change})
        jobs.append((label, "refused", "cluster", kafka_secure.bootstrap("mtls"), properties, {}))

    written = tmp_path / "written"
    started = time.time()

    def run(job) -> tuple[str, str, str, Run]:
        label, kind, command, bootstrap, properties, extra_env = job
        root = written / label.replace(" ", "_")
        env = {**_isolated_env(root), **extra_env}
        if kind == "config":
            argv = ["config", "show", "-b", bootstrap, "-c", str(properties), "--debug"]
            return label, kind, bootstrap, run_kafkatxn("config show", argv, env=env, cwd=root)
        return label, kind, bootstrap, run_command(command, traffic, bootstrap, properties, root / "work", "--debug", env=env, cwd=root)

    needles = {**secrets, **{f"key material ({i})": t for i, t in enumerate(key_texts)}}
    in_files = key_bytes + [t.encode() for t in key_texts]  # the key as PEM text, DER or its bare scalar
    sampler = ArgvSampler(*in_files, ours=written, skip=(inputs, stores.directory))
    with sampler, concurrent.futures.ThreadPoolExecutor(3) as pool:
        jobs.sort(key=lambda j: j[2] != "audit")  # Spark's start-up overlaps with everything else
        results = list(pool.map(run, jobs))

    leaks, failures = sampler.leaks("a secret or key material"), []
    for label, kind, bootstrap, result in results:
        for what, secret in needles.items():
            for stream, text in (("stdout", result.stdout), ("stderr", result.stderr), ("/metrics", result.extra)):
                if secret in text:
                    leaks.append(f"{what} in {stream} of `{label}`")
        if kind == "run":
            p = problem(result, traffic, bootstrap)
            if p or "connection settings:" not in result.stderr:
                failures.append(p or f"`{label}`: no debug log on stderr\n{result.describe()}")
        elif kind == "refused" and (result.code != 64 or "does not" not in result.stderr):
            failures.append(f"`{label}` should be a usage error (64) naming the password key\n{result.describe()}")
        elif kind == "config" and ("******" not in result.stdout or result.code != 0):
            failures.append(f"`{label}` should show the key masked\n{result.describe()}")
    files = [p for p in written.rglob("*") if p.is_file()]
    leaks += [f"a secret or key material in file {path}" for path in _recent_files_with(written, in_files, 0, inputs)]
    leaks += [f"a secret or key material in file {path}" for path in _recent_files_with(Path("/tmp"), in_files, started, inputs)]
    if len(sampler.our_pids) < len(jobs):  # the sampling must have seen every run's processes
        failures.append(f"the open-file sampling saw too little: {sampler.coverage()}")
    figures["store passwords and key material leaked"] = (
        f"{len(leaks)} (in {len(results)} --debug runs, {len(files)} files written, /tmp; {sampler.coverage()})"
    )
    assert not leaks, "\n".join(leaks)
    assert not failures, "\n\n".join(failures)


# -- OAUTHBEARER: the OIDC client secret and the tokens it buys ------------------------------------

_JWT = re.compile(r"eyJ[\w-]{10,}\.eyJ[\w-]{10,}")  # a JWT's header and claims, whichever token was fetched


@pytest.fixture(scope="module")
def sasl_traffic(kafka_sasl: SaslKafka):
    made = make_traffic(kafka_sasl)
    yield made
    made.close()


def test_no_oauth_client_secret_or_token_in_any_argv_output_log_or_file(kafka_sasl: SaslKafka, sasl_traffic, tmp_path, figures):
    """Every command, the Spark audit included, with --debug, logging in with OIDC client credentials from a
    Java file (librdkafka fetches its tokens, kafkatxn's provider those of kafka-python, the audit's
    executors their own); refused logins and a refused file too. Neither the client secret nor any access
    token may show in output, logs, files the runs write; nor the secret in any argv, any file the runs'
    processes hold open or any file written under /tmp meanwhile."""
    secret = kafka_sasl.client_secret
    inputs = tmp_path / "inputs"
    written = tmp_path / "written"
    good = write_properties(inputs / "oauth.properties", kafka_sasl.properties())
    untrusted = write_properties(inputs / "untrusted.properties", kafka_sasl.properties(token_url=kafka_sasl.oidc.untrusted_token_url))
    broken = write_properties(inputs / "broken.properties", {
        **kafka_sasl.properties(), "sasl.login.callback.handler.class": "com.example.NoSuchHandler"})
    bootstrap = kafka_sasl.bootstrap()
    jobs = [(command, "run", good) for command in COMMANDS if command != "audit" or HAVE_PYSPARK]
    jobs.sort(key=lambda j: j[0] != "audit")  # Spark's start-up overlaps with everything else
    jobs += [("cluster", "refused", untrusted), ("transactions list", "refused", untrusted), ("cluster", "broken", broken)]

    def run(job) -> tuple[str, Run]:
        command, kind, properties = job
        root = written / f"{kind}-{command.replace(' ', '_')}"
        return kind, run_command(command, sasl_traffic, bootstrap, properties, root / "work", "--debug", env=_isolated_env(root), cwd=root)

    started = time.time()
    with ArgvSampler(secret.encode(), ours=written, skip=(inputs,)) as sampler, concurrent.futures.ThreadPoolExecutor(3) as pool:
        results = list(pool.map(run, jobs))
    leaks, failures = sampler.leaks("the client secret"), []
    for kind, result in results:
        for stream, text in (("stdout", result.stdout), ("stderr", result.stderr), ("/metrics", result.extra)):
            leaks += [f"the client secret in {stream} of `{result.command}` ({kind})"] if secret in text else []
            leaks += [f"an access token in {stream} of `{result.command}` ({kind})"] if _JWT.search(text) else []
        if kind == "run":
            p = problem(result, sasl_traffic, bootstrap)
            if p or "connection settings:" not in result.stderr:
                failures.append(p or f"`{result.command}`: no debug log on stderr\n{result.describe()}")
        elif kind == "refused" and result.code != 3:
            failures.append(f"`{result.command}` with an untrusted token should be refused with exit 3\n{result.describe()}")
        elif kind == "broken" and result.code != 64:
            failures.append(f"`{result.command}` with an unknown callback handler should be a usage error (64)\n{result.describe()}")
    files = [p for p in written.rglob("*") if p.is_file()]
    leaks += [f"the client secret in file {path}" for path in _files_with(written, secret.encode())]
    leaks += [f"an access token in file {p}" for p in files if _JWT.search(p.read_bytes().decode(errors="replace"))]
    leaks += [f"the client secret in file {path}" for path in _recent_files_with(Path("/tmp"), [secret.encode()], started, inputs)]
    if len(sampler.our_pids) < len(jobs):  # the sampling must have seen every run's processes
        failures.append(f"the open-file sampling saw too little: {sampler.coverage()}")
    figures["OAUTHBEARER secrets leaked"] = (
        f"{len(leaks)} (in {len(results)} --debug runs, {len(files)} files written, /tmp; {sampler.coverage()})"
    )
    assert not leaks, "\n".join(leaks)
    assert not failures, "\n\n".join(failures)


# -- GSSAPI: the keytab's keys -----------------------------------------------------------------------


def test_no_keytab_key_in_any_output_log_or_file(kafka_kerberos: SaslKafka, sasl_traffic, tmp_path, figures):
    """Every command, the Spark audit included, with --debug, logging in from a Java Krb5LoginModule keytab
    file: the keytab's keys (raw or hex) show in no output, log, argv, file the runs write or hold open,
    nor file written under /tmp meanwhile, and the tickets it gets stay in the process (no ticket cache
    file is written). A command kafka-python cannot serve yet must say so in its one line, exit 64."""
    kafka_sasl = kafka_kerberos
    kdc = kafka_sasl.kdc
    assert kdc is not None
    keys = kdc.client_keys()
    assert keys, "klist -kK showed no keys"
    inputs = tmp_path / "inputs"
    properties = write_properties(inputs / "keytab.properties", kafka_sasl.kerberos_properties("keytab"))
    written = tmp_path / "written"
    bootstrap = kafka_sasl.bootstrap("GSSAPI")
    jobs = sorted((c for c in COMMANDS if c != "audit" or HAVE_PYSPARK), key=lambda c: c != "audit")

    def run(command: str) -> Run:
        root = written / command.replace(" ", "_")
        env = {**_isolated_env(root), **kdc.environment}
        return run_command(command, sasl_traffic, bootstrap, properties, root / "work", "--debug", env=env, cwd=root)

    needles = [*keys, *(key.hex().encode() for key in keys)]
    started = time.time()
    with ArgvSampler(*needles, ours=written, skip=(inputs, kdc.workdir)) as sampler, concurrent.futures.ThreadPoolExecutor(3) as pool:
        results = list(pool.map(run, jobs))
    leaks, failures, refused = sampler.leaks("a keytab key"), [], []
    for result in results:
        text = result.stdout + result.stderr + result.extra
        leaks += [f"a keytab key in the output of `{result.command}`" for key in keys if key.hex() in text or key.decode("latin-1") in text]
        p = problem(result, sasl_traffic, bootstrap)
        if p and (result.code, result.stderr.splitlines()[-1:]) == (64, [f"kafkatxn: error: {LIBRDKAFKA_HAS_NO_GSSAPI}"]):
            refused.append(result.command)  # not served by kafka-python (yet): one line, exit 64
        elif p or "connection settings:" not in result.stderr:
            failures.append(f"`{result.command}`: {p or 'no debug log'}\n{result.describe()}")
    files = [p for p in written.rglob("*") if p.is_file()]
    leaks += [f"a keytab key in file {path}" for path in _recent_files_with(written, needles, 0, inputs)]
    leaks += [f"a keytab key in file {path}" for path in _recent_files_with(Path("/tmp"), needles, started, inputs)]
    leaks += [f"a ticket cache written: {p}" for p in files if p.name.startswith("krb5cc")]
    if len(sampler.our_pids) < len(jobs):  # the sampling must have seen every run's processes
        failures.append(f"the open-file sampling saw too little: {sampler.coverage()}")
    figures["GSSAPI keytab leaked"] = (
        f"{len(leaks)} (in {len(results)} --debug runs, {len(results) - len(refused)} served, {len(files)} files written, /tmp;"
        f" {sampler.coverage()}){f'; refused as needing librdkafka: {refused}' if refused else ''}"
    )
    assert not leaks, "\n".join(leaks)
    assert not failures, "\n\n".join(failures)
