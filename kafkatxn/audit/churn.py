"""Transactional-id churn between two looks at the coordinators (ListTransactions), as metrics.

A deployment that makes a new transactional id per run, batch or checkpoint leaves each behind in
the coordinators until ``transactional.id.expiration.ms`` (7 days by default), and every one holds
broker memory. The audit finds such families in the log; this shows them live: how many ids the
coordinators know, and how many appeared since the previous look, per family (the id's shape,
:func:`kafkatxn.audit.families.family_of`) when asked. A steady stream of new ids in one family is a
leak a dashboard can alert on long before the brokers run short of memory.

:class:`IdChurn` is the pure computation (it remembers the previous set of ids);
:func:`churn_metric_families` turns one :class:`ChurnSample` into Prometheus metric families.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from kafkatxn.audit.families import family_of


@dataclass(frozen=True)
class ChurnSample:
    ids: int  # transactional ids the coordinators know now
    new_ids: int  # of which not known at the previous look (0 at the first look: no baseline)
    appeared_total: int  # new ids summed over every look since the tracker started
    baseline: bool  # False at the first look
    ids_by_family: dict[str, int] = field(default_factory=dict)
    new_by_family: dict[str, int] = field(default_factory=dict)
    appeared_total_by_family: dict[str, int] = field(default_factory=dict)


class IdChurn:
    """Compares each listing of transactional ids with the previous one."""

    def __init__(self) -> None:
        self._previous: frozenset[str] | None = None
        self._families: dict[str, str] = {}  # id -> family, for the ids of the previous look
        self._appeared = 0
        self._appeared_by_family: Counter[str] = Counter()

    def observe(self, ids: Iterable[str]) -> ChurnSample:
        now = frozenset(ids)
        known = self._families
        # Masking an id costs a few regex passes: only ids not seen at the previous look pay them.
        families = {t: known.get(t) or family_of(t) for t in now}
        by_family = Counter(families.values())
        baseline = self._previous is not None
        new = now - self._previous if self._previous is not None else frozenset()
        new_by_family = Counter(families[t] for t in new)
        self._appeared += len(new)
        self._appeared_by_family.update(new_by_family)
        self._previous, self._families = now, families
        return ChurnSample(
            ids=len(now),
            new_ids=len(new),
            appeared_total=self._appeared,
            baseline=baseline,
            ids_by_family=dict(by_family),
            new_by_family={f: new_by_family.get(f, 0) for f in by_family},
            appeared_total_by_family=dict(self._appeared_by_family),
        )


def churn_metric_families(sample: ChurnSample, per_family: bool = False) -> Iterator[object]:
    """``kafkatxn_transactional_ids``, ``kafkatxn_transactional_ids_new`` (since the previous look) and
    the counter ``kafkatxn_transactional_ids_appeared_total``; with a ``family`` label when ``per_family``."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    docs = (
        "Transactional ids the coordinators know (ListTransactions, every state).",
        "Transactional ids that appeared since the previous gather (0 at the first).",
        "Transactional ids that appeared since the exporter started (rate() of it is the id creation rate).",
    )
    if not per_family:
        yield GaugeMetricFamily("kafkatxn_transactional_ids", docs[0], value=sample.ids)
        yield GaugeMetricFamily("kafkatxn_transactional_ids_new", docs[1], value=sample.new_ids)
        yield CounterMetricFamily("kafkatxn_transactional_ids_appeared", docs[2], value=sample.appeared_total)
        return
    ids = GaugeMetricFamily("kafkatxn_transactional_ids", docs[0], labels=["family"])
    new = GaugeMetricFamily("kafkatxn_transactional_ids_new", docs[1], labels=["family"])
    appeared = CounterMetricFamily("kafkatxn_transactional_ids_appeared", docs[2], labels=["family"])
    for fam in sorted(sample.ids_by_family):
        ids.add_metric([fam], sample.ids_by_family[fam])
        new.add_metric([fam], sample.new_by_family.get(fam, 0))
    for fam in sorted(sample.appeared_total_by_family):  # a family gone from the listing keeps its count
        appeared.add_metric([fam], sample.appeared_total_by_family[fam])
    yield ids
    yield new
    yield appeared
