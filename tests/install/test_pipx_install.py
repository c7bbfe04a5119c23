"""kafkatxn installed the way CLIs are installed: a wheel built from a copy of the project, installed
with pipx (from PyPI, a test dependency) into a temporary PIPX_HOME, then used from outside the
source tree: ``--version`` from the package metadata, a command reaching librdkafka, the bash
completion installed as the README says and driven by a real bash, and the ``[spark]`` extra.

The copy's version gets a local label (``+pipxtest``): ``kafkatxn --version`` can only show it by
reading the installed distribution's metadata.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

pytestmark = pytest.mark.install

ROOT = Path(__file__).resolve().parents[2]
LOCAL_LABEL = "+pipxtest"

# (words on the command line, index of the word being completed, a completion bash must offer)
COMPLETION_CASES = [
    (["kafkatxn", "exp"], 1, "exporter"),  # a command
    (["kafkatxn", "exporter", "--web"], 2, "--web-config-file"),  # an option after the command
    (["kafkatxn", "check", "--boot"], 2, "--bootstrap-server"),  # a shared option after the command
    (["kafkatxn", "--prof"], 1, "--profile"),  # an option before the command (Kafka's tools' order)
    (["kafkatxn", "--profile", "east", "exp"], 3, "exporter"),  # the command after such an option
]


def run(*args: str | Path, env: dict[str, str], cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> tuple[Path, str]:
    """A wheel built (pip wheel, as a packager would) from a copy of the project; and its version."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "kafkatxn", source / "kafkatxn", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    project = (source / "pyproject.toml").read_text()
    base = tomllib.loads(project)["project"]["version"]
    version = base + LOCAL_LABEL
    (source / "pyproject.toml").write_text(project.replace(f'version = "{base}"', f'version = "{version}"', 1))
    dist = work / "dist"
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(dist), str(source)],
                            capture_output=True, text=True, timeout=600, cwd=work)
    assert result.returncode == 0, result.stdout + result.stderr
    (built,) = dist.glob("kafkatxn-*.whl")
    return built, version


def pipx_env(home: Path) -> dict[str, str]:
    """pipx in its own temporary home; PATH holds only its bin directory and the system's."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("KAFKATXN_", "PIPX_")) and k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env.update(PIPX_HOME=str(home / "pipx"), PIPX_BIN_DIR=str(home / "bin"), PIPX_MAN_DIR=str(home / "man"),
               PATH=f"{home / 'bin'}:/usr/local/bin:/usr/bin:/bin", XDG_CONFIG_HOME=str(home / "config"),
               XDG_STATE_HOME=str(home / "state"))
    return env


def pipx_install(home: Path, spec: str, *pip_args: str) -> Path:
    env = pipx_env(home)
    args = [sys.executable, "-m", "pipx", "install", "--python", sys.executable, spec]
    if pip_args:
        args.append(f"--pip-args={' '.join(pip_args)}")
    result = run(*args, env=env, cwd=home)
    assert result.returncode == 0, result.stdout + result.stderr
    executable = home / "bin" / "kafkatxn"
    assert executable.exists(), result.stdout
    return executable


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> tuple[Path, str, Path]:
    """``pipx install kafkatxn-….whl``: the kafkatxn on PATH, the version, the pipx home."""
    home = tmp_path_factory.mktemp("pipx")
    return pipx_install(home, str(wheel[0])), wheel[1], home


def test_pipx_install_gives_a_working_kafkatxn(installed):
    executable, version, home = installed
    env = pipx_env(home)
    result = run("kafkatxn", "--version", env=env, cwd=home)
    assert (result.returncode, result.stdout) == (0, f"kafkatxn {version}\n"), result.stderr
    # It runs the installed copy in pipx's venv, not this checkout.
    venv_python = home / "pipx" / "venvs" / "kafkatxn" / "bin" / "python"
    where = run(venv_python, "-c", "import kafkatxn; print(kafkatxn.__file__)", env=env, cwd=home)
    assert where.stdout.startswith(str(home / "pipx" / "venvs" / "kafkatxn")), where.stdout + where.stderr
    # A real command: librdkafka loads, nothing listens on port 1, so "could not determine" (3), one line.
    result = run("kafkatxn", "check", "-b", "127.0.0.1:1", "--timeout", "300ms", env=env, cwd=home, timeout=60)
    assert result.returncode == 3, result.stdout + result.stderr
    assert result.stdout.startswith("KAFKATXN UNKNOWN"), result.stdout


def installed_completion(executable: Path, home: Path) -> Path:
    """As the README says: the script from `kafkatxn completion bash` into bash-completion's user directory."""
    target = home / "data" / "bash-completion" / "completions" / "kafkatxn"
    target.parent.mkdir(parents=True, exist_ok=True)
    result = run(executable, "completion", "bash", env=pipx_env(home), cwd=home)
    assert result.returncode == 0, result.stderr
    target.write_text(result.stdout)
    return target


