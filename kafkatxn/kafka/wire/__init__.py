"""The wire layer: the only package that touches kafka-python.

kafka-python 3.x serves what librdkafka lacks (the KIP-664 APIs: DescribeProducers, ListTransactions,
DescribeTransactions, WriteTxnMarkers) and ListOffsets (one request per leader, where librdkafka's admin
API makes a future per partition). :mod:`.client` holds the connection manager (the one way to have
many requests to many brokers in flight at once) and the few private names of kafka-python it needs;
one module per API family converts the typed requests of :mod:`kafkatxn.kafka.protocol` to
kafka-python's protocol objects and back (:mod:`.codecs` gathers them).
``tests/unit/test_wire_contract.py`` fails if a kafka-python release changes what is used here, or if
a private name is used here that it does not list and exercise.
"""

from kafkatxn.kafka.wire.client_package import defer_package_init

defer_package_init()  # before any kafka-python import: its package __init__ runs only if asked for

from kafkatxn.kafka.wire.schema_json import read_schemas_faster

read_schemas_faster()  # before any of kafka-python's classes is built from its schema

from kafkatxn.kafka.wire.client import LOGINS_CUT_SHORT, REUSED_LIMIT, REUSED_REQUESTS, Wire
from kafkatxn.kafka.wire.refusal import is_refusal
from kafkatxn.kafka.wire.codecs import DECODERS, ENCODERS
from kafkatxn.kafka.wire.names import error_name
from kafkatxn.kafka.unreachable import NoBrokersAvailable

__all__ = [
    "DECODERS", "ENCODERS", "LOGINS_CUT_SHORT", "REUSED_LIMIT", "REUSED_REQUESTS", "NoBrokersAvailable", "Wire",
    "error_name", "is_refusal",
]
