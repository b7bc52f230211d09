"""K sweep logic, recommendations, and the markdown report of a real sweep."""

from __future__ import annotations

import pytest

from registry.results.deploy import deployment
from runner import hardware
from runner.llama import binaries as llamacpp
from runner.measure.cli import Spread
from runner.prompts import load_task_set, parse_task_set
from runner.sweep.report import markdown_report
from runner.sweep.sweep import GRID, NO_DRAFT, SweepConfig, next_k, recommend, run_sweep
from tests.needs import missing
from tests.runs import cell_result


def test_next_k_extends_upward_while_the_largest_k_is_fastest():
    assert next_k({4: 1.1, 8: 1.2, 16: 1.3}, GRID) == 24
    assert next_k({4: 1.1, 8: 1.2, 16: 1.3, 24: 1.4}, GRID) is None  # grid exhausted
    assert next_k({4: 1.1, 8: 1.3, 16: 1.2}, GRID) is None  # fell at the top
    assert next_k({4: 0.9, 8: 0.7, 16: 0.6}, GRID) is None
    assert next_k({1: 1.0, 2: 1.1}, GRID) == 4  # next grid value above, not 12
    assert next_k({4: None, 8: None}, GRID) is None


def test_recommend_fastest_k_above_one():
    rec = recommend("code", 0.0, [cell_result(4, 1.2), cell_result(8, 1.5), cell_result(16, 1.4)])
    assert (rec.k, rec.speedup, rec.use_draft) == (8, 1.5, True) and rec.summary == "draft-simple K=8 (1.50x)"


def test_a_gain_within_its_spread_is_no_measurable_gain():
    # ngram-mod on prose measured 0.92x-1.01x across near-identical settings: 1.04x among pairs from 0.95x is noise
    rec = recommend("prose", 0.0, [cell_result(4, 1.04, pairs=Spread(1.04, 0.95, 1.10, 4)), cell_result(8, 0.9)])
    assert rec.k is None and rec.summary == NO_DRAFT
    assert rec.reason == (
        "no measurable gain: draft-simple K=4 measured 1.04x, within its spread (4 interleaved pairs from 0.95x "
        "to 1.10x); more repeats would tell"
    )
    # one pair cannot tell a gain from noise, however large
    assert recommend("code", 0.0, [cell_result(4, 1.8, pairs=Spread(1.8, 1.8, 1.8, 1))]).k is None
    # the fastest measurable gain wins over a faster one within its spread
    rec = recommend(
        "code",
        0.0,
        [cell_result(4, 1.5, pairs=Spread(1.5, 0.9, 2.0, 3)), cell_result(8, 1.2, pairs=Spread(1.2, 1.1, 1.3, 3))],
    )
    assert rec.k == 8 and "3 interleaved pairs from 1.10x to 1.30x" in rec.reason


def test_recommend_no_draft_when_nothing_wins():
    rec = recommend("prose", 0.0, [cell_result(4, 0.6), cell_result(8, 0.5)])
    assert rec.k is None and rec.summary == NO_DRAFT and "best: draft-simple K=4 at 0.60x" in rec.reason
    rec = recommend("prose", 0.0, [cell_result(4, None, ran=False)])
    assert rec.k is None and "never ran" in rec.reason
    rec = recommend("prose", 0.0, [cell_result(4, None, status="failed", ran=False)])
    assert rec.k is None and "boom" in rec.reason


@pytest.fixture(scope="module")
def small_sweep(smollm2_path):
    """A real two-K sweep of SmolLM2 drafting for itself on one tiny code task."""
    try:
        llamacpp.find_binary(llamacpp.SPECULATIVE)
    except llamacpp.LlamaCppNotFound as exc:
        missing(str(exc))
    tasks = parse_task_set(
        {
            "name": "tiny",
            "tasks": [{"id": "count", "content_type": "code", "prompt": "Write the numbers 1 to 30 as a Python list."}],
        }
    )
    cfg = SweepConfig(
        str(smollm2_path),
        str(smollm2_path),
        tasks,
        ks=(2, 4),
        grid=(2, 4, 8),
        n_predict=24,
        repeats=1,
        prompts_per_type=1,
    )
    progress = []
    result = run_sweep(cfg, progress=lambda f, m: progress.append(f))
    return result, progress


@pytest.mark.llama
def test_real_sweep(small_sweep):
    result, progress = small_sweep
    assert result.status == "ok", result.error
    assert {c.cell.k for c in result.cells} >= {2, 4}
    assert all(c.speculation_ran and c.acceptance_rate >= 0.9 for c in result.cells)
    assert len(result.recommendations) == 1 and result.recommendations[0].content_type == "code"
    assert progress == sorted(progress) and progress[-1] == 1.0


@pytest.mark.llama
def test_report_from_real_sweep(small_sweep):
    result, _ = small_sweep
    build = llamacpp.build_info()
    caps = llamacpp.capabilities(llamacpp.find_binary(llamacpp.SERVER))
    rec = result.recommendations[0]
    dep = deployment(caps, result.config.target, result.config.draft, rec.k)
    report = markdown_report(result, hardware=hardware.detect(), build=build, deployments={"code": dep})
    assert report.startswith("# Speculative decoding benchmark: SmolLM2-135M-Instruct.Q4_1.gguf")
    for part in (
        "## Method",
        "## Hardware",
        "## llama.cpp build",
        "b11434",
        "## code (temperature 0)",
        "| K | temp |",
        "**Recommendation:**",
        "```ini",
        "ExecStart=",
    ):
        assert part in report
    assert report.count("\n| 2 | 0 |") == 1 and report.count("\n| 4 | 0 |") == 1


def test_hardware_description():
    info = hardware.detect()
    assert info["cpu_cores"] >= 1 and info["ram_bytes"] > 0 and info["cpu_model"]
    assert info["hardware_class"] == (f"cpu-{info['cpu_cores']}c" if not info["gpus"] else info["hardware_class"])
    h100 = [{"vendor": "nvidia", "name": "NVIDIA H100 80GB HBM3"}]
    assert hardware.hardware_class({"gpus": h100}) == "gpu-nvidia-h100"
    two = [{"vendor": "nvidia", "name": "NVIDIA GeForce RTX 4090"}] * 2
    assert hardware.hardware_class({"gpus": two}) == "gpu-nvidia-rtx-4090x2"
    assert hardware.hardware_class({"cpu_cores": 2, "gpus": []}) == "cpu-2c"


def test_default_task_set_loads_for_sweeps():
    assert SweepConfig("t", "d", load_task_set()).task_set.content_types == ("code", "json", "prose", "math", "edit")


def test_busy_machine_is_a_caveat():
    import dataclasses

    busy = dataclasses.replace(cell_result(4, 1.4), other_cpu_share=0.3)
    rec = recommend("code", 0.0, [busy, cell_result(8, 0.9)])
    assert rec.k == 4 and "30% of the CPU during draft-simple K=4" in rec.caveat
    assert recommend("code", 0.0, [cell_result(4, 1.4)]).caveat is None