def bash_complete(script: Path, words: list[str], cword: int, env: dict[str, str], cwd: Path) -> list[str]:
    """Source the completion in a real bash and call the function `complete -p kafkatxn` names, with the
    variables bash sets for a TAB at the end of word ``cword``."""
    line = " ".join(words[: cword + 1])
    program = f"""
set -u
source {script}
spec=$(complete -p kafkatxn)
function=$(sed -E 's/.* -F ([^ ]+) .*/\\1/' <<<"$spec")
COMP_WORDS=({" ".join(words)})
COMP_CWORD={cword}
COMP_LINE="{line}"
COMP_POINT=${{#COMP_LINE}}
"$function" kafkatxn "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    result = run("bash", "--norc", "--noprofile", "-c", program, env=env, cwd=cwd, timeout=60)
    assert result.returncode == 0, result.stderr
    return [w for w in result.stdout.splitlines() if w]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
@pytest.mark.parametrize("words, cword, expected", COMPLETION_CASES, ids=lambda v: v if isinstance(v, str) else None)
def test_the_installed_bash_completion_completes(installed, words, cword, expected):
    executable, _version, home = installed
    script = installed_completion(executable, home)
    offered = bash_complete(script, words, cword, pipx_env(home), home)
    assert expected in offered, offered
    assert all(w.startswith(words[cword]) for w in offered), offered


def _cached_pyspark_wheel(version: str) -> Path | None:
    result = subprocess.run([sys.executable, "-m", "pip", "cache", "list", "pyspark", "--format=abspath"],
                            capture_output=True, text=True, timeout=60)
    for line in result.stdout.splitlines():
        if re.search(rf"/pyspark-{re.escape(version)}-[^/]*\.whl$", line.strip()):
            return Path(line.strip())
    return None


def test_pipx_install_with_the_spark_extra(wheel, tmp_path_factory):
    """Cheap on purpose: the versions of PySpark, pyarrow and pandas this test run uses are pinned and
    PySpark's wheel is taken from pip's cache (PyPI has only PySpark's 450 MB source), so nothing
    new is downloaded or built. Skipped, saying so, only when that wheel is not at hand."""
    try:
        pins = {name: metadata.version(name) for name in ("pyspark", "pyarrow", "pandas")}
    except metadata.PackageNotFoundError as exc:
        pytest.skip(f"{exc.name} is not installed here (pip install -e '.[test]' installs it)")
    cached = _cached_pyspark_wheel(pins["pyspark"])
    if cached is None:
        pytest.skip(f"no pyspark {pins['pyspark']} wheel in pip's cache (`pip cache list pyspark`); "
                    "installing it would download and build PySpark's 450 MB source")
    home = tmp_path_factory.mktemp("pipx-spark")
    constraints = home / "constraints.txt"
    constraints.write_text("".join(f"{name}=={v}\n" for name, v in pins.items()))
    # --no-compile: pip's byte-compiling of PySpark's and pandas' modules is half the install's CPU, and
    # nothing here depends on it (what is run compiles what it imports).
    executable = pipx_install(home, f"{wheel[0]}[spark]", "--find-links", str(cached.parent), "--constraint", str(constraints),
                              "--no-compile")
    env = pipx_env(home)
    assert run(executable, "--version", env=env, cwd=home).stdout == f"kafkatxn {wheel[1]}\n"
    venv_python = home / "pipx" / "venvs" / "kafkatxn" / "bin" / "python"
    imported = run(venv_python, "-c", "import pyspark, pyarrow, pandas; print(pyspark.__version__)", env=env, cwd=home)
    assert imported.stdout.strip() == pins["pyspark"], imported.stderr
    result = run(executable, "audit", "--help", env=env, cwd=home, timeout=120)
    assert result.returncode == 0 and "--history" in result.stdout, result.stdout + result.stderr
