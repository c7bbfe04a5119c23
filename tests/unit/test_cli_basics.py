"""Exit codes and one-line errors that need no broker."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest


def run(*args, env=None, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "kafkatxn", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


@pytest.fixture
def clean_env(tmp_path, monkeypatch):
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKATXN_")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    return env


def assert_one_line_error(result):
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("kafkatxn: error: ")
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_unreachable_cluster_exits_3_within_the_deadline(clean_env):
    start = time.monotonic()
    result = run("cluster", "--bootstrap-server", "127.0.0.1:1", "--timeout", "5s", env=clean_env)
    elapsed = time.monotonic() - start
    assert result.returncode == 3, result.stderr
    assert elapsed < 10
    assert_one_line_error(result)
    assert "127.0.0.1:1" in result.stderr


def test_unresolvable_host_exits_3(clean_env):
    result = run("cluster", "-b", "no-such-host.invalid:9092", "--timeout", "3s", env=clean_env)
    assert result.returncode == 3
    assert_one_line_error(result)


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["cluster", "--bogus"], "No such option"),
        (["cluster", "-b", "h:1", "-o", "xml"], "--output"),
        (["cluster", "-b", "h:1", "--timeout", "soon"], "bad duration"),
        (["cluster"], "--bootstrap-server"),
        (["no-such-command"], "No such command"),
    ],
)
def test_usage_errors_exit_64_with_one_line(clean_env, args, fragment):
    result = run(*args, env=clean_env)
    assert result.returncode == 64, result.stderr
    assert_one_line_error(result)
    assert fragment in result.stderr


def test_malformed_command_config_exits_64_naming_the_line(clean_env, tmp_path):
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=SASL_SSL\nsasl.mechanism SCRAM-SHA-512 oops\n")
    result = run("cluster", "-b", "127.0.0.1:1", "--command-config", str(props), env=clean_env)
    assert result.returncode == 64
    assert_one_line_error(result)
    assert f"{props}:2:" in result.stderr


def test_env_supplies_bootstrap_and_flag_wins(clean_env, tmp_path):
    env = dict(clean_env, KAFKATXN_BOOTSTRAP_SERVERS="envhost:9092", KAFKATXN_TIMEOUT="12s")
    shown = run("config", "show", "-o", "json", env=env)
    assert shown.returncode == 0, shown.stderr
    assert '"envhost:9092"' in shown.stdout and '"timeout_ms",\n    "value": 12000\n' in shown.stdout
    shown = run("config", "show", "-o", "json", "-b", "flaghost:1", env=env)
    assert '"flaghost:1"' in shown.stdout


def test_config_show_masks_secrets(clean_env, tmp_path):
    props = tmp_path / "client.properties"
    props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="hunter2-secret";\n'
    )
    result = run("config", "show", "-b", "h:1", "-c", str(props), "--debug", env=clean_env)
    assert result.returncode == 0, result.stderr
    assert "hunter2-secret" not in result.stdout + result.stderr
    assert "******" in result.stdout


def test_version_and_help(clean_env):
    assert run("--version", env=clean_env).stdout.startswith("kafkatxn ")
    help_text = run("--help", env=clean_env).stdout
    assert "cluster" in help_text and "64" in help_text


@pytest.mark.parametrize(
    "args",
    [["cluster"], ["transactions", "describe", "some-id"], ["transactions", "list"], ["producers"]],
)
def test_unreachable_says_so_whichever_client_connects_first(clean_env, args):
    # kafka-python reports a refused bootstrap as a timeout; the user must still read "cannot reach".
    result = run(*args, "-b", "127.0.0.1:1", "--timeout", "2s", env=clean_env)
    assert result.returncode == 3, result.stderr
    assert_one_line_error(result)
    assert "cannot reach any broker at 127.0.0.1:1" in result.stderr


# A command line run as the process's own ends without the interpreter's teardown (cli.app._leave):
# by os._exit, after the atexit handlers ran, the output whole, the exit code kept. A thread that is
# not a daemon, still running, keeps the ordinary exit (the interpreter waits for it). That thread runs
# until main() has left (it once waited 0.5 s, and a loaded machine took longer to import and run
# config show: the thread had ended, os._exit was right, and the test failed).
LEAVING = """
import atexit, os, sys, threading
atexit.register(lambda: print("atexit ran", file=sys.stderr))
real_exit = os._exit
def leaving(code):
    print("left by os._exit", code, file=sys.stderr)
    sys.stderr.flush()
    real_exit(code)
os._exit = leaving
left = threading.Event()
if sys.argv[1] == "thread":
    threading.Thread(target=left.wait, args=(60,), daemon=False).start()
from kafkatxn.cli.app import main
sys.argv = ["kafkatxn", "--bootstrap-server", "127.0.0.1:1", "config", "show", "-o", "json"]
try:
    main()
finally:
    left.set()
"""


@pytest.mark.parametrize("case", ["plain", "thread"])
def test_a_command_run_as_the_process_leaves_without_the_interpreters_teardown(case, clean_env):
    import json

    result = subprocess.run([sys.executable, "-c", LEAVING, case], capture_output=True, text=True, timeout=60, env=clean_env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)  # whole: flushed before the process ended
    assert "atexit ran" in result.stderr
    assert ("left by os._exit 0" in result.stderr) == (case == "plain"), result.stderr


@pytest.mark.parametrize("runner", ["cProfile", "profile", "trace"])
def test_a_command_run_under_a_profiler_or_tracer_leaves_it_its_output(runner, clean_env, tmp_path):
    """``python -m cProfile -o FILE -m kafkatxn ...`` (bench_sizes.py --profile) wrote no FILE while the
    command ended by os._exit: the profiler dumps after the command returns."""
    out = tmp_path / "run.out"
    options = ["--listfuncs", "--module"] if runner == "trace" else ["-o", str(out), "-m"]
    argv = [sys.executable, "-m", runner, *options, "kafkatxn", "--bootstrap-server", "127.0.0.1:1", "config", "show", "-o", "json"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=clean_env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    if runner == "trace":  # the functions it saw are listed after the command returns
        assert "functions called:" in result.stdout and "modulename: app, funcname: _leave" in result.stdout, result.stdout[-2000:]
    else:
        assert out.stat().st_size > 0
        import pstats

        assert any("kafkatxn" in filename for filename, _line, _name in pstats.Stats(str(out)).stats)


def test_main_called_in_process_still_raises_system_exit(clean_env, monkeypatch, capsys):
    from kafkatxn.cli.app import main

    with pytest.raises(SystemExit) as left:
        main(["--bootstrap-server", "127.0.0.1:1", "config", "show", "-o", "json"])
    assert left.value.code == 0
