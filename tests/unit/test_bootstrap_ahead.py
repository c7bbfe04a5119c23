"""A bootstrap begun before the facade (kafkatxn.kafka.bootstrap_ahead): what its beginning met is raised
where the wire is first used, and no collection walks what is made while it is in flight."""

from __future__ import annotations

import gc

import pytest

from kafkatxn.config import resolve
from kafkatxn.kafka import bootstrap_ahead


class FakeWire:
    closed = False

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def begun(monkeypatch):
    wire = FakeWire()
    monkeypatch.setattr(bootstrap_ahead.Wire, "begin_bootstrap", lambda settings, budget_ms, timeout_ms, every_broker=False: (wire, lambda: "answered"))
    gc.enable()
    yield wire
    gc.enable()


@pytest.mark.parametrize("ending", ["end", "close"])
def test_collection_waits_while_the_bootstrap_is_in_flight_and_resumes_as_it_ends(begun, ending):
    ahead = bootstrap_ahead.begin(resolve(bootstrap_servers="127.0.0.1:1"))
    assert not gc.isenabled()  # the metadata read on the IO thread, the modules imported meanwhile: long-lived
    if ending == "end":
        assert ahead.end() == "answered"
    else:
        ahead.wire.close()
        assert begun.closed
    assert gc.isenabled()
    ahead.wire.close()  # once only
    assert gc.isenabled()


def test_what_beginning_met_is_raised_where_the_wire_is_first_used(monkeypatch):
    def refuse(settings, budget_ms, timeout_ms, every_broker=False):
        raise OSError("no socket")

    monkeypatch.setattr(bootstrap_ahead.Wire, "begin_bootstrap", refuse)
    ahead = bootstrap_ahead.begin(resolve(bootstrap_servers="127.0.0.1:1"))
    assert ahead.wire is None and gc.isenabled()
    with pytest.raises(OSError, match="no socket"):
        ahead.end()


def test_every_broker_is_passed_to_the_wire_as_the_command_asked(monkeypatch):
    asked: list[bool] = []

    def begin(settings, budget_ms, timeout_ms, every_broker=False):
        asked.append(every_broker)
        return FakeWire(), lambda: "answered"

    monkeypatch.setattr(bootstrap_ahead.Wire, "begin_bootstrap", begin)
    for every_broker in (True, False):
        bootstrap_ahead.begin(resolve(bootstrap_servers="127.0.0.1:1"), every_broker=every_broker).end()
    assert asked == [True, False]
