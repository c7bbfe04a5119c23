"""scripts/test installs system-wide only what the selected tests need: nothing for unit tests,
everything for the whole run (CI, through .ci/run) and for tests that start brokers. Run with stubs
for apt-get, sudo and the Python it drives, so nothing is installed or run here."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ("bash", "dirname", "realpath", "grep", "id")
# Recorded, never run: what installs, and what would write the system's policy-rc.d.
RECORDED = ("apt-get", "apt-cache", "sudo", "python", "tee", "chmod", "rm", "systemctl")


@pytest.fixture
def stubs(tmp_path):
    """A PATH with a few coreutils and stubs that record their arguments (apt-get, sudo, the python
    scripts/test drives, …); no promtool, javac, tmux or krb5 tools, so each would be installed."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    log = tmp_path / "calls.log"
    for name in RECORDED:
        stub = bin_dir / name
        stub.write_text(f'#!{shutil.which("bash")}\necho "{name} $*" >> {log}\n')
        stub.chmod(0o755)
    return bin_dir, log


def run_script(stubs, *args: str, **env: str) -> list[str]:
    bin_dir, log = stubs
    result = subprocess.run(["bash", str(ROOT / "scripts" / "test"), *args], cwd=ROOT, capture_output=True, text=True,
                            timeout=60, env={"PATH": str(bin_dir), "PYTHON": str(bin_dir / "python"), "HOME": os.environ.get("HOME", "/tmp"),
                                             **env})
    assert result.returncode == 0, result.stderr
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.parametrize("args", [
    ("tests/unit/test_output.py",),
    ("tests/unit", "-q", "-x", "-m", "not install"),
    ("tests/unit/test_output.py::test_jsonl_is_one_object_per_line", "-k", "jsonl"),
])
def test_unit_tests_only_install_nothing_system_wide(stubs, args):
    calls = run_script(stubs, *args)
    assert not [c for c in calls if c.startswith(("apt-get", "apt-cache", "sudo"))], calls
    assert not [c for c in calls if "harness" in c or "gssapi" in c], calls  # no jars, no extra built against Kerberos
    assert calls[-1] == "python -m pytest -p no:cacheprovider " + " ".join(args)


@pytest.mark.parametrize("args, env", [
    ((), {}),  # the whole run, as .ci/run starts it
    (("tests/integration/test_terminal.py",), {}),
    (("tests/unit/test_output.py", "tests/integration/test_terminal.py"), {}),
    (("-k", "terminal"), {}),  # no path: pytest runs every test
    (("tests/unit/test_output.py",), {"KAFKATXN_TEST_SYSTEM": "1"}),
])
def test_tests_beyond_unit_install_what_they_need(stubs, args, env):
    calls = run_script(stubs, *args, **env)
    installed = " ".join(c for c in calls if c.startswith("apt-get"))
    assert "prometheus" in installed and "tmux" in installed and "krb5-kdc" in installed and "openjdk" in installed, calls
    assert "python -m harness fetch" in calls
