"""What the wire's readers made of an answer's pieces, kept by their bytes for the next answer.

The exporter asks the same questions every scrape, and on a quiet cluster most of each answer is what
it was, byte for byte: a topic's producers at its leader, a group's committed offsets. A reader's
result is a function of those bytes alone (and the name read with them), so the same bytes again are
the same result again: named tuples of ints, strings and tuples, immutable, shared. Kept as
:data:`~kafkatxn.kafka.wire.bodies._METADATA_TOPICS` keeps Metadata's topics, but over the several
answers of a pass (one per leader or coordinator): the pieces used last are kept, those unused longest
let go past a bound on the partitions they hold.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Hashable


class BlockMemo:
    """Results by their bytes (and name), least recently used let go past ``limit`` partitions
    (each piece put with its count of partitions or offsets)."""

    def __init__(self, limit: int):
        self.limit = limit
        self._kept: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()  # the IO thread reads answers; a test or another wire may too

    def get(self, key: Hashable) -> Any:
        """The result kept for ``key`` (None if none), kept now as the one used last."""
        with self._lock:
            found = self._kept.get(key)
            if found is None:
                return None
            self._kept.move_to_end(key)
            return found[0]

    def put(self, key: Hashable, value: Any, size: int) -> None:
        if size > self.limit:
            return
        with self._lock:
            old = self._kept.pop(key, None)
            if old is not None:
                self._held -= old[1]
            self._kept[key] = (value, size)
            self._held += size
            while self._held > self.limit:
                _key, (_value, dropped) = self._kept.popitem(last=False)
                self._held -= dropped

    @property
    def held(self) -> int:
        """The partitions (or offsets) of the results kept."""
        return self._held

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
            self._held = 0
