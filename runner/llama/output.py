"""Read the figures and generated text out of llama-speculative-simple, llama-completion and llama-server output."""

from __future__ import annotations

import math
import re
import signal
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RunFailure:
    """Why a run produced no figures, in one readable line (plus the stderr tail for the log)."""

    message: str
    rc: int | None = None
    stderr_tail: str = ""
    detailed: bool = True  # False when llama.cpp said nothing about why


@dataclass(frozen=True)
class SpecFigures:
    """Figures printed by ``llama-speculative-simple`` after generating."""

    n_decoded: int  # tokens produced (may exceed -n by up to K)
    decode_s: float
    tokens_per_s: float
    n_draft: int  # the K the run used
    n_drafted: int  # draft tokens proposed (and verified)
    n_accept: int  # draft tokens the target accepted
    accept_pct: float | None  # None when nothing was drafted (llama.cpp prints nan)
    n_encoded: int
    encode_s: float
    text: str  # the generated text (the echoed prompt removed)
    # from the trace-level "statistics draft-simple:" line (printed with -lv 4), when present
    # True when n_drafted/n_accept were counted round by round from the debug log (-lv 5): a checkpointed target,
    # whose printed totals count the tokens passed again after a restore and leave out partly accepted drafts
    counted_rounds: bool = False
    rounds: tuple[tuple[int, int, int], ...] = ()  # (drafted, accepted, replayed) per round, when counted
    n_draft_calls: int | None = None  # drafts generated
    draft_gen_ms: float | None = None  # time spent drafting
    accept_rate_per_pos: tuple[float, ...] = ()

    @property
    def n_verifications(self) -> int:
        """Target passes in the decode loop: each yields its accepted draft tokens plus one of its own."""
        return self.n_decoded - self.n_accept

    @property
    def mean_accepted_per_verification(self) -> float | None:
        n = self.n_verifications
        return self.n_accept / n if n > 0 else None


@dataclass(frozen=True)
class PlainFigures:
    """Figures printed by ``llama-completion`` (common_perf_print) and its generated text."""

    n_eval: int  # decode runs (the first generated token comes out of prompt processing)
    eval_ms: float
    tokens_per_s: float
    n_prompt: int
    prompt_ms: float
    text: str


@dataclass(frozen=True)
class ServerFigures:
    """The ``timings`` of one llama-server ``/completion`` response."""

    predicted_n: int
    predicted_per_second: float
    draft_n: int | None  # absent when speculation did not run
    draft_n_accepted: int | None
    prompt_n: int | None
    text: str
    predicted_ms: float = 0.0
    prompt_ms: float = 0.0

    @property
    def speculation_ran(self) -> bool:
        return bool(self.draft_n)


