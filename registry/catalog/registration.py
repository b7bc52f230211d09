"""Registering a GGUF file: store what the inspector saw, then check it against every file it could pair with.

Candidates come from the vocabulary index (key and a ±128 size window), then llama.cpp's exact
rules decide. Everything happens in one transaction under a registry-wide lock, so two imports
running at once can neither half-write a file nor miss the pair between their two new files.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import IntegrityError, transaction
from django.utils import timezone

from inspector.info import ModelInfo
from inspector.tokens import TokenTable as Tokens
from registry.cache_keys import bump_generation
from registry.catalog.naming import family_key, family_name, model_name
from registry.catalog.pairing import compute_pairs
from registry.catalog.stored import remember
from registry.jsonsafe import json_safe
from registry.models import Family, GGUFFile, Model, RegistrationLock, TokenTable


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
) -> Registration:
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
        _fill(
            f,
            info,
            repo=repo,
            revision=revision,
            path=path or source,
            commit=commit,
            etag=etag,
            size=size if size is not None else info.file_size,
            model=model,
            table=table,
        )
        f.save()
        added, updated, compatible = compute_pairs(f, info)
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
        blob = tokens.canonical_blob()
        row = TokenTable.objects.create(sha256=sha, count=tokens.count, blob=blob)
        remember(sha, tokens if tokens.byteorder == "<" else Tokens(blob, row.count))
    return row


def _model_for(info: ModelInfo, repo: str, path: str, table: TokenTable | None) -> Model:
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
        defaults={"family": family, "architecture": info.architecture, "parameter_count": info.parameter_count},
    )
    if not created and (
        model.family_id != (family.pk if family else None)
        or model.architecture != info.architecture
        or model.parameter_count != info.parameter_count
    ):
        model.family, model.architecture = family, info.architecture
        model.parameter_count = max(model.parameter_count, info.parameter_count)
        model.save(update_fields=["family", "architecture", "parameter_count"])
    return model


def _fill(
    f: GGUFFile,
    info: ModelInfo,
    *,
    repo: str,
    revision: str,
    path: str,
    commit: str,
    etag: str,
    size: int | None,
    model: Model,
    table: TokenTable | None,
) -> None:
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
