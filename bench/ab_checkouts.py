"""Two checkouts of kafkatxn timed against one held cluster, interleaved: each command a whole process.

    python bench/bench_groups.py --hold /tmp/held.json &        # (or bench_scale.py --hold)
    git archive 126ad03 | tar -x -C /tmp/base && python3 -m compileall -q /tmp/base/kafkatxn kafkatxn
    python bench/ab_checkouts.py /tmp/held.json /tmp/base . --rounds 5 \\
        --command diagnose --command "lso --groups" --command "check --groups"

The machine moves a single benchmark run by more than most changes do; two checkouts measured in
turns on the same cluster see the same load. Byte-compile both first (an install is). Prints each
command's median and minimum per checkout; exit 1 when a command failed in either.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("hold", type=Path, help="the hold file a benchmark's --hold wrote")
    parser.add_argument("base", type=Path, help="the checkout to compare against (a directory holding kafkatxn/)")
    parser.add_argument("head", type=Path, help="the checkout measured")
    parser.add_argument("--command", action="append", default=[], help="a kafkatxn command line (repeatable)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    bootstrap = json.loads(args.hold.read_text())["bootstrap"]
    trees = {"base": args.base.resolve(), "head": args.head.resolve()}
    commands = args.command or ["lso"]
    times: dict[tuple[str, str], list[float]] = {(t, c): [] for t in trees for c in commands}
    failed = False
    for r in range(args.rounds):
        for command in commands:
            for tree in (list(trees) if r % 2 == 0 else list(reversed(trees))):  # neither always first
                env = dict(os.environ, PYTHONPATH=str(trees[tree]))
                started = time.perf_counter()
                run = subprocess.run([sys.executable, "-m", "kafkatxn", "-b", bootstrap, *shlex.split(command),
                                      "-o", "json", "--timeout", "120s"], capture_output=True, text=True, env=env, cwd="/")
                times[(tree, command)].append(time.perf_counter() - started)
                if run.returncode not in (0, 1, 2):
                    failed = True
                    print(f"{tree} `{command}` exit {run.returncode}: {run.stderr.strip()[-300:]}", file=sys.stderr)
    for command in commands:
        print(f"`{command}`: " + " | ".join(
            f"{tree} median {statistics.median(times[(tree, command)]):.3f} s, minimum {min(times[(tree, command)]):.3f} s"
            for tree in trees))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
