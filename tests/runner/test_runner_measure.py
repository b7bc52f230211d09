"""One measurement cell with real llama.cpp and SmolLM2-135M drafting for itself (small and fast on 2 cores)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from gguf import GGUFValueType

from inspector.info import inspect_source
from runner.llama import binaries as llamacpp
from runner.measure.cli import Cell, Run, compare_texts, context_size, measure_cell, other_cpu_share, summarize
from runner.prompts import read_chat_template, render_prompt
from tests.models import model_path
from tests.near_miss import rewrite
from tests.needs import missing

# Counting leaves no near-ties between tokens, so batched verification cannot flip an argmax here.
# On open-ended prompts it can: with a code prompt this build's SmolLM2 output already differs between
# llama-completion -ub 1 and the default batch, and the self-drafted output differs after ~120 characters.
COUNT = "Count from 1 to 40: 1, 2, 3, 4, 5,"


@pytest.fixture(scope="module")
def smollm2(smollm2_path) -> str:
    try:
        llamacpp.find_binary(llamacpp.SPECULATIVE)
        llamacpp.find_binary(llamacpp.COMPLETION)
    except llamacpp.LlamaCppNotFound as exc:
        missing(str(exc))
    return str(smollm2_path)


@pytest.mark.llama
def test_self_draft_accepts_everything_and_matches_plain_output(smollm2):
    progress = []
    res = measure_cell(
        Cell(smollm2, smollm2, 4, (COUNT,), n_predict=32, repeats=1), progress=lambda f, m: progress.append((f, m))
    )
    assert res.status == "ok", res.error
    assert res.speculation_ran and res.n_drafted > 0
    assert res.acceptance_rate >= 0.9
    assert res.mean_accepted_per_verification > 2
    assert res.identical is True and res.first_difference is None
    assert res.speedup == pytest.approx(res.spec.median / res.plain.median)
    assert [f for f, _ in progress] == [0.5, 1.0]
    plain, spec = res.runs
    assert (plain.kind, spec.kind) == ("plain", "spec")  # A then B
    assert "6, 7, 8" in plain.text and spec.text.startswith(plain.text)
    assert spec.n_tokens >= 32  # speculation may overshoot -n
    assert 0 < res.llama_s < res.process_s <= res.elapsed_s


# SmolLM2 given a DeepSeek-R1-Distill-style header (tensor data unchanged): R1's chat template read from the real 7B
# header, R1's texts on SmolLM2's own control tokens and R1's add-BOS flag, so every prompt starts with BOS.
R1_STYLE_TEXTS = {0: "<｜end▁of▁sentence｜>", 1: "<｜User｜>", 2: "<｜Assistant｜>", 3: "<｜begin▁of▁sentence｜>"}


@pytest.fixture(scope="module")
def r1_style(smollm2, tmp_path_factory) -> str:
    template = inspect_source(str(model_path("r1_7b_header"))).tokenizer.chat_template
    kv = {
        "tokenizer.chat_template": (template, GGUFValueType.STRING),
        "tokenizer.ggml.add_bos_token": (True, GGUFValueType.BOOL),
        "tokenizer.ggml.bos_token_id": (3, GGUFValueType.UINT32),
        "tokenizer.ggml.eos_token_id": (0, GGUFValueType.UINT32),
        "tokenizer.ggml.padding_token_id": (0, GGUFValueType.UINT32),
    }
    out = tmp_path_factory.mktemp("r1-style") / "smollm2-r1-style.gguf"
    return str(rewrite(Path(smollm2), out, texts=R1_STYLE_TEXTS, kv=kv, data=True))


@pytest.mark.llama
def test_an_add_bos_target_with_a_deepseek_style_template_reads_alike_on_both_sides(r1_style, smollm2):
    # The prompt as a benchmark renders it: R1's template, its BOS text left for llama.cpp to add.
    question = "Write a Python function that returns the n-th Fibonacci number."
    rendered = render_prompt(question, read_chat_template(r1_style))
    assert rendered.templated and rendered.text == f"<｜User｜>{question}<｜Assistant｜>"
    res = measure_cell(Cell(r1_style, r1_style, 4, (rendered.text,), n_predict=12, repeats=1))
    assert res.status == "ok", res.error
    assert res.identical is True and res.first_difference is None, res.divergences
    plain, spec = res.runs
    # This model answers with SmolLM2's <|im_start|>, here the control token "<｜User｜>": llama-speculative-simple
    # prints it, so the plain run must too (the same tokens were generated; llama-completion hid them by default).
    assert plain.text.startswith("\n<｜User｜>") and spec.text.startswith(plain.text), (plain.text, spec.text)

    # A reply its model ends: llama-completion then prints the end token ("<|im_end|>"), llama-speculative-simple
    # does not; the plain text leaves it out. (Which short reply depends on the build's kernels: "Yes." with AVX-512,
    # a sentence with AVX2.)
    rendered = render_prompt("Reply with only the word yes.", read_chat_template(smollm2))
    res = measure_cell(Cell(smollm2, smollm2, 4, (rendered.text,), n_predict=48, repeats=1))
    assert res.status == "ok", res.error
    plain, spec = res.runs
    assert plain.n_tokens < 48, plain.text  # the model ended its reply
    assert plain.text and "<|im_end|>" not in plain.text, plain.text
    assert plain.text == spec.text and res.identical is True, (plain.text, spec.text)


@pytest.mark.llama
def test_nothing_drafted_means_no_speedup(smollm2):
    # p-min 1.0: the draft is never that sure, so it proposes nothing
    res = measure_cell(Cell(smollm2, smollm2, 4, (COUNT,), n_predict=16, repeats=1, p_min=1.0))
    assert res.status == "ok", res.error
    assert not res.speculation_ran and res.n_drafted == 0
    assert res.speedup is None and res.acceptance_rate is None
    assert res.plain is not None and res.spec is not None


@pytest.mark.llama
def test_broken_model_gives_a_clear_error(smollm2, tmp_path):
    broken = tmp_path / "broken.gguf"
    with open(smollm2, "rb") as src:
        broken.write_bytes(src.read(3_000_000))  # header intact, tensor data cut off
    res = measure_cell(Cell(str(broken), str(broken), 4, (COUNT,), n_predict=8, repeats=1))
    assert res.status == "failed"
    assert res.error.startswith("llama-completion failed (exit 1): error loading model")
    assert "corrupted or incomplete" in res.error
    assert res.speedup is None and res.plain is None


@pytest.mark.llama
def test_cancel_stops_the_cell(smollm2):
    start = time.monotonic()
    res = measure_cell(
        Cell(smollm2, smollm2, 4, (COUNT,), n_predict=4000, repeats=3, ctx_size=4096),
        should_cancel=lambda: time.monotonic() - start > 0.5,
    )
    assert res.status == "cancelled"
    assert len(res.runs) == 1 and res.runs[0].state == "cancelled"  # its first run killed, no other started
    assert time.monotonic() - start < 30  # does not hang: 3 x 2 runs of 4,000 tokens would take minutes


@pytest.mark.llama
def test_time_limit_stops_the_cell(smollm2):
    res = measure_cell(
        Cell(smollm2, smollm2, 4, ("Once upon a time",), n_predict=100_000, repeats=1, ctx_size=8192, timeout_s=1.0)
    )
    assert res.status == "timeout" and "1 s limit" in res.error


def test_missing_model_file(tmp_path):
    res = measure_cell(Cell(str(tmp_path / "t.gguf"), str(tmp_path / "d.gguf"), 4, ("x",)))
    assert res.status == "failed" and "model file not found" in res.error


def test_compare_texts_over_the_plain_span():
    assert compare_texts("abc def", "abc def ghi") is None  # overshoot ignored
    assert compare_texts("abc def", "abc xyz") == 4
    assert compare_texts("abc def", "abc") == 3  # speculative output ended early
    assert compare_texts("ab\ufffd", "abé") is None  # a token cut a UTF-8 character


def _run(kind, tps, i=0, r=0, text="same", n=10, drafted=0, accept=0):
    return Run(kind, i, r, "ok", 1.0, 0.5, tps, n, drafted, accept, None, text)


def test_summary_median_spread_speedup_and_divergence():
    cell = Cell("t", "d", 4, ("p",), repeats=3)
    runs = [
        _run("plain", 10, r=0),
        _run("spec", 8, r=0, drafted=8, accept=6),
        _run("plain", 12, r=1),
        _run("spec", 9, r=1, drafted=8, accept=6, text="sa different"),
        _run("plain", 11, r=2),
        _run("spec", 15, r=2, drafted=8, accept=6),
    ]
    res = summarize(cell, runs, "ok", None, 7.0)
    assert (res.plain.median, res.plain.min, res.plain.max) == (11, 10, 12)
    assert (res.spec.median, res.spec.min, res.spec.max) == (9, 8, 15)
    assert res.speedup == pytest.approx(9 / 11)  # below 1 kept as it is
    assert res.acceptance_rate == pytest.approx(18 / 24)
    assert res.mean_accepted_per_verification == pytest.approx(18 / 12)  # 3 runs x (10 tokens - 6 accepted)
    assert res.identical is False and res.first_difference == 2  # "same" vs "sa different"
    assert res.divergences[0].repeat == 1
    assert res.process_s == 6.0 and res.llama_s == 3.0


def test_no_identity_check_above_temperature_zero():
    cell = Cell("t", "d", 4, ("p",), temperature=0.7)
    res = summarize(cell, [_run("plain", 10), _run("spec", 12, text="other", drafted=4, accept=2)], "ok", None, 1.0)
    assert res.identical is None and res.speedup == pytest.approx(1.2)


def test_context_grows_to_fit_prompt_generation_and_draft():
    assert context_size(Cell("t", "d", 4, ("x" * 100,), n_predict=128, ctx_size=2048)) == 2048
    assert context_size(Cell("t", "d", 16, ("x" * 3000,), n_predict=1000, ctx_size=2048)) == 4096  # 4080 rounded up


def test_other_cpu_share():
    cores = os.cpu_count()
    # the machine used 3 s of CPU more than we did over 1.5 s
    assert other_cpu_share((100.0, 10.0), (104.0, 11.0), 1.5) == pytest.approx(3 / (1.5 * cores))
    assert other_cpu_share((100.0, 10.0), (101.0, 11.0), 1.5) == 0.0
    assert other_cpu_share(None, (1.0, 1.0), 1.0) is None


@pytest.mark.llama
def test_via_server_measures_the_deployed_servers_and_leaves_none_running(smollm2):
    from runner.llama import procs
    from runner.measure.server import plain_server_argv

    caps = llamacpp.capabilities(llamacpp.find_binary(llamacpp.SERVER))
    argv = plain_server_argv(caps, smollm2, 1, ctx_size=512, threads=None, gpu_layers=None)
    assert argv[argv.index("--spec-type") + 1] == "none"  # the baseline server never speculates
    assert argv[argv.index("-np") + 1] == "1" and argv[argv.index("-c") + 1] == "512"  # one slot, as deployed
    progress = []
    res = measure_cell(
        Cell(smollm2, smollm2, 4, (COUNT,), n_predict=32, repeats=2, via="server"),
        progress=lambda f, m: progress.append(m),
    )
    assert res.status == "ok", res.error
    assert [r.kind for r in res.runs] == ["plain", "spec", "plain", "spec"]  # A B A B
    assert res.speculation_ran and res.n_drafted > 0 and res.acceptance_rate >= 0.9
    assert all(r.n_drafted == 0 for r in res.runs if r.kind == "plain")
    assert res.identical is True and "6, 7, 8" in res.runs[0].text
    assert res.speedup == pytest.approx(res.spec.median / res.plain.median)
    assert all("via server" in m for m in progress)
    assert not procs._live_groups  # both servers stopped with their process groups


@pytest.mark.llama
def test_via_server_reports_a_server_that_cannot_load(smollm2, tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    res = measure_cell(Cell(str(bad), "", 8, (COUNT,), n_predict=8, repeats=1, via="server", method="ngram-mod"))
    assert res.status == "failed" and res.error.startswith("plain llama-server: ")
    assert "\n" not in res.error


def test_earliest_difference_is_any_prompts():
    """A cell of two prompts whose second parts earlier than its first: the whole cell's acceptance is another text's
    from that earlier character on, so the comparison rule reads the earliest parting, not the first prompt's."""
    cell = Cell("t", "d", 4, ("p", "q"), repeats=1)
    runs = [
        _run("plain", 10, i=0, text="the same text, long"),
        _run("spec", 8, i=0, drafted=8, accept=6, text="the same text, lung"),
        _run("plain", 10, i=1, text="another text"),
        _run("spec", 8, i=1, drafted=8, accept=6, text="anoth3r text"),
    ]
    res = summarize(cell, runs, "ok", None, 4.0)
    assert res.first_difference == 16 and res.earliest_difference == 5
