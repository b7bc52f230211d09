"""Plain dicts of registry objects for the JSON API, CSV export and commands (only JSON types)."""

from __future__ import annotations

from typing import Any

from registry.adapt_stored import api_value, candidate
from registry.catalog.adaptable import for_pairs
from registry.catalog.combinations import compatible_quants
from registry.models import BaseClass, GGUFFile, Model, Pair, StabilityResult
from registry.pair_state import state_of
from registry.results.figures import Figure
from registry.table.records import TableFile, TablePair


def file_ref(f: GGUFFile | TableFile) -> dict[str, Any]:
    return {
        "id": f.pk,
        "source": f.source,
        "model": f.model.name,
        "model_id": f.model_id,
        "repo": f.repo,
        "architecture": f.architecture,
        "parameter_count": f.parameter_count,
        "file_type": f.file_type,
        "n_vocab": f.n_vocab,
        "vocab_type": f.vocab_type,
    }


def base_quants(f: GGUFFile | TableFile) -> int | None:
    """Files registered for the file's base model, in every repository (a table row carries the count)."""
    m = f.model
    if not isinstance(m, Model):
        return m.quants
    return m.base.quants if m.base is not None else None


def unlisted_ref(bc: BaseClass) -> dict[str, Any]:
    """A compatible base model without a listed pair, and the file a check of it would use."""
    return {"base_model": bc.base.name, "parameter_count": bc.base.parameter_count, "quants": bc.base.quants} | {
        "file": file_ref(bc.file)
    }


def compatible_quants_of(p: Pair | TablePair) -> dict[str, int] | None:
    """``{"n", "m"}``: of the draft base model's M files, the N compatible with the row's target file."""
    nm = getattr(p, "compatible_quants", None)
    if nm is None and isinstance(p, Pair):
        nm = compatible_quants([(p.pk, p.target_base_id, p.target.tokenizer_class_id, p.draft_base_id)]).get(p.pk)
    return {"n": nm[0], "m": nm[1]} if nm else None


def adaptable_of(p: Pair | TablePair) -> dict[str, Any] | None:
    """``{"changed_tokens", "keys", "summary"}`` when adapt_draft could reconcile the pair's two files, else None. A
    table row carries it; a Pair is decided here (stored once: registry.catalog.adaptable), and only when its
    verdict leaves room for it, so compatible pairs cost nothing."""
    if not candidate(p.compatible, p.failed_rule):
        return None
    if isinstance(p, TablePair):
        return p.adaptable
    return api_value(for_pairs([p]).get(p.pk))


def pair_row(p: Pair | TablePair, best: Figure | None = None) -> dict[str, Any]:
    """One row of the pairs table; ``best`` overrides the stored best when filters narrowed the results."""
    row = {
        "id": p.pk,
        # A pair joins two base models: these are the files it was checked on, with each model's quant count.
        "target": file_ref(p.target) | {"quants": base_quants(p.target)},
        "draft": file_ref(p.draft) | {"quants": base_quants(p.draft)},
        "compatible": p.compatible,  # at least one combination of the two models' tokenizer classes works
        "verdict": p.verdict,  # all, partial or none of them
        "compatible_quants": compatible_quants_of(p),
        "llama_cpp_compatible": p.llama_cpp_compatible,
        "failed_rule": p.failed_rule or None,
        # how llama.cpp rolls the pair back after a rejected draft: kv, checkpoints, rollback or none, and its cost
        "state": state_of(p).to_dict(),
        # null, or what adapt_draft would change to make the draft acceptable
        "adaptable": adaptable_of(p),
        "size_ratio": round(p.size_ratio, 2) if p.size_ratio else None,
        "rules_from": p.rules_from,
        "checked_at": p.checked_at.isoformat(),
    }
    # "speedup" is a headline figure only: one the measurement cannot tell from noise is null, and "note" says what it
    # is ("no measurable gain: 2.13× in 1 repeat": registry.results.standing).
    if best is not None:
        row["best"] = {
            "kind": best.kind,
            "k": best.k,
            "acceptance": best.acceptance,
            "speedup": None if best.note else best.speedup,
            "note": best.note_text,
            "content_type": best.content_type,
            "method": best.method,
        }
    elif p.best_kind:
        row["best"] = {
            "kind": p.best_kind,
            "k": p.best_k,
            "acceptance": p.best_acceptance,
            "speedup": p.best_speedup,
            "note": p.best_note,
            "content_type": p.best_content_type,
            "method": p.best_method or "draft-simple",
        }
    else:
        row["best"] = None
    # The best predicted setting, apart from the best measured/reported one (never mixed into it).
    row["predicted"] = (
        {
            "kind": "predicted",
            "k": p.predicted_k,
            "speedup": p.predicted_speedup,
            "content_type": p.predicted_content_type,
            "method": p.predicted_method,
        }
        if p.predicted_speedup is not None
        else None
    )
    return row


def model_summary(m: Model) -> dict[str, Any]:
    return {
        "id": m.pk,
        "repo": m.repo,
        "name": m.name,
        "architecture": m.architecture,
        "parameter_count": m.parameter_count,
        "family": m.family.name if m.family else None,
    }


def stability_dict(s: StabilityResult) -> dict[str, Any]:
    """A soak record as the API gives it (the run's JSON, the pair's)."""
    return {
        "id": s.pk,
        "run": s.run_id,
        "status": s.status,
        "verdict": s.verdict,
        "method": s.method,
        "k": s.k,
        "setting": s.setting_label,
        "clients": s.clients,
        "parallel": s.parallel,
        "planned_s": s.planned_s,
        "elapsed_s": s.elapsed_s,
        "interval_s": s.interval_s,
        "requests": s.requests,
        "errors": s.errors,
        "timeouts": s.timeouts,
        "rss_start_mb": s.rss_start_mb,
        "rss_end_mb": s.rss_end_mb,
        "memory_growth": s.memory_growth,
        "acceptance": s.acceptance,
        "acceptance_range": [s.acceptance_min, s.acceptance_max],
        "tokens_per_second": s.tokens_per_second,
        "baseline_tokens_per_second": s.baseline_tokens_per_second,
        "compared": s.compared,
        "differing": s.differing,
        "prompt_repeats": s.prompt_repeats,
        "deployment": s.deployment_ref,
        "hardware": s.hardware,
        "llama_cpp_build": s.llama_cpp_build,
        "intervals": s.intervals,
        "finished_at": s.finished_at and s.finished_at.isoformat(),
    }
