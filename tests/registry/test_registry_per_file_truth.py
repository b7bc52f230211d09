"""The registry tells the truth about every file it lists: verdicts per tokenizer class, shown per file.

A repository of near-miss variants (a padded vocabulary, another token text, BOS or EOS added, another
architecture under the same name, a header-only file) forms one base model by its card; every file pair gets the
verdict check_pair gives those two files, and a hostile second repository changes no verdict, representative file
or parameter count of the first. Runs on SQLite and (db_service) again on PostgreSQL.
"""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from inspector.compat import check_pair
from registry.catalog.combinations import file_verdicts, pair_combinations
from registry.catalog.recheck import recheck_pairs
from registry.catalog.stored import load_info
from registry.models import BaseClass, BaseModel, ClassCheck, GGUFFile, Pair
from tests.ggufgen import vocab
from tests.migrating import leaves, rewind
from tests.registering import BIG, CARD, SMALL, other_text, reg, synth

pytestmark = [pytest.mark.django_db, pytest.mark.db_service]


@pytest.fixture
def near_misses(tmp_path):
    """A target, the publisher's two plain quants of the draft and four near-miss variants claiming the same model."""
    target = reg(synth(tmp_path, "big", tensors=BIG), "Org/Big-7B-GGUF", "big-Q4_K_M.gguf", base_models=["Org/Big-7B"])
    plain = [
        reg(synth(tmp_path, f"small-{q}", tensors=SMALL), "Org/Small-0.5B-GGUF", f"small-{q}.gguf", base_models=CARD)
        for q in ("Q4_K_M", "Q8_0")
    ]
    # The variants are the publisher's repository's own: a newcomer's variant under the same names would start a
    # base model of its own (registry.catalog.bases.admitted; tests/registry/test_claimed_names.py).
    repo = "Org/Small-0.5B-GGUF"
    variants = {
        "vocab_size": reg(synth(tmp_path, "pad", vocab(5129), tensors=SMALL), repo, "pad.gguf", base_models=CARD),
        "token_text": reg(synth(tmp_path, "txt", other_text(3000), tensors=SMALL), repo, "txt.gguf", base_models=CARD),
        "bos": reg(synth(tmp_path, "bos", add_bos=True, bos=1, tensors=SMALL), repo, "bos.gguf", base_models=CARD),
        "eos": reg(synth(tmp_path, "eos", add_eos=True, eos=2, tensors=SMALL), repo, "eos.gguf", base_models=CARD),
    }
    return target, plain, variants


def the_pair() -> Pair:
    return Pair.objects.select_related("target", "draft").exclude(target_base=None).get()


def test_every_file_pair_gets_the_verdict_check_pair_gives_those_two_files(near_misses):
    target, plain, variants = near_misses
    pair = the_pair()
    assert pair.target_base == target.model.base and pair.draft_base == plain[0].model.base
    assert BaseModel.objects.get(pk=pair.draft_base_id).quants == 6
    # Compatible for some quants: the row shows a compatible combination, the publisher's plain file.
    assert pair.compatible and pair.verdict == Pair.VERDICT_PARTIAL
    assert pair.draft_id == plain[0].pk and pair.target_id == target.pk
    judged = {f["source"]: f for f in file_verdicts(target, pair.draft_base_id)}
    assert len(judged) == 6
    for d in GGUFFile.objects.filter(model__base_id=pair.draft_base_id):
        r = check_pair(load_info(target), load_info(d))
        assert (judged[d.source]["compatible"], judged[d.source]["failed_rule"]) == (r.compatible, r.failed_rule), d
    assert {rule: judged[f.source]["failed_rule"] for rule, f in variants.items()} == {r: r for r in variants}


