"""The team's records in a shareable knowledge base (registry.kb): notes, deployments and observed telemetry.

One export and one import function per section, registered on import (registry.kb.sections finds
this module like ``admin.py``). Records keep their provenance (``registry.models.Provenance``): the
installation that wrote them and their id there, so a second import adds nothing. Imported
deployments come without their server URL: the beat scrapes every active deployment's URL, and an
address from someone else's file is not this installation's to fetch (their observed samples come
with them instead).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Annotated, Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from registry.kb.importer import KBError
from registry.kb.schema import INT32, INT64, InstallationId, Source, Text150, Text200, Text255, Text500, Text1000
from registry.kb.sections import ExportContext, ImportContext, Section, register_section
from registry.models import BenchmarkRun, Model
from registry.team import deployments as deps
from registry.team.models import NOTE_MAX_CHARS, Deployment, Note, NoteVersion, TelemetrySample
from registry.team.telemetry import PUBLIC_GAP, reason_to_store

MAX_NOTES = 1_000_000
MAX_VERSIONS = 1_000
MAX_DEPLOYMENTS = 100_000
MAX_SAMPLES = 1_000_000  # a year of scrapes every 5 minutes is 105,120
COUNTERS = (
    "draft_tokens_total",
    "accepted_tokens_total",
    "drafts_total",
    "tokens_predicted_total",
    "tokens_predicted_seconds_total",
    "draft_tokens",
    "accepted_tokens",
    "drafts",
    "tokens_predicted",
    "tokens_predicted_seconds",
)


class _Base(BaseModel):
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)


class RunRef(_Base):
    installation: InstallationId
    id: Annotated[int, Field(ge=1, le=INT64)]


class ModelRef(_Base):
    repo: Text200 = ""
    name: Annotated[str, StringConstraints(min_length=1, max_length=300)]


NoteBody = Annotated[str, StringConstraints(max_length=NOTE_MAX_CHARS)]


class VersionIn(_Base):
    body: NoteBody
    author_name: Text150 = ""
    written_at: AwareDatetime
    replaced_at: AwareDatetime | None = None


class NoteIn(_Base):
    installation: InstallationId
    id: Annotated[int, Field(ge=1, le=INT64)]
    author: Text150 = ""
    model: ModelRef | None = None
    file: Source | None = None
    pair: Annotated[list[Source], Field(min_length=2, max_length=2)] | None = None  # [target, draft]
    run: RunRef | None = None
    body: NoteBody
    created_at: AwareDatetime
    updated_at: AwareDatetime | None = None
    hidden: bool = False
    hidden_at: AwareDatetime | None = None
    versions: Annotated[list[VersionIn], Field(max_length=MAX_VERSIONS)] = []


class SampleIn(_Base):
    scraped_at: AwareDatetime
    ok: bool
    error: Text500 = ""
    reset: bool = False
    draft_tokens_total: float | None = None
    accepted_tokens_total: float | None = None
    drafts_total: float | None = None
    tokens_predicted_total: float | None = None
    tokens_predicted_seconds_total: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    drafts: float | None = None
    tokens_predicted: float | None = None
    tokens_predicted_seconds: float | None = None


class DeploymentIn(_Base):
    installation: InstallationId
    id: Annotated[int, Field(ge=1, le=INT64)]
    author: Text150 = ""
    target: Source
    draft: Source | None = None
    run: RunRef | None = None
    method: Annotated[str, StringConstraints(min_length=1, max_length=32)]
    k: Annotated[int | None, Field(ge=0, le=INT32)] = None
    flags: Text1000 = ""
    command: Annotated[str, StringConstraints(min_length=1, max_length=100_000)]
    host: Text255 = ""
    deployed_at: AwareDatetime
    retired_at: AwareDatetime | None = None
    samples: Annotated[list[SampleIn], Field(max_length=MAX_SAMPLES)] = []


def _records(schema: type[_Base], items: Iterable[Any], section: str, bound: int) -> Iterator[Any]:
    """Each record checked as it comes: the importer streams a section, one record in memory at a time
    (a refusal anywhere still changes nothing: the import is one transaction)."""
    for i, item in enumerate(items):
        if i >= bound:
            raise KBError(f"sections.{section}: more than {bound:,} records")
        try:
            yield schema.model_validate(item)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in (i, *err["loc"]))
            raise KBError(f"sections.{section}: {where[:200]}: {err['msg'][:200]}") from None


def _run_ref(ctx: ExportContext, run: BenchmarkRun | None) -> dict[str, Any] | None:
    if run is None:
        return None
    p = ctx.provenance(run)
    return {"installation": p["installation"], "id": p["id"]}


def _local_run(ctx: ImportContext, ref: RunRef | None) -> BenchmarkRun | None:
    if ref is None:
        return None
    run = None
    if ref.installation == ctx.installation:
        run = BenchmarkRun.objects.filter(pk=ref.id, origin_installation="").first()
    run = run or BenchmarkRun.objects.filter(origin_installation=ref.installation, origin_id=ref.id).first()
    if run is None:
        raise KBError(f"run {ref.id} of installation {ref.installation} is not in the file")
    return run


def export_notes(ctx: ExportContext) -> list[dict[str, Any]]:
    out = []
    for n in (
        Note.objects.select_related("model", "file", "pair__target", "pair__draft", "run", "author")
        .defer("file__info", "pair__target__info", "pair__draft__info")
        .prefetch_related("versions")
        .order_by("pk")
    ):
        out.append(
            {
                **ctx.provenance(n, n.author_name),
                "body": n.body,
                "created_at": n.created_at.isoformat(),
                "updated_at": n.updated_at.isoformat() if n.updated_at else None,
                "hidden": n.hidden,
                "hidden_at": n.hidden_at.isoformat() if n.hidden_at else None,
                "model": {"repo": n.model.repo, "name": n.model.name} if n.model else None,
                "file": n.file.source if n.file else None,
                "pair": [n.pair.target.source, n.pair.draft.source] if n.pair else None,
                "run": _run_ref(ctx, n.run),
                "versions": [
                    {
                        "body": v.body,
                        "author_name": v.author_name,
                        "written_at": v.written_at.isoformat(),
                        "replaced_at": v.replaced_at.isoformat() if v.replaced_at else None,
                    }
                    for v in n.versions.all()
                ],
            }
        )
    return out


def import_notes(ctx: ImportContext, items: Iterable[Any]) -> None:
    for r in _records(NoteIn, items, "notes", MAX_NOTES):
        if ctx.already_here(Note, r.installation, r.id):
            ctx.count("notes already here")
            continue
        subjects = [s for s in (r.model, r.file, r.pair, r.run) if s is not None]
        if len(subjects) != 1:
            raise KBError(f"sections.notes: note {r.id} of {r.installation} is not on exactly one thing")
        subject: dict[str, Any] = {}
        if r.model is not None:
            model = Model.objects.filter(repo=r.model.repo, name=r.model.name).first()
            if model is None:
                raise KBError(f"sections.notes: model {r.model.name[:100]!r} is not in the file")
            subject["model"] = model
        elif r.file is not None:
            subject["file"] = ctx.file(r.file)
        elif r.pair is not None:
            subject["pair"] = ctx.pair(r.pair[0], r.pair[1])
        else:
            subject["run"] = _local_run(ctx, r.run)
        note = Note.objects.create(
            body=r.body,
            author_name=r.author or "someone",
            hidden=r.hidden,
            hidden_at=r.hidden_at,
            origin_installation=r.installation,
            origin_id=r.id,
            origin_author=r.author,
            imported_at=ctx.now,
            **subject,
        )
        Note.objects.filter(pk=note.pk).update(created_at=r.created_at, updated_at=r.updated_at or r.created_at)
        versions = [
            NoteVersion(note=note, body=v.body, author_name=v.author_name, written_at=v.written_at) for v in r.versions
        ]
        NoteVersion.objects.bulk_create(versions)
        for v, row in zip(r.versions, versions, strict=True):
            if v.replaced_at:
                NoteVersion.objects.filter(pk=row.pk).update(replaced_at=v.replaced_at)
        ctx.count("notes added")


def export_deployments(ctx: ExportContext) -> list[dict[str, Any]]:
    out = []
    for d in (
        Deployment.objects.select_related("target", "draft", "run")
        .defer("target__info", "draft__info")
        .prefetch_related("samples")
        .order_by("pk")
    ):
        out.append(
            {
                **ctx.provenance(d, d.author_name),
                "target": d.target.source,
                "draft": d.draft.source if d.draft else None,
                "run": _run_ref(ctx, d.run),
                "method": d.method,
                "k": d.k,
                "flags": d.flags,
                "command": d.command,
                "host": d.host,
                "deployed_at": d.deployed_at.isoformat(),
                "retired_at": d.retired_at.isoformat() if d.retired_at else None,
                # The URL stays home: it names a server inside this team's network. So do the reasons scrapes
                # failed: a file goes to people outside staff, who read one message for every gap.
                "samples": [
                    {
                        "scraped_at": s.scraped_at.isoformat(),
                        "ok": s.ok,
                        "error": "" if s.ok else PUBLIC_GAP,
                        "reset": s.reset,
                        **{c: getattr(s, c) for c in COUNTERS},
                    }
                    for s in d.samples.all()
                ],
            }
        )
    return out


def import_deployments(ctx: ImportContext, items: Iterable[Any]) -> None:
    for r in _records(DeploymentIn, items, "deployments", MAX_DEPLOYMENTS):
        if ctx.already_here(Deployment, r.installation, r.id):
            ctx.count("deployments already here")
            continue
        target = ctx.file(r.target)
        draft = ctx.file(r.draft) if r.draft else None
        try:  # the rules of the form and the API: a known method, a draft where it needs one, K 1–1024, …
            deps.check_spec(
                deps.DeploymentSpec(
                    target=target, draft=draft, method=r.method, command=r.command, k=r.k, flags=r.flags, host=r.host
                )
            )
        except deps.DeploymentError as exc:
            raise KBError(f"sections.deployments: deployment {r.id} of {r.installation}: {str(exc)[:200]}") from None
        d = Deployment.objects.create(
            target=target,
            draft=draft,
            pair=ctx.pair(r.target, r.draft) if r.draft else None,
            run=_local_run(ctx, r.run),
            method=r.method,
            k=r.k,
            flags=r.flags,
            command=r.command,
            host=r.host,
            url="",
            author_name=r.author or "someone",
            deployed_at=r.deployed_at,
            retired_at=r.retired_at,
            origin_installation=r.installation,
            origin_id=r.id,
            origin_author=r.author,
            imported_at=ctx.now,
        )
        # Errors as record() keeps them: a known reason, never text a server (or the file) made up.
        TelemetrySample.objects.bulk_create(
            [
                TelemetrySample(deployment=d, **{**s.model_dump(), "error": "" if s.ok else reason_to_store(s.error)})
                for s in r.samples
            ],
            batch_size=1000,
        )
        ctx.count("deployments added")
        ctx.count("observed samples added", len(r.samples))


register_section(Section("notes", export_notes, import_notes))
register_section(Section("deployments", export_deployments, import_deployments))
