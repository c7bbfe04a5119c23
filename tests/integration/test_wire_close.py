"""Closing the wire on a real broker: every connection is shut on kafka-python's IO thread, the one
that reads and writes it, never on the thread that asked to close (the exporter's main thread at
SIGTERM, while the IO thread still runs its loop over the same sockets)."""

from __future__ import annotations

import threading

import pytest
from kafka.net import transport

from kafkatxn.config import ConnectionConfig
from kafkatxn.kafka import Cluster

pytestmark = pytest.mark.integration


def test_closing_shuts_every_connection_on_the_io_thread_and_stops_it(kafka, monkeypatch):
    closed_on: list[str] = []
    original = transport.KafkaTCPTransport._close

    def recording(self, *args, **kwargs):
        if self._sock is not None:  # the call that shuts the socket (the method is idempotent)
            closed_on.append(threading.current_thread().name)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(transport.KafkaTCPTransport, "_close", recording)
    cluster = Cluster(ConnectionConfig(bootstrap_servers=kafka.bootstrap_servers, timeout_ms=20_000))
    cluster.metadata()
    cluster.list_transactions()  # a request beside the bootstrap's: connections in use at close
    before = {t.name for t in threading.enumerate()}
    assert any(name.startswith("kafka-io-") for name in before), before

    cluster.close()

    assert closed_on, "no connection was open to close"
    assert all(name.startswith("kafka-io-") for name in closed_on), closed_on
    assert not any(t.name.startswith("kafka-io-") and t.is_alive() for t in threading.enumerate())
