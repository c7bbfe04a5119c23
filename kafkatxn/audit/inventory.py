"""The inventory of declared transactional ids (who owns which id or prefix), parsed and checked
against the ids the log shows: pure, no Spark, no broker.

**Inventory conflicts** (warning): an id or prefix declared by two instances; a declaration nothing
in the log matches; seen ids no declaration covers (grouped by family).
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

from kafkatxn.audit.history import SEVERITY_WARNING
from kafkatxn.errors import UsageError

if TYPE_CHECKING:
    from kafkatxn.audit.history import IdStats


@dataclass(frozen=True)
class InventoryFinding:
    kind: str  # declared_twice, declared_not_seen, undeclared
    severity: str
    subject: str  # the id, prefix or family concerned
    declared_by: list[str]  # "application/instance" of each declaration involved
    ids_seen: int
    first_seen_ms: int
    last_seen_ms: int
    examples: list[str]


@dataclass(frozen=True)
class Declaration:
    application: str
    instance: str
    transactional_id: str | None = None
    prefix: str | None = None

    @property
    def owner(self) -> str:
        return f"{self.application}/{self.instance}"

    @property
    def subject(self) -> str:
        return self.transactional_id if self.transactional_id is not None else f"{self.prefix}*"

    def covers(self, tid: str) -> bool:
        if self.transactional_id is not None:
            return tid == self.transactional_id
        return tid.startswith(self.prefix or "")


class InventoryIndex:
    """Finds the declarations covering an id: exact ids by dict, prefixes by one lookup per length."""

    def __init__(self, declarations: Sequence[Declaration]):
        self.declarations = list(declarations)
        self._exact: dict[str, list[int]] = defaultdict(list)
        self._prefix: dict[str, list[int]] = defaultdict(list)
        for i, d in enumerate(self.declarations):
            if d.transactional_id is not None:
                self._exact[d.transactional_id].append(i)
            else:
                self._prefix[d.prefix or ""].append(i)
        self._lengths = sorted({len(p) for p in self._prefix})

    def match(self, tid: str) -> list[int]:
        found = list(self._exact.get(tid, ()))
        for n in self._lengths:
            if n > len(tid):
                break
            found.extend(self._prefix.get(tid[:n], ()))
        return sorted(found)


def parse_inventory(text: str, source: str = "<inventory>") -> list[Declaration]:
    """CSV (header: application,instance,transactional_id,prefix) or JSON (a list of such objects,
    or ``{"declarations": [...]}``); each declaration names an id or a prefix, not both."""
    stripped = text.lstrip()
    if stripped.startswith("[") or stripped.startswith("{"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{source}: not valid JSON: {exc.msg} at line {exc.lineno}") from None
        except RecursionError:  # json gives up on deep nesting this way, not with JSONDecodeError
            raise UsageError(f"{source}: not valid JSON: nested too deeply") from None
        rows = doc.get("declarations") if isinstance(doc, dict) else doc
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise UsageError(f"{source}: expected a list of objects with application, instance, transactional_id or prefix")
        numbered = [(i + 1, r) for i, r in enumerate(rows)]
        where = "entry"
    else:
        reader = csv.DictReader(io.StringIO(text))
        header = [h.strip() for h in (reader.fieldnames or [])]
        if not {"application", "instance"} <= set(header) or not ({"transactional_id", "prefix"} & set(header)):
            raise UsageError(f"{source}: CSV header must have application, instance, and transactional_id and/or prefix")
        numbered = [(reader.line_num, {(k or "").strip(): v for k, v in r.items()}) for r in reader]
        where = "line"
    out: list[Declaration] = []
    for n, row in numbered:
        app = str(row.get("application") or "").strip()
        inst = str(row.get("instance") or "").strip()
        tid = str(row.get("transactional_id") or "").strip() or None
        prefix = str(row.get("prefix") or "").strip() or None
        if not app or not inst:
            raise UsageError(f"{source}: {where} {n}: application and instance are required")
        if (tid is None) == (prefix is None):
            raise UsageError(f"{source}: {where} {n}: give exactly one of transactional_id and prefix")
        out.append(Declaration(app, inst, tid, prefix))
    return out


def read_inventory(path: str | Path) -> list[Declaration]:
    path = Path(os.path.expanduser(path))  # an unknown ~user left as written, not raised
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"inventory file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read inventory file {path}: {exc.__class__.__name__}") from None
    return parse_inventory(text, str(path))


def _overlap(a: Declaration, b: Declaration) -> str | None:
    """The id or prefix two declarations both claim, or None."""
    if a.transactional_id is not None and b.transactional_id is not None:
        return a.transactional_id if a.transactional_id == b.transactional_id else None
    if a.transactional_id is not None:
        return a.transactional_id if b.covers(a.transactional_id) else None
    if b.transactional_id is not None:
        return b.transactional_id if a.covers(b.transactional_id) else None
    pa, pb = a.prefix or "", b.prefix or ""
    if pa.startswith(pb):
        return f"{pa}*"
    if pb.startswith(pa):
        return f"{pb}*"
    return None


@dataclass(frozen=True)
class UndeclaredGroup:
    family: str
    ids_seen: int
    first_seen_ms: int
    last_seen_ms: int
    examples: list[str]


def undeclared_groups(stats: Iterable[IdStats]) -> list[UndeclaredGroup]:
    """Seen ids no declaration covers, by family (what the Spark job computes with a groupBy)."""
    groups: dict[str, list[IdStats]] = defaultdict(list)
    for s in stats:
        if not s.declared_by:
            groups[s.family].append(s)
    return [
        UndeclaredGroup(
            fam,
            len(members),
            min(m.first_seen_ms for m in members),
            max(m.last_seen_ms for m in members),
            sorted(m.transactional_id for m in members)[:3],
        )
        for fam, members in groups.items()
    ]


def inventory_findings(
    declarations: Sequence[Declaration], matched: set[int], undeclared: Iterable[UndeclaredGroup]
) -> list[InventoryFinding]:
    """Conflicts within the inventory, declarations nothing matched, and seen ids nobody declared."""
    out: list[InventoryFinding] = []
    for i, a in enumerate(declarations):
        for b in declarations[i + 1 :]:
            if (a.application, a.instance) == (b.application, b.instance):
                continue
            claimed = _overlap(a, b)
            if claimed is not None:
                out.append(InventoryFinding("declared_twice", SEVERITY_WARNING, claimed, [a.owner, b.owner], 0, -1, -1, []))
    for i, d in enumerate(declarations):
        if i not in matched:
            out.append(InventoryFinding("declared_not_seen", SEVERITY_WARNING, d.subject, [d.owner], 0, -1, -1, []))
    for g in undeclared:
        out.append(
            InventoryFinding("undeclared", SEVERITY_WARNING, g.family, [], g.ids_seen, g.first_seen_ms, g.last_seen_ms, list(g.examples))
        )
    return sort_inventory(out)


def sort_inventory(findings: Iterable[InventoryFinding]) -> list[InventoryFinding]:
    order = {"declared_twice": 0, "declared_not_seen": 1, "undeclared": 2}
    return sorted(findings, key=lambda f: (order.get(f.kind, 9), f.subject, f.declared_by))
