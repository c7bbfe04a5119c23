"""The nemesis: every read command, ``abort --all-hanging`` and ``fence`` run on 3 brokers while a
broker freezes, dies or comes back, leaders move, a topic is deleted or the transaction log's leaders
move, before or *during* the command; invariants are checked on every run.

Faults are not a list of cases with an expected answer each: each episode draws a fault, a victim
and a handful of commands from a seeded generator (``KAFKATXN_NEMESIS_SEED``, fixed by default,
``random`` for a new one; ``KAFKATXN_NEMESIS_RUNS`` command runs, 200 by default;
``KAFKATXN_NEMESIS_FAULTS`` to draw only some fault kinds), and every run
must keep the same invariants whatever hit it:

- it ends within ``--timeout`` + 2 s (time the nemesis itself spent inside the command excluded),
  with exit 0-3, no traceback and no client library's names on stderr;
- every offset it prints is never ahead of the truth read by independent clients once the cluster
  has settled; no transaction a coordinator tracks is ever called hanging;
- what it does not show is named: a partition whose only replica was frozen or dead for the whole
  command makes the answer incomplete (exit 3, the partition or its broker named);
- with one broker frozen, the partitions led by the others are answered (the per-broker budget);
  when leaders only moved, nothing is missing (parts are asked again at the new leader);
- ``abort`` and ``fence`` change nothing but what they report having acted on: every partition's
  last stable offset and high watermark are unchanged otherwise, and only made-hanging transactions
  are ever aborted (the tracked open transactions are opened anew between episodes before their
  coordinators would time them out, so a long run does not blame a command for a timeout).

A "during" fault fires inside the command, right before its k-th round trip to the brokers (a hook
on the facade's fan-out: metadata was read with the victim alive), so every draw is reproducible.
The run prints commands run, faults injected and violations.
"""

from __future__ import annotations

import collections
import json
import os
import random
import re
import signal
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest

from kafkatxn.kafka.session import Session
from kafkatxn.model import TopicPartition
from harness import hanging_maker as hm
from harness import scenarios
from tests.support.cli_helpers import run_cli
from tests.support.exporter_process import ExporterProcess
from harness import KafkaCluster

pytestmark = [pytest.mark.integration, pytest.mark.cluster3]

TIMEOUT_S = 6
SLACK_S = 2  # the bound: --timeout + 2 s
DEFAULT_SEED = 2311
SEED = os.environ.get("KAFKATXN_NEMESIS_SEED", str(DEFAULT_SEED))
RUNS = int(os.environ.get("KAFKATXN_NEMESIS_RUNS", "200"))
# Only these fault kinds (comma-separated; default all): a mutant run aims the nemesis at the
# mechanism it removed, e.g. the metadata refresh with move_leaders_during,txnlog_move_during.
ONLY_FAULTS = [k for k in os.environ.get("KAFKATXN_NEMESIS_FAULTS", "").split(",") if k]
BROKER_SETTINGS = {"transaction.partition.verification.enable": "false"}  # hanging_maker needs it
MAX_TXN_TIMEOUT = "2s"  # what hanging/check/abort take as the brokers' maximum: made-hanging ones qualify at once

# A client library's own words: class names, modules, the C library.
LIBRARY_WORDS = re.compile(r"\b[A-Z][a-z]+(?:[A-Z][a-z]+)*(?:Error|Exception)\b|\bkafka\.|confluent|librdkafka|rdkafka|Traceback")


# -- the world the nemesis attacks ---------------------------------------------------------------


@dataclass
class World:
    cluster: KafkaCluster
    rf3: str
    rf1: str
    fence_topic: str
    group: str
    tracked: dict[TopicPartition, int] = field(default_factory=dict)  # open transactions coordinators track: tp -> producer id
    hanging: dict[TopicPartition, hm.HangingTransaction] = field(default_factory=dict)  # current made-hanging ones
    ever_hanging: set[tuple[TopicPartition, int]] = field(default_factory=set)
    open_runs: list[scenarios.TransactionRun] = field(default_factory=list)
    scratch: str | None = None

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap_servers

    @property
    def partitions(self) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t in (self.rf3, self.rf1) for p in range(3)]

    @property
    def watched(self) -> list[TopicPartition]:
        return self.partitions + [TopicPartition(self.fence_topic, 0)]


HANGING_AT = ((0, 1), (1, 0))  # (topic index: 0 rf3, 1 rf1; partition)


