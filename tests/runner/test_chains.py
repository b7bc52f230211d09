"""A chain of methods as one setting: an n-gram method and a draft model together, as llama.cpp's --spec-type list.

llama.cpp orders a chain by a fixed priority (the n-gram types first) and each round uses the first speculator with a
draft; every speculator still processes each round. specreg names it ngram-mod+draft-simple, runs it with
``--spec-type ngram-mod,draft-simple``, replays it through llama.cpp's own loop, and recommends it only when it
measurably beats its methods alone.
"""

from __future__ import annotations

import subprocess

import pytest

from inspector.llama_flags import pinned_server_capabilities
from inspector.spec_flags import Setting, chain_of, known_method, spec_flags, uses_draft_file
from registry.results.figures import Figure
from registry.results.recommend import best_gain
from runner.llama import binaries as llamacpp
from runner.llama import output as parse
from runner.measure.cells import Cell, Run, summarize
from runner.methods import MethodError, check_methods, settings_for
from runner.predict import replay
from runner.sweep.sweep import recommend
from tests.tinystate import mamba2

CHAIN = "ngram-mod+draft-simple"


def test_a_chain_is_named_in_llama_cpps_order_and_runs_as_its_comma_list():
    assert chain_of(["draft-simple", "ngram-mod"]) == CHAIN and known_method(CHAIN)
    assert not known_method("draft-simple+ngram-mod") and not known_method("ngram-mod+ngram-simple")
    assert check_methods(["draft-simple+ngram-mod", "ngram-mod"], has_draft=True) == [CHAIN, "ngram-mod"]
    with pytest.raises(MethodError, match="one n-gram method and one model method"):
        check_methods(["ngram-mod+ngram-map-k"], has_draft=True)
    with pytest.raises(MethodError, match="needs a draft file"):
        check_methods([CHAIN], has_draft=False)
    assert uses_draft_file(CHAIN)
    assert [s.label for s in settings_for(CHAIN, [4, 8], [None])] == [f"{CHAIN} K=4", f"{CHAIN} K=8"]
    caps = pinned_server_capabilities()
    argv = spec_flags(caps, Setting(CHAIN, 4, 0.75))
    assert argv[argv.index("--spec-type") + 1] == "ngram-mod,draft-simple"
    assert argv[argv.index("--spec-draft-n-max") + 1] == "4" and argv[argv.index("--spec-draft-p-min") + 1] == "0.75"


def _cell(method: str, speedup: float, low: float):
    """A cell's result as a sweep summarises it, from interleaved runs whose speed-ups are ``low`` and ``speedup``."""
    runs = [
        Run("plain", 0, 0, "ok", 1.0, 1.0, 100.0, 64),
        Run("spec", 0, 0, "ok", 1.0, 1.0, 100.0 * low, 64, 40, 30),
        Run("plain", 0, 1, "ok", 1.0, 1.0, 100.0, 64),
        Run("spec", 0, 1, "ok", 1.0, 1.0, 100.0 * (2 * speedup - low), 64, 40, 30),
    ]
    return summarize(Cell("t", "d", 4, ("a",), repeats=2, method=method, content_type="code"), runs, "ok", None, 4.0)


class _Result:
    """What a figure's result row carries that the rule reads: the slowest interleaved pair's speed-up."""

    def __init__(self, speedup_min: float) -> None:
        self.speedup_min = speedup_min


def test_a_chain_is_recommended_only_when_it_measurably_beats_its_parts():
    chain, ngram = _cell(CHAIN, 1.30, 1.22), _cell("ngram-mod", 1.25, 1.20)
    r = recommend("code", 0.0, [chain, ngram])
    assert r.method == "ngram-mod" and "did not measurably beat its parts alone (best 1.25x)" in (r.caveat or "")
    chain = _cell(CHAIN, 1.45, 1.32)
    assert recommend("code", 0.0, [chain, ngram]).method == CHAIN
    # the pair page's recommendation follows the same rule
    figures = [
        Figure("measured", 4, 0.8, 1.30, "code", "", "", method=CHAIN, obj=_Result(1.22)),
        Figure("measured", 8, 0.9, 1.25, "code", "", "", method="ngram-mod", obj=_Result(1.20)),
    ]
    assert best_gain(figures).method == "ngram-mod"


@pytest.mark.llama
@pytest.mark.django_db  # transcripts are kept in the database
def test_a_chain_replays_to_llama_cpps_own_counts_and_says_who_drafted():
    # the tiny Mamba-2 repeats itself, so the n-gram finds drafts late in the answer; its noisy copy drafts before
    target = str(mamba2())
    draft = str(mamba2("mamba2-tiny-noise2", seed=7, noise=2.0, base_seed=0))
    prompt = "def fib(n):"
    gen = llamacpp.GenParams(n_predict=64, threads=2)
    setting = Setting(CHAIN, 4, None, ())
    caps = llamacpp.capabilities(llamacpp.find_binary(llamacpp.SPECULATIVE))
    argv = llamacpp.method_argv(caps, target, draft, prompt, gen, setting, round_log=True)  # a checkpointed target
    r = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=300)
    assert "--spec-type" in argv and argv[argv.index("--spec-type") + 1] == "ngram-mod,draft-simple"
    fig = parse.parse_speculative(r.returncode, r.stdout, r.stderr, prompt)
    assert isinstance(fig, parse.SpecFigures) and fig.counted_rounds, fig
    script = replay.transcript(target, prompt, llamacpp.GenParams(n_predict=64 + 64 + 2, threads=2))
    got = replay.replay(target, draft, prompt, gen, setting, script)
    assert (got.n_drafted, got.n_accept) == (fig.n_drafted, fig.n_accept)
    # both speculators drafted some rounds, and llama.cpp's own statistics count the n-gram's the same
    assert set(got.drafters) == {0, 1} and len(got.drafters) == len(got.steps)
    ngram_drafts = int(r.stderr.split("statistics        ngram-mod:")[1].split("#gen drafts =")[1].split(",")[0])
    assert ngram_drafts == got.drafters.count(0)
