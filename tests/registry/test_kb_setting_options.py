"""A knowledge base's setting options: malformed or foreign options are refused in one line, and rows stored with
malformed options still render."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from inspector.llama_flags import LlamaCppError, pinned_server_capabilities
from inspector.spec_flags import Setting, spec_flags
from registry.kb.importer import KBError, import_kb
from registry.models import BenchmarkResult, BenchmarkRun, PredictedResult, StabilityResult
from registry.results.figures import refresh_best, refresh_predicted
from tests.knowledge_bases import a_doc, counts, empty_installation

pytestmark = [pytest.mark.django_db]


def _soak_record(method: str, options: list) -> dict:
    return {
        "k": 8, "method": method, "options": options, "planned_s": 600, "status": "stable", "verdict": "stable",
        "clients": 1, "parallel": 1, "interval_s": 60, "intervals": [],
    }  # fmt: skip


def test_a_knowledge_base_with_malformed_or_foreign_options_is_refused_in_one_line(kb_a, tmp_path, settings):
    settings.SPECREG_INSTALLATION_ID = "installation-a"
    doc = a_doc(kb_a)
    empty_installation(settings, "installation-b")
    before = counts()
    at = next(i for i, r in enumerate(doc["runs"]) if r["predictions"])

    def refused(mutate, expected: str) -> None:
        d = json.loads(json.dumps(doc))
        mutate(d["runs"][at])
        (tmp_path / "kb.json").write_text(json.dumps(d))
        with pytest.raises(KBError, match=expected) as exc:
            import_kb(tmp_path / "kb.json")
        assert "\n" not in str(exc.value)
        assert counts() == before and not StabilityResult.objects.exists()

    def soak(method: str, options: list):
        return lambda run: run.update(stability=[_soak_record(method, options)])

    def predicted(options: list):
        return lambda run: run["predictions"][0].update(options=options)

    short = r"\.options\.0: List should have at least 2 items after validation, not "
    refused(soak("ngram-mod", [["--spec-x"]]), rf"runs\.{at}\.stability\.0{short}1")
    refused(soak("ngram-mod", [[]]), rf"runs\.{at}\.stability\.0{short}0")
    refused(predicted([["--spec-x"]]), rf"runs\.{at}\.predictions\.0{short}1")
    refused(predicted([[]]), rf"runs\.{at}\.predictions\.0{short}0")
    refused(soak("ngram-mod", [["--spec-x", "1"]]), "ngram-mod takes only --spec-ngram-mod-n-match with a number")
    refused(soak("ngram-mod", [["--spec-ngram-mod-n-match", "16;sh"]]), "ngram-mod takes only")
    refused(soak("ngram-mod", [["--spec-ngram-mod-n-match", 16]]), "Input should be a valid string")
    refused(predicted([["--spec-ngram-mod-n-match", "16"]]), "draft-simple takes no options")

    # The options specreg's runs write still come in.
    d = json.loads(json.dumps(doc))
    soak("ngram-mod", [["--spec-ngram-mod-n-match", "16"]])(d["runs"][at])
    (tmp_path / "kb.json").write_text(json.dumps(d))
    import_kb(tmp_path / "kb.json")
    assert StabilityResult.objects.get().options == [["--spec-ngram-mod-n-match", "16"]]


@pytest.mark.parametrize("bad", [[["--spec-x"]], [[]]])
def test_rows_stored_with_malformed_options_still_render(pair, bad):
    """Rows an older import let in (or written by hand): the pages, the API and the soak's run page answer."""
    run = BenchmarkRun.objects.create(
        pair=pair, queue="bench.x", status="done", kind="soak",
        params={"mode": "soak", "soak": {"method": "ngram-mod", "k": 8, "options": bad, "duration_s": 60,
                                         "clients": 1, "interval_s": 60, "basis": "imported"}},
    )  # fmt: skip
    figures = {"pair": pair, "run": run, "k": 8, "method": "ngram-mod", "options": bad, "content_type": "code"}
    BenchmarkResult.objects.create(
        **figures, speedup=1.3, acceptance=0.8, tokens_per_second=30.0, baseline_tokens_per_second=25.0,
        n_predict=64, repeats=1, n_prompts=2, status="ok", hardware="cpu", llama_cpp_build="b1",
    )  # fmt: skip
    PredictedResult.objects.create(
        **figures, speedup=1.4, acceptance=0.8, n_predict=64, n_prompts=2, task_set="default",
        hardware_class="cpu", hardware="cpu", llama_cpp_build="b1",
    )  # fmt: skip
    StabilityResult.objects.create(
        pair=pair, run=run, k=8, method="ngram-mod", options=bad, clients=1, parallel=1, planned_s=60,
        status="stable", verdict="stable for 1 min",
    )  # fmt: skip
    refresh_predicted(pair)
    refresh_best(pair)
    c = Client()
    for url in (f"/pairs/{pair.pk}/", f"/api/pairs/{pair.pk}", f"/runs/{run.pk}/", f"/api/runs/{run.pk}", "/"):
        assert c.get(url).status_code == 200, url
    setting = Setting("ngram-mod", 8, None, tuple(tuple(o) for o in bad))
    assert setting.label == "ngram-mod K=8 (malformed option)"
    with pytest.raises(LlamaCppError, match="not a \\(flag, value\\) pair"):
        spec_flags(pinned_server_capabilities(), setting)  # never an argv
