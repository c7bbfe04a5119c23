"""plain.made_rows makes the rows of lso --groups and diagnose held as columns (plain.RecordColumns) without
a frozen dataclass's __init__: the rows must be the ones __init__ makes, and a mismatch must not pass silently."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kafkatxn.group_positions import GROUP_LAG_FIELDS, GroupLag
from kafkatxn.plain import made_rows as frozen_rows
from kafkatxn.verdicts_groups import GroupVerdict


def test_rows_are_what_the_dataclass_init_makes():
    values = [("g", "t", i, 1, 2, 3, 1, 2, GroupVerdict.lagging, None) + (None,) * 10 for i in range(3)]
    made = frozen_rows(GroupLag, GROUP_LAG_FIELDS, values)
    expected = [GroupLag(*v) for v in values]
    assert made == expected and list(map(hash, made)) == list(map(hash, expected))
    assert list(map(repr, made)) == list(map(repr, expected))
    with pytest.raises(AttributeError):  # still frozen
        made[0].group = "other"


def test_a_row_short_of_a_field_or_a_class_it_cannot_make_is_an_error():
    short = ("g", "t", 0, 1, 2, 3, 1, 2, GroupVerdict.lagging, None) + (None,) * 9  # a field left out
    with pytest.raises(ValueError):
        frozen_rows(GroupLag, GROUP_LAG_FIELDS, [short])
    with pytest.raises(TypeError):  # names not the class's fields, in order
        frozen_rows(GroupLag, GROUP_LAG_FIELDS[::-1], [])

    @dataclass(frozen=True)
    class Checked:
        a: int

        def __post_init__(self) -> None:
            pass

    with pytest.raises(TypeError):  # __init__ would do more than set the fields
        frozen_rows(Checked, ("a",), [(1,)])
