"""The typed records a ``__transaction_state`` read yields: decoded (:class:`TxnLogRecord`) or not
(:class:`UndecodedRecord`), each with its log position, and the counts of each kind. Pure: no Spark,
no Kafka client; the decoder (txnlog.py) makes them, the reader (kafkatxn/kafka/log_reader.py) yields them.
"""

from __future__ import annotations

from kafkatxn.named_tuples import NamedTuple  # typing's, without its __new__ compiled as the class is made
from kafkatxn.records import FrozenRecord, Record, record, set_slots, slotted

# What a record turned out to be (the Spark data source's ``row_kind`` column too).
KIND_RECORD = "record"
KIND_UNKNOWN_VERSION = "unknown_version"  # a key or value version this decoder does not know
KIND_CORRUPT = "corrupt"  # not a well-formed key or value (truncated, corrupt)


# The records are model records (kafkatxn/records.py: no methods compiled as each class is made), the
# two a log read makes by the many with a slot per field, as @dataclass(frozen=True, slots=True) made them.
@slotted
@record
class TxnLogRecord(FrozenRecord):
    """One decoded ``__transaction_state`` record.

    For a tombstone (``tombstone=True``) only ``transactional_id`` and the log position are
    meaningful; the other fields keep their "absent" defaults and ``state`` is ``""``.
    ``partitions`` are ``"topic-partition"`` strings, de-duplicated (Kafka reads them into a
    set) and sorted as plain strings.
    """

    transactional_id: str
    producer_id: int = -1
    producer_epoch: int = -1
    state: str = ""
    partitions: tuple[str, ...] = ()
    timeout_ms: int = -1
    start_timestamp_ms: int = -1
    last_update_timestamp_ms: int = -1
    client_transaction_version: int = 0
    previous_producer_id: int = -1
    next_producer_id: int = -1
    next_producer_epoch: int = -1
    value_version: int = -1
    tombstone: bool = False
    log_partition: int = -1
    log_offset: int = -1

    def __init__(self, transactional_id: str, producer_id: int = -1, producer_epoch: int = -1, state: str = "",
                 partitions: tuple[str, ...] = (), timeout_ms: int = -1, start_timestamp_ms: int = -1,
                 last_update_timestamp_ms: int = -1, client_transaction_version: int = 0,
                 previous_producer_id: int = -1, next_producer_id: int = -1, next_producer_epoch: int = -1,
                 value_version: int = -1, tombstone: bool = False, log_partition: int = -1,
                 log_offset: int = -1) -> None:
        set_slots(self, (transactional_id, producer_id, producer_epoch, state, partitions, timeout_ms, start_timestamp_ms,
                         last_update_timestamp_ms, client_transaction_version, previous_producer_id, next_producer_id,
                         next_producer_epoch, value_version, tombstone, log_partition, log_offset))


class _RecordBuilder(FrozenRecord):
    """Builds TxnLogRecord instances without the frozen dataclass ``__init__``'s cost.

    A frozen record sets each field through ``object.__setattr__``, a call per field. This
    class has the very same ``__slots__`` layout (and base) and a plain ``__init__``; once filled, the
    instance's ``__class__`` is switched to TxnLogRecord (CPython allows that between
    layout-compatible classes), so callers get a genuine frozen TxnLogRecord.
    """

    __slots__ = TxnLogRecord.__slots__
    # Not read-only while it is filled: both, or the type's one slot for them stays the Python one (4.6x slower).
    __setattr__, __delattr__ = object.__setattr__, object.__delattr__

    def __init__(
        self, transactional_id, producer_id, producer_epoch, state, partitions, timeout_ms,
        start_timestamp_ms, last_update_timestamp_ms, client_transaction_version,
        previous_producer_id, next_producer_id, next_producer_epoch, value_version, tombstone,
        log_partition, log_offset,
    ):  # fmt: skip
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.state = state
        self.partitions = partitions
        self.timeout_ms = timeout_ms
        self.start_timestamp_ms = start_timestamp_ms
        self.last_update_timestamp_ms = last_update_timestamp_ms
        self.client_transaction_version = client_transaction_version
        self.previous_producer_id = previous_producer_id
        self.next_producer_id = next_producer_id
        self.next_producer_epoch = next_producer_epoch
        self.value_version = value_version
        self.tombstone = tombstone
        self.log_partition = log_partition
        self.log_offset = log_offset


def _class_switch_works() -> bool:
    probe = tuple(range(len(TxnLogRecord.__slots__)))
    try:
        record = _RecordBuilder(*probe)
        record.__class__ = TxnLogRecord  # type: ignore[assignment]
    except TypeError:  # an interpreter that refuses the switch: use the dataclass __init__
        return False
    return record == TxnLogRecord(*probe)  # type: ignore[arg-type]


_FAST_RECORDS = _class_switch_works()


@slotted
@record
class UndecodedRecord(FrozenRecord):
    """A record the decoder did not turn into a :class:`TxnLogRecord`, kept with its log position so it
    is counted, never raised: a key or value version it does not know (``kind`` KIND_UNKNOWN_VERSION,
    e.g. a newer broker's), or bytes that are not a well-formed record (KIND_CORRUPT, reason in ``error``)."""

    kind: str
    log_partition: int = -1
    log_offset: int = -1
    error: str | None = None

    def __init__(self, kind: str, log_partition: int = -1, log_offset: int = -1, error: str | None = None) -> None:
        set_slots(self, (kind, log_partition, log_offset, error))


class TxnLogEntry(NamedTuple):
    """One record as read from the log: what it decoded to, and the Kafka record timestamp (the only
    time a tombstone has; -1 when unknown)."""

    record: TxnLogRecord | UndecodedRecord
    timestamp_ms: int = -1


@record
class DecodeCounts(Record):
    """How many records of each kind were decoded (``records`` decoded, the rest kept as undecoded)."""

    records: int = 0
    unknown_version: int = 0
    corrupt: int = 0

    def __init__(self, records: int = 0, unknown_version: int = 0, corrupt: int = 0) -> None:
        self.__dict__.update(records=records, unknown_version=unknown_version, corrupt=corrupt)

    def count(self, decoded: TxnLogRecord | UndecodedRecord) -> None:
        if type(decoded) is TxnLogRecord:
            self.records += 1
        elif decoded.kind == KIND_CORRUPT:
            self.corrupt += 1
        else:
            self.unknown_version += 1
