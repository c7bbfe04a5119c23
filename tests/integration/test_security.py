"""Every command through SASL_SSL (SCRAM-SHA-512, PLAIN) and mutual TLS, configured by a librdkafka-style
and by a Java-style ``--command-config`` file, and by each Java store style (JKS and PKCS12 trust stores
over SCRAM, JKS and PKCS12 key stores over mutual TLS); refused logins and handshakes end in exit 3 with
one line that says which, fast.

One secure broker for the session (``kafka_secure``: certificates and users made by
harness/security.py, its stores by harness/stores.py), and ``kafka_sasl``'s for OAUTHBEARER (OIDC) and
GSSAPI (MIT KDC). The matrix is one test per cell (security mode x file style, store style, OAUTHBEARER,
GSSAPI), each running every command once (cheap invocations, three at a time); the audit runs
in-process on one Spark session for the module, so Spark starts once.
"""

from __future__ import annotations

import concurrent.futures
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness.sasl import SaslKafka
from tests.support.cli_helpers import run_cli
from harness.security import (
    MODES,
    PLAIN_LISTENER,
    PLAIN_SASL_LISTENER,
    SCRAM_LISTENER,
    STYLES,
    SaslUsers,
    SecureKafka,
    make_pki,
    secure_setup,
    write_properties,
)
from tests.support.secure_files import MATRIX_STORE_CELLS, store_files
from tests.support.secure_commands import (
    COMMANDS,
    HAVE_PYSPARK,
    QUICK_COMMANDS,
    TIMEOUT,
    Run,
    Traffic,
    command_argv,
    connection_args,
    make_traffic,
    problem,
    run_command,
    run_kafkatxn,
)

pytestmark = pytest.mark.integration

# One cell per security mode x file style, then one per Java store style (harness/stores.py's keytool
# stores of the same PKI: trust stores over SASL_SSL SCRAM, key stores over mutual TLS).
CELLS = [(mode, style) for mode in MODES for style in STYLES] + list(MATRIX_STORE_CELLS) + [
    # OIDC client credentials against the broker validating tokens with the provider's JWKS (kafka_sasl).
    ("oauthbearer", "oidc"),
    # Krb5LoginModule with a keytab against the GSSAPI listener of kafka_sasl's broker and its MIT KDC.
    ("gssapi", "keytab"),
]
CELL_IDS = [s if (m, s) in MATRIX_STORE_CELLS else f"{m}-{s}" for m, s in CELLS]
TIMEOUT_S = 20
# A refused login or handshake is known within a second; waiting out --timeout would be the bug.
FAST_FAILURE_S = TIMEOUT_S / 2


@pytest.fixture(scope="module")
def traffic(kafka_secure: SecureKafka):
    made = make_traffic(kafka_secure)
    yield made
    made.close()


@pytest.fixture(scope="module")
def sasl_traffic(kafka_sasl: SaslKafka):
    made = make_traffic(kafka_sasl)  # over its PLAINTEXT listener
    yield made
    made.close()


@pytest.fixture(scope="module")
def spark(request: pytest.FixtureRequest):
    if not HAVE_PYSPARK:
        yield None
        return
    from kafkatxn.audit.job import build_session

    realm: dict[str, str] = {}
    if any("gssapi" in item.nodeid for item in request.session.items):
        # Spark's Python workers inherit the JVM's environment: MIT's library finds the test realm there
        # (as it would find /etc/krb5.conf), so the GSSAPI cell's executors can log in.
        sasl: SaslKafka = request.getfixturevalue("kafka_sasl")
        realm = sasl.kdc.environment if sasl.kdc is not None else {}
    conf = {"spark.sql.shuffle.partitions": "2"}
    if realm:
        # The JVM keeps the environment of the first module that started Spark in this process, so the
        # realm goes to the workers as executor environment, on a session of this module's own.
        from pyspark import SparkContext

        if SparkContext._active_spark_context is not None:
            SparkContext._active_spark_context.stop()
        conf.update({f"spark.executorEnv.{name}": value for name, value in realm.items()})
    with pytest.MonkeyPatch.context() as patch:
        for name, value in realm.items():
            patch.setenv(name, value)
        session, created = build_session("local[2]", conf=conf)
    yield session
    if created:
        session.stop()


