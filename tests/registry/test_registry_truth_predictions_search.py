"""The Predicted column keeps the best measure of a pair, an anonymous search finds only what anonymous
visitors are shown, and cached table pages and counts are kept apart per viewer.

1. Per (pair, hardware class) the column takes the prediction run of the newest llama.cpp build, the largest
   (prompts × tokens) of that build, the newest of equals; every prediction run stays listed on the pair page.
2. A local file's folders are cut from what an anonymous visitor is shown, so ``?q=`` (table, /api/pairs, CSV)
   must not find them either; a signed-in user (who sees paths) still searches them.
3. The table's and the count's caches are keyed by what the viewer may see.

Runs on SQLite and (db_service) again on PostgreSQL: the search's pattern must read alike in both.
"""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.http import QueryDict
from django.test import Client

from registry import cache_keys
from registry.catalog.pairing import pair_for
from registry.hub.sources import register_source
from registry.models import BenchmarkRun, Pair, PredictedResult
from registry.results.figures import prediction_runs, refresh_predicted
from registry.table.filters import filtered_pairs, shown_search
from registry.table.request import TableQuery
from tests.ggufgen import vocab, write_gguf

pytestmark = [pytest.mark.django_db, pytest.mark.db_service]

SECRET = "secretfolder"
BIG = {"w": np.zeros((64, 64), dtype=np.float32)}
SMALL = {"w": np.zeros((8, 8), dtype=np.float32)}


# --- fixtures ------------------------------------------------------------------------------------------------


@pytest.fixture
def local_pair(tmp_path) -> Pair:
    """Two local files (a target and its draft) under a folder whose name must never be found anonymously."""
    folder = tmp_path / "srv" / SECRET
    folder.mkdir(parents=True)
    for name, tensors in (("bigmodel-q8_0", BIG), ("tinydraft-q4_k_m", SMALL)):
        register_source(str(write_gguf(folder / f"{name}.gguf", tokens=vocab(300), tensors=tensors)))
    pair = Pair.objects.select_related("target", "draft").get()
    assert SECRET in pair.search_text and pair.target.source.startswith(str(folder))  # what is at stake
    return pair


@pytest.fixture
def signed_in() -> Client:
    # Not staff: may_see_paths lets every signed-in user see server paths, so every one keeps full-path search.
    c = Client()
    c.force_login(User.objects.create_user("carol", password="x" * 12))
    return c


@pytest.fixture
def caching(monkeypatch):
    # The cache tests mean something only with the table cache on, whatever the environment says.
    monkeypatch.setattr(cache_keys, "TTL", 30)


def found_on_the_table(client: Client, q: str, pair: Pair) -> bool:
    r = client.get("/", {"q": q, "verdict": "all"})
    assert r.status_code == 200
    return f'href="/pairs/{pair.pk}/"' in r.content.decode()


def found_by_the_api(client: Client, q: str, pair: Pair) -> bool:
    data = client.get("/api/pairs", {"q": q, "verdict": "all"}).json()
    ids = [row["id"] for row in data["results"]]
    assert data["count"] == len(ids)  # the count agrees with the rows (both come from the same viewer's search)
    return pair.pk in ids


def found_in_the_csv(client: Client, q: str, pair: Pair) -> bool:
    body = b"".join(client.get("/pairs.csv", {"q": q, "verdict": "all"}).streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(body)))
    return any(row["pair_url"].endswith(f"/pairs/{pair.pk}/") for row in rows)


def found_everywhere(client: Client, q: str, pair: Pair) -> tuple[bool, bool, bool]:
    return found_on_the_table(client, q, pair), found_by_the_api(client, q, pair), found_in_the_csv(client, q, pair)


NOWHERE, EVERYWHERE = (False, False, False), (True, True, True)


# --- 1. the Predicted column -----------------------------------------------------------------------------------


def predict(pair: Pair, k: int, speedup: float, *, n_prompts: int, n_predict: int, build: str = "b11434", hw="cpu"):
    """A finished prediction run of one setting, as runner.predict.runs stores it, then the column refreshed."""
    run = BenchmarkRun.objects.create(
        pair=pair, queue="bench.cpu", status="done", kind="predict", params={"mode": "predict"}
    )
    PredictedResult.objects.create(
        run=run,
        pair=pair,
        method="draft-simple",
        k=k,
        p_min=0.0,
        content_type="code",
        acceptance=0.7,
        speedup=speedup,
        n_predict=n_predict,
        n_prompts=n_prompts,
        task_set="default",
        hardware_class=hw,
        hardware=f"Some CPU ({hw})",
        llama_cpp_build=build,
    )
    refresh_predicted(pair)
    return run


