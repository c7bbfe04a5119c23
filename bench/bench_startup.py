"""Start-up time of the CLI against the floor of its framework: ``python -c 'import typer'``.

    python bench/bench_startup.py [--runs 15]

Measures, as separate processes interleaved round by round (after one warm-up of each):

* reference: ``python -c 'import typer'`` (the interpreter plus the CLI framework, nothing else);
* ``kafkatxn --help``;
* ``kafkatxn config show -b 127.0.0.1:9`` (resolves the configuration, contacts no broker).

Prints medians, the ratios to the reference, and the ten slowest imports of each command from
``python -X importtime`` (cumulative microseconds). Target (issue 16): each command within 1.3x of
the reference; exit 1 when missed. Needs no broker.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

from benchlib import cli_imports, print_table, run_measured

TARGET_RATIO = 1.3
COMMANDS = {
    "import_typer": ["-c", "import typer"],
    "help": ["-m", "kafkatxn", "--help"],
    "config_show": ["-m", "kafkatxn", "config", "show", "-b", "127.0.0.1:9"],
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "KAFKATXN_BOOTSTRAP_SERVERS"}

    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    rss: dict[str, float] = {}
    for round_ in range(args.runs + 1):
        for name, argv in COMMANDS.items():
            run = run_measured([sys.executable, *argv], timeout=120, env=env)
            if run.returncode != 0:
                raise SystemExit(f"{name} exited {run.returncode}: {run.stderr.strip()[-500:]}")
            if round_:  # round 0 warms the page cache and bytecode
                times[name].append(run.seconds)
                rss[name] = max(rss.get(name, 0.0), run.peak_rss_mb)

    ref = statistics.median(times["import_typer"])
    result: dict = {"runs": args.runs, "load_average_1m": round(os.getloadavg()[0], 2)}
    for name in COMMANDS:
        result[f"{name}_median_s"] = round(statistics.median(times[name]), 3)
        result[f"{name}_min_s"] = round(min(times[name]), 3)
        result[f"{name}_peak_rss_mb"] = round(rss[name], 1)
    ratios = {name: statistics.median(times[name]) / ref for name in ("help", "config_show")}
    for name, ratio in ratios.items():
        result[f"ratio_{name}_vs_import_typer"] = round(ratio, 2)
    result["target_ratio"] = TARGET_RATIO
    result["meets_target"] = all(r <= TARGET_RATIO for r in ratios.values())

    for name in ("help", "config_show"):
        print(f"slowest imports (cumulative) for {name}:")
        for us, module in cli_imports(COMMANDS[name])[0]:
            print(f"  {us / 1000:8.1f} ms  {module}")
    print_table(result)
    return 0 if result["meets_target"] else 1


if __name__ == "__main__":
    sys.exit(main())
