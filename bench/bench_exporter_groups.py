"""Exporter scrapes with group lag from two checkouts, interleaved, against one held cluster.

    python bench/bench_sizes.py --sizes 3000,10000,30000 --brokers 3 --hold /tmp/held.json &
    git archive 57d98fc | tar -x -C /tmp/base && python3 -m compileall -q /tmp/base/kafkatxn kafkatxn
    python bench/bench_exporter_groups.py /tmp/held.json /tmp/base . --rounds 3
    python bench/bench_exporter_groups.py /tmp/held.json /tmp/base . --rounds 1 --times --py-spy /tmp/spy

Each round starts a fresh exporter of each checkout in turn (neither always first; its default
``--scrape-timeout`` 8 s unless ``--scrape-timeout``, group lag on, ``--cache-ttl 0s``) and scrapes it
twice: the first scrape (connections, imports, every read_committed probe) and the second, which
``bench_sizes.py`` and ``bench_groups.py`` time after their warm-up (the probe answers kept by
``facts_lso.ProbeMemo`` while the LSO and high watermark stand); ``--warm N`` scrapes it N times
more, each counted with the second (n = rounds x (1 + N) warm scrapes). Each scrape is timed until
its whole body is read, and the exporter's CPU seconds (every thread, user + system, from /proc)
during it are read too: on a loaded machine they move less than the wall time. The exporter's peak
RSS (VmHWM) is read after its scrapes. Printed per checkout: median and minimum of each kind of
scrape and of its CPU seconds, n, and whether any was incomplete (``kafkatxn_up`` 0 or
``kafkatxn_scrape_incomplete`` 1).

The two checkouts' second bodies of each round are compared byte for byte, without the series whose
value is a time (:data:`TIMED`): exit 1 when they differ, or when a scrape was incomplete.

``--times`` asks the holder (``bench_sizes.py --hold``) for the brokers' request times around one
more first scrape of each checkout: per API, the requests and the milliseconds the brokers spent
(``TotalTimeMs``: queue, local work, sending; ``LocalTimeMs``: the broker's own work), summed over
brokers, and the busiest broker's total. ``--py-spy DIR`` records that scrape with py-spy (every
thread: kafka-python's IO thread included), raw folded stacks in DIR, and prints each checkout's
top frames by own time; with ``--spy-warm`` the scrape recorded (and timed) is a warm one, after a
scrape that warms the exporter up.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path

from benchlib import peak_rss_mb, start_exporter

# Series whose value is a time or an age: they differ between any two scrapes.
TIMED_NAMES = (b"kafkatxn_scrape_duration_seconds", b"kafkatxn_snapshot_age_seconds", b"kafkatxn_transaction_oldest_age_seconds",
               b"kafkatxn_untracked_transaction_seconds_until_hanging", b"kafkatxn_group_stuck")
TIMED = tuple(prefix + name for name in TIMED_NAMES for prefix in (b"", b"# HELP ", b"# TYPE "))


def cpu_s(pid: int) -> float:
    """The process's CPU seconds so far, every thread, user and system (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def scrape(url: str, pid: int | None = None) -> tuple[float, bytes, float | None]:
    """One scrape: seconds until its whole body is read, the body, and the exporter's CPU seconds meanwhile."""
    cpu = cpu_s(pid) if pid is not None else None
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as response:
        body = response.read()
    took = time.perf_counter() - started
    return took, body, (cpu_s(pid) - cpu if pid is not None and cpu is not None else None)


def scalar(body: bytes, name: bytes) -> float | None:
    at = body.find(b"\n" + name + b" ")
    if at < 0:
        return None
    end = body.find(b"\n", at + 1)
    return float(body[at + len(name) + 2 : end])


def untimed_digest(body: bytes) -> str:
    digest = hashlib.sha256()
    for line in body.split(b"\n"):
        if not line.startswith(TIMED):
            digest.update(line + b"\n")
    return digest.hexdigest()


def complete(body: bytes) -> bool:
    return scalar(body, b"kafkatxn_up") == 1 and scalar(body, b"kafkatxn_scrape_incomplete") == 0


