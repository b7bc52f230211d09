"""Parsing llama.cpp output captured from the real build 11434 (SmolLM2-135M drafting for itself, 2-core CPU)."""

# ruff: noqa: E501  (captured lines are kept as llama.cpp printed them)
from __future__ import annotations

import pytest

from runner.llama import output as parse
from runner.llama.output import PlainFigures, RunFailure, ServerFigures, SpecFigures

PROMPT = "<|im_start|>user\nWrite a haiku about rain.<|im_end|>\n<|im_start|>assistant\n"
GENERATED = (
    "The rain of leaves on the wind's path, a fleeting sight, a fleeting sight, a fleeting sight, "
    "a fleeting sight, a fleeting sight, a fleeting sight, a fleeting sight"
)

# llama-speculative-simple -n 32 --spec-draft-n-max 4 --spec-type draft-simple -lv 4: stdout is
# "\n\n" + the prompt echoed token by token + the generated text + "\n\n" + "\n\n"
SPEC_STDOUT = "\n\n" + PROMPT + GENERATED + "\n\n\n\n"
SPEC_STDERR = """\
0.01.536.504 I encoded   16 tokens in    0.123 seconds, speed:  130.017 t/s
0.01.536.505 I decoded   37 tokens in    0.745 seconds, speed:   49.632 t/s
0.01.536.505 I
0.01.536.544 I n_draft   = 4
0.01.536.544 I n_predict = 37
0.01.536.545 I n_drafted = 29
0.01.536.545 I n_accept  = 29
0.01.536.546 I accept    = 100.000%
0.01.536.546 I
0.01.536.546 I draft:

0.03.856.065 I spec common_specu: statistics     draft-simple: #calls(b,g,a) =    1      8      8, #gen drafts =      8, #acc drafts =     8, #gen tokens =     29, #acc tokens =    29, #mean acc len = 4.62, #acc rate/pos = (1.000, 0.875, 0.875, 0.875), dur(b,g,a) = 0.033, 270.493, 0.009 ms
0.01.536.593 I
0.01.536.594 I target:

0.01.536.600 I common_perf_print:    sampling time =       4.13 ms
0.01.536.600 I common_perf_print:    samplers time =       1.44 ms /    37 tokens
0.01.536.607 I common_perf_print:        load time =     160.86 ms
0.01.536.608 I common_perf_print: prompt eval time =     572.88 ms /    54 tokens (   10.61 ms per token,    94.26 tokens per second)
0.01.536.609 I common_perf_print:        eval time =       0.00 ms /     1 runs   (    0.00 ms per token,      inf tokens per second)
0.01.536.610 I common_perf_print:       total time =    1049.55 ms /    55 tokens
"""

# llama-completion -n 32 --temp 0 -no-cnv --no-display-prompt: stdout is the generated text + "\n\n"
PLAIN_STDOUT = GENERATED[: GENERATED.index(" sight", 120)] + "\n\n"
PLAIN_STDERR = """\
0.00.426.759 I generate: n_ctx = 1024, n_batch = 2048, n_predict = 32, n_keep = 0
0.00.426.759 I
0.00.887.245 I common_perf_print:    sampling time =       4.20 ms
0.00.887.270 I common_perf_print:    samplers time =       1.48 ms /    48 tokens
0.00.887.296 I common_perf_print:        load time =     274.55 ms
0.00.887.317 I common_perf_print: prompt eval time =     115.84 ms /    16 tokens (    7.24 ms per token,   138.12 tokens per second)
0.00.887.337 I common_perf_print:        eval time =     335.65 ms /    31 runs   (   10.83 ms per token,    92.36 tokens per second)
0.00.887.356 I common_perf_print:       total time =     460.96 ms /    47 tokens
0.00.887.375 I common_perf_print: unaccounted time =       5.27 ms /   1.1 %      (total - sampling - prompt eval - eval) / (total)
"""

# a truncated GGUF given to llama-completion
LOAD_FAILURE = """\
0.00.017.080 E llama_model_load: error loading model: tensor 'token_embd.weight' data is not within the file bounds, model is corrupted or incomplete
0.00.017.105 E llama_model_load_from_file_impl: failed to load model
0.00.027.589 E cmn  common_init_: failed to load model '/tmp/trunc.gguf'
0.00.027.597 E llama_completion: error: unable to create context
"""

# llama-server /completion with -md and --spec-draft-n-max 4
SERVER_RESPONSE = {
    "content": " 5, 6, 7, 8, 9, ",
    "timings": {
        "cache_n": 0,
        "prompt_n": 14,
        "prompt_ms": 119.378,
        "prompt_per_token_ms": 8.527,
        "prompt_per_second": 117.27453969743169,
        "predicted_n": 16,
        "predicted_ms": 281.726,
        "predicted_per_token_ms": 18.78173333333333,
        "predicted_per_second": 53.24322213782185,
        "draft_n": 12,
        "draft_n_accepted": 12,
    },
}


def test_speculative_figures():
    fig = parse.parse_speculative(0, SPEC_STDOUT, SPEC_STDERR, PROMPT)
    assert isinstance(fig, SpecFigures)
    assert (fig.n_decoded, fig.decode_s, fig.tokens_per_s) == (37, 0.745, 49.632)
    assert (fig.n_draft, fig.n_drafted, fig.n_accept, fig.accept_pct) == (4, 29, 29, 100.0)
    assert (fig.n_encoded, fig.encode_s) == (16, 0.123)
    assert fig.n_verifications == 8 and fig.mean_accepted_per_verification == pytest.approx(3.625)
    assert fig.n_draft_calls == 8 and fig.draft_gen_ms == pytest.approx(270.493)
    assert fig.accept_rate_per_pos == (1.0, 0.875, 0.875, 0.875)


