"""What the wire's readers made of an answer's pieces, kept by their bytes for the next answer.

The exporter asks the same questions every scrape, and on a quiet cluster most of each answer is what
it was, byte for byte: a topic's producers at its leader, a group's committed offsets. A reader's
result is a function of those bytes alone (and the name read with them), so the same bytes again are
the same result again: named tuples of ints, strings and tuples, immutable, shared. Kept as
:data:`~kafkatxn.kafka.wire.bodies._METADATA_TOPICS` keeps Metadata's topics, but over the several
answers of a pass (one per leader or coordinator): the pieces used lately are kept, those unused for a
generation let go, within a bound on the partitions they hold.
"""

from __future__ import annotations

import threading
from typing import Any, Hashable


class BlockMemo:
    """Results by their bytes (and name), each put with its count of partitions or offsets, in two
    generations of at most half of ``limit`` each: what is used or put goes to the new one; when it
    is full it becomes the old one, and what was not used since the one before is let go. A pass's
    pieces should fit in a generation: they are then all found again at the next pass. A look-up
    that finds its result in the new generation (every one of a quiet cluster's scrapes after the
    first) is one dict look-up: no lock, no reordering (7,000 a scrape at 5,000 groups)."""

    def __init__(self, limit: int):
        self.limit = limit
        self._new: dict[Hashable, tuple[Any, int]] = {}
        self._old: dict[Hashable, tuple[Any, int]] = {}
        self._new_held = 0
        self._lock = threading.Lock()  # the IO thread reads answers; a test or another wire may too

    def get(self, key: Hashable) -> Any:
        """The result kept for ``key`` (None if none), kept in the new generation now."""
        found = self._new.get(key)
        if found is None:
            found = self._old.get(key)
            if found is None:
                return None
            self._keep(key, found)
        return found[0]

    def put(self, key: Hashable, value: Any, size: int) -> None:
        if 2 * size <= self.limit:
            self._keep(key, (value, size))

    def _keep(self, key: Hashable, entry: tuple[Any, int]) -> None:
        with self._lock:
            if key not in self._new:
                if 2 * (self._new_held + entry[1]) > self.limit:  # the new generation full: the old one now
                    self._old, self._new, self._new_held = self._new, {}, 0
                self._new_held += entry[1]
            self._new[key] = entry

    def __bool__(self) -> bool:
        """Whether anything is kept: a command's first answer has nothing to look up (a one-shot command's every answer)."""
        return bool(self._new or self._old)

    @property
    def held(self) -> int:
        """The partitions (or offsets) of the results kept, both generations."""
        return sum(size for _value, size in {**self._old, **self._new}.values())
