"""A round trip on the wire's IO thread with other work on the calling thread meanwhile: what a
command does next that needs no answer (importing the modules that read its later answers) takes
the time the brokers take, instead of following it."""

from __future__ import annotations

import logging
from typing import Any, Callable

log = logging.getLogger("kafkatxn.wire")


def run_meanwhile(manager: Any, coroutine: Callable[[], Any], while_waiting: Callable[[], None] | None) -> Any:
    """``coroutine`` run on the IO thread (kafka-python's ``run``); with ``while_waiting``, that runs on
    the calling thread meanwhile (work the command does next that needs no answer: its time overlaps
    the brokers' instead of following it), the coroutine having been scheduled first (``call_soon``,
    thread-safe). What ``while_waiting`` raises is logged and dropped: the round's answers are what count."""
    if while_waiting is None:
        return manager.run(coroutine)
    started = manager.call_soon(coroutine)
    try:
        while_waiting()
    except Exception:  # noqa: BLE001 - only a head start: whatever it did is done again when needed
        log.debug("work while waiting failed", exc_info=True)

    async def answered() -> Any:
        return await started

    return manager.run(answered)