@pytest.fixture(scope="module")
def world(kafka_workroot: Path, request: pytest.FixtureRequest):
    cluster = KafkaCluster(kafka_workroot / f"nemesis-{uuid.uuid4().hex[:8]}", n_brokers=3,
                           broker_config=BROKER_SETTINGS, name="nemesis")
    try:
        cluster.start(timeout=120)
    except Exception:
        cluster.save_logs(Path(__file__).resolve().parents[2] / "test-logs" / "startup-nemesis")
        raise
    suffix = uuid.uuid4().hex[:6]
    w = World(cluster, cluster.create_topic(f"nm-rf3-{suffix}", 3, 3), cluster.create_topic(f"nm-rf1-{suffix}", 3, 1),
              cluster.create_topic(f"nm-fence-{suffix}", 1, 3), f"nm-readers-{suffix}")
    try:
        for topic in (w.rf3, w.rf1):
            scenarios.run_transaction(w.bootstrap, topic, [0, 1, 2], "committed", f"nm-committed-{topic}")
        scenarios.run_idempotent(w.bootstrap, w.rf1, partition=2)
        # Tracked open transactions pin the partitions without a made-hanging one.
        open_tracked(w)
        restock_hanging(w)
        commit_group_offsets(w)
        yield w
    finally:
        for run in w.open_runs:
            try:
                run.abort()
            except Exception:  # noqa: BLE001 - the cluster is going away anyway
                pass
        cluster.stop()


# The tracked transactions are opened anew this long before their timeout: an episode (five commands,
# a fault, settling) fits in it. Their coordinators abort them at OPEN_TRANSACTION_TIMEOUT_MS (10 min),
# which a long run outlives (400 runs take ~11 min): the LSO moving then is the timeout, not a command.
TRACKED_RENEW_MARGIN_MS = 180_000


def open_tracked(w: World) -> None:
    """Open transactions the coordinators track, pinning the partitions without a made-hanging one."""
    for topic, parts in ((w.rf3, [0, 2]), (w.rf1, [1, 2])):
        run = scenarios.run_transaction(w.bootstrap, topic, parts, "open", f"nm-open-{topic}")
        w.open_runs.append(run)
        w.tracked.update({TopicPartition(topic, p): run.producer_id for p in parts})


def renew_tracked(w: World) -> bool:
    """Between episodes: end the tracked transactions and open new ones if they near their timeout,
    and commit the group's offsets again at the new LSOs (so it stays blocked behind them)."""
    now_ms = int(time.time() * 1000)
    if all(now_ms - run.written_at_ms < run.timeout_ms - TRACKED_RENEW_MARGIN_MS for run in w.open_runs):
        return False
    for run in w.open_runs:
        run.abort()
    w.open_runs.clear()
    w.tracked.clear()
    open_tracked(w)
    commit_group_offsets(w)
    return True


def restock_hanging(w: World) -> None:
    """A made-hanging transaction on each HANGING_AT partition that has none (abort takes them)."""
    for topic_index, partition in HANGING_AT:
        tp = TopicPartition((w.rf3, w.rf1)[topic_index], partition)
        if tp in w.hanging:
            continue
        for attempt in range(40):  # a coordinator loading its log after a restart
            try:
                made = hm.make_hanging_transaction(w.bootstrap, f"nm-hanging-{uuid.uuid4().hex[:8]}", tp.topic, tp.partition)
                break
            except hm.HangingMakerError:
                if attempt == 39:
                    raise
                time.sleep(0.5)
        w.hanging[tp] = made
        w.ever_hanging.add((tp, made.producer_id))


def commit_group_offsets(w: World) -> None:
    """A read_committed group that has read up to each partition's current LSO (so it is blocked)."""
    from confluent_kafka import Consumer, TopicPartition as CTP

    consumer = Consumer({"bootstrap.servers": w.bootstrap, "group.id": w.group, "enable.auto.commit": False, "log_level": 0})
    try:
        offsets = [CTP(tp.topic, tp.partition, hm.end_offset(w.bootstrap, tp, read_committed=True)) for tp in w.partitions]
        consumer.commit(offsets=offsets, asynchronous=False)
    finally:
        consumer.close()


# -- reading the truth, settling -----------------------------------------------------------------


def admin(w: World):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": w.bootstrap, "log_level": 0})


def leaders(w: World, timeout: float = 10) -> dict[TopicPartition, int]:
    md = admin(w).list_topics(timeout=timeout)
    return {TopicPartition(name, p.id): p.leader for name, t in md.topics.items() for p in t.partitions.values()}