def test_rows_api_csv_and_filters_say_n_of_m(near_misses, client):
    pair = the_pair()
    data = client.get(f"/api/pairs/{pair.pk}").json()
    assert data["compatible"] is True and data["verdict"] == "partial"
    assert data["compatible_quants"] == {"n": 2, "m": 6}
    assert sorted(c["files_count"] for c in data["draft_classes"]) == [1, 1, 1, 1, 2]
    assert [c["files_count"] for c in data["target_classes"]] == [1]
    combos = data["combinations"]
    assert len(combos) == 5 and sum(c["compatible"] for c in combos) == 1
    assert sorted(c["failed_rule"] or "" for c in combos) == ["", "bos", "eos", "token_text", "vocab_size"]

    listed = client.get("/api/pairs?verdict=partial").json()["results"]
    assert [r["id"] for r in listed] == [pair.pk]
    assert [r["id"] for r in client.get("/api/pairs?verdict=usable").json()["results"]] == [pair.pk]
    assert client.get("/api/pairs?verdict=compatible").json()["results"] == []  # not every quant: partial
    html = client.get("/?verdict=all").content.decode()
    assert "partial: 2 of 6 draft quants" in html
    page = client.get(f"/pairs/{pair.pk}/").content.decode()
    assert "Every quant&#x27;s verdict, by tokenizer class" in page or "Every quant's verdict" in page
    assert "fails vocab_size" in page and "fails token_text" in page

    rows = list(csv.DictReader(io.StringIO(b"".join(client.get("/pairs.csv?verdict=all").streaming_content).decode())))
    assert [(r["verdict"], r["compatible_quants"]) for r in rows] == [("partial", "2/6")]


def test_find_drafts_judges_every_draft_file_against_the_target_file(near_misses):
    target, plain, variants = near_misses
    out = io.StringIO()
    call_command("find_drafts", target.source, "--no-hub", "--json", stdout=out)
    found = json.loads(out.getvalue())
    [entry] = found["registered"]
    files = {f["source"]: f for f in entry["draft_files"]}
    assert {s for s, f in files.items() if f["compatible"]} == {p.source for p in plain}
    assert {files[v.source]["failed_rule"] for v in variants.values()} == set(variants)
    text = io.StringIO()
    call_command("find_drafts", target.source, "--no-hub", stdout=text)
    assert "4 of 6 quants refused with this target file: bos, eos, token_text, vocab_size" in text.getvalue()


def test_a_target_file_with_no_compatible_draft_file_lists_no_draft(tmp_path, near_misses):
    target, plain, variants = near_misses
    # Another quant of the target that adds a BOS: only the "bos" variant's class could match it, and that one
    # draft file is compatible; a target quant with a padded vocabulary of 5,300 matches none.
    odd = reg(
        synth(tmp_path, "big-odd", vocab(5300), tensors=BIG),
        "Org/Big-7B-GGUF",
        "big-odd.gguf",
        base_models=["Org/Big-7B"],
    )
    assert odd.model.base_id == target.model.base_id
    out = io.StringIO()
    call_command("find_drafts", odd.source, "--no-hub", "--json", stdout=out)
    assert json.loads(out.getvalue())["registered"] == []


def test_another_architecture_under_the_same_name_gets_a_base_model_of_its_own(tmp_path, near_misses):
    _, plain, _ = near_misses
    mamba = reg(
        synth(tmp_path, "mamba", arch="mamba2", tensors=SMALL), "x/small-mamba-GGUF", "m.gguf", base_models=CARD
    )
    assert mamba.model.base_id != plain[0].model.base_id
    assert mamba.model.base.architecture == "mamba2" and plain[0].model.base.architecture == "llama"
    assert BaseModel.objects.get(pk=plain[0].model.base_id).quants == 6


