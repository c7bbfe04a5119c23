"""completions/ is generated from the CLI and really completes."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kafkatxn.cli.completion_cmd import completion_script

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_files_are_current(shell):
    committed = (ROOT / "completions" / f"kafkatxn.{shell}").read_text()
    assert committed == completion_script(shell), f"run scripts/gen-completions to refresh completions/kafkatxn.{shell}"


def _bash_complete(words: list[str]) -> list[str]:
    script = ROOT / "completions" / "kafkatxn.bash"
    # The completion function calls `kafkatxn` by name; point it at this interpreter's module.
    shim_dir = Path(sys.prefix) / "bin"
    line = " ".join(words)
    program = f"""
kafkatxn() {{ "{sys.executable}" -m kafkatxn "$@"; }}
export -f kafkatxn
source "{script}"
COMP_WORDS=({line})
COMP_CWORD={len(words) - 1}
_kafkatxn_completion kafkatxn
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    result = subprocess.run(["bash", "-c", program], capture_output=True, text=True, timeout=60,
                            env={"PATH": f"{shim_dir}:/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    return [w for w in result.stdout.splitlines() if w]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
def test_bash_completes_a_subcommand_name():
    assert "cluster" in _bash_complete(["kafkatxn", "clu"])
    # and it is the CLI that answers, not a static list: options of a subcommand complete too
    assert "--bootstrap-server" in _bash_complete(["kafkatxn", "cluster", "--boot"])


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
@pytest.mark.parametrize("words, expected", [
    (["kafkatxn", "transactions", "list", "-s", ""], {"Ongoing", "PrepareCommit", "CompleteAbort", "Empty"}),
    (["kafkatxn", "transactions", "list", "--state", "Pre"], {"PrepareCommit", "PrepareAbort", "PrepareEpochFence"}),
    (["kafkatxn", "lso", "-o", ""], {"table", "json", "jsonl", "csv", "tsv"}),
    (["kafkatxn", "-o", "j"], {"json", "jsonl"}),
    (["kafkatxn", "lso", "--sort", ""], {"lag", "age"}),
])
def test_choice_options_complete_their_choices_not_file_names(tmp_path, monkeypatch, words, expected):
    (tmp_path / "Ongoing.txt").write_text("")  # a file name a file completion would offer
    monkeypatch.chdir(tmp_path)
    offered = set(_bash_complete([w if w else "''" for w in words]))
    assert expected <= offered and "Ongoing.txt" not in offered, offered
