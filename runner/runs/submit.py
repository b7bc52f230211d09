"""Submitting a benchmark run: check the pair and the user's limit, record the run, send its task.

Views and management commands call this; the worker side (claim, log, sweep) is runner.runs.records.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from inspector.compat import check_pair
from inspector.info import load_refusal
from inspector.spec_flags import OWN_HEADS, uses_draft_file
from registry.catalog.stored import load_info
from registry.models import BenchmarkRun, GGUFFile, Pair
from registry.queues import send
from runner.errors import BenchmarkError
from runner.methods import default_methods, offered_method
from runner.runs.params import check_hardware_class, normalize_params
from runner.runs.queues import bench_queue, local_hardware_class
from runner.soak.targets import DEFAULT_DURATION_S, DEFAULT_INTERVAL_S, soak_params, soak_target


def queue_benchmark(
    pair: Pair,
    params: dict[str, Any],
    *,
    user=None,
    hardware: str | None = None,
    send: bool = True,
    target_alone: bool = False,
    files: tuple[GGUFFile, GGUFFile] | None = None,
) -> BenchmarkRun:
    """Record a queued run and (``send``) hand its task to the broker once the transaction commits.

    ``files``: the target and draft files to measure, quants of the pair's two base models (default: the two
    files the pair was checked on); other files than those are checked with llama.cpp's rules first, and a file
    llama.cpp cannot load is refused (``check_loadable``).

    ``target_alone``: the run measures the target's draftless methods (n-gram, its own MTP heads); it is
    recorded on the target's own pair (the target paired with itself), whose table row then shows the
    method instead of a draft."""
    if target_alone:
        params = {**params, "target_alone": True}
    if not pair.compatible:
        raise BenchmarkError(
            f"{pair.draft.source} cannot draft for {pair.target.source}: rule "
            f"'{pair.failed_rule}' fails ({_rule_detail(pair)})"
        )
    target, draft = files or (pair.target, pair.draft)
    if (target.pk, draft.pk) != (pair.target_id, pair.draft_id) and target.pk != draft.pk:
        check = check_pair(load_info(target), load_info(draft))
        if not check.compatible:
            raise BenchmarkError(
                f"{draft.source} cannot draft for {target.source}: rule '{check.failed_rule}' fails, although "
                f"other quants of the two models can (the pair's {pair.draft.source} and {pair.target.source})"
            )
    # The draft is loaded only by a method that takes a draft file (an n-gram method measures the target alone).
    methods = params.get("methods") or ["draft-simple"]
    loads_draft = not params.get("target_alone") and any(uses_draft_file(m) for m in methods)
    check_loadable(target, *([draft] if loads_draft else []))
    params = normalize_params(params)
    hw = check_hardware_class(hardware or local_hardware_class())
    with transaction.atomic():
        if getattr(user, "is_authenticated", False):
            # Count and create under the user's row lock (PostgreSQL; SQLite's IMMEDIATE transactions
            # serialize writers anyway), so requests sent at once cannot all pass the count.
            get_user_model().objects.select_for_update().filter(pk=user.pk).first()
            active = BenchmarkRun.objects.filter(
                requested_by=user, status__in=(BenchmarkRun.QUEUED, BenchmarkRun.RUNNING)
            )
            limit = settings.SPECREG_MAX_ACTIVE_RUNS_PER_USER
            if active.count() >= limit:
                raise BenchmarkError(
                    f"you already have {limit} benchmark(s) queued or running, the most allowed "
                    "(SPECREG_MAX_ACTIVE_RUNS_PER_USER); cancel one or wait for it to finish"
                )
        run = BenchmarkRun.objects.create(
            pair=pair,
            kind=BenchmarkRun.kind_of(params),
            target_file=target,
            draft_file=draft,
            params=params,
            queue=bench_queue(hw),
            hardware_class=hw,
            requested_by=user if getattr(user, "is_authenticated", False) else None,
        )
        if send:
            transaction.on_commit(lambda: _send(run))
    return run


def queue_prediction(
    pair: Pair, *, user=None, hardware: str | None = None, send: bool = True, **params: Any
) -> BenchmarkRun:
    """Queue a prediction of the pair's settings (a run with ``mode`` "predict"): the pair's draft method and the
    n-gram family, or, on a target's own pair, the draftless methods; K and p-min as a benchmark sweeps them."""
    alone = pair.target_id == pair.draft_id
    methods = default_methods(
        None if alone else offered_method(pair.draft) or "draft-simple", offered_method(pair.target) == OWN_HEADS
    )
    defaults = {"mode": "predict", "methods": methods, "prompts_per_type": 2, "repeats": 1}
    return queue_benchmark(pair, {**defaults, **params}, user=user, hardware=hardware, send=send, target_alone=alone)


def check_loadable(*files: GGUFFile) -> None:
    """Refuse, before anything is queued, a file llama.cpp cannot load (a header alone, an unfinished download): the
    run would only download it and fail at its first tensor. Every way of queueing a run (the form, the API, the
    shell) comes through ``queue_benchmark``, so all of them refuse it in these words."""
    for f in dict.fromkeys(files):  # a target drafting for itself is checked once
        why = load_refusal(f.info)
        if why is not None:
            raise BenchmarkError(f"{f.source}: llama.cpp cannot load it: {why}; pick a file that carries the weights")


def _rule_detail(pair: Pair) -> str:
    for c in pair.result.get("checks", []):
        if c["rule"] == pair.failed_rule:
            return c["detail"].rstrip(".")
    return "see the pair page"


def _send(run: BenchmarkRun) -> None:
    send("runner.tasks.run_benchmark", run.pk, run.queue)


def queue_soak(
    ref: str,
    *,
    duration_s: float = DEFAULT_DURATION_S,
    clients: int = 1,
    interval_s: float = DEFAULT_INTERVAL_S,
    request_timeout_s: float | None = None,
    method: str | None = None,
    k: int | None = None,
    n_predict: int | None = None,
    user=None,
    hardware: str | None = None,
    send: bool = True,
) -> BenchmarkRun:
    soak = soak_params(duration_s, clients, interval_s, request_timeout_s)
    # A soak holds the hardware's benchmark worker for its whole duration: long ones are for staff (and the shell).
    user_hours = settings.SPECREG_SOAK_MAX_HOURS_USER
    if getattr(user, "is_authenticated", False) and not user.is_staff and duration_s > user_hours * 3600:
        raise BenchmarkError(
            f"a soak of more than {user_hours:g} h holds the benchmark worker too long for a non-staff account "
            "(SPECREG_SOAK_MAX_HOURS_USER): ask a staff member, or run a shorter one"
        )
    t = soak_target(ref, method=method, k=k)
    s = t.setting
    soak |= {
        "method": s.method,
        "k": s.k,
        "p_min": s.p_min,
        "options": [list(o) for o in s.options],
        "parallel": t.parallel if t.parallel and t.parallel >= clients else clients,
        "deployment": t.deployment_id,
        "basis": t.basis,
    }
    alone = not uses_draft_file(s.method)
    params = {"mode": "soak", "soak": soak, "methods": [s.method], "repeats": 1, "n_predict": n_predict}
    return queue_benchmark(
        t.pair,
        params,
        user=user,
        hardware=hardware,
        send=send,
        target_alone=alone,
        files=(t.target, t.target if alone else t.draft),
    )
