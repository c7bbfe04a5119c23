"""Kafka's error names for the codes in kafka-python's responses."""

from __future__ import annotations


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
