"""Exporters scraped without pause while brokers are killed, stopped and restarted and leaders move.

    nice -n 10 python bench/soak_exporter.py --minutes 10 --seed 37

Looks for a native crash of a long-running exporter (issue 37: the nemesis once saw one die of
SIGSEGV on a scrape while a broker restarted; CI once saw one abort at SIGTERM with "double free
or corruption" on a PKCS12 trust store). Starts 3 brokers (harness/) with a PLAINTEXT, a SASL_SSL
(SCRAM) and a mutual-TLS listener, and one ``kafkatxn exporter`` process per kind of connection:

- ``plain``: PLAINTEXT;
- ``pkcs12``: SASL_SSL with a PKCS12 trust store (read into memory: kafka-python gets an SSLContext);
- ``mtls``: mutual TLS from PEM files, run as ``python -X dev`` (Python's debug memory allocator).

Each runs with ``PYTHONFAULTHANDLER=1`` (and the exporter's own faulthandler), core dumps allowed
(RLIMIT_CORE unlimited, cwd its own directory: ``/proc/sys/kernel/core_pattern`` decides where a
core goes, printed in the summary), stderr to a file. ``--scrapers`` threads per exporter scrape
/metrics without pause (``--cache-ttl 0s``: every scrape a full gather). Transactional producers
commit, abort and leave transactions open, a read_committed group consumes, and a seeded loop of
faults runs until ``--minutes`` are up: a broker killed (SIGKILL) or stopped (SIGTERM) and started
again after a pause, leaders of every partition (``__transaction_state`` and
``__consumer_offsets`` too) moved by rotating replicas and a preferred election, an exporter sent
SIGTERM (it must exit 0, with no fatal error on stderr) and started again.

Any other exit of an exporter is a crash: its exit status, the end of its stderr (faulthandler's
stacks) and any core file (with ``gdb -batch`` backtraces of every thread, where gdb is installed)
are kept under ``--workdir`` and listed. Exit 1 when an exporter crashed or a SIGTERM did not end in
a clean exit 0; 0 otherwise. ``report.json`` holds every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness import KafkaCluster  # noqa: E402
from harness.leaders import rotate_leaders  # noqa: E402
from harness.security import MTLS_LISTENER, PLAIN_LISTENER, SASL_LISTENER, SaslUsers, client_properties, make_pki, secure_setup, write_properties  # noqa: E402
from harness.stores import truststore  # noqa: E402

PARTITIONS = 6
TOPICS = 4
SCRAPE_TIMEOUT_S = 5
SIGTERM_WAIT_S = SCRAPE_TIMEOUT_S + 15  # the exporter drains a scrape under way before it exits
FATAL_MARKS = ("Fatal Python error", "double free", "corruption", "Segmentation fault", "Traceback", "Aborted")


def allow_core_dumps() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


class Exporter:
    """One exporter slot: started again after every exit; each exit is recorded."""

    def __init__(self, name: str, directory: Path, args: list[str], dev: bool, counts: Counter, crashes: list, code: Path = ROOT):
        self.name, self.dir, self.args, self.dev, self.code = name, directory, args, dev, code
        self.counts, self.crashes = counts, crashes
        self.dir.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen | None = None
        self.base: str | None = None
        self.lock = threading.Lock()
        self.stopping = False
        self.generation = 0

    def start(self) -> None:
        self.generation += 1
        err = self.dir / f"stderr-{self.generation}.txt"
        if self.dev:  # the debug allocator checks every Python block for over- and under-runs
            cmd = [sys.executable, "-X", "dev", "-m", "kafkatxn"]
        elif self.code != ROOT:  # another checkout's kafkatxn (an older commit, to compare)
            cmd = [sys.executable, "-m", "kafkatxn"]
        else:  # the console script, as installed
            cmd = [shutil.which("kafkatxn") or sys.executable, *([] if shutil.which("kafkatxn") else ["-m", "kafkatxn"])]
        cmd += ["exporter", "--listen", "127.0.0.1:0", "--cache-ttl", "0s", "--scrape-timeout", f"{SCRAPE_TIMEOUT_S}s", *self.args]
        env = {**os.environ, "PYTHONFAULTHANDLER": "1", "PYTHONPATH": str(self.code)}
        with open(err, "w") as stderr:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                                         cwd=self.dir, env=env, preexec_fn=allow_core_dumps)
        self.stderr_path = err
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            text = err.read_text(errors="replace")
            if "serving http://" in text:
                self.base = text.split("serving ", 1)[1].split()[0].rsplit("/", 1)[0]
                self.counts[f"{self.name}_starts"] += 1
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError(f"exporter {self.name} did not start: {err.read_text(errors='replace')[-2000:]}")

    def check(self) -> None:
        """A process that exited without being asked to is a crash: recorded, then started again."""
        with self.lock:
            if self.stopping or self.proc is None or self.proc.poll() is None:
                return
            self.record(self.proc.returncode, asked=False)
            self.start()

    def sigterm(self) -> None:
        with self.lock:
            self.stopping = True
            try:
                assert self.proc is not None
                started = time.monotonic()
                self.proc.send_signal(signal.SIGTERM)
                try:
                    code = self.proc.wait(SIGTERM_WAIT_S)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    code = self.proc.wait()
                    self.counts[f"{self.name}_sigterm_hung"] += 1
                self.counts["sigterms"] += 1
                self.counts["sigterm_wait_ms_max"] = max(self.counts["sigterm_wait_ms_max"], int((time.monotonic() - started) * 1000))
                self.record(code, asked=True)
                self.start()
            finally:
                self.stopping = False

    def record(self, code: int, asked: bool) -> None:
        text = self.stderr_path.read_text(errors="replace")
        marks = [m for m in FATAL_MARKS if m in text]
        clean = asked and code == 0 and not marks
        if clean:
            return
        cores = sorted(str(p) for p in self.dir.glob("core*"))
        entry = {"exporter": self.name, "generation": self.generation, "exit": code, "asked": asked, "marks": marks,
                 "stderr": str(self.stderr_path), "stderr_tail": text[-6000:], "cores": cores, "at": time.strftime("%H:%M:%S")}
        for core in cores:
            entry.setdefault("backtraces", {})[core] = backtrace(core)
        self.crashes.append(entry)
        print(f"!! exporter {self.name} exit {code} ({'after SIGTERM' if asked else 'unasked'}) marks={marks} cores={cores}", flush=True)

    def stop(self) -> None:
        with self.lock:
            self.stopping = True
            if self.proc is not None and self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.record(self.proc.wait(SIGTERM_WAIT_S), asked=True)
                except subprocess.TimeoutExpired:
                    self.proc.kill()


def backtrace(core: str) -> str:
    gdb = shutil.which("gdb")
    if gdb is None:
        return "gdb not installed"
    run = subprocess.run([gdb, "-batch", "-ex", "info sharedlibrary", "-ex", "thread apply all bt", sys.executable, core],
                         capture_output=True, text=True, timeout=300)
    return run.stdout[-20000:] + run.stderr[-2000:]


def scraper(exp: Exporter, stop: threading.Event, counts: Counter) -> None:
    while not stop.is_set():
        base = exp.base
        try:
            body = urllib.request.urlopen(f"{base}/metrics", timeout=SCRAPE_TIMEOUT_S + 10).read().decode()
        except (urllib.error.URLError, OSError, ConnectionError) as exc:
            # Refused or reset while an exporter restarts after its SIGTERM; a timeout would be a hang.
            reason = getattr(exc, "reason", exc)
            counts[f"{exp.name}_scrape_failed_{type(reason).__name__}"] += 1
            time.sleep(0.2)
            continue
        up = next((line.rsplit(" ", 1)[1] for line in body.splitlines() if line.startswith("kafkatxn_up")), None)
        counts["scrapes"] += 1
        counts[f"{exp.name}_scrapes"] += 1
        if up is not None and float(up) == 0:
            counts[f"{exp.name}_up0"] += 1


def load(bootstrap: str, topics: list[str], stop: threading.Event, counts: Counter, seed: int) -> None:
    """Transactions committed, aborted and left open (some never ended: the exporter reports them)."""
    from confluent_kafka import KafkaException, Producer

    rng = random.Random(seed)
    quiet = {"bootstrap.servers": bootstrap, "log_level": 0, "linger.ms": 5}
    abandoned: list = []  # open transactions whose producer stays alive and silent
    generation = 0
    while not stop.is_set():
        generation += 1
        try:
            p = Producer({**quiet, "transactional.id": f"soak-{generation % 20}", "transaction.timeout.ms": 900_000})
            p.init_transactions(30)
            for _ in range(rng.randint(1, 6)):
                if stop.is_set():
                    break
                p.begin_transaction()
                for _ in range(rng.randint(1, 5)):
                    p.produce(rng.choice(topics), b"soak", partition=rng.randrange(PARTITIONS))
                p.flush(30)
                if rng.random() < 0.03 and len(abandoned) < 4:
                    abandoned.append(p)
                    counts["txn_left_open"] += 1
                    break
                if rng.random() < 0.6:
                    p.commit_transaction(30)
                    counts["txn_committed"] += 1
                else:
                    p.abort_transaction(30)
                    counts["txn_aborted"] += 1
        except KafkaException:
            counts["txn_failed"] += 1  # a broker gone mid-transaction: a new producer takes the id over
        time.sleep(0.05)


def consume(bootstrap: str, topics: list[str], stop: threading.Event, counts: Counter) -> None:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "soak-group", "isolation.level": "read_committed",
                  "auto.offset.reset": "earliest", "log_level": 0})
    c.subscribe(topics)
    while not stop.is_set():
        if c.poll(0.5) is not None:
            counts["consumed"] += 1
    c.close()


def move_leaders(bootstrap: str, rng: random.Random, counts: Counter) -> None:
    """The leaders of a few topics' partitions moved (``__transaction_state`` and ``__consumer_offsets``
    among them: coordinators move too)."""
    from confluent_kafka.admin import AdminClient

    names = [n for n in AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}).list_topics(timeout=10).topics
             if n.startswith("soak-") or n in ("__transaction_state", "__consumer_offsets")]
    moved = rotate_leaders(bootstrap, rng.sample(sorted(names), k=min(len(names), rng.randint(1, 3))))
    counts["leader_moves"] += 1
    counts["partitions_moved"] += len(moved)


def faults(cluster: KafkaCluster, exporters: list[Exporter], bootstrap: str, rng: random.Random, until: float, counts: Counter,
           log: list) -> None:
    kinds = ["kill", "graceful", "move", "move", "sigterm"]
    while time.monotonic() < until:
        kind = rng.choice(kinds)
        started = time.monotonic()
        try:
            if kind in ("kill", "graceful"):
                victim = rng.choice(cluster.broker_ids)
                if kind == "kill":
                    cluster.kill_broker(victim)
                else:
                    cluster.stop_broker(victim)
                counts[f"broker_{kind}s"] += 1
                time.sleep(rng.uniform(0.5, 8))
                if rng.random() < 0.3:  # leaders move away from the dead broker's replicas meanwhile
                    move_leaders(bootstrap, rng, counts)
                cluster.start_broker(victim, timeout=120)
                counts["broker_restarts"] += 1
            elif kind == "move":
                move_leaders(bootstrap, rng, counts)
            else:
                exp = rng.choice(exporters)
                time.sleep(rng.uniform(0, 1.5))  # at a random point of a scrape
                exp.sigterm()
            log.append((time.strftime("%H:%M:%S"), kind, round(time.monotonic() - started, 1)))
        except Exception as exc:  # noqa: BLE001 - a fault that failed is noted; the soak goes on
            counts[f"fault_{kind}_failed"] += 1
            log.append((time.strftime("%H:%M:%S"), kind, f"failed: {exc}"))
            for b in cluster.broker_ids:
                if b not in cluster.running_broker_ids():
                    try:
                        cluster.start_broker(b, timeout=120)
                    except Exception:  # noqa: BLE001
                        pass
        time.sleep(rng.uniform(0.5, 3))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--seed", type=int, default=37)
    parser.add_argument("--scrapers", type=int, default=2, help="threads scraping each exporter at once")
    parser.add_argument("--workdir", default=None, help="kept after the run (default: a new temporary directory)")
    parser.add_argument("--kinds", default="plain,pkcs12,mtls", help="exporters to run")
    parser.add_argument("--code", default=str(ROOT), help="the kafkatxn checkout the exporters run (default: this one)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="soak-exporter-"))
    work.mkdir(parents=True, exist_ok=True)
    counts: Counter = Counter()
    crashes: list = []
    fault_log: list = []
    pki = make_pki(work / "pki")
    users = SaslUsers.random()
    setup = secure_setup(pki, users)
    cluster = KafkaCluster(work / "cluster", n_brokers=3, listeners=setup.listeners, format_arguments=setup.format_arguments,
                           broker_config=setup.broker_config, name="soak")
    cluster.start(timeout=180)
    stop = threading.Event()
    exporters: list[Exporter] = []
    threads: list[threading.Thread] = []
    started = time.monotonic()
    try:
        plain = cluster.bootstrap_servers_for(PLAIN_LISTENER)
        topics = [f"soak-{i}" for i in range(TOPICS)]
        for t in topics:
            cluster.create_topic(t, partitions=PARTITIONS, replication_factor=3)
        store_pw = f"storePw-{secrets.token_hex(8)}"
        p12 = truststore(work / "stores" / "trust.p12", pki.ca, "PKCS12", store_pw)
        scram = client_properties(pki, users, "scram", "java")
        scram.update({"ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(p12), "ssl.truststore.password": store_pw})
        configs = {
            "plain": (["-b", plain], False),
            "pkcs12": (["-b", cluster.bootstrap_servers_for(SASL_LISTENER), "--command-config",
                        str(write_properties(work / "pkcs12.properties", scram))], False),
            "mtls": (["-b", cluster.bootstrap_servers_for(MTLS_LISTENER), "--command-config",
                      str(write_properties(work / "mtls.properties", client_properties(pki, users, "mtls", "librdkafka")))], True),
        }
        for name in args.kinds.split(","):
            exp = Exporter(name, work / f"exporter-{name}", configs[name][0], configs[name][1], counts, crashes, Path(args.code))
            exp.start()
            exporters.append(exp)
        workers = [threading.Thread(target=load, args=(plain, topics, stop, counts, args.seed), daemon=True),
                   threading.Thread(target=consume, args=(plain, topics, stop, counts), daemon=True)]
        workers += [threading.Thread(target=scraper, args=(e, stop, counts), daemon=True) for e in exporters for _ in range(args.scrapers)]

        def watch() -> None:
            while not stop.is_set():
                for e in exporters:
                    e.check()
                time.sleep(0.2)

        workers.append(threading.Thread(target=watch, daemon=True))
        for t in workers:
            t.start()
        threads = workers
        try:
            faults(cluster, exporters, plain, rng, started + args.minutes * 60, counts, fault_log)
        except KeyboardInterrupt:  # stopped early: the figures so far are still reported
            counts["interrupted"] += 1
        for e in exporters:
            e.check()
    finally:
        stop.set()
        for e in exporters:
            e.stop()
        for t in threads:
            t.join(5)
        cluster.stop()
    minutes = (time.monotonic() - started) / 60
    core_pattern = Path("/proc/sys/kernel/core_pattern").read_text().strip()
    report = {"minutes": round(minutes, 2), "seed": args.seed, "core_pattern": core_pattern, "counts": dict(counts),
              "crashes": crashes, "faults": fault_log, "workdir": str(work)}
    (work / "report.json").write_text(json.dumps(report, indent=2))
    print(f"soak: {minutes:.1f} min, seed {args.seed}, core_pattern {core_pattern!r}, workdir {work}")
    for key in sorted(counts):
        print(f"  {key}: {counts[key]}")
    print(f"  crashes: {len(crashes)}")
    for c in crashes:
        print(f"    {c['exporter']} exit {c['exit']} asked={c['asked']} marks={c['marks']} cores={c['cores']} stderr={c['stderr']}")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