# "\d+(?:\.\d*)?", not "\d+\.?\d*": the same numbers, but a run of digits splits one way only (the second form
# backtracks quadratically, and a model's output after "accept = " can be a long run of digits).
_NUM = r"([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|-?inf)"
_DECODED = re.compile(rf"decoded\s+(\d+) tokens in\s+{_NUM} seconds, speed:\s+{_NUM} t/s")
_ENCODED = re.compile(rf"encoded\s+(\d+) tokens in\s+{_NUM} seconds")
_SPEC_INT = {k: re.compile(rf"\b{k}\s*=\s*(\d+)") for k in ("n_draft", "n_predict", "n_drafted", "n_accept")}
_ACCEPT = re.compile(rf"\baccept\s*=\s*{_NUM}\s*%")
# examples/speculative-simple's debug lines (-lv 5), one per round: a partly accepted draft on a checkpointed target
# ("partial acceptance: A < N, restoring checkpoint") is followed by the round that passes its A accepted tokens and
# the target's own again ("accepted A+1/A+1 draft tokens"), which drafted nothing.
_ROUND = re.compile(
    r"^(?:\S+ D )?(?:partial acceptance: (\d+) < (\d+), restoring checkpoint|accepted (\d+)/(\d+) draft tokens)", re.M
)
_STATS = re.compile(
    r"statistics\s+draft-simple:.*?#gen drafts\s*=\s*(\d+).*?(?:#acc rate/pos = \(([^)]*)\))?"
    r"(?:, dur\(b,g,a\) = [\d.]+, ([\d.]+), [\d.]+ ms)?$",
    re.M,
)
_EVAL = re.compile(
    rf"(?<!prompt )eval time =\s*{_NUM} ms /\s*(\d+) (?:runs|tokens)\s*"
    rf"\(.*?,\s*{_NUM} tokens per second\)"
)
_PROMPT_EVAL = re.compile(rf"prompt eval time =\s*{_NUM} ms /\s*(\d+) tokens")
# common_perf_print's sampler chain total (common/sampling.cpp): "sampling time = X ms", then "samplers time = ..."
_SAMPLING = re.compile(rf"sampling time =\s*{_NUM} ms\s*$", re.M)
_LOG_PREFIX = re.compile(r"^(?:\d+\.\d+\.\d+\.\d+ [A-Z] )?(?:[a-z]{3,4}\s+)?")  # "0.00.017.080 E " [+ "cmn  "]
# lines that say what went wrong, most telling first
_ERROR_HINTS = (
    re.compile(r"error loading model[^\n]*", re.I),
    re.compile(r"GGML_ASSERT[^\n]*"),
    re.compile(r"terminate called[^\n]*"),
    re.compile(r"^.*\b(?:error|failed|invalid|cannot|unable|exception)\b[^\n]*$", re.I | re.M),
)


def _float(s: str) -> float:
    return float(s)


def _tail(text: str, n: int = 4000) -> str:
    return text[-n:]


def explain_failure(tool: str, rc: int | None, stderr: str, stdout: str = "", what: str = "") -> RunFailure:
    """One line that says why ``tool`` failed: the exit status and the most telling stderr line."""
    if rc is not None and rc < 0:
        try:
            status = f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            status = f"killed by signal {-rc}"
    elif rc is None:
        status = "did not run"
    else:
        status = f"exit {rc}"
    detail = ""
    for pattern in _ERROR_HINTS:
        hits = [h.strip() for h in pattern.findall(stderr) if h.strip()]
        if hits:
            detail = hits[0]
            break
    detailed = bool(detail)
    if not detail:
        lines = [ln.strip() for ln in (stderr or stdout).splitlines() if ln.strip()]
        # llama.cpp logs from a background thread and loses the last lines when it exits at once
        detail = lines[-1] if lines else "no diagnostic output (llama.cpp exited before its log was written)"
    detail = _LOG_PREFIX.sub("", detail)
    # "llama_model_load: error loading model: ..." -> keep the part after the function name
    detail = re.sub(r"^[a-z_0-9]+:\s+", "", detail)[:300]
    lead = f"{tool} {what}".strip()
    return RunFailure(f"{lead} failed ({status}): {detail}", rc, _tail(stderr), detailed)


def _strip_trailer(text: str) -> str:
    # both tools end their output with LOG("\n\n")
    return text[:-2] if text.endswith("\n\n") else text


def speculative_text(stdout: str, prompt: str) -> str:
    """The generated text: llama-speculative-simple echoes the prompt token by token before it."""
    body = stdout[2:] if stdout.startswith("\n\n") else stdout
    # it logs "\n\n" after the decode loop and again before exiting
    body = body[:-4] if body.endswith("\n\n\n\n") else _strip_trailer(body)
    idx = body.find(prompt)
    if idx >= 0:
        return body[idx + len(prompt) :]
    # the echo is detokenized and may differ slightly (e.g. a BOS text in front): match the prompt's end
    for tail_len in (64, 32, 16):
        tail = prompt[-tail_len:]
        if len(prompt) >= tail_len and (idx := body.find(tail)) >= 0:
            return body[idx + len(tail) :]
    return body


