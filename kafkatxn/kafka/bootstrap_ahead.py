"""A bootstrap begun before the facade is imported: the wire and kafka-python's network layer alone.

A command's first request (ApiVersions, then Metadata, to a bootstrap server) needs the connection
manager and the protocol of those two requests; the facade, its API modules and the command's library
(the fact layer, the verdicts, the renderers) read the answers. Begun here, as soon as the command has
checked its options and resolved its configuration (a usage or configuration error still sends
nothing), the bootstrap runs on the IO thread while the rest imports: ``CommandContext.connect_ahead``
begins it and hands it to the :class:`~kafkatxn.kafka.Cluster` it makes next;
``Session.connect_ahead`` begins it the same way when the facade is already there."""

from __future__ import annotations

import time
from typing import Any, Callable, NamedTuple

from kafkatxn import collection
from kafkatxn.config import ConnectionConfig, check_settings_as_librdkafka
from kafkatxn.kafka.wire import Wire


class BootstrapAhead(NamedTuple):
    """A bootstrap begun (:func:`begin`): the deadline it began under (the run's), the wire (None if it
    could not begin: closed to give up) and its end, which waits for it (``Wire.begin_bootstrap``) or
    raises what beginning it met, where the wire is first used, as it would have been raised there."""

    deadline: float
    wire: Any  # what closes the wire, unused, when the command ends before it is used (.close())
    end: Callable[[], Any]


def begin(
    config: ConnectionConfig, deadline: float | None = None, remaining_s: Callable[[], float] | None = None,
    every_broker: bool = False,
) -> BootstrapAhead:
    """Begin the bootstrap on the IO thread and return at once. ``deadline`` (monotonic): the run's, by
    default ``config.timeout_s`` from now; ``remaining_s``: the time left of it (the session's, which
    raises its own error once it has passed); ``every_broker``: the other brokers' connections begun
    as the metadata arrives (``Wire.begin_bootstrap``)."""
    if deadline is None:
        deadline = time.monotonic() + config.timeout_s
    try:
        settings = config.kafka_python()
        # What librdkafka would refuse as a client is built, refused before anything is sent.
        check_settings_as_librdkafka(config.settings)
        left_s = remaining_s() if remaining_s is not None else deadline - time.monotonic()
        wire, end = Wire.begin_bootstrap(settings, int(left_s * 1000), settings["request_timeout_ms"], every_broker)
    except Exception as exc:  # noqa: BLE001 - raised as it was, where the wire is first used

        def end(exc: Exception = exc) -> Any:
            raise exc

        return BootstrapAhead(deadline, None, end)
    # The metadata the IO thread reads meanwhile (a tuple per partition: 30,000 and more) lives as long as
    # the run, as do the modules the command imports meanwhile: no collection walks them as they are made
    # (one did, on the IO thread, in a check: ~35 M instructions). Collection resumes as the bootstrap ends.
    collection.pause()
    pausing = [True]

    def resume() -> None:
        if pausing:
            pausing.clear()
            collection.resume()

    def ended() -> Any:
        try:
            return end()
        finally:
            resume()

    return BootstrapAhead(deadline, _Closing(wire, resume), ended)


class _Closing:
    """A begun bootstrap's wire as its holder closes it unused: collection resumes too."""

    def __init__(self, wire: Wire, resume: Callable[[], None]):
        self.wire, self._resume = wire, resume

    def close(self) -> None:
        try:
            self.wire.close()
        finally:
            self._resume()