def run_audit_in_process(capsys, traffic: Traffic, bootstrap: str, properties: Path, workdir: Path) -> Run:
    # No --master: the command takes the module's active session instead of starting Spark again.
    argv = [a for a in command_argv("audit", traffic, workdir) if a not in ("--master", "local[1]")]
    argv += connection_args(bootstrap, properties)
    started = time.monotonic()
    result = run_cli(capsys, *argv)
    return Run("audit", argv, result.code, result.stdout, result.stderr, time.monotonic() - started)


_COUNTS: dict[str, tuple[int, int]] = {}


def _tally(figures: dict, key: str, passed: int, total: int, note: str = "") -> None:
    done, all_ = _COUNTS.get(key, (0, 0))
    _COUNTS[key] = (done + passed, all_ + total)
    figures[key] = f"{done + passed}/{all_ + total}{note}"


@dataclass(frozen=True)
class Target:
    """Where a cell's commands go, with which file, and what they must find there."""

    bootstrap: str
    properties: Path
    traffic: Traffic
    secrets: list[str]  # none of them may show in any command's output
    env: dict[str, str] = field(default_factory=dict)


def cell_target(request: pytest.FixtureRequest, mode: str, style: str, tmp_path: Path) -> Target:
    """The broker, ``--command-config`` file and traffic of one cell (fixtures taken only when a cell needs them)."""
    if mode == "oauthbearer":
        sasl: SaslKafka = request.getfixturevalue("kafka_sasl")
        properties = write_properties(tmp_path / "oauthbearer.properties", sasl.properties())
        return Target(sasl.bootstrap(), properties, request.getfixturevalue("sasl_traffic"), sasl.secrets())
    if mode == "gssapi":
        sasl = request.getfixturevalue("kafka_kerberos")
        kdc = sasl.kdc
        assert kdc is not None
        properties = write_properties(tmp_path / "gssapi.properties", sasl.kerberos_properties("keytab"))
        keys = [key.hex() for key in kdc.client_keys()]
        return Target(sasl.bootstrap("GSSAPI"), properties, request.getfixturevalue("sasl_traffic"), keys, kdc.environment)
    secure: SecureKafka = request.getfixturevalue("kafka_secure")
    secrets = secure.secrets()
    if style in STYLES:
        props = secure.properties(mode, style)
    else:
        stores = request.getfixturevalue("secure_stores")
        store_mode, props = store_files(secure, stores)[style]
        assert store_mode == mode, (style, store_mode)
        secrets += [stores.store_password, stores.key_password]
    properties = write_properties(tmp_path / f"{mode}-{style}.properties", props)
    return Target(secure.bootstrap(mode), properties, request.getfixturevalue("traffic"), secrets)


