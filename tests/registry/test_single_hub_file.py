"""A file named as ``hf://OWNER/REPO/PATH`` is registered alone: its repository is not listed, and what registering
it returns is the same ``Registered`` whichever door a file comes through."""

from __future__ import annotations

from urllib.parse import unquote

import pytest

from registry.catalog.local_files import register_local
from registry.catalog.registration import Registered
from registry.hub.importing import import_hf
from registry.hub.sources import SourceRegistrationError, register_source
from registry.models import BaseModel, GGUFFile
from tests.ggufgen import vocab, write_gguf

pytestmark = pytest.mark.django_db

REPO = "Org/Many-GGUF"


@pytest.fixture
def many(fake_hub, tmp_path):
    """A repository of three quants and a card naming its base model."""
    files = {f"many-{q}.gguf": write_gguf(tmp_path / f"{q}.gguf", tokens=vocab(400)) for q in ("Q4_K_M", "Q5_K_M")}
    files["many-Q8_0.gguf"] = write_gguf(tmp_path / "q8.gguf", tokens=vocab(400, seed="q8"))
    fake_hub.add_repo(REPO, files, base_model="Org/Many")
    return fake_hub


def test_one_hub_file_is_registered_without_listing_its_repository(many):
    r = register_source(f"hf://{REPO}/many-Q8_0.gguf")
    f = GGUFFile.objects.get()
    assert isinstance(r, Registered) and r.file == f and r.status == "added"
    repo = many.repos[REPO]
    assert (f.commit, f.etag, f.size) == (repo.commit, repo.sha256("many-Q8_0.gguf"), repo.size("many-Q8_0.gguf"))
    assert f.model.base.rule == BaseModel.RULE_HUB  # named by the card, read without the file list
    paths = [unquote(r.path) for r in many.requests]
    assert not any("blobs" in p for p in paths), paths  # no listing of every file with its size
    assert not any("many-Q4_K_M" in p or "many-Q5_K_M" in p for p in paths), paths
    assert many.bytes_served(REPO, "many-Q4_K_M.gguf") == 0


def test_a_hub_file_registered_alone_is_unchanged_for_a_repository_import(many):
    register_source(f"hf://{REPO}/many-Q8_0.gguf")
    many.reset_counts()
    again = register_source(f"hf://{REPO}/many-Q8_0.gguf")
    assert again.status == "unchanged" and many.bytes_served(REPO, "many-Q8_0.gguf") == 0
    # The etag and size read for one file are those a listing gives: importing the repository skips it.
    report = import_hf(REPO)
    assert {o.path: o.status for o in report.outcomes} == {
        "many-Q4_K_M.gguf": "added",
        "many-Q5_K_M.gguf": "added",
        "many-Q8_0.gguf": "unchanged",
    }
    assert all(o.registered is not None and o.registered.file.pk == o.file_id for o in report.outcomes)


def test_a_missing_hub_file_or_a_later_shard_is_refused_in_one_line(many):
    with pytest.raises(SourceRegistrationError, match="not found"):
        register_source(f"hf://{REPO}/absent.gguf")
    with pytest.raises(SourceRegistrationError, match="named by its first shard"):
        register_source(f"hf://{REPO}/many-00002-of-00003.gguf")
    assert not GGUFFile.objects.exists()


def test_a_local_file_is_registered_as_the_same_result(tmp_path):
    path = write_gguf(tmp_path / "local.gguf", tokens=vocab(400))
    r = register_source(str(path))
    assert isinstance(r, Registered) and r.status == "added" and r.file == GGUFFile.objects.get()
    assert register_local(path) == Registered(r.file, "unchanged")
