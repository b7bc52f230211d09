"""The replay tool against llama.cpp's own counts: the target's transcript, then llama-speculative-simple's loop
with the target's verification read from it, must report exactly the drafted and accepted tokens of the real
run of the same setting (temperature 0)."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from inspector.spec_flags import Setting
from runner.llama import binaries as llamacpp
from runner.llama import build as llama_build
from runner.llama import output as parse
from runner.models import KeptTranscript
from runner.predict import forced, replay
from tests.models import MODELS, model_path

pytestmark = [pytest.mark.llama, pytest.mark.django_db]  # transcripts are kept in the database

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
    # a shorter one is the kept one cut: its first tokens do not depend on how far the target went on
    shorter = replay.transcript(smollm2_path, PROMPT + " (reuse)", replace(gen, n_predict=9))
    assert shorter == replay.Transcript(first.prompt, first.tokens[:9], first.margins[:9])
    with pytest.raises(AssertionError, match="ran again"):  # a longer one is another transcript
        replay.transcript(smollm2_path, PROMPT + " (reuse)", llamacpp.GenParams(n_predict=13, threads=2))
    with pytest.raises(AssertionError, match="ran again"):  # and so is one with other options
        replay.transcript(smollm2_path, PROMPT + " (reuse)", replace(gen, n_predict=9, ctx_size=1024))
    monkeypatch.undo()
    # made afresh, the shorter one is the same tokens: what lets the longer one stand for it
    fresh = replay.transcript(smollm2_path, PROMPT + " (reuse)", replace(gen, n_predict=9, ctx_size=4096))
    assert fresh.tokens == shorter.tokens


def test_a_kept_transcript_is_the_files_by_sha256_and_another_worker_reuses_it_from_the_database(
    smollm2_path, monkeypatch, tmp_path
):
    gen = llamacpp.GenParams(n_predict=6, threads=2)
    prompt = f"{PROMPT} (shared {uuid.uuid4().hex[:8]})"  # new to this machine's own copies too: made now
    first = replay.transcript(smollm2_path, prompt, gen, task="repeat/code/copy")
    row = KeptTranscript.objects.get(task="repeat/code/copy")
    assert row.model_sha256 == MODELS["smollm2"].sha256 and row.model_name == Path(smollm2_path).name
    assert row.data["tokens"] == first.tokens and row.n_predict == 6 and row.seconds > 0
    assert row.hardware_class.startswith("cpu-") and row.build == llama_build.installed_version()
    # Another worker holds the same file at another path and has no copy of its own: the record answers.
    elsewhere = tmp_path / "renamed.gguf"
    try:
        os.link(smollm2_path, elsewhere)
    except OSError:
        shutil.copyfile(smollm2_path, elsewhere)

    def no_run(*args, **kwargs):
        raise AssertionError("the target ran again")

    monkeypatch.setattr(replay, "run_tool", no_run)
    assert replay.transcript(elsewhere, prompt, gen) == first
    KeptTranscript.objects.all().delete()
    assert replay.transcript(elsewhere, prompt, gen) == first  # and it kept its own copy meanwhile
    with pytest.raises(AssertionError, match="ran again"):  # another prompt is another transcript
        replay.transcript(elsewhere, prompt + "!", gen)


PROSE = "Write a short story about a lighthouse keeper who finds a letter in a bottle."
SHORT = "<|im_start|>user\nThe capital of France? One word.<|im_end|>\n<|im_start|>assistant\n"  # ends early


@pytest.mark.parametrize("prompt", [PROMPT, PROSE, SHORT])
def test_the_forced_pass_gives_the_replays_counts_for_every_k_and_p_min(prompt):
    """One teacher-forced pass of the draft (runner.predict.forced) against a replay per setting: the same drafted and
    accepted counts, step by step, for K 2/4/8 at p-min 0 and 0.75 (continuations after confident misses), but
    where the draft's top two tokens nearly tie."""
    target, draft = model_path("qwen15"), model_path("qwen05")
    gen = llamacpp.GenParams(n_predict=48, threads=2, ctx_size=1024)
    settings = [Setting("draft-simple", k, p, ()) for k in (2, 4, 8) for p in (None, 0.75)]
    wanted = gen.n_predict + 8 + 2
    script = replay.transcript(target, prompt, llamacpp.GenParams(n_predict=wanted, threads=2, ctx_size=1024))
    passed = forced.forced_pass(draft, prompt, gen, script, 8, 0.75, ended=len(script.tokens) < wanted)
    assert len(passed.top) == len(script.tokens) and all(0 < p <= 1 for p in passed.p)
    misses = sum(t != s for t, s in zip(passed.top, script.tokens, strict=True))
    if prompt == SHORT:
        assert len(script.tokens) < wanted  # the end-of-generation path is the one tested here
    else:
        assert 0 < misses < len(script.tokens)  # a real pair: some positions miss, most do not
    exact_alike = 0
    for s in settings:
        fast = forced.steps(passed, script, s, gen.n_predict, 1024, len(script.tokens) < wanted)
        exact = replay.replay(target, draft, prompt, gen, s, script)
        if (fast.n_drafted, fast.n_accept, fast.steps) == (exact.n_drafted, exact.n_accept, exact.steps):
            exact_alike += 1
            continue
        # They may part only where the draft's top two nearly tie: the batched pass and the replay's small
        # batches round differently there (seen on prose: p 0.18 against a close second).
        at = 0
        for a, b in zip(fast.steps, exact.steps, strict=False):
            if a != b:
                break
            at += a[1] + 1
        parted = at + min(a[1], b[1])  # the first position whose draft token the two disagree on
        assert passed.gap[parted] < 0.1, (s.label, parted, passed.gap[parted])
    assert exact_alike >= len(settings) - 2


