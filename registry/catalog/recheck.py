"""Checking every stored pair again with the pinned rules, and keeping the verdicts that changed.

A pair's verdict was computed when its files were registered, under the rules of the llama.cpp
build pinned then (``Pair.rules_from``). When the pinned build changes, the stored verdicts may no
longer be what llama.cpp decides; this re-evaluates each pair from the stored inspections (no file
is read again) and records every changed verdict as a ``VerdictChange`` the pair page lists.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from inspector.compat import PairCheck, check_pair
from inspector.info import ModelInfo
from registry.cache_keys import bump_generation
from registry.catalog.combinations import vocabulary_check
from registry.catalog.pairing import VERDICT_FIELDS, verdict_fields
from registry.catalog.settling import settle
from registry.catalog.stored import load_info
from registry.jsonsafe import json_safe
from registry.models import BaseClass, ClassCheck, GGUFFile, Pair, PairCheckResult, VerdictChange

BATCH = 500
# Appended to ``Pair.rules_from`` by an upgrade whose rules moved a kind of pair (migration 0026: recurrent, hybrid and
# memory-less models): the verdict shown is the old build's until ``recheck_pairs --stale`` settles it.
STALE = "+stale"
_INFO_CACHE = 64  # pairs come ordered by target, so a target's info serves all its drafts


@dataclass
class Recheck:
    checked: int
    changes: list[VerdictChange]
    rules_from: str
    classes_changed: int = 0  # pairs of tokenizer classes whose verdict changed


def _verdict(compatible: bool, failed_rule: str) -> str:
    return "compatible" if compatible else f"incompatible ({failed_rule or 'unknown rule'})"


def describe(v: VerdictChange) -> str:
    p = v.pair
    return (
        f"pair {p.pk}: {p.draft.source} drafting for {p.target.source}: "
        f"{_verdict(v.old_compatible, v.old_failed_rule)} under {v.old_rules_from or 'unknown rules'} → "
        f"{_verdict(v.new_compatible, v.new_failed_rule)} under {v.new_rules_from}"
        + (f" ({v.new_state})" if v.new_state and v.new_state != "kv" else "")
    )


def _pairs(stale_only: bool) -> Iterator[list[Pair]]:
    last = 0
    pairs = Pair.objects.filter(rules_from__endswith=STALE) if stale_only else Pair.objects.all()
    while True:
        # Keyset batches by id: each batch is its own short transaction, and pairs registered while
        # this runs are checked by their registration anyway.
        batch = list(
            pairs.filter(pk__gt=last)
            .order_by("pk")
            .select_related("target", "draft")
            .defer("target__info", "draft__info")[:BATCH]
        )
        if not batch:
            return
        last = batch[-1].pk
        yield sorted(batch, key=lambda p: (p.target_id, p.draft_id))


def recheck_pairs(
    dry_run: bool = False, progress: Callable[[int], None] | None = None, stale_only: bool = False
) -> Recheck:
    """Check every stored pair again (or only those an upgrade marked stale); store (unless ``dry_run``) new verdicts
    and the ones that changed, each with its state kind and, where the architecture rule moved it, the reason."""
    infos: OrderedDict[int, ModelInfo] = OrderedDict()

    def info(file_id: int) -> ModelInfo:
        hit = infos.get(file_id)
        if hit is None:
            hit = infos[file_id] = load_info(
                GGUFFile.objects.select_related("token_table").defer("token_table__blob").get(pk=file_id)
            )
            while len(infos) > _INFO_CACHE:
                infos.popitem(last=False)
        infos.move_to_end(file_id)
        return hit

    checked, changes, rules_from = 0, [], ""
    classes_changed = recheck_classes(info, dry_run)
    for batch in _pairs(stale_only):
        now = timezone.now()
        updated, results, batch_changes = [], [], []
        for pair in batch:
            result = check_pair(info(pair.target_id), info(pair.draft_id))
            rules_from = result.rules_from
            failed = result.failed_rule or ""
            if result.compatible != pair.compatible or failed != pair.failed_rule:
                batch_changes.append(
                    VerdictChange(
                        pair=pair,
                        old_compatible=pair.compatible,
                        new_compatible=result.compatible,
                        old_failed_rule=pair.failed_rule,
                        new_failed_rule=failed,
                        old_rules_from=pair.rules_from.removesuffix(STALE),
                        new_rules_from=result.rules_from,
                        new_state=result.state.get("kind", ""),
                        reason=_reason(result, pair.failed_rule)[:300],
                        changed_at=now,
                    )
                )
            for field, value in verdict_fields(result, now).items():
                setattr(pair, field, value)
            updated.append(pair)
            results.append(PairCheckResult(pair=pair, result=json_safe(result.to_dict())))
        checked += len(batch)
        changes += batch_changes
        if not dry_run:
            with transaction.atomic():
                Pair.objects.bulk_update(updated, VERDICT_FIELDS)
                PairCheckResult.objects.filter(pair__in=updated).delete()
                PairCheckResult.objects.bulk_create(results)
                VerdictChange.objects.bulk_create(batch_changes)
                # Every class combination of the pair again (the class checks were rechecked above): its verdict
                # over all of them and the files it shows.
                settled = settle(updated)
                settled.save()
                PairCheckResult.objects.filter(pair__in=settled.pairs).delete()
        if progress:
            progress(checked)
    if not dry_run and (checked or classes_changed):
        bump_generation()  # the table's verdict column and filters are out of date
    return Recheck(checked, changes, rules_from, classes_changed)


def _reason(result: PairCheck, old_failed_rule: str) -> str:
    """Why the verdict moved, where one rule says it: the architecture rule's own words when it was that rule."""
    if "architecture" in (old_failed_rule, result.failed_rule or ""):
        return next((c.detail for c in result.checks if c.rule == "architecture"), "")
    return next((c.detail for c in result.checks if c.rule == result.failed_rule), "")


def recheck_classes(info: Callable[[int], ModelInfo], dry_run: bool) -> int:
    """Decide every stored pair of tokenizer classes again on one file of each; return how many changed."""
    files = dict(BaseClass.objects.order_by("-pk").values_list("tokenizer_class_id", "file_id"))
    changed = 0
    for row in ClassCheck.objects.order_by("pk").iterator():
        if row.a_id not in files or row.b_id not in files:
            continue  # no file of one class is left: nothing pairs on it
        now = vocabulary_check(row.a_id, row.b_id, info(files[row.a_id]), info(files[row.b_id]))
        if (row.compatible, row.failed_rule, row.rules_from) != (now.compatible, now.failed_rule, now.rules_from):
            changed += 1
            if not dry_run:
                ClassCheck.objects.filter(pk=row.pk).update(
                    compatible=now.compatible, failed_rule=now.failed_rule, rules_from=now.rules_from
                )
    return changed