def test_a_later_8_token_one_prompt_prediction_leaves_the_full_one_in_the_column(client, local_pair):
    full = predict(local_pair, 4, 1.3, n_prompts=3, n_predict=128)
    quick = predict(local_pair, 8, 2.5, n_prompts=1, n_predict=8)  # later, same build and hardware class
    local_pair.refresh_from_db()
    assert (local_pair.predicted_speedup, local_pair.predicted_k) == (1.3, 4)  # the full run's, not the newest

    table = client.get("/?verdict=all").content.decode()
    assert "1.30×" in table and "2.50×" not in table
    row = next(r for r in client.get("/api/pairs?verdict=all").json()["results"] if r["id"] == local_pair.pk)
    assert (row["predicted"]["speedup"], row["predicted"]["k"]) == (1.3, 4)
    body = b"".join(client.get("/pairs.csv?verdict=all").streaming_content).decode()
    (cells,) = list(csv.DictReader(io.StringIO(body)))
    assert (cells["predicted_speedup"], cells["predicted_k"]) == ("1.300", "4")
    # The pair page's predictions are the chosen run's too (its JSON twin as well) ...
    data = client.get(f"/api/pairs/{local_pair.pk}").json()
    assert [p["k"] for p in data["predicted"]] == [4]
    listed = {x["run"]: (x["n_prompts"], x["n_predict"], x["chosen"]) for x in data["prediction_runs"]}
    assert listed == {quick.pk: (1, 8, False), full.pk: (3, 128, True)}
    page = client.get(f"/pairs/{local_pair.pk}/").content.decode()
    predicted = page[page.index('id="predicted-table"') : page.index('id="prediction-runs"')]
    assert "K=4" in predicted and "K=8" not in predicted
    # ... and both runs stay listed, newest first, with their size and which one is shown.
    runs = page[page.index('id="prediction-runs"') :].split("</table>")[0]
    assert runs.index(f"#{quick.pk}<") < runs.index(f"#{full.pk}<")
    quick_row, full_row = runs.split(f"#{quick.pk}<")[1].split("</tr>")[0], runs.split(f"#{full.pk}<")[1]
    assert "1 × 8" in quick_row and "not shown" in quick_row
    assert "3 × 128" in full_row.split("</tr>")[0] and ">shown<" in full_row.split("</tr>")[0]


def test_the_newest_build_comes_first_then_the_size_then_the_newest_run(local_pair):
    def chosen() -> list[int]:
        return [x.run_id for x in prediction_runs([local_pair.pk]) if x.chosen]

    old_full = predict(local_pair, 4, 1.3, n_prompts=3, n_predict=128, build="b9000 (abc1234)")
    new_small = predict(local_pair, 8, 1.1, n_prompts=1, n_predict=64, build="b11434 (def5678)")
    assert chosen() == [new_small.pk]  # a newer llama.cpp build: its prediction stands, even a smaller one
    predict(local_pair, 2, 1.9, n_prompts=1, n_predict=32, build="b11434 (def5678)")
    assert chosen() == [new_small.pk]  # the same build, smaller: not chosen
    same_size = predict(local_pair, 16, 1.2, n_prompts=2, n_predict=32, build="b11434 (def5678)")  # 64 too
    assert chosen() == [same_size.pk]  # equal sizes: the newest
    gpu = predict(local_pair, 6, 3.0, n_prompts=1, n_predict=8, build="b1", hw="gpu")
    assert sorted(chosen()) == sorted([same_size.pk, gpu.pk])  # one per hardware class
    local_pair.refresh_from_db()
    assert local_pair.predicted_speedup == 3.0  # the best of the chosen runs' settings
    listed = [x.run_id for x in prediction_runs([local_pair.pk])]
    assert len(listed) == 5 and old_full.pk in listed and listed == sorted(listed, reverse=True)  # all, newest first


# --- 2. what an anonymous search may find ---------------------------------------------------------------------


def test_an_anonymous_search_never_finds_a_local_files_folder(client, signed_in, local_pair):
    for q in (SECRET, SECRET.upper(), f"{SECRET}/", f"{SECRET}/bigmodel", "/srv/", "srv"):
        assert found_everywhere(client, q, local_pair) == NOWHERE, q
        assert found_everywhere(signed_in, q, local_pair) == EVERYWHERE, q
    # A parameter cannot ask for the full search: it comes from who is asking.
    page = client.get("/", {"q": SECRET, "verdict": "all", "search_paths": "True"}).content.decode()
    assert f'href="/pairs/{local_pair.pk}/"' not in page
    r = client.get("/api/pairs", {"q": SECRET, "verdict": "all", "search_paths": "1"}).json()
    assert r["count"] == 0 and r["query"]["search_paths"] is False


def test_an_anonymous_search_still_finds_what_it_is_shown(client, local_pair):
    # The file names and model names (what the redacted pages show of a local file), the architecture.
    for q in ("bigmodel-q8_0.gguf", "tinydraft", "bigmodel", "q4_k_m.gguf", "llama"):
        assert found_everywhere(client, q, local_pair) == EVERYWHERE, q


