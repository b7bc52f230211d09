"""Registering files one by one settles every pair as settling everything again would.

Registration settles a pair incrementally where it can (``settling.Gained``: a class new to one side's base model,
decided from what the pair already holds) and over every combination where it must; ``resettle`` settles every pair
over every combination. On a generated registry (two vocabularies, base models of three sizes, uploads by the
publisher and by others, near-miss tokenizers: another token text, BOS added, a padded vocabulary, a change below
the ids llama.cpp compares) registered in a shuffled order, every stored column of every Pair row is the same
either way.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

from inspector.info import ModelInfo, inspect_source
from registry.catalog.registration import register
from registry.catalog.settling import resettle
from registry.models import BaseModel, Pair
from tests.ggufgen import vocab, write_gguf

pytestmark = pytest.mark.django_db

SIZES = {
    "Big": {"w": np.zeros((64, 64), dtype=np.float32)},  # 4,096 parameters
    "Mid": {"w": np.zeros((32, 32), dtype=np.float32)},  # 1,024
    "Small": {"w": np.zeros((8, 8), dtype=np.float32)},  # 64
    "Tiny": {"w": np.zeros((8, 8), dtype=np.float32)},  # 64: the same size as Small (the key decides the target)
}


class Variant(NamedTuple):
    """How an upload's tokenizer differs from the plain one (each variant a class of its own)."""

    change: dict[int, str] = {}
    extra: int = 0  # tokens appended
    add_bos: bool | None = None


VARIANTS = {
    "plain": Variant(),
    "text": Variant(change={3000: "something else"}),  # fails token_text against the others
    "low": Variant(change={1: "low"}),  # below the ids llama.cpp compares: passes
    "bos": Variant(add_bos=True),  # fails bos against the others
    "padded": Variant(extra=64),  # 64 more tokens: within the size window, passes
}

UPLOADERS = ("Org", "alice", "bob")  # Org publishes every model (the cards name it)


def header(folder: Path, family: str, size: str, variant: str) -> ModelInfo:
    v = VARIANTS[variant]
    tokens = vocab(5000 + v.extra, seed=family)
    for token_id, text in v.change.items():
        tokens[token_id] = text
    path = folder / f"{family}-{size}-{variant}.gguf"
    if not path.exists():
        bos = 1 if v.add_bos else None
        write_gguf(path, tokens=tokens, tensors=SIZES[size], add_bos=v.add_bos, bos=bos)
    return inspect_source(str(path))


def uploads(seed: int) -> list[tuple[str, str, str, str, str]]:
    """(family, size, variant, uploader, quant) for every file of the generated registry, in a shuffled order."""
    rng = random.Random(seed)
    out = []
    for family in ("a", "b"):
        for size in SIZES:
            for uploader in UPLOADERS:
                for quant in rng.sample(["Q4_K_M", "Q5_K_M", "Q8_0"], rng.randint(0, 2)):
                    out.append((family, size, rng.choice(list(VARIANTS)), uploader, quant))
    rng.shuffle(out)
    return out


def register_all(folder: Path, seed: int) -> None:
    """Register the generated registry one file at a time, as imports do."""
    for family, size, variant, uploader, quant in uploads(seed):
        repo = f"{uploader}/{family}-{size}-GGUF"
        name = f"{family}-{size}-{variant}-{quant}"
        register(
            header(folder, family, size, variant),
            source=f"hf://{repo}/{name}.gguf",
            repo=repo,
            path=f"{name}.gguf",
            etag=f"etag-{repo}-{name}",
            base_models=[f"Org/{family}-{size}"],
        )


def stored_pairs() -> list[dict[str, object]]:
    return list(Pair.objects.order_by("pk").values())


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_registering_one_by_one_stores_what_settling_everything_again_stores(tmp_path, seed):
    register_all(tmp_path, seed)
    registered = stored_pairs()
    verdicts = {p["verdict"] for p in registered}
    assert len(registered) >= 10 and len(verdicts) >= 2, verdicts  # a registry that exercises the rules
    assert resettle(BaseModel.objects.values_list("pk", flat=True)) == 0
    assert stored_pairs() == registered