@pytest.mark.parametrize("mode,style", CELLS, ids=CELL_IDS)
def test_every_command_works(mode, style, request, spark, tmp_path, capsys, monkeypatch, figures):
    target = cell_target(request, mode, style, tmp_path)
    for name, value in target.env.items():  # the in-process audit's driver side
        monkeypatch.setenv(name, value)
    if target.env:
        monkeypatch.delenv("KRB5_CLIENT_KTNAME", raising=False)  # set by kafkatxn in-process: restored after
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        futures = [
            pool.submit(
                run_command, command, target.traffic, target.bootstrap, target.properties, tmp_path / command.replace(" ", "_"),
                env=target.env,
            )
            for command in COMMANDS
            if command != "audit"
        ]
        runs = [run_audit_in_process(capsys, target.traffic, target.bootstrap, target.properties, tmp_path)] if spark is not None else []
        runs += [f.result() for f in futures]

    def leak(run: Run) -> str | None:
        return f"{run.command}: a secret of the file in its output" if any(s in run.output() for s in target.secrets) else None

    problems = [p for run in runs if (p := problem(run, target.traffic, target.bootstrap) or leak(run))]
    _tally(figures, "commands x security modes x file styles passed", len(runs) - len(problems), len(runs),
           f" ({len(COMMANDS)} commands x {len(MODES)} modes (SCRAM-SHA-512, PLAIN, mTLS) x {len(STYLES)} file styles"
           f" + {len(MATRIX_STORE_CELLS)} Java store styles + OAUTHBEARER + GSSAPI)")
    assert {r.command for r in runs} == set(COMMANDS) - ({"audit"} if spark is None else set())
    assert not problems, "\n\n".join(problems)


# -- refused: wrong password, unknown CA, expired client certificate -----------------------------

WRONG_PASSWORD = "not-the-password-0451"

FAILURES = {
    "wrong password": (
        [("scram", "librdkafka"), ("scram", "java"), ("plain", "librdkafka"), ("plain", "java")],
        lambda secure: {"password": WRONG_PASSWORD},
        ("authentication failed",),
    ),
    "unknown CA": (
        [("scram", "librdkafka"), ("mtls", "java"), ("scram", "java"), ("mtls", "librdkafka")],
        lambda secure: {"ca": secure.pki.other_ca},
        ("TLS handshake failed", "certificate verify failed"),
    ),
    "expired certificate": (
        [("mtls", "librdkafka"), ("mtls", "java")],
        lambda secure: {"keystore": "expired"},
        ("TLS handshake failed", "certificate expired"),
    ),
}


def _refusal_problem(run: Run, says: tuple[str, ...]) -> str | None:
    """Exit 3, one line naming the cause, nothing else, well within --timeout."""
    if run.command == "check":
        # A monitoring plugin answers on stdout: its one status line, UNKNOWN, carries the cause.
        line, other = run.stdout, run.stderr
        prefix = "KAFKATXN UNKNOWN - "
    else:
        line, other = run.stderr, run.stdout
        prefix = "kafkatxn: error: "
    reasons = []
    if run.code != 3:
        reasons.append(f"exit {run.code}, not 3")
    if other:
        reasons.append("unexpected output besides the error line")
    if line.count("\n") != 1 or not line.startswith(prefix):
        reasons.append("not exactly one error line")
    missing = [s for s in says if s not in line]
    if missing:
        reasons.append(f"the line does not say {missing}")
    if run.seconds > FAST_FAILURE_S:
        reasons.append(f"took {run.seconds:.1f}s of a {TIMEOUT} timeout")
    return f"{run.command}: {'; '.join(reasons)}\n{run.describe()}" if reasons else None


@pytest.mark.parametrize("kind", list(FAILURES))
def test_refused_connections_say_why(kind, kafka_secure: SecureKafka, traffic: Traffic, tmp_path, figures):
    variants, change, says = FAILURES[kind]
    files = {
        (mode, style): (
            kafka_secure.bootstrap(mode),
            write_properties(tmp_path / f"{mode}-{style}.properties", kafka_secure.properties(mode, style, **change(kafka_secure))),
        )
        for mode, style in variants
    }
    # Every command once, the variants (mechanism, file style) taking turns; each variant runs `cluster`.
    plan = [(command, variants[i % len(variants)]) for i, command in enumerate(QUICK_COMMANDS)]
    plan += [("cluster", v) for v in variants[1:]]
    plan.append(("exporter", variants[0]))
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        futures = {
            pool.submit(
                run_command, command, traffic, *files[variant], tmp_path / f"{command.replace(' ', '_')}-{i}",
                *(["-o", "table"] if command == "check" else []),  # the Nagios status line
            ): (command, variant)
            for i, (command, variant) in enumerate(plan)
        }
        runs = {futures[f]: f.result() for f in concurrent.futures.as_completed(futures)}
    problems = []
    for (command, variant), run in sorted(runs.items()):
        if command == "exporter":
            # The exporter stays up and says why on stderr; kafkatxn_up is 0.
            if "kafkatxn_up 0.0" not in run.extra or not all(s in run.stderr for s in says) or run.code != 0:
                problems.append(f"exporter ({variant}): {run.describe()}\nmetrics: {run.extra[:300]!r}")
            continue
        p = _refusal_problem(run, says)
        if p:
            problems.append(f"{variant}: {p}")
    _tally(figures, "refused connections (wrong password, unknown CA, expired cert) reported right", len(runs) - len(problems), len(runs))
    assert not problems, "\n\n".join(problems)
    if kind == "wrong password":
        assert all(WRONG_PASSWORD not in run.output() for run in runs.values())


