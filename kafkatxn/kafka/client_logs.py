"""librdkafka's log lines go to the Python logger ``kafkatxn.librdkafka``, never straight to stderr.

Left to itself, librdkafka writes its lines to stderr (``%6|…|BGQUEUE|… Purging 1 unserved events``),
past kafkatxn's one-line errors. Routed, a line reaches a terminal only where logging is set up: the
CLI's --debug (its handler redacts), or the logging of the application a client runs in (a Spark job).
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

LOGGER = "kafkatxn.librdkafka"
# A consumer that only reads what it is assigned: settings that must hold whatever the user's
# properties say (no group joined, nothing committed; the log reader's and the ledger reader's).
ASSIGN_ONLY_CONSUMER = {
    "group.id": "kafkatxn-audit-reader",  # librdkafka requires one; assign() never joins it
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": True,
    "isolation.level": "read_uncommitted",
    "auto.offset.reset": "earliest",
}
# librdkafka's syslog level for what --debug shows: informational and more severe (not its debug contexts).
DEBUG_LOG_LEVEL = 6


def routed(conf: Mapping[str, Any]) -> dict[str, Any]:
    """``conf`` for a confluent-kafka client whose log lines go to :data:`LOGGER`; at --debug (the
    logger enabled for INFO) librdkafka's informational lines too. A logger the caller gave is kept."""
    if "logger" in conf:
        return dict(conf)
    logger = logging.getLogger(LOGGER)
    if not logger.handlers:
        # Where logging is not set up, Python's last resort would print warnings to stderr.
        logger.addHandler(logging.NullHandler())
    out = dict(conf)
    out["logger"] = logger
    if logger.isEnabledFor(logging.INFO):
        out["log_level"] = max(int(out.get("log_level", 0)), DEBUG_LOG_LEVEL)
    return out
