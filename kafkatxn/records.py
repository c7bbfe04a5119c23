"""The records of the model and of the modules that decide: dataclasses whose methods are written once,
not generated as each class is made. On their own, so that ``config show`` and the configuration read
before any command's first request declare theirs without importing the model.

Annotations are evaluated as the classes are made (no ``from __future__ import annotations``), as the
model's are.
"""

import reprlib
from dataclasses import FrozenInstanceError, dataclass
from operator import attrgetter
from typing import Any, ClassVar


# The records are dataclasses (``dataclasses.fields``, ``replace`` and ``asdict`` work, and
# ``plain.to_plain`` shows them as objects) whose methods are not generated: ``@dataclass(frozen=True)``
# compiles six methods from their source text as each class is made (3.5 M instructions a class: the
# model's 14 were 45 M, most of its import, and the snapshot's 7 were 29 M, both before check's first
# ListOffsets). Their behaviour is written once here, the same as the generated one's, and each class
# writes its own ``__init__``.
class Record:
    """Equal to a record of the same class with equal fields, shown as ``Name(field=value, ...)``:
    what ``@dataclass`` generates. Not hashable, as a dataclass with ``eq`` and not ``frozen`` is (its
    fields can change); a :class:`FrozenRecord` is hashed by its fields. A subclass is declared
    ``@dataclass(init=False, repr=False, eq=False)`` and sets its fields in its ``__init__`` through
    ``__dict__``, its annotations being its fields."""

    __slots__ = ()  # a subclass has a __dict__ unless made with a slot per field (:func:`slotted`)
    _FIELDS: ClassVar[tuple[str, ...]] = ()
    _VALUES: ClassVar[Any]  # a record's field values, as a tuple: taken in C (operator.attrgetter)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A subclass's fields follow its bases' fields, as a dataclass's do.
        cls._FIELDS = names = tuple(dict.fromkeys(
            name for klass in reversed(cls.__mro__) if klass is not Record for name in klass.__dict__.get("__annotations__", {})
        ))
        if len(names) == 1:
            single = attrgetter(names[0])
            cls._VALUES = staticmethod(lambda record: (single(record),))
        elif names:  # (FrozenRecord itself has none)
            cls._VALUES = staticmethod(attrgetter(*names))

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._VALUES(self) == self._VALUES(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    @reprlib.recursive_repr()
    def __repr__(self) -> str:
        return f"{self.__class__.__qualname__}({', '.join(f'{name}={value!r}' for name, value in zip(self._FIELDS, self._VALUES(self)))})"


class FrozenRecord(Record):
    """A :class:`Record` whose fields cannot be set or deleted once made, hashed by them, as
    ``@dataclass(frozen=True)``'s."""

    __slots__ = ()

    def __hash__(self) -> int:
        return hash(self._VALUES(self))

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")


def _slot_state(self: FrozenRecord) -> list:
    return list(self._VALUES(self))


def set_slots(record: FrozenRecord, values: Any) -> None:
    """Set the fields of a :func:`slotted` record (in its ``__init__``) to ``values``, in order."""
    for name, value in zip(record._FIELDS, values):
        object.__setattr__(record, name, value)


def slotted(cls: type) -> type:
    """The :class:`FrozenRecord` ``cls`` made again with a slot per field and no ``__dict__``, as
    ``@dataclass(frozen=True, slots=True)`` makes it (for records held by the many: a log's records).
    Its ``__init__`` sets its fields with :func:`set_slots`; it pickles as that dataclass does (a
    list of its fields' values), its fields being read-only."""
    names = cls._FIELDS
    body = {key: value for key, value in cls.__dict__.items() if key not in names and key not in ("__dict__", "__weakref__")}
    body.update(__slots__=names, __getstate__=_slot_state, __setstate__=set_slots)
    made = type(cls)(cls.__name__, cls.__bases__, body)
    made.__qualname__ = cls.__qualname__
    return made


record = dataclass(init=False, repr=False, eq=False)  # the declaration of a Record: a dataclass, nothing generated
FRESH: Any = object()  # a default made afresh for each record, as a dataclass field's default_factory's
