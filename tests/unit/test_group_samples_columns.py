"""The exporter's group samples as columns (snapshot.GroupSamples): the caught-up places made a group at
a time, the rest placed by group_positions. Read as rows, they must be exactly the sample of every place
group_positions makes (the one definition), in its order, whatever the snapshot: commits at, past and
below both offsets, none committed, offsets missing or of -1, unstable groups, a topic filter."""

from __future__ import annotations

import random

import pytest

from kafkatxn import facts_lso, group_positions, snapshot
from kafkatxn.exporter_metrics import ExportOptions, metric_families
from kafkatxn.facts_lso import NO_COMMIT
from kafkatxn.model import ProducerState, TopicPartition, TransactionDescription
from kafkatxn.snapshot import ClusterSnapshot, GroupSample, GroupSamples
from kafkatxn.verdicts import OpenTransaction
from kafkatxn.verdicts_groups import Offsets

NOW = 1_700_000_000_000


def _snap(seed: int) -> facts_lso.GroupSnapshot:
    rng = random.Random(seed)
    tps = [TopicPartition(f"t{t}", p) for t in range(4) for p in range(6)]
    offsets, open_txns = {}, {}
    for tp in tps[:-2]:  # the last two partitions' offsets did not arrive
        hw = rng.choice([-1, 0, rng.randint(0, 30)])
        lso = hw if rng.random() < 0.6 else rng.randint(min(hw, 0), max(hw, 0))
        if rng.random() < 0.05:
            lso = hw + 2  # a leader moved between the two reads
        offsets[tp] = Offsets(hw, lso)
        if 0 <= lso < hw:
            state = ProducerState(1000 + tp.partition, 0, 0, NOW - 5_000, 0, lso)
            described = TransactionDescription(f"tx-{tp}", 1, "Ongoing", 1000 + tp.partition, 0, 60_000, NOW - 9_000,
                                               frozenset([tp]))
            open_txns[tp] = [OpenTransaction(tp, state, f"tx-{tp}", described)]
    committed: dict[str, dict[TopicPartition, int]] = {}
    for g in range(40):
        mine = rng.sample(tps, rng.randint(0, 8))
        caught_up = rng.random() < 0.4  # every commit at or past both offsets
        committed[f"g{g:02}"] = {
            tp: NO_COMMIT if rng.random() < 0.1 and not caught_up else
            (max(offsets[tp]) + rng.randint(0, 2) if caught_up else max(offsets[tp]) + rng.randint(-3, 2)) if tp in offsets
            else rng.randint(0, 5)
            for tp in mine
        }
    lso_snap = facts_lso.LsoSnapshot(NOW, offsets, open_txns)
    offsets_tp = TopicPartition("__consumer_offsets", 0)
    unstable = {g: frozenset(list(c)[:1]) for g, c in committed.items() if c and rng.random() < 0.1}
    first_readable = {(tp, c): (None if rng.random() < 0.5 else offsets[tp].last_stable_offset - 1)
                      for cs in committed.values() for tp, c in cs.items() if tp in offsets and 0 <= c < offsets[tp].last_stable_offset}
    return facts_lso.GroupSnapshot(lso_snap, committed, first_readable, [], {tp: 0 for tp in tps},
                                   {g: offsets_tp for g in committed}, unstable)


def _every_place(snap: facts_lso.GroupSnapshot, topics: set[str] | None) -> tuple[GroupSample, ...]:
    """The sample of each place group_positions makes, one by one (as group_samples made them before)."""
    out = []
    for place in group_positions.group_positions(snap):
        group, tp, _committed, _offsets, _verdict, _readable, lag_to_lso, lag_to_hw, lag, held = place
        if topics is not None and tp.topic not in topics:
            continue
        out.append(snapshot._held_sample(snap, place) if held is not None else
                   GroupSample(group, tp.topic, tp.partition, lag, lag_to_lso, lag_to_hw, False))
    return tuple(out)


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("topics", [None, {"t1", "t3"}])
def test_the_columns_read_as_rows_are_every_places_sample(seed, topics):
    snap = _snap(seed)
    made = snapshot.group_samples(snap, topics)
    expected = _every_place(snap, topics)
    assert type(made) is GroupSamples
    assert made == expected and tuple(made) == expected and len(made) == len(expected)
    assert [made[i] for i in range(len(made))] == list(expected)
    assert made.held_rows() == [i for i, s in enumerate(expected) if s.blocked or s.waiting]
    assert GroupSamples.of(expected) == expected  # and back


