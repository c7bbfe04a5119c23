"""A command's run and an exporter scrape pause cyclic collection through one count
(kafkatxn.collection): whichever begins first, collection comes back only when both have ended."""

from __future__ import annotations

import gc

import pytest

from kafkatxn import collection


@pytest.fixture(autouse=True)
def collector_on():
    gc.enable()
    yield
    gc.enable()


@pytest.mark.parametrize("first_ends", ["outer", "inner"])
def test_collection_resumes_when_the_last_overlapping_pass_ends(first_ends):
    collection.pause()  # a scrape begins
    collection.pause()  # its gather's run begins
    assert not gc.isenabled()
    collection.resume()  # either one ends first
    assert not gc.isenabled(), f"the {first_ends} pass ended and the other is still in flight"
    collection.resume()
    assert gc.isenabled()


def test_collection_left_off_stays_off():
    gc.disable()
    collection.pause()
    collection.resume()
    assert not gc.isenabled()


def test_a_run_that_ends_inside_a_scrape_leaves_collection_paused():
    """A run that began before a scrape and ends while the scrape still renders does not turn the
    collector back on under the scrape (two counts, one per kind, did)."""
    from kafkatxn import exposition

    collection.pause()  # a run (Session.one_run) begins
    exposition._pause_collection()  # a scrape's render begins
    collection.resume()  # the run ends
    assert not gc.isenabled()
    exposition._resume_collection()
    assert gc.isenabled()


def test_a_one_shot_pass_leaves_what_it_made_out_of_the_collectors_sight_and_collection_on():
    import gc

    was = gc.isenabled()
    gc.enable()
    try:
        frozen = gc.get_freeze_count()
        with collection.one_shot():
            assert not gc.isenabled()
            made = [[] for _ in range(1000)]
        assert gc.isenabled()
        assert gc.get_freeze_count() >= frozen + len(made)  # a collection after it walks none of them
    finally:
        if not was:
            gc.disable()
