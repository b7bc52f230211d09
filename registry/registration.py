"""Registering a GGUF file: store what the inspector saw, then check it against every file it could pair with.

Candidates come from the vocabulary index (key and a ±128 size window), then llama.cpp's exact
rules decide. Everything happens in one transaction under a registry-wide lock, so two imports
running at once can neither half-write a file nor miss the pair between their two new files.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from inspector.compat import check_pair
from inspector.info import ModelInfo
from inspector.tokens import MAX_SIZE_DIFFERENCE, TokenTable as Tokens, candidate_keys

from .models import Family, GGUFFile, Model, Pair, PairCheckResult, RegistrationLock, TokenTable
from .naming import family_key, family_name, model_name
from .cache_keys import bump_generation


@dataclass
class Registration:
    file: GGUFFile
    status: str  # "added", "updated" or "unchanged"
    pairs_added: int = 0
    pairs_updated: int = 0
    compatible: list[int] = field(default_factory=list)  # ids of newly compatible partner files


def find_unchanged(source: str, etag: str, size: int | None) -> GGUFFile | None:
    """The registered file when ``etag`` and ``size`` say it has not changed (so it need not be read again)."""
    if not etag:
        return None
    return GGUFFile.objects.filter(source=source, etag=etag, size=size).first()


def register(info: ModelInfo, *, source: str, repo: str = "", revision: str = "", path: str = "",
             commit: str = "", etag: str = "", size: int | None = None) -> Registration:
    """Store ``info`` as the file ``source`` and compute its pairs; an unchanged file is left alone."""
    with transaction.atomic():
        _take_lock()
        existing = GGUFFile.objects.filter(source=source).first()
        if existing and etag and existing.etag == etag and existing.size == size:
            return Registration(existing, "unchanged")
        info.source = source
        table = _store_table(info.tokens)
        model = _model_for(info, repo, path or source, table)
        f = existing or GGUFFile(source=source)
        _fill(f, info, repo=repo, revision=revision, path=path or source, commit=commit, etag=etag,
              size=size if size is not None else info.file_size, model=model, table=table)
        f.save()
        added, updated, compatible = _compute_pairs(f, info)
        # Cached table pages are out of date: now for this process, and again once other
        # processes can see the new rows (a page cached in between would be stale).
        bump_generation()
        transaction.on_commit(bump_generation)
        return Registration(f, "updated" if existing else "added", added, updated, compatible)


def _take_lock() -> None:
    # SQLite already serialises writers (IMMEDIATE transactions); on PostgreSQL this row does.
    lock = RegistrationLock.objects.select_for_update().filter(name="registration").first()
    if lock is None:
        try:
            with transaction.atomic():
                RegistrationLock.objects.create(name="registration")
        except IntegrityError:
            pass  # created by a concurrent registration
        RegistrationLock.objects.select_for_update().get(name="registration")


def _store_table(tokens: Tokens | None) -> TokenTable | None:
    if tokens is None:
        return None
    sha = tokens.sha256
    row = TokenTable.objects.filter(sha256=sha).defer("blob").first()
    if row is None:
        row = TokenTable.objects.create(sha256=sha, count=tokens.count, blob=tokens.canonical_blob())
        _remember(sha, tokens if tokens.byteorder == "<" else Tokens(row.blob, row.count))
    return row


def _model_for(info: ModelInfo, repo: str, path: str, table: TokenTable | None) -> Model:
    tok = info.tokenizer
    family = None
    if tok is not None and tok.vocab_key:
        family, _ = Family.objects.get_or_create(
            key=family_key(tok.vocab_key, table.sha256 if table else None),
            defaults={"vocab_type": tok.vocab_type,
                      "name": family_name(info.architecture, tok.vocab_type, tok.n_tokens)},
        )
    model, created = Model.objects.get_or_create(
        repo=repo, name=model_name(path, info.name)[:300],
        defaults={"family": family, "architecture": info.architecture, "parameter_count": info.parameter_count},
    )
    if not created and (model.family_id != (family.pk if family else None) or model.architecture != info.architecture
                        or model.parameter_count != info.parameter_count):
        model.family, model.architecture = family, info.architecture
        model.parameter_count = max(model.parameter_count, info.parameter_count)
        model.save(update_fields=["family", "architecture", "parameter_count"])
    return model


def _fill(f: GGUFFile, info: ModelInfo, *, repo: str, revision: str, path: str, commit: str, etag: str,
          size: int | None, model: Model, table: TokenTable | None) -> None:
    tok = info.tokenizer
    f.repo, f.revision, f.path, f.commit, f.etag, f.size = repo, revision, path, commit or "", etag, size
    f.model, f.token_table = model, table
    f.info = json_safe(info.to_dict())
    f.vocab_key = tok.vocab_key if tok else ""
    f.vocab_type = tok.vocab_type if tok else ""
    f.n_vocab = tok.n_tokens if tok else 0
    f.architecture, f.arch_kind = info.architecture[:64], info.arch_kind
    f.parameter_count, f.file_type = info.parameter_count, (info.file_type or "")[:32]
    f.header_size, f.split_count = info.header_size, info.split_count
    f.inspected_at = timezone.now()


def json_safe(value: Any) -> Any:
    """PostgreSQL's jsonb refuses NUL in strings, which a hostile header may well contain."""
    if isinstance(value, str):
        return value.replace("\x00", "\\x00") if "\x00" in value else value
    if isinstance(value, dict):
        return {json_safe(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def candidates(f: GGUFFile) -> QuerySet[GGUFFile]:
    """Registered files whose vocabulary could match ``f``'s: its index key(s) and a ±128 size window."""
    if not f.vocab_key:
        return GGUFFile.objects.none()
    qs = GGUFFile.objects.filter(
        vocab_type=f.vocab_type, n_vocab__gte=f.n_vocab - MAX_SIZE_DIFFERENCE, n_vocab__lte=f.n_vocab + MAX_SIZE_DIFFERENCE,
    ).exclude(pk=f.pk)
    keys = candidate_keys(f.vocab_key)
    return qs if keys is None else qs.filter(vocab_key__in=keys)


def _compute_pairs(f: GGUFFile, info: ModelInfo) -> tuple[int, int, list[int]]:
    existing = {(p.draft_id if p.target_id == f.pk else p.target_id): p
                for p in Pair.objects.filter(Q(target=f) | Q(draft=f))}
    # Partners from earlier pairs are checked again even if they left the index window: a pair,
    # and the results attached to it, is never dropped — its verdict is updated.
    partner_ids = set(candidates(f).values_list("pk", flat=True)) | set(existing)
    partners = list(GGUFFile.objects.filter(pk__in=partner_ids).select_related("token_table", "model")
                    .defer("token_table__blob"))
    now = timezone.now()
    new, changed, compatible, results = [], [], [], {}
    for other in partners:
        other_info = load_info(other)
        pair = existing.get(other.pk)
        if pair is not None:
            target_is_f = pair.target_id == f.pk
        else:
            target_is_f = _size_key(f) >= _size_key(other)
        t, d = (f, other) if target_is_f else (other, f)
        ti, di = (info, other_info) if target_is_f else (other_info, info)
        result = check_pair(ti, di)
        fields = {
            "compatible": result.compatible, "llama_cpp_compatible": result.llama_cpp_compatible,
            "failed_rule": result.failed_rule or "", "rules_from": result.rules_from, "checked_at": now,
            "size_ratio": (t.parameter_count / d.parameter_count) if d.parameter_count else None,
            "target_name": t.model.name, "draft_name": d.model.name,
        }
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
    Pair.objects.bulk_create(new, batch_size=500)
    if changed:
        Pair.objects.bulk_update(changed, list(fields), batch_size=500)
        PairCheckResult.objects.filter(pair__in=changed).delete()
    PairCheckResult.objects.bulk_create([PairCheckResult(pair=p, result=results[id(p)]) for p in new + changed],
                                        batch_size=500)
    return len(new), len(changed), compatible


def _size_key(f: GGUFFile) -> tuple[int, int, str]:
    # The bigger model is the target; ties (the same model twice) fall to size, then name, so it is stable.
    return (f.parameter_count, f.size or 0, f.source)


# ---- reading stored files back -------------------------------------------------------------------
_CACHE_SIZE = 8
_tables: OrderedDict[str, Tokens] = OrderedDict()
_tables_lock = threading.Lock()


def _remember(sha: str, tokens: Tokens) -> None:
    with _tables_lock:
        _tables[sha] = tokens
        _tables.move_to_end(sha)
        while len(_tables) > _CACHE_SIZE:
            _tables.popitem(last=False)


def tokens_for(table: TokenTable | None) -> Tokens | None:
    """The parsed token table of a stored row, cached by content (rows never change)."""
    if table is None:
        return None
    with _tables_lock:
        hit = _tables.get(table.sha256)
        if hit is not None:
            _tables.move_to_end(table.sha256)
            return hit
    blob = TokenTable.objects.filter(pk=table.pk).values_list("blob", flat=True).get()
    tokens = Tokens(bytes(blob), table.count)
    _remember(table.sha256, tokens)
    return tokens


def load_info(f: GGUFFile, with_tokens: bool = True) -> ModelInfo:
    """The inspector's view of a registered file, rebuilt from the database (no file is read)."""
    info = ModelInfo.from_dict(f.info, tokens=tokens_for(f.token_table) if with_tokens else None)
    info.source = f.source
    return info


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
        pair, created = Pair.objects.get_or_create(target=target, draft=draft, defaults=dict(
            compatible=result.compatible, llama_cpp_compatible=result.llama_cpp_compatible,
            failed_rule=result.failed_rule or "", rules_from=result.rules_from, checked_at=timezone.now(),
            size_ratio=(target.parameter_count / draft.parameter_count) if draft.parameter_count else None,
            target_name=target.model.name, draft_name=draft.model.name))
        if created:
            PairCheckResult.objects.create(pair=pair, result=json_safe(result.to_dict()))
    return pair
