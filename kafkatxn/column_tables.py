"""A read-only mapping over the columns a whole round's answers came in (:class:`FewApart`): the few entries
a pass reads found in C and kept apart, the dict of every one made only when another is looked up or all are
read. ListOffsets' (:mod:`kafkatxn.offset_table`) and DescribeProducers' (:mod:`kafkatxn.producer_table`)."""

from __future__ import annotations

from collections.abc import ItemsView, KeysView, Mapping, ValuesView
from typing import Any


class FewApart(Mapping):
    """The mapping's reads over ``_few`` (the entries kept apart, set by the subclass) and ``_every()`` (the
    dict of all of them, made once by the subclass's ``_made``)."""

    __slots__ = ()

    _few: dict
    _all: dict | None

    def _made(self) -> dict:
        raise NotImplementedError

    def _every(self) -> dict:
        if self._all is None:
            self._all = self._made()
        return self._all

    def whole(self) -> dict:
        """Every entry, as the one dict the mapping makes of them (not to be changed): for a reader that looks
        up every key, each look-up then in C, not through :meth:`__getitem__`."""
        return self._every()

    def __getitem__(self, key: Any) -> Any:
        found = self._few.get(key)
        return found if found is not None else self._every()[key]

    def get(self, key: Any, default: Any = None) -> Any:
        found = self._few.get(key)
        return found if found is not None else self._every().get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._few or key in self._every()

    # The dict's own views: read in C, not a look-up each through __getitem__.
    def keys(self) -> KeysView:
        return self._every().keys()

    def items(self) -> ItemsView:
        return self._every().items()

    def values(self) -> ValuesView:
        return self._every().values()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._every()!r})"
