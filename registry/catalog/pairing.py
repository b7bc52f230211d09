"""Pairing registered files: which files could pair, which one is the target, and the Pair row's fields.

Registration, ``pair_for`` (any two files a user names) and the check of a browser-sent header
all decide the same way here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from inspector.compat import PairCheck, check_pair
from inspector.info import ModelInfo
from inspector.tokens import MAX_SIZE_DIFFERENCE, candidate_keys
from registry.catalog.classes import candidate_classes
from registry.catalog.columns import table_columns
from registry.catalog.stored import load_info
from registry.jsonsafe import json_safe
from registry.models import GGUFFile, Pair, PairCheckResult


def candidate_files(vocab_type: str, n_vocab: int, vocab_key: str) -> QuerySet[GGUFFile]:
    """Registered files whose vocabulary could match: the index key(s) and a ±128 size window."""
    if not vocab_key:
        return GGUFFile.objects.none()
    qs = GGUFFile.objects.filter(
        vocab_type=vocab_type, n_vocab__gte=n_vocab - MAX_SIZE_DIFFERENCE, n_vocab__lte=n_vocab + MAX_SIZE_DIFFERENCE
    )
    keys = candidate_keys(vocab_key)
    return qs if keys is None else qs.filter(vocab_key__in=keys)


def candidates(f: GGUFFile) -> QuerySet[GGUFFile]:
    """Registered files that could pair with ``f``: the files of the classes the class index finds."""
    if f.tokenizer_class is None or not f.vocab_key:
        return GGUFFile.objects.none()
    return GGUFFile.objects.filter(tokenizer_class__in=candidate_classes(f.tokenizer_class)).exclude(pk=f.pk)


def size_key(parameter_count: int, size: int | None, source: str) -> tuple[int, int, str]:
    # The bigger model is the target; ties (the same model twice) fall to file size, then name,
    # so the choice is stable whichever file was registered first.
    return (parameter_count, size or 0, source)


def is_target(a: GGUFFile, b: GGUFFile) -> bool:
    """Whether ``a`` is the target when it pairs with ``b``."""
    return size_key(a.parameter_count, a.size, a.source) >= size_key(b.parameter_count, b.size, b.source)


def info_is_target(info: ModelInfo, other: GGUFFile) -> bool:
    """The same rule for a file that is not registered (a header sent by a browser)."""
    return size_key(info.parameter_count, info.file_size, info.source) >= size_key(
        other.parameter_count, other.size, other.source
    )


VERDICT_FIELDS = ["compatible", "llama_cpp_compatible", "failed_rule", "rules_from", "checked_at"]


def verdict_fields(result: PairCheck, now: datetime) -> dict[str, Any]:
    """The Pair row's verdict columns for a check result (registration and recheck_pairs both write these)."""
    return {
        "compatible": result.compatible,
        "llama_cpp_compatible": result.llama_cpp_compatible,
        "failed_rule": result.failed_rule or "",
        "rules_from": result.rules_from,
        "checked_at": now,
    }


def pair_fields(result: PairCheck, target: GGUFFile, draft: GGUFFile, now: datetime) -> dict[str, Any]:
    """The Pair row's columns for a check result (verdict, and what the table sorts and filters by)."""
    return {
        **verdict_fields(result, now),
        "size_ratio": (target.parameter_count / draft.parameter_count) if draft.parameter_count else None,
        **table_columns(target, draft),  # names and search text the pairs table sorts and searches by
    }


def compute_pairs(f: GGUFFile, info: ModelInfo) -> tuple[int, int, list[int]]:
    existing = {
        (p.draft_id if p.target_id == f.pk else p.target_id): p for p in Pair.objects.filter(Q(target=f) | Q(draft=f))
    }
    # Partners from earlier pairs are checked again even if they left the index window: a pair,
    # and the results attached to it, is never dropped — its verdict is updated.
    partner_ids = set(candidates(f).values_list("pk", flat=True)) | set(existing)
    partners = list(
        GGUFFile.objects.filter(pk__in=partner_ids)
        .select_related("token_table", "model__family")
        .defer("token_table__blob")
    )
    now = timezone.now()
    new, changed, compatible, results = [], [], [], {}
    for other in partners:
        other_info = load_info(other)
        pair = existing.get(other.pk)
        target_is_f = pair.target_id == f.pk if pair is not None else is_target(f, other)
        t, d = (f, other) if target_is_f else (other, f)
        ti, di = (info, other_info) if target_is_f else (other_info, info)
        result = check_pair(ti, di)
        fields = pair_fields(result, t, d, now)
        if result.compatible and (pair is None or not pair.compatible):
            compatible.append(other.pk)
        if pair is None:
            pair = Pair(target=t, draft=d, **fields)
            new.append(pair)
        else:
            for k, v in fields.items():
                setattr(pair, k, v)
            changed.append(pair)
        results[id(pair)] = json_safe(result.to_dict())
    # A registration running beside this one may have written one of these pairs a moment ago: it is the
    # same pair, so the insert leaves it, and the ids come from one read (ON CONFLICT returns none).
    Pair.objects.bulk_create(new, batch_size=500, ignore_conflicts=True)
    if new:
        ids = dict(
            ((t, d), pk)
            for pk, t, d in Pair.objects.filter(Q(target=f) | Q(draft=f)).values_list("pk", "target_id", "draft_id")
        )
        for p in new:
            p.pk = ids[(p.target_id, p.draft_id)]
    if changed:
        Pair.objects.bulk_update(changed, list(fields), batch_size=500)
        PairCheckResult.objects.filter(pair__in=changed).delete()
    PairCheckResult.objects.bulk_create(
        [PairCheckResult(pair=p, result=results[id(p)]) for p in new + changed], batch_size=500, ignore_conflicts=True
    )
    return len(new), len(changed), compatible


def pair_for(target: GGUFFile, draft: GGUFFile) -> Pair:
    """The pair of these two files in this order, checked now when registration did not pair them.

    Registration pairs files whose vocabularies could match, bigger model as target; a user may
    still ask for any order, or for a model drafting for itself (the quickest end-to-end check).
    """
    pair = Pair.objects.filter(target=target, draft=draft).first()
    if pair is not None:
        return pair
    result = check_pair(load_info(target), load_info(draft))
    with transaction.atomic():
        pair, created = Pair.objects.get_or_create(
            target=target, draft=draft, defaults=pair_fields(result, target, draft, timezone.now())
        )
        if created:
            PairCheckResult.objects.create(pair=pair, result=json_safe(result.to_dict()))
    return pair
