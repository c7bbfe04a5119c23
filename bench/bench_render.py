"""Printing many rows: ``-o json``, ``-o table`` and ``-o csv`` of 100,000 group rows (what
``lso --groups`` prints at 5,000 groups x 20 partitions), against the stdlib and tabulate.

    python bench/bench_render.py [--rows 100000] [--rounds 3]

Each figure is a process of its own (its rows made first, then only the rendering timed, in wall
and CPU seconds: the machine is shared), with its peak RSS (GNU time), interleaved round by round:

* ``kafkatxn json``  -- ``output.render(rows, "json")``  vs ``json.dump(indent=2)`` of the same dicts;
* ``kafkatxn table`` -- ``output.render(rows, "table")`` (120 columns) vs ``tabulate`` of the same cells;
* ``kafkatxn csv``   -- ``output.render(rows, "csv")``;
* ``rows only``      -- the rows made and nothing written: the peak RSS the others' is compared with
  (streamed output holds no whole text, so a format's peak should stay near it).

The outputs are compared (json byte-equal to ``json.dumps``; the table's lines as many as the rows
plus its header). Target (issue 38): json and table within 1 s each at 100,000 rows; exit 1 when a
target is missed or an output differs. Needs no broker.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

from benchlib import ROOT, finish, run_measured

TARGET_S = 1.0
KINDS = ("kafkatxn_json", "json_dumps", "kafkatxn_table", "tabulate", "kafkatxn_csv", "rows_only")


def rows(n: int) -> list:
    from kafkatxn.group_positions import GroupLag
    from kafkatxn.verdicts_groups import BlockVerdict, GroupVerdict

    out = []
    for i in range(n):
        blocked = i % 50 == 0
        out.append(GroupLag(
            f"group-{i // 20:05d}", f"orders-{i % 500:03d}", i % 20, 1_000 + i, 2_000 + i, 2_500 + i, 1_000, 1_500,
            GroupVerdict.blocked if blocked else GroupVerdict.lagging if i % 3 else GroupVerdict.caught_up, None,
            7 if blocked else None, "orders-app-7" if blocked else None, 930_000 if blocked else None,
            "coordinator" if blocked else None, blocked or None, False if blocked else None, False if blocked else None,
            12_000 if blocked else None, None, BlockVerdict.hanging if blocked else None))
    return out


def one(kind: str, n: int, out_path: str) -> None:
    """In a child process: make the rows, then time the rendering alone."""
    from kafkatxn import output
    from kafkatxn.group_positions import GroupLag
    from kafkatxn.plain import to_plain

    made = rows(n)
    with open(out_path, "w") as out:
        started, cpu = time.perf_counter(), time.process_time()
        if kind == "rows_only":
            pass
        elif kind == "kafkatxn_json":
            output.render(made, "json", out=out, row_type=GroupLag)
        elif kind == "json_dumps":
            json.dump([to_plain(r) for r in made], out, indent=2)
            out.write("\n")
        elif kind == "kafkatxn_table":
            output.render(made, "table", out=out, row_type=GroupLag, width=120)
        elif kind == "tabulate":
            from tabulate import tabulate

            plain = [to_plain(r) for r in made]
            columns = list(plain[0])
            out.write(tabulate([[output.column_cells(c, [p])[0] for c in columns] for p in plain], headers=columns,
                               tablefmt="simple", disable_numparse=True) + "\n")
        else:
            output.render(made, "csv", out=out, row_type=GroupLag)
        took, cpu = time.perf_counter() - started, time.process_time() - cpu
    print(json.dumps({"seconds": took, "cpu_seconds": cpu}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--one", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        one(args.one, args.rows, args.out)
        return 0

    times: dict[str, list[float]] = {k: [] for k in KINDS}
    cpu: dict[str, list[float]] = {k: [] for k in KINDS}
    rss: dict[str, float] = {}
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-render-") as tmp:
        outputs = {k: os.path.join(tmp, k) for k in KINDS}
        for _ in range(args.rounds):
            for kind in KINDS:
                run = run_measured([sys.executable, str(ROOT / "bench" / "bench_render.py"), "--one", kind,
                                    "--rows", str(args.rows), "--out", outputs[kind]])
                if run.returncode != 0:
                    raise SystemExit(f"{kind} failed: {run.stderr[-2000:]}")
                times[kind].append(json.loads(run.stdout)["seconds"])
                cpu[kind].append(json.loads(run.stdout)["cpu_seconds"])
                rss[kind] = max(rss.get(kind, 0.0), run.peak_rss_mb)
        with open(outputs["kafkatxn_json"]) as a, open(outputs["json_dumps"]) as b:
            if a.read() != b.read():
                failures.append("-o json differs from json.dumps(indent=2)")
        with open(outputs["kafkatxn_table"]) as table:
            lines = table.read().splitlines()
        if len([line for line in lines if line.startswith("group-")]) != args.rows:
            failures.append(f"-o table has {len(lines)} lines for {args.rows} rows")

    figures: dict = {"rows": args.rows, "rounds": args.rounds, "cpus": os.cpu_count()}
    for kind in KINDS[:-1]:
        figures[f"{kind}_median_s"] = round(statistics.median(times[kind]), 3)
        figures[f"{kind}_median_cpu_s"] = round(statistics.median(cpu[kind]), 3)
        figures[f"{kind}_peak_rss_mb"] = round(rss[kind], 1)
        figures[f"{kind}_peak_rss_over_rows_mb"] = round(rss[kind] - rss["rows_only"], 1)
    figures["rows_only_peak_rss_mb"] = round(rss["rows_only"], 1)
    figures["ratio_json_vs_json_dumps"] = round(figures["kafkatxn_json_median_s"] / figures["json_dumps_median_s"], 2)
    figures["ratio_table_vs_tabulate"] = round(figures["kafkatxn_table_median_s"] / figures["tabulate_median_s"], 2)
    figures["ratio_json_vs_json_dumps_cpu"] = round(figures["kafkatxn_json_median_cpu_s"] / figures["json_dumps_median_cpu_s"], 2)
    figures["ratio_table_vs_tabulate_cpu"] = round(figures["kafkatxn_table_median_cpu_s"] / figures["tabulate_median_cpu_s"], 2)
    for kind in ("kafkatxn_json", "kafkatxn_table"):
        if figures[f"{kind}_median_s"] > TARGET_S:
            failures.append(f"{kind}: {figures[f'{kind}_median_s']} s for {args.rows:,} rows, target <= {TARGET_S} s")
    return finish(figures, failures)


if __name__ == "__main__":
    sys.exit(main())