def test_a_header_only_file_never_moves_the_parameter_count(tmp_path, near_misses):
    _, plain, _ = near_misses
    base = BaseModel.objects.get(pk=plain[0].model.base_id)
    before = base.parameter_count
    assert before == 64
    info = synth(tmp_path, "hollow", tensors=SMALL)
    info.parameter_count, info.data_complete = 10**15, False  # what a header without tensor data may claim
    reg(info, "evil/hollow-GGUF", "hollow.gguf", base_models=CARD)
    # One file with weights far from the others is outvoted too (the lower median of the files with weights).
    far = synth(tmp_path, "far", tensors={"w": np.zeros((512, 512), dtype=np.float32)})
    reg(far, "evil/far-GGUF", "far.gguf", base_models=CARD)
    assert BaseModel.objects.get(pk=base.pk).parameter_count == before
    assert the_pair().draft_id == plain[0].pk  # and the target is still the 7B


def test_a_hostile_second_repository_changes_nothing_of_the_first(tmp_path):
    target = reg(synth(tmp_path, "big", tensors=BIG), "Org/Big-7B-GGUF", "big.gguf", base_models=["Org/Big-7B"])
    mine = reg(synth(tmp_path, "small", tensors=SMALL), "Org/Small-0.5B-GGUF", "small.gguf", base_models=CARD)
    pair = the_pair()
    assert (pair.verdict, pair.draft_id, pair.target_id) == ("compatible", mine.pk, target.pk)
    # Many files, compatible ones of a class of their own (a token below id 5 differs: llama.cpp never compares
    # those), and incompatible ones, from one owner claiming the publisher's model: each a model of its own.
    hostile = [
        reg(
            synth(tmp_path, f"h{i}", other_text(1), tensors=SMALL), f"mallory/h{i}-GGUF", f"h{i}.gguf", base_models=CARD
        )
        for i in range(4)
    ]
    hostile.append(
        reg(synth(tmp_path, "hbad", vocab(5129), tensors=SMALL), "mallory/hbad-GGUF", "hbad.gguf", base_models=CARD)
    )
    assert all(h.model.base_id != mine.model.base_id for h in hostile)
    after = Pair.objects.get(pk=pair.pk)
    assert (after.draft_id, after.target_id, after.verdict) == (mine.pk, target.pk, "compatible")
    assert BaseModel.objects.get(pk=mine.model.base_id).quants == 1
    ok = {f["source"]: f["compatible"] for f in file_verdicts(target, after.draft_base_id)}
    assert ok == {mine.source: True}


def test_without_a_publisher_distinct_owners_decide_not_file_counts(tmp_path):
    t = reg(synth(tmp_path, "big", tensors=BIG), "Org/Big-7B-GGUF", "big.gguf", base_models=["Org/Big-7B"])
    first = reg(synth(tmp_path, "a", tensors=SMALL), "alice/tiny-GGUF", "a.gguf", base_models=["Tiny-0.1B"])
    # One owner: a copy of alice's file (so its repository joins the model), then three variants beside it. Alice's
    # class now has two owners, the variants' one: many files win nothing.
    reg(synth(tmp_path, "copy", tensors=SMALL), "mallory/t-GGUF", "copy.gguf", base_models=["Tiny-0.1B"])
    for i in range(3):
        reg(
            synth(tmp_path, f"m{i}", other_text(2), tensors=SMALL),
            "mallory/t-GGUF",
            f"m{i}.gguf",
            base_models=["Tiny-0.1B"],
        )
    pair = Pair.objects.get(draft_base=first.model.base_id)
    assert BaseModel.objects.get(pk=first.model.base_id).quants == 5
    assert pair.draft.repo == "alice/tiny-GGUF" and pair.target_id == t.pk


def test_recheck_pairs_rechecks_class_verdicts(near_misses):
    # A page read stores the class checks that registration, inside the test's transaction, did not.
    pair_combinations([the_pair()])
    row = ClassCheck.objects.filter(compatible=False, failed_rule="token_text").first()
    assert row is not None
    ClassCheck.objects.filter(pk=row.pk).update(compatible=True, failed_rule="")  # a stale verdict
    Pair.objects.update(verdict="compatible")
    result = recheck_pairs()
    assert result.classes_changed == 1
    assert ClassCheck.objects.get(pk=row.pk).failed_rule == "token_text"
    assert the_pair().verdict == "partial"


