"""Which pairs get a row (registry.catalog.listing): each target's smallest compatible drafts of at most half its size,
a few incompatible near-misses, every pair that carries something; the rest answered from the tokenizer classes."""

from __future__ import annotations

import io
import json
import random

import pytest
from django.core.management import call_command

from inspector.info import inspect_source
from registry.catalog import listing
from registry.catalog.listing import unlisted_partners
from registry.catalog.registration import register
from registry.models import GGUFFile, Pair
from registry.team.models import Note
from tests.ggufgen import vocab, write_gguf

pytestmark = [pytest.mark.django_db, pytest.mark.db_service]


def add(tmp_path, name: str, params: int, **kw) -> GGUFFile:
    info = inspect_source(str(write_gguf(tmp_path / f"{name}.gguf", tokens=vocab(100), **kw)))
    info.parameter_count = params
    return register(info, source=f"/models/{name}.gguf", path=f"/models/{name}.gguf").file


def drafts_listed_for(f: GGUFFile) -> list[int]:
    rows = Pair.objects.filter(target_base=f.model.base, compatible=True).exclude(draft_base=f.model.base)
    return sorted(rows.values_list("draft_base__parameter_count", flat=True))


@pytest.mark.parametrize("seed", [1, 2])
def test_a_target_lists_its_smallest_drafts_whatever_order_they_came_in(tmp_path, settings, seed):
    settings.SPECREG_LISTED_DRAFTS = 3
    sizes = [9_000, 3_000, 20_000, 1_000, 5_000, 40_000]
    random.Random(seed).shuffle(sizes)
    files = {n: add(tmp_path, f"d{n}", n) for n in [64_000, *sizes]}
    target = files[64_000]
    assert drafts_listed_for(target) == [1_000, 3_000, 5_000]  # 40,000 is not half of 64,000: never listed
    more = unlisted_partners(target, "draft")
    assert [bc.base.parameter_count for bc in more] == [9_000, 20_000, 40_000]
    # Seen from a draft: the targets that do not list it are answered too.
    assert 64_000 in [bc.base.parameter_count for bc in unlisted_partners(files[9_000], "target")]
    # Rows grow with base models, not their square: at most 3 compatible drafts per target.
    assert Pair.objects.filter(compatible=True).count() <= 3 * len(files)


@pytest.mark.parametrize("named_ids", [listing.NAMED_IDS, 0])
def test_a_smaller_draft_takes_the_place_of_a_bigger_one_unless_something_is_attached(
    tmp_path, settings, client, monkeypatch, named_ids
):
    # Evidence read by naming the listed pairs, and (0) from the tables that point at pairs, as for a big family.
    monkeypatch.setattr(listing, "NAMED_IDS", named_ids)
    settings.SPECREG_LISTED_DRAFTS = 3
    target = add(tmp_path, "t", 64_000)
    for n in (1_000, 3_000, 5_000):
        add(tmp_path, f"d{n}", n)
    noted = Pair.objects.get(target_base=target.model.base, draft_base__parameter_count=5_000)
    Note.objects.create(pair=noted, body="K=4 held up.", author_name="sam")
    add(tmp_path, "d500", 500)
    assert drafts_listed_for(target) == [500, 1_000, 5_000]  # 3,000 gave its place; the noted pair stays
    assert Pair.objects.filter(pk=noted.pk).exists()
    assert [bc.base.parameter_count for bc in unlisted_partners(target, "draft")] == [3_000]

    page = client.get(target.get_absolute_url()).content.decode()
    assert 'id="more-drafts"' in page and "d3000" in page and "/models/d3000.gguf" not in page  # no local path
    api = client.get(f"/api/models/{target.model_id}").json()
    assert [d["parameter_count"] for d in api["more_drafts"]] == [3_000]
    assert api["more_drafts"][0]["file"]["source"].endswith("d3000.gguf")  # a local path, shown to staff only
    out = io.StringIO()
    call_command("find_drafts", target.source, "--no-hub", "--json", stdout=out)
    assert [d["file"]["source"] for d in json.loads(out.getvalue())["unlisted"]] == ["/models/d3000.gguf"]


def test_at_one_size_the_earliest_draft_keeps_its_place(tmp_path, settings):
    # Fine-tunes of one model share its size: a later upload named to sort first must not push listed drafts out of
    # every target of the family (nor cost a write per target); only a smaller draft takes a place.
    settings.SPECREG_LISTED_DRAFTS = 3
    target = add(tmp_path, "t", 64_000)
    first = [add(tmp_path, f"m{i}", 1_000) for i in range(3)]
    listed = lambda: set(  # noqa: E731
        Pair.objects.filter(target_base=target.model.base, compatible=True).values_list("draft_base_id", flat=True)
    )
    assert listed() == {f.model.base_id for f in first}
    for name in ("aaa", "aab", "a000"):
        add(tmp_path, name, 1_000)
    assert listed() == {f.model.base_id for f in first}  # same size, later: unlisted, answered from the classes
    assert {bc.base.parameter_count for bc in unlisted_partners(target, "draft")} == {1_000}
    smaller = add(tmp_path, "zzz", 500)
    assert smaller.model.base_id in listed() and len(listed()) == 3  # smaller: it takes the place of a later one
    assert first[0].model.base_id in listed()


def test_incompatible_near_misses_are_few_per_target(tmp_path, settings):
    settings.SPECREG_LISTED_MISSES = 2
    target = add(tmp_path, "t", 64_000, bos=1, add_bos=True)
    for n in (1_000, 2_000, 3_000, 4_000):
        add(tmp_path, f"m{n}", n, bos=2, add_bos=True)  # another BOS: llama.cpp's bos rule fails
    misses = Pair.objects.filter(target_base=target.model.base, compatible=False)
    assert sorted(misses.values_list("draft_base__parameter_count", flat=True)) == [1_000, 2_000]
    assert set(misses.values_list("failed_rule", flat=True)) == {"bos"}
    assert unlisted_partners(target, "draft") == []  # incompatible ones are not offered as drafts


def test_a_pair_a_person_asks_for_is_made_even_when_not_listed(tmp_path, settings):
    from registry.catalog.pairing import pair_for

    settings.SPECREG_LISTED_DRAFTS = 1
    target = add(tmp_path, "t", 64_000)
    add(tmp_path, "d1000", 1_000)
    other = add(tmp_path, "d2000", 2_000)
    assert drafts_listed_for(target) == [1_000]
    pair = pair_for(target, other)
    assert pair.compatible and drafts_listed_for(target) == [1_000, 2_000]
