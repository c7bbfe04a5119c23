"""How ``--debug`` names each request a command sends (kafkatxn.kafka.session.request_label), as the
request-count test reads it: the API, the isolation level where it has one, and the broker."""

from __future__ import annotations

import re

# A ListOffsets by timestamp (where a log read starts: diagnose's history) is its own kind: the
# isolation level changes nothing in it, and it is asked once per broker too.
LOGGED = re.compile(r"request (\w+)(?: \((read_committed|read_uncommitted|by time)\))? to broker (\d+)")