def test_the_pair_page_shows_each_sides_files_by_class(near_misses, client):
    _, plain, variants = near_misses
    User.objects.create_user("staff", password="pw", is_staff=True)
    client.force_login(User.objects.get(username="staff"))
    page = client.get(f"/pairs/{the_pair().pk}/").content.decode()
    for f in [*plain, *variants.values()]:
        assert f.source in page


BEFORE_0020 = [("registry", "0019_pair_speedups")]


@pytest.mark.django_db(transaction=True)
def test_the_migration_reads_every_pair_over_all_its_class_combinations_losing_nothing():
    latest = leaves()
    executor = rewind(BEFORE_0020)
    apps = executor.loader.project_state(BEFORE_0020).apps
    Base, Model, File = (apps.get_model("registry", n) for n in ("BaseModel", "Model", "GGUFFile"))
    Class, BaseClassOld, OldPair = (apps.get_model("registry", n) for n in ("TokenizerClass", "BaseClass", "Pair"))
    Reported = apps.get_model("registry", "ReportedResult")
    now = timezone.now()
    # Two classes the class columns tell apart (vocabulary sizes 200 apart): no token table is needed.
    a = Class.objects.create(fingerprint="a" * 64, vocab_type="bpe", vocab_key="bpe:x", n_tokens=5000)
    b = Class.objects.create(fingerprint="b" * 64, vocab_type="bpe", vocab_key="bpe:x", n_tokens=5200)

    def file(base, name: str, cls, repo: str = "org/r"):
        model, _ = Model.objects.get_or_create(repo=repo, name=name, defaults={"base": base})
        return File.objects.create(
            source=f"hf://{repo}/{name}.gguf",
            repo=repo,
            path=f"{name}.gguf",
            model=model,
            info={},
            tokenizer_class=cls,
            vocab_key="bpe:x",
            vocab_type="bpe",
            architecture="llama",
            arch_kind="transformer",
            inspected_at=now,
        )

    big = Base.objects.create(key="big", name="big", rule="header", architecture="llama")
    small = Base.objects.create(key="small", name="small", rule="header", architecture="llama")
    t = file(big, "big", a)
    d1, d2 = file(small, "small-q4", a), file(small, "small-q8", a)
    odd = file(small, "small-padded", b, repo="eve/r")
    BaseClassOld.objects.create(base=big, tokenizer_class=a, file=t)
    BaseClassOld.objects.create(base=small, tokenizer_class=a, file=d1)
    BaseClassOld.objects.create(base=small, tokenizer_class=b, file=odd)
    p = OldPair.objects.create(
        target=t, draft=d1, target_base=big, draft_base=small, compatible=True, llama_cpp_compatible=True,
        rules_from="b11434", checked_at=now,
    )  # fmt: skip
    Reported.objects.create(pair=p, k=4, citation="a paper", speedup=2.0)
    apps.get_model("registry", "ClassCheck").objects.create(a=a, b=a, compatible=True, rules_from="b11434")

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(latest)

    pair = Pair.objects.get()
    assert pair.pk == p.pk and (pair.verdict, pair.compatible) == ("partial", True)
    assert (pair.target_id, pair.draft_id) == (t.pk, d1.pk) and pair.reported_results.count() == 1
    assert set(BaseModel.objects.values_list("key", flat=True)) == {"big@llama", "small@llama"}
    assert sorted(BaseClass.objects.filter(base__key="small@llama").values_list("files", flat=True)) == [1, 2]
    assert {d2.pk, odd.pk} <= set(GGUFFile.objects.values_list("pk", flat=True))


def staff_client(client):
    client.force_login(User.objects.create_user("root", password="pw", is_staff=True, is_superuser=True))
    return client


