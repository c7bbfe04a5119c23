"""The wire's round on the IO thread (``client.Wire._round``, ``wire/windows.py``): each connection keeps up
to kafka-python's most requests in flight and sends its next as one of its own answers lands.

No broker: a stand-in for kafka-python's connection manager whose sends return kafka-python futures the
test completes, and the round's coroutine stepped by hand as kafka-python's IO loop steps a task (it
resumes the task once the future it yielded is done)."""

from __future__ import annotations

import pytest
from kafka.future import Future

from kafkatxn.kafka import wire


class Ask:
    """A request the wire sends as it is (no codec of its own) and whose answer comes back undecoded."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self):
        return self.name


class Manager:
    """kafka-python's connection manager's shapes; each send's future left for the test to complete."""

    def __init__(self, connected=(), fail_at_once=(), raise_at_once=()):
        from kafka.net.manager import KafkaConnectionManager

        self.config = dict(KafkaConnectionManager.DEFAULT_CONFIG)  # max_in_flight_requests_per_connection: 5
        self.broker_version_data = None
        self.connected = set(connected)
        self.fail_at_once, self.raise_at_once = set(fail_at_once), set(raise_at_once)
        self.sent: list[tuple[int | None, Ask]] = []
        self.futures: dict[str, Future] = {}
        self.soon = []
        self.waits: list[int] = []

    def send(self, request, node_id=None, request_timeout_ms=None):
        if request.name in self.raise_at_once:
            raise KeyError(request.name)
        self.sent.append((node_id, request))
        fut = self.futures[request.name] = Future()
        if request.name in self.fail_at_once:
            fut.failure(ConnectionError(request.name))
        return fut

    def least_used_connections(self):
        from types import SimpleNamespace

        return [SimpleNamespace(node_id=n) for n in self.connected]

    def call_soon(self, fn, *args):
        self.soon.append((fn, args))

    async def wait_for(self, future, timeout_ms):
        self.waits.append(timeout_ms)
        if timeout_ms <= 1 and not future.is_done:
            from kafka.errors import KafkaTimeoutError

            raise KafkaTimeoutError(f"Timed out after {timeout_ms} ms")
        return await future

    def answer(self, name):
        self.futures[name].success(f"answer of {name}")

    def names_sent(self):
        return [request.name for _node, request in self.sent]


class Round:
    """A round's coroutine stepped as kafka-python's IO loop steps a task."""

    def __init__(self, manager, requests, deadline=1e12):
        self.counted = []
        self.coro = wire.Wire(manager)._round(requests, deadline, self.counted.append)()
        self.results = None
        self.step()

    def step(self):
        """Resumed (the future it waits on is done, or it starts): runs until it waits again or ends."""
        assert self.results is None
        try:
            waited = self.coro.send(None)
        except StopIteration as end:
            self.results = end.value
        else:
            assert isinstance(waited, Future) and not waited.is_done


def _requests(plan):
    return [(node, Ask(f"{node}{n}")) for node, many in plan for n in range(many)]


def test_a_sixth_request_goes_out_when_its_own_connections_first_answer_lands_not_after_every_brokers():
    manager = Manager(connected={1, 2})
    requests = _requests([(1, 6), (2, 5)])
    rnd = Round(manager, requests)
    assert manager.names_sent() == ["10", "11", "12", "13", "14", "20", "21", "22", "23", "24"]  # five each
    manager.answer("10")
    rnd.step()
    assert manager.names_sent()[-1] == "15"  # while broker 2's are all unanswered
    assert not any(manager.futures[f"2{n}"].is_done for n in range(5))
    for name in ["12", "11", "15", "14", "13", "24", "23", "22", "21", "20"]:  # in any order
        manager.answer(name)
    rnd.step()
    assert rnd.results == [f"answer of {request.name}" for _node, request in requests]  # in request order
    assert rnd.counted == ["Ask"] * 11 and len(manager.sent) == 11  # each counted and sent once


def test_a_connection_never_has_more_than_its_window_in_flight():
    manager = Manager(connected={1})
    requests = _requests([(1, 12)])
    rnd = Round(manager, requests)
    answered = 0
    while rnd.results is None:
        in_flight = len(manager.sent) - answered
        assert in_flight == min(5, 12 - answered)
        manager.answer(manager.sent[answered][1].name)
        answered += 1
        rnd.step()
    assert manager.names_sent() == [f"1{n}" for n in range(12)]
    assert rnd.results == [f"answer of 1{n}" for n in range(12)]


