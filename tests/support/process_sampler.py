"""ArgvSampler: what every process's argv and our processes' open files hold while commands run
(tests/integration/test_secrets.py: no secret in any argv, nor in a file written and deleted)."""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from pathlib import Path


class ArgvSampler:
    """Reads the argv (/proc/PID/cmdline) of every process while a command runs.

    Where the kernel's process events (the netlink proc connector; root) are at hand, a process is read
    as it forks and as it execs, and every process once more every half second: far more of the
    processes living a millisecond or less are seen than by reading every process over and over with
    no pause, as is done without them (and costs a core).

    With ``ours`` (a path only the runs' environment names, e.g. their TMPDIR's parent), it also reads
    the open files of every process carrying it in /proc/PID/environ (kafkatxn, and what it starts:
    Spark's JVM and Python workers), through /proc/PID/fd, over and over: a regular file written
    while sampling that holds a needle, deleted or not, is key material on disk. A memfd (``/memfd:…``) is
    memory: counted, not read. Files under ``skip`` (the user's own inputs) are not read.
    """

    FULL_SCAN_PAUSE_S = 0.5  # with process events: between two reads of every process

    def __init__(self, *needles: bytes, ours: Path | None = None, skip: tuple[Path, ...] = ()) -> None:
        self.needles = needles
        self.hits: dict[int, str] = {}  # pid -> program (the secret itself is not repeated)
        self.rounds = 0
        self.execs_seen = 0
        self.kafkatxn_pids: set[int] = set()  # processes seen running kafkatxn: the sampling covered them
        self.ours = f"={ours}/".encode() if ours is not None else None
        self.skip = tuple(f"{p}/" for p in skip)
        self.our_pids: set[int] = set()
        self._live_ours: set[int] = set()
        self.cpu_s = 0.0  # the sampling's own CPU time
        self.memfds: set[tuple[int, str]] = set()
        self.files_read: set[tuple[int, str, int]] = set()  # (pid, target, size): read once per size
        self.open_files_with_needles: dict[str, int] = {}  # target -> pid
        self._stop = threading.Event()
        self._events = _process_events()
        self._threads = [threading.Thread(target=self._run, daemon=True)]
        if self._events is not None:
            self._threads.append(threading.Thread(target=self._follow_events, daemon=True))

    def __enter__(self) -> "ArgvSampler":
        self.since = time.time() - 1
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()
        if self._events is not None:
            self._events.close()

    def _run(self) -> None:
        try:
            self._sample()
        finally:
            self.cpu_s += time.thread_time()

    def _sample(self) -> None:
        next_full_scan, full_scan_s = 0.0, 0.0
        while not self._stop.is_set():
            if self._events is None or time.monotonic() >= next_full_scan:
                started = time.monotonic()
                for entry in os.scandir("/proc"):
                    if entry.name.isdigit():
                        self._read(int(entry.name), open_files=self._events is None)
                full_scan_s = time.monotonic() - started
                next_full_scan = time.monotonic() + self.FULL_SCAN_PAUSE_S
            if self._events is not None:
                for pid in list(self._live_ours):
                    if not self._open_files(pid):
                        self._live_ours.discard(pid)
                # As long as reading every process's argv took: our open files are read as often as when
                # each round read every argv too, the CPU that took spared.
                self._stop.wait(full_scan_s if self.ours is not None else self.FULL_SCAN_PAUSE_S)
            self.rounds += 1

    def _follow_events(self) -> None:
        try:
            self._read_events()
        finally:
            self.cpu_s += time.thread_time()

    def _read_events(self) -> None:
        assert self._events is not None
        while not self._stop.is_set():
            try:
                data = self._events.recv(1 << 16)
            except socket.timeout:
                continue
            except OSError:  # ENOBUFS: events were dropped; every process is read again at once
                for entry in os.scandir("/proc"):
                    if entry.name.isdigit():
                        self._read(int(entry.name), open_files=False)
                continue
            for pid in _new_programs(data):
                self.execs_seen += 1
                self._read(pid, open_files=False)

    def _read(self, pid: int, open_files: bool) -> None:
        """The process's argv; whether it is one of ours (then its open files are read, here or by _run)."""
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            return
        if b"-m\0kafkatxn\0" in cmdline:
            self.kafkatxn_pids.add(pid)
        if any(needle in cmdline for needle in self.needles):
            program = cmdline.split(b"\0")[0].decode(errors="replace")
            self.hits.setdefault(pid, program)
        if self.ours is None:
            return
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if self.ours not in f.read():
                    return
        except OSError:
            return
        self.our_pids.add(pid)
        if open_files:
            self._open_files(pid)
        else:
            self._live_ours.add(pid)

    def _open_files(self, pid: int) -> bool:
        """False once the process is gone."""
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            return False
        for fd in fds:
            path = f"/proc/{pid}/fd/{fd}"
            try:
                target = os.readlink(path)
                if target.startswith("/memfd:"):
                    self.memfds.add((pid, target))
                    continue
                if not target.startswith("/") or target.startswith(("/proc/", "/dev/", "/sys/")) or target.startswith(self.skip):
                    continue  # sockets, pipes, anon inodes, devices; the user's own files
                stat = os.stat(path)
                size = stat.st_size
                if (not os.path.isfile(path) or stat.st_mtime < self.since or size > 20_000_000
                        or (pid, target, size) in self.files_read):
                    continue  # not written while sampling (programs, libraries, jars), or read already
                self.files_read.add((pid, target, size))
                with open(path, "rb") as f:
                    data = f.read()
            except OSError:
                continue
            if any(needle in data for needle in self.needles):
                self.open_files_with_needles.setdefault(target, pid)
        return True

    def saw(self, pid: int) -> bool:
        return pid in self.kafkatxn_pids

    def leaks(self, what: str) -> list[str]:
        """The sampled argv and open files that held a needle, in words."""
        return [f"{what} in the argv of pid {pid} ({program})" for pid, program in self.hits.items()] + [
            f"{what} in {target}, open in pid {pid}" for target, pid in self.open_files_with_needles.items()
        ]

    @property
    def argv_reads(self) -> tuple[int, str]:
        """How often every process's argv was read, and what the number counts."""
        if self._events is not None:
            return self.execs_seen, "forks and execs"
        return self.rounds, "rounds"

    def coverage(self) -> str:
        reads, unit = self.argv_reads
        argv = f"argv of every process read at each of {reads} {unit}"
        return (f"{argv}; {len(self.our_pids)} processes' open files sampled {self.rounds} times, "
                f"{len(self.files_read)} read, {len(self.memfds)} memfds; {self.cpu_s:.1f} CPU-s")