def test_staff_pin_a_pairs_files_and_registration_keeps_them(tmp_path, near_misses, client):
    target, plain, variants = near_misses
    pair = the_pair()
    url = f"/admin/registry/pair/{pair.pk}/change/"
    staff = staff_client(client)
    # An incompatible combination cannot be pinned while a compatible one exists.
    r = staff.post(url, {"target": target.pk, "draft": variants["bos"].pk, "files_pinned": "on"})
    assert r.status_code == 200 and "pin a compatible combination" in r.content.decode()
    # Another base model's file is refused.
    r = staff.post(url, {"target": plain[0].pk, "draft": plain[1].pk, "files_pinned": "on"})
    assert r.status_code == 200 and "not a file of this pair&#x27;s target base model" in r.content.decode()
    r = staff.post(url, {"target": target.pk, "draft": plain[1].pk, "files_pinned": "on"})
    assert r.status_code == 302
    assert (the_pair().draft_id, the_pair().files_pinned) == (plain[1].pk, True)
    # A later upload from the publisher with an earlier-ranking class does not move pinned files.
    reg(synth(tmp_path, "small-q2", tensors=SMALL), "Org/Small-0.5B-GGUF", "small-Q2_K.gguf", base_models=CARD)
    reg(
        synth(tmp_path, "bos2", add_bos=True, bos=3, tensors=SMALL),
        "Org/Small-0.5B-GGUF",
        "bos2.gguf",
        base_models=CARD,
    )
    after = Pair.objects.get(pk=pair.pk)
    assert (after.draft_id, after.verdict) == (plain[1].pk, "partial")


def test_staff_move_a_misgrouped_model_out_of_its_base_model(near_misses, client):
    target, plain, variants = near_misses
    small = plain[0].model.base
    odd = variants["token_text"].model
    r = staff_client(client).post(
        "/admin/registry/model/", {"action": "move_to_own_base", "_selected_action": [odd.pk]}
    )
    assert r.status_code == 302
    odd.refresh_from_db()
    assert odd.base_id != small.pk and odd.base.rule == "repo" and odd.base.quants == 1
    assert BaseModel.objects.get(pk=small.pk).quants == 5
    pair = the_pair() if Pair.objects.exclude(target_base=None).count() == 1 else Pair.objects.get(draft_base=small)
    data = client.get(f"/api/pairs/{pair.pk}").json()
    assert data["compatible_quants"] == {"n": 2, "m": 5} and len(data["combinations"]) == 4
    # Its own base model never pairs as compatible with the target (its token texts differ).
    assert not Pair.objects.filter(draft_base=odd.base, compatible=True).exists()


def test_a_card_naming_its_own_uploader_makes_no_publisher(tmp_path):
    """Found by bench_scale's hostile uploader: a card saying "evil/Small-0.5B" in evil's own repository made evil the
    publisher, and its compatible near-miss class then became every pair's draft."""
    reg(synth(tmp_path, "big", tensors=BIG), "Org/Big-7B-GGUF", "big.gguf", base_models=["Org/Big-7B"])
    mine = reg(
        synth(tmp_path, "small", tensors=SMALL), "Org/Small-0.5B-GGUF", "small.gguf", base_models=CARD
    )  # Org's own: no claim
    assert mine.model.base.publisher == ""
    for i in range(3):
        reg(
            synth(tmp_path, f"e{i}", other_text(i + 1), tensors=SMALL),
            f"evil/s{i}-GGUF",
            f"e{i}.gguf",
            base_models=["evil/Small-0.5B"],
        )
    assert BaseModel.objects.get(pk=mine.model.base_id).publisher == ""
    mine_pair = Pair.objects.get(draft_base=mine.model.base_id)
    assert mine_pair.draft_id == mine.pk
    # A third party's card names the publisher: Org's files lead from then on.
    reg(synth(tmp_path, "b", tensors=SMALL), "bartowski/Small-0.5B-GGUF", "b.gguf", base_models=CARD)
    assert BaseModel.objects.get(pk=mine.model.base_id).publisher == "Org"
    assert Pair.objects.get(pk=mine_pair.pk).draft_id == mine.pk
