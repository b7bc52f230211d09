"""Tokenizer classes, base models and registration without a global lock."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, transaction

from inspector.info import inspect_source
from registry.catalog.classes import candidate_classes
from registry.catalog.registration import register
from registry.hub.importing import import_hf
from registry.models import BaseModel, ClassCheck, GGUFFile, Model, Pair, TokenizerClass
from tests.ggufgen import write_gguf
from tests.registering import register_as, synth

# db_service: CI runs these again on PostgreSQL.
pytestmark = [pytest.mark.django_db, pytest.mark.db_service]


def test_files_with_the_same_tokenizer_data_share_one_class_and_others_get_their_own(tmp_path):
    a = register_as(synth(tmp_path, "a"), "org/a-GGUF", "a-Q4_K_M.gguf", size=1000).file
    b = register_as(
        synth(tmp_path, "b", arch="qwen2"), "org/b-GGUF", "b-Q4_K_M.gguf", size=1000
    ).file  # another architecture, the same tokenizer
    c = register_as(
        synth(tmp_path, "c", add_bos=True, bos=1), "org/c-GGUF", "c-Q4_K_M.gguf", size=1000
    ).file  # adds a BOS: another class
    d = register_as(synth(tmp_path, "d", 5100), "org/d-GGUF", "d-Q4_K_M.gguf", size=1000).file  # 100 more tokens
    e = register_as(
        synth(tmp_path, "e", 5200), "org/e-GGUF", "e-Q4_K_M.gguf", size=1000
    ).file  # 200 more: outside a's window
    assert a.tokenizer_class_id == b.tokenizer_class_id
    assert len({a.tokenizer_class_id, c.tokenizer_class_id, d.tokenizer_class_id, e.tokenizer_class_id}) == 4
    assert TokenizerClass.objects.count() == 4
    window = set(candidate_classes(a.tokenizer_class).values_list("pk", flat=True))
    assert window == {a.tokenizer_class_id, c.tokenizer_class_id, d.tokenizer_class_id}
    assert a.tokenizer_class.n_tokens == 5000 and c.tokenizer_class.add_bos is True


def test_classes_pair_what_files_paired_before(tmp_path):
    register_as(synth(tmp_path, "base", 5000), "org/base-GGUF", "base-Q4_K_M.gguf", size=1000)
    register_as(synth(tmp_path, "plus128", 5128), "org/plus128-GGUF", "plus128-Q4_K_M.gguf", size=1000)
    register_as(synth(tmp_path, "plus129", 5129), "org/plus129-GGUF", "plus129-Q4_K_M.gguf", size=1000)
    names = {
        (p.target.model.name, p.draft.model.name) for p in Pair.objects.select_related("target__model", "draft__model")
    }
    assert ("plus128", "base") in names and ("plus129", "plus128") in names and ("plus129", "base") not in names


def test_a_file_without_a_tokenizer_has_no_class_and_no_pairs(tmp_path):
    info = inspect_source(str(write_gguf(tmp_path / "none.gguf", tokens=None, model=None, pre=None)))
    f = register_as(info, "org/none-GGUF", "none-Q4_K_M.gguf", size=1000).file
    assert f.tokenizer_class is None and Pair.objects.count() == 0


def test_the_hub_card_groups_two_uploaders_quants_into_one_base_model(fake_hub, qwen05_header_path, client):
    base = "Qwen/Qwen2.5-Coder-0.5B-Instruct"
    fake_hub.add_repo("Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF", {"q4.gguf": qwen05_header_path}, base_model=base)
    fake_hub.add_repo(
        "someone/coder-small-GGUF",
        {"coder-small-Q4_K_M.gguf": qwen05_header_path, "coder-small-Q8_0.gguf": qwen05_header_path},
        base_model=base,
    )
    import_hf("Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF")
    import_hf("someone/coder-small-GGUF")
    b = BaseModel.objects.get()
    assert b.rule == "hub" and b.key == "qwen2.5-coder-0.5b-instruct@qwen2" and b.name == "Qwen2.5-Coder-0.5B-Instruct"
    assert Model.objects.filter(base=b).values("repo").distinct().count() == 2
    assert GGUFFile.objects.filter(model__base=b).count() == 3
    assert b.parameter_count > 0
    page = client.get(Model.objects.get(repo="someone/coder-small-GGUF").get_absolute_url()).content.decode()
    assert "Base model <strong>Qwen2.5-Coder-0.5B-Instruct</strong>: 2 repositories, 3 quants" in page
    assert "the Hub's model tree" in page and 'href="/models/' in page
    api = client.get(f"/api/models/{Model.objects.get(repo='someone/coder-small-GGUF').pk}").json()["base_model"]
    assert api["rule"] == "hub" and api["quants"] == 3 and {r["quants"] for r in api["repositories"]} == {1, 2}


def test_the_header_names_the_base_model_where_the_card_does_not(qwen05_header_path, qwen15_header_path):
    small = inspect_source(str(qwen05_header_path))
    assert small.basename and small.size_label  # the real file carries both
    register_as(small, "alice/x-GGUF", "x-Q4_K_M.gguf", size=1000)
    register_as(inspect_source(str(qwen05_header_path)), "bob/y-GGUF", "y-Q4_K_M.gguf", size=1000)
    register_as(inspect_source(str(qwen15_header_path)), "bob/z-GGUF", "z-Q4_K_M.gguf", size=1000)
    bases = {b.name: b for b in BaseModel.objects.all()}
    assert len(bases) == 2 and all(b.rule == "header" for b in bases.values())
    small_base = next(b for b in bases.values() if "0.5B" in b.name)
    assert small_base.models.count() == 2 and {m.repo for m in small_base.models.all()} == {
        "alice/x-GGUF",
        "bob/y-GGUF",
    }
    # The card's name and the header's name meet on one key.
    assert small_base.key == "qwen2.5-coder-0.5b-instruct@qwen2"


def test_without_card_or_size_label_the_repository_is_the_base_model(tmp_path):
    register_as(synth(tmp_path, "a"), "org/a-GGUF", "a-Q4_K_M.gguf", size=1000)
    register(synth(tmp_path, "a8"), source="hf://org/a-GGUF/a-Q8_0.gguf", repo="org/a-GGUF", path="a-Q8_0.gguf")
    register_as(synth(tmp_path, "b"), "org/a-GGUF", "b-Q4_K_M.gguf", size=1000)  # another model in the same repository
    register_as(synth(tmp_path, "c"), "org/c-GGUF", "c-Q4_K_M.gguf", size=1000)
    assert sorted(BaseModel.objects.values_list("key", "rule", "name")) == [
        ("repo:org/a-gguf/a@llama", "repo", "a"),
        ("repo:org/a-gguf/b@llama", "repo", "b"),
        ("repo:org/c-gguf/c@llama", "repo", "c"),
    ]
    assert GGUFFile.objects.filter(model__base__name="a").count() == 2


def _needs_concurrent_writers() -> None:
    if connection.vendor == "sqlite":
        pytest.skip("SQLite serialises writers by design; the CI run on PostgreSQL (.ci/run) runs this")


@pytest.mark.django_db(transaction=True)
def test_two_workers_registering_the_two_halves_of_pairs_at_once_make_each_pair_once(tmp_path):
    _needs_concurrent_writers()
    rounds = 6
    infos = [
        (synth(tmp_path, f"t{i}", 6000 + 300 * i), synth(tmp_path, f"d{i}", 6000 + 300 * i)) for i in range(rounds)
    ]
    errors: list[BaseException] = []

    def work(side: int, barrier: threading.Barrier, i: int) -> None:
        try:
            barrier.wait(10)
            register_as(infos[i][side], f"org/{'td'[side]}{i}-GGUF", f"{'td'[side]}{i}-Q4_K_M.gguf", size=1000)
        except BaseException as exc:  # noqa: BLE001 - the assertion shows it
            errors.append(exc)
        finally:
            connection.close()

    for i in range(rounds):
        barrier = threading.Barrier(2)
        threads = [threading.Thread(target=work, args=(side, barrier, i)) for side in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert errors == []
    assert GGUFFile.objects.count() == 2 * rounds
    pairs = list(Pair.objects.values_list("target__model__name", "draft__model__name"))
    assert len(pairs) == rounds == len(set(pairs))  # each round's pair once, nothing across rounds (windows apart)
    assert all(p.compatible and p.result["compatible"] for p in Pair.objects.all())


@pytest.mark.django_db(transaction=True)
def test_a_registration_does_not_wait_for_another_registrations_open_transaction(tmp_path):
    _needs_concurrent_writers()
    a, b = synth(tmp_path, "a"), synth(tmp_path, "b")
    # Their token table, class and family exist already (a new one is a unique row: a second writer of the
    # same row rightly waits for the first, for the milliseconds a registration's own transaction lasts).
    register_as(synth(tmp_path, "c"), "org/c-GGUF", "c-Q4_K_M.gguf", size=1000)
    holding, release, errors = threading.Event(), threading.Event(), []

    def slow_caller() -> None:
        try:
            with transaction.atomic():  # a caller's own transaction, held open (import_kb works like this)
                register_as(a, "org/a-GGUF", "a-Q4_K_M.gguf", size=1000)
                holding.set()
                release.wait(30)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connection.close()

    t = threading.Thread(target=slow_caller)
    t.start()
    assert holding.wait(30)
    started = time.monotonic()
    register_as(
        b, "org/b-GGUF", "b-Q4_K_M.gguf", size=1000
    )  # a registry-wide lock would hold this until the other transaction ends
    waited = time.monotonic() - started
    release.set()
    t.join(30)
    assert errors == [] and waited < 10
    # The held file could not be seen when b paired; it paired again once its transaction committed, and
    # recorded the class check it had only used while the caller's transaction was open.
    assert Pair.objects.count() == 3 and ClassCheck.objects.count() == 1


@pytest.mark.django_db(transaction=True)  # registrations outside any transaction of the test's, as in production
def test_the_vocabulary_rules_are_decided_once_per_pair_of_classes_and_the_whole_check_on_demand(tmp_path):
    from registry.models import PairCheckResult

    for name in ("a", "b", "c", "d"):  # four models, one tokenizer class
        register_as(synth(tmp_path, name), f"org/{name}-GGUF", f"{name}-Q4_K_M.gguf", size=1000)
    register_as(
        synth(tmp_path, "bos", add_bos=True, bos=1), "org/bos-GGUF", "bos-Q4_K_M.gguf", size=1000
    )  # a second class
    assert Pair.objects.count() == 10 and Pair.objects.filter(compatible=True).count() == 6
    # Six compatible pairs from one class pair, four incompatible ones from the other: two decisions.
    assert sorted(ClassCheck.objects.values_list("compatible", "failed_rule")) == [(False, "bos"), (True, "")]
    assert not PairCheckResult.objects.exists()  # nothing stored per pair
    p = Pair.objects.filter(compatible=False).first()
    assert p.failed_rule == "bos" and p.result["failed_rule"] == "bos"  # the whole check, computed when asked
    assert [c["rule"] for c in p.result["checks"]][0] == "architecture"


def test_a_file_that_changes_base_model_moves_its_quant_count(tmp_path):
    info = synth(tmp_path, "a")
    first = register(info, source="hf://org/a-GGUF/a-Q4_K_M.gguf", repo="org/a-GGUF", path="a-Q4_K_M.gguf", etag="1")
    old = first.file.model.base
    assert old.rule == "repo" and BaseModel.objects.get(pk=old.pk).quants == 1
    # The repository's card names its base model later: the file is read again and moves.
    again = register(
        synth(tmp_path, "a2"),
        source="hf://org/a-GGUF/a-Q4_K_M.gguf",
        repo="org/a-GGUF",
        path="a-Q4_K_M.gguf",
        etag="2",
        base_models=["Org/Model-7B"],
    )
    assert again.status == "updated" and again.file.model.base.rule == "hub"
    assert dict(BaseModel.objects.values_list("key", "quants")) == {old.key: 0, "model-7b@llama": 1}


def test_deleting_files_in_the_admin_counts_their_base_models_quants_again(tmp_path):
    from django.contrib import admin

    from registry.admin import GGUFFileAdmin

    a = register_as(synth(tmp_path, "a"), "org/a-GGUF", "a-Q4_K_M.gguf", size=1000).file
    register(synth(tmp_path, "a8"), source="hf://org/a-GGUF/a-Q8_0.gguf", repo="org/a-GGUF", path="a-Q8_0.gguf")
    base = a.model.base
    assert BaseModel.objects.get(pk=base.pk).quants == 2
    GGUFFileAdmin(GGUFFile, admin.site).delete_queryset(None, GGUFFile.objects.filter(pk=a.pk))
    assert BaseModel.objects.get(pk=base.pk).quants == 1


def test_deleting_the_quant_a_pair_was_checked_on_moves_the_pair_to_another_quant(tmp_path, admin_client):
    from django.db.models import F

    from registry.models import BaseClass
    from registry.team.models import Note

    a = register_as(synth(tmp_path, "a"), "org/a-GGUF", "a-Q4_K_M.gguf", size=1000).file
    a8 = register(
        synth(tmp_path, "a8"), source="hf://org/a-GGUF/a-Q8_0.gguf", repo="org/a-GGUF", path="a-Q8_0.gguf"
    ).file
    register_as(synth(tmp_path, "b"), "org/b-GGUF", "b-Q4_K_M.gguf", size=1000)
    pair = Pair.objects.exclude(target_base=F("draft_base")).get()
    side = "target" if pair.target_id == a.pk else "draft"
    assert getattr(pair, f"{side}_id") == a.pk
    Note.objects.create(pair=pair, body="K=4 held up.", author_name="sam")

    # The admin's confirmation lists what the deletion really takes: not the pair, which moves.
    confirm = admin_client.get(f"/admin/registry/gguffile/{a.pk}/delete/").content.decode()
    assert "Pair:" not in confirm and "Note:" not in confirm
    assert admin_client.post(f"/admin/registry/gguffile/{a.pk}/delete/", {"post": "yes"}).status_code == 302

    pair = Pair.objects.get(pk=pair.pk)  # still there, with its note, checked on the other quant
    assert getattr(pair, f"{side}_id") == a8.pk and pair.notes.count() == 1
    assert "a-q8_0.gguf" in pair.search_text and "a-q4_k_m.gguf" not in pair.search_text
    assert BaseClass.objects.filter(base=a8.model.base).values_list("file_id", flat=True).get() == a8.pk

    # The base model's last file takes its pairs with it (and the confirmation says so).
    assert "Pair:" in admin_client.get(f"/admin/registry/gguffile/{a8.pk}/delete/").content.decode()
    admin_client.post(f"/admin/registry/gguffile/{a8.pk}/delete/", {"post": "yes"})
    assert not Pair.objects.filter(pk=pair.pk).exists()
