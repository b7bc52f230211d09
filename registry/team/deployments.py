"""Deployments: recording what runs in production (by hand, from a run's recommendation), listing, retiring."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from datetime import datetime

from django.db.models import F, Q, QuerySet
from django.utils import timezone

from inspector.spec_flags import (
    NGRAM_CACHE_DRAFT,
    NGRAM_SWEEP,
    chain_of,
    known_method,
    own_option,
    uses_draft_file,
)
from inspector.speculative import NGRAM_METHODS, SPEC_TYPES
from registry.catalog.pairing import as_draft, as_target, pair_for
from registry.hub import sources
from registry.hub.sources import SourceRegistrationError
from registry.models import BenchmarkRun, GGUFFile, Pair
from registry.results.figures import Figure, figures_for
from registry.results.recommend import shown_command
from registry.team.models import Deployment
from registry.team.telemetry import ScrapeError, validate_url

COMMAND_MAX_CHARS = 8000
DRAFTLESS = ("none", *NGRAM_METHODS)  # methods that need no second model (draft-mtp uses the target's heads)


class DeploymentError(ValueError):
    """A deployment that cannot be recorded or changed; one line."""


def may_record(user) -> bool:
    return user is not None and user.is_authenticated and user.is_active


def may_set_url(user) -> bool:
    """Only staff: the server itself fetches the URL, so it must not be anyone's to choose."""
    return may_record(user) and user.is_staff


def may_retire(user, d: Deployment) -> bool:
    return may_record(user) and (user.is_staff or (d.created_by_id is not None and d.created_by_id == user.pk))


def resolve_file(spec: str) -> GGUFFile:
    """A registered file by id, or a source registered now if it is new (registry.hub.sources.resolve_file)."""
    try:
        return sources.resolve_file(spec)
    except SourceRegistrationError as exc:
        raise DeploymentError(str(exc)) from None


@dataclass
class DeploymentSpec:
    """What a person says about a deployment, before it is checked and stored."""

    target: GGUFFile
    draft: GGUFFile | None
    method: str
    command: str
    k: int | None = None
    flags: str = ""
    host: str = ""
    url: str = ""
    deployed_at: datetime | None = None
    run: BenchmarkRun | None = None


def check_spec(spec: DeploymentSpec) -> None:
    if not known_method(spec.method):
        chains = "or a chain such as ngram-mod+draft-simple"
        raise DeploymentError(f"method {spec.method!r}: expected one of {', '.join(SPEC_TYPES)}, {chains}")
    if spec.draft is None and uses_draft_file(spec.method):
        raise DeploymentError(
            f"method {spec.method} needs a draft (--draft); without one use none, draft-mtp "
            f"or an n-gram method ({', '.join(NGRAM_METHODS)})"
        )
    if spec.draft is not None and spec.method in DRAFTLESS:
        raise DeploymentError(f"method {spec.method} uses no draft model: leave the draft out")
    if spec.k is not None and not 1 <= spec.k <= 1024:
        raise DeploymentError(f"K={spec.k}: expected 1 to 1024 draft tokens per step")
    command = spec.command.strip()
    if not command:
        raise DeploymentError("the llama-server command is required (as it is run, word for word)")
    if len(command) > COMMAND_MAX_CHARS or "\x00" in command:
        raise DeploymentError(f"the command is at most {COMMAND_MAX_CHARS:,} characters of text")
    if len(spec.flags) > 1000 or len(spec.host) > 255:
        raise DeploymentError("flags are at most 1,000 characters and the host at most 255")
    if spec.url:
        try:
            validate_url(spec.url)
        except ScrapeError as exc:
            raise DeploymentError(str(exc)) from None
        if len(spec.url) > 500:
            raise DeploymentError("the URL is at most 500 characters")


