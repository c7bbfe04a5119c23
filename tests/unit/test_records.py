"""The model's records (``model.Record``, ``model.FrozenRecord``) are dataclasses declared without
generated methods: each must behave as the ``@dataclass`` it replaces (``frozen=True`` for a frozen
record), field for field: made by position and by keyword, defaults, equality, hash, repr, the
errors of a read-only field, ``dataclasses.replace``, pickling."""

from __future__ import annotations

import dataclasses
import pickle
import sys

import pytest

from kafkatxn import (
    check, diagnose_rows, facts, facts_lso, facts_scan, gather, group_positions, hanging, lost_commit, lso, model,
    monitoring_plugin, pinning, producers, snapshot, transaction_samples, txnlog_records, verdicts, verdicts_age,
)
from kafkatxn.config import properties, providers, stores

RECORDS = [c for module in (model, verdicts, verdicts_age, check, monitoring_plugin, snapshot, transaction_samples, pinning, gather, properties, providers,
                            stores, lso, facts_lso, facts, lost_commit, group_positions, diagnose_rows, txnlog_records, facts_scan, hanging,
                            producers) for c in vars(module).values()
           if isinstance(c, type) and issubclass(c, model.Record)
           and c not in (model.Record, model.FrozenRecord, txnlog_records._RecordBuilder)
           and c.__module__ == module.__name__] + [lso.WatchedPartitionLag, lso.WatchedGroupLag]  # (made when first asked for)


def twin(cls: type) -> type:
    """The class ``@dataclass`` would make of ``cls``'s fields (frozen as ``cls`` is, with slots as a
    :func:`kafkatxn.records.slotted` one has)."""
    fields = [(f.name, f.type, dataclasses.field(default=f.default, default_factory=f.default_factory))
              for f in dataclasses.fields(cls)]
    return dataclasses.make_dataclass(cls.__name__, fields, frozen=issubclass(cls, model.FrozenRecord),
                                      slots="__slots__" in vars(cls))


def test_every_record_of_the_model_is_checked_here():
    assert {c.__name__ for c in RECORDS} >= {"BrokerInfo", "ClusterMetadata", "Missing", "Partial", "Part", "Broker",
                                             "OpenTransaction", "Classification", "CoordinatorView", "TransactionAge",
                                             "Thresholds", "Finding", "CheckResult", "Range", "PerfDatum",
                                             "TransactionSample", "CandidateSample", "HangingSample", "UntrackedSample",
                                             "UndeterminedSample", "ClusterSnapshot", "VerdictSamples", "PinFacts",
                                             "TransactionConfigs", "PropertyLine", "_Opened", "_Provider",
                                             # the records of lso, check, hanging and producers, once dataclasses
                                             "PartitionLag", "WatchedPartitionLag", "LsoReport", "LsoSnapshot",
                                             "GroupSnapshot", "HeldGroupSnapshot", "ProducerStates", "Pins", "LogEvidence",
                                             "GroupPosition", "GroupLag", "WatchedGroupLag", "GroupSummary",
                                             "PartitionDiagnosis", "PinningTransaction", "TxnLogRecord",
                                             "UndecodedRecord", "DecodeCounts", "Scan", "HangingRow", "UntrackedRow",
                                             "_CandidateColumns", "LongRunningRow", "UndeterminedRow", "HangingResult",
                                             "ProducerRow", "ProducerSummaryRow"}


@pytest.mark.parametrize("cls", RECORDS, ids=lambda c: c.__name__)
def test_a_record_behaves_as_the_dataclass_it_declares(cls):
    made_by = twin(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    assert cls._FIELDS == tuple(names)
    values = [f"{name}-value" for name in names]
    others = [f"{name}-other" for name in names]
    record, generated = cls(*values), made_by(*values)

    assert repr(record) == repr(generated)
    assert record == cls(*values) and record == cls(**dict(zip(names, values)))
    assert record != cls(*others) and record != generated and not (record == generated)
    assert dataclasses.asdict(record) == dataclasses.asdict(generated)
    assert dataclasses.replace(record, **{names[0]: "changed"}) == cls("changed", *values[1:])
    assert pickle.loads(pickle.dumps(record)) == record
    assert hasattr(record, "__dict__") == hasattr(generated, "__dict__")
    assert sys.getsizeof(record) == sys.getsizeof(generated)  # a slotted one: as small
    if not hasattr(record, "__dict__"):  # pickled as that dataclass is: the list of its values
        assert record.__getstate__() == generated.__getstate__() and type(record.__getstate__()) is list

    required = [f for f in dataclasses.fields(cls)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    assert repr(cls(*values[:len(required)])) == repr(made_by(*values[:len(required)]))  # the defaults

    if issubclass(cls, model.FrozenRecord):
        assert hash(record) == hash(generated) == hash(cls(*values))
        for name in (names[0], "not_a_field"):
            for change in (lambda obj: setattr(obj, name, 1), lambda obj: delattr(obj, name)):
                with pytest.raises(dataclasses.FrozenInstanceError) as ours:
                    change(record)
                if name not in names and "__slots__" in vars(cls):
                    continue  # the slotted dataclass raises TypeError there (its super(cls, self) names the class it replaced)
                with pytest.raises(dataclasses.FrozenInstanceError) as theirs:
                    change(generated)
                assert str(ours.value) == str(theirs.value)
    else:
        with pytest.raises(TypeError):
            hash(record)
        setattr(record, names[0], "set")
        setattr(generated, names[0], "set")
        assert repr(record) == repr(generated)


def test_a_default_made_afresh_is_made_for_each_record():
    first, second = model.Partial(1), model.Partial(1)
    first.missing.append(model.Missing(model.Part("p"), "r"))
    assert second.missing == [] and model.DescribedTransactions().found is not model.DescribedTransactions().found


def test_a_log_record_made_by_switching_its_class_is_the_record_its_init_makes():
    values = ("id", 7, 1, "Ongoing", ("t-0",), 60_000, 1, 2, 0, -1, -1, -1, 1, False, 3, 42)
    built = txnlog_records._RecordBuilder(*values)
    built.__class__ = txnlog_records.TxnLogRecord
    assert txnlog_records._FAST_RECORDS and built == txnlog_records.TxnLogRecord(*values)
    assert hash(built) == hash(txnlog_records.TxnLogRecord(*values))


def test_rows_held_as_columns_take_records_and_refuse_slotted_ones():
    from kafkatxn.plain import RecordColumns, made_rows

    names = model.BrokerInfo._FIELDS  # its base's empty __slots__ leaves it a __dict__ to fill
    assert made_rows(model.BrokerInfo, names, [(1, "h", 9092, None)]) == [model.BrokerInfo(1, "h", 9092)]
    assert list(RecordColumns(model.BrokerInfo, {"id": [1], "host": ["h"], "port": [9092], "rack": [None]})) == [model.BrokerInfo(1, "h", 9092)]
    with pytest.raises(TypeError):
        made_rows(txnlog_records.UndecodedRecord, txnlog_records.UndecodedRecord._FIELDS, [("k", 0, 1, None)])
    with pytest.raises(TypeError):
        RecordColumns(txnlog_records.UndecodedRecord, {"kind": [], "log_partition": [], "log_offset": [], "error": []})
