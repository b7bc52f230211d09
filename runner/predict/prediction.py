"""Predicting a speculative setting's speedup before measuring it (temperature 0; draft-simple above it).

Acceptance is not estimated but replayed: the target's greedy transcript of each task, then llama.cpp's own
speculative loop against it (runner.predict.replay) gives every verification's drafted and accepted counts exactly.
Speed comes from a cost model of this machine, measured once per model file and build (runner.predict.replay's timing
mode, kept by runner.predict.kept):
the target's time to decode a batch of b tokens with every token's logits (what a verify step costs), and
the draft model's time per decoded batch. A speculative step then costs

    verify(d + 1) + sample * (d + 1)     the target checks id_last and the d drafted tokens, sampling each
                                         position [ss:223-228, common_sampler_sample_and_accept_n]
  + draft(1) * (1 + d - full)            draft-simple: id_last, then each drafted token but the one that fills
                                         the draft (full: d reached K) [sp:383, 439-446]
  + draft_last(d + 1)                    the target's batch fed to the draft, only its last token's logits
                                         [sp:304-312]
  + draft_sample * (d + 1 - full)        its top-k 10 sampler per proposal, the one p-min refused included
                                         [sp:406, 421]
                                         (n-gram methods draft from tables: no model time)

against plain decoding's verify(1) + sample per token. Sampling is the fixed cost a round pays per position
beyond the decodes (the whole chain runs over the vocabulary: a visible share for small models).
Other bookkeeping per round (cache trims, batch building, on a GPU launches and synchronisations) is measured, not
assumed: runner.predict.round_cost times real rounds of the pair itself (p-min 0), and the seconds they took beyond
these parts (signed: less where the parts overstate a real round), per decode call or along the line fitted over two
K, are added to every draft-model round (``CostModel.extra_per_call_s``, shown per round on the hardware page) where
they stand out of the parts' own movement (MIN_RESIDUAL_SHARE of the timed rounds' parts).
The context changes a decode's cost in steps of 256 attended cells (kv_cells): the cost model times a batch of one on
either side of a step too, and each task's decode calls are priced at the cells its own prompt and tokens fill
(CostModel.at_context). What it leaves out, and the benchmark measures: the two models' decodes slowing each other
beyond what the pair's timed rounds hold,
and the machine's speed at the moment of the benchmark: on a shared machine a batch of one (bound by memory
bandwidth) moves more from hour to hour than larger batches do, so a cost model taken at one moment can be off a
benchmark taken at another.

(figures: docs/benchmarks.md, "Figures behind design choices")
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from inspector.spec_flags import Setting, chain_parts, is_chain, uses_draft_file
from inspector.speculative import NGRAM_METHODS
from runner.hardware import gpu_layers, hardware_class, measurement_class, ram_bytes
from runner.llama import binaries
from runner.predict import changed_tokens, conditions, forced, kept, replay, round_cost, timing_retakes
from runner.prompts import TaskSet, read_chat_template, render_prompt
from runner.state import checkpointed

COST_DEPTH = 256  # context tokens behind the timed batches: a prompt and part of an answer
MAX_TIMED_BATCH = 17  # larger verify batches (n-gram methods draft up to 64) follow the timed slope (_extend)
MIN_GAIN = 1.01  # a predicted speedup below this is "no gain": the cost model is not finer than that
# A measured negative residual lowers a round's time, never below this share of its modelled parts: the line is
# fitted on full rounds, and a round far shorter than those (p-min stopped it at once) lies outside what it saw.
MIN_PARTS_SHARE = 0.5
# A residual smaller than this share of the timed rounds' parts is priced as none: the parts' timings, each a few
# seconds of a shared machine, move by as much from one moment to the next (conditions.DRIFT: a kept figure this far
# off no longer describes the machine; nearer, it does).
MIN_RESIDUAL_SHARE = conditions.DRIFT
# What the replay tool can replay: the draft model's own loop and the n-gram methods, which need no model.
PREDICTABLE = ("draft-simple", *NGRAM_METHODS)


def predictable(method: str) -> bool:
    """Whether the replay predicts ``method``: draft-simple, the n-gram methods, and chains of them (the replay runs
    llama.cpp's own chain)."""
    return all(m in PREDICTABLE for m in chain_parts(method))


TEMPERATURE_0_ONLY = (
    "temperature 0 only: the n-gram methods' drafts are replayed by exact match, which a sampled target does not make"
)
# llama.cpp's loop hands these heads the hidden states of the target's own verify decode
# (common_speculative_process after llama_process [ss:232-236]): the one step a replay skips.
NOT_YET = (
    "not predictable yet: it drafts from the target's hidden states, which llama.cpp's loop takes from the "
    "target's own decoding, the step a replay skips"
)
MEMORY_SHARE = 0.9  # the models' weights (memory-mapped) must fit in this share of the machine's memory


PredictionCancelled = replay.ReplayCancelled  # the run was cancelled: the tool running then was killed


@dataclass(frozen=True)
class CostModel:
    """Median seconds to decode a batch of b tokens (index b - 1) with every token's logits computed (``seconds``)
    and with only the last token's (``seconds_last``), and to sample one position: with the run's own chain
    (``sample``) and with draft-simple's top-k 10 chain (``draft_sample``)."""

    model: str
    depth: int
    seconds: tuple[float, ...]
    sample: float = 0.0
    draft_sample: float = 0.0
    seconds_last: tuple[float, ...] = ()
    # What this prediction's pair spent beyond its modelled parts in real rounds (runner.predict.round_cost), per
    # llama.cpp decode call of a round: signed as measured, negative where the parts' timings overstate a real round;
    # None where not measured (n-gram settings only).
    extra_per_call_s: float | None = None
    # How that residual grows with a round's drafted tokens, fitted from full rounds at two K (round_cost.fit):
    # (seconds per round, seconds per drafted token); None where one K was timed, and the residual goes per call.
    residual_fit: tuple[float, float] | None = None
    # What it was fitted to: (K, seconds beyond the parts per full round of K) for each K timed
    residual_points: tuple[tuple[int, float], ...] = ()
    # A checkpoint of the model's recurrent state (llama.cpp's common_prompt_checkpoint): seconds to save one and to
    # restore one, as the timing measured them; 0 for a model with a KV cache, which needs none.
    checkpoint_save: float = 0.0
    checkpoint_restore: float = 0.0
    # Where its figures came from and under what conditions (runner.predict.conditions): "measured" now, "kept"
    # (reused), "checked" (reused after a fresh batch agreed with it), "remeasured" (a kept one was disturbed or had
    # drifted); ``conditions`` as recorded, with ``disturbed``. The round residual's own, where one was measured.
    source: str = "measured"
    conditions: dict[str, Any] = field(default_factory=dict)
    residual_conditions: dict[str, Any] = field(default_factory=dict)
    # The residual's share of the timed rounds' modelled parts (signed); None where not known (priced as measured)
    residual_share: float | None = None
    # A batch of one timed at a shallower context (``depth_lo``) right before the batches at ``depth``: what a decode
    # call gains or saves as the context's attended cells step (kv_cells); None in records that lack it.
    depth_lo: int = 0
    seconds_lo: float | None = None

    @property
    def residual_used(self) -> bool:
        """Whether the residual is priced: one smaller than MIN_RESIDUAL_SHARE of the rounds' parts is not told apart
        from how far the parts' own timings move, and adds nothing."""
        return self.residual_share is None or abs(self.residual_share) >= MIN_RESIDUAL_SHARE

    def residual_per_call(self) -> float:
        """Seconds per decode call that predictions add: the measured residual where it is priced, else none."""
        return self.extra_per_call_s if self.extra_per_call_s is not None and self.residual_used else 0.0

    @property
    def disturbed(self) -> bool:
        return bool(self.conditions.get("disturbed") or self.residual_conditions.get("disturbed"))

    def token(self) -> float:
        """Plain decoding's cost per token: a batch of one and its sampling."""
        return self.batch(1) + self.sample

    def batch(self, b: int) -> float:
        """Time for a batch of ``b``, every token's logits; beyond the measured sizes the last slope continues."""
        return _extend(self.seconds, b)

    def batch_last(self, b: int) -> float:
        """Time for a batch of ``b`` with only the last token's logits (a draft taking in the target's batch)."""
        return _extend(self.seconds_last or self.seconds, b)

    @property
    def per_cell(self) -> float:
        """Seconds a decode call gains per attended KV cell, from the batch of one at the two contexts; none where
        they attend over as many cells or the shallower one read slower (the two moments moved more than the step)."""
        if self.seconds_lo is None or not self.seconds:
            return 0.0
        cells = kv_cells(self.depth + 1) - kv_cells(self.depth_lo + 1)
        return max(0.0, (self.seconds[0] - self.seconds_lo) / cells) if cells > 0 else 0.0

    def at_context(self, cells: float) -> CostModel:
        """This cost model for decode calls that attend over ``cells`` KV cells on average (context_cells), where it
        was timed over kv_cells(depth + 1): every batch shifted by the step between the two."""
        shift = self.per_cell * (cells - kv_cells(self.depth + 1))
        if not shift:
            return self
        return replace(
            self,
            seconds=tuple(t + shift for t in self.seconds),
            seconds_last=tuple(t + shift for t in self.seconds_last),
        )


# llama.cpp attends over the KV cache's used cells padded to a multiple of this (src/llama-kv-cache.cpp, get_n_kv:
# n_pad_cur = max(n_pad, 256)), so a decode's attention costs the same anywhere within a step of 256 positions.
KV_PAD = 256


def kv_cells(used: int) -> int:
    """The cells a decode attends over once ``used`` cells hold the context and the batch (get_n_kv)."""
    return max(KV_PAD, -(-used // KV_PAD) * KV_PAD)


def context_cells(prompt: int, generated: float) -> float:
    """The mean of kv_cells over the decode calls of a task whose prompt is ``prompt`` tokens and which generates
    ``generated`` (an expected count above temperature 0): the call that produces token i has prompt + i + 1 cells
    in use."""
    n = round(generated)
    if n <= 0:
        return float(kv_cells(prompt + 1))
    return sum(kv_cells(prompt + i + 1) for i in range(n)) / n


# A batch larger than the timed ones follows the mean slope over this many sizes before the largest: a CPU's cost
# steps within each group of 4 or 8 tokens (on AVX-512 a batch of 16 was cheaper than one of 15), so the slope of the
# last two sizes alone can be several times the real one, or below zero.
SLOPE_OVER = 8


def _extend(seconds: tuple[float, ...], b: int) -> float:
    if b <= len(seconds):
        return seconds[b - 1]
    last = seconds[-1]
    span = min(SLOPE_OVER, len(seconds) - 1)
    slope = (last - seconds[-1 - span]) / span if span else last
    return last + slope * (b - len(seconds))


def measure_cost(
    model: Path | str,
    gen: binaries.GenParams,
    max_batch: int,
    *,
    reps: int = 7,
    should_cancel: Callable[[], bool] | None = None,
    timeout_s: float = replay.TIMEOUT_S,
) -> CostModel:
    """The model's cost model on this machine, measured once per model file, build, threads, GPU layers and batch range
    and kept (runner.predict.kept: on this machine and in the database, where the hardware page shows it), with the
    conditions it was measured under (runner.predict.conditions). A disturbed measurement is taken again; a kept one
    that was disturbed is taken again when the machine is quiet now (else reused and marked), and a kept quiet one
    past its age is compared with one fresh batch of a token and taken again where it drifted. A new build, another
    thread count or another ``gen.gpu_layers`` (in the options, so in the key) measures again."""
    caps = binaries.capabilities(binaries.find_binary(replay.SPEC_TOOL))

    def keyed(b: int) -> tuple[list[str], str]:
        ctx = max(gen.ctx_size or 0, COST_DEPTH + b + 64)
        at = replace(gen, temperature=0.0, ctx_size=ctx, n_predict=1)
        return binaries.generation_argv(caps, at, "x"), f"{COST_DEPTH},{b},{reps}"

    options, timing = keyed(max_batch)
    meta = {"threads": gen.threads, "depth": COST_DEPTH}

    def timed(spec: str, sizes: list[int] | None = None) -> dict[str, Any]:
        env = {**os.environ, "SPECREG_TIMING": spec}
        if sizes is not None:
            env["SPECREG_TIMING_SIZES"] = ",".join(map(str, sizes))
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "timing.json"
            replay.run_tool(timing_argv(replay.tool(), model, options, out), timeout_s, env, should_cancel)
            return json.loads(out.read_text())

    # a record timed over more batch sizes serves fewer (an n-gram prediction's up to 17, then a draft pair's up to
    # 9): the smallest that holds them, so that one machine times one model once
    found = None
    for b in range(max_batch, max(max_batch, MAX_TIMED_BATCH) + 1):
        opts, spec = keyed(b)
        found = kept.find(kept.COSTS, model, [*opts, spec], **meta)
        if found is not None:
            options, timing = opts, spec
            break
    source = "measured"
    if found is not None:
        try:
            cost = _cost_model(model, found)
        except (ValueError, KeyError, TypeError):
            cost = None  # damaged: measured again
        if cost is not None:
            verdict = _reuse(cost, found, lambda: float(timed(f"{COST_DEPTH},1,3")["seconds"][0]))
            if verdict in ("kept", "checked"):
                return replace(cost, source=verdict)
        source = "remeasured"
        options, timing = keyed(max_batch)  # only what is asked: a wider record stays for what needs it
    started = time.monotonic()
    # a retake times only the sizes that were disturbed
    once = timing_retakes.retaking(lambda sizes: timed(timing, sizes), range(1, max_batch + 1))
    data, cond = conditions.quietly(once)
    data["conditions"] = cond.to_dict()
    cost = replace(_cost_model(model, data), source=source)
    kept.keep(kept.COSTS, model, [*options, timing], data, seconds=time.monotonic() - started, **meta)
    return cost


def _reuse(cost: CostModel, found: dict[str, Any], batch_of_one: Callable[[], float]) -> str:
    """Whether a kept cost model stands for the machine now: "kept" or "checked" (reuse it), "remeasure"."""
    c = conditions.Conditions.from_dict(found.get("conditions"))
    if c is not None and c.disturbed:
        # measured while other work held the CPU: again if the machine is quiet now, else reused, marked as it is
        return "remeasure" if conditions.quiet_now() else "kept"
    if not conditions.needs_check(c):
        return "kept"
    return "remeasure" if conditions.drifted(cost.batch(1), batch_of_one()) else "checked"


def timing_argv(exe: Path | str, model: Path | str, options: list[str], out: Path | str) -> list[str]:
    """The tool's timing process: ``model`` loaded as ``-m`` with ``options`` (binaries.generation_argv, whose ``-ngl``
    is the prediction's GPU layers), so the cost model times the model where the benchmark runs it."""
    return [str(exe), "timing", str(out), "-m", str(model), *options]


def _cost_model(model: Path | str, data: dict[str, Any]) -> CostModel:
    """The tool's timing JSON (fresh or cached) as a CostModel."""
    ckpt = data.get("checkpoint") or {}
    cond = conditions.Conditions.from_dict(data.get("conditions"))
    return CostModel(
        str(model),
        int(data["depth"]),
        tuple(float(s) for s in data["seconds"]),
        float(data.get("sample_s", 0.0)),
        float(data.get("draft_sample_s", 0.0)),
        tuple(float(s) for s in data.get("seconds_last", ())),
        checkpoint_save=float(ckpt.get("save_s", 0.0)),
        checkpoint_restore=float(ckpt.get("restore_s", 0.0)),
        conditions=cond.to_dict() if cond is not None else {},
        depth_lo=int(data.get("depth_lo", 0)),
        seconds_lo=float(data["seconds_lo"]) if data.get("seconds_lo") is not None else None,
    )


def step_seconds(setting: Setting, drafted: int, target: CostModel, draft: CostModel | None) -> float:
    """One verification's predicted time (see the module's docstring). A draft of K tokens is full: its last
    proposal is neither decoded nor followed by another sample. A shorter one stopped at p-min, whose refused
    proposal was sampled after decoding the token before it (or at the remaining budget, near the end of a run,
    which this counts as a p-min stop: one draft decode per run)."""
    parts = modelled_step(setting, drafted, target, draft)
    return parts + max(step_extra(setting, drafted, target, draft), (MIN_PARTS_SHARE - 1) * parts)


def step_extra(setting: Setting, drafted: int, target: CostModel, draft: CostModel | None) -> float:
    """What a real round costs beyond its parts, measured for the pair (so for draft-model settings only), signed: the
    two models' alternation and, on a GPU, each call's launches and synchronisations add to a round; where the parts,
    each timed alone, overstate a real round (measured on small CPUs), it takes away, and step_seconds bounds that.
    Where it was timed at two K, the fitted line (a part per round, a part per drafted token) prices it
    (runner.predict.round_cost.fit); with one K, per decode call: a setting whose rounds are shorter (a higher p-min
    stops drafting early) makes fewer calls, and a residual taken per round would price them as full rounds."""
    if not uses_draft_file(setting.method) or draft is None or target.extra_per_call_s is None:
        return 0.0
    if target.residual_fit is not None:  # measured at two K on request: how it grows, as fitted
        return round_cost.Fit(*target.residual_fit).price(1, drafted, decode_calls(setting, drafted))
    return target.residual_per_call() * decode_calls(setting, drafted)


def decode_calls(setting: Setting, drafted: int) -> int:
    """llama_decode calls of one draft-model verification: the target's batch, the draft's single-token decodes (as in
    modelled_step) and its intake of the target's batch."""
    full = 1 if setting.k and drafted >= setting.k else 0
    return 1 + (1 + drafted - full) + 1


def modelled_step(setting: Setting, drafted: int, target: CostModel, draft: CostModel | None) -> float:
    """A verification's decodes and sampling, each as the cost model timed it alone."""
    t = target.batch(drafted + 1) + target.sample * (drafted + 1)
    if uses_draft_file(setting.method) and draft is not None:
        t += draft_generation(setting, drafted, draft) + draft.batch_last(drafted + 1)
    return t


def draft_generation(setting: Setting, drafted: int, draft: CostModel) -> float:
    """What the draft model pays to draft ``drafted`` tokens: its single-token decodes and their sampling (a full draft
    of K leaves its last proposal undecoded). In a chain's rounds that an n-gram drafted, it pays none of this, only
    its intake of the target's batch."""
    full = 1 if setting.k and drafted >= setting.k else 0
    return draft.batch(1) * (1 + drafted - full) + draft.draft_sample * (drafted + 1 - full)


def checkpoint_seconds(
    setting: Setting,
    drafted: int,
    replayed: int,
    checkpoints: tuple[bool, bool],
    target: CostModel,
    draft: CostModel | None,
) -> float:
    """What checkpoints add to one verification (examples/speculative-simple's checkpoint branch, which the replay
    followed): a checkpointed target saves its state before verifying a draft and, when the draft is only partly
    accepted, restores it and decodes ``replayed`` tokens after id_last again (with every token's logits, sampled as
    a verification is), which the draft model takes in too; a checkpointed draft saves its state before drafting and
    restores it before the verification, and once more after a partial acceptance."""
    ckpt_target, ckpt_draft = checkpoints
    t = 0.0
    if ckpt_target and drafted:
        t += target.checkpoint_save
    if ckpt_target and replayed:
        t += target.checkpoint_restore + target.batch(replayed + 1) + target.sample * (replayed + 1)
        if uses_draft_file(setting.method) and draft is not None:
            t += draft.batch_last(replayed + 1)
    if ckpt_draft and draft is not None and uses_draft_file(setting.method):
        t += draft.checkpoint_save + draft.checkpoint_restore * (2 if replayed else 1)
    return t


def round_residual(
    run: round_cost.RoundRun, target: CostModel, draft: CostModel, checkpoints: tuple[bool, bool] = (False, False)
) -> float:
    """Seconds per decode call that the pair's timed rounds took beyond their modelled parts; a checkpointed pair's
    rounds (``run.steps``) include their checkpoints and second passes, each priced as checkpoint_seconds prices it,
    and a second pass's two decode calls (the target's and the draft's intake)."""
    modelled, calls = _round_parts(run, target, draft, checkpoints)
    return (run.decode_s - modelled) / calls


def residual_share(
    run: round_cost.RoundRun,
    extra_per_call_s: float,
    target: CostModel,
    draft: CostModel,
    checkpoints: tuple[bool, bool] = (False, False),
) -> float:
    """The residual over the timed rounds' modelled parts, signed: positive where the rounds took longer than their
    parts. Small shares are the parts' own timings moving (MIN_RESIDUAL_SHARE)."""
    modelled, calls = _round_parts(run, target, draft, checkpoints)
    return extra_per_call_s * calls / modelled if modelled > 0 else 0.0


def _round_parts(
    run: round_cost.RoundRun, target: CostModel, draft: CostModel, checkpoints: tuple[bool, bool]
) -> tuple[float, int]:
    """The timed rounds' modelled seconds and their llama.cpp decode calls (round_residual), each call priced at the
    run's own context."""
    cells = context_cells(run.n_encoded, run.n_decoded)
    target, draft = target.at_context(cells), draft.at_context(cells)
    setting = Setting("draft-simple", run.k, 0.0)
    if run.steps:
        modelled = sum(
            modelled_step(setting, d, target, draft) + checkpoint_seconds(setting, d, n, checkpoints, target, draft)
            for d, _, n in run.steps
        )
        return modelled, sum(decode_calls(setting, d) + (2 if n else 0) for d, _, n in run.steps)
    steps = run.drafted_per_round()
    modelled = sum(modelled_step(setting, d, target, draft) for d in steps)
    return modelled, sum(decode_calls(setting, d) for d in steps)


def per_round(extra_per_call_s: float, k: int = round_cost.ROUND_K) -> float:
    """The residual as seconds per full round of K drafted tokens (what the hardware page and the JSON show)."""
    return extra_per_call_s * decode_calls(Setting("draft-simple", k, 0.0), k)


@dataclass
class Prediction:
    method: str
    draft: str | None
    k: int | None
    p_min: float | None
    content_type: str
    setting: str
    options: tuple[tuple[str, str], ...] = ()
    drafted: float = 0  # expected counts above temperature 0: not whole numbers
    accepted: float = 0
    tokens: float = 0
    spec_seconds: float = 0.0
    plain_seconds: float = 0.0
    near_ties: int = 0  # transcript tokens whose margin over the next best is small: texts may part there
    # the earliest such token over the content type's tasks (0-based, of the generated ones); None: none had one.
    # Before it a real run writes the transcript's text and the predicted rounds are its rounds; from it the text
    # may part (a verify batch sums in another order) and the rest of the run is another text's
    first_tie: int | None = None
    extra_seconds: float = 0.0  # of spec_seconds, what the measured residual added (step_extra, bounded)
    # A draft model's rounds and their llama.cpp decode calls (expected counts above temperature 0), with ``drafted``
    # all a residual model needs: a part per round, per drafted token or per call
    rounds: float = 0.0
    calls: float = 0.0
    # Of spec_seconds and plain_seconds, what pricing each task's decode calls at its own context (its prompt and
    # tokens: CostModel.at_context) moved them from the cost model's timed depth; signed, negative where cheaper
    spec_context_s: float = 0.0
    plain_context_s: float = 0.0

    @property
    def acceptance(self) -> float | None:
        return self.accepted / self.drafted if self.drafted else None

    @property
    def as_setting(self) -> Setting:
        return Setting(self.method, self.k or 0, self.p_min, self.options)

    @property
    def speedup(self) -> float | None:
        return self.plain_seconds / self.spec_seconds if self.spec_seconds > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "draft": self.draft,
            "k": self.k,
            "p_min": self.p_min,
            "content_type": self.content_type,
            "setting": self.setting,
            "acceptance": None if self.acceptance is None else round(self.acceptance, 4),
            "speedup": None if self.speedup is None else round(self.speedup, 4),
            "drafted": round(self.drafted),
            "accepted": round(self.accepted),
            "near_ties": self.near_ties,
            "first_tie": self.first_tie,
            # what pricing each task at its own context moved the two sides' seconds (signed)
            "spec_context_s": round(self.spec_context_s, 4),
            "plain_context_s": round(self.plain_context_s, 4),
        }


@dataclass(frozen=True)
class Offload:
    """Where a prediction ran and what its llama.cpp processes offloaded, as its JSON names them."""

    hardware_class: str  # runner.hardware.hardware_class: gpu-nvidia-h100, cpu-2c
    measurement_class: str  # with the build's instruction set, as its kept records and figures are keyed
    gpu_layers: int | None  # -ngl (and the draft's -ngld) of every process; None: left out, on the CPU


def offload_for(hardware: dict[str, Any] | None = None) -> Offload:
    """What a prediction on ``hardware`` (runner.hardware.detect's dict, the benchmark's own in a run) offloads:
    runner.hardware.gpu_layers of it, the one figure benchmarks use too (SPECREG_GPU_LAYERS overrides both). None
    is this machine as runner.predict.kept keys its records (``manage.py predict``)."""
    hw = kept.this_hardware() if hardware is None else hardware
    return Offload(hardware_class(hw), measurement_class(hw), gpu_layers(hw))


def generation_params(where: Offload, n_predict: int, threads: int | None, temperature: float) -> binaries.GenParams:
    """The options every process of a prediction starts from (a task sets its context, a cost model its length):
    ``where``'s GPU layers, so that binaries.generation_argv gives the tool the benchmark's ``-ngl`` and
    binaries.method_argv a replay's draft the benchmark's ``-ngld``."""
    return binaries.GenParams(
        n_predict=n_predict, threads=threads, temperature=temperature, gpu_layers=where.gpu_layers
    )


@dataclass
class PredictionRun:
    predictions: list[Prediction]
    costs: dict[str, CostModel]
    seconds: dict[str, float] = field(default_factory=dict)  # transcript, replay, cost model
    offload: Offload | None = None  # None only for a run built by hand (tests)
    # an adapted draft only: per content type, the draft's hits where the target wrote a token whose meaning changed
    changed_tokens: dict[str, dict[str, Any]] | None = None

    def best(self) -> dict[str, dict[str, Any]]:
        """Per content type, the setting with the highest predicted speedup (at least MIN_GAIN, else none)."""
        out: dict[str, dict[str, Any]] = {}
        for p in self.predictions:
            s = p.speedup
            if s is None or s < MIN_GAIN:
                continue
            cur = out.get(p.content_type)
            if cur is None or s > cur["speedup"]:
                out[p.content_type] = {"method": p.method, "k": p.k, "p_min": p.p_min, "setting": p.setting,
                                       "speedup": round(s, 4)}  # fmt: skip
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "predictions": [p.to_dict() for p in self.predictions],
            "best": self.best(),
            "seconds": {k: round(v, 2) for k, v in self.seconds.items()},
            "cost_model": {
                name: asdict(c) | {"disturbed": c.disturbed, "residual_used": c.residual_used, "per_cell_s": c.per_cell}
                for name, c in self.costs.items()
            },
            # cost records measured while other work held the CPU, used because it still does: the figures they
            # give are slower than the machine's own
            "disturbed_costs": sorted(name for name, c in self.costs.items() if c.disturbed),
            # which class's timings these are, and how many layers every process offloaded to get them
            **(asdict(self.offload) if self.offload is not None else {}),
            **({"changed_tokens": self.changed_tokens} if self.changed_tokens is not None else {}),
        }


NEAR_TIE = 0.5  # logits: a margin below this can flip with another batch shape (as on the edit prompts)


@dataclass(frozen=True)
class _Plan:
    """What every task of one prediction shares: the models, the settings, the generation and the cost model."""

    target: Path | str
    draft: Path | str | None
    settings: list[Setting]
    fast: list[Setting]  # predicted from one teacher-forced pass of the draft (runner.predict.forced)
    p_cont: float  # the smallest p-min of ``fast``: continuations matter only above p-min 0
    n_predict: int
    max_k: int
    gen: binaries.GenParams
    costs: dict[str, CostModel]
    temperature: float
    should_cancel: Callable[[], bool] | None
    timeout_s: float
    changed: frozenset[int] = frozenset()  # an adapted draft's changed ids (runner.predict.changed_tokens)

    @property
    def transcript_n(self) -> int:
        return _transcript_len(self.n_predict, self.max_k)


@dataclass
class _Tally:
    """The predictions summed over the tasks, one per content type and setting, and the seconds each stage took."""

    rows: dict[tuple[str, str], Prediction] = field(default_factory=dict)
    changed: dict[str, changed_tokens.ChangedTally] = field(default_factory=dict)  # per content type
    seconds: dict[str, float] = field(
        default_factory=lambda: {"transcript": 0.0, "replay": 0.0, "forced": 0.0, "cost_model": 0.0}
    )

    def add(
        self,
        plan: _Plan,
        ctype: str,
        s: Setting,
        r: replay.Replay | forced.Expected,
        ties: tuple[int, int | None],
        prompt: int,
    ) -> None:
        """One task's counts for setting ``s``, and their predicted time against plain decoding's; every decode
        call priced at the task's own context (a ``prompt`` of that many tokens, then its tokens)."""
        draft = plan.draft
        row = self.rows.setdefault(
            (ctype, s.label),
            Prediction(
                s.method,
                str(draft) if draft and uses_draft_file(s.method) else None,
                s.k if s.k else None,
                s.p_min,
                ctype,
                s.label,
                tuple(s.options),
            ),  # fmt: skip
        )
        row.drafted += r.n_drafted
        row.accepted += r.n_accept
        row.tokens += r.n_predict
        row.near_ties += ties[0]
        if ties[1] is not None:
            row.first_tie = ties[1] if row.first_tie is None else min(row.first_tie, ties[1])
        weighted = r.steps if isinstance(r, forced.Expected) else [(1.0, d) for d, _ in r.steps]
        cells = context_cells(prompt, r.n_predict)
        at_task = {name: cost.at_context(cells) for name, cost in plan.costs.items()}
        spec, extra = _spec_seconds(s, r, weighted, at_task)
        row.spec_seconds += spec
        row.extra_seconds += extra
        plain = r.n_predict * at_task["target"].token()
        row.plain_seconds += plain
        # what the task's own context moved, against every call priced where the cost model was timed
        row.spec_context_s += spec - _spec_seconds(s, r, weighted, plan.costs)[0]
        row.plain_context_s += plain - r.n_predict * plan.costs["target"].token()
        if uses_draft_file(s.method):  # what bench_predict prices other residual models with
            row.rounds += sum(w for w, _ in weighted)
            row.calls += sum(w * decode_calls(s, d) for w, d in weighted)


def _spec_seconds(
    s: Setting, r: replay.Replay | forced.Expected, weighted: list[tuple[float, int]], costs: dict[str, CostModel]
) -> tuple[float, float]:
    """One task's speculative seconds for setting ``s`` under ``costs``, and the residual's part of them."""
    t, dm = costs["target"], costs.get("draft")
    # each round's parts and its time with the residual: the residual's share is their difference
    priced = [(w, modelled_step(s, d, t, dm), step_seconds(s, d, t, dm)) for w, d in weighted]
    spec = sum(w * step for w, _, step in priced)
    extra = sum(w * (step - parts) for w, parts, step in priced)
    if isinstance(r, replay.Replay) and is_chain(s.method) and dm is not None:
        # the rounds an n-gram drafted: the draft model did not generate (it still took in the batch)
        spec -= sum(
            draft_generation(s, d, dm) for (d, _), by_model in zip(r.steps, r.drafters, strict=False) if not by_model
        )
    if isinstance(r, replay.Replay) and any(r.checkpoints):
        replayed = r.replays or (0,) * len(r.steps)
        spec += sum(
            checkpoint_seconds(s, d, n, r.checkpoints, t, dm) for (d, _), n in zip(r.steps, replayed, strict=False)
        )
        # a second pass is two more decode calls (the target's, the draft's intake), each with the residual
        passes = sum(1 for n in replayed if n)
        second = passes * 2 * t.residual_per_call() if uses_draft_file(s.method) else 0
        spec += second
        extra += second
    return spec, extra


def predict(
    target: Path | str,
    draft: Path | str | None,
    settings: Iterable[Setting],
    tasks: TaskSet,
    content_types: list[str],
    *,
    n_predict: int = 96,
    threads: int | None = None,
    log: Callable[[str], None] = lambda s: None,
    progress: Callable[[float, str], None] | None = None,
    should_cancel: Callable[[], bool] | None = None,
    timeout_s: float = replay.TIMEOUT_S,
    exact: bool = False,
    temperature: float = 0.0,
    hardware: dict[str, Any] | None = None,
) -> PredictionRun:
    """Every setting's prediction per content type. Raises ReplayError (one line) when llama.cpp cannot load or
    run a model, and ModelTooBig before loading anything when the weights would not fit in memory.

    Draft-model settings come from one teacher-forced pass of the draft per task (runner.predict.forced) unless
    ``exact``: then every setting is replayed through llama.cpp's own loop, as the n-gram methods always are.
    Above temperature 0 only draft-simple is predicted, as expected counts over a sampled transcript
    (runner.predict.forced.expected); other methods raise ReplayError there.

    Every llama.cpp process (transcripts, forced passes, replays, cost models) offloads ``offload_for(hardware)``'s
    GPU layers: a run passes the benchmark's own ``hardware``, so prediction and measurement run alike."""
    settings = list(settings)
    if temperature > 0:
        if exact or draft is None or any(s.method != "draft-simple" for s in settings):
            raise replay.ReplayError(f"above temperature 0 only draft-simple is predicted: {TEMPERATURE_0_ONLY}")
    fits_in_memory([target, *([draft] if draft is not None else [])])
    max_k = max((s.k for s in settings), default=1)
    where = offload_for(hardware)
    gen = generation_params(where, n_predict, threads, temperature)
    template = read_chat_template(target)
    tally = _Tally()
    # The forced pass walks a KV cache's rounds; with checkpoints a partly accepted draft is followed by a second
    # pass of its tokens, which shifts every later round: such pairs are replayed through llama.cpp's own loop.
    stateful = checkpointed(str(target), "target") or (draft is not None and checkpointed(str(draft), "draft"))
    fast = [] if exact or stateful or draft is None else [s for s in settings if s.method == "draft-simple"]
    p_cont = min((s.p_min for s in fast if s.p_min), default=0.0)  # continuations matter only above p-min 0

    started = time.monotonic()
    if progress is not None:
        progress(0.0, "timing this machine's decoding (the cost model), unless kept from an earlier run")
    costs = _cost_models(target, draft, settings, gen, max_k, should_cancel, timeout_s)
    tally.seconds["cost_model"] = time.monotonic() - started
    log(f"cost model: target {costs['target'].batch(1) * 1000:.1f} ms per token")
    changed = changed_tokens.adapted_ids(draft) if draft is not None and fast else frozenset()
    plan = _Plan(
        target, draft, settings, fast, p_cont, n_predict, max_k, gen, costs, temperature, should_cancel, timeout_s,
        changed,
    )  # fmt: skip

    work = [(c, t) for c in content_types for t in tasks.by_type(c)]
    for done, (ctype, task) in enumerate(work):
        if should_cancel is not None and should_cancel():
            raise PredictionCancelled("cancelled")  # between two tasks
        if progress is not None:
            progress(done / max(1, len(work)), f"predicting {ctype}/{task.id}: transcript and replay")
        prompt = render_prompt(task.prompt, template, task.system).text
        _predict_task(plan, tally, ctype, f"{tasks.name}/{ctype}/{task.id}", prompt)
        log(f"{ctype}/{task.id}: {len(settings)} settings replayed")
    changed_at = {c: t.to_dict() for c, t in tally.changed.items()} if changed else None
    return PredictionRun(list(tally.rows.values()), costs, tally.seconds, where, changed_at)


def _cost_models(
    target: Path | str,
    draft: Path | str | None,
    settings: list[Setting],
    gen: binaries.GenParams,
    max_k: int,
    should_cancel: Callable[[], bool] | None,
    timeout_s: float,
) -> dict[str, CostModel]:
    """The target's cost model, and the draft's when a setting decodes with it."""
    # the rounds of runner.predict.round_cost verify up to FIT_K + 1 tokens: timed, not extrapolated (whether or not
    # they are fitted, so that one kept cost model serves either way)
    timed = min(max(max_k, round_cost.FIT_K) + 1, MAX_TIMED_BATCH)
    # the run's limit per process holds for each tool process as for each llama.cpp one
    costs = {"target": measure_cost(target, gen, timed, should_cancel=should_cancel, timeout_s=timeout_s)}
    if draft is not None and any(uses_draft_file(s.method) for s in settings):
        t = costs["target"]
        # a model drafting for itself: one cost model, not a second check of the same record (which could find it
        # drifted and leave the target priced by the figures it replaced)
        same = _same_file(target, draft)
        d = costs["draft"] = (
            t if same else measure_cost(draft, gen, timed, should_cancel=should_cancel, timeout_s=timeout_s)
        )
        ckpt = (checkpointed(str(target), "target"), checkpointed(str(draft), "draft"))
        again = "remeasured" in (t.source, d.source)  # taken with cost models that no longer hold

        def rounds_at(k: int) -> round_cost.Rounds:
            return round_cost.measure_rounds(
                target,
                draft,
                gen,
                lambda r: round_residual(r, t, d, ckpt),
                should_cancel=should_cancel,
                timeout_s=timeout_s,
                again=again,
                k=k,
            )

        rounds = rounds_at(round_cost.ROUND_K)
        held = rounds.conditions.to_dict() if rounds.conditions is not None else {}
        # Priced only where it stands out of the parts' own movement (CostModel.residual_used): on small shared CPUs
        # its sign and size changed from one run to the next and pricing it made predictions worse than none; on a GPU
        # a round's launches and synchronisations came to about its parts again (docs/benchmarks.md, "Figures behind
        # design choices").
        share = residual_share(rounds.run, rounds.extra, t, d, ckpt)
        costs["target"] = replace(t, extra_per_call_s=rounds.extra, residual_conditions=held, residual_share=share)
        # How it grows, on request: a second K and the shape that fits both. Not by default: on small shared CPUs the
        # second point carried the noise of the target's batch timings and made predictions worse than the one K per
        # call (docs/benchmarks.md, "Figures behind design choices").
        if os.environ.get("SPECREG_RESIDUAL_FIT", "0") == "1":
            longer = rounds_at(round_cost.FIT_K)
            points = tuple(
                (k, per_round(e, k)) for k, e in ((round_cost.ROUND_K, rounds.extra), (round_cost.FIT_K, longer.extra))
            )
            line = round_cost.fit(list(points))
            if line is not None:
                fitted = (line.per_round, line.per_token)
                costs["target"] = replace(costs["target"], residual_fit=fitted, residual_points=points)
    return costs


def _same_file(a: Path | str, b: Path | str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _task_gen(gen: binaries.GenParams, prompt: str, n_predict: int, max_k: int) -> binaries.GenParams:
    """One task's generation: a context that holds its prompt, its answer and the largest draft."""
    size = len(prompt) + n_predict + max_k + 64
    return replace(gen, ctx_size=max(2048, -(-size // 256) * 256))


def _transcript_len(n_predict: int, max_k: int) -> int:
    """A transcript longer than any replay's run by its draft: one length, so predict and first_ties share it."""
    return n_predict + max_k + 2


def _tie_positions(script: replay.Transcript, n_predict: int, below: float = NEAR_TIE) -> list[int]:
    return [i for i, m in enumerate(script.margins[:n_predict]) if m < below]


def first_ties(
    target: Path | str,
    tasks: TaskSet,
    content_types: list[str],
    *,
    n_predict: int = 96,
    max_k: int = 1,
    below: float = NEAR_TIE,
) -> dict[tuple[str, str], int | None]:
    """Per task (content type, id), the first token of the target's greedy answer whose margin is under ``below``
    logits, None where none is: where a real speculative run may write another text than the prediction's. The same
    transcripts as a temperature-0 ``predict`` of settings up to K ``max_k`` (kept: made once), so choosing prompts by
    it costs nothing after."""
    gen = generation_params(offload_for(None), n_predict, None, 0.0)
    template = read_chat_template(target)
    found: dict[tuple[str, str], int | None] = {}
    for ctype in content_types:
        for task in tasks.by_type(ctype):
            prompt = render_prompt(task.prompt, template, task.system).text
            task_gen = replace(_task_gen(gen, prompt, n_predict, max_k), n_predict=_transcript_len(n_predict, max_k))
            script = replay.transcript(target, prompt, task_gen, task=f"{tasks.name}/{ctype}/{task.id}")
            at = _tie_positions(script, n_predict, below)
            found[(ctype, task.id)] = at[0] if at else None
    return found


def _predict_task(plan: _Plan, tally: _Tally, ctype: str, name: str, prompt: str) -> None:
    """One task: the target's transcript, the draft's forced pass where one serves, then every setting's counts."""
    task_gen = _task_gen(plan.gen, prompt, plan.n_predict, plan.max_k)
    started = time.monotonic()
    script = replay.transcript(
        plan.target,
        prompt,
        replace(task_gen, n_predict=plan.transcript_n),
        task=name,
        should_cancel=plan.should_cancel,
        timeout_s=plan.timeout_s,
    )
    tally.seconds["transcript"] += time.monotonic() - started
    at = _tie_positions(script, plan.n_predict)
    ties = (len(at), at[0] if at else None)
    ended = len(script.tokens) < plan.transcript_n  # the target stopped: its last token ends the run
    passed = None
    if plan.fast and plan.draft is not None:
        started = time.monotonic()
        max_fast = max(s.k for s in plan.fast)
        passed = forced.forced_pass(
            plan.draft,
            prompt,
            task_gen,
            script,
            max_fast,
            plan.p_cont,
            ended=ended,
            should_cancel=plan.should_cancel,
            timeout_s=plan.timeout_s,
        )
        tally.seconds["forced"] += time.monotonic() - started
        if plan.changed:
            n = plan.n_predict
            tally.changed.setdefault(ctype, changed_tokens.ChangedTally()).add(
                passed.top[:n], script.tokens[:n], plan.changed
            )
    for s in plan.settings:
        started = time.monotonic()
        r: replay.Replay | forced.Expected
        if passed is not None and s in plan.fast:
            walk = forced.expected if plan.temperature > 0 else forced.steps
            r = walk(passed, script, s, plan.n_predict, task_gen.ctx_size or 2048, ended)
        else:
            used = plan.draft if uses_draft_file(s.method) else None
            r = replay.replay(
                plan.target,
                used,
                prompt,
                task_gen,
                s,
                script,
                should_cancel=plan.should_cancel,
                timeout_s=plan.timeout_s,
            )
            tally.seconds["replay"] += time.monotonic() - started
        tally.add(plan, ctype, s, r, ties, len(script.prompt))


class ModelTooBig(replay.ReplayError):
    """The models' weights would not fit in this machine's memory."""


def fits_in_memory(paths: list[Path | str]) -> None:
    """Refuse, with one line, to predict with models bigger than this machine's memory: llama.cpp would map them
    and page them in for every token (minutes per token), or be killed by the kernel, not fail cleanly."""
    total = sum(Path(p).stat().st_size for p in paths)
    mem = ram_bytes()
    if mem is None:
        return  # not Linux: llama.cpp's own error is the answer
    if total > MEMORY_SHARE * mem:
        raise ModelTooBig(
            f"the models need {total / 2**30:.1f} GiB of weights and this machine has {mem / 2**30:.1f} GiB of memory: "
            "predict on a machine (hardware class) that can hold them"
        )