def record(spec: DeploymentSpec, *, user=None, author_name: str = "") -> Deployment:
    """Store a deployment. ``user`` None means the command line (trusted); a web user needs an
    account, and staff to set a URL."""
    if user is not None:
        if not may_record(user):
            raise DeploymentError("recording a deployment needs an account")
        if spec.url and not may_set_url(user):
            raise DeploymentError("only staff may give a deployment's URL (the server fetches it)")
        author_name = user.get_username()
    check_spec(spec)
    check_run(spec)
    return Deployment.objects.create(
        target=spec.target,
        draft=spec.draft,
        pair=deployment_pair(spec.target, spec.draft) if spec.draft or spec.method != "none" else None,
        run=spec.run,
        method=spec.method,
        k=spec.k,
        flags=spec.flags.strip(),
        command=spec.command.strip(),
        host=spec.host.strip(),
        url=spec.url.strip(),
        created_by=user,
        author_name=(author_name or "unknown")[:150],
        deployed_at=spec.deployed_at or timezone.now(),
    )


def check_run(spec: DeploymentSpec) -> None:
    """A run stands for a deployment only when it measured the deployment's own models: its soak and figures are
    recorded on the run's pair, so another pair's run would put them there."""
    run = spec.run
    if run is None:
        return
    # A draftless method measured in a run ran on the run's target alone: only the target must be the same model.
    same_target = run.measured_target.model.base_id == spec.target.model.base_id
    same_draft = spec.draft is None or run.measured_draft.model.base_id == spec.draft.model.base_id
    if not (same_target and same_draft):
        raise DeploymentError(f"run {run.pk} measured other models than this deployment's: leave it out")


def deployment_pair(target: GGUFFile, draft: GGUFFile | None) -> Pair | None:
    """The pair a deployment belongs to: its two models', or the target's own pair when it runs without a draft
    (n-gram methods, its own MTP heads: what such a soak measures is recorded there)."""
    if draft is None:
        return Pair.objects.filter(as_target(target), as_draft(target)).first() or pair_for(target, target)
    return Pair.objects.filter(as_target(target), as_draft(draft)).first()


def retire(d: Deployment, *, user=None, at: datetime | None = None) -> Deployment:
    if user is not None and not may_retire(user, d):
        raise DeploymentError("only who recorded the deployment, or staff, may retire it")
    if d.retired_at is not None:
        raise DeploymentError(f"deployment {d.pk} was already retired on {d.retired_at:%Y-%m-%d %H:%M} UTC")
    d.retired_at = at or timezone.now()
    d.save(update_fields=["retired_at"])
    return d


K_FLAGS = ("--spec-draft-n-max", "--draft-max", "--draft")  # a draft model's (and MTP heads') K, newest first
P_MIN_FLAGS = ("--spec-draft-p-min", "--draft-p-min")


def _flag_value(words: list[str], *flags: str) -> str | None:
    for flag in flags:
        if flag in words[:-1]:
            return words[words.index(flag) + 1]
    return None


def _int_or_none(value) -> int | None:
    return int(value) if isinstance(value, int) or (isinstance(value, str) and value.isdigit()) else None


