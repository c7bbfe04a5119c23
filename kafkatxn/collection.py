"""Cyclic garbage collection paused while a large pass is in flight, with one count for the whole
process.

A command's run (:meth:`kafkatxn.kafka.session.Session.one_run`) or an exporter scrape at tens of
thousands of partitions makes hundreds of thousands of objects that live until it ends, none of
them cyclic; Python's collector, triggered by allocation counts, would walk them again and again
while they are made. Runs and scrapes overlap (a scrape's gather is a run; scrapes overlap each
other), so they share this one count: collection resumes when the last of them ends, and only if
it was on when the first began.
"""

from __future__ import annotations

import contextlib
import gc
import threading

_lock = threading.Lock()
_in_flight = 0  # passes that paused collection and have not ended
_was_enabled = True  # collection was on when the first of them began


def pause() -> None:
    """One more pass in flight: collection waits until every one has ended (:func:`resume`)."""
    global _in_flight, _was_enabled
    with _lock:
        _in_flight += 1
        if _in_flight == 1:
            _was_enabled = gc.isenabled()
            gc.disable()


def resume() -> None:
    """One pass ended; the last one turns collection back on, if it was on before the first."""
    global _in_flight
    with _lock:
        _in_flight -= 1
        if _in_flight == 0 and _was_enabled:
            gc.enable()


_starting = False  # a command's start (cli.app.main) paused collection until its heap settles


def pause_while_starting() -> None:
    """A command is starting (``kafkatxn.cli.app.main``): its modules import, its parameters are
    built and parsed. All of it lives until the process ends, none of it cyclic garbage; the
    collector, triggered by allocation counts, would walk it 30-40 times meanwhile (about 5 % of the
    imports' time). Collection resumes at :func:`started`: when the heap is frozen
    (``cli.common.settle_heap``) or, for a command line that runs no command, when ``main`` ends."""
    global _starting
    if not _starting:
        _starting = True
        pause()


def started() -> None:
    """The start is over (a no-op if :func:`pause_while_starting` did not pause, or once resumed)."""
    global _starting
    if _starting:
        _starting = False
        resume()



@contextlib.contextmanager
def one_shot():
    """A one-shot command's pass and its output (``lso``, ``hanging``, ``check``; not ``--watch``, not
    the exporter): collection waits while they run, as a run's does, and when they end what they
    made (30,000 partitions' offsets and TopicPartitions, the snapshot, the rows) is frozen out of
    the collector's sight (``gc.freeze``: it lives until the process ends) before collection
    resumes. Resumed as a run ends, the first collection walked all of it once for nothing: about
    20 ms at 30,000 partitions on the held cluster."""
    pause()
    try:
        yield
    finally:
        gc.freeze()
        resume()