def truth(w: World, tps, attempts: int = 12) -> dict[TopicPartition, tuple[int, int]]:
    """(LSO, HW) per partition, as librdkafka consumers see them (fresh consumers again while a
    returned broker still catches up: a leader can be elected before it answers ListOffsets)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition as CTP

    for attempt in range(attempts):
        out: dict[TopicPartition, list[int]] = {tp: [0, 0] for tp in tps}
        try:
            for index, level in enumerate(("read_committed", "read_uncommitted")):
                consumer = Consumer({"bootstrap.servers": w.bootstrap, "group.id": "nm-truth", "isolation.level": level, "log_level": 0})
                try:
                    for tp in tps:
                        out[tp][index] = consumer.get_watermark_offsets(CTP(tp.topic, tp.partition), timeout=10)[1]
                finally:
                    consumer.close()
            return {tp: (v[0], v[1]) for tp, v in out.items()}
        except KafkaException as exc:
            if attempt == attempts - 1:
                raise AssertionError(f"no truth for {tp} after {attempts} tries: {exc}; leaders {leaders(w)}") from exc
            time.sleep(2)
            if attempt % 3 == 2:
                settle(w)
    raise AssertionError("unreachable")


def settle(w: World, timeout: float = 90) -> None:
    """Until every broker is registered, every watched partition and log partition has a live leader,
    and that has held for 2 s (a resumed broker can be fenced again while it catches up)."""
    deadline = time.monotonic() + timeout
    steady_since = None
    last: Any = None
    while time.monotonic() < deadline:
        try:
            md = admin(w).list_topics(timeout=5)
            lead = {TopicPartition(n, p.id): p.leader for n, t in md.topics.items() for p in t.partitions.values()}
            bad = [tp for tp in w.watched if lead.get(tp, -1) < 0]
            bad += [tp for tp, l in lead.items() if tp.topic == "__transaction_state" and l < 0]
            last = (sorted(md.brokers), bad)
            ok = len(md.brokers) == 3 and not bad
        except Exception as exc:  # noqa: BLE001 - still recovering
            ok, last = False, exc
        if ok:
            steady_since = steady_since or time.monotonic()
            if time.monotonic() - steady_since >= 2:
                return
        else:
            steady_since = None
        time.sleep(0.3)
    raise AssertionError(f"the cluster did not settle within {timeout}s: {last}")


# -- faults --------------------------------------------------------------------------------------


@dataclass
class Fault:
    """One episode's fault: ``before`` runs before each command, ``during`` inside it (right before
    its ``hook_at``-th round trip), ``after`` after each command, ``heal`` once at the episode's end."""

    name: str
    victim: int
    before: Callable[[], None] = lambda: None
    during: Callable[[], None] | None = None
    after: Callable[[], None] = lambda: None
    heal: Callable[[], None] = lambda: None
    only_replica_gone: bool = False  # the victim is frozen or dead for the whole command
    leaders_only_move: bool = False  # no broker is down: leaders move, nothing else


def process(w: World, node: int):
    return w.cluster._node(node).process  # the harness can kill and start; the nemesis also freezes


def freeze(w: World, node: int) -> None:
    proc = process(w, node)
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGSTOP)


def thaw(w: World, node: int) -> None:
    proc = process(w, node)
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGCONT)


def restart_if_down(w: World, node: int) -> None:
    thaw(w, node)
    if node not in w.cluster.running_broker_ids():
        w.cluster.start_broker(node)


def move_leaders(w: World, topics_of: Callable[[str], bool]) -> None:
    """Rotate the replica order of matching partitions and elect the new preferred leaders."""
    from kafka.admin import KafkaAdminClient
    from kafka.structs import TopicPartition as KTP

    md = admin(w).list_topics(timeout=10)
    client = KafkaAdminClient(bootstrap_servers=w.bootstrap, request_timeout_ms=10_000)
    try:
        moves = {}
        for name, t in md.topics.items():
            if not topics_of(name):
                continue
            for p in t.partitions.values():
                if len(p.replicas) > 1:
                    moves[KTP(name, p.id)] = list(p.replicas[1:]) + [p.replicas[0]]
        if moves:
            client.alter_partition_reassignments(moves)
            time.sleep(0.3)  # same replicas, new order: done at once
            # confluent-kafka's call: kafka-python 3.0.12's elect_leaders sent each TopicPartition's
            # repr as a topic name, so no leader ever moved (the nemesis's leaders-moved episodes
            # tested nothing until the wait below showed it).
            from confluent_kafka import ElectionType, TopicPartition as CkTopicPartition

            electing = admin(w)  # kept alive until the future is done (a collected handle cancels it)
            elected = electing.elect_leaders(ElectionType.PREFERRED, [CkTopicPartition(tp.topic, tp.partition) for tp in moves]).result(15)
            # Only those the controller elected (a new first replica out of the ISR is not).
            done = {(tp.topic, tp.partition) for tp, error in elected.items() if error is None}
            wait_for_new_leaders(w, {TopicPartition(tp.topic, tp.partition): order[0] for tp, order in moves.items()
                                     if (tp.topic, tp.partition) in done})
    finally:
        client.close()