def _setting_from_command(command: str) -> tuple[str, int | None, float | None]:
    """Method, K and p-min as the command gives them (for runs stored without a recommendation)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return "none", None, None
    method = _flag_value(words, "--spec-type")
    if method == "none":
        return "none", None, None
    if method and "," in method:  # llama.cpp's comma list: specreg's chain name
        method = chain_of(method.split(","))
    if method in NGRAM_SWEEP:  # n-gram methods size their drafts with their own option, not K's
        return method, _int_or_none(_flag_value(words, NGRAM_SWEEP[method][0])), None
    if method == "ngram-cache":
        return method, NGRAM_CACHE_DRAFT, None
    k = _int_or_none(_flag_value(words, *K_FLAGS))
    try:
        p_min = float(_flag_value(words, *P_MIN_FLAGS) or "")
    except ValueError:
        p_min = None
    if method in SPEC_TYPES or known_method(method or ""):
        return method or "none", k, p_min
    # Builds before --spec-type speculate with a draft model whenever K is given.
    return ("draft-simple", k, p_min) if k is not None else ("none", None, None)


def recommendation_of(run: BenchmarkRun) -> dict | None:
    """The recommendation whose setting the run's server command deploys (runner.runs.store: the content type
    in ``deploy_for``, else the fastest that speculates, as store picks it)."""
    summary = run.summary if isinstance(run.summary, dict) else {}
    recs = [r for r in summary.get("recommendations") or [] if isinstance(r, dict)]
    chosen = next((r for r in recs if r.get("content_type") == summary.get("deploy_for")), None)
    return chosen or max(recs, key=lambda r: (r.get("k") is not None, r.get("speedup") or 0), default=None)


def initial_from_run(run: BenchmarkRun) -> dict:
    """A deployment form filled in from a run's recommendation: its method, K, p-min and options, and the
    command it wrote; parsed from the command when the run stored no recommendation."""
    pair = run.pair
    rec = recommendation_of(run)
    flags: list[str] = []
    if rec is not None:
        k = _int_or_none(rec.get("k"))
        method = (rec.get("method") or "draft-simple") if k is not None else "none"  # older runs: no method
        p_min = rec.get("p_min")
        for option in rec.get("options") or ():
            if run.origin_installation and not own_option(method, option):
                continue  # another installation's recommendation pre-fills only its method's own options
            flags += [str(word) for word in option]
    else:
        method, k, p_min = _setting_from_command(shown_command(run)[0])
    if isinstance(p_min, (int, float)):
        flags[:0] = ["--spec-draft-p-min", f"{p_min:g}"]
    return {
        "target": pair.target.pk,
        "draft": pair.draft.pk if uses_draft_file(method) else None,
        "method": method,
        "k": k,
        "flags": shlex.join(flags),
        "command": shown_command(run)[0],
        "run": run.pk,
    }


def initial_from_pair(pair: Pair, command: str, k: int | None) -> dict:
    method = pair.result.get("method") or "draft-simple"
    return {
        "target": pair.target.pk,
        "draft": pair.draft.pk if k else None,
        "method": method if k else "none",
        "k": k,
        "command": command,
    }


def deployments_of(*, pair: Pair | None = None, file_ids: list[int] | None = None) -> QuerySet[Deployment]:
    """A pair's deployments (with its target and draft), or those using any of these files; active first."""
    qs = Deployment.objects.select_related("target__model", "draft__model")
    if pair is not None:
        # The pair's own, and any deployment of a quant of the same two models (recorded before the pair was).
        same = Q(target__model__base=pair.target_base_id, draft__model__base=pair.draft_base_id)
        qs = qs.filter(Q(pair=pair) | (same if pair.target_base_id else Q(target=pair.target, draft=pair.draft)))
    if file_ids is not None:
        qs = qs.filter(Q(target_id__in=file_ids) | Q(draft_id__in=file_ids))
    return qs.order_by(F("retired_at").desc(nulls_first=True), "-deployed_at", "-pk")


def measured_reference(d: Deployment, figures: dict[int, dict[str, list[Figure]]] | None = None) -> Figure | None:
    """The measured figure a deployment should be compared with: its pair at its K (its run's first).
    ``figures``: figures_for of many deployments' pairs, read once for a list rather than once each."""
    if d.pair_id is None or d.k is None:
        return None
    if figures is None or d.pair_id not in figures:
        figures = figures_for([d.pair_id])
    measured = [f for f in figures[d.pair_id]["measured"] if f.k == d.k and f.speedup is not None]
    if d.run_id is not None:
        measured = [f for f in measured if f.obj.run_id == d.run_id] or measured
    return max(measured, key=lambda f: f.speedup or 0.0, default=None)  # every one has a speedup
