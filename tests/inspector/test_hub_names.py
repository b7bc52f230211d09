"""One module names Hub things: hf:// sources, shards, repository ids, and which token a read may use."""

from __future__ import annotations

import pytest

from inspector.hub_names import hf_source, hub_token, model_repo_id, shard_glob, shard_names


def test_sources_encode_the_revision_so_a_branch_with_a_slash_stays_one_part():
    assert hf_source("o/r", None, "a/b.gguf") == "hf://o/r/a/b.gguf"
    assert hf_source("o/r", "refs/pr/3", "b.gguf") == "hf://o/r@refs%2Fpr%2F3/b.gguf"


def test_shards_of_a_split_file_and_their_glob():
    assert shard_names("m/x-00001-of-00003.gguf") == [f"m/x-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    assert shard_names("m/x-00002-of-00003.gguf") == ["m/x-00002-of-00003.gguf"]  # named by its first shard only
    assert shard_names("m/x.gguf") == ["m/x.gguf"]
    assert shard_glob("m/x-00001-of-00003.gguf") == "m/x-*-of-00003.gguf" and shard_glob("m/x.gguf") == "m/x.gguf"


@pytest.mark.parametrize(
    "text", ["Qwen/Qwen2.5-0.5B", "hf://Qwen/Qwen2.5-0.5B", "https://huggingface.co/Qwen/Qwen2.5-0.5B/"]
)
def test_repository_ids_in_every_spelling(text):
    assert model_repo_id(text) == "Qwen/Qwen2.5-0.5B"


@pytest.mark.parametrize("text", ["Qwen", "a/b/c", "datasets/x", "spaces/y", "o/..", "o/r--x..y", "-o/r", "o/r?x", ""])
def test_anything_else_is_refused_in_one_line(text):
    with pytest.raises(ValueError, match="not a model repository name"):
        model_repo_id(text)


def test_anonymous_work_sends_no_token_and_commands_let_huggingface_hub_choose():
    assert hub_token(anonymous=True) is False
    assert hub_token(anonymous=False) is None


def test_a_split_file_names_at_most_max_shards():
    from inspector.hub_names import MAX_SHARDS
    from inspector.sources import SourceError

    assert len(shard_names(f"m/x-00001-of-{MAX_SHARDS:05d}.gguf")) == MAX_SHARDS
    for total in (MAX_SHARDS + 1, 99_999, 999_999_999):  # was: one string per shard, 1e9 of them in a web request
        with pytest.raises(SourceError, match=f"a split file of {total:,} shards; at most {MAX_SHARDS:,} are read"):
            shard_names(f"hf://a/b/m-00001-of-{total}.gguf")


def test_first_shard_names_shard_one_of_any_shard():
    from inspector.hub_names import first_shard

    assert first_shard("q/m-00003-of-00007.gguf") == "q/m-00001-of-00007.gguf"
    assert first_shard("m-3-of-7.gguf") == "m-1-of-7.gguf"
    assert first_shard("plain.gguf") == "plain.gguf"
