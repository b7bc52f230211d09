"""The pair page's "Adapt the draft" job: write the adapted draft into the model folder and register it.

A signed-in user asks on an adaptable pair's page; a worker downloads the draft (whole: its tensor data is copied)
through the runner's budgeted download, reads only the target's header, writes the adapted copy with
inspector.adapt (the rules of ``manage.py adapt_draft``) into ``SPECREG_MODEL_DIR/adapted/`` (never a path the web
names), within the model folder's disk budget, and registers it. Registered, it is a base model of its own ("adapted
from …", registry.catalog.bases) whose pair with the target is an ordinary pair: predicted, benchmarked, deployed.

The download belongs to the runner (the registry never imports it): the worker's task passes it in as ``fetch``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from django.conf import settings

from inspector.adapt import AdaptError, NotAdaptable, adapt
from inspector.compat import check_pair
from inspector.hf_spec import parse_hf_spec
from inspector.hub_names import hf_source
from registry.catalog.adaptable import decide
from registry.catalog.local_files import LocalFileError, register_local
from registry.catalog.stored import load_info
from registry.catalog.stored_files import ADAPTED_DIR, quota_problem, record
from registry.model_folder import model_dir, room_problem
from registry.models import AdaptCheck, GGUFFile, Pair, StoredFile


class Fetch(Protocol):
    """A draft's local paths, downloading what is missing (charged to ``owner``'s quota). Raises AdaptJobError."""

    def __call__(self, source: str, size: int | None, sha256: str, owner: Any = None) -> list[Path]: ...


Say = Callable[[str, str], None]
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class AdaptJobError(Exception):
    """The adaptation cannot be made; one line for the job's page."""


def adapted_dir() -> Path:
    return model_dir() / ADAPTED_DIR


def output_path(target: GGUFFile, draft: GGUFFile) -> Path:
    """Where the adapted copy goes: named from the two files (their registry ids keep two repositories' files of one
    name apart), inside the model folder whatever the names hold."""

    def stem(f: GGUFFile) -> str:
        return _UNSAFE.sub("-", Path(f.path).stem)[:80].strip("-.") or "model"

    return adapted_dir() / f"{stem(draft)}-for-{stem(target)}-{draft.pk}-{target.pk}.gguf"


def run_adapt_job(params: dict[str, Any], fetch: Fetch, say: Say, owner: Any = None) -> dict[str, Any]:
    """The job: the adapted draft registered, and its pair with the target. Raises AdaptJobError (one line).
    ``owner``: who asked (HubJob.requested_by): the adapted file and the draft's download are theirs, within their
    quota (registry.catalog.stored_files)."""
    target = GGUFFile.objects.filter(pk=int(params.get("target") or 0)).first()
    draft = GGUFFile.objects.filter(pk=int(params.get("draft") or 0)).first()
    if target is None or draft is None:
        raise AdaptJobError("the target or the draft is no longer registered")
    check = decide(target, draft)  # decided again now: the files may have changed since the page was shown
    if check.state != AdaptCheck.ADAPTABLE:
        why = f" ({check.rule}: {check.detail})" if check.rule else ""
        raise AdaptJobError(f"{draft.source} is no longer adaptable to {target.source}{why}")
    out = output_path(target, draft)
    wrote = not out.is_file()
    if wrote:
        _write(target, draft, out, fetch, say, owner)
    else:
        say("info", f"{out.name} was adapted before: registered again, not written again")
    try:
        made = register_local(out, made_by=(draft.pk, target.pk)).file
    except LocalFileError as exc:
        raise AdaptJobError(f"the adapted draft was written but could not be registered: {exc}") from None
    record(out, StoredFile.ADAPTED, owner if wrote else None, made)  # the writer owns it (set once); used now
    pair = Pair.objects.filter(target_base=target.model.base, draft_base=made.model.base).first()
    # The verdict of the two files themselves, as check_pair gives it: the pair row may show other quants, or be
    # unlisted, and must not make a good adaptation read as a failure.
    result = check_pair(load_info(target), load_info(made))
    verdict = "compatible" if result.compatible else f"not compatible ({result.failed_rule})"
    say("success", f"Adapted {draft.filename} for {target.filename}: registered as {made.filename}, {verdict}.")
    return {"file": made.pk, "pair": pair.pk if pair is not None else None, "path": out.name}


def _write(target: GGUFFile, draft: GGUFFile, out: Path, fetch: Fetch, say: Say, owner: Any) -> None:
    """The draft fetched whole and its adapted copy written, within the model folder's budget and the owner's quota;
    nothing half-written stays (inspector.adapt writes to a temporary name and renames)."""
    if draft.split_count > 1:
        raise AdaptJobError(f"{draft.source}: a draft split into {draft.split_count} files is not adapted here")
    if draft.size and (why := quota_problem(owner, draft.size)):  # before fetching: nothing written
        raise AdaptJobError(f"the adapted draft {why}")
    say("info", f"fetching {draft.source}")
    paths = fetch(draft.source, draft.size, draft.content_sha256, owner=owner)
    need = paths[0].stat().st_size  # the copy is the draft's size
    if why := room_problem(need) or quota_problem(owner, need):
        raise AdaptJobError(f"the adapted draft {why}")
    adapted_dir().mkdir(parents=True, exist_ok=True)
    say("info", f"writing {out.name}")
    try:
        adapt(judged_source(target), paths[0], out, max_header_bytes=settings.SPECREG_MAX_HEADER_BYTES)
    except (NotAdaptable, AdaptError) as exc:
        raise AdaptJobError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None


def judged_source(target: GGUFFile) -> str:
    """The target as it was judged adaptable: a Hub file read at the commit its registration read, so a header
    changed on the Hub since is never what the adapted file records (a commit the Hub no longer serves fails the
    job in one line: register the target again, and the pair is judged again)."""
    if target.source.startswith("hf://") and target.commit and target.repo and target.path:
        spec = parse_hf_spec(target.source)
        if spec.revision is None or spec.revision != target.commit:
            return hf_source(target.repo, target.commit, target.path)
    return target.source
