"""The audit's decisions: pure functions over ``__transaction_state`` histories, no Spark, no broker.

The rule the audit enforces: a transactional id stays the same across restarts of one application
instance and differs between instances. The log shows both breaches.

The rules are split by what they do: :mod:`~kafkatxn.audit.history` walks one id's records (the
state machine that counts inits, transactions, fences and timeouts), :mod:`~kafkatxn.audit.findings`
turns per-id stats into findings, :mod:`~kafkatxn.audit.inventory` reads the inventory and checks it,
and this module assembles the result (:func:`finish`, :func:`audit_local`). The names callers use
stay importable from here.

What it finds: **shared ids** (critical; fences in bursts), **unstable id families** (warning; ids
replaced rather than reused, each pinning broker state until it expires), **re-initialisation
storms** (one id initialised again and again), all in findings.py, and **inventory conflicts**
(warning; ids declared twice, declared and not seen, seen and not declared), in inventory.py.

Timestamps are the coordinator's (``last_update_timestamp_ms``); tombstones carry the Kafka record
timestamp when the input has one. "Now" for expiry is the newest timestamp in the data, so the
result depends on the data only.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

# Families (an id's shape, the framework it matches) live in families.py, which the live exporter
# uses without this module; their names, and those of the rules' parts, stay importable here.
from kafkatxn.audit.families import (  # noqa: F401
    ADVICE, FRAMEWORK_FLINK, FRAMEWORK_NUMBERED, FRAMEWORK_OTHER, FRAMEWORK_RANDOM, FRAMEWORK_STREAMS, STATE_BYTES_PER_ID,
    STATE_BYTES_PER_PARTITION, family_of, framework_of, state_bytes,
)
from kafkatxn.audit.findings import (  # noqa: F401
    FamilyMember, FamilySummary, InitStormFinding, SharedIdFinding, UnstableFamilyFinding, family_summary,
    init_storm_finding, peak_concurrency, shared_id_finding, siblings_median, sort_families, storm_cause,
    unstable_family_finding,
)
from kafkatxn.audit.history import (  # noqa: F401
    DEFAULT_ID_EXPIRATION_MS, MAX_LISTED, MAX_STORM_LISTED, SEVERITY_CRITICAL, SEVERITY_WARNING, AuditParams,
    HistoryRecord, IdStats, densest_window, group_histories, max_in_window, median, storm_evidence, summarize_id,
)
from kafkatxn.audit.inventory import (  # noqa: F401
    Declaration, InventoryFinding, InventoryIndex, UndeclaredGroup, inventory_findings, parse_inventory,
    read_inventory, sort_inventory, undeclared_groups,
)


@dataclass
class AuditResult:
    records: int
    transactional_ids: int
    unknown_records: int
    corrupt_records: int
    first_record_ms: int
    last_record_ms: int
    shared_ids: list[SharedIdFinding]
    unstable_ids: list[UnstableFamilyFinding]
    inventory: list[InventoryFinding]
    init_storms: list[InitStormFinding] = field(default_factory=list)
    families: list[FamilySummary] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        from kafkatxn.errors import EXIT_CRITICAL, EXIT_OK, EXIT_WARNING

        if self.shared_ids or any(f.severity == SEVERITY_CRITICAL for f in self.init_storms):
            return EXIT_CRITICAL
        if self.unstable_ids or self.inventory or self.init_storms:
            return EXIT_WARNING
        return EXIT_OK

    def comparable(self) -> dict:
        """Everything but where the data came from: two runs over the same data compare equal."""
        from kafkatxn.plain import to_plain

        doc = to_plain(self)
        doc.pop("sources", None)
        return doc


def finish(
    stats: Sequence[IdStats],
    params: AuditParams,
    records: int,
    unknown: int,
    corrupt: int,
    declarations: Sequence[Declaration] | None,
) -> AuditResult:
    """Findings from per-id stats; the reference for what the Spark job does stage by stage."""
    shared = sorted(
        (f for f in (shared_id_finding(s, params) for s in stats) if f is not None), key=lambda f: f.transactional_id
    )
    families: dict[str, list[IdStats]] = defaultdict(list)
    for s in stats:
        families[s.family].append(s)
    unstable = sorted(
        (f for f in (unstable_family_finding(fam, ms, params) for fam, ms in families.items()) if f is not None),
        key=lambda f: f.family,
    )
    churning = {f.family for f in unstable}
    summaries = sort_families(
        f for f in (family_summary(fam, ms, params, fam in churning) for fam, ms in families.items()) if f is not None
    )
    storms = sorted(
        (
            f
            for f in (
                init_storm_finding(s, params, [m.max_inits_in_window for m in families[s.family]])
                for s in stats
                if s.max_inits_in_window >= params.storm_min_inits
            )
            if f is not None
        ),
        key=lambda f: f.transactional_id,
    )
    inventory: list[InventoryFinding] = []
    if declarations is not None:
        matched = {i for s in stats for i in s.declared_by}
        inventory = inventory_findings(declarations, matched, undeclared_groups(stats))
    seen = [t for s in stats for t in (s.first_seen_ms, s.last_seen_ms) if t >= 0]
    return AuditResult(
        records=records,
        transactional_ids=len(stats),
        unknown_records=unknown,
        corrupt_records=corrupt,
        first_record_ms=min(seen, default=-1),
        last_record_ms=max(seen, default=-1),
        shared_ids=shared,
        unstable_ids=unstable,
        inventory=inventory,
        init_storms=storms,
        families=summaries,
    )


def audit_local(
    records: Iterable[Any],
    params: AuditParams = AuditParams(),
    declarations: Sequence[Declaration] | None = None,
    unknown: int = 0,
    corrupt: int = 0,
) -> AuditResult:
    """The whole audit in one process: the benchmark reference and the oracle for the Spark job.

    ``records`` are decoded records (TxnLogRecord or HistoryRecord), in any order; duplicates of
    one log position (a history overlapping the live log) count once.
    """
    seen_positions: set[tuple[int, int]] = set()
    unique: list[Any] = []
    for r in records:
        pos = (r.log_partition, r.log_offset)
        if pos in seen_positions:
            continue
        seen_positions.add(pos)
        unique.append(r)
    index = InventoryIndex(declarations) if declarations is not None else None
    stats = [summarize_id(group, params, index) for group in group_histories(unique)]
    return finish(stats, params, len(unique), unknown, corrupt, declarations)
