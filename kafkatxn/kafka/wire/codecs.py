"""Every request type the wire sends: its encoder (typed request -> kafka-python protocol object) and
decoder (kafka-python response -> typed response), gathered from one file per API family.

An encoder takes the :class:`~kafkatxn.kafka.wire.client.Wire` (for what the connection knows) and
the typed request. A new API family is a module here with its ``CODECS`` and its request types in
:data:`FAMILIES`. A family's module is imported the first time one of its requests is encoded or
decoded (:class:`ByRequestType`): a command's first request waits for none of the families it does not
send (all of them, imported with the wire, were ~1.6 ms before every command's first connect).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Callable

from kafkatxn.kafka import protocol as p

# Each family's module (in this package) by the request types its CODECS has;
# tests/unit/test_wire_codecs.py checks them against every module's CODECS.
FAMILIES: dict[str, tuple[type, ...]] = {
    "metadata_codec": (p.ApiVersions, p.Metadata),
    "offsets_codec": (p.ListOffsets,),
    "producers_codec": (p.DescribeProducers,),
    "transactions_codec": (p.ListTransactions, p.FindTransactionCoordinators, p.DescribeTransactions, p.WriteAbortMarker),
    "configs_codec": (p.DescribeConfigs,),
    "cluster": (p.ClusterOperations, p.MetadataClusterOperations, p.TopicMetadata),
    "fencing": (p.InitProducerId,),
    "fetch": (p.Fetch, p.ListOffsetsAt),
    "groups_codec": (p.ListGroups, p.FindGroupCoordinators, p.OffsetFetch, p.DescribeGroups),
    "consumer_group_codec": (p.ConsumerGroupDescribe,),
    "streams_group_codec": (p.StreamsGroupDescribe,),
}


def wire_module(name: str) -> ModuleType:
    """This package's module ``name``, imported now if it was not."""
    return importlib.import_module(f"kafkatxn.kafka.wire.{name}")


class ByRequestType(dict):
    """A table by request type whose values are made the first time they are looked up (``[]``,
    ``get``), each by its type's loader (which imports the module that holds it); ``in`` answers
    without loading. A dict: a value once loaded costs a dict lookup."""

    def __init__(self, loaders: dict[type, Callable[[], Any]]):
        super().__init__()
        self._loaders = loaders

    def __missing__(self, kind: type) -> Any:
        value = self[kind] = self._loaders[kind]()  # KeyError: not a type of this table
        return value

    def get(self, kind: type, default: Any = None) -> Any:  # type: ignore[override]
        return self[kind] if kind in self else default

    def __contains__(self, kind: object) -> bool:
        return dict.__contains__(self, kind) or kind in self._loaders


def _codecs(at: int) -> ByRequestType:
    """The encoders (``at`` 0) or decoders (1) of every family's CODECS, by request type."""
    return ByRequestType({kind: (lambda home=home, kind=kind: wire_module(home).CODECS[kind][at])
                          for home, kinds in FAMILIES.items() for kind in kinds})


ENCODERS = _codecs(0)
DECODERS = _codecs(1)