def round_steps(stderr: str) -> list[tuple[int, int, int]]:
    """Each round of the debug log as (drafted, accepted, replayed): a partly accepted draft on a checkpointed target
    is followed by a round that passes ``replayed`` tokens (its accepted ones and the target's own) through the target
    again and drafts nothing, folded into it here; [] when the log has no round lines (run without -lv 5)."""
    steps: list[tuple[int, int, int]] = []
    replay = False
    for m in _ROUND.finditer(stderr):
        if m.group(1) is not None:  # a partly accepted draft: the target restores its checkpoint
            steps.append((int(m.group(2)), int(m.group(1)), 0))
            replay = True
        elif replay:  # the accepted tokens passed again: no draft of its own
            d, a, _ = steps[-1]
            steps[-1] = (d, a, int(m.group(4)))
            replay = False
        else:
            steps.append((int(m.group(4)), int(m.group(3)), 0))
    return steps


def counted_rounds(stderr: str) -> tuple[int, int] | None:
    """(drafted, accepted) over the rounds of the debug log, the replays after a checkpoint restore left out; None
    when the log has no round lines (run without -lv 5)."""
    steps = round_steps(stderr)
    return (sum(d for d, _, _ in steps), sum(a for _, a, _ in steps)) if steps else None


def parse_speculative(rc: int | None, stdout: str, stderr: str, prompt: str) -> SpecFigures | RunFailure:
    tool = "llama-speculative-simple"
    if rc != 0:
        return explain_failure(tool, rc, stderr, stdout)
    decoded = _DECODED.search(stderr)
    found = {k: p.search(stderr) for k, p in _SPEC_INT.items()}
    if decoded is None or any(m is None for m in found.values()):
        return RunFailure(f"{tool} exited 0 but printed no speculation figures", rc, _tail(stderr))
    ints = {k: m for k, m in found.items() if m is not None}
    encoded = _ENCODED.search(stderr)
    accept = _ACCEPT.search(stderr)
    n_drafted, n_accept = int(ints["n_drafted"].group(1)), int(ints["n_accept"].group(1))
    accept_pct = _float(accept.group(1)) if accept and n_drafted > 0 else None
    extra: dict[str, Any] = {}
    if steps := round_steps(stderr):
        n_drafted, n_accept = sum(d for d, _, _ in steps), sum(a for _, a, _ in steps)
        accept_pct = 100.0 * n_accept / n_drafted if n_drafted else None
        extra["counted_rounds"], extra["rounds"] = True, tuple(steps)
    stats = _STATS.search(stderr)
    if stats:
        extra["n_draft_calls"] = int(stats.group(1))
        if stats.group(2):
            extra["accept_rate_per_pos"] = tuple(float(x) for x in stats.group(2).split(",") if x.strip())
        if stats.group(3):
            extra["draft_gen_ms"] = float(stats.group(3))
    return SpecFigures(
        n_decoded=int(decoded.group(1)),
        decode_s=_float(decoded.group(2)),
        tokens_per_s=_float(decoded.group(3)),
        n_draft=int(ints["n_draft"].group(1)),
        n_drafted=n_drafted,
        n_accept=n_accept,
        accept_pct=accept_pct,
        n_encoded=int(encoded.group(1)) if encoded else 0,
        encode_s=_float(encoded.group(2)) if encoded else 0.0,
        text=speculative_text(stdout, prompt),
        **extra,
    )


# print_info's line per end-of-generation token (src/llama-vocab.cpp), logged at the trace level (-lv 4)
_EOG = re.compile(r"print_info: EOG token\s+=\s+\d+ '(.*)'$", re.M)


def eog_texts(stderr: str) -> tuple[str, ...]:
    """The texts of the model's end-of-generation tokens, as llama.cpp listed them while loading it."""
    return tuple(dict.fromkeys(t for t in _EOG.findall(stderr) if t))