def test_speculative_text_drops_echoed_prompt_and_trailer():
    assert parse.parse_speculative(0, SPEC_STDOUT, SPEC_STDERR, PROMPT).text == GENERATED


def test_speculative_text_when_echo_differs_from_prompt():
    # the echo is detokenized piece by piece; a BOS text in front must not break extraction
    stdout = "\n\n<s>" + PROMPT + GENERATED + "\n\n\n\n"
    assert parse.speculative_text(stdout, PROMPT) == GENERATED


def test_speculative_without_drafting():
    stderr = (
        SPEC_STDERR.replace("n_drafted = 29", "n_drafted = 0")
        .replace("n_accept  = 29", "n_accept  = 0")
        .replace("accept    = 100.000%", "accept    = -nan%")
    )
    fig = parse.parse_speculative(0, SPEC_STDOUT, stderr, PROMPT)
    assert fig.n_drafted == 0 and fig.accept_pct is None


def test_completion_figures():
    fig = parse.parse_completion(0, PLAIN_STDOUT, PLAIN_STDERR)
    assert isinstance(fig, PlainFigures)
    assert (fig.n_eval, fig.eval_ms) == (31, 335.65)
    # the printed 92.36 t/s is the decodes alone; the sampler's 4.20 ms over 32 samples is added back for the 31
    assert fig.tokens_per_s == pytest.approx(31_000 / (335.65 + 4.20 * 31 / 32))
    assert fig.tokens_per_s < 92.36
    assert (fig.n_prompt, fig.prompt_ms) == (16, 115.84)
    assert GENERATED.startswith(fig.text) and not fig.text.endswith("\n")


def test_completion_end_of_text_marker_removed():
    fig = parse.parse_completion(0, "Hello there. [end of text]\n\n\n", PLAIN_STDERR)
    assert fig.text == "Hello there."


# llama-completion -no-cnv --no-display-prompt -sp -lv 4, SmolLM2 ending its reply: -sp prints the end token's text
# before " [end of text]" (llama-speculative-simple never prints it); the trace level's load lines name that token.
EOG_STDERR = (
    """\
0.00.303.598 I load: printing all EOG tokens:
0.00.361.505 I print_info: EOG token             = 0 '<|endoftext|>'
0.00.361.506 I print_info: EOG token             = 2 '<|im_end|>'
0.00.361.507 I print_info: EOG token             = 4 '<reponame>'
"""
    + PLAIN_STDERR
)


def test_completion_text_leaves_out_the_end_of_generation_token():
    assert parse.eog_texts(EOG_STDERR) == ("<|endoftext|>", "<|im_end|>", "<reponame>")
    assert parse.parse_completion(0, "Yes.<|im_end|> [end of text]\n\n\n", EOG_STDERR).text == "Yes."
    # a special token within the reply stays, as llama-speculative-simple prints it too; only the last one goes
    fig = parse.parse_completion(0, "<|im_end|>\n<|im_start|>Yes.<|im_end|> [end of text]\n\n\n", EOG_STDERR)
    assert fig.text == "<|im_end|>\n<|im_start|>Yes."
    # stopped at -n: the last token was not an end token, whatever its text
    assert parse.parse_completion(0, "Yes.<|im_end|>\n\n", EOG_STDERR).text == "Yes.<|im_end|>"


def test_crash_is_a_clear_message():
    fail = parse.parse_completion(1, "", LOAD_FAILURE)
    assert isinstance(fail, RunFailure) and fail.detailed and fail.rc == 1
    assert fail.message == (
        "llama-completion failed (exit 1): error loading model: tensor 'token_embd.weight' "
        "data is not within the file bounds, model is corrupted or incomplete"
    )


def test_signal_and_silent_crash():
    fail = parse.parse_speculative(-11, "", "", PROMPT)
    assert fail.message.startswith("llama-speculative-simple failed (killed by SIGSEGV)") and not fail.detailed


def test_exit_zero_without_figures_is_an_error():
    fail = parse.parse_speculative(0, SPEC_STDOUT, "nothing useful\n", PROMPT)
    assert isinstance(fail, RunFailure) and "no speculation figures" in fail.message
    fail = parse.parse_completion(0, PLAIN_STDOUT, "nothing useful\n")
    assert isinstance(fail, RunFailure) and "eval time" in fail.message


def test_server_timings():
    fig = parse.parse_server_completion(SERVER_RESPONSE)
    assert isinstance(fig, ServerFigures) and fig.speculation_ran
    assert (fig.predicted_n, fig.draft_n, fig.draft_n_accepted) == (16, 12, 12)
    assert fig.predicted_per_second == pytest.approx(53.243, abs=1e-3)
    plain = parse.parse_server_completion({"content": "x", "timings": {"predicted_n": 5, "predicted_per_second": 9.5}})
    assert not plain.speculation_ran and plain.draft_n is None
    err = parse.parse_server_completion({"error": {"code": 400, "message": "bad request"}})
    assert isinstance(err, RunFailure) and "bad request" in err.message
