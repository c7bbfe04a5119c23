"""What the wire's readers made of an answer's pieces, kept by their bytes for the next answer.

The exporter asks the same questions every scrape, and on a quiet cluster most of each answer is what
it was, byte for byte: a topic's producers at its leader, a group's committed offsets. A reader's
result is a function of those bytes alone (and the name read with them), so the same bytes again are
the same result again: named tuples of ints, strings and tuples, immutable, shared. Kept as
:data:`~kafkatxn.kafka.wire.bodies._METADATA_TOPICS` keeps Metadata's topics, but over the several
answers of a pass (one per leader or coordinator): the pieces used lately are kept, those unused for a
generation let go, within a bound on the partitions they hold.

A pass asks its questions in the same order each time, the worst order for a memo that makes room by
letting the least recently used go: one whose generation is smaller than a pass finds none of the pass
again (each piece let go just before it is asked again). So once a caller says where its passes begin
(:func:`begin_passes`: each exporter scrape, each watched sample), a generation that fills keeps what
it holds and turns only at the next pass's beginning: a pass larger than a generation finds that part of
itself again (at 50,000 groups of 20 offsets, 48 % of the groups against none), not nothing.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Hashable

_MEMOS: "weakref.WeakSet[BlockMemo]" = weakref.WeakSet()


def begin_passes() -> None:
    """A pass over the cluster begins (an exporter scrape, a watched sample): every memo keeps what the
    last pass used, and from now on makes no room within a pass (:meth:`BlockMemo.begin_pass`)."""
    for memo in list(_MEMOS):
        memo.begin_pass()


class BlockMemo:
    """Results by their bytes (and name), each put with its count of partitions or offsets, in two
    generations of at most half of ``limit`` each: what is used or put goes to the new one; when it
    is full it becomes the old one, and what was not used since the one before is let go; once its
    callers say where passes begin (:meth:`begin_pass`), a full one stays as it is until the next pass.
    A pass's pieces that fit in a generation are all found again at the next pass. A look-up
    that finds its result in the new generation (every one of a quiet cluster's scrapes after the
    first) is one dict look-up: no lock, no reordering (7,000 a scrape at 5,000 groups)."""

    def __init__(self, limit: int):
        self.limit = limit
        self._new: dict[Hashable, tuple[Any, int]] = {}
        self._old: dict[Hashable, tuple[Any, int]] = {}
        self._new_held = 0
        self._passes = False  # whether its callers say where passes begin (begin_pass)
        self._filled = False  # whether the new generation refused a piece in this pass
        self._lock = threading.Lock()  # the IO thread reads answers; a test or another wire may too
        _MEMOS.add(self)

    def begin_pass(self) -> None:
        """From the first call on, a new generation that fills within a pass stays as it is (what does not
        fit is read anew at each pass, the rest found again), and turns here, at the next pass's
        beginning, if it filled: what the last passes used is the old generation, found again and kept
        anew as it is used; what they did not use is let go. One that did not fill stays the new one,
        its look-ups one dict look-up each."""
        with self._lock:
            self._passes = True
            if self._filled:
                self._old, self._new, self._new_held, self._filled = self._new, {}, 0, False

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
                if 2 * (self._new_held + entry[1]) > self.limit:  # the new generation full
                    if self._passes:  # kept as it is until the next pass begins (an old piece found stays old)
                        self._filled = True
                        return
                    self._old, self._new, self._new_held = self._new, {}, 0  # the old one now
                self._new_held += entry[1]
            self._new[key] = entry

    def __bool__(self) -> bool:
        """Whether anything is kept: a command's first answer has nothing to look up (a one-shot command's every answer)."""
        return bool(self._new or self._old)

    @property
    def held(self) -> int:
        """The partitions (or offsets) of the results kept, both generations."""
        return sum(size for _value, size in {**self._old, **self._new}.values())
