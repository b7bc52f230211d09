"""registry.bulk_sql: many rows written and read by one array or one VALUES list, the same rows as Django's own
bulk_update and ``__in`` would touch (SQLite takes Django's own path; CI runs these again on PostgreSQL)."""

from __future__ import annotations

import pytest

from registry.bulk_sql import bulk_set, id_in
from registry.models import Family, Model

pytestmark = [pytest.mark.django_db, pytest.mark.db_service]


def families(n: int) -> list[Family]:
    return [Family.objects.create(key=f"k{i}", vocab_type="gpt2", name=f"family {i}") for i in range(n)]


def test_bulk_set_writes_each_rows_own_values_and_nothing_else():
    rows = families(5)
    untouched = rows[4]
    chosen = rows[:4]
    # Text that would break a statement built by hand: quotes, a backslash, a percent sign, a placeholder, non-ASCII.
    names = ["it's", "back\\slash", "100% %s", "ünïcödé"]
    for f, name in zip(chosen, names, strict=True):
        f.name, f.vocab_type = name, "spm"
    bulk_set(Family, chosen, ["name", "vocab_type"], batch=3)  # two statements: 3 rows, then 1
    got = {f.pk: (f.name, f.vocab_type) for f in Family.objects.all()}
    assert [got[f.pk] for f in chosen] == [(n, "spm") for n in names]
    assert got[untouched.pk] == ("family 4", "gpt2")


def test_bulk_set_writes_foreign_keys_and_nulls():
    a, b = families(2)
    m = Model.objects.create(repo="r", name="m", family=a, architecture="llama", parameter_count=1)
    m.family = b
    bulk_set(Model, [m], ["family"])
    assert Model.objects.get(pk=m.pk).family_id == b.pk
    m.family = None
    bulk_set(Model, [m], ["family"])
    assert Model.objects.get(pk=m.pk).family_id is None


def test_id_in_finds_the_rows_named_and_only_those():
    rows = families(6)
    wanted = [rows[1].pk, rows[3].pk, rows[5].pk, 10**9]  # an id no row has
    assert set(Family.objects.filter(id_in(Family, "id", wanted)).values_list("pk", flat=True)) == set(wanted[:3])
    assert not Family.objects.filter(id_in(Family, "id", [])).exists()
    m = Model.objects.create(repo="r", name="m", family=rows[2], architecture="llama", parameter_count=1)
    assert list(Model.objects.filter(id_in(Model, "family", [rows[2].pk])).values_list("pk", flat=True)) == [m.pk]