def broker_times(hold: dict) -> dict:
    ask, times = Path(hold["times_ask"]), Path(hold["times"])
    times.unlink(missing_ok=True)
    ask.touch()
    deadline = time.monotonic() + 600
    while not times.exists():
        if time.monotonic() > deadline:
            raise SystemExit("the holder did not answer with the brokers' request times")
        time.sleep(0.2)
    return json.loads(times.read_text())


def delta(before: dict, after: dict) -> tuple[dict[str, dict[str, float]], float]:
    """Per API, summed over brokers: requests and milliseconds; and the busiest broker's total ms."""
    per_api: dict[str, Counter] = {}
    busiest = 0.0
    for node, apis in after.items():
        total = 0.0
        for api, row in apis.items():
            was = before.get(node, {}).get(api, {})
            d = Counter({k: v - was.get(k, 0.0) for k, v in row.items()})
            if d["count"] > 0:
                per_api.setdefault(api, Counter()).update(d)
                total += d["TotalTimeMs"]
        busiest = max(busiest, total)
    return {api: dict(c) for api, c in per_api.items()}, busiest


def top_frames(folded: Path, n: int = 8) -> list[str]:
    own: Counter[str] = Counter()
    total = 0
    for line in folded.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        frames = stack.split(";")
        thread = frames[0] if frames[0].startswith("thread") or frames[0].startswith("process") else ""
        own[f"{frames[-1]} [{thread}]"] += int(count)
        total += int(count)
    return [f"{100 * c / total:5.1f}% {frame}" for frame, c in own.most_common(n)]


# Functions whose inclusive share of one scrape's samples is printed, per thread.
SPOTS = ("gather_snapshot", "committed_offsets_matching", "offsets_and_producers", "finish_group_snapshot", "first_readable_offsets",
         "probe_rounds", "log_starts", "group_samples", "metric_families", "iter_parts", "send_all", "_reused", "_encode", "encode",
         "_decode", "read_fetch", "_decode_fetch", "read_offset_fetch", "read_metadata", "read_list_offsets", "select")


