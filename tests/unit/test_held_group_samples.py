"""``check --groups`` decides on the held places alone (snapshot.held_group_samples): only the commits
behind their high watermark are placed. What it finds must be exactly what the samples of every
place hold: the held ones, in order, and the largest read_committed lag."""

from __future__ import annotations

import random

import pytest

from kafkatxn import facts_lso, snapshot
from kafkatxn.facts_lso import NO_COMMIT
from kafkatxn.model import ProducerState, TopicPartition, TransactionDescription
from kafkatxn.verdicts import OpenTransaction
from kafkatxn.verdicts_groups import Offsets

NOW = 1_700_000_000_000


def _snap(seed: int) -> facts_lso.GroupSnapshot:
    rng = random.Random(seed)
    tps = [TopicPartition(f"t{t}", p) for t in range(4) for p in range(6)]
    offsets, open_txns = {}, {}
    for tp in tps[:-2]:  # the last two partitions' offsets did not arrive
        hw = rng.randint(0, 30)
        lso = hw if rng.random() < 0.6 else rng.randint(0, hw)
        offsets[tp] = Offsets(hw, lso)
        if lso < hw:
            state = ProducerState(1000 + tp.partition, 0, 0, NOW - 5_000, 0, lso)
            described = TransactionDescription(f"tx-{tp}", 1, "Ongoing", 1000 + tp.partition, 0, 60_000, NOW - 9_000,
                                               frozenset([tp]))
            open_txns[tp] = [OpenTransaction(tp, state, f"tx-{tp}", described)]
    committed: dict[str, dict[TopicPartition, int]] = {}
    for g in range(40):
        mine = rng.sample(tps, rng.randint(1, 8))
        committed[f"g{g:02}"] = {
            tp: NO_COMMIT if rng.random() < 0.1 else
            (offsets[tp].high_watermark + rng.randint(-3, 2) if tp in offsets else rng.randint(0, 5))
            for tp in mine
        }
        for tp, c in committed[f"g{g:02}"].items():
            if c != NO_COMMIT and c < 0:
                committed[f"g{g:02}"][tp] = 0
    lso_snap = facts_lso.LsoSnapshot(NOW, offsets, open_txns)
    offsets_tp = TopicPartition("__consumer_offsets", 0)
    unstable = {g: frozenset(list(c)[:1]) for g, c in committed.items() if rng.random() < 0.1}
    first_readable = {(tp, c): (None if rng.random() < 0.5 else offsets[tp].last_stable_offset - 1)
                      for cs in committed.values() for tp, c in cs.items() if tp in offsets and 0 <= c < offsets[tp].last_stable_offset}
    return facts_lso.GroupSnapshot(lso_snap, committed, first_readable, [], {tp: 0 for tp in tps},
                                   {g: offsets_tp for g in committed}, unstable)


@pytest.mark.parametrize("seed", range(25))
@pytest.mark.parametrize("topics", [None, {"t1", "t3"}])
def test_the_held_places_and_the_largest_lag_are_those_of_every_place(seed, topics):
    snap = _snap(seed)
    every = snapshot.group_samples(snap, topics)
    held, lag_max = snapshot.held_group_samples(snap, topics)
    assert held == tuple(s for s in every if s.blocked or s.waiting)
    assert lag_max == max((s.lag_messages for s in every), default=0)


def test_the_snapshot_given_is_not_changed():
    snap = _snap(1)
    before = {g: dict(c) for g, c in snap.committed.items()}
    snapshot.held_group_samples(snap, None)
    assert snap.committed == before