def wait_for_new_leaders(w: World, expected: dict[TopicPartition, int], timeout_s: float = 5.0) -> None:
    """Return once the brokers name the new leaders: the command under test then holds metadata
    that is stale for sure (an old leader that has not yet heard of the election would still answer,
    and the retry at the new leader would never be exercised)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        now = leaders(w, timeout=5)
        if all(now.get(tp) == leader for tp, leader in expected.items()):
            time.sleep(0.2)  # the other brokers apply the same metadata record within milliseconds
            return
        time.sleep(0.1)
    raise RuntimeError(f"leaders did not move within {timeout_s}s: {sorted(map(str, expected))}")


def delete_scratch(w: World) -> None:
    if w.scratch is not None:
        from confluent_kafka import KafkaException

        client = admin(w)  # kept alive until the deletion is done
        try:
            client.delete_topics([w.scratch], operation_timeout=10)[w.scratch].result(15)
        except KafkaException as exc:
            if "UNKNOWN_TOPIC" not in str(exc):  # deleted by an earlier command's fault of the episode
                raise


def draw_fault(rng: random.Random, w: World, kind: str) -> Fault:
    victim = rng.choice(w.cluster.broker_ids)
    if kind == "none":
        return Fault(kind, victim)
    if kind == "freeze":
        return Fault(kind, victim, before=lambda: freeze(w, victim), after=lambda: None, heal=lambda: thaw(w, victim),
                     only_replica_gone=True)
    if kind == "freeze_during":
        return Fault(kind, victim, during=lambda: freeze(w, victim), after=lambda: thaw(w, victim), heal=lambda: thaw(w, victim))
    if kind == "kill":
        return Fault(kind, victim, before=lambda: w.cluster.kill_broker(victim), heal=lambda: restart_if_down(w, victim),
                     only_replica_gone=True)
    if kind == "kill_during":
        return Fault(kind, victim, during=lambda: w.cluster.kill_broker(victim), heal=lambda: restart_if_down(w, victim))
    if kind == "restart_during":
        def start_inside() -> None:
            # The command waits inside its round trip while the broker starts (that time is the
            # nemesis's, not the command's): it then meets a broker that has just returned. Started
            # here, not on a thread of its own, so the harness never starts and kills at once.
            if victim not in w.cluster.running_broker_ids():
                w.cluster.start_broker(victim)

        killed = {"done": False}

        def kill_once() -> None:
            if not killed["done"]:
                killed["done"] = True
                w.cluster.kill_broker(victim)

        return Fault(kind, victim, before=kill_once, during=start_inside, heal=lambda: restart_if_down(w, victim))
    if kind == "move_leaders_during":
        return Fault(kind, victim, during=lambda: move_leaders(w, lambda name: name in (w.rf3, w.fence_topic)),
                     leaders_only_move=True)
    if kind == "txnlog_move_during":
        return Fault(kind, victim, during=lambda: move_leaders(w, lambda name: name == "__transaction_state"),
                     leaders_only_move=True)
    if kind == "delete_topic_during":
        return Fault(kind, victim, during=lambda: delete_scratch(w))
    raise ValueError(kind)


# Cheap faults more often than those that restart a broker (a restart costs seconds).
FAULT_WEIGHTS = {
    "none": 2, "freeze": 3, "freeze_during": 3, "kill": 1, "kill_during": 1, "restart_during": 1,
    "move_leaders_during": 2, "txnlog_move_during": 2, "delete_topic_during": 2,
}


# -- commands ------------------------------------------------------------------------------------


def commands(w: World) -> dict[str, list[str]]:
    ours = ["--topic", w.rf3, "--topic", w.rf1]
    regex = f"^({w.rf3}|{w.rf1}|nm-scratch-.*)$"
    return {
        "cluster": ["cluster"],
        "producers": ["producers", *ours],
        "transactions list": ["transactions", "list"],
        "transactions describe": ["transactions", "describe", *(f"nm-open-{t}" for t in (w.rf3, w.rf1))],
        "lso": ["lso"],
        "lso --groups": ["lso", "--groups"],
        "diagnose": ["diagnose", "--group", w.group],
        "hanging": ["hanging", "--max-transaction-timeout", MAX_TXN_TIMEOUT],
        "check": ["check", "--topic-regex", regex, "--max-transaction-timeout", MAX_TXN_TIMEOUT,
                  "--txn-age-warn", "none", "--txn-age-crit", "none"],
        "abort --all-hanging": ["abort", "--all-hanging", "--max-transaction-timeout", MAX_TXN_TIMEOUT, "--yes"],
        "fence": ["fence", "--transactional-id", "FENCE_ID", "--yes"],
    }


# Commands that read every partition of rf3 and rf1 (the completeness invariants apply to them).
READS_OURS = {"producers", "lso", "hanging", "check", "lso --groups"}


@dataclass
class Run:
    episode: int
    fault: str
    victim: int
    command: str
    code: int
    stdout: str
    stderr: str
    elapsed_s: float
    nemesis_s: float
    hooked: bool
    leaders_before: dict[TopicPartition, int]
    doc: Any = None


class Nemesis:
    def __init__(self, w: World, capsys, monkeypatch, tmp_path: Path, rng: random.Random):
        self.w, self.capsys, self.monkeypatch, self.tmp_path, self.rng = w, capsys, monkeypatch, tmp_path, rng
        self.runs: list[Run] = []
        self.violations: list[str] = []
        self.faults: collections.Counter[str] = collections.Counter()
        self.exporter: ExporterProcess | None = None
        self.own_errors: list[str] = []  # faults the nemesis failed to inject
        self.renewals = 0  # times the tracked transactions were opened anew (renew_tracked)

    def violation(self, run: Run, what: str) -> None:
        self.violations.append(f"episode {run.episode} {run.fault}(broker {run.victim}) `{run.command}`: {what}")

    # -- running one command under a fault ---------------------------------------------------------

    def run(self, episode: int, fault: Fault, name: str, args: list[str], leaders_before: dict[TopicPartition, int]) -> Run:
        hook_at = self.rng.randint(1, 3)
        state = {"calls": 0, "spent": 0.0, "hooked": False}
        original = Session._send_all

        def send_all(session, requests):
            state["calls"] += 1
            if fault.during is not None and state["calls"] == hook_at and not state["hooked"]:
                started = time.monotonic()
                state["hooked"] = True
                try:
                    fault.during()
                except Exception as exc:  # noqa: BLE001 - the nemesis failing is the test's failure, not the command's
                    self.own_errors.append(f"episode {episode} {fault.name}: {exc!r}")
                state["spent"] += time.monotonic() - started
            return original(session, requests)

        fault.before()
        if name == "exporter scrape":
            return self._scrape(episode, fault, leaders_before)
        with self.monkeypatch.context() as patch:
            patch.setattr(Session, "_send_all", send_all)
            started = time.monotonic()
            result = run_cli(self.capsys, *args, "-b", self.w.bootstrap, "--timeout", f"{TIMEOUT_S}s", "-o", "json",
                             *(["--audit-log", str(self.tmp_path / "audit.jsonl")] if args[0] in ("abort", "fence") else []))
            elapsed = time.monotonic() - started
        fault.after()
        run = Run(episode, fault.name, fault.victim, name, result.code, result.stdout, result.stderr, elapsed,
                  state["spent"], state["hooked"], leaders_before)
        try:
            run.doc = json.loads(result.stdout) if result.stdout.strip() else None
        except ValueError:
            self.violation(run, f"stdout is not JSON: {result.stdout[:200]!r}")
        self.runs.append(run)
        return run

    def _scrape(self, episode: int, fault: Fault, leaders_before) -> Run:
        """One exporter scrape; a "during" fault fires on a timer shortly after the scrape starts."""
        if self.exporter is None:
            self.exporter = ExporterProcess("-b", self.w.bootstrap, "--cache-ttl", "0s", "--scrape-timeout", f"{TIMEOUT_S}s",
                                            "--topic-regex", f"^({self.w.rf3}|{self.w.rf1})$")
        timer = None
        if fault.during is not None:
            timer = threading.Timer(self.rng.uniform(0.0, 0.3), fault.during)
            timer.start()
        started = time.monotonic()
        try:
            body = self.exporter.get("/metrics", timeout=TIMEOUT_S + 30)
            code = 0
        except Exception as exc:  # noqa: BLE001 - a failed scrape is a violation below
            body, code = f"{exc}; exporter {self._exporter_tail()}", -1
        elapsed = time.monotonic() - started
        spent = 0.0
        if timer is not None:
            timer.join()  # a fault that failed on the timer thread shows as the thread's exception
            spent = min(elapsed, 1.5)  # the fault's own time overlaps the scrape; bounded generously
        fault.after()
        run = Run(episode, fault.name, fault.victim, "exporter scrape", code, body, "", elapsed, spent, timer is not None,
                  leaders_before)
        run.doc = scraped_offsets(body) if code == 0 else None
        self.runs.append(run)
        return run

    def _exporter_tail(self) -> str:
        """How the exporter process stands, with the end of its stderr; a dead one is started again
        so that the scrapes after it are still checked."""
        assert self.exporter is not None
        time.sleep(1)  # its stderr reaches us through a reader thread
        lines = list(self.exporter.stderr_lines)
        while not self.exporter._stderr.empty():
            lines.append(self.exporter._stderr.get())
        code = self.exporter.proc.poll()
        tail = " | ".join(line.strip() for line in lines[-30:])
        if code is not None:
            self.exporter = None  # the next scrape starts a new one
            return f"exited with {code}: {tail}"
        return f"running: {tail}"

    # -- invariants --------------------------------------------------------------------------------

    def check_run(self, run: Run, fault: Fault) -> None:
        if run.elapsed_s - run.nemesis_s > TIMEOUT_S + SLACK_S:
            self.violation(run, f"took {run.elapsed_s:.1f}s ({run.nemesis_s:.1f}s of it the nemesis's) with --timeout {TIMEOUT_S}s")
        if run.command == "exporter scrape":
            self._check_scrape(run, fault)
            return
        if run.code not in (0, 1, 2, 3):
            self.violation(run, f"exit {run.code}: {run.stderr.strip()[:300]}")
        if LIBRARY_WORDS.search(run.stderr):
            self.violation(run, f"a client library's words on stderr: {run.stderr.strip()[:300]}")
        self._check_hanging_claims(run)
        if fault.only_replica_gone and run.command in READS_OURS:
            gone = [tp for tp in self.w.partitions if tp.topic == self.w.rf1 and run.leaders_before.get(tp) == run.victim]
            # Exit 3, or 2 where a critical finding stands beside the gap (README: critical beats incomplete).
            if gone and run.code not in (2, 3):
                self.violation(run, f"exit {run.code} although {gone} had no live replica for the whole command")
            for tp in gone:
                if str(tp) not in run.stderr + run.stdout and f"broker {run.victim}" not in run.stderr + run.stdout:
                    self.violation(run, f"{tp} is neither shown nor named missing: {run.stderr.strip()[:300]}")
        if fault.name == "freeze" and run.command in ("producers", "lso"):
            # The per-broker budget: the frozen broker costs its share, the others still answer.
            live = {tp for tp in self.w.partitions if run.leaders_before.get(tp, -1) not in (run.victim, -1)}
            # `lso` shows lagging partitions only: one whose made-hanging transaction an earlier abort of
            # this episode ended no longer lags (seed 416181042 tripped on exactly that, no product fault).
            live -= self.aborted_before(run)
            shown = {TopicPartition(r["topic"], r["partition"]) for r in (run.doc or []) if isinstance(r, dict)}
            if not live <= shown:
                self.violation(run, f"partitions led by answering brokers not shown: {sorted(map(str, live - shown))}; "
                                    f"{run.stderr.strip()[:300]}")
        if fault.leaders_only_move and run.hooked and run.command in READS_OURS | {"transactions describe"} and run.code == 3:
            self.violation(run, f"incomplete although only leaders moved: {run.stderr.strip()[:300]}")

    def aborted_before(self, run: Run) -> set[TopicPartition]:
        """The partitions an `abort` earlier in ``run``'s episode reported ending a transaction on."""
        out: set[TopicPartition] = set()
        for earlier in self.runs[:self.runs.index(run)]:
            if earlier.episode == run.episode and earlier.command == "abort --all-hanging" and isinstance(earlier.doc, list):
                out |= {TopicPartition(r["topic"], r["partition"]) for r in earlier.doc
                        if isinstance(r, dict) and r.get("outcome") in ("aborted", "unknown")}
        return out

    def _check_scrape(self, run: Run, fault: Fault) -> None:
        if run.code != 0:
            self.violation(run, f"scrape failed: {run.stdout[:300]}")
            return
        if "kafkatxn_up" not in run.stdout:
            self.violation(run, "no kafkatxn_up in the scrape")
        for line in run.stdout.splitlines():
            if line.startswith("kafkatxn_hanging_transactions") and not line.startswith("kafkatxn_hanging_transactions_"):
                value = float(line.rsplit(" ", 1)[1])
                if value > len(self.w.hanging):
                    self.violation(run, f"{line}: more than the {len(self.w.hanging)} made hanging")
        if fault.only_replica_gone and "kafkatxn_scrape_incomplete 1" not in run.stdout:
            gone = [tp for tp in self.w.partitions if tp.topic == self.w.rf1 and run.leaders_before.get(tp) == run.victim]
            if gone:
                self.violation(run, f"scrape not marked incomplete although {gone} had no live replica")

    def _check_hanging_claims(self, run: Run) -> None:
        """Nothing called hanging but a made-hanging transaction; no tracked one, ever."""
        tracked_pids = set(self.w.tracked.values())
        made = {pid for _tp, pid in self.w.ever_hanging}
        doc = run.doc
        if run.command == "hanging" and isinstance(doc, dict):
            for row in doc.get("hanging", []):
                tp, pid = TopicPartition(row["topic"], row["partition"]), row["producer_id"]
                if (tp, pid) not in self.w.ever_hanging:
                    self.violation(run, f"called hanging: {tp} producer {pid}" + (" (a tracked transaction)" if pid in tracked_pids else ""))
        if run.command == "check" and isinstance(doc, dict):
            made_tps = {str(tp) for tp, _pid in self.w.ever_hanging}
            for finding in doc.get("findings", []):
                if finding.get("kind") == "hanging_transaction" and finding.get("subject") not in made_tps:
                    # The message says the rule that fired (its reason): what to look at when this trips.
                    self.violation(run, f"check called {finding.get('subject')} hanging: {str(finding.get('message'))[:400]}")
        if run.command == "abort --all-hanging" and isinstance(doc, list):
            for row in doc:
                if row.get("outcome") in ("aborted", "would abort", "unknown"):
                    if row.get("producer_id") not in made:
                        self.violation(run, f"abort acted on producer {row.get('producer_id')} on {row.get('topic')}-{row.get('partition')}")
        for found in walk(doc):
            if found.get("verdict") == "hanging" and found.get("producer_id") in tracked_pids:
                self.violation(run, f"a tracked transaction called hanging: {found}")

    def check_offsets(self, runs: list[Run], settled: dict[TopicPartition, tuple[int, int]]) -> None:
        """Offsets printed are never ahead of the truth read after settling (offsets only grow)."""
        for run in runs:
            for row in walk(run.doc):
                if "topic" not in row or "partition" not in row:
                    continue
                tp = TopicPartition(row["topic"], row["partition"])
                if tp not in settled:
                    continue
                lso, hw = settled[tp]
                for key, bound in (("last_stable_offset", lso), ("lso", lso), ("high_watermark", hw), ("hw", hw)):
                    value = row.get(key)
                    if isinstance(value, int) and value > bound:
                        self.violation(run, f"{tp} {key} {value} is ahead of the truth {bound}")


