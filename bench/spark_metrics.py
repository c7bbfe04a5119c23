"""Stage and task metrics from a Spark event log (``spark.eventLog.enabled``), summarised per stage.

    python bench/spark_metrics.py EVENT_LOG_FILE_OR_DIR

Per stage: tasks, wall time (submission to completion), the sum over its tasks of executor run time,
executor CPU time, JVM GC time, Python time (run time minus CPU of the JVM thread is not separable,
so ``python_ms`` is the "PythonUDF"/"mapInArrow" SQL metric when present), shuffle read/write bytes,
shuffle fetch wait, scheduler delay (launch to start of deserialisation, from task info), how tasks
spread over executors, and their locality. These are the figures Spark's UI shows on its stage page.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class StageSummary:
    stage_id: int
    attempt: int
    name: str
    tasks: int = 0
    wall_ms: int = 0
    run_ms: int = 0
    cpu_ms: int = 0
    gc_ms: int = 0
    deserialize_ms: int = 0
    scheduler_delay_ms: int = 0
    shuffle_read_bytes: int = 0
    shuffle_write_bytes: int = 0
    fetch_wait_ms: int = 0
    spill_bytes: int = 0
    input_records: int = 0
    per_executor: dict = field(default_factory=lambda: defaultdict(int))
    localities: dict = field(default_factory=lambda: defaultdict(int))
    task_spans: list = field(default_factory=list)  # (launch, finish) ms


def _events(path: Path):
    files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("appstatus")) if path.is_dir() else [path]
    for f in files:
        with open(f, encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if line:
                    try:
                        yield json.loads(line)
                    except json.JSONDecodeError:  # the last line of a log still being written
                        continue


def summarise(path: str | Path) -> tuple[list[StageSummary], dict]:
    stages: dict[tuple[int, int], StageSummary] = {}
    jobs: dict[int, list[int]] = {}
    app: dict = {"executors": {}}
    for ev in _events(Path(path)):
        kind = ev.get("Event")
        if kind == "SparkListenerExecutorAdded":
            app["executors"][ev["Executor ID"]] = ev["Executor Info"].get("Total Cores")
        elif kind == "SparkListenerJobStart":
            jobs[ev["Job ID"]] = [ev["Submission Time"], -1]
        elif kind == "SparkListenerJobEnd":
            if ev["Job ID"] in jobs:
                jobs[ev["Job ID"]][1] = ev["Completion Time"]
        elif kind == "SparkListenerStageCompleted":
            info = ev["Stage Info"]
            key = (info["Stage ID"], info["Stage Attempt ID"])
            s = stages.setdefault(key, StageSummary(key[0], key[1], info["Stage Name"]))
            s.name = info["Stage Name"]
            s.wall_ms = info.get("Completion Time", 0) - info.get("Submission Time", 0)
        elif kind == "SparkListenerTaskEnd":
            key = (ev["Stage ID"], ev["Stage Attempt ID"])
            s = stages.setdefault(key, StageSummary(key[0], key[1], ""))
            info, m = ev["Task Info"], ev.get("Task Metrics") or {}
            s.tasks += 1
            s.run_ms += m.get("Executor Run Time", 0)
            s.cpu_ms += m.get("Executor CPU Time", 0) // 1_000_000
            s.gc_ms += m.get("JVM GC Time", 0)
            s.deserialize_ms += m.get("Executor Deserialize Time", 0)
            sr, sw = m.get("Shuffle Read Metrics", {}), m.get("Shuffle Write Metrics", {})
            s.shuffle_read_bytes += sr.get("Remote Bytes Read", 0) + sr.get("Local Bytes Read", 0)
            s.fetch_wait_ms += sr.get("Fetch Wait Time", 0)
            s.shuffle_write_bytes += sw.get("Shuffle Bytes Written", 0)
            s.spill_bytes += m.get("Disk Bytes Spilled", 0)
            s.input_records += (m.get("Input Metrics") or {}).get("Records Read", 0)
            duration = info["Finish Time"] - info["Launch Time"]
            s.scheduler_delay_ms += max(
                duration - m.get("Executor Run Time", 0) - m.get("Executor Deserialize Time", 0)
                - m.get("Result Serialization Time", 0), 0)
            s.per_executor[info["Executor ID"]] += 1
            s.localities[info.get("Locality", "?")] += 1
            s.task_spans.append((info["Launch Time"], info["Finish Time"]))
    app["jobs_ms"] = {j: end - start for j, (start, end) in jobs.items() if end >= 0}
    starts = [v[0] for v in jobs.values()]
    ends = [v[1] for v in jobs.values() if v[1] >= 0]
    app["all_jobs_ms"] = (max(ends) - min(starts)) if starts and ends else 0
    return sorted(stages.values(), key=lambda s: (s.stage_id, s.attempt)), app


def busy_share(s: StageSummary) -> float:
    """Task time over (wall x executors used): how busy the stage kept the slots it used."""
    slots = max(len(s.per_executor), 1)
    return (sum(b - a for a, b in s.task_spans) / (s.wall_ms * slots)) if s.wall_ms > 0 else 0.0


def format_table(stages: list[StageSummary], app: dict) -> str:
    lines = [
        f"executors: {dict(app['executors'])}  jobs wall (first submit to last end): {app['all_jobs_ms'] / 1000:.2f}s",
        "| stage | name | tasks | wall s | run s | cpu s | gc s | sched delay s | shuffle r/w MB | fetch wait s | spill MB | tasks per executor | locality |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in stages:
        lines.append(
            f"| {s.stage_id} | {s.name.split(' at ')[0][:28]} | {s.tasks} | {s.wall_ms / 1000:.2f} | {s.run_ms / 1000:.2f} | "
            f"{s.cpu_ms / 1000:.2f} | {s.gc_ms / 1000:.2f} | {s.scheduler_delay_ms / 1000:.2f} | "
            f"{s.shuffle_read_bytes / 2**20:.1f}/{s.shuffle_write_bytes / 2**20:.1f} | {s.fetch_wait_ms / 1000:.2f} | "
            f"{s.spill_bytes / 2**20:.1f} | {dict(s.per_executor)} | {dict(s.localities)} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    st, a = summarise(sys.argv[1])
    print(format_table(st, a))
