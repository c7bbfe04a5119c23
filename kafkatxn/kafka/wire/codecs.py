"""Every request type the wire sends: its encoder (typed request -> kafka-python protocol object) and
decoder (kafka-python response -> typed response), gathered from one file per API family.

An encoder takes the :class:`~kafkatxn.kafka.wire.client.Wire` (for what the connection knows) and
the typed request. A new API family is a module here with its ``CODECS`` and one line below.
"""

from __future__ import annotations

from typing import Any, Callable

from kafkatxn.kafka.wire import (
    cluster, configs_codec, consumer_group_codec, fencing, fetch, groups_codec, metadata_codec, offsets_codec, producers_codec,
    streams_group_codec, transactions_codec,
)

CODECS: dict[type, tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Any]]] = {
    **metadata_codec.CODECS,
    **offsets_codec.CODECS,
    **producers_codec.CODECS,
    **transactions_codec.CODECS,
    **configs_codec.CODECS,
    **cluster.CODECS,
    **fencing.CODECS,
    **fetch.CODECS,
    **groups_codec.CODECS,
    **consumer_group_codec.CODECS,
    **streams_group_codec.CODECS,
}
ENCODERS = {kind: encode for kind, (encode, _decode) in CODECS.items()}
DECODERS = {kind: decode for kind, (_encode, decode) in CODECS.items()}