# The kernel's process events (linux/cn_proc.h), read from a netlink connector socket.
_NETLINK_CONNECTOR, _CN_IDX_PROC, _CN_VAL_PROC = 11, 1, 1
_PROC_CN_MCAST_LISTEN = 1
_PROC_EVENT_FORK, _PROC_EVENT_EXEC = 1, 2


def _process_events() -> socket.socket | None:
    """A socket receiving every fork and exec on the machine, or None where that is not allowed (not root)."""
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_CONNECTOR)
    except (OSError, AttributeError):
        return None
    try:
        try:
            sock.setsockopt(socket.SOL_SOCKET, 33, 1 << 24)  # SO_RCVBUFFORCE: JVMs start threads by the hundred
        except OSError:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 24)
        sock.bind((0, _CN_IDX_PROC))
        op = struct.pack("I", _PROC_CN_MCAST_LISTEN)
        message = struct.pack("IIIIHH", _CN_IDX_PROC, _CN_VAL_PROC, 0, 0, len(op), 0) + op
        sock.send(struct.pack("IHHII", 16 + len(message), 3, 0, 0, 0) + message)  # NLMSG_DONE
        sock.settimeout(0.2)
        return sock
    except OSError:
        sock.close()
        return None


def _new_programs(data: bytes) -> list[int]:
    """The pids of the new processes (forks, not threads) and of the processes that exec'd, in `data`."""
    pids, offset = [], 0
    while offset + 52 <= len(data):
        length = struct.unpack_from("I", data, offset)[0]
        what = struct.unpack_from("I", data, offset + 36)[0]  # after nlmsghdr (16) and cn_msg (20)
        if what == _PROC_EVENT_FORK:
            child_pid, child_tgid = struct.unpack_from("II", data, offset + 60)
            if child_pid == child_tgid:
                pids.append(child_tgid)
        elif what == _PROC_EVENT_EXEC:
            pids.append(struct.unpack_from("I", data, offset + 56)[0])  # process_tgid
        offset += max(length + (-length % 4), 52)
    return pids
