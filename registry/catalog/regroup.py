"""Grouping corrected: models moved between base models, and base models grouped again by today's rules.

Base models group by card, header or repository (registry.catalog.bases), and a name can lie. Staff correct it in
the admin: a misgrouped model moves out to a base model of its own (``move_out``), and a newcomer's variant that
started a base model of its own joins the base model it belongs to (``merge``). ``regroup_all`` applies today's
rules to a registry grouped by older ones (``manage.py regroup_bases``): files that joined a base model by claimed
names alone move out, and adapted drafts are keyed by verified provenance. Nothing attached to a pair is lost:
pairs stay with the base models they joined (results, notes and deployments with them), each settled again on the
files its models still have (registry.catalog.settling).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import transaction

from registry.cache_keys import bump_generation
from registry.catalog.bases import (
    admitted_classes,
    base_key,
    recount_quants,
    repository_key,
    stored_key,
    with_architecture,
)
from registry.catalog.pairing import compute_pairs
from registry.catalog.provenance import claims_adaptation, verify_adapted
from registry.catalog.settling import resettle
from registry.catalog.stored import load_info
from registry.models import BaseClass, BaseModel, GGUFFile, Model


def own_base(model: Model) -> BaseModel:
    """The base model of the repository rule for ``model``: its name within its repository, with its architecture."""
    k = repository_key(model.repo, model.name)
    base, _ = BaseModel.objects.get_or_create(
        key=with_architecture(k.key, model.architecture),
        defaults={
            "name": k.name,
            "rule": BaseModel.RULE_REPO,
            "architecture": model.architecture[:64],
            "parameter_count": model.parameter_count,
        },
    )
    return base


def move(model: Model, base: BaseModel) -> bool:
    """Move ``model`` (with all its files) into ``base`` and pair its files again; whether it moved."""
    old = model.base_id
    if base.pk == old:
        return False
    with transaction.atomic():
        Model.objects.filter(pk=model.pk).update(base=base)
        files = list(model.files.order_by("pk"))
        BaseClass.objects.bulk_create(
            [
                BaseClass(base=base, tokenizer_class_id=f.tokenizer_class_id, file=f)
                for f in files
                if f.tokenizer_class_id
            ],
            ignore_conflicts=True,
        )
        recount_quants([old, base.pk])  # both sides' counts, and the old model's class rows that lost their file
        resettle([old])
    firsts = {f.tokenizer_class_id: f for f in reversed(files)}
    for f in firsts.values():  # one file per class brings its pairs in the new base model
        f = GGUFFile.objects.select_related("model__base", "token_table", "tokenizer_class").get(pk=f.pk)
        with transaction.atomic():
            compute_pairs(f, load_info(f))
    return True


def move_out(model_ids: Iterable[int]) -> list[BaseModel]:
    """Move these models (with all their files) to base models of their own and pair their files again."""
    moved = [own_base(m) for m in Model.objects.filter(pk__in=list(model_ids)).order_by("pk") if move(m, own_base(m))]
    bump_generation()
    return moved


def merge(base_ids: Iterable[int]) -> BaseModel | None:
    """Merge these base models into the oldest of them (staff's decision that they are one model: a newcomer's
    variant joining the model its names claim); returns the one kept. The architecture must agree: a base model
    holds one."""
    bases = list(BaseModel.objects.filter(pk__in=list(base_ids)).order_by("pk"))
    if len(bases) < 2 or len({b.architecture for b in bases}) > 1:
        return None
    keep = bases[0]
    for m in Model.objects.filter(base__in=bases[1:]).order_by("pk"):
        move(m, keep)
    bump_generation()
    return keep


@dataclass
class Regrouped:
    """What ``regroup_all`` changed, for its one-line report."""

    moved_out: list[str] = field(default_factory=list)  # models that had joined by claimed names alone
    rekeyed: list[str] = field(default_factory=list)  # adapted base models keyed again, in place
    unverified: list[str] = field(default_factory=list)  # files whose adaptation could not be verified


def regroup_all(dry_run: bool = False) -> Regrouped:
    """Today's grouping rules over a registry grouped by older ones."""
    out = Regrouped()
    for base in BaseModel.objects.filter(rule=BaseModel.RULE_ADAPTED).order_by("pk"):
        _adapted(base, out, dry_run)
    for base in BaseModel.objects.filter(rule__in=(BaseModel.RULE_HUB, BaseModel.RULE_HEADER)).order_by("pk"):
        if BaseClass.objects.filter(base=base).count() > 1:
            _claimed(base, out, dry_run)
    if not dry_run:
        bump_generation()
    return out


def _claimed(base: BaseModel, out: Regrouped, dry_run: bool) -> None:
    """Replay admission (registry.catalog.bases.admitted) in registration order: a model none of whose classes the
    base model held when it came, from a repository, moves out to a base model of its own."""
    held: set[int] = set()
    repos: set[str] = set()
    for m in Model.objects.filter(base=base).order_by("pk"):
        classes = set(m.files.exclude(tokenizer_class=None).values_list("tokenizer_class_id", flat=True))
        if admitted_classes(held, repos, m.repo, classes):
            held |= classes
            repos.add(m.repo)
            continue
        out.moved_out.append(f"{m.repo}/{m.name}")
        if not dry_run:
            move(m, own_base(m))


def _adapted(base: BaseModel, out: Regrouped, dry_run: bool) -> None:
    """An adapted base model keyed by its files' verified provenance: keyed again in place by the key its verified
    files agree on (its pairs and everything attached stay), every other file's model moved where it belongs (an
    unverified one to its repository's own base model)."""
    wanted: dict[int, tuple[str, str, str]] = {}  # model -> (key, name, rule)
    for f in GGUFFile.objects.filter(model__base=base).select_related("model").order_by("pk"):
        info = f.info or {}
        verified = verify_adapted(info, f.source, f.pk) if claims_adaptation(info) else None
        if verified is None:
            out.unverified.append(f.source)
        k = base_key(info, f.repo, f.path, None, verified)
        key = stored_key(k, f.model.architecture)
        wanted.setdefault(f.model_id, (key, k.name, k.rule))
    adapted = {w for w in wanted.values() if w[2] == BaseModel.RULE_ADAPTED}
    if len(adapted) == 1:
        key, name, rule = next(iter(adapted))
        if key != base.key and not BaseModel.objects.filter(key=key).exists():
            out.rekeyed.append(f"{base.key} -> {key}")
            if not dry_run:
                BaseModel.objects.filter(pk=base.pk).update(key=key, name=name, rule=rule)
            base.key = key
    for model_id, (key, name, rule) in wanted.items():
        if key == base.key:
            continue
        m = Model.objects.get(pk=model_id)
        out.moved_out.append(f"{m.repo}/{m.name}")
        if not dry_run:
            made = {
                "name": name,
                "rule": rule,
                "architecture": m.architecture[:64],
                "parameter_count": m.parameter_count,
            }
            target, _ = BaseModel.objects.get_or_create(key=key, defaults=made)
            move(m, target)