@pytest.mark.skipif(not HAVE_PYSPARK, reason="kafkatxn audit needs PySpark")
def test_refused_audit_reports_the_cause(kafka_secure: SecureKafka, traffic: Traffic, tmp_path):
    """The audit fails on a wrong password with exit 3 and the cause, before reading anything."""
    properties = write_properties(tmp_path / "wrong.properties", kafka_secure.properties("scram", "java", password=WRONG_PASSWORD))
    run = run_command("audit", traffic, kafka_secure.bootstrap("scram"), properties, tmp_path)
    assert run.code == 3, run.describe()
    assert run.stdout == "", run.describe()
    errors = [line for line in run.stderr.splitlines() if line.startswith("kafkatxn: error: ")]
    assert len(errors) == 1 and "authentication failed" in errors[0], run.describe()
    # Known, left to the audit command's owner: it starts Spark before it connects, so Spark's start-up
    # lines come first. Anything beyond them is new noise.
    spark_startup = ("kafkatxn: starting Spark", "WARNING: Using incubator modules", "Setting default log level", "To adjust logging level")
    others = [line for line in run.stderr.splitlines() if line not in errors and not line.startswith(spark_startup)]
    assert others == [], run.describe()


def test_scram_and_plain_on_separate_listeners(kafka_factory, tmp_path):
    """The other SASL preset: one SASL_SSL listener per mechanism, no mTLS listener. Each listener
    serves its mechanism; offering it the other one is refused as an authentication failure."""
    pki = make_pki(tmp_path / "pki")
    users = SaslUsers.random()
    setup = secure_setup(pki, users, separate_sasl_listeners=True, mtls=False)
    assert [listener.name for listener in setup.listeners] == [PLAIN_LISTENER, SCRAM_LISTENER, PLAIN_SASL_LISTENER]
    secure = SecureKafka(
        kafka_factory(listeners=setup.listeners, format_arguments=setup.format_arguments, broker_config=setup.broker_config),
        pki, users, setup,
    )
    jobs = []
    for mode, style in (("scram", "java"), ("plain", "librdkafka")):
        properties = write_properties(tmp_path / f"{mode}.properties", secure.properties(mode, style))
        other = secure.bootstrap("plain" if mode == "scram" else "scram")
        jobs.append((mode, secure.bootstrap(mode), ["cluster", *connection_args(secure.bootstrap(mode), properties)]))
        jobs.append((f"{mode} on the other listener", other, ["cluster", *connection_args(other, properties)]))
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(lambda job: (job[0], job[1], run_kafkatxn("cluster", job[2])), jobs))
    for label, bootstrap, run in runs:
        if "other" in label:
            assert _refusal_problem(run, ("authentication failed",)) is None, run.describe()
        else:
            assert run.code == 0, run.describe()
            assert [b["port"] for b in json.loads(run.stdout)["brokers"]] == [int(bootstrap.rsplit(":", 1)[1])]
