"""kafkatxn.named_tuples.NamedTuple makes the class typing.NamedTuple makes, without compiling each
class's ``__new__``: the same fields, defaults, signature, errors, methods, docstrings and pickling."""

from __future__ import annotations

import copy
import pickle
import typing

import pytest

from kafkatxn.kafka import protocol as p
from kafkatxn.named_tuples import NamedTuple


# One body, declared under both: the same text, so what differs is the maker alone.
BODY = """
    \"\"\"A body's docstring.\"\"\"

    tp: int
    error: str | None
    producers: tuple[int, ...] = ()

    @property
    def doubled(self) -> int:
        return self.tp * 2

    def named(self) -> str:
        return f"{self.tp}:{self.error}"
"""
exec(f"class Ours(NamedTuple):{BODY}\nclass Typings(typing.NamedTuple):{BODY}")  # noqa: S102 - the classes under test
Ours, Typings = globals()["Ours"], globals()["Typings"]


class OneOurs(NamedTuple):
    x: int


class OneTypings(typing.NamedTuple):
    x: int


class NoneOurs(NamedTuple):
    """No field."""


class NoneTypings(typing.NamedTuple):
    """No field."""


def described(cls: type) -> tuple:
    a, b = cls(1, "e"), cls(tp=2, error=None, producers=(3,))
    return (repr(a), repr(b), a, b, a.doubled, a.named(), a._asdict(), repr(a._replace(tp=5)), repr(cls._make([1, 2, 3])),
            cls._fields, cls._field_defaults, cls.__doc__, cls.__new__.__doc__.replace(cls.__name__, "X"),
            cls.__new__.__defaults__, cls.__match_args__, cls.__slots__, cls.__mro__[1:], cls.tp.__doc__, cls.error.__doc__,
            a == (1, "e", ()), hash(a) == hash((1, "e", ())), repr(pickle.loads(pickle.dumps(b))), repr(copy.deepcopy(b)),
            [isinstance(x, tuple) for x in (a, b)], a.__getnewargs__())


def test_a_class_behaves_as_typings():
    ours, theirs = described(Ours), described(Typings)
    assert [str(x).replace("Ours", "X") for x in ours] == [str(x).replace("Typings", "X") for x in theirs]
    assert (OneOurs(1), OneOurs.__doc__, OneOurs.__new__.__doc__, OneOurs.__new__.__defaults__) == (
        OneTypings(1), "OneOurs(x,)", "Create new instance of OneOurs(x,)", ())
    assert OneTypings.__doc__ == "OneTypings(x,)"
    assert (NoneOurs(), NoneOurs._fields, NoneOurs.__doc__) == (NoneTypings(), (), NoneTypings.__doc__)


@pytest.mark.parametrize("call", [
    lambda cls: cls(1),
    lambda cls: cls(1, 2, 3, 4),
    lambda cls: cls(1, 2, foo=3),
    lambda cls: cls(1, 2, tp=3),
    lambda cls: cls._make([1]),
    lambda cls: cls(1, 2)._replace(zz=1),
])
def test_a_bad_call_fails_as_typings_does(call):
    errors = []
    for cls in (Ours, Typings):
        with pytest.raises(Exception) as info:
            call(cls)
        errors.append((info.type, str(info.value).replace(cls.__name__, "X")))
    assert errors[0] == errors[1]


def test_a_declaration_typing_refuses_is_refused():
    with pytest.raises(TypeError, match="Non-default namedtuple field b cannot follow default field a"):
        class Late(NamedTuple):
            a: int = 1
            b: int

    with pytest.raises(AttributeError, match="Cannot overwrite NamedTuple attribute _asdict"):
        class Overwrites(NamedTuple):
            a: int

            def _asdict(self) -> dict:
                return {}


def test_the_protocols_tuples_are_these():
    made = p.TransactionState("t", None)
    assert type(made).__mro__ == (p.TransactionState, tuple, object)
    assert made == ("t", None, "", -1, -1, 0, -1, frozenset())
    assert p.FetchedBatch(0, 2, -1, -1, False, None, (), 3).gapless
    assert pickle.loads(pickle.dumps(made)) == made and type(pickle.loads(pickle.dumps(made))) is p.TransactionState
