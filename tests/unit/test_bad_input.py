"""Bad input, property-based (hypothesis): arguments of every command, durations, regexes,
properties files and inventory files.

Every CLI case runs in-process (``kafkatxn.cli.app.main``, SystemExit captured), so hypothesis
tries hundreds of them in seconds. Commands that get as far as the cluster meet ``-b 127.0.0.1:1``
(nothing listens there) with ``--timeout`` of at most 150ms. The exporter's HTTP server and the
Spark session are replaced by stubs that end the command the way an unreachable cluster does.

Rules for every case:

- the exit code is 0, 3 or 64 (1 and 2 need findings, which an unreachable cluster cannot give);
- no traceback, no ``kafkatxn: error: unexpected …`` (what the entry point prints for an exception it did not expect);
- exit 64: exactly one stderr line, starting ``kafkatxn: error:``, and nothing on stdout (but for
  ``check``, which Nagios reads: one ``KAFKATXN UNKNOWN - …`` line saying the same);
- exit 3: only because the cluster could not be reached, and the output says so.

Inputs that are invalid by construction (one bad value among valid ones, or a broken combination
of options) must exit 64: a usage error, found before anything is sent to the cluster.
"""

from __future__ import annotations

import collections
import contextlib
import io
import math
import os
import re
import string
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kafkatxn import config, durations, redact
from kafkatxn.audit import rules
from kafkatxn.monitoring_plugin import Range
from kafkatxn.cli.app import main
from kafkatxn.errors import KafkatxnError, UsageError

UNREACHABLE = "127.0.0.1:1"
STUB = "test stub"  # the message of the exporter and Spark stubs
PATH = "@path:"  # argument strategies name files by key; with_paths() puts the real path in
# What an exit 3 may say here: the cluster is unreachable, the deadline passed, or a stub stood in.
NETWORK_MARKERS = (f"cannot reach any broker at {UNREACHABLE}", "timed out after", STUB)
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

GENERATED: collections.Counter[str] = collections.Counter()

SETTINGS = settings(
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)


# -- running the CLI in-process -----------------------------------------------------------------


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str
    warned: list[str]  # warnings Python shows by default: in a real run, more lines on stderr

    def __str__(self) -> str:
        return f"exit {self.code}\nstdout: {self.stdout[:2000]!r}\nstderr: {self.stderr[:2000]!r}\nwarnings: {self.warned}"


HIDDEN_WARNINGS = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)


def run(args: list[str]) -> Outcome:
    redact._SECRETS.clear()  # registered secrets are process-wide; one case's must not mask another's output
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    warned = [f"{w.category.__name__}: {w.message}" for w in caught if not issubclass(w.category, HIDDEN_WARNINGS)]
    return Outcome(code, out.getvalue(), err.getvalue(), warned)


def assert_rules(outcome: Outcome, args: list[str]) -> None:
    where = f"kafkatxn {args!r}\n{outcome}"
    assert outcome.code in (0, 3, 64), where
    assert not outcome.warned, where
    both = outcome.stdout + outcome.stderr
    assert "Traceback" not in both, where
    assert "kafkatxn: error: unexpected " not in outcome.stderr, where  # the entry point's catch-all
    if outcome.code == 64:
        assert_usage_error(outcome, where)
    if outcome.code == 3:
        assert any(marker in both for marker in NETWORK_MARKERS), where


def assert_usage_error(outcome: Outcome, where: str) -> str:
    lines = outcome.stderr.splitlines()
    assert outcome.code == 64, where
    assert len(lines) == 1 and lines[0].startswith("kafkatxn: error: "), where
    if outcome.stdout and where.split("\n", 1)[0].removeprefix("kafkatxn ").startswith("['check'"):
        status = outcome.stdout.splitlines()
        assert len(status) == 1 and status[0].startswith("KAFKATXN UNKNOWN - "), where
        assert status[0].split(" - ", 1)[1].removeprefix("usage error: ") in lines[0], where
    else:
        assert outcome.stdout == "", where
    return lines[0]


@pytest.fixture(scope="module", autouse=True)
def offline_cli(tmp_path_factory, request):
    """A clean environment, and stubs for what would outlive a case: the exporter's server, Spark."""
    home = tmp_path_factory.mktemp("bad-input")
    with pytest.MonkeyPatch.context() as mp:
        for key in list(os.environ):
            if key.startswith("KAFKATXN_"):
                mp.delenv(key)
        mp.setenv("XDG_CONFIG_HOME", str(home / "config"))
        mp.setenv("XDG_STATE_HOME", str(home / "state"))

        def stub(*_args, **_kwargs):
            raise KafkatxnError(f"{STUB}: would start serving or Spark here")

        mp.setattr("kafkatxn.exporter_http.serve", stub)
        mp.setattr("kafkatxn.audit.job.build_session", stub)
        yield home
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and GENERATED:
        detail = ", ".join(f"{k} {v}" for k, v in sorted(GENERATED.items()))
        # Fixture teardown runs under capture: write past it, so the figure shows on every run.
        with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
            reporter.write_line(f"bad input: {sum(GENERATED.values())} inputs generated ({detail})")


