"""The replay tool against llama.cpp's own counts: the target's transcript, then llama-speculative-simple's loop
with the target's verification read from it, must report exactly the drafted and accepted tokens of the real
run of the same setting (temperature 0)."""

from __future__ import annotations

import subprocess

import pytest

from inspector.spec_flags import Setting
from runner import llamacpp, parse, replay
from tests.models import model_path

pytestmark = pytest.mark.llama

# A prompt whose continuation repeats what came before: n-gram methods find drafts in it.
CODE = "for i in range(10):\n    total += values[i] * weights[i]\n    count += 1\n"
PROMPT = f"Copy this code three times:\n{CODE}\nFirst copy:\n{CODE}\nSecond copy:\n"


def real_counts(target, draft, setting: Setting, gen: llamacpp.GenParams) -> tuple[int, int]:
    caps = llamacpp.capabilities(llamacpp.find_binary("llama-speculative-simple"))
    r = subprocess.run(
        llamacpp.method_argv(caps, target, draft, PROMPT, gen, setting), capture_output=True, text=True, timeout=300
    )
    fig = parse.parse_speculative(r.returncode, r.stdout, r.stderr, PROMPT)
    assert isinstance(fig, parse.SpecFigures), fig
    return fig.n_drafted, fig.n_accept


def replayed_counts(target, draft, setting: Setting, gen: llamacpp.GenParams) -> replay.Replay:
    script = replay.transcript(target, PROMPT, llamacpp.GenParams(n_predict=gen.n_predict + setting.k + 2, threads=2))
    assert len(script.tokens) == gen.n_predict + setting.k + 2 and len(script.margins) == len(script.tokens)
    return replay.replay(target, draft, PROMPT, gen, setting, script)


@pytest.mark.parametrize("method", ["ngram-mod", "ngram-map-k"])
def test_ngram_methods_replay_to_llama_cpps_own_counts(smollm2_path, method):
    gen = llamacpp.GenParams(n_predict=64, threads=2)
    setting = Setting(method, 8, None, ())
    got = replayed_counts(smollm2_path, None, setting, gen)
    assert got.n_drafted > 0  # the prompt gives the method something to find, or the check says nothing
    assert (got.n_drafted, got.n_accept) == real_counts(smollm2_path, None, setting, gen)
    assert sum(d for d, _ in got.steps) == got.n_drafted and sum(a for _, a in got.steps) == got.n_accept


@pytest.mark.parametrize(("k", "p_min"), [(4, None), (8, 0.75)])
def test_a_draft_model_replays_to_llama_cpps_own_counts(k, p_min):
    target, draft = model_path("qwen15"), model_path("qwen05")
    gen = llamacpp.GenParams(n_predict=64, threads=2)
    setting = Setting("draft-simple", k, p_min, ())
    got = replayed_counts(target, draft, setting, gen)
    assert got.n_accept > 0
    if p_min is None:  # a real pair: some drafts fail, so acceptance is tested (p-min 0.75 keeps only sure ones)
        assert got.n_accept < got.n_drafted
    assert (got.n_drafted, got.n_accept) == real_counts(target, draft, setting, gen)


def test_an_incompatible_draft_short_transcript_and_temperature_are_one_line_errors(smollm2_path):
    gen = llamacpp.GenParams(n_predict=24, threads=2)
    script = replay.transcript(smollm2_path, PROMPT, llamacpp.GenParams(n_predict=8, threads=2))
    with pytest.raises(replay.ReplayError, match="ends before the run does") as e:
        replay.replay(smollm2_path, None, PROMPT, gen, Setting("ngram-mod", 8, None, ()), script)
    assert "\n" not in str(e.value)
    with pytest.raises(replay.ReplayError, match="vocab") as e:
        replay.replay(smollm2_path, model_path("qwen05"), PROMPT, gen, Setting("draft-simple", 4, None, ()), script)
    assert "\n" not in str(e.value)
    with pytest.raises(replay.ReplayError, match="temperature 0 only"):
        replay.replay(
            smollm2_path,
            None,
            PROMPT,
            llamacpp.GenParams(24, temperature=0.8),
            Setting("ngram-mod", 8, None, ()),
            script,
        )


def test_a_transcript_is_made_once_and_reused_until_the_options_change(smollm2_path, monkeypatch):
    gen = llamacpp.GenParams(n_predict=12, threads=2)
    first = replay.transcript(smollm2_path, PROMPT + " (reuse)", gen)
    assert len(first.tokens) == 12

    def no_run(*args, **kwargs):
        raise AssertionError("the target ran again")

    monkeypatch.setattr(replay, "run_tool", no_run)
    assert replay.transcript(smollm2_path, PROMPT + " (reuse)", gen) == first  # from the cache, the target idle
    with pytest.raises(AssertionError, match="ran again"):  # another length is another transcript
        replay.transcript(smollm2_path, PROMPT + " (reuse)", llamacpp.GenParams(n_predict=13, threads=2))