def test_the_target_not_the_draft_says_where_the_transcript_ended():
    """The forced pass drafts on past the transcript's last token only when the caller says the target stopped there
    (an adapted draft may not count the target's end token as its own). The same transcript, ending at
    the target's end of generation, with and without that word."""
    target, draft = model_path("qwen15"), model_path("qwen05")
    gen = llamacpp.GenParams(n_predict=48, threads=2, ctx_size=1024)
    wanted = gen.n_predict + 8 + 2
    script = replay.transcript(target, SHORT, llamacpp.GenParams(n_predict=wanted, threads=2, ctx_size=1024))
    assert len(script.tokens) < wanted  # it ended at the target's end of generation
    ended = forced.forced_pass(draft, SHORT, gen, script, 8, 0.75, ended=True)
    open_ended = forced.forced_pass(draft, SHORT, gen, script, 8, 0.75, ended=False)
    last = len(script.tokens) - 1
    assert ended.top[last] == script.tokens[last]  # the draft proposes the end too: the path that differs
    assert last in ended.cont and last not in open_ended.cont
    assert ended.top == open_ended.top and ended.p == open_ended.p  # nothing else depends on it


def test_above_temperature_0_the_expected_acceptance_is_what_sampled_runs_average():
    """llama.cpp drafts greedily and verifies by sampling the target: the expected counts over sampled
    transcripts (runner.predict.forced.expected) against the mean of real runs with the same four seeds.

    One sampled transcript is one text: on an avx2 build the default seed's answer drafted at 0.87 while the four
    runs averaged 0.60, so each seed's transcript is expected and the four are set against the four runs. Four runs
    of 64 tokens spread widely (their texts part early): on that build the expectation was 0.78 against 0.60
    measured (2026-11-26, 2-core avx2 VM), within 0.1 on an avx512 machine: the bound is 0.2 until
    more seeds (minutes each) can narrow it."""
    target, draft = model_path("qwen15"), model_path("qwen05")
    setting, n = Setting("draft-simple", 4, None, ()), 64
    gen = llamacpp.GenParams(n_predict=n, threads=2, temperature=0.7, ctx_size=1024)
    drafted = accepted = 0.0
    for seed in (1, 2, 3, 4):
        script = replay.transcript(target, PROMPT, replace(gen, n_predict=n + 6, seed=seed))
        assert script.cands is not None and len(script.cands) == len(script.tokens)
        assert all(0.9 <= sum(row[1::2]) <= 1.001 for row in script.cands)  # each row a distribution
        passed = forced.forced_pass(draft, PROMPT, gen, script, 4, 0.0, ended=len(script.tokens) < n + 6)
        got = forced.expected(passed, script, setting, n, 1024, len(script.tokens) < n + 6)
        assert got.n_predict >= n and got.acceptance is not None
        drafted, accepted = drafted + got.n_drafted, accepted + got.n_accept
    runs = [real_counts(target, draft, setting, replace(gen, seed=seed)) for seed in (1, 2, 3, 4)]
    measured = sum(a for _, a in runs) / sum(d for d, _ in runs)
    assert abs(accepted / drafted - measured) < 0.2, (accepted / drafted, measured)
    assert replay.transcript(target, PROMPT, replace(gen, temperature=0.0, n_predict=8)).cands is None
