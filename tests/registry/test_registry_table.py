"""The pairs table's keyset paging, counts and streams: every row once, in order, in every sort."""

from __future__ import annotations

import base64
import csv
import io
import json
import math
import random

import pytest
from django.core.cache import cache
from django.http import QueryDict

from inspector.info import inspect_source
from registry.catalog.registration import register
from registry.models import Pair, ReportedResult
from registry.results.figures import refresh_best
from registry.sort_keys import COLUMNS
from registry.table import pages as table_pages
from registry.table.pages import page_of
from registry.table.request import TableQuery
from tests.ggufgen import vocab, write_gguf

# db_service: CI runs these again on PostgreSQL.
pytestmark = [pytest.mark.django_db, pytest.mark.db_service]

SORTS = [s for name in COLUMNS for s in (f"-{name}", name)]


@pytest.fixture
def pairs(tmp_path, settings) -> list[Pair]:
    """12 files of one vocabulary (66 compatible pairs); some with results, ties and NULLs in every column."""
    settings.SPECREG_LISTED_MIN_RATIO = 1.0  # every pair listed, equal sizes too (registry.catalog.listing)
    for i in range(12):
        p = write_gguf(tmp_path / f"m{i}.gguf", tokens=vocab(100), kv=None)
        info = inspect_source(str(p))
        info.parameter_count = 1000 * (i % 5 + 1)  # equal ratios: ties the id must break
        register(info, source=f"/models/m{i}.gguf", path=f"/models/m{i}.gguf")
    rng = random.Random(7)
    all_pairs = list(Pair.objects.all())
    for p in rng.sample(all_pairs, 30):
        ReportedResult.objects.create(
            pair=p,
            k=rng.choice([4, 8]),
            speedup=rng.choice([0.5, 1.5, 2.0, None]),
            acceptance=rng.choice([0.5, 0.7, None]),
            content_type="code",
            citation="t",
        )
        refresh_best(p)
    return list(Pair.objects.all())


def expected(pairs: list[Pair], sort: str) -> list[int]:
    """The order the table promises, computed here: NULLs last both ways, ties broken by the id in the same
    direction."""
    descending, name = sort.startswith("-"), sort.lstrip("-")
    null = -math.inf if descending else math.inf

    def key(p: Pair) -> tuple:
        columns = [COLUMNS[name][0]] + (["size_ratio"] if sort == "-speedup" else [])
        return (*(null if getattr(p, c) is None else getattr(p, c) for c in columns), p.pk)

    return [p.pk for p in sorted(pairs, key=key, reverse=descending)]


def walk(sort: str, direction: str = "next") -> list[int]:
    """Follow the Next links from the first page (or Previous links from the last) and collect the rows."""
    tq = TableQuery.from_params(QueryDict(f"sort={sort}"))
    pages = []
    page, rows = page_of(tq)
    pages.append([r.pair.pk for r in rows])
    while page.has_next:
        tq = TableQuery.from_params(QueryDict(page.next_query.lstrip("?")))
        page, rows = page_of(tq)
        pages.append([r.pair.pk for r in rows])
    if direction == "previous":
        back = [pages[-1]]
        while page.has_previous:
            tq = TableQuery.from_params(QueryDict(page.previous_query.lstrip("?")))
            page, rows = page_of(tq)
            back.insert(0, [r.pair.pk for r in rows])
        assert page.number == 1
        pages = back
    return [pk for p in pages for pk in p]


@pytest.mark.parametrize("sort", SORTS)
def test_following_next_and_previous_links_shows_every_pair_once_in_order(pairs, sort, monkeypatch):
    monkeypatch.setattr(table_pages, "PAGE_SIZE", 7)
    want = expected(pairs, sort)
    assert walk(sort) == want
    assert walk(sort, "previous") == want


def test_old_page_numbers_still_work_and_past_the_end_shows_the_last_page(pairs, monkeypatch):
    monkeypatch.setattr(table_pages, "PAGE_SIZE", 7)
    want = expected(pairs, "-ratio")
    page, rows = page_of(TableQuery.from_params(QueryDict("sort=-ratio&page=3")))
    assert [r.pair.pk for r in rows] == want[14:21] and page.number == 3 and page.pages_text == "Page 3 of 10"
    page, rows = page_of(TableQuery.from_params(QueryDict("sort=-ratio&page=99")))
    assert [r.pair.pk for r in rows] == want[63:] and page.number == 10 and not page.has_next