SAMPLE = re.compile(r'^kafkatxn_partition_(high_watermark|last_stable_offset)\{([^}]*)\} (\S+)$')


def scraped_offsets(body: str) -> list[dict]:
    """The exporter's per-partition offsets as rows, for the same never-ahead-of-the-truth check."""
    rows: dict[tuple[str, int], dict] = {}
    for line in body.splitlines():
        m = SAMPLE.match(line)
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
            key = (labels["topic"], int(labels["partition"]))
            rows.setdefault(key, {"topic": key[0], "partition": key[1]})[m.group(1)] = int(float(m.group(3)))
    return list(rows.values())


def walk(doc: Any):
    """Every dict inside a JSON document."""
    if isinstance(doc, dict):
        yield doc
        for value in doc.values():
            yield from walk(value)
    elif isinstance(doc, list):
        for value in doc:
            yield from walk(value)


# -- the test ------------------------------------------------------------------------------------


@pytest.mark.timeout(1500)
def test_nemesis(world: World, capsys, monkeypatch, tmp_path, request: pytest.FixtureRequest):
    seed = random.SystemRandom().randrange(1 << 30) if SEED == "random" else int(SEED)
    rng = random.Random(seed)
    w = world
    nemesis = Nemesis(w, capsys, monkeypatch, tmp_path, rng)
    names = list(commands(w)) + ["exporter scrape"]
    started = time.monotonic()
    episode = 0
    try:
        while len(nemesis.runs) < RUNS:
            episode += 1
            nemesis.renewals += renew_tracked(w)
            restock_hanging(w)
            weights = {k: weight for k, weight in FAULT_WEIGHTS.items() if not ONLY_FAULTS or k in ONLY_FAULTS}
            kind = rng.choices(list(weights), weights=list(weights.values()))[0]
            if kind == "delete_topic_during":
                w.scratch = w.cluster.create_topic(f"nm-scratch-{uuid.uuid4().hex[:6]}", 2, 3)
                scenarios.run_transaction(w.bootstrap, w.scratch, [0, 1], "committed", f"nm-scratch-{episode}")
            fence_run = None
            picked = rng.sample(names, 5)
            if "fence" in picked:
                fence_run = scenarios.run_transaction(w.bootstrap, w.fence_topic, [0], "open", f"nm-fence-{uuid.uuid4().hex[:6]}")
            before = truth(w, w.watched)
            leaders_before = leaders(w)  # who led what before the fault: its victim's parts are the ones at risk
            fault = draw_fault(rng, w, kind)
            nemesis.faults[kind] += 1
            episode_runs: list[Run] = []
            try:
                for name in picked:
                    args = [a.replace("FENCE_ID", fence_run.transactional_id if fence_run else "") for a in commands(w).get(name, [])]
                    run = nemesis.run(episode, fault, name, args, leaders_before)
                    episode_runs.append(run)
            finally:
                fault.heal()
            settle(w)
            after = truth(w, w.watched)
            for run in episode_runs:
                nemesis.check_run(run, fault)
            nemesis.check_offsets(episode_runs, after)
            check_writes(nemesis, episode_runs, before, after, fence_run)
            if w.scratch is not None and kind == "delete_topic_during":
                try:
                    delete_scratch(w)
                except Exception:  # noqa: BLE001 - already deleted by the fault
                    pass
                w.scratch = None
    finally:
        if nemesis.exporter is not None:
            nemesis.exporter.stop()
        report(request, nemesis, seed, time.monotonic() - started)
    assert not nemesis.own_errors, nemesis.own_errors
    assert not nemesis.violations, "\n".join(nemesis.violations[:30])


