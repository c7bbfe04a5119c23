"""Nothing listening at any bootstrap address is an answer, not a silence: the command ends at once,
naming each address and its reason. A silent address still gets the whole deadline. (No broker:
a closed loopback port refuses, a `.invalid` name never resolves, a listening socket that never
answers is silent.)"""

from __future__ import annotations

import re
import socket
import time

import pytest

from tests.support.cli_helpers import run_cli


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def silent_server():
    """Accepts connections and never says a word."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    yield f"127.0.0.1:{s.getsockname()[1]}"
    s.close()


@pytest.mark.parametrize("command", [("cluster",), ("lso",), ("hanging",), ("check",)])
def test_refused_and_unresolvable_addresses_end_the_command_long_before_the_deadline(capsys, command):
    refused = f"127.0.0.1:{closed_port()}"
    started = time.monotonic()
    result = run_cli(capsys, "-b", f"{refused},no-such-host.invalid:9092", *command, "--timeout", "30s")
    took = time.monotonic() - started
    assert result.code == 3, result
    assert took < 10, f"took {took:.2f}s of a 30 s deadline"
    line = result.stderr.strip() if command != ("check",) else result.stdout + result.stderr
    assert f"{refused}: Connection refused" in line
    assert "no-such-host.invalid:9092: the name does not resolve" in line
    assert "Error" not in line and "kafka" not in re.sub("kafkatxn", "", line, flags=re.I).lower()


def test_one_refused_address_alone_is_said_so(capsys):
    refused = f"127.0.0.1:{closed_port()}"
    result = run_cli(capsys, "-b", refused, "cluster")
    assert result.code == 3
    assert result.stderr.strip() == (
        f"kafkatxn: error: cannot reach any broker at {refused}: Connection refused (check the bootstrap servers)"
    )


def test_a_silent_address_still_gets_the_deadline_even_beside_a_refused_one(capsys, silent_server):
    refused = f"127.0.0.1:{closed_port()}"
    started = time.monotonic()
    result = run_cli(capsys, "-b", f"{refused},{silent_server}", "cluster", "--timeout", "2.5s")
    took = time.monotonic() - started
    assert result.code == 3
    assert took >= 2.4, f"gave up after {took:.2f}s although {silent_server} might still answer"
    assert "check the bootstrap servers" not in result.stderr
