"""How ``--debug`` names each request a command sends (kafkatxn.kafka.session.request_label), as the
request-count test reads it: the API, the isolation level where it has one, and the broker."""

from __future__ import annotations

import re

# A ListOffsets by timestamp (where a log read starts: diagnose's history) is its own kind: the
# isolation level changes nothing in it, and it is asked once per broker too.
# A request asked again for a reason says it too (``gather.PROBE_BEFORE``...): counted apart.
LOGGED = re.compile(r"request (\w+)(?: \(([a-z_ ]+)\))? to broker (\d+)")
