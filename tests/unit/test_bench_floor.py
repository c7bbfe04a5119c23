"""bench_scale's floor measured beside its command (``benchlib.beside_floor``): each round runs the
command, its replay and the CLI's start-up back to back, and the ratio divides the command's median by
the medians of the floor's two parts from the same rounds."""

from __future__ import annotations

import statistics
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
    recording = _Recording()
    monkeypatch.setattr(benchlib, "recorded", lambda bootstrap, command, workdir: order.append("record") or tmp_path / "r")
    monkeypatch.setattr(benchlib, "load", lambda path: recording)
    monkeypatch.setattr(benchlib, "replay", lambda rec: order.append("replay") or next(times))
    monkeypatch.setattr(benchlib, "cli_startup_s", lambda rounds: order.append(f"startup x{rounds}") or next(times))

    class Run:
        def __init__(self) -> None:
            order.append("command")
            self.seconds = next(times)

    measured = benchlib.beside_floor("b:9092", ["lso", "-o", "json"], 3, Path(tmp_path), Run)
    assert order == ["record"] + ["command", "replay", "startup x1"] * 3
    assert measured.command_s == [0.30, 0.50, 0.40]
    assert measured.replay_s == [0.10, 0.20, 0.15] and measured.startup_s == [0.09, 0.12, 0.08]
    assert measured.replay() == (0.15, [0.10, 0.20, 0.15], 4, recording.idle())

    figures: dict = {}
    vs = benchlib.floor_figures(figures, "lso", statistics.median(measured.command_s), 120.0,
                                statistics.median(measured.startup_s), measured.replay())
    assert figures["lso_floor_s"] == round(0.09 + 0.15, 3)
    assert vs == round(0.40 / (0.09 + 0.15), 2) == figures["lso_vs_floor"]
    assert figures["lso_replay_runs_s"] == [0.1, 0.2, 0.15] and figures["lso_rounds"] == 4
