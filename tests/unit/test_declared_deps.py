"""Every test file imports with only the declared dependencies installed.

A fresh virtualenv (no system site packages) gets ``pip install -e '.[test]'`` and collects the
whole tests/ tree: a test module importing a package that no declared dependency provides (as
test_monitoring_assets did with yaml) fails here, not on the next fresh CI machine. pip's cache
keeps the install to downloads already made. Deselect with ``-m "not install"``.
"""

from __future__ import annotations

import os
import subprocess
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.install, pytest.mark.timeout(1200)]


def test_every_test_file_collects_in_a_fresh_venv_with_the_test_extra(tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=False).create(env_dir)
    python = env_dir / "bin" / "python"
    clean_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    clean_env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{clean_env.get('PATH', '')}"
    install = subprocess.run(
        # --no-compile: what is checked is what imports, not pip's byte-compiling of every installed module
        # (half the install's CPU: PySpark, pandas); collecting compiles what it imports.
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile", "-e", f"{REPO}[test]"],
        capture_output=True, text=True, env=clean_env,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    # The venv sees nothing of the interpreter running this test.
    probe = subprocess.run([str(python), "-c", "import sys; print(sys.prefix != sys.base_prefix)"],
                           capture_output=True, text=True, env=clean_env)
    assert probe.stdout.strip() == "True"

    collect = subprocess.run(
        [str(python), "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q", "tests"],
        capture_output=True, text=True, cwd=REPO, env=clean_env,
    )
    assert collect.returncode == 0, collect.stdout[-4000:] + collect.stderr[-2000:]
    assert "ERROR" not in collect.stdout and "ImportError" not in collect.stdout, collect.stdout[-4000:]
    collected_files = {line.split("::", 1)[0] for line in collect.stdout.splitlines() if "::" in line}
    test_files = {str(p.relative_to(REPO)) for p in (REPO / "tests").rglob("test_*.py")}
    assert test_files - collected_files == set(), "test files with nothing collected"
