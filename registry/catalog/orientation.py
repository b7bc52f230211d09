"""Which side of a pair is the target, decided again when a model's size changes.

A pair's target is the bigger base model (``pairing.base_is_target``), decided when the pair was made from what the
sizes were then. A size can change later: header-only uploads came first (no tensors, so a size from a label or none)
and the files with tensor data arrived after them (registry.catalog.sizes). A pair whose sides no longer agree with
the sizes is turned round: its files swapped, its verdict checked again in the new direction (the vocabulary rules are
not symmetric: a draft may not have more tokens than its target), every class combination settled again, and a
changed verdict recorded with its reason, as an upgrade's recheck records one. Staff's pinned pairs are left as they
chose them; so is a pair whose reverse already exists (a user asked for that direction).
"""

from __future__ import annotations

from django.db.models import Q
from django.utils import timezone

from inspector.compat import check_pair
from registry.cache_keys import bump_generation
from registry.catalog.bases import resize
from registry.catalog.pairing import base_is_target, pair_fields
from registry.catalog.settling import settle
from registry.catalog.stored import load_info
from registry.formatting import params
from registry.models import BaseModel, Pair, PairCheckResult, VerdictChange

LIMIT = 5000  # the pairs of one model turned per registration; a model has far fewer pairs with the wrong side


def reorient(base: BaseModel) -> int:
    """Turn round every pair of ``base`` whose target is now the smaller model; returns how many were turned."""
    pairs = (
        Pair.objects.filter(Q(target_base=base) | Q(draft_base=base), files_pinned=False)
        .select_related("target_base", "draft_base", "target__model__family", "draft__model__family")
        .order_by("pk")[:LIMIT]
    )
    wrong = [p for p in pairs if p.target_base and p.draft_base and not base_is_target(p.target_base, p.draft_base)]
    turned = [p for p in wrong if not Pair.objects.filter(target_base=p.draft_base, draft_base=p.target_base).exists()]
    for p in turned:
        _turn(p)
    if turned:
        bump_generation()
    return len(turned)


def _turn(p: Pair) -> None:
    old = (p.compatible, p.failed_rule, p.rules_from)
    p.target, p.draft = p.draft, p.target
    p.target_base, p.draft_base = p.draft_base, p.target_base
    result = check_pair(load_info(p.target), load_info(p.draft))
    # The columns registration writes for a check (verdict, size ratio, names, search text), from the one builder.
    for k, v in pair_fields(result, p.target, p.draft, timezone.now()).items():
        setattr(p, k, v)
    p.save()
    PairCheckResult.objects.filter(pair=p).delete()  # the full check was of the other direction
    settle([p]).save()  # every class combination in the new direction, and the files it shows
    p.refresh_from_db()
    bigger, smaller = p.target_base, p.draft_base
    if bigger is None or smaller is None:  # reorient turns only pairs of two base models
        return
    # Recorded even where the verdict reads the same: it is now a verdict on the other direction (the pair page's
    # history says so).
    VerdictChange.objects.create(
        pair=p,
        old_compatible=old[0],
        new_compatible=p.compatible,
        old_failed_rule=old[1],
        new_failed_rule=p.failed_rule,
        old_rules_from=old[2],
        new_rules_from=p.rules_from,
        new_state=result.state.get("kind", ""),
        reason=(
            f"target and draft swapped: {bigger.name} ({params(bigger.parameter_count)}, from its "
            f"{bigger.size_evidence or 'files'}) is bigger than {smaller.name} ({params(smaller.parameter_count)})"
        )[:300],
        changed_at=timezone.now(),
    )


def resize_all() -> tuple[int, int]:
    """Every base model sized again from its files, and the pairs of those whose size changed oriented again (a
    registry made before sizes had levels of evidence); returns (models resized, pairs turned)."""
    resized = turned = 0
    for base in BaseModel.objects.order_by("pk").iterator(chunk_size=500):
        if resize(base):
            resized += 1
            turned += reorient(base)
    return resized, turned
