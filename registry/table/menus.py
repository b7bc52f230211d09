"""The pairs table's filter menus: the values results actually have."""

from __future__ import annotations

from registry.cache_keys import TTL, cached
from registry.models import ReportedResult
from registry.results.figures import usable_measured


def facets() -> dict[str, list[str]]:
    """Values offered in the filter menus: those that results actually have (cached briefly)."""
    return cached("facets", "", _facets, ttl=max(TTL, 30))


def _facets() -> dict[str, list[str]]:
    out: dict[str, set[str]] = {"content_type": set(), "hardware": set(), "build": set(), "method": set()}
    for qs in (ReportedResult.objects.all(), usable_measured()):
        qs = qs.order_by()  # a model's default ordering would join the DISTINCT
        out["content_type"] |= set(qs.exclude(content_type="").values_list("content_type", flat=True).distinct())
        out["hardware"] |= set(qs.exclude(hardware="").values_list("hardware", flat=True).distinct())
        out["build"] |= set(qs.exclude(llama_cpp_build="").values_list("llama_cpp_build", flat=True).distinct())
        out["method"] |= set(qs.values_list("method", flat=True).distinct())
    facets = {k: sorted(v) for k, v in out.items()}
    # Concurrencies are measured ones only (reported figures carry none), as text like the other menus, in
    # numeric order.
    clients = usable_measured().order_by().values_list("clients", flat=True).distinct()
    facets["clients"] = [str(c) for c in sorted(set(clients))]
    return facets
