"""Kafka's error names for the codes in kafka-python's responses."""

from __future__ import annotations

import threading
from itertools import repeat
from typing import Any, Callable, Iterable, Iterator, Sequence, TypeVar

from kafkatxn.model import TopicPartition

T = TypeVar("T")


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


# Each topic's TopicPartitions by index, made once a process and shared by every answer that names
# them: a TopicPartition made in C still costs 0.2 us (30,000 an answer pass, several passes a command,
# every scrape). Emptied past this many (deleted topics' would stay otherwise).
KEPT_PARTITIONS_LIMIT = 1_000_000
_kept: dict[str, list[TopicPartition]] = {}
_kept_count = 0
_keeping = threading.Lock()  # the IO thread reads answers while the main thread may decode others


def topic_partitions(name: str, indexes: Sequence[int]) -> Iterator[TopicPartition]:
    """The TopicPartitions of topic ``name`` at ``indexes`` (partition numbers, as an answer lists
    them), the kept ones (:data:`KEPT_PARTITIONS_LIMIT`): looked up in C, none made once kept."""
    global _kept_count
    if not indexes:
        return iter(())
    known = _kept.get(name)
    top = max(indexes)
    if known is None or top >= len(known):
        if min(indexes) < 0 or top >= KEPT_PARTITIONS_LIMIT:  # not partition numbers to keep a table of
            return made(TopicPartition, zip(repeat(name), indexes))
        with _keeping:
            if _kept_count + top >= KEPT_PARTITIONS_LIMIT:
                _kept.clear()
                _kept_count = 0
            known = _kept.setdefault(name, [])
            if top >= len(known):
                _kept_count += top + 1 - len(known)
                known.extend(made(TopicPartition, zip(repeat(name), range(len(known), top + 1))))
    elif min(indexes) < 0:
        return made(TopicPartition, zip(repeat(name), indexes))
    return map(known.__getitem__, indexes)


def topic_columns(topics: Any, fields: Callable[[Any], tuple]) -> Iterator[tuple]:
    """Per topic of an answer, its partitions taken apart into columns: their TopicPartitions, error
    names, then the rest of ``fields`` (an attrgetter of ``partition_index``, ``error_code``, ...)."""
    for topic in topics:
        rows = list(map(fields, topic.partitions))
        if rows:
            indexes, errors, *rest = zip(*rows)
            yield (topic_partitions(topic.name, indexes), error_names(errors), *rest)
