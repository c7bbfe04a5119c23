"""Decoder for __transaction_state records (kafkatxn.kafka.txnlog), checked against bytes not made by it.

Three independent sources of truth:
  * hex written by hand from TransactionLogKey.json / TransactionLogValue.json (below);
  * vectors/kafka_txnlog_vectors.json, produced by Apache Kafka 4.4.0's own generated
    serializer (vectors/GenTxnLogVectors.java says how to regenerate it);
  * the encoders only for round trips, never as the sole oracle.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from kafkatxn.kafka import txnlog
from kafkatxn.kafka.txnlog import (
    STATES,
    TxnLogDecodeError,
    TxnLogRecord,
    decode_key,
    decode_record,
    decode_value,
)
from kafkatxn.kafka.txnlog_encode import encode_key, encode_value_v0, encode_value_v1

VECTORS = json.loads((Path(__file__).parent / "vectors" / "kafka_txnlog_vectors.json").read_text())["vectors"]
KAFKA = {v["name"]: v for v in VECTORS}

T0 = 1_700_000_000_000  # 0x0000018bcfe56800

# ---------------------------------------------------------------------------------------------
# Hand-written vectors. Every byte is annotated with the schema field it encodes.
# ---------------------------------------------------------------------------------------------

KEY_TX1 = bytes.fromhex(
    "0000"  # key version 0
    "0004"  # TransactionalId: int16 length 4
    "74782d31"  # "tx-1"
)

VALUE_V0_HAND = bytes.fromhex(
    "0000"  # value version 0 (non-flexible)
    "00000000000003e8"  # ProducerId int64 = 1000
    "0005"  # ProducerEpoch int16 = 5
    "0000ea60"  # TransactionTimeoutMs int32 = 60000
    "01"  # TransactionStatus int8 = 1 (Ongoing)
    "00000002"  # TransactionPartitions: int32 count = 2
    "0006" "6f7264657273"  # [0].Topic: int16 length 6, "orders"
    "00000002" "00000000" "00000003"  # [0].PartitionIds: int32 count 2, [0, 3]
    "0003" "706179"  # [1].Topic: "pay"
    "00000001" "0000000a"  # [1].PartitionIds: [10]
    "0000018bcfe569f4"  # TransactionLastUpdateTimestampMs int64 = T0 + 500
    "0000018bcfe56800"  # TransactionStartTimestampMs int64 = T0
)  # fmt: skip

VALUE_V0_HAND_EXPECTED = {
    "value_version": 0,
    "producer_id": 1000,
    "producer_epoch": 5,
    "state": "Ongoing",
    "partitions": ("orders-0", "orders-3", "pay-10"),
    "timeout_ms": 60000,
    "start_timestamp_ms": T0,
    "last_update_timestamp_ms": T0 + 500,
    "client_transaction_version": 0,
    "previous_producer_id": -1,
    "next_producer_id": -1,
    "next_producer_epoch": -1,
    "unknown_tags": (),
}

VALUE_V1_HAND = bytes.fromhex(
    "0001"  # value version 1 (flexible)
    "00000000000003e8"  # ProducerId = 1000
    "0005"  # ProducerEpoch = 5
    "0000ea60"  # TransactionTimeoutMs = 60000
    "02"  # TransactionStatus = 2 (PrepareCommit)
    "02"  # TransactionPartitions: compact array, uvarint(1 + 1)
    "07" "6f7264657273"  # [0].Topic: compact string uvarint(6 + 1), "orders"
    "03" "00000000" "00000003"  # [0].PartitionIds: compact array uvarint(2 + 1), [0, 3]
    "01" "64" "02" "abcd"  # [0] tagged fields: 1 field, tag 100 (unknown), size 2, 0xabcd
    "0000018bcfe569f4"  # TransactionLastUpdateTimestampMs = T0 + 500
    "0000018bcfe56800"  # TransactionStartTimestampMs = T0
    "06"  # value tagged fields: 6 fields, ascending tags
    "00" "08" "00000000000003e7"  # tag 0 PreviousProducerId int64 = 999
    "01" "08" "00000000000003e9"  # tag 1 NextProducerId int64 = 1001
    "02" "02" "0002"  # tag 2 ClientTransactionVersion int16 = 2
    "03" "02" "0006"  # tag 3 NextProducerEpoch int16 = 6
    "04" "02" "0007"  # tag 4: unknown to this schema, must be skipped
    "ac02" "8101" + "ee" * 129  # tag 300 (uvarint ac 02), size 129 (uvarint 81 01): unknown, skipped
)  # fmt: skip

VALUE_V1_HAND_EXPECTED = {
    "value_version": 1,
    "producer_id": 1000,
    "producer_epoch": 5,
    "state": "PrepareCommit",
    "partitions": ("orders-0", "orders-3"),
    "timeout_ms": 60000,
    "start_timestamp_ms": T0,
    "last_update_timestamp_ms": T0 + 500,
    "client_transaction_version": 2,
    "previous_producer_id": 999,
    "next_producer_id": 1001,
    "next_producer_epoch": 6,
    "unknown_tags": (4, 300),
}

VALUE_V1_EMPTY_HAND = bytes.fromhex(
    "0001"  # version 1
    "000000000000002a"  # ProducerId = 42
    "0003"  # ProducerEpoch = 3
    "0000ea60"  # TransactionTimeoutMs = 60000
    "00"  # TransactionStatus = 0 (Empty)
    "00"  # TransactionPartitions: compact array 0 = null
    "0000018bcfe56800"  # TransactionLastUpdateTimestampMs = T0
    "ffffffffffffffff"  # TransactionStartTimestampMs = -1
    "01" "02" "02" "0002"  # 1 tagged field: tag 2 ClientTransactionVersion, size 2, = 2
)  # fmt: skip


def _fields(record: TxnLogRecord) -> dict:
    return dataclasses.asdict(record)


# ---------------------------------------------------------------------------------------------
# Schema facts
# ---------------------------------------------------------------------------------------------


def test_states_follow_kafka_transaction_state_ids():
    assert STATES == (
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "PrepareAbort",
        "CompleteCommit",
        "CompleteAbort",
        "Dead",
        "PrepareEpochFence",
    )


def test_decode_error_is_a_value_error():
    assert issubclass(TxnLogDecodeError, ValueError)


def test_record_fields_and_defaults():
    names = [f.name for f in dataclasses.fields(TxnLogRecord)]
    assert names == [
        "transactional_id",
        "producer_id",
        "producer_epoch",
        "state",
        "partitions",
        "timeout_ms",
        "start_timestamp_ms",
        "last_update_timestamp_ms",
        "client_transaction_version",
        "previous_producer_id",
        "next_producer_id",
        "next_producer_epoch",
        "value_version",
        "tombstone",
        "log_partition",
        "log_offset",
    ]
    r = TxnLogRecord("x")
    assert (r.client_transaction_version, r.previous_producer_id, r.next_producer_id, r.next_producer_epoch) == (0, -1, -1, -1)
    assert (r.log_partition, r.log_offset, r.tombstone) == (-1, -1, False)


# ---------------------------------------------------------------------------------------------
# Hand-written vectors
# ---------------------------------------------------------------------------------------------


def test_key_hand_vector():
    assert decode_key(KEY_TX1) == "tx-1"
    assert encode_key("tx-1") == KEY_TX1


def test_value_v0_hand_vector():
    assert decode_value(VALUE_V0_HAND) == VALUE_V0_HAND_EXPECTED


def test_value_v0_encoder_writes_the_hand_vector():
    assert (
        encode_value_v0(
            producer_id=1000,
            producer_epoch=5,
            timeout_ms=60000,
            state="Ongoing",
            partitions={"orders": [0, 3], "pay": [10]},
            last_update_timestamp_ms=T0 + 500,
            start_timestamp_ms=T0,
        )
        == VALUE_V0_HAND
    )


def test_value_v1_hand_vector_known_tags_read_and_unknown_tags_skipped():
    assert decode_value(VALUE_V1_HAND) == VALUE_V1_HAND_EXPECTED


def test_value_v1_encoder_writes_the_hand_vector():
    # The hand vector has an unknown tag inside the partition entry, which the encoder cannot
    # write; everything else must come out byte for byte.
    without_partition_tag = VALUE_V1_HAND.replace(bytes.fromhex("0164" "02" "abcd"), b"\x00", 1)
    assert (
        encode_value_v1(
            producer_id=1000,
            producer_epoch=5,
            timeout_ms=60000,
            state="PrepareCommit",
            partitions={"orders": [0, 3]},
            last_update_timestamp_ms=T0 + 500,
            start_timestamp_ms=T0,
            previous_producer_id=999,
            next_producer_id=1001,
            client_transaction_version=2,
            next_producer_epoch=6,
            extra_tagged_fields={300: b"\xee" * 129, 4: b"\x00\x07"},
        )
        == without_partition_tag
    )


def test_value_v1_empty_hand_vector():
    assert decode_value(VALUE_V1_EMPTY_HAND) == {
        "value_version": 1,
        "producer_id": 42,
        "producer_epoch": 3,
        "state": "Empty",
        "partitions": (),
        "timeout_ms": 60000,
        "start_timestamp_ms": -1,
        "last_update_timestamp_ms": T0,
        "client_transaction_version": 2,
        "previous_producer_id": -1,
        "next_producer_id": -1,
        "next_producer_epoch": -1,
        "unknown_tags": (),
    }


def test_hand_vectors_agree_with_kafka_serializer():
    assert KEY_TX1.hex() == KAFKA["v0_ongoing"]["key"]
    assert VALUE_V0_HAND.hex() == KAFKA["v0_ongoing"]["value"]
    assert VALUE_V1_EMPTY_HAND.hex() == KAFKA["v1_empty_tv2"]["value"]


def test_decode_record_hand_vector():
    record = decode_record(KEY_TX1, VALUE_V1_HAND, log_partition=17, log_offset=123456)
    assert type(record) is TxnLogRecord
    expected = {k: v for k, v in VALUE_V1_HAND_EXPECTED.items() if k != "unknown_tags"}
    expected.update(transactional_id="tx-1", tombstone=False, log_partition=17, log_offset=123456)
    assert _fields(record) == expected


# ---------------------------------------------------------------------------------------------
# Vectors written by Apache Kafka's own serializer
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_kafka_vectors_decode(vector):
    record = decode_record(bytes.fromhex(vector["key"]), bytes.fromhex(vector["value"]), 3, 99)
    expected = dict(vector["expected"], partitions=tuple(vector["expected"]["partitions"]))
    expected.update(tombstone=False, log_partition=3, log_offset=99)
    assert _fields(record) == expected


def test_kafka_vector_unknown_tags_are_reported():
    assert decode_value(bytes.fromhex(KAFKA["v1_unknown_tags_skipped"]["value"]))["unknown_tags"] == (4, 300)
    assert decode_value(bytes.fromhex(KAFKA["v1_prepare_commit_all_tags"]["value"]))["unknown_tags"] == ()


ENCODER_ARGS = {
    "v0_ongoing": (
        encode_value_v0,
        dict(
            producer_id=1000, producer_epoch=5, timeout_ms=60000, state="Ongoing",
            partitions={"orders": [0, 3], "pay": [10]}, last_update_timestamp_ms=T0 + 500, start_timestamp_ms=T0,
        ),
    ),
    "v0_empty_null_partitions": (
        encode_value_v0,
        dict(
            producer_id=7, producer_epoch=0, timeout_ms=900000, state="Empty", partitions=None,
            last_update_timestamp_ms=T0, start_timestamp_ms=-1,
        ),
    ),
    "v1_prepare_commit_all_tags": (
        encode_value_v1,
        dict(
            producer_id=1000, producer_epoch=5, timeout_ms=60000, state=2,
            partitions={"orders": [0, 3], "pay": [10]}, last_update_timestamp_ms=T0 + 500, start_timestamp_ms=T0,
            previous_producer_id=999, next_producer_id=1001, client_transaction_version=2, next_producer_epoch=0,
        ),
    ),
    "v1_empty_tv2": (
        encode_value_v1,
        dict(
            producer_id=42, producer_epoch=3, timeout_ms=60000, state="Empty", partitions=None,
            last_update_timestamp_ms=T0, start_timestamp_ms=-1, client_transaction_version=2,
        ),
    ),
    "v1_complete_commit_empty_array_no_tags": (
        encode_value_v1,
        dict(
            producer_id=42, producer_epoch=4, timeout_ms=60000, state="CompleteCommit", partitions={},
            last_update_timestamp_ms=T0 + 9, start_timestamp_ms=T0,
        ),
    ),
    "v1_long_varints_extremes": (
        encode_value_v1,
        dict(
            producer_id=2**63 - 1, producer_epoch=2**15 - 1, timeout_ms=2**31 - 1, state="PrepareEpochFence",
            partitions={"t" * 200: list(range(150)), "x": [2**31 - 1]},
            last_update_timestamp_ms=2**63 - 1, start_timestamp_ms=-(2**63),
            previous_producer_id=-(2**63), client_transaction_version=1, next_producer_epoch=-(2**15),
        ),
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(ENCODER_ARGS))
def test_encoders_write_what_kafka_writes(name):
    encoder, kwargs = ENCODER_ARGS[name]
    assert encoder(**kwargs).hex() == KAFKA[name]["value"]


def test_encode_key_matches_kafka_for_non_ascii_ids():
    vector = KAFKA["v1_long_varints_extremes"]
    assert encode_key(vector["expected"]["transactional_id"]).hex() == vector["key"]


# ---------------------------------------------------------------------------------------------
# Records captured from real brokers (vectors/capture_real_broker.py)
# ---------------------------------------------------------------------------------------------

CAPTURES = json.loads((Path(__file__).parent / "vectors" / "real_broker_captures.json").read_text())["captures"]


@pytest.mark.parametrize("capture", CAPTURES, ids=[c["kafka_version"] for c in CAPTURES])
def test_real_broker_records(capture):
    records = [
        decode_record(
            bytes.fromhex(r["key"]),
            None if r["value"] is None else bytes.fromhex(r["value"]),
            r["expected"]["log_partition"],
            r["expected"]["log_offset"],
        )
        for r in capture["records"]
    ]
    for record, raw in zip(records, capture["records"]):
        assert _fields(record) == dict(raw["expected"], partitions=tuple(raw["expected"]["partitions"]))
    # One committed transaction on orders-0 and orders-2, then one left open on orders-1.
    assert [(r.state, r.partitions) for r in records] == [
        ("Empty", ()),
        ("Ongoing", ("orders-0", "orders-2")),
        ("PrepareCommit", ("orders-0", "orders-2")),
        ("CompleteCommit", ()),
        ("Ongoing", ("orders-1",)),
    ]
    assert {r.transactional_id for r in records} == {"capture-tx-1"}
    # 3.9 writes version 0 by default; 4.x writes version 1 with its tagged fields.
    assert {r.value_version for r in records} == {0 if capture["kafka_version"].startswith("3.") else 1}


# ---------------------------------------------------------------------------------------------
# Tombstones and unknown versions
# ---------------------------------------------------------------------------------------------


def test_tombstone():
    record = decode_record(KEY_TX1, None, log_partition=4, log_offset=77)
    assert record == TxnLogRecord("tx-1", tombstone=True, log_partition=4, log_offset=77)
    assert record.state == "" and record.partitions == () and record.producer_id == -1
    assert decode_value(None) is None


@pytest.mark.parametrize("version", [2, 3, 0x7FFF, -1, -32768])
def test_unknown_value_version_is_none_not_an_error(version):
    value = version.to_bytes(2, "big", signed=True) + b"\xde\xad"  # what follows is not read
    assert decode_value(value) is None
    assert decode_record(KEY_TX1, value) is None
    assert decode_value(version.to_bytes(2, "big", signed=True)) is None


@pytest.mark.parametrize("key", [bytes.fromhex("0001" "0004" "74782d31"), bytes.fromhex("7fff"), bytes.fromhex("ffff00")])
def test_unknown_key_version_is_none_not_an_error(key):
    assert decode_key(key) is None
    assert decode_record(key, VALUE_V0_HAND) is None
    assert decode_record(key, None) is None
    assert decode_record(key, b"garbage") is None  # the value is not looked at


# ---------------------------------------------------------------------------------------------
# Truncated and corrupt input: always TxnLogDecodeError
# ---------------------------------------------------------------------------------------------

ALL_VALUES = (
    [VALUE_V0_HAND, VALUE_V1_HAND, VALUE_V1_EMPTY_HAND]
    + [bytes.fromhex(v["value"]) for v in VECTORS]
    + [bytes.fromhex(c["records"][1]["value"]) for c in CAPTURES]
)
ALL_KEYS = [KEY_TX1] + [bytes.fromhex(v["key"]) for v in VECTORS]


@pytest.mark.parametrize("value", ALL_VALUES, ids=lambda v: v[:24].hex())
def test_every_truncation_of_a_value_raises_decode_error(value):
    for cut in range(len(value)):
        with pytest.raises(TxnLogDecodeError):
            decode_value(value[:cut])
        with pytest.raises(TxnLogDecodeError):
            decode_record(KEY_TX1, value[:cut])


@pytest.mark.parametrize("key", ALL_KEYS, ids=lambda k: k.hex()[:24])
def test_every_truncation_of_a_key_raises_decode_error(key):
    for cut in range(len(key)):
        with pytest.raises(TxnLogDecodeError):
            decode_key(key[:cut])
        with pytest.raises(TxnLogDecodeError):
            decode_record(key[:cut], None)


CORRUPT_VALUES = {
    "trailing byte after v0": VALUE_V0_HAND + b"\x00",
    "trailing byte after v1": VALUE_V1_HAND + b"\x00",
    "status 8 does not exist": VALUE_V0_HAND[:16] + b"\x08" + VALUE_V0_HAND[17:],
    "negative status": VALUE_V1_EMPTY_HAND[:16] + b"\xff" + VALUE_V1_EMPTY_HAND[17:],
    "v0 null topic": bytes.fromhex("0000" "0000000000000001" "0001" "00000001" "01" "00000001" "ffff"),
    "v0 null partition ids": bytes.fromhex("0000" "0000000000000001" "0001" "00000001" "01" "00000001" "0001" "61" "ffffffff"),
    "v0 topic longer than value": bytes.fromhex("0000" "0000000000000001" "0001" "00000001" "01" "00000001" "7fff" "61"),
    "v1 null topic": bytes.fromhex("0001" "0000000000000001" "0001" "00000001" "01" "02" "00"),
    "v1 null partition ids": bytes.fromhex("0001" "0000000000000001" "0001" "00000001" "01" "02" "02" "61" "00"),
    "v1 partition ids past end": bytes.fromhex("0001" "0000000000000001" "0001" "00000001" "01" "02" "02" "61" "7f" "00000001"),
    "v1 varint longer than 5 bytes": bytes.fromhex("0001" "0000000000000001" "0001" "00000001" "01" "ffffffffff7f"),
    "v1 int64 tag with size 2": VALUE_V1_EMPTY_HAND[:-5] + bytes.fromhex("01" "00" "02" "0002"),
    "v1 int16 tag with size 8": VALUE_V1_EMPTY_HAND[:-5] + bytes.fromhex("01" "03" "08" "0000000000000002"),
    "v1 unknown tag past end": VALUE_V1_EMPTY_HAND[:-5] + bytes.fromhex("01" "09" "05" "0000"),
    "v1 partition entry tag past end": VALUE_V1_HAND.replace(bytes.fromhex("016402abcd"), bytes.fromhex("016440abcd"), 1),
    "v1 topic not utf-8": VALUE_V1_HAND.replace(b"orders", b"ord\xffrs", 1),
    "empty value": b"",
    "one byte": b"\x00",
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CORRUPT_VALUES))
def test_corrupt_values_raise_decode_error(name):
    with pytest.raises(TxnLogDecodeError):
        decode_value(CORRUPT_VALUES[name])
    with pytest.raises(TxnLogDecodeError):
        decode_record(KEY_TX1, CORRUPT_VALUES[name])


CORRUPT_KEYS = {
    "null key": None,
    "null transactional id": bytes.fromhex("0000" "ffff"),
    "length beyond key": bytes.fromhex("0000" "0005" "74782d31"),
    "trailing byte": KEY_TX1 + b"\x00",
    "not utf-8": bytes.fromhex("0000" "0002" "c328"),
}


@pytest.mark.parametrize("name", sorted(CORRUPT_KEYS))
def test_corrupt_keys_raise_decode_error(name):
    with pytest.raises(TxnLogDecodeError):
        decode_key(CORRUPT_KEYS[name])
    with pytest.raises(TxnLogDecodeError):
        decode_record(CORRUPT_KEYS[name], VALUE_V0_HAND)


def test_v0_negative_partition_count_is_null_as_in_kafka():
    # Kafka's generated reader takes any negative array length as null.
    value = bytes.fromhex("0000" "0000000000000001" "0001" "00000001" "00" "fffffff0" "0000000000000002" "0000000000000003")
    assert decode_value(value)["partitions"] == ()


def test_random_corruption_raises_only_decode_error():
    rnd = random.Random(20261121)
    seeds = ALL_VALUES
    outcomes = {"decoded": 0, "unknown": 0, "error": 0}
    for _ in range(20000):
        value = bytearray(rnd.choice(seeds))
        for _ in range(rnd.choice((1, 1, 2, 4))):
            op = rnd.random()
            if op < 0.6:
                value[rnd.randrange(len(value))] = rnd.randrange(256)
            elif op < 0.8:
                del value[rnd.randrange(len(value)) :]
            else:
                value[rnd.randrange(len(value) + 1) : 0] = rnd.randbytes(rnd.randrange(1, 4))
            if not value:
                break
        try:
            result = decode_value(bytes(value))
        except TxnLogDecodeError:
            outcomes["error"] += 1
        else:
            outcomes["unknown" if result is None else "decoded"] += 1
    # All three outcomes happen, and nothing else escaped (an IndexError would have failed the test).
    assert all(outcomes.values()), outcomes


def test_random_key_corruption_raises_only_decode_error():
    rnd = random.Random(7)
    for _ in range(5000):
        key = bytearray(rnd.choice(ALL_KEYS))
        key[rnd.randrange(len(key))] = rnd.randrange(256)
        del key[rnd.randrange(len(key) + 1) :]
        try:
            decode_key(bytes(key))
        except TxnLogDecodeError:
            pass


# ---------------------------------------------------------------------------------------------
# Round trips and encoder behaviour
# ---------------------------------------------------------------------------------------------


def _random_fields(rnd: random.Random) -> dict:
    topics = {}
    for _ in range(rnd.choice((0, 1, 2, 3))):
        topic = rnd.choice(("orders", "pay", "t" * rnd.randrange(1, 300), "ünïcode-topic", "a-b-c"))
        topics[topic] = sorted(rnd.sample(range(0, 3000), rnd.choice((0, 1, 2, 5, 130))))
    return dict(
        producer_id=rnd.randrange(-(2**63), 2**63),
        producer_epoch=rnd.randrange(-(2**15), 2**15),
        timeout_ms=rnd.randrange(-(2**31), 2**31),
        state=rnd.randrange(len(STATES)),
        partitions=rnd.choice((None, topics)),
        last_update_timestamp_ms=rnd.randrange(-(2**63), 2**63),
        start_timestamp_ms=rnd.randrange(-(2**63), 2**63),
    )


def _expected_partitions(partitions) -> tuple[str, ...]:
    return tuple(sorted({f"{t}-{p}" for t, ids in (partitions or {}).items() for p in ids}))


def test_round_trip_v0():
    rnd = random.Random(1)
    for _ in range(500):
        f = _random_fields(rnd)
        tid = "".join(rnd.choice("abcé漢-_.") for _ in range(rnd.randrange(0, 40)))
        record = decode_record(encode_key(tid), encode_value_v0(**f))
        assert record == TxnLogRecord(
            tid, f["producer_id"], f["producer_epoch"], STATES[f["state"]], _expected_partitions(f["partitions"]),
            f["timeout_ms"], f["start_timestamp_ms"], f["last_update_timestamp_ms"], 0, -1, -1, -1, 0,
        )  # fmt: skip


def test_round_trip_v1_with_unknown_tags():
    rnd = random.Random(2)
    for _ in range(500):
        f = _random_fields(rnd)
        tags = dict(
            previous_producer_id=rnd.choice((-1, rnd.randrange(-(2**63), 2**63))),
            next_producer_id=rnd.choice((-1, rnd.randrange(-(2**63), 2**63))),
            client_transaction_version=rnd.choice((0, 1, 2, rnd.randrange(-(2**15), 2**15))),
            next_producer_epoch=rnd.choice((-1, rnd.randrange(-(2**15), 2**15))),
        )
        extra = {t: rnd.randbytes(rnd.choice((0, 1, 8, 200))) for t in rnd.sample(range(4, 40000), rnd.choice((0, 1, 3)))}
        value = encode_value_v1(**f, **tags, extra_tagged_fields=extra)
        decoded = decode_value(value)
        assert decoded == {
            "value_version": 1,
            "producer_id": f["producer_id"],
            "producer_epoch": f["producer_epoch"],
            "state": STATES[f["state"]],
            "partitions": _expected_partitions(f["partitions"]),
            "timeout_ms": f["timeout_ms"],
            "start_timestamp_ms": f["start_timestamp_ms"],
            "last_update_timestamp_ms": f["last_update_timestamp_ms"],
            **tags,
            "unknown_tags": tuple(sorted(extra)),
        }


def test_partitions_are_deduplicated_and_sorted_as_strings():
    value = encode_value_v1(
        producer_id=1, producer_epoch=0, timeout_ms=1, state="Ongoing",
        partitions={"b": [2, 10, 2], "a": [1]}, last_update_timestamp_ms=0, start_timestamp_ms=0,
    )  # fmt: skip
    assert decode_value(value)["partitions"] == ("a-1", "b-10", "b-2")


def test_encoder_accepts_topic_partition_strings():
    by_map = encode_value_v0(
        producer_id=1, producer_epoch=0, timeout_ms=1, state=1,
        partitions={"my-topic": [0, 1], "x": [5]}, last_update_timestamp_ms=0, start_timestamp_ms=0,
    )  # fmt: skip
    by_strings = encode_value_v0(
        producer_id=1, producer_epoch=0, timeout_ms=1, state=1,
        partitions=["my-topic-0", "my-topic-1", "x-5"], last_update_timestamp_ms=0, start_timestamp_ms=0,
    )  # fmt: skip
    assert by_map == by_strings


def test_encoder_writes_tags_in_ascending_order_and_refuses_known_tags_as_extra():
    common = dict(
        producer_id=1, producer_epoch=0, timeout_ms=1, state="Empty", partitions=None,
        last_update_timestamp_ms=0, start_timestamp_ms=0,
    )  # fmt: skip
    value = encode_value_v1(**common, client_transaction_version=2, extra_tagged_fields={9: b"\x01", 5: b""})
    assert value.endswith(bytes.fromhex("03" "020200 02" "0500" "090101".replace(" ", "")))
    for tag in (0, 1, 2, 3):
        with pytest.raises(ValueError):
            encode_value_v1(**common, extra_tagged_fields={tag: b"\x00\x00"})
    with pytest.raises(ValueError):
        encode_value_v1(**{**common, "state": "Bogus"})
    with pytest.raises(ValueError):
        encode_value_v0(**{**common, "producer_epoch": 2**15})


def test_bytes_like_inputs():
    assert decode_key(bytearray(KEY_TX1)) == "tx-1"
    assert decode_value(memoryview(VALUE_V1_HAND)) == VALUE_V1_HAND_EXPECTED
    assert decode_record(memoryview(KEY_TX1), bytearray(VALUE_V0_HAND)).partitions == VALUE_V0_HAND_EXPECTED["partitions"]


def test_decoded_records_are_genuine_frozen_records():
    record = decode_record(KEY_TX1, VALUE_V0_HAND, 1, 2)
    assert type(record) is TxnLogRecord
    built = TxnLogRecord(**_fields(record))
    assert record == built and hash(record) == hash(built) and repr(record) == repr(built)
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.producer_id = 5  # type: ignore[misc]
    assert dataclasses.replace(record, log_offset=3).log_offset == 3


def test_records_are_the_same_without_the_fast_constructor(monkeypatch):
    fast = [decode_record(KEY_TX1, v) for v in (VALUE_V0_HAND, VALUE_V1_HAND, VALUE_V1_EMPTY_HAND)]
    monkeypatch.setattr(txnlog, "_FAST_RECORDS", False)
    slow = [decode_record(KEY_TX1, v) for v in (VALUE_V0_HAND, VALUE_V1_HAND, VALUE_V1_EMPTY_HAND)]
    assert fast == slow


# ---------------------------------------------------------------------------------------------
# Live cross-check against Kafka's own code, when a JVM and Kafka 4.x jars are on this machine
# (harness/ fetches them into ~/.cache/kafkatxn/kafka-VERSION/libs; KAFKATXN_CACHE overrides).
# ---------------------------------------------------------------------------------------------

GENERATOR = Path(__file__).parent / "vectors" / "GenTxnLogVectors.java"


def _kafka4_libs() -> Path | None:
    root = Path(os.environ.get("KAFKATXN_CACHE") or Path.home() / ".cache" / "kafkatxn").expanduser()
    for libs in sorted(root.glob("kafka-4.*/libs"), reverse=True):
        if (libs.parent / "FETCH_COMPLETE").exists() and any(libs.glob("kafka-transaction-coordinator-*.jar")):
            return libs
    return None


def _run_generator(*args: str, stdin: str = "") -> str:
    libs = _kafka4_libs()
    if shutil.which("java") is None or libs is None:
        pytest.skip("needs java and Kafka 4.x jars (python -m harness fetch)")
    done = subprocess.run(
        ["java", "-cp", f"{libs}/*", str(GENERATOR), *args],
        input=stdin, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_committed_vectors_are_what_kafka_writes_today():
    fresh = json.loads(_run_generator("generate", "live"))
    assert fresh["vectors"] == VECTORS


def test_kafka_reads_what_the_encoders_write():
    rnd = random.Random(3)
    values = []
    for i in range(400):
        f = _random_fields(rnd)
        if i % 2:
            values.append(encode_value_v0(**f))
        else:
            extra = {t: rnd.randbytes(rnd.choice((0, 3, 150))) for t in rnd.sample(range(4, 40000), rnd.choice((0, 2)))}
            values.append(
                encode_value_v1(
                    **f,
                    previous_producer_id=rnd.choice((-1, rnd.randrange(-(2**63), 2**63))),
                    next_producer_id=rnd.choice((-1, rnd.randrange(-(2**63), 2**63))),
                    client_transaction_version=rnd.choice((0, 2)),
                    next_producer_epoch=rnd.choice((-1, rnd.randrange(-(2**15), 2**15))),
                    extra_tagged_fields=extra,
                )
            )
    lines = _run_generator("read", stdin="".join(v.hex() + "\n" for v in values)).splitlines()
    assert len(lines) == len(values)
    for value, line in zip(values, lines):
        kafka = json.loads(line)
        assert "error" not in kafka and kafka.pop("remaining") == 0, kafka
        kafka["state"] = STATES[kafka.pop("status")]
        kafka["partitions"] = tuple(sorted(set(kafka["partitions"])))
        kafka["unknown_tags"] = tuple(kafka["unknown_tags"])
        assert decode_value(value) == kafka
