"""Kafka's error names for the codes in kafka-python's responses."""

from __future__ import annotations

from itertools import repeat
from typing import Any, Callable, Iterable, Iterator, Sequence, TypeVar

from kafkatxn.model import kept_topic_partitions

T = TypeVar("T")

topic_partitions = kept_topic_partitions  # an answer's TopicPartitions, kept once a process (kafkatxn.model)


def error_name(code: int) -> str | None:
    """Kafka's name for an error code (``NOT_LEADER_OR_FOLLOWER``), None for 0."""
    if not code:
        return None
    import kafka.errors as Errors

    cls = Errors.for_code(code)
    name = str(getattr(cls, "message", None) or cls.__name__)
    return _RENAMED_ERRORS.get(name, name)


# kafka-python keeps names Kafka has since replaced; the facade and the fake speak Kafka's names.
_RENAMED_ERRORS = {"NOT_LEADER_FOR_PARTITION": "NOT_LEADER_OR_FOLLOWER"}


def error_names(codes: Sequence[int]) -> Iterable[str | None]:
    """:func:`error_name` of each code; ``None`` repeated without a call per code when none failed."""
    return [error_name(code) for code in codes] if any(codes) else repeat(None)


def made(cls: type[T], rows: Iterable[tuple]) -> Iterator[T]:
    """Named tuples of ``cls`` from tuples of its fields, without a Python-level call each (a named
    tuple's own ``__new__`` is a Python function): 10,000s per answer at 30,000 partitions."""
    return map(tuple.__new__, repeat(cls), rows)  # type: ignore[arg-type]


def topic_columns(topics: Any, fields: Callable[[Any], tuple]) -> Iterator[tuple]:
    """Per topic of an answer, its partitions taken apart into columns: their TopicPartitions, error
    names, then the rest of ``fields`` (an attrgetter of ``partition_index``, ``error_code``, ...)."""
    for topic in topics:
        rows = list(map(fields, topic.partitions))
        if rows:
            indexes, errors, *rest = zip(*rows)
            yield (topic_partitions(topic.name, indexes), error_names(errors), *rest)
