"""Registering a GGUF file: store what the inspector saw, then check it against every file it could pair with.

Candidates come from the tokenizer-class index (key and a ±128 size window), then llama.cpp's exact
rules decide. No lock: two steps, each its own transaction. The file (with its token table, tokenizer
class, base model and model) is committed first; then its pairs are computed against every file
committed by then. Of two files registered at the same moment, the one whose file committed later
computes its pairs after both commits, so it sees the other: the pair between them is never missed, and
unique constraints with ON CONFLICT DO NOTHING keep the other registration from writing it twice.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from inspector.info import ModelInfo
from inspector.tokens import TokenTable as Tokens
from registry.cache_keys import bump_generation
from registry.catalog.adaptable import decide_pending
from registry.catalog.bases import base_for, base_parameters, recount_quants
from registry.catalog.classes import class_for
from registry.catalog.naming import family_key, family_name, model_name
from registry.catalog.orientation import reorient
from registry.catalog.pairing import compute_pairs
from registry.catalog.provenance import verify_adapted
from registry.catalog.stored import load_info, remember
from registry.jsonsafe import json_safe
from registry.models import BaseClass, BaseModel, Family, GGUFFile, Model, TokenTable, TokenTypeTable
from registry.results.examples import apply_reported_examples


@dataclass
class Registered:
    """A file registered, whichever door it came through (a local path, a Hub file, a Hub repository's files, the
    command line): the file as stored, whether it was new, read again or unchanged, and the pairs it made."""

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


def register(
    info: ModelInfo,
    *,
    source: str,
    repo: str = "",
    revision: str = "",
    path: str = "",
    commit: str = "",
    etag: str = "",
    size: int | None = None,
    base_models: list[str] | None = None,
    made_by: tuple[int, int] | None = None,
) -> Registered:
    """Store ``info`` as the file ``source`` and compute its pairs; an unchanged file is left alone.

    ``base_models``: the repository card's ``base_model`` (registry.catalog.bases), where the Hub gave one.
    ``made_by``: the (draft, target) file ids of the adapt job that wrote this file (its verified provenance).
    """
    info.source = source
    outer = connection.in_atomic_block  # a caller's transaction: see below
    for attempt in (1, 2):
        try:
            with transaction.atomic():
                existing = GGUFFile.objects.filter(source=source).first()
                if existing and etag and existing.etag == etag and existing.size == size:
                    return Registered(existing, "unchanged")
                where = Where(
                    repo, revision, path or source, commit or "", etag, size if size is not None else info.file_size
                )
                f, resized = _store(info, existing, source, where, base_models, made_by)
            break
        except IntegrityError:
            if attempt == 2:  # not a race lost to a registration of the same file: a real conflict
                raise
    with transaction.atomic():
        added, updated, compatible = compute_pairs(f, info, record_classes=not outer, fresh=existing is None)
        if resized and f.model.base is not None:  # better size evidence: pairs made before may have the wrong target
            reorient(f.model.base)
    if outer:
        # Inside a caller's transaction (import_kb's) the file stays invisible to other registrations until
        # that commits, so the ordering above does not hold: pair it again once it has committed.
        transaction.on_commit(lambda: _pair_again(f.pk))
    # Cached table pages are out of date: now for this process, and again once other
    # processes can see the new rows (a page cached in between would be stale).
    bump_generation()
    transaction.on_commit(bump_generation)
    return Registered(f, "updated" if existing else "added", added, updated, compatible)


def finish(file_ids: Iterable[int]) -> None:
    """What a job that registers files ends with, once (an import, a crawl step, a local file, a draft search,
    import_kb): whether the near-miss pairs its files made can be adapted (catalog.adaptable: decided here so that
    pages only read it, and once per job, as a repository's quants share their token tables), and the curated
    reported figures of pairs it made."""
    decide_pending(file_ids)
    apply_reported_examples()


def _pair_again(file_id: int) -> None:
    f = GGUFFile.objects.filter(pk=file_id).select_related("token_table", "tokenizer_class").first()
    if f is not None:
        with transaction.atomic():
            compute_pairs(f, load_info(f))
        decide_pending([f.pk])  # its pairs may have moved to other files since import_kb decided them
        bump_generation()


@dataclass(frozen=True)
class Where:
    """Where a registered file lives and which version of it was read."""

    repo: str
    revision: str
    path: str
    commit: str
    etag: str
    size: int | None


def _store(
    info: ModelInfo,
    existing: GGUFFile | None,
    source: str,
    where: Where,
    base_models: list[str] | None,
    made_by: tuple[int, int] | None = None,
) -> tuple[GGUFFile, bool]:
    """The file stored, and whether its base model's size changed with it."""
    table = _store_table(info.tokens)
    stored = json_safe(info.to_dict())
    tclass = class_for(info, table)
    verified = verify_adapted(stored, source, existing.pk if existing else None, made_by)
    base = base_for(
        stored,
        where.repo,
        where.path,
        base_models,
        class_id=tclass.pk if tclass is not None else None,
        verified=verified,
    )
    # The base model before this read (its model's, which _model_for may move to another base model).
    before = Model.objects.filter(pk=existing.model_id).values_list("base_id", flat=True).first() if existing else None
    class_before = existing.tokenizer_class_id if existing else None
    model = _model_for(info, where.repo, where.path, table, base)
    f = existing or GGUFFile(source=source)
    _fill(f, info, stored, where, model, table)
    f.tokenizer_class = tclass
    f.token_types = store_types(info.token_types)  # beside the texts: adaptability reads them (catalog.adaptable)
    f.save()
    if f.tokenizer_class_id is not None:
        # The (base model, class) row, written with the file: the first file of a class is the one it names, and
        # pairing (compute_pairs) tells a class new to the model by that.
        BaseClass.objects.bulk_create(
            [BaseClass(base=base, tokenizer_class_id=f.tokenizer_class_id, file=f)], ignore_conflicts=True
        )
    if existing is None:  # one more quant of its base model and of its class (the table shows N of M from these)
        BaseModel.objects.filter(pk=base.pk).update(quants=F("quants") + 1)
        BaseClass.objects.filter(base=base, tokenizer_class_id=f.tokenizer_class_id).update(files=F("files") + 1)
    elif before != base.pk or class_before != f.tokenizer_class_id:
        # The file's model moved (with all its files), or its tokenizer changed: both sides counted again.
        recount_quants((before, base.pk))
    return f, base_parameters(base, info, f)


def _store_table(tokens: Tokens | None) -> TokenTable | None:
    if tokens is None:
        return None
    sha = tokens.sha256
    row = TokenTable.objects.filter(sha256=sha).defer("blob").first()
    if row is None:
        blob = tokens.canonical_blob()
        try:
            with transaction.atomic():
                row = TokenTable.objects.create(sha256=sha, count=tokens.count, blob=blob)
        except IntegrityError:  # stored a moment ago by a registration of another file with this table
            return TokenTable.objects.defer("blob").get(sha256=sha)
        remember(sha, tokens if tokens.byteorder == "<" else Tokens(blob, row.count))
    return row


def store_types(types: bytes | None) -> TokenTypeTable | None:
    """The token type array's row, stored once per content as token tables are (also by catalog.reread, for a
    file registered before types were stored, and by import_kb for one already here)."""
    if types is None:
        return None
    sha = hashlib.sha256(types).hexdigest()
    row = TokenTypeTable.objects.filter(sha256=sha).defer("blob").first()
    if row is None:
        try:
            with transaction.atomic():
                row = TokenTypeTable.objects.create(sha256=sha, count=len(types) // 4, blob=types)
        except IntegrityError:  # stored a moment ago by a registration of another file with these types
            return TokenTypeTable.objects.defer("blob").get(sha256=sha)
    return row


def _model_for(info: ModelInfo, repo: str, path: str, table: TokenTable | None, base: BaseModel) -> Model:
    tok = info.tokenizer
    family = None
    if tok is not None and tok.vocab_key:
        family, _ = Family.objects.get_or_create(
            key=family_key(tok.vocab_key, table.sha256 if table else None),
            defaults={
                "vocab_type": tok.vocab_type,
                "name": family_name(info.architecture, tok.vocab_type, tok.n_tokens),
            },
        )
    model, created = Model.objects.get_or_create(
        repo=repo,
        name=model_name(path, info.name)[:300],
        defaults={
            "family": family,
            "base": base,
            "architecture": info.architecture,
            "parameter_count": info.parameter_count,
        },
    )
    if not created and (
        model.family_id != (family.pk if family else None)
        or model.base_id != base.pk
        or model.architecture != info.architecture
        or model.parameter_count != info.parameter_count
    ):
        model.family, model.base, model.architecture = family, base, info.architecture
        model.parameter_count = max(model.parameter_count, info.parameter_count)
        model.save(update_fields=["family", "base", "architecture", "parameter_count"])
    return model


def _fill(f: GGUFFile, info: ModelInfo, stored: dict, where: Where, model: Model, table: TokenTable | None) -> None:
    tok = info.tokenizer
    f.repo, f.revision, f.path, f.commit = where.repo, where.revision, where.path, where.commit
    f.etag, f.size = where.etag, where.size
    f.model, f.token_table = model, table
    f.info = stored
    f.vocab_key = tok.vocab_key if tok else ""
    f.vocab_type = tok.vocab_type if tok else ""
    f.n_vocab = tok.n_tokens if tok else 0
    f.architecture, f.arch_kind = info.architecture[:64], info.arch_kind
    f.speculative_type = (info.speculative_type or "")[:32]
    f.parameter_count, f.file_type = info.parameter_count, (info.file_type or "")[:32]
    f.header_size, f.split_count = info.header_size, info.split_count
    f.inspected_at = timezone.now()
