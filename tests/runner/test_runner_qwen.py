"""A short real benchmark of the Qwen2.5-Coder 1.5B target with its 0.5B draft (slow: ~2 minutes on 2 cores)."""

from __future__ import annotations

import pytest

from registry.catalog.pairing import pair_for
from registry.hub.sources import register_source
from registry.models import BenchmarkRun
from runner.runs import submit
from runner.runs.execute import execute
from tests.models import model_path

pytestmark = [pytest.mark.slow, pytest.mark.llama]


def test_qwen_coder_pair_is_measured_with_its_draft(transactional_db, settings):
    settings.SPECREG_QUEUE_PREFIX = "nobody-listens."
    target, draft = register_source(str(model_path("qwen15"))).file, register_source(str(model_path("qwen05"))).file
    pair = pair_for(target, draft)
    assert pair.compatible
    run = submit.queue_benchmark(
        pair,
        {
            "ks": [4],
            "extend": False,
            "content_types": ["code"],
            "repeats": 1,
            "n_predict": 48,
            "prompts_per_type": 1,
            "p_min": 0.0,
        },
        hardware="cpu-test",
    )
    assert execute(run.pk) == "done"
    run = BenchmarkRun.objects.get(pk=run.pk)
    (r,) = run.results.all()
    assert r.speculation_ran and r.drafted > 0 and 0.2 < r.acceptance <= 1.0
    assert r.baseline_tokens_per_second > 0 and r.tokens_per_second > 0
    assert r.speedup == pytest.approx(r.tokens_per_second / r.baseline_tokens_per_second)
    rec = run.summary["recommendations"][0]
    assert r.pairs == 1 and r.speedup_min == pytest.approx(r.speedup)  # one prompt, one repeat: one pair
    assert rec["k"] is None  # only a gain beyond its spread is recommended, and one pair has none
    assert "K=4" in run.report_md or "| 4 |" in run.report_md
