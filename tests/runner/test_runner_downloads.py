"""Benchmarks of hf:// files: downloaded through huggingface_hub from the local test Hub, verified, budgeted."""

from __future__ import annotations

import hashlib

import pytest

from registry.catalog.pairing import pair_for
from registry.hub.sources import register_source
from registry.models import BenchmarkRun
from runner.runs import submit
from runner.runs.downloads import DownloadError, local_paths
from runner.runs.execute import execute
from tests.hub_repos import SMOL_SPEC
from tests.registering import SMOL


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_it_downloads_and_verifies_a_registered_file(db, hub_with_smollm2, smollm2_path):
    f = register_source(SMOL_SPEC).file
    seen = []
    (path,) = local_paths(f.source, f.size, f.etag, lambda done, total: seen.append((done, total)))
    assert sha256(path) == sha256(smollm2_path) == f.etag
    assert seen and seen[-1] == (f.size, f.size)
    again = local_paths(f.source, f.size, f.etag)  # cached: nothing fetched twice
    assert again == [path]


def test_the_disk_budget_refuses_a_download(db, hub_with_smollm2, settings):
    settings.SPECREG_DISK_BUDGET_BYTES = 10_000_000
    f = register_source(SMOL_SPEC).file
    with pytest.raises(DownloadError, match="disk budget"):
        local_paths(f.source, f.size, f.etag)
    assert not list((settings.SPECREG_MODEL_DIR).rglob("*.gguf"))


def test_a_cached_file_needs_no_room_when_the_folder_is_full(db, hub_with_smollm2, settings):
    f = register_source(SMOL_SPEC).file
    (path,) = local_paths(f.source, f.size, f.etag)
    # Another user's files fill the folder past its budget: a cached file is still found, and nothing is fetched.
    (settings.SPECREG_MODEL_DIR / "filler.bin").write_bytes(b"\0" * 1000)
    settings.SPECREG_DISK_BUDGET_BYTES = f.size + 10
    assert local_paths(f.source, f.size, f.etag) == [path]
    other = SMOL_SPEC.replace("q4_1", "q8_0")  # a file not cached still asks for room
    with pytest.raises(DownloadError, match="disk budget"):
        local_paths(other, f.size, "")


def test_a_file_gone_from_the_hub_fails_the_download_in_one_line(db, hub_with_smollm2):
    f = register_source(SMOL_SPEC).file
    hub_with_smollm2.repos[SMOL].files.pop("smollm2-135m-instruct-q4_1.gguf")
    with pytest.raises(DownloadError) as exc:
        local_paths(f.source, f.size, f.etag)
    assert "download failed" in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.llama
def test_a_benchmark_of_hub_files_downloads_them_first(transactional_db, hub_with_smollm2, settings):
    settings.SPECREG_QUEUE_PREFIX = "nobody-listens."
    f = register_source(SMOL_SPEC).file
    run = submit.queue_benchmark(
        pair_for(f, f),
        {
            "ks": [4],
            "extend": False,
            "content_types": ["json"],
            "repeats": 1,
            "n_predict": 16,
            "prompts_per_type": 1,
            "p_min": 0.0,
        },
        hardware="cpu-test",
    )
    assert execute(run.pk) == "done"
    run = BenchmarkRun.objects.get(pk=run.pk)
    assert "fetching hf://" in run.log and run.results.get().speculation_ran
    assert hub_with_smollm2.bytes_served(SMOL, "smollm2-135m-instruct-q4_1.gguf") >= f.size