def test_hub_sources_are_searched_whole_by_everyone(client, tmp_path):
    f = register_source(str(write_gguf(tmp_path / "m.gguf", tokens=vocab(300, seed="h"), tensors=SMALL))).file
    # The same file as if imported from the Hub: its owner and repository are shown to everyone, so searched.
    f.source = "hf://someorg/somerepo-gguf/sub/m-q4_0.gguf"
    f.save(update_fields=["source"])
    Pair.objects.all().delete()
    from_hub = pair_for(f, f)  # the model drafting for itself; its search text from the files, as registered
    assert from_hub.search_text.startswith("hf://someorg/")
    for q in ("someorg/somerepo", "hf://someorg", "f://some", "somerepo-gguf/sub/", "sub/m-q4_0"):
        assert found_everywhere(client, q, from_hub) == EVERYWHERE, q


# Lines as registry.catalog.columns writes them; what an anonymous visitor is shown of each line is the whole line
# for a Hub source, and from its last "/" on for anything else (a local path; the other lines hold no "/").
TEXTS = [
    "/srv/a.b/(x)[y]_%z/model q8.gguf\nmodel q8\nllama\nllama · bpe · 300 tokens\n"
    "hf://org/re.po+x/dir/Ünï-7b.gguf\nünï-7b\nqwen2\n",
    "relative/dir/file.gguf\nfile\nllama\n\n/abs/hf://trick/x.gguf\nx\nllama\n",
]
QUERIES = [
    "a.b", "(x)", "[y]", "_%z", "model q8", "model q8.gguf", "q8.gguf", "/model", "llama · bpe", "300 tokens",
    "hf://org", "org/re.po+x", "re.po+x/dir", "ünï-7b.gguf", "dir/ünï", "relative", "dir", "file.gguf", "trick",
    "hf://trick", "x.gguf", "/x.gguf", "\\", ".", "o", "llama\nmodel", "%", "_",
]  # fmt: skip


def shown(text: str) -> str:
    """The reference: the search text as an anonymous visitor is shown it, line by line."""
    return "\n".join(line if line.startswith("hf://") else line.rsplit("/", 1)[-1] for line in text.split("\n"))


@pytest.mark.parametrize("text", TEXTS)
def test_the_anonymous_condition_matches_exactly_the_shown_text_in_this_database(local_pair, text):
    text = text.lower()
    Pair.objects.filter(pk=local_pair.pk).update(search_text=text)
    for q in QUERIES:
        if "\n" in q:
            continue  # refused before any condition (filtered_pairs)
        got = Pair.objects.filter(shown_search(q)).exists()
        assert got == (q in shown(text)), (q, shown(text))
    # And through the table's own query, where the viewer's flag decides which condition applies.
    pub = TableQuery.from_params(QueryDict("q=relative&verdict=all"))
    full = TableQuery.from_params(QueryDict("q=relative&verdict=all"), search_paths=True)
    assert "search_paths" not in pub.params() and "search_paths" not in full.params()  # never in a link
    assert filtered_pairs(full).exists() is ("relative/" in text)
    assert not filtered_pairs(pub).exists()


# --- 3. caches per viewer ---------------------------------------------------------------------------------------


def test_a_page_or_count_cached_for_one_viewer_is_never_served_to_the_other(client, signed_in, local_pair, caching):
    # Signed-in first: the page and count cached for them must not reach the anonymous visitor ...
    assert found_on_the_table(signed_in, SECRET, local_pair) and found_by_the_api(signed_in, SECRET, local_pair)
    assert not found_on_the_table(client, SECRET, local_pair)
    assert not found_by_the_api(client, SECRET, local_pair)  # the API reads the count cache only
    # ... and anonymous first: the empty page cached for them must not hide the pair from the signed-in user.
    q = f"{SECRET}/tinydraft"
    assert not found_on_the_table(client, q, local_pair) and not found_by_the_api(client, q, local_pair)
    assert found_on_the_table(signed_in, q, local_pair) and found_by_the_api(signed_in, q, local_pair)
    # Both stay cached, each for its own viewer (the second read is a cache hit that still differs).
    assert found_on_the_table(signed_in, q, local_pair) and not found_on_the_table(client, q, local_pair)


def test_cached_work_is_keyed_by_the_viewer(caching):
    calls: list[str] = []

    def compute(who: str):
        return lambda: calls.append(who) or who

    assert cache_keys.cached("table", "q=x", compute("public"), viewer="public") == "public"
    assert cache_keys.cached("table", "q=x", compute("paths"), viewer="paths") == "paths"  # not the public one
    assert cache_keys.cached("table", "q=x", compute("again"), viewer="public") == "public"  # cached
    assert calls == ["public", "paths"]
    assert TableQuery(q="x").viewer == "public" and TableQuery(q="x", search_paths=True).viewer == "paths"
