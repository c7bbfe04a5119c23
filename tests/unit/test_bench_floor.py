"""bench_scale's floor measured beside its command (``benchlib.beside_floor``): each round runs the
command, its replay and the CLI's start-up back to back, and the ratio divides the command's median by
the medians of the floor's two parts from the same rounds."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from bench import benchlib


class _Recording:
    def rounds(self) -> int:
        return 4

    def idle(self) -> list:
        return [(12.0, "start", "ApiVersions")]


def test_each_round_runs_the_command_its_replay_and_the_start_up_back_to_back(monkeypatch, tmp_path):
    order: list[str] = []
    times = iter([0.30, 0.10, 0.09, 0.50, 0.20, 0.12, 0.40, 0.15, 0.08])  # command, replay, start-up per round
    cpu = iter([0.21, 0.08, 0.33, 0.11, 0.25, 0.07])  # command, start-up per round
    brokers = iter([1.0, 1.2, 1.35, 2.0, 2.3, 2.5, 3.0, 3.25, 3.4])  # the brokers' CPU so far: before, between, after
    recording = _Recording()
    monkeypatch.setattr(benchlib, "recorded", lambda bootstrap, command, workdir: order.append("record") or tmp_path / "r")
    monkeypatch.setattr(benchlib, "load", lambda path: recording)
    monkeypatch.setattr(benchlib, "replay", lambda rec: order.append("replay") or next(times))

    class Run:
        def __init__(self, name: str) -> None:
            order.append(name)
            self.seconds, self.cpu_s = next(times), next(cpu)

    monkeypatch.setattr(benchlib, "cli_startup", lambda: Run("startup"))

    def brokers_cpu_s() -> float:
        order.append("brokers")
        return next(brokers)

    measured = benchlib.beside_floor("b:9092", ["lso", "-o", "json"], 3, Path(tmp_path), lambda: Run("command"), brokers_cpu_s)
    assert order == ["record"] + ["brokers", "command", "brokers", "replay", "brokers", "startup"] * 3
    assert measured.command_s == [0.30, 0.50, 0.40]
    assert measured.replay_s == [0.10, 0.20, 0.15] and measured.startup_s == [0.09, 0.12, 0.08]
    assert measured.replay() == (0.15, [0.10, 0.20, 0.15], 4, recording.idle())
    assert measured.command_cpu_s == [0.21, 0.33, 0.25] and measured.startup_cpu_s == [0.08, 0.11, 0.07]
    assert [round(s, 3) for s in measured.broker_cpu_s] == [0.2, 0.3, 0.25]
    assert [round(s, 3) for s in measured.replay_broker_cpu_s] == [0.15, 0.2, 0.15]

    figures: dict = {}
    vs = benchlib.floor_figures(figures, "lso", statistics.median(measured.command_s), 120.0,
                                statistics.median(measured.startup_s), measured.replay())
    assert figures["lso_floor_s"] == round(0.09 + 0.15, 3)
    assert vs == round(0.40 / (0.09 + 0.15), 2) == figures["lso_vs_floor"]
    assert figures["lso_replay_runs_s"] == [0.1, 0.2, 0.15] and figures["lso_rounds"] == 4

    benchlib.cpu_figures(figures, "lso", measured, cores=2)
    assert figures["lso_over_floor_s"] == round(0.40 - 0.24, 3)
    assert figures["lso_cpu_s"] == 0.25 and figures["lso_startup_cpu_s"] == 0.08
    assert figures["lso_cpu_over_startup_s"] == 0.17
    assert figures["lso_broker_cpu_s"] == 0.25 and figures["lso_replay_broker_cpu_s"] == 0.15
    # Per round (command and brokers' CPU over two cores' time): 0.41/0.6, 0.63/1.0, 0.50/0.8; the replays' 0.15/0.2, 0.2/0.4, 0.15/0.3.
    assert figures["lso_cores_busy"] == 0.63 and figures["lso_replay_cores_busy"] == 0.5
    # Start-up 0.09 s, then 0.17 s of the client's and 0.15 s of the brokers' CPU on two cores: 0.16 s, more than the replay's 0.15.
    assert figures["lso_packed_s"] == 0.25 and figures["lso_packed_vs_floor"] == round(0.25 / 0.24, 2)

    # On eight cores the same CPU fits within the replay's time: the floor itself.
    benchlib.cpu_figures(figures, "lso", measured, cores=8)
    assert figures["lso_packed_s"] == 0.24 and figures["lso_packed_vs_floor"] == 1.0
    assert figures["lso_cores_busy"] == round(0.63 / 4, 2)


def test_cpu_figures_leave_out_what_was_not_measured():
    nan = float("nan")
    measured = benchlib.BesideFloor([0.3, 0.4], [0.1, 0.1], [0.1, 0.1], 4, [], command_cpu_s=[nan, nan], startup_cpu_s=[0.1, 0.1])
    figures = {"lso_floor_s": 0.2}
    benchlib.cpu_figures(figures, "lso", measured)
    assert figures == {"lso_floor_s": 0.2, "lso_over_floor_s": 0.15}


def test_run_measured_reads_the_cpu_the_command_used():
    spin = "import time\nend = time.process_time() + 0.2\nwhile time.process_time() < end: pass"
    run = benchlib.run_measured([sys.executable, "-c", spin])
    assert run.returncode == 0
    assert 0.2 <= run.cpu_s < run.seconds + 0.05
    assert run.peak_rss_mb > 1
    failed = benchlib.run_measured([sys.executable, "-c", "import sys; sys.exit(3)"])
    assert failed.returncode == 3 and failed.cpu_s > 0 and failed.peak_rss_mb > 1


def test_own_core_figures_divide_the_commands_median_by_the_floor_measured_there():
    measured = benchlib.BesideFloor([0.30, 0.25, 0.27], [0.20, 0.16, 0.18], [0.08, 0.07, 0.09], 4, [])
    figures: dict = {}
    benchlib.own_core_figures(figures, "lso", measured)
    assert figures["lso_own_core_s"] == 0.27 and figures["lso_own_core_floor_s"] == 0.26  # 0.08 + 0.18
    assert figures["lso_own_core_vs_floor"] == round(0.27 / 0.26, 2) and figures["lso_own_core_over_floor_s"] == 0.01
    assert figures["lso_own_core_runs_s"] == [0.30, 0.25, 0.27]


def test_the_client_gets_its_own_core_and_the_brokers_the_others_then_both_get_them_all_back(monkeypatch):
    pinned: list[set[int]] = []
    mine: list[set[int]] = []

    class Cluster:
        def pin_brokers(self, cpus: set[int]) -> None:
            pinned.append(set(cpus))

    monkeypatch.setattr(benchlib.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(benchlib.os, "sched_setaffinity", lambda pid, cpus: mine.append(set(cpus)))
    with benchlib.client_on_its_own_core(Cluster()) as core:
        assert core == 3 and pinned == [{0, 1, 2}] and mine == [{3}]
    assert pinned[-1] == {0, 1, 2, 3} and mine[-1] == {0, 1, 2, 3}
    monkeypatch.setattr(benchlib.os, "sched_getaffinity", lambda pid: {0})
    with benchlib.client_on_its_own_core(Cluster()) as core:
        assert core is None
    assert len(pinned) == 2  # one core: nothing pinned
