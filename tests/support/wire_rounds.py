"""The rounds the fake wire is sent, recorded: each round as the ``(label, node)`` of each request it
carried (``request_label``, as ``--debug`` names them). For the tests that hold a command's requests
to the same ones in fewer round trips (test_rounds_ahead, test_group_rounds_ahead)."""

from __future__ import annotations

import uuid

from kafkatxn.kafka.session import request_label
from tests.support.fake_kafka import FakeWire


def record_rounds(monkeypatch) -> list[list[tuple[str, int | None]]]:
    """Each round sent from now on, in order. The probes' random ids are fixed: the visibility probe's
    coordinator decides whether it shares a request, in both runs of a comparison alike."""
    monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(int=7))
    seen: list[list[tuple[str, int | None]]] = []
    send_all = FakeWire.send_all

    def recorded(self, requests, deadline, count=lambda name: None):
        seen.append([(request_label(r), node) for node, r in requests])
        return send_all(self, requests, deadline, count)

    monkeypatch.setattr(FakeWire, "send_all", recorded)
    return seen
