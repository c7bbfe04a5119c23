"""A logger for librdkafka clients that says nothing: fenced producers log FATAL errors that a test expects."""

from __future__ import annotations

import logging
import uuid


def quiet_logger() -> logging.Logger:
    log = logging.getLogger(f"tests.quiet.{uuid.uuid4().hex}")
    log.addHandler(logging.NullHandler())
    log.propagate = False
    return log