def completion_text(stdout: str, eog: tuple[str, ...] = ()) -> str:
    """The generated text of ``llama-completion --no-display-prompt``, without the end-of-generation token that ended
    it: with ``-sp`` llama-completion prints that token's text before " [end of text]", llama-speculative-simple
    stops before printing it (speculative_text)."""
    text = _strip_trailer(stdout)
    if text.endswith(" [end of text]\n"):
        text = text[: -len(" [end of text]\n")]
        last = max((t for t in eog if text.endswith(t)), key=len, default="")
        text = text[: len(text) - len(last)]
    return text


def parse_completion(rc: int | None, stdout: str, stderr: str) -> PlainFigures | RunFailure:
    tool = "llama-completion"
    if rc != 0:
        return explain_failure(tool, rc, stderr, stdout)
    # common_perf_print (sampler chain) and llama_perf_context_print both print "eval time"; take the last
    evals = _EVAL.findall(stderr)
    if not evals:
        return RunFailure(f"{tool} exited 0 but printed no 'eval time' line", rc, _tail(stderr))
    eval_ms, n_eval, tps = evals[-1]
    prompt = _PROMPT_EVAL.findall(stderr)
    prompt_ms, n_prompt = prompt[-1] if prompt else ("0", "0")
    return PlainFigures(
        int(n_eval),
        _float(eval_ms),
        _with_sampling(int(n_eval), _float(eval_ms), _float(tps), _SAMPLING.findall(stderr)),
        int(n_prompt),
        _float(prompt_ms),
        completion_text(stdout, eog_texts(stderr)),
    )


def _with_sampling(n_eval: int, eval_ms: float, printed_tps: float, sampling: list[str]) -> float:
    """Plain decoding's tokens per second as a user waits for them: llama-completion's "eval time" stops at the
    decode (llama_context::synchronize, when the sampler reads the logits), while a speculative run's "decoded ... in"
    and llama-server's ``predicted_per_second`` include sampling. So the sampler's time per token is added back: it
    sampled once after the prompt and once after each of the ``n_eval`` decodes. Without a sampling line (another
    build), the printed rate."""
    if not sampling or n_eval <= 0:
        return printed_tps
    per_token_ms = (eval_ms + _float(sampling[-1]) * n_eval / (n_eval + 1)) / n_eval
    return 1000 / per_token_ms if per_token_ms > 0 else printed_tps


def _finite(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def parse_server_completion(response: dict[str, Any]) -> ServerFigures | RunFailure:
    """Figures of one decoded ``/completion`` JSON response (what ``--via server`` measures)."""
    if not isinstance(response, dict):
        return RunFailure("llama-server answered something other than a JSON object")
    if "error" in response:
        err = response["error"]
        msg = err.get("message") if isinstance(err, dict) else str(err)
        return RunFailure(f"llama-server returned an error: {msg}")
    timings = response.get("timings")
    if not isinstance(timings, dict) or "predicted_n" not in timings:
        return RunFailure("llama-server response has no timings")
    try:
        return ServerFigures(
            predicted_n=int(timings["predicted_n"] or 0),
            predicted_per_second=_finite(timings.get("predicted_per_second")) or 0.0,
            draft_n=int(timings["draft_n"]) if timings.get("draft_n") is not None else None,
            draft_n_accepted=int(timings["draft_n_accepted"]) if timings.get("draft_n_accepted") is not None else None,
            prompt_n=int(timings["prompt_n"]) if timings.get("prompt_n") is not None else None,
            text=str(response.get("content", "")),
            predicted_ms=_finite(timings.get("predicted_ms")) or 0.0,
            prompt_ms=_finite(timings.get("prompt_ms")) or 0.0,
        )
    except (TypeError, ValueError):
        return RunFailure("llama-server's timings are not numbers")