@pytest.fixture(scope="module")
def files(offline_cli: Path) -> dict[str, str]:
    """Paths the argument strategies draw from: all inside the test's own directory."""
    home = offline_cli
    good = home / "client.properties"
    good.write_text("client.id=fuzz\n")
    bad_line = home / "broken.properties"
    bad_line.write_text("security.protocol=PLAINTEXT\nthis line has no separator\n")
    unknown_key = home / "unknown.properties"
    unknown_key.write_text("no.such.key=1\n")
    binary = home / "binary.properties"
    binary.write_bytes(b"client.id=\xff\xfe\x00\x80\n")
    regular = home / "a-file"
    regular.write_text("")
    (home / "dir").mkdir()
    (home / "web-config.yml").write_text("# plain HTTP, no users\n")
    return {
        "web_config": str(home / "web-config.yml"),
        "home": str(home),
        "good_properties": str(good),
        "broken_properties": str(bad_line),
        "unknown_key_properties": str(unknown_key),
        "binary_properties": str(binary),
        "missing": str(home / "does-not-exist" / "x"),
        "dir": str(home / "dir"),
        "under_a_file": str(regular / "x"),
    }


# -- value strategies ---------------------------------------------------------------------------

# Text as a shell can pass it: no NUL (argv cannot carry one), anything else goes.
TEXT = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=30)
NOT_A_NUMBER = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs", "Nd", "No", "Nl")), max_size=12)

UNITS = {"ms": 10_000, "s": 10_000, "m": 10_000, "h": 10_000, "d": 3000}
DURATION_PART = st.sampled_from(sorted(UNITS)).flatmap(
    lambda u: st.tuples(st.integers(0, UNITS[u]), st.just(u), st.sampled_from(["", ".5", ".25"]))
)
VALID_DURATION = st.one_of(
    st.lists(DURATION_PART, min_size=1, max_size=3).map(lambda parts: "".join(f"{n}{f}{u}" for n, u, f in parts)),
    st.sampled_from([" 90s ", "1H30M", "0.5s"]),
)
# The library reads a bare number as seconds (profiles, check's Nagios ranges); a duration option refuses it.
BARE_NUMBER = st.one_of(st.integers(0, 10**6).map(str), st.sampled_from(["1.5", "15"]))
DURATION_GRAMMAR = re.compile(r"\d+(?:\.\d+)?|(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+", re.ASCII)
BAD_DURATION = st.one_of(
    st.sampled_from([
        "", " ", "-1s", "-5", "1e5", "5x", "ms", "1.s", ".5s", "1h-", "5 m", "1,5s", "inf", "nan", "0x10",
        "+5s", "1_000s", "٣s", "1١s", "9" * 400, "9" * 400 + "h", "99999999999999999999d", "1" + "0" * 30 + "ms",
    ]),
    TEXT.filter(lambda t: not DURATION_GRAMMAR.fullmatch(t.strip().lower())),
    BARE_NUMBER,
)
# --timeout: small, so that cases that reach the (unreachable) cluster end quickly.
VALID_TIMEOUT = st.sampled_from(["50ms", "100ms", "0.1s", "150ms", "0.05s"])
BAD_TIMEOUT = st.one_of(BAD_DURATION, st.sampled_from(["0", "0s", "0ms", "0.0001"]))


def ints_outside(low: int, high: int | None) -> st.SearchStrategy[str]:
    """Integers below ``low`` or above ``high``, and text that is no integer at all."""
    outside = st.integers(max_value=low - 1)
    if high is not None:
        outside = outside | st.integers(min_value=high + 1, max_value=high * 4 + 10**20)
    return outside.map(str) | NOT_A_NUMBER


def ints_within(low: int, high: int) -> st.SearchStrategy[str]:
    return st.integers(low, high).map(str)


TOPIC_CHARS = string.ascii_letters + string.digits + "._-"
VALID_TOPIC = st.text(TOPIC_CHARS, min_size=1, max_size=40).filter(lambda t: t not in (".", ".."))
BAD_TOPIC = st.one_of(
    st.sampled_from(["", ".", "..", "a b", "orders/1", "ördes", "x" * 250, "tab\there", "new\nline"]),
    TEXT.filter(lambda t: t and any(c not in TOPIC_CHARS for c in t) and not t.startswith("-")),
)