def test_sends_that_fail_at_once_are_their_requests_answers_and_free_their_slot():
    manager = Manager(connected={1}, fail_at_once={"10", "11"}, raise_at_once={"12"})
    rnd = Round(manager, _requests([(1, 8)]))
    assert manager.names_sent() == ["10", "11", "13", "14", "15", "16", "17"]  # the raised one took no slot
    for name in ["13", "14", "15", "16", "17"]:
        manager.answer(name)
    rnd.step()
    first, second, third, *rest = rnd.results
    assert isinstance(first, ConnectionError) and isinstance(second, ConnectionError) and isinstance(third, KeyError)
    assert rest == [f"answer of 1{n}" for n in range(3, 8)]
    assert len(rnd.counted) == 8


def test_brokers_not_connected_go_first_and_only_their_first_window_is_written_ahead():
    manager = Manager(connected={1})
    rnd = Round(manager, _requests([(1, 2), (2, 6)]))
    assert manager.names_sent() == ["20", "21", "22", "23", "24", "10", "11"]
    (fn, (ahead,)), = manager.soon
    assert [r.name for r in ahead] == ["20", "21", "22", "23", "24"]
    manager.answer("20")
    rnd.step()
    assert manager.names_sent()[-1] == "25" and len(manager.soon) == 1


def test_what_is_out_at_the_deadline_fails_with_the_waits_timeout_and_the_rest_still_goes_out():
    manager = Manager(connected={1, 2})
    requests = _requests([(1, 6), (2, 1)])
    rnd = Round(manager, requests, deadline=0.0)  # passed: each wait is its one millisecond
    assert rnd.results is not None
    from kafka.errors import KafkaTimeoutError

    assert all(isinstance(r, KafkaTimeoutError) for r in rnd.results)
    assert len({id(r) for r in rnd.results}) == len(requests)  # one exception each, none shared
    assert manager.names_sent() == ["10", "11", "12", "13", "14", "20", "15"] and len(rnd.counted) == 7


def test_answers_landing_after_the_wait_gave_up_at_the_deadline_are_not_read():
    from kafka.errors import KafkaTimeoutError

    manager = Manager(connected={1})
    rnd = Round(manager, _requests([(1, 3)]))
    manager.answer("10")
    rnd.step()
    with pytest.raises(StopIteration) as end:  # the IO loop's timer failing the wait at the deadline
        rnd.coro.throw(KafkaTimeoutError("Timed out after 50 ms"))
    results = end.value.value
    assert results[0] == "answer of 10" and all(isinstance(r, KafkaTimeoutError) for r in results[1:])
    manager.answer("11")  # too late: nothing waits for it, nothing breaks
    assert results[1] is not results[2] and isinstance(results[1], KafkaTimeoutError)


def test_on_kafka_pythons_own_io_loop_a_sixth_goes_out_before_another_brokers_answers_land():
    """The same on kafka-python's IO loop (its tasks, timers and futures), answers landing on its timers:
    broker 1 answers each request at once, broker 2 only after a second."""
    import time
    from types import SimpleNamespace

    from kafka.net.manager import KafkaConnectionManager
    from kafka.net.selector import NetworkSelector

    net = NetworkSelector()
    manager = KafkaConnectionManager(net)
    events = []

    def send(request, node_id=None, request_timeout_ms=None):
        events.append(f"sent {request.name}")
        fut = Future()

        def land():
            events.append(f"answered {request.name}")
            fut.success(f"answer of {request.name}")

        net.call_later(0.001 if node_id == 1 else 1.0, land)
        return fut

    manager.send = send
    manager.least_used_connections = lambda: [SimpleNamespace(node_id=1), SimpleNamespace(node_id=2)]
    requests = _requests([(1, 7), (2, 5)])
    try:
        results = net.run(wire.Wire(manager)._round(requests, time.monotonic() + 30, lambda name: None))
    finally:
        manager.close()
        net.close()
    assert results == [f"answer of {request.name}" for _node, request in requests]
    assert events.index("sent 16") < events.index("answered 20")  # broker 1's seventh, before broker 2 answered