def test_a_cursor_from_another_sort_or_junk_shows_the_first_page(pairs):
    page, _ = page_of(TableQuery.from_params(QueryDict("sort=target")))
    first = [r.pair.pk for r in page_of(TableQuery.from_params(QueryDict("sort=-k")))[1]]
    huge = [base64.urlsafe_b64encode(v).decode() for v in (b"[1e999, 5]", b"[4, 99999999999999999999999]", b'["4", 5]')]
    for junk in ["not-base64!", "W10", "WzEsMiwzLDRd", page.next_cursor or "eA", *huge]:
        _, rows = page_of(TableQuery.from_params(QueryDict(f"sort=-k&after={junk}")))
        assert [r.pair.pk for r in rows] == first


def test_counts_are_exact_when_few_and_never_a_full_count_when_many(pairs, monkeypatch, client):
    assert client.get("/api/pairs").json()["count"] == 66
    monkeypatch.setattr(table_pages, "EXACT_COUNT_LIMIT", 10)
    cache.clear()  # counts are cached per filter
    page, _ = page_of(TableQuery())
    assert not page.count_exact and page.count >= 11
    assert page.count_text.startswith("about " if page.estimated else "more than 10 pairs")
    data = client.get("/api/pairs").json()
    assert data["count_exact"] is False and data["next"].startswith("/api/pairs?") and data["previous"] is None


def test_the_api_and_the_page_follow_cursor_links(pairs, client):
    first = client.get("/api/pairs", {"sort": "target"}).json()
    second = client.get(first["next"]).json()
    assert second["page"] == 2 and len(first["results"]) + len(second["results"]) == 66
    assert second["next"] is None and second["previous"].startswith("/api/pairs?")
    back = client.get(second["previous"]).json()
    assert [r["id"] for r in back["results"]] == [r["id"] for r in first["results"]]
    html = client.get("/", {"sort": "target"}).content.decode()
    assert "Page 1 of 2" in html and 'rel="next"' in html and "after=" in html


@pytest.mark.parametrize("sort", ["-speedup", "target", "-checked"])
def test_the_csv_and_the_api_stream_every_row_in_order(pairs, client, sort, monkeypatch):
    monkeypatch.setattr(table_pages, "STREAM_CHUNK", 8)  # several keyset chunks
    want = expected(pairs, sort)
    urls = {p.pk: f"http://testserver/pairs/{p.pk}/" for p in pairs}
    body = b"".join(client.get("/pairs.csv", {"sort": sort}).streaming_content).decode()
    rows = list(csv.reader(io.StringIO(body)))[1:]
    assert [r[-1] for r in rows] == [urls[pk] for pk in want]
    data = json.loads(b"".join(client.get("/api/pairs", {"sort": sort, "all": "1"}).streaming_content))
    assert [r["id"] for r in data["results"]] == want and data["count"] == 66
    assert set(data["results"][0]) >= {"id", "target", "draft", "compatible", "size_ratio", "best", "checked_at"}


def test_filters_narrow_the_streams_too(pairs, client):
    with_results = set(ReportedResult.objects.values_list("pair_id", flat=True))
    data = json.loads(b"".join(client.get("/api/pairs", {"all": "1", "content_type": "code"}).streaming_content))
    assert {r["id"] for r in data["results"]} == with_results
    data = json.loads(b"".join(client.get("/api/pairs", {"all": "1", "q": "m3.gguf"}).streaming_content))
    assert len(data["results"]) == 11 and all(
        "m3.gguf" in r["target"]["source"] + r["draft"]["source"] for r in data["results"]
    )


def test_registration_fills_the_search_column_and_a_renamed_family_or_model_follows(pairs, client):
    from registry.catalog.columns import refresh_table_columns
    from registry.models import GGUFFile

    count = lambda q: client.get("/api/pairs", {"q": q}).json()["count"]  # noqa: E731
    f = GGUFFile.objects.select_related("model__family").get(source="/models/m3.gguf")
    assert count("M3.GGUF") == 11 and count(f.model.family.name.upper()) == 66  # any case
    # An anonymous visitor searches a local file by its name only, never its folder (they are shown neither):
    # tests/registry/test_registry_truth_predictions_search.py has the full-path search of those who may see paths.
    assert count("/MODELS/M3.GGUF") == 0
    f.model.family.name = "Renamed Family"
    f.model.family.save()  # every pair of the family's files follows at once
    cache.clear()
    assert count("renamed family") == 66
    f.model.name = "Renamed Model"
    f.model.save()
    cache.clear()
    assert count("renamed model") == 11
    assert refresh_table_columns([f.pk]) == 11  # idempotent
