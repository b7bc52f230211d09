"""The pairs table's sort orders as keys of non-null expressions, one index each (declared on Pair)."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import models
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce

# NULL sorts last in every order the table offers. Row comparisons (what a keyset cursor needs)
# are NULL as soon as one value is, so nullable columns are keyed through COALESCE with a value
# beyond every real one: LOW below all speedups, acceptances, Ks and ratios (all >= 0) for
# descending orders, HIGH_* above them for ascending ones.
LOW_FLOAT = -1.0
LOW_INT = -1
HIGH_FLOAT = 1e300
HIGH_INT = 2_147_483_647  # PostgreSQL's integer maximum: best_k is an integer column


@dataclass(frozen=True)
class SortKey:
    """One order: its expressions (the pair id last, in the same direction) and the cursor's value types."""

    name: str  # as in ?sort=, without the leading "-"
    descending: bool
    expressions: tuple[models.Expression | F, ...]
    kinds: tuple[str, ...]  # "float", "int", "str" or "datetime", one per expression, then "int" for the id

    @property
    def sort(self) -> str:
        return f"-{self.name}" if self.descending else self.name


def _nullable(column: str, descending: bool, kind: str) -> models.Expression:
    if kind == "int":
        return Coalesce(F(column), Value(LOW_INT if descending else HIGH_INT))
    return Coalesce(F(column), Value(LOW_FLOAT if descending else HIGH_FLOAT))


# ?sort= name -> (column, value kind, nullable)
COLUMNS: dict[str, tuple[str, str, bool]] = {
    "speedup": ("best_speedup", "float", True),
    "predicted": ("predicted_speedup", "float", True),
    "acceptance": ("best_acceptance", "float", True),
    "k": ("best_k", "int", True),
    "ratio": ("size_ratio", "float", True),
    "target": ("target_name", "str", False),
    "draft": ("draft_name", "str", False),
    "checked": ("checked_at", "datetime", False),
}


def sort_key(sort: str) -> SortKey:
    """The key of ``sort`` ("-speedup", "target", …; the caller has checked the name)."""
    descending, name = sort.startswith("-"), sort.lstrip("-")
    column, kind, nullable = COLUMNS[name]
    first = _nullable(column, descending, kind) if nullable else F(column)
    if sort == "-speedup":  # the default: among equal speedups (and untested pairs) the biggest ratio first
        second = _nullable("size_ratio", True, "float")
        return SortKey(name, True, (first, second, F("id")), ("float", "float", "int"))
    return SortKey(name, descending, (first, F("id")), (kind, "int"))


def sort_key_indexes() -> list[models.Index]:
    """One index per distinct key: a non-null column serves both directions (scanned backwards).

    Each key is indexed twice: over all pairs (the "any", "usable" and "compatible" filters, where walking
    the index and skipping the few incompatible pairs is cheap) and over the incompatible pairs
    alone (usually a small share: walking all pairs for them would skip most of the table).
    """
    out = []
    for name, (_, _, nullable) in COLUMNS.items():
        for sort in (f"-{name}", name) if nullable else (name,):
            key = sort_key(sort)
            suffix = ("desc" if key.descending else "asc") if nullable else "key"
            out.append(models.Index(*key.expressions, name=f"pairkey_{name}_{suffix}"))
            out.append(models.Index(*key.expressions, name=f"pairbad_{name}_{suffix}", condition=Q(compatible=False)))
    return out