def compiles(pattern: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            re.compile(pattern)
    except Exception:  # noqa: BLE001 - re raises re.error, OverflowError or RecursionError
        return False
    return True


REGEX_TEXT = st.text(st.sampled_from(list("ab.^$*+?{}[]()|\\-,:0123456789PN<>=!#")), max_size=16)
BAD_REGEX = st.one_of(
    st.sampled_from(["(", "[", ")", "*", "a{2,1}", "(?P<", "\\", "a{99999999999}", "x{4294967296}", "(?<=a+)b",
                     "(" * 1500 + ")" * 1500, "[z-a]", "(?P=nope)", "\\N{no such name}"]),
    REGEX_TEXT.filter(lambda p: not compiles(p)),
)
VALID_REGEX = st.one_of(st.sampled_from(["^orders", "a|b", ".*", "x{2,3}", "(?i)Pay"]), REGEX_TEXT.filter(compiles))

RANGE_NUMBER = st.integers(0, 10**6)
VALID_RANGE = st.one_of(
    RANGE_NUMBER.map(str),
    RANGE_NUMBER.map(lambda n: f"{n}:"),
    RANGE_NUMBER.map(lambda n: f"~:{n}"),
    st.tuples(RANGE_NUMBER, RANGE_NUMBER).map(lambda t: f"{min(t)}:{max(t)}"),
    st.tuples(RANGE_NUMBER, RANGE_NUMBER).map(lambda t: f"@{min(t)}:{max(t)}"),
    st.sampled_from(["none", "off", "NONE", ""]),
)
BAD_RANGE = st.one_of(
    st.sampled_from(["abc", "10:5", "@20:10", "nan", "NaN:", "1:nan", "~", "@", "1:2:3", "--5", "5x", "10:x"]),
    st.tuples(st.integers(1, 10**6), st.integers(0, 10**6)).filter(lambda t: t[0] > t[1]).map(lambda t: f"{t[0]}:{t[1]}"),
)
VALID_AGE_RANGE = st.one_of(VALID_DURATION, st.tuples(st.integers(0, 600), st.integers(600, 6000)).map(lambda t: f"{t[0]}s:{t[1]}s"))
BAD_AGE_RANGE = st.one_of(st.sampled_from(["10m:5m", "5x", "nan", "1e5", "@", "-5m"]), BAD_DURATION.filter(lambda t: t.strip().lower() not in ("", "none", "off") and ":" not in t))

VALID_LISTEN = st.sampled_from(["127.0.0.1:0", ":0", "[::1]:0", "localhost:9799"])
BAD_LISTEN = st.sampled_from(["", "x", "1.2.3.4", ":99999", "host:-1", "a b:1", "[::1]", "host:65536", "h:port"])

VALID_BOOTSTRAP = st.sampled_from([UNREACHABLE, f" {UNREACHABLE} ", f"{UNREACHABLE},"])
BAD_BOOTSTRAP = st.sampled_from(["", "host", ":1", "h:99999", "h:65536", "a b:1", "h:x", "[::1]", "h:-1", "h:1:2", ","])

FORMATS = ["table", "json", "jsonl", "csv", "tsv"]
BAD_FORMAT = TEXT.filter(lambda t: t not in FORMATS and not t.startswith("-"))

SAFE_VALUE = st.text(string.ascii_letters + string.digits + "-_.", min_size=1, max_size=12)
VALID_PROPERTY = SAFE_VALUE.map(lambda v: ["-X", f"client.id={v}"])
BAD_PROPERTY = st.one_of(
    st.sampled_from([
        ["-X", "novalue"], ["-X", "no.such.key=1"], ["-X", "security.protocol=bogus"], ["-X", "sasl.mechanism=GSSAPI"],
        ["-X", "sasl.jaas.config=garbage"], ["-X", "ssl.truststore.type=JKS", "-X", "ssl.truststore.location=/x.jks"],
    ]),
    SAFE_VALUE.map(lambda k: ["-X", f"x{k}=1"]),
)
# Refused only when a client is built (librdkafka's own checks, inline PEM for kafka-python): still
# the user's to fix, so still exit 64, for the commands that build one.
BAD_CLIENT_PROPERTY = st.one_of(BAD_PROPERTY, st.sampled_from([
    ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN"],
    ["-X", "security.protocol=SSL", "-X", "ssl.keystore.key=inline"],
]))

STATES = ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"]


@dataclass(frozen=True)
class Opt:
    """One option: how to write it, valid values and (where a value can be wrong) invalid ones.

    Strategies give the argv tokens for one use of the option; ``bad`` None means every value goes.
    """

    name: str
    good: st.SearchStrategy[list[str]]
    bad: st.SearchStrategy[list[str]] | None = None


def opt(name: str, good: st.SearchStrategy[str], bad: st.SearchStrategy[str] | None = None) -> Opt:
    return Opt(name, good.map(lambda v: [name, v]), bad.map(lambda v: [name, v]) if bad is not None else None)


def flag(name: str) -> Opt:
    return Opt(name, st.just([name]))


def path_opt(name: str, good_keys: list[str], bad_keys: list[str]) -> Opt:
    """Paths chosen from the module's files (never a random path: some of these are written to)."""
    good = st.sampled_from(good_keys).map(lambda k: [name, PATH + k])
    return Opt(name, good, st.sampled_from(bad_keys).map(lambda k: [name, PATH + k]) if bad_keys else None)


PARTITION = opt("--partition", ints_within(0, 1000), ints_outside(0, INT32_MAX))
BROKER_ID = opt("--broker-id", ints_within(0, 1000), ints_outside(0, INT32_MAX))
TOPICS = opt("--topic", VALID_TOPIC, BAD_TOPIC)
MAX_TXN_TIMEOUT = opt("--max-transaction-timeout", VALID_DURATION, BAD_DURATION)
# A checkpoint path is only read (one that is not a checkpoint is a missing part, exit 3): any of the module's files.
SPARK_CHECKPOINT = path_opt("--spark-checkpoint", ["missing", "dir", "good_properties"], [])
SPARK_WRITER = opt("--spark-writer", st.sampled_from(["etl=orders-enricher/main", "etl=app/@ledger"]),
                   st.one_of(st.sampled_from(["app/q", "etl=noslash", "=app/q", "etl=a/b/c"]), SAFE_VALUE.filter(lambda v: "/" not in v)))

BOOTSTRAP = Opt("-b", VALID_BOOTSTRAP.map(lambda v: ["-b", v]), BAD_BOOTSTRAP.map(lambda v: ["-b", v]))
TIMEOUT = Opt("--timeout", VALID_TIMEOUT.map(lambda v: ["--timeout", v]), BAD_TIMEOUT.map(lambda v: ["--timeout", v]))
SHARED_OFFLINE = [
    BOOTSTRAP,
    TIMEOUT,
    Opt("-o", st.sampled_from(FORMATS).map(lambda v: ["-o", v]), BAD_FORMAT.map(lambda v: ["-o", v])),
    flag("--no-headers"),
    Opt("-X", VALID_PROPERTY, BAD_PROPERTY),
    path_opt("-c", ["good_properties"], ["broken_properties", "unknown_key_properties", "binary_properties", "missing", "dir"]),
    Opt("--profile", st.nothing(), SAFE_VALUE.map(lambda v: ["--profile", v])),  # no profiles file: any name is unknown
]
SHARED = [o if o.name != "-X" else Opt("-X", VALID_PROPERTY, BAD_CLIENT_PROPERTY) for o in SHARED_OFFLINE]

# Command -> (base arguments that reach the cluster, its options, argument combinations that are wrong).
COMMANDS: dict[tuple[str, ...], tuple[list[str], list[Opt], list[list[str]]]] = {
    ("cluster",): ([], [], []),
    ("producers",): (
        [],
        [TOPICS, PARTITION, BROKER_ID, flag("--include-internal"), flag("--summary")],
        [["--partition", "0"], ["--partition", "0", "-t", "a", "-t", "b"]],
    ),
    ("lso",): (
        [],
        [
            TOPICS, flag("--groups"),
            opt("--min-lag", ints_within(0, 10**6), ints_outside(0, None)),
            opt("--top", ints_within(1, 10**6), ints_outside(1, None)),
            opt("--sort", st.sampled_from(["lag", "age"]), TEXT.filter(lambda t: t not in ("lag", "age") and not t.startswith("-"))),
            opt("--critical-age", VALID_DURATION, BAD_DURATION),
            opt("--probe-max-gap", ints_within(0, 10**6), ints_outside(0, None)),
            opt("--lag-threshold", ints_within(1, 10**6), ints_outside(1, None)),
            # Watching only with a sample count and a short interval: a case must end.
            Opt("--samples", st.sampled_from([["--samples", "1"], ["--samples", "2", "--interval", "10ms"], ["--watch", "--samples", "1"]]),
                ints_outside(1, None).map(lambda v: ["--samples", v])),
            Opt("--interval", st.nothing(), st.one_of(BAD_DURATION, st.just("0")).map(lambda v: ["--interval", v, "--samples", "1"])),
            SPARK_CHECKPOINT,
        ],
        [["g1"], ["g1", "g2"], ["--spark-checkpoint", "ck"]],  # group names or a checkpoint without --groups
    ),
    ("hanging",): (
        [],
        [BROKER_ID, TOPICS, PARTITION, MAX_TXN_TIMEOUT],
        [["--partition", "0"], ["--partition", "1", "-t", "a", "-t", "b"]],
    ),
    ("abort",): (
        ["-t", "orders", "-p", "0", "--start-offset", "5", "--yes"],
        [
            opt("--topic", VALID_TOPIC, BAD_TOPIC),
            PARTITION,
            opt("--start-offset", ints_within(0, 10**12), ints_outside(0, INT64_MAX)),
            Opt("--producer-id", st.tuples(ints_within(0, 10**9), ints_within(0, 32767), ints_within(-1, 1000)).map(
                lambda t: ["--producer-id", t[0], "--producer-epoch", t[1], "--coordinator-epoch", t[2]])),
            flag("--dry-run"),
            path_opt("--audit-log", ["audit"], ["dir", "under_a_file"]),
            MAX_TXN_TIMEOUT,  # without --all-hanging a usage error whatever its value
            flag("--allow-unknown-outcome"),
        ],
        [
            [], ["-t", "orders"], ["-p", "0"], ["--all-hanging", "-t", "x", "--start-offset", "1"], ["--all-hanging", "-p", "0"],
            ["--all-hanging", "--allow-unknown-outcome"],
            ["-t", "x", "-p", "0", "--max-transaction-timeout", "1s"],
            ["-t", "x", "-p", "0"],  # neither --start-offset nor the explicit form
            ["-t", "x", "-p", "0", "--producer-id", "1"],
            ["-t", "x", "-p", "0", "--producer-id", "1", "--producer-epoch", "0"],
            ["-t", "x", "-p", "0", "--producer-id", "-1", "--producer-epoch", "0", "--coordinator-epoch", "0"],
            ["-t", "x", "-p", "0", "--producer-id", str(INT64_MAX + 1), "--producer-epoch", "0", "--coordinator-epoch", "0"],
            ["-t", "x", "-p", "0", "--producer-id", "1", "--producer-epoch", "-1", "--coordinator-epoch", "0"],
            ["-t", "x", "-p", "0", "--producer-id", "1", "--producer-epoch", "32768", "--coordinator-epoch", "0"],
            ["-t", "x", "-p", "0", "--producer-id", "1", "--producer-epoch", "0", "--coordinator-epoch", "-2"],
            ["-t", "x", "-p", "0", "--producer-id", "1", "--producer-epoch", "0", "--coordinator-epoch", str(INT32_MAX + 1)],
        ],
    ),
    ("restore-commit",): (
        ["-t", "orders", "-p", "0", "--start-offset", "5", "--yes"],
        [opt("--topic", VALID_TOPIC, BAD_TOPIC), PARTITION, opt("--start-offset", ints_within(0, 10**12), ints_outside(0, INT64_MAX)),
         flag("--dry-run"), path_opt("--audit-log", ["audit"], ["dir", "under_a_file"]), MAX_TXN_TIMEOUT],
        [[], ["-t", "orders"], ["-t", "x", "-p", "0"], ["-p", "0", "--start-offset", "1"], ["-t", "x", "-p", "0", "--start-offset", "-1"]],
    ),
    ("fence",): (
        ["some-id", "--yes"],
        [flag("--allow-unknown"), flag("--allow-two-phase-commit"), flag("--dry-run"), path_opt("--audit-log", ["audit"], ["dir", "under_a_file"]),
         opt("--transactional-id", VALID_TOPIC)],
        [[], ["some-id", "--pattern", "x"], ["--transactionalId", "x", "--pattern", "x"], ["--pattern", "("], ["--pattern", "a{99999999999}"]],
    ),
    ("check",): (
        [],
        [
            *(opt(f"--{name}", VALID_RANGE, BAD_RANGE) for name in
              ("lso-lag-warn", "lso-lag-crit", "producer-ids-warn", "producer-ids-crit")),
            *(opt(f"--{name}", VALID_AGE_RANGE, BAD_AGE_RANGE) for name in ("txn-age-warn", "txn-age-crit")),
            opt("--topic-regex", VALID_REGEX, BAD_REGEX),
            path_opt("--textfile", ["prom"], ["txt", "missing_prom"]),
            flag("--only-lagging"), flag("--per-topic"), MAX_TXN_TIMEOUT,
            flag("--groups"), opt("--group-regex", VALID_REGEX, BAD_REGEX),
            *(opt(f"--{name}", VALID_RANGE, BAD_RANGE) for name in ("group-lag-warn", "group-lag-crit")),
            SPARK_CHECKPOINT,
        ],
        [],
    ),
    ("diagnose",): (
        [],
        [
            Opt("--group", SAFE_VALUE.map(lambda v: ["--group", v])), TOPICS,
            opt("--probe-max-gap", ints_within(0, 10**6), ints_outside(0, None)), MAX_TXN_TIMEOUT,
            opt("--lag-threshold", ints_within(1, 10**6), ints_outside(1, None)),
            SPARK_CHECKPOINT, SPARK_WRITER,
        ],
        [],
    ),
    ("exporter",): (
        [],
        [
            opt("--listen", VALID_LISTEN, BAD_LISTEN),
            opt("--cache-ttl", VALID_DURATION, BAD_DURATION),
            opt("--scrape-timeout", VALID_DURATION.filter(lambda d: durations.parse_duration_ms(d) > 0),
                st.one_of(BAD_DURATION, st.sampled_from(["0", "0s"]))),
            opt("--topic-regex", VALID_REGEX, BAD_REGEX),
            path_opt("--web-config-file", ["web_config"], ["missing", "dir", "binary_properties", "good_properties"]),
            flag("--only-lagging"), flag("--per-topic"), flag("--per-family"), MAX_TXN_TIMEOUT,
            Opt("--group-lag", st.sampled_from([["--group-lag"], ["--no-group-lag"]])),
            opt("--group-regex", VALID_REGEX, BAD_REGEX), flag("--per-group"), SPARK_CHECKPOINT, SPARK_WRITER,
        ],
        [],
    ),
    ("audit",): (
        [],
        [
            opt("--master", st.just("local[1]")),
            path_opt("--history", ["dir"], ["missing", "under_a_file", "good_properties"]),
            path_opt("--report", ["dir"], []),
            flag("--no-live"),
            path_opt("--inventory", ["inventory"], ["missing", "dir", "broken_properties"]),
            opt("--min-fences", ints_within(1, 100), ints_outside(1, None)),
            opt("--fence-window", VALID_DURATION, BAD_DURATION),
            opt("--min-family-size", ints_within(2, 100), ints_outside(2, None)),
            opt("--id-expiration", VALID_DURATION, BAD_DURATION),
            opt("--storm-inits", ints_within(2, 100), ints_outside(2, None)),
            opt("--storm-window", VALID_DURATION, BAD_DURATION),
            opt("--storm-factor", st.sampled_from(["1", "2", "2.5", "10"]), st.sampled_from(["0.5", "-1", "two", ""])),
            opt("--storm-severity", st.sampled_from(["critical", "warning"]), st.sampled_from(["fatal", "", "Critical", "info"])),
            Opt("--capture", st.just(["--capture", PATH + "dir", "--for", "10s"]), BAD_DURATION.map(lambda v: ["--capture", PATH + "dir", "--for", v])),
        ],
        [["--no-live"], ["--for", "10s"]],
    ),
    ("config", "show"): ([], [], []),
    ("transactions", "list"): (
        [],
        [
            opt("--state", st.sampled_from(STATES + ["ongoing", " Empty "]),
                TEXT.filter(lambda t: t.strip().lower() not in {s.lower() for s in STATES} and not t.startswith("-"))),
            opt("--producer-id", ints_within(0, 10**12), ints_outside(0, INT64_MAX)),
            opt("--min-duration", VALID_DURATION, BAD_DURATION),
            opt("--pattern", VALID_REGEX, BAD_REGEX),
            flag("--describe"),
        ],
        [],
    ),
    ("transactions", "describe"): (["some-id"], [opt("--transactional-id", VALID_TOPIC)], [[]]),
    ("transactions", "history"): (
        ["some-id"],
        [opt("--since", VALID_DURATION, BAD_DURATION), flag("--follow"), opt("--pattern", VALID_REGEX, BAD_REGEX),
         opt("--log-topic", VALID_TOPIC)],
        [[]],
    ),
    ("completion",): (["bash"], [], [[], ["powershell"], ["bash", "zsh"]]),
}


def shared_options(path: tuple[str, ...]) -> list[Opt]:
    """The connection and output options: every command has them but ``completion``; ``config show``
    builds no client, and ``audit`` builds its clients in Spark (a stub here), so only what the
    config itself checks is wrong there."""
    return {("completion",): [], ("config", "show"): SHARED_OFFLINE, ("audit",): SHARED_OFFLINE}.get(path, SHARED)


def with_paths(tokens: list[str], files: dict[str, str]) -> list[str]:
    """``@path:`` keys in the tokens, replaced by real paths inside the test's directory."""
    home = Path(files["home"])
    extra = {
        "audit": str(home / "state" / "audit.jsonl"),
        "prom": str(home / "metrics.prom"),
        "txt": str(home / "metrics.txt"),
        "missing_prom": str(home / "no-such-dir" / "metrics.prom"),
        "inventory": str(home / "inventory.csv"),
    }
    table = {**files, **extra}
    return [table[t[len(PATH):]] if t.startswith(PATH) else t for t in map(str, tokens)]


def shared_valid(path: tuple[str, ...] = ()) -> list[str]:
    return [] if path == ("completion",) else ["-b", UNREACHABLE, "--timeout", "100ms"]


# -- the properties -----------------------------------------------------------------------------


@settings(SETTINGS, max_examples=300)
@given(data=st.data())
def test_any_combination_of_arguments_ends_cleanly(files, data):
    """Random commands with random options, values valid or not: only the rules at the top hold."""
    path = data.draw(st.sampled_from(sorted(COMMANDS)), label="command")
    base, options, _wrong = COMMANDS[path]
    args = list(path) + list(base)
    shared = shared_options(path)
    chosen = data.draw(st.lists(st.sampled_from(options + shared), max_size=6, unique_by=lambda o: o.name), label="options") if options + shared else []
    if shared:  # never the default 30s deadline, never a host to resolve
        chosen += [o for o in (TIMEOUT, BOOTSTRAP) if o not in chosen]
    for o in chosen:
        strategy = o.good if o.bad is None else st.one_of(o.good, o.bad)
        args += data.draw(strategy, label=o.name)
    args = with_paths(args, files)
    Path(files["home"], "inventory.csv").write_text("application,instance,prefix\napp,i1,app-\n")
    GENERATED["argument combinations"] += 1
    assert_rules(run(args), args)


def names_it(line: str, tokens: list[str]) -> bool:
    """The error line points at what to fix: an option name or the value given (or its start)."""
    for t in tokens:
        candidates = {t, repr(t), repr(t)[1:-1], t.split("=", 1)[0], t.strip()}
        if any(c and len(c) > 0 and c in line for c in candidates if c.strip()):
            return True
        if len(t) > 40 and t[:20] in line:  # long values are shown shortened
            return True
    return False


@settings(SETTINGS, max_examples=400)
@given(data=st.data())
def test_one_bad_value_is_a_usage_error_before_the_cluster_is_asked(files, data):
    """Valid arguments that would reach the cluster, plus one invalid value or a wrong combination:
    exit 64 with one line that names it (reaching the unreachable cluster would be exit 3)."""
    path = data.draw(st.sampled_from(sorted(COMMANDS)), label="command")
    base, options, wrong = COMMANDS[path]
    bad_options = [o for o in options + shared_options(path) if o.bad is not None]
    kinds = (["value"] if bad_options else []) + (["combination"] if wrong else [])
    assume(kinds)
    kind = data.draw(st.sampled_from(kinds), label="kind")
    if kind == "value":
        o = data.draw(st.sampled_from(bad_options), label="option")
        bad = data.draw(o.bad, label=o.name)
        args = list(path) + list(base) + shared_valid(path) + bad
        pointers = [o.name, *bad[1:]]
        if o.name == "-X":  # librdkafka's refusal names the setting to add, not the ones given
            pointers += ["bad client settings"]
    else:
        combo = data.draw(st.sampled_from(wrong), label="combination")
        args = list(path) + list(combo) + shared_valid(path)
        pointers = None
    args = with_paths(args, files)
    GENERATED["invalid values and combinations"] += 1
    outcome = run(args)
    where = f"kafkatxn {args!r}\n{outcome}"
    line = assert_usage_error(outcome, where)
    # An empty value has nothing to quote ("empty duration"): the line cannot point at it.
    if pointers is not None and args[-1].strip():  # the bad value is the last token
        assert names_it(line, with_paths(pointers, files)), where


@settings(SETTINGS, max_examples=600)
@given(text=st.one_of(VALID_DURATION, BAD_DURATION, BARE_NUMBER, TEXT, st.integers(-10**30, 10**30).map(str), st.floats().map(str)))
def test_durations_parse_or_are_usage_errors(text):
    GENERATED["durations"] += 1
    valid = DURATION_GRAMMAR.fullmatch(text.strip().lower()) is not None
    try:
        ms = durations.parse_duration_ms(text)
    except UsageError as exc:
        assert "\n" not in str(exc)
        # Within the grammar, only values beyond the maximum are refused.
        if valid:
            assert "too long" in str(exc), (text, exc)
        return
    assert valid, f"{text!r} was accepted as {ms} ms"
    assert isinstance(ms, int) and 0 <= ms <= durations.MAX_DURATION_MS


@settings(SETTINGS, max_examples=300)
@given(parts=st.lists(DURATION_PART, min_size=1, max_size=4))
def test_durations_add_up_their_parts(parts):
    GENERATED["durations"] += 1
    text = "".join(f"{n}{f}{u}" for n, u, f in parts)
    scale = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
    expected = sum(float(f"{n}{f}") * scale[u] for n, u, f in parts)
    assert durations.parse_duration_ms(text) == int(expected)
    assert durations.parse_duration_ms(text.upper()) == int(expected)


def test_the_longest_duration_is_accepted_and_one_more_is_not():
    top_s = durations.MAX_DURATION_MS // 1000
    assert durations.parse_duration_ms(f"{top_s}s") == top_s * 1000
    with pytest.raises(UsageError, match="too long"):
        durations.parse_duration_ms(f"{top_s + 1}s")


@settings(SETTINGS, max_examples=60)
@given(timeout=VALID_DURATION.filter(lambda d: durations.parse_duration_ms(d) > 0))
def test_any_valid_timeout_gives_settings_librdkafka_accepts(timeout):
    """librdkafka checks its settings' ranges when a client is built (socket.timeout.ms ≤ 300000000)."""
    from confluent_kafka.admin import AdminClient

    GENERATED["timeouts given to librdkafka"] += 1
    resolved = config.resolve(UNREACHABLE, timeout=timeout)
    AdminClient(resolved.librdkafka())  # raises KafkaException(_INVALID_ARG) for a setting out of range


REGEX_OPTIONS = (
    ["fence", "--dry-run", "--pattern"],
    ["transactions", "list", "--pattern"],
    ["check", "--topic-regex"],
    ["exporter", "--listen", "127.0.0.1:0", "--topic-regex"],
)


@settings(SETTINGS, max_examples=300)
@given(pattern=st.one_of(BAD_REGEX, TEXT.filter(lambda t: not compiles(t))))
def test_bad_regexes_are_one_usage_error_before_the_cluster_is_asked(pattern):
    """Every option that takes a regex: fence --pattern, transactions list --pattern, check and
    exporter --topic-regex. re raises re.error, and OverflowError or RecursionError for some."""
    GENERATED["regexes"] += 1
    for option in REGEX_OPTIONS:
        args = [*option, pattern, "-b", UNREACHABLE, "--timeout", "100ms"]
        outcome = run(args)
        assert_rules(outcome, args)
        assert outcome.code == 64, f"{args!r}\n{outcome}"


@settings(SETTINGS, max_examples=40)
@given(pattern=st.one_of(VALID_REGEX, TEXT.filter(compiles)))
def test_good_regexes_go_on_to_the_cluster(pattern):
    GENERATED["regexes"] += 1
    for option in REGEX_OPTIONS:
        # A short deadline: each of these ends at the unreachable cluster.
        args = [*option, pattern, "-b", UNREACHABLE, "--timeout", "20ms"]
        outcome = run(args)
        assert_rules(outcome, args)
        assert outcome.code == 3, f"{args!r}\n{outcome}"


@pytest.mark.parametrize("args, traceback_shown", [
    # "--debug" as an option's value names a pattern or a topic: no traceback (hypothesis found `--pattern --debug`)
    (["fence", "--dry-run", "--pattern", "--debug", "-b", UNREACHABLE, "--timeout", "20ms"], False),
    (["lso", "--topic", "--debug", "-b", UNREACHABLE, "--timeout", "20ms"], False),
    (["lso", "-b", UNREACHABLE, "--timeout", "20ms", "--debug"], True),
    (["--debug", "lso", "-b", UNREACHABLE, "--timeout", "20ms"], True),
])
def test_a_traceback_is_shown_only_where_debug_is_the_option(args, traceback_shown):
    first = run(args)
    assert first.code == 3 and ("Traceback" in first.stderr) is traceback_shown, f"{args!r}\n{first}"
    if traceback_shown:  # the next run in the same process, without it, is not taken for one with it
        again = run([a for a in args if a != "--debug"])
        assert again.code == 3 and "Traceback" not in again.stderr, f"{args!r}\n{again}"


# -- properties files ---------------------------------------------------------------------------

KEYS = sorted(config.LIBRDKAFKA_KEYS | config.JAVA_KEYS_IGNORED | {"sasl.mechanism", "sasl.jaas.config",
              "ssl.truststore.location", "ssl.keystore.location", "ssl.keystore.type", "ssl.truststore.type"})
LINE = st.one_of(
    st.tuples(st.sampled_from(KEYS), st.sampled_from(["=", ":", " = ", " ", "\t:"]), TEXT).map("".join),
    st.sampled_from(["# comment", "! comment", "", "   ", "key", "=value", "\\", "a\\", "a=b\\", " \\ ", "x=\\u00e9"]),
    TEXT,
)


@settings(SETTINGS, max_examples=300)
@given(lines=st.lists(LINE, max_size=8), newline=st.sampled_from(["\n", "\r\n", "\r"]), raw=st.binary(max_size=64),
       binary=st.booleans())
def test_properties_files_are_read_or_refused_in_one_line(files, lines, newline, raw, binary):
    """Random lines, continuations, unicode and binary: `config show -c FILE` exits 0 or 64, and a
    refusal names the file."""
    GENERATED["properties files"] += 1
    path = Path(files["home"], "fuzz.properties")
    if binary:
        path.write_bytes(raw)
    else:
        path.write_text(newline.join(lines), encoding="utf-8", newline="")
    args = ["config", "show", "-c", str(path), "-b", UNREACHABLE]
    outcome = run(args)
    assert outcome.code in (0, 64), f"{args!r}\n{outcome}"
    assert_rules(outcome, args)
    if outcome.code == 64:
        assert str(path) in outcome.stderr, outcome


def test_a_path_under_an_unknown_user_is_a_file_that_does_not_exist(files):
    """``~user`` of no user stays as written, as a shell leaves it: the file is missing (exit 64, the
    key and line named), not an unexpected error (pathlib raises for it; hypothesis found ``~0``)."""
    path = Path(files["home"], "unknown-user.properties")
    path.write_text("ssl.truststore.location=~kafkatxn-no-such-user-0/truststore.jks\n", encoding="utf-8")
    args = ["config", "show", "-c", str(path), "-b", UNREACHABLE]
    outcome = run(args)
    assert outcome.code == 64, f"{args!r}\n{outcome}"
    assert_rules(outcome, args)
    assert f"{path}:1: ssl.truststore.location=~kafkatxn-no-such-user-0/truststore.jks: no such file" in outcome.stderr, outcome
    args = ["config", "show", "-c", "~kafkatxn-no-such-user-0/client.properties", "-b", UNREACHABLE]
    outcome = run(args)
    assert outcome.code == 64 and "~kafkatxn-no-such-user-0/client.properties does not exist" in outcome.stderr, outcome


@settings(SETTINGS, max_examples=300)
@given(pairs=st.lists(st.tuples(st.text(TOPIC_CHARS, min_size=1, max_size=20),
                                st.text(st.characters(blacklist_characters="\x00\r\n", blacklist_categories=("Cs",)), max_size=20).filter(lambda v: v == v.strip())),
                      min_size=1, max_size=6, unique_by=lambda p: p[0]),
       separator=st.sampled_from(["=", ":", " = ", " : ", "\t=\t"]))
def test_properties_lines_round_trip(pairs, separator):
    """What a Java properties writer would write (backslashes escaped) reads back as written, on the
    line it was written on: only \\n, \\r and \\r\\n end a line, as in Java."""
    GENERATED["properties files"] += 1
    text = "\n".join(f"{k}{separator}{v.replace(chr(92), chr(92) * 2)}" for k, v in pairs) + "\n"
    parsed = config.parse_properties(text, "fuzz")
    assert [(p.key, p.value, p.line) for p in parsed] == [(k, v, i + 1) for i, (k, v) in enumerate(pairs)]


INVENTORY_TEXT = st.one_of(
    TEXT,
    st.lists(st.lists(TEXT, max_size=4).map(",".join), max_size=5).map(lambda rows: "application,instance,prefix\n" + "\n".join(rows)),
    st.integers(1, 5000).map(lambda n: "[" * n + "]" * n),
    st.integers(1, 5000).map(lambda n: '{"declarations": ' + "[" * n),
    st.recursive(st.none() | st.booleans() | st.integers() | TEXT, lambda c: st.lists(c) | st.dictionaries(TEXT, c), max_leaves=10).map(repr),
)


@settings(SETTINGS, max_examples=200)
@given(text=INVENTORY_TEXT)
def test_inventory_files_are_read_or_refused_as_usage_errors(files, text):
    GENERATED["inventory files"] += 1
    path = Path(files["home"], "fuzz-inventory.json")
    path.write_text(text, encoding="utf-8")
    try:
        rules.read_inventory(path)
    except UsageError as exc:
        assert "\n" not in str(exc).strip()


# -- examples the properties found (kept as plain tests, so they fail on their own) ---------------


@pytest.mark.parametrize("args, fragment", [
    (["cluster", "--timeout", "9" * 400 + "s"], "too long"),
    (["check", "--txn-age-warn", "9" * 300 + "h"], "--txn-age-warn"),
    (["lso", "--critical-age", "٣s"], "bad duration"),
    (["cluster", "-b", "h:99999"], "bad bootstrap server"),
    (["check", "--topic-regex", "("], "--topic-regex"),
    (["check", "--topic-regex", "a{99999999999}"], "--topic-regex"),
    (["fence", "--pattern", "a{99999999999}", "--dry-run"], "--pattern"),
    (["transactions", "list", "--pattern", "(" * 1500 + ")" * 1500], "--pattern"),
    (["producers", "--partition", "0"], "--partition needs exactly one --topic"),
    (["hanging", "--partition", "-1", "-t", "x"], "--partition"),
    (["hanging", "--broker-id", "-3"], "--broker-id"),
    (["producers", "--broker-id", "-3"], "--broker-id"),
    (["producers", "-t", "a b"], "topic"),
    (["abort", "-t", "", "-p", "0", "--start-offset", "1"], "topic"),
    (["check", "--lso-lag-warn", "nan"], "--lso-lag-warn"),
    (["transactions", "list", "--producer-id", str(INT64_MAX + 1)], "--producer-id"),
    (["cluster", "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN"], "sasl.username"),
    (["lso", "--top", "x\ny"], "--top"),
    (["audit", "--no-live", "--history", "/nonexistent/history"], "history directory"),  # was found after Spark started
])
def test_found_bad_inputs_are_usage_errors(files, args, fragment):
    path = max((p for p in COMMANDS if tuple(args[: len(p)]) == p), key=len)
    args = [*path, *shared_valid(path), *args[len(path):]]  # the bad value comes last, so it wins
    outcome = run(args)
    line = assert_usage_error(outcome, f"{args!r}\n{outcome}")
    assert fragment in line, line


def test_every_command_and_option_is_fuzzed():
    """A new command or option must get a strategy here, or this fails."""
    from kafkatxn.cli.app import leaf_commands
    from kafkatxn.cli.common import SHARED_NAMES

    seen = {
        path: {p.opts[0] for p in cmd.params if p.name not in SHARED_NAMES and p.param_type_name == "option"}
        for path, cmd in leaf_commands().items()
    }
    assert set(seen) == set(COMMANDS)
    for path, names in seen.items():
        _base, options, _wrong = COMMANDS[path]
        covered = {o.name for o in options}
        implied = {"--producer-epoch", "--coordinator-epoch", "--watch", "--for", "--all-hanging", "--yes", "--pattern"}
        assert names - covered - implied == set(), (path, names - covered)


def test_ranges_never_parse_to_nan():
    for text in ("nan", "NaN:", "@nan:1", "1:nan"):
        with pytest.raises(UsageError):
            Range.parse(text)
    assert math.isinf(Range.parse("10:").end)