def test_the_exporters_families_are_those_of_the_samples_as_a_tuple():
    """metric_families over the columns and over the same samples as a tuple of GroupSample (as the tests make them)."""
    for seed in range(10):
        snap = _snap(seed)
        made = snapshot.group_samples(snap, None)
        for per_group in (False, True):
            options = ExportOptions(per_group=per_group)
            as_columns = metric_families(ClusterSnapshot(NOW, groups=made), options)
            as_rows = metric_families(ClusterSnapshot(NOW, groups=tuple(made)), options)
            assert [(f.name, f.samples) for f in as_columns] == [(f.name, f.samples) for f in as_rows]


def _every_case() -> facts_lso.GroupSnapshot:
    """A group per case, on a partition of its own: every commit (none committed too) against every pair of
    offsets up to 4 (the LSO past the high watermark too: a leader moved between the reads), each gap below
    the LSO not probed, probed to nothing, to a record below the LSO or to one at it, and each group with
    and without unstable offsets; a last partition whose offsets did not arrive."""
    offsets, committed, first_readable, unstable, open_txns = {}, {}, {}, {}, {}
    n = 0
    for hw in range(-1, 5):
        for lso in range(-1, 5):
            for c in range(-1, 6):
                for probe in ("none", None, "below", "at"):
                    for is_unstable in (False, True):
                        if probe != "none" and not 0 <= c < lso:
                            continue  # only a gap below the LSO is probed
                        tp = TopicPartition(f"t{n % 7}", n)
                        n += 1
                        offsets[tp] = Offsets(hw, lso)
                        group = f"g{n:05}"
                        committed[group] = {tp: NO_COMMIT if c < 0 else c, TopicPartition("gone", n): 0}
                        if probe != "none":
                            first_readable[(tp, c)] = None if probe is None else lso - 1 if probe == "below" else lso
                        if is_unstable:
                            unstable[group] = frozenset([tp])
                        if 0 <= lso < hw:
                            state = ProducerState(1000 + n, 0, 0, NOW - 5_000, 0, lso)
                            described = TransactionDescription(f"tx-{n}", 1, "Ongoing", 1000 + n, 0, 60_000, NOW - 9_000,
                                                               frozenset([tp]))
                            open_txns[tp] = [OpenTransaction(tp, state, f"tx-{n}", described)]
    offsets_tp = TopicPartition("__consumer_offsets", 0)
    offsets[offsets_tp] = Offsets(5, 3)
    return facts_lso.GroupSnapshot(facts_lso.LsoSnapshot(NOW, offsets, open_txns), committed, first_readable, [],
                                   {tp: 1 for tp in list(offsets)[::2]}, {g: offsets_tp for g in committed}, unstable)


@pytest.mark.parametrize("topics", [None, {"t1", "t3", "gone"}])
def test_every_case_of_commit_offsets_and_probe_is_placed_as_group_positions_places_it(topics):
    """Each place the columns tell apart by themselves (caught up, past the LSO, below it with records or
    an unread gap, caught up past markers) and each left to group_positions (none committed, at the LSO,
    blocked past markers, unstable, crossed offsets): the sample group_positions makes of it, and no place
    where the offsets did not arrive."""
    snap = _every_case()
    made = snapshot.group_samples(snap, topics)
    expected = _every_place(snap, topics)
    assert len(expected) > 200 and any(s.blocked for s in expected)
    assert tuple(made) == expected
    assert made.held_rows() == [i for i, s in enumerate(expected) if s.blocked or s.waiting]
