"""A read_committed group blocked behind an open transaction, on the shared fake cluster: what the
diagnose unit tests and the group-lag metric tests start from."""

from __future__ import annotations

import time

from kafkatxn.model import Partial, ProducerState, TopicPartition, TransactionDescription
from tests.support.fake_kafka import FakeCluster, KafkaModel

ORDERS = TopicPartition("orders", 0)
AUDIT = TopicPartition("audit", 0)


def now_ms() -> int:
    return int(time.time() * 1000)


class PhantomCluster(FakeCluster):
    """The fake, where some offsets hold only markers or aborted records (the probe skips them)."""

    def __init__(self, model: KafkaModel, unreadable: dict[TopicPartition, set[int]] | None = None):
        super().__init__(model)
        self.unreadable = unreadable or {}

    def first_readable_offsets(self, starts):
        self.calls.append(("first_readable_offsets", dict(starts)))
        out = {}
        for tp, start in starts.items():
            lso = self.model.offsets[tp][0]
            out[tp] = next((o for o in range(start, lso) if o not in self.unreadable.get(tp, set())), None)
        return Partial(out)


def blocked_model(*, tid="billing-tx", idle_ms=2_000, started_ago_ms=30_000, timeout_ms=600_000, tracked=True, coordinator=1):
    """orders-0: 3 committed records, then an open transaction from offset 3 (HW 7); group billing at 3.
    audit-0: committed and aborted transactions, group reports at the end of the records but before
    the markers (HW 10, LSO 10, committed 7; offsets 7..9 are markers/aborted)."""
    model = KafkaModel(brokers=(1, 2))
    model.add_transaction_log([1, 2])  # coordinators: every log partition has a leader that answers
    model.add_partition("orders", 0, leader=1, lso=3, hw=7)
    model.add_partition("audit", 0, leader=1, lso=10, hw=10)
    now = now_ms()
    model.producers[ORDERS] = [ProducerState(5000, 3, 3, now - idle_ms, -1, 3)]
    if tracked:
        model.transactions[tid] = TransactionDescription(
            tid, coordinator, "Ongoing", 5000, 3, timeout_ms, now - started_ago_ms, frozenset({ORDERS})
        )
    model.groups = {"billing": {ORDERS: 3}, "reports": {AUDIT: 7}}
    return model, PhantomCluster(model, {AUDIT: {7, 8, 9}})