def check_writes(nemesis: Nemesis, runs: list[Run], before, after, fence_run) -> None:
    """Partitions change only where abort or fence reported acting (and only on what was hanging or fenced)."""
    w = nemesis.w
    acted: set[TopicPartition] = set()
    for run in runs:
        if run.command == "abort --all-hanging" and isinstance(run.doc, list):
            for row in run.doc:
                if row.get("outcome") in ("aborted", "unknown"):
                    tp = TopicPartition(row["topic"], row["partition"])
                    acted.add(tp)
                    if row.get("outcome") == "aborted":
                        w.hanging.pop(tp, None)
        if run.command == "fence" and fence_run is not None and isinstance(run.doc, list):
            if any(row.get("outcome") in ("fenced", "unknown") for row in run.doc):
                acted.add(TopicPartition(w.fence_topic, 0))
    for tp in list(w.hanging):
        if tp in acted and after[tp][0] > w.hanging[tp].start_offset:
            w.hanging.pop(tp)  # an abort whose answer did not arrive ("unknown") took effect after all
    for tp in w.watched:
        if before[tp] != after[tp] and tp not in acted:
            culprit = next((r for r in runs if r.command in ("abort --all-hanging", "fence")), runs[0])
            nemesis.violation(culprit, f"{tp} changed from (LSO, HW) {before[tp]} to {after[tp]} with no action reported on it")
        if tp in w.tracked and before[tp][0] != after[tp][0]:
            nemesis.violation(runs[0], f"{tp}: the LSO of a tracked open transaction moved {before[tp]} -> {after[tp]}")
    # Made-hanging transactions that abort did not report aborting are still there.
    for tp, made in list(w.hanging.items()):
        if tp not in acted and after[tp][0] > made.start_offset:
            nemesis.violation(runs[0], f"{tp}: the made-hanging transaction at {made.start_offset} ended with no abort reported")
    if fence_run is not None:
        try:
            fence_run.abort()
        except Exception:  # noqa: BLE001 - fenced: its producer can no longer end it
            pass