def inclusive(folded: Path) -> dict[str, Counter]:
    """Per thread, the samples in all and those whose stack holds each of :data:`SPOTS`."""
    out: dict[str, Counter] = {}
    for line in folded.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        head, _, rest = stack.partition(";")
        thread = head.split(": ", 1)[-1]
        names = {frame.split(" (", 1)[0].rsplit(".", 1)[-1] for frame in rest.split(";")}
        c = out.setdefault(thread, Counter())
        c["(all)"] += int(count)
        for spot in SPOTS:
            if spot in names:
                c[spot] += int(count)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("hold", type=Path)
    parser.add_argument("base", type=Path)
    parser.add_argument("head", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scrape-timeout", default=None, help="the exporters' --scrape-timeout (default: theirs, 8 s)")
    parser.add_argument("--times", action="store_true", help="the brokers' request times around one more first scrape each")
    parser.add_argument("--py-spy", type=Path, metavar="DIR", help="record that scrape with py-spy (every thread)")
    parser.add_argument("--warm", type=int, default=0, metavar="N", help="N more warm scrapes of each exporter a round")
    parser.add_argument("--spy-warm", action="store_true", help="--times/--py-spy on a warm scrape (after one warm-up scrape)")
    args = parser.parse_args()
    hold = json.loads(args.hold.read_text())
    bootstrap = hold["bootstrap"]
    trees = {"base": args.base.resolve(), "head": args.head.resolve()}
    extra = ["--cache-ttl", "0s", *(["--scrape-timeout", args.scrape_timeout] if args.scrape_timeout else [])]
    seen: dict[tuple[str, str], list[float]] = {(t, k): [] for t in trees
                                                for k in ("first", "second", "first_cpu", "second_cpu", "rss")}
    failed = False
    for r in range(args.rounds):
        digests = {}
        for tree in (list(trees) if r % 2 == 0 else list(reversed(trees))):
            exporter, url = start_exporter(bootstrap, *extra, source=trees[tree])
            try:
                for kind in ("first", "second", *("second",) * args.warm):
                    took, body, cpu = scrape(url, exporter.pid)
                    seen[(tree, kind)].append(took)
                    seen[(tree, f"{kind}_cpu")].append(cpu)
                    if not complete(body):
                        failed = True
                        print(f"{tree} round {r} {kind} scrape incomplete ({took:.2f} s)", file=sys.stderr)
                seen[(tree, "rss")].append(peak_rss_mb(exporter.pid))
                digests[tree] = (untimed_digest(body), len(body))
            finally:
                exporter.terminate()
                exporter.wait(60)
            warm = seen[(tree, "second")][-1 - args.warm:]
            print(f"round {r} {tree}: first {seen[(tree, 'first')][-1]:.3f} s, warm {' '.join(f'{x:.3f}' for x in warm)} s "
                  f"(CPU {' '.join(f'{x:.2f}' for x in seen[(tree, 'second_cpu')][-1 - args.warm:])} s), "
                  f"peak RSS {seen[(tree, 'rss')][-1]:.1f} MB, body {len(body) / 1e6:.1f} MB", file=sys.stderr, flush=True)
            del body
        if digests["base"][0] != digests["head"][0]:
            failed = True
            print(f"round {r}: bodies differ (untimed): base {digests['base']} head {digests['head']}", file=sys.stderr)
    for tree in trees:
        line = []
        for kind in ("first", "second"):
            xs, cpu = seen[(tree, kind)], seen[(tree, f"{kind}_cpu")]
            if xs:
                line.append(f"{'warm' if kind == 'second' else kind} scrape (n={len(xs)}) median {statistics.median(xs):.3f} s "
                            f"min {min(xs):.3f} s, CPU median {statistics.median(cpu):.2f} s min {min(cpu):.2f} s")
        rss = seen[(tree, "rss")]
        if rss:
            line.append(f"peak RSS median {statistics.median(rss):.1f} MB max {max(rss):.1f} MB")
        print(f"{tree} ({args.rounds} rounds): " + "; ".join(line))
    if args.times or args.py_spy:
        for tree, source in trees.items():
            exporter, url = start_exporter(bootstrap, *extra, source=source)
            spy = None
            try:
                if args.spy_warm:
                    scrape(url)  # connections, imports and the probes' answers kept: what follows is a warm scrape
                before = broker_times(hold) if args.times else None
                if args.py_spy:
                    args.py_spy.mkdir(parents=True, exist_ok=True)
                    out = args.py_spy / f"scrape-{tree}.txt"
                    spy = subprocess.Popen(["py-spy", "record", "--pid", str(exporter.pid), "--threads", "--idle", "--rate", "100",
                                            "--format", "raw", "-o", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    time.sleep(2)
                took, body, cpu = scrape(url, exporter.pid)
                if spy is not None:
                    spy.send_signal(signal.SIGINT)
                    spy.wait(120)
                after = broker_times(hold) if args.times else None
            finally:
                exporter.terminate()
                exporter.wait(60)
            print(f"\n{tree}: one {'warm' if args.spy_warm else 'first'} scrape {took:.3f} s (CPU {cpu:.2f} s), complete {complete(body)}, "
                  f"scrape_duration {scalar(body, b'kafkatxn_scrape_duration_seconds')}")
            if before is not None and after is not None:
                per_api, busiest = delta(before, after)
                print(f"  brokers' own time (JMX, summed over brokers): busiest broker {busiest:.0f} ms in all")
                for api, d in sorted(per_api.items(), key=lambda kv: -kv[1].get("TotalTimeMs", 0)):
                    print(f"  {api:<22} {d['count']:>5.0f} requests  TotalTimeMs {d.get('TotalTimeMs', 0):>8.0f}  "
                          f"LocalTimeMs {d.get('LocalTimeMs', 0):>8.0f}  RequestQueueTimeMs {d.get('RequestQueueTimeMs', 0):>6.0f}")
            if spy is not None:
                print("  py-spy, every thread, top frames by own time (idle included):")
                for line in top_frames(out):
                    print(f"    {line}")
                for thread, c in inclusive(out).items():
                    if c["(all)"] >= 20:
                        print(f"  thread {thread}: {c['(all)']} samples (100 a second); inclusive: "
                              + ", ".join(f"{spot} {n}" for spot, n in c.most_common() if spot != "(all)"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
