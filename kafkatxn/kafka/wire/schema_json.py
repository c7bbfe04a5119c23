"""kafka-python's JSON schemas read without its comment regex: the same dictionaries, a third of the work.

kafka-python builds every request and response class from Kafka's JSON schema of it when the class's
module is imported (``kafka.protocol.api_data.JsonSchemaData``, through ``load_json``): it reads the
file through ``importlib.resources`` and takes the ``//`` comments out with the regex
``(?m)((?:^\\s*//.*\\n?)+)``, run twice over the whole text (``re.sub``, then ``re.findall`` for the
licence and the doc). The regex tries every position of the text; ``lso`` reads 52 schemas (the
APIs it sends, and the group APIs kafka-python's network layer builds at import), and the two passes
were ~50 M instructions of its run (~3 %), every command that talks to Kafka alike.
:func:`read_schema` finds the same comment blocks from the text's ``//`` (:func:`comment_spans`) and
reads the file directly; it returns what kafka-python's ``load_json`` returns, which
``tests/unit/test_wire_contract.py`` checks for every schema kafka-python ships, and the blocks
against the regex's on generated texts. A schema of another package, or a file it cannot open, is
kafka-python's own ``load_json``'s. The field names of those classes are worked out once per name
(:func:`once_per_name`).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import sys
from collections.abc import Callable
from typing import Any

# What the regex's \s* takes at a line start: Unicode white space, newlines included (str.isspace's).
_SPACES = re.compile(r"\s*")


def comment_spans(text: str) -> list[tuple[int, int]]:
    """The spans of ``re.finditer(r"(?m)((?:^\\s*//.*\\n?)+)", text)``, left to right.

    A match starts at a line start from which white space (newlines too) leads to ``//``; it takes
    that line with its newline, and again while the text from the next line start is white space
    then ``//``. So a block holds the blank lines before and between its comment lines, not those after."""
    spans = []
    n = len(text)
    find, rfind, spaces = text.find, text.rfind, _SPACES.match
    pos = q = 0  # pos: where the regex searches on (a line start); q: where the next '//' is looked for
    while True:
        k = find("//", q)
        if k < 0:
            return spans
        start = rfind("\n", 0, k) + 1  # k's line start: at or after pos, which is a line start before k
        if spaces(text, start).end() != k:  # other text before it on its line: no comment line starts here
            q = find("\n", k) + 1
            if not q:
                return spans
            continue
        while start > pos:  # the lines of white space only before it are the match's too
            before = rfind("\n", 0, start - 1) + 1
            if spaces(text, before).end() < k:
                break
            start = before
        end = k
        while True:  # to the end of the comment line, then the next one where white space leads to '//'
            newline = find("\n", end)
            if newline < 0:
                end = n
                break
            end = newline + 1
            after = spaces(text, end).end()
            if not text.startswith("//", after):
                break
            end = after
        spans.append((start, end))
        pos = q = end


def _resources() -> str | None:
    """The directory of kafka-python's schemas (the package ``load_json`` reads by default)."""
    try:
        spec = importlib.util.find_spec("kafka.protocol.schemas.resources")
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    return locations[0] if len(locations) == 1 and os.path.isdir(locations[0]) else None


def reader(kafka_load_json: Callable[..., dict], resolve_common_structs: Callable[[list, dict], None],
           resources: str | None) -> Callable[..., dict]:
    """``load_json`` of kafka-python (``kafka_load_json``), its schemas read from ``resources`` as it reads them."""

    def read_schema(msg_type: str, package: Any = None) -> dict:
        if package is not None or resources is None:
            return kafka_load_json(msg_type, package)
        try:
            with open(os.path.join(resources, msg_type + ".json"), encoding="utf-8") as file:
                msg_json = file.read()
        except OSError:  # as kafka-python words it
            return kafka_load_json(msg_type, package)
        spans = comment_spans(msg_json)
        kept, last = [], 0
        for start, end in spans:
            kept.append(msg_json[last:start])
            last = end
        kept.append(msg_json[last:])
        data = json.loads("".join(kept))
        # What kafka-python's load_json does next, as it does it.
        if spans:
            data["license"] = msg_json[spans[0][0]:spans[0][1]]
            if len(spans) > 1:
                data["doc"] = msg_json[spans[1][0]:spans[1][1]]
        common_structs = {s["name"]: s["fields"] for s in data.get("commonStructs", [])}
        if common_structs:
            resolve_common_structs(data.get("fields", []), common_structs)
        return data

    return read_schema


def once_per_name(underscore_name: Callable[[type, str], str]) -> Callable[[type, str], str]:
    """kafka-python's ``BaseField.underscore_name`` (a field's name in snake case, by a regex
    substitution), worked out once per name: every field of every class built from a schema asks it,
    768 times in an ``lso`` for 158 names (4.5 us each, a third of them before the first request)."""
    names: dict[str, str] = {}

    def named_once(cls: type, name: str) -> str:
        found = names.get(name)
        if found is None:
            found = names[name] = underscore_name(cls, name)
        return found

    return functools.update_wrapper(named_once, underscore_name, assigned=())  # its __wrapped__: kafka-python's


def read_schemas_faster() -> None:
    """kafka-python's classes built from schemas read by :func:`reader`, their fields named by
    :func:`once_per_name` (a no-op once done, or without kafka-python). Before any of its protocol
    modules builds a class: the wire's import."""
    try:
        import kafka.protocol.schemas.load_json  # noqa: F401 - the module, which its package's name shadows
        from kafka.protocol import api_data
        from kafka.protocol.schemas.fields.base import BaseField
    except ImportError:
        return
    naming = BaseField.__dict__.get("underscore_name")
    if isinstance(naming, classmethod) and getattr(naming.__func__, "__module__", None) != __name__:
        BaseField.underscore_name = classmethod(once_per_name(naming.__func__))
    try:
        kafka_load_json = api_data.load_json
        resolve_common_structs = sys.modules["kafka.protocol.schemas.load_json"]._resolve_common_structs
    except AttributeError:  # a kafka-python that reads its schemas otherwise: its own reading (the contract test fails)
        return
    if getattr(kafka_load_json, "__module__", None) != __name__:
        api_data.load_json = reader(kafka_load_json, resolve_common_structs, _resources())