def report(request: pytest.FixtureRequest, nemesis: Nemesis, seed: int, took_s: float) -> None:
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    by_command = collections.Counter(r.command for r in nemesis.runs)
    during = sum(1 for r in nemesis.runs if r.hooked)
    slowest = max(nemesis.runs, key=lambda r: r.elapsed_s - r.nemesis_s, default=None)
    lines = [
        f"nemesis: seed {seed} (KAFKATXN_NEMESIS_SEED={seed} to repeat), {len(nemesis.runs)} command runs in {took_s:.0f}s, "
        f"{sum(nemesis.faults.values())} faults injected, {during} of them inside a command, "
        f"{len(nemesis.violations)} invariant violations, tracked transactions opened anew {nemesis.renewals} times",
        "nemesis faults: " + ", ".join(f"{k} {v}" for k, v in sorted(nemesis.faults.items())),
        "nemesis commands: " + ", ".join(f"{k} {v}" for k, v in sorted(by_command.items())),
    ]
    if slowest is not None:
        lines.append(f"nemesis slowest: `{slowest.command}` under {slowest.fault} {slowest.elapsed_s:.1f}s")
    frozen = [r for r in nemesis.runs if r.fault == "freeze" and r.command in ("lso", "hanging", "check")]
    if frozen:
        lines.append("nemesis with a broker frozen: " + ", ".join(
            f"{c} max {max(r.elapsed_s for r in frozen if r.command == c):.1f}s" for c in sorted({r.command for r in frozen})))
    if reporter is None:
        return
    with capture.global_and_fixture_disabled() if capture is not None else _null():
        for line in lines:
            reporter.write_line(line)
        for line in nemesis.violations[:30]:
            reporter.write_line(f"nemesis violation: {line}")


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
