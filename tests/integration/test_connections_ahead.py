"""A command that will ask every broker has their connections begun as the bootstrap's Metadata is
read (``Wire.begin_bootstrap(every_broker=True)``): open before its first round, with no request of
its own sent to open them, and no more requests than before."""

from __future__ import annotations

import time

import pytest

from kafkatxn.config import ConnectionConfig
from kafkatxn.kafka import Cluster

pytestmark = pytest.mark.integration


def _open_to(cluster: Cluster, brokers: list[int], within_s: float) -> set[int]:
    """The brokers of ``brokers`` with an open connection (their ApiVersions answered), waited for up to ``within_s``."""
    wire = cluster.wire
    deadline = time.monotonic() + within_s
    while True:
        opened = {b for b in brokers if wire.known_api_versions(b) is not None}
        if opened == set(brokers) or time.monotonic() > deadline:
            return opened
        time.sleep(0.02)


@pytest.mark.parametrize("every_broker", [True, False])
def test_every_brokers_connection_is_begun_with_the_bootstrap_only_when_asked(kafka_cluster3, every_broker):
    with Cluster(ConnectionConfig(bootstrap_servers=kafka_cluster3.bootstrap_servers, timeout_ms=20_000)) as cluster:
        cluster.connect_ahead(every_broker=every_broker)
        md = cluster.metadata()
        brokers = sorted(b.id for b in md.brokers)
        assert len(brokers) == 3
        opened = _open_to(cluster, brokers, 5.0 if every_broker else 0.5)
        assert dict(cluster.requests) == {"Metadata": 1}  # opening them sent nothing of the command's
        if every_broker:
            assert opened == set(brokers)
        else:  # the bootstrap's own connection, kept as its broker's: no other
            assert opened == ({md.answered_by} if md.answered_by is not None else set())
        # A round to every broker goes on those connections and is answered as ever.
        listed, _support = cluster.list_transactions()
        assert not listed.missing
        assert cluster.requests["ListTransactions"] == 3

