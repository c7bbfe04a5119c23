"""The wire's tables by request type (``codecs.ENCODERS``/``DECODERS``, ``bodies.READERS``) import a
family's module the first time one of its requests is encoded, decoded or read: the same functions as
every module's own ``CODECS`` and readers, none of them imported before (the first connect waits for none)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from kafkatxn.kafka import protocol as p
from kafkatxn.kafka.wire import bodies, codecs


def test_every_familys_codecs_are_the_tables_by_its_request_types():
    families = {home: importlib.import_module(f"kafkatxn.kafka.wire.{home}") for home in codecs.FAMILIES}
    for home, kinds in codecs.FAMILIES.items():
        assert set(kinds) == set(families[home].CODECS), home
        for kind in kinds:
            encode, decode = families[home].CODECS[kind]
            assert kind in codecs.ENCODERS and kind in codecs.DECODERS
            assert codecs.ENCODERS[kind] is encode and codecs.DECODERS.get(kind) is decode
    every = [kind for kinds in codecs.FAMILIES.values() for kind in kinds]
    assert len(every) == len(set(every)), "a request type in two families"
    # Every wire module with CODECS is a family.
    from pathlib import Path

    wire_dir = Path(codecs.__file__).parent
    with_codecs = {f.stem for f in wire_dir.glob("*.py") if "\nCODECS" in f.read_text()}
    assert with_codecs == set(codecs.FAMILIES)


def test_a_type_of_no_family_is_not_in_the_tables():
    class NotARequest:
        pass

    assert NotARequest not in codecs.ENCODERS and codecs.ENCODERS.get(NotARequest) is None
    assert codecs.DECODERS.get(NotARequest, "default") == "default" and bodies.READERS.get(NotARequest) is None
    with pytest.raises(KeyError):
        codecs.DECODERS[NotARequest]


def test_the_readers_are_the_answer_modules_functions():
    from kafkatxn.kafka.wire import fetch_answers, group_answers, producers_answers

    assert bodies.READERS[p.DescribeProducers] is producers_answers.read_describe_producers
    assert bodies.READERS.get(p.OffsetFetch) is group_answers.read_offset_fetch
    assert bodies.READERS.get(p.ListGroups) is group_answers.read_list_groups
    assert bodies.READERS[p.Fetch] is fetch_answers.read_fetch
    assert bodies.READERS[p.ListOffsets] is bodies.read_list_offsets and bodies.READERS[p.Metadata] is bodies.read_metadata
    assert p.ApiVersions not in bodies.READERS and bodies.READERS.get(p.ApiVersions) is None


def _in_a_fresh_interpreter(code: str) -> None:
    """Run ``code`` where nothing of kafkatxn is imported yet; it asserts what it checks."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_the_wire_imports_no_family_it_has_not_sent():
    _in_a_fresh_interpreter((
        "import sys\n"
        "import kafkatxn.kafka\n"
        "from kafkatxn.kafka.wire import codecs\n"
        "loaded = {m.rsplit('.', 1)[1] for m in sys.modules if m.startswith('kafkatxn.kafka.wire.')}\n"
        "early = loaded & (set(codecs.FAMILIES) | {'producers_answers', 'group_answers', 'fetch_answers'})\n"
        # what the first requests (ApiVersions, Metadata) and the writers of the reused requests need
        "assert early <= {'metadata_codec', 'offsets_codec', 'fetch'}, sorted(early)\n"
        "from kafkatxn.kafka import protocol as p\n"
        "codecs.DECODERS[p.ListTransactions]\n"
        "assert 'kafkatxn.kafka.wire.transactions_codec' in sys.modules\n"
        "assert 'kafkatxn.kafka.wire.producers_codec' not in sys.modules\n"
    ))


def test_an_api_the_command_will_ask_has_its_wire_modules_imported_with_kafka_pythons():
    _in_a_fresh_interpreter((
        "import sys\n"
        "import kafkatxn.kafka\n"
        "from kafkatxn.kafka.wire.client_package import import_protocol\n"
        "assert 'kafkatxn.kafka.wire.producers_answers' not in sys.modules\n"
        "import_protocol(('DescribeProducers',))\n"
        "assert {'kafkatxn.kafka.wire.producers_answers', 'kafkatxn.kafka.wire.producers_codec'} <= set(sys.modules)\n"
        "assert 'kafkatxn.kafka.wire.groups_codec' not in sys.modules\n"
    ))
