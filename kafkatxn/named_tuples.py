"""``NamedTuple``: typing's named tuples, made without compiling each class's ``__new__`` from source.

``class X(typing.NamedTuple)`` checks and stores every annotation, then ``collections.namedtuple``
compiles the class's ``__new__`` from its source text (``eval``) and makes six methods for it: ~0.6 M
instructions a class, and ``kafka/protocol.py``'s 53 were 32 M (~9 ms) of every command's start before
its first request. Here a class is made of the same parts: its ``__new__`` is the code compiled once
for the classes of as many fields (the field names set on a copy of that code: ``code.replace``),
its other methods are written once below, its annotations are kept as they are given (strings under
``from __future__ import annotations``: nothing evaluated). What the class does is the same as
typing's: the same fields, defaults, ``__new__`` signature and errors, ``_make``, ``_replace``,
``_asdict``, ``__repr__``, pickling, the methods and docstring of its body
(``tests/unit/test_named_tuples.py`` compares them). Type checkers see typing's ``NamedTuple``.
"""

from __future__ import annotations

import sys
from operator import itemgetter
from typing import TYPE_CHECKING, Any

try:
    from collections import _tuplegetter  # type: ignore[attr-defined] - the field accessor collections.namedtuple uses
except ImportError:  # as collections does without it
    def _tuplegetter(index: int, doc: str) -> Any:
        return property(itemgetter(index), doc=doc)

__all__ = ["NamedTuple"]

_NEW_BY_ARITY: dict[int, Any] = {}  # the code of a __new__ taking that many fields, compiled once
# Names typing.NamedTuple does not let a class body set, and those it does not copy onto the class.
_PROHIBITED = frozenset({"__new__", "__init__", "__slots__", "__getnewargs__", "_fields", "_field_defaults",
                         "_make", "_replace", "_asdict", "_source"})
_NOT_COPIED = frozenset({"__module__", "__name__", "__annotations__"})


def _new_code(arity: int) -> Any:
    code = _NEW_BY_ARITY.get(arity)
    if code is None:
        args = ", ".join(f"_{i}" for i in range(arity))
        code = _NEW_BY_ARITY[arity] = eval(f"lambda _cls, {args}: _tuple_new(_cls, ({args}{',' if arity == 1 else ''}))",
                                           {"_tuple_new": tuple.__new__, "__builtins__": {}}).__code__
    return code


@classmethod  # type: ignore[misc]
def _make(cls: type, iterable: Any) -> Any:
    """Make a new object from a sequence or iterable"""
    result = tuple.__new__(cls, iterable)
    if len(result) != len(cls._fields):  # type: ignore[attr-defined]
        raise TypeError(f"Expected {len(cls._fields)} arguments, got {len(result)}")  # type: ignore[attr-defined]
    return result


def _replace(self: Any, /, **kwds: Any) -> Any:
    """Return a new object replacing specified fields with new values"""
    result = self._make(map(kwds.pop, self._fields, self))
    if kwds:
        raise ValueError(f"Got unexpected field names: {list(kwds)!r}")
    return result


def __repr__(self: Any) -> str:
    "Return a nicely formatted representation string"
    return f"{self.__class__.__name__}({', '.join(f'{name}={value!r}' for name, value in zip(self._fields, self))})"


def _asdict(self: Any) -> dict[str, Any]:
    "Return a new dict which maps field names to their values."
    return dict(zip(self._fields, self))


def __getnewargs__(self: Any) -> tuple:
    "Return self as a plain tuple.  Used by copy and pickle."
    return tuple(self)


def _named_tuple(typename: str, ns: dict[str, Any]) -> type:
    annotations = ns.get("__annotations__", {})
    fields = tuple(annotations)
    default_names = []
    for name in fields:
        if name in ns:
            default_names.append(name)
        elif default_names:
            raise TypeError(f"Non-default namedtuple field {name} cannot follow default field"
                            f"{'s' if len(default_names) > 1 else ''} {', '.join(default_names)}")
    defaults = [ns[name] for name in default_names]
    arg_list = ", ".join(fields) + ("," if len(fields) == 1 else "")
    code = _new_code(len(fields)).replace(co_varnames=("_cls", *fields), co_name="__new__")
    new = type(_replace)(code, {"_tuple_new": tuple.__new__, "__builtins__": {}}, "__new__", tuple(defaults))
    new.__qualname__ = f"{typename}.__new__"
    new.__doc__ = f"Create new instance of {typename}({arg_list})"
    new.__annotations__ = annotations
    class_ns: dict[str, Any] = {
        "__doc__": f"{typename}({arg_list})",
        "__slots__": (),
        "_fields": fields,
        "_field_defaults": dict(zip(fields[len(fields) - len(defaults):], defaults)),
        "__new__": new,
        "_make": _make,
        "_replace": _replace,
        "__repr__": __repr__,
        "_asdict": _asdict,
        "__getnewargs__": __getnewargs__,
        "__match_args__": fields,
        "__module__": ns.get("__module__", "__main__"),
        "__annotations__": annotations,
    }
    for index, name in enumerate(fields):
        class_ns[name] = _tuplegetter(index, sys.intern(f"Alias for field number {index}"))
    for key, value in ns.items():
        if key in _PROHIBITED:
            raise AttributeError("Cannot overwrite NamedTuple attribute " + key)
        if key not in _NOT_COPIED and key not in class_ns or key == "__doc__":
            class_ns[key] = value
    return type(typename, (tuple,), class_ns)


class _NamedTupleMeta(type):
    def __new__(mcls, typename: str, bases: tuple, ns: dict[str, Any]) -> Any:
        if ns.get("_root", False):
            return super().__new__(mcls, typename, bases, ns)
        if bases != (NamedTuple,):
            raise TypeError("a named tuple's only base is NamedTuple")
        return _named_tuple(typename, ns)


if TYPE_CHECKING:
    from typing import NamedTuple
else:
    class NamedTuple(metaclass=_NamedTupleMeta):
        """Base of a named tuple declared as ``typing.NamedTuple``'s are (see the module's doc)."""

        _root = True
