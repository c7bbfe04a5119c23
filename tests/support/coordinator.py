"""Transaction-log histories for the audit's tests: ``Coordinator`` writes the records Kafka's
transaction coordinator writes, with the epoch rules of Kafka 3.x/4.x, and the behaviours below
(fencing, restarts, taking turns) write through it. The rules' unit tests (tests/unit/test_audit_rules.py)
and the Spark equivalence test (tests/integration/test_audit_spark_equivalence.py) share them."""

from __future__ import annotations

from kafkatxn.audit.rules import HistoryRecord

S = 1000
MIN = 60 * S


class Coordinator:
    """Writes coordinator records for transactional ids, with the epoch rules of Kafka 3.x/4.x."""

    def __init__(self, tv: int = 0, partitions: int = 3, broker_tv: int | None = None):
        self.tv = tv  # the client's transaction version
        self.broker_tv = tv if broker_tv is None else broker_tv  # what the coordinator writes on its own aborts
        self.n = partitions
        self.records: list[HistoryRecord] = []
        self.ids: dict[str, dict] = {}
        self.offsets = [0] * partitions
        self.next_pid = 1000

    def _write(self, tid: str, state: str, t: int, tombstone: bool = False, tv: int | None = None) -> None:
        m = self.ids.get(tid)
        part = sum(tid.encode()) % self.n
        off = self.offsets[part]
        self.offsets[part] += 1
        if tombstone:
            self.records.append(HistoryRecord(tid, -1, -1, "", (), -1, -1, -1, 0, -1, -1, -1, -1, True, part, off, t))
            return
        parts = tuple(sorted(m["partitions"])) if state in ("Ongoing", "PrepareCommit", "PrepareAbort") else ()
        self.records.append(
            HistoryRecord(
                tid, m["pid"], m["epoch"], state, parts, m["timeout"], m["start"], t,
                (self.tv if tv is None else tv) if state != "Empty" else 0, -1, -1, -1, 1, False, part, off, t,
            )
        )

    def init(self, tid: str, t: int, timeout_ms: int = MIN) -> None:
        m = self.ids.get(tid)
        if m is None:
            m = self.ids[tid] = {"pid": self.next_pid, "epoch": -1, "state": None, "partitions": set(), "start": -1, "timeout": timeout_ms}
            self.next_pid += 1
        if m["state"] == "Ongoing":  # InitProducerId while a transaction is open: fence and abort it
            self._end(tid, "Abort", t, client=False)
        m["epoch"] += 1
        m.update(state="Empty", partitions=set(), start=-1)
        self._write(tid, "Empty", t)

    def add(self, tid: str, t: int, *partitions: str) -> None:
        m = self.ids[tid]
        if m["state"] != "Ongoing":
            m["start"] = t
        m["state"] = "Ongoing"
        m["partitions"] |= set(partitions or ("out-0",))
        self._write(tid, "Ongoing", t)

    def _end(self, tid: str, what: str, t: int, client: bool = True) -> None:
        m = self.ids[tid]
        if self.tv >= 2 or not client:
            m["epoch"] += 1  # KIP-890: every EndTxn bumps the epoch; a coordinator abort always does
        tv = self.tv if client else self.broker_tv
        self._write(tid, f"Prepare{what}", t, tv=tv)
        self._write(tid, f"Complete{what}", t + 5, tv=tv)
        m.update(state=f"Complete{what}", partitions=set())

    def commit(self, tid: str, t: int) -> None:
        self._end(tid, "Commit", t)

    def abort(self, tid: str, t: int) -> None:
        self._end(tid, "Abort", t)

    def time_out(self, tid: str, t: int) -> None:
        """The coordinator aborts an expired transaction: fence the epoch, then abort."""
        self._end(tid, "Abort", t, client=False)

    def expire(self, tid: str, t: int) -> None:
        self._write(tid, "", t, tombstone=True)
        del self.ids[tid]

    def txn(self, tid: str, t: int, duration: int = 100) -> None:
        self.add(tid, t)
        self.commit(tid, t + duration)


def shared_storm(c: Coordinator, tid: str, t0: int, fences: int) -> None:
    """Two live instances re-initialising the id while the other has a transaction open."""
    c.init(tid, t0)
    c.add(tid, t0 + 10)
    for i in range(fences):
        t = t0 + (i + 1) * 2 * S
        c.init(tid, t)  # the other instance starts, fencing the open transaction
        c.add(tid, t + 100)
    c.commit(tid, t0 + (fences + 1) * 2 * S)


def well_behaved(c: Coordinator, tid: str, t0: int, runs: int, txns: int, crash_mid_txn: bool = False) -> None:
    t = t0
    for run in range(runs):
        c.init(tid, t)
        for _ in range(txns):
            t += 1 * S
            c.txn(tid, t)
        if crash_mid_txn and run == 0:
            t += S
            c.add(tid, t)  # the instance dies with this transaction open; the restart fences it
        t += 30 * S


def taking_turns(c: Coordinator, tid: str, t0: int, turns: int, gap: int = 600) -> None:
    """Two live instances with one id, each initialising it, committing and going idle: nothing open to fence."""
    for i in range(turns):
        t = t0 + i * gap
        c.init(tid, t)
        c.txn(tid, t + 100)
