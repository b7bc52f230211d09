"""Merging a knowledge base from another installation (or from this one) into this installation.

Everything happens in one transaction: a file that is malformed anywhere, even in its last record,
changes nothing and is refused with one line naming what is wrong. Files are registered through the
same code as ours (``registration.register``), so pairs and verdicts follow this installation's
pinned rules; runs and reported results are kept with the installation and id they came with, which
is how a second import of the same file finds them and adds nothing. Figures that disagree with ours
are never merged into ours: both stay, each with its provenance.
"""
from __future__ import annotations

import base64
import binascii
import json
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone
from pydantic import ValidationError

from inspector.hub_names import hf_source
from inspector.info import ModelInfo
from inspector.tokens import TokenTable as Tokens
from inspector.tokens import vocab_key

from ..cache_keys import bump_generation
from ..jsonsafe import json_safe
from ..models import BenchmarkResult, BenchmarkRun, GGUFFile, Pair, ReportedResult
from ..pairing import pair_for
from ..registration import register
from ..results import refresh_best
from . import schema
from .sections import ImportContext, load_sections

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# Fields of a stored inspection that say how it was read, not what the file holds.
_HOW_READ = ("source", "bytes_fetched")


class KBError(Exception):
    """Why a knowledge base cannot be imported, as one line."""


@dataclass
class ImportReport:
    source_installation: str
    counts: dict[str, int] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)  # conflicts and verdicts that differ, one line each


def _reject_constant(name: str) -> Any:
    raise KBError(f"the file holds {name}, which is not a JSON number")


def parse(raw: bytes) -> dict[str, Any]:
    """The file's JSON, checked for its format and major version before anything else."""
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError as exc:
        raise KBError(f"not UTF-8 text (byte {exc.start})") from None
    except RecursionError:
        raise KBError("not a knowledge base: JSON nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, and integers too long to convert
        raise KBError(f"not valid JSON: {str(exc).splitlines()[0][:200]}") from None
    if not isinstance(data, dict) or data.get("format") != schema.FORMAT:
        raise KBError(f"not a specreg knowledge base (no \"format\": \"{schema.FORMAT}\")")
    major = schema.major_of(data.get("schema_version"))
    if major is None:
        raise KBError("schema_version must be a string MAJOR.MINOR, such as \"1.0\"")
    if major != schema.SCHEMA_MAJOR:
        raise KBError(f"schema version {data['schema_version'][:20]} is not supported: this specreg reads "
                      f"{schema.SCHEMA_MAJOR}.x (export it with a specreg that writes {schema.SCHEMA_MAJOR}.x)")
    _check_integers(data)
    return json_safe(data)  # PostgreSQL refuses NUL inside text


def _check_integers(data: Any) -> None:
    # Every integer must fit the database's 64-bit columns and JSON's; iterative, as files nest.
    stack = [data]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, int) and not isinstance(v, bool) and not INT64_MIN <= v <= INT64_MAX:
            raise KBError(f"the integer {str(v)[:30]}… does not fit in 64 bits")


def validate(data: dict[str, Any]) -> schema.Document:
    try:
        return schema.Document.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        more = f" (and {exc.error_count() - 1} more problems)" if exc.error_count() > 1 else ""
        raise KBError(f"{where[:200]}: {err['msg'][:200]}{more}") from None


def read(path: str | os.PathLike) -> schema.Document:
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > settings.SPECREG_KB_MAX_BYTES:
            raise KBError(f"{p}: {size:,} bytes, more than SPECREG_KB_MAX_BYTES ({settings.SPECREG_KB_MAX_BYTES:,})")
        with p.open("rb") as f:
            raw = f.read(settings.SPECREG_KB_MAX_BYTES + 1)  # a file growing meanwhile is still capped
    except OSError as exc:
        raise KBError(f"{p}: {exc.strerror or exc}") from None
    if len(raw) > settings.SPECREG_KB_MAX_BYTES:
        raise KBError(f"{p}: more than SPECREG_KB_MAX_BYTES ({settings.SPECREG_KB_MAX_BYTES:,})")
    return validate(parse(raw))


def _tokens(t: schema.TokenTableIn) -> Tokens:
    try:
        blob = base64.b64decode(t.blob, validate=True)
    except (binascii.Error, ValueError):
        raise KBError(f"token table {t.sha256[:12]}: blob is not base64") from None
    if t.count * 8 > len(blob):
        raise KBError(f"token table {t.sha256[:12]}: {len(blob):,} bytes cannot hold {t.count:,} tokens")
    try:
        tokens = Tokens(blob, t.count)
    except (ValueError, struct.error):
        raise KBError(f"token table {t.sha256[:12]}: its entries do not fill the blob exactly") from None
    if tokens.sha256 != t.sha256:
        raise KBError(f"token table {t.sha256[:12]}: its content hashes to {tokens.sha256[:12]}")
    return tokens


def _info(f: schema.FileIn, tokens: Tokens | None) -> ModelInfo:
    try:
        checked = schema.ModelInfoIn.model_validate(f.info).model_dump()
        info = ModelInfo.from_dict(checked, tokens=tokens)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise KBError(f"file {f.source[:200]}: info.{'.'.join(map(str, err['loc']))[:100]}: {err['msg'][:200]}") from None
    except (TypeError, ValueError) as exc:
        raise KBError(f"file {f.source[:200]}: info is not a specreg inspection ({str(exc)[:200]})") from None
    tok = info.tokenizer
    # The tokenizer summary must describe the table it comes with: pairing trusts both.
    if tok is not None and tokens is not None:
        if tok.n_tokens != tokens.count or (tok.table_sha256 and tok.table_sha256 != tokens.sha256):
            raise KBError(f"file {f.source[:200]}: its tokenizer does not describe its token table")
        if tok.vocab_key != vocab_key(tok.vocab_type, tokens):
            raise KBError(f"file {f.source[:200]}: its vocabulary key does not match its token table")
    elif tok is not None and tok.table_sha256:
        raise KBError(f"file {f.source[:200]}: its token table {tok.table_sha256[:12]} is not in the file")
    return info


def _comparable(info: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in info.items() if k not in _HOW_READ}, sort_keys=True)


class _Importer:
    def __init__(self, doc: schema.Document) -> None:
        self.doc = doc
        self.here = settings.SPECREG_INSTALLATION_ID
        self.now = timezone.now()
        self.files: dict[str, GGUFFile] = {}  # exported source → file here
        self.pairs: dict[tuple[str, str], Pair] = {}
        self.touched: set[int] = set()  # pairs whose best result may have changed
        self.ctx = ImportContext(self.here, doc.installation.id, self.now, self.file, self.pair)

    def file(self, source: str) -> GGUFFile:
        f = self.files.get(source)
        if f is None:
            raise KBError(f"{source[:200]}: not among the file's files")
        return f

    def pair(self, target: str, draft: str) -> Pair:
        key = (target, draft)
        if key not in self.pairs:
            self.pairs[key] = pair_for(self.file(target), self.file(draft))
        return self.pairs[key]

    def run(self) -> ImportReport:
        tables = {t.sha256: _tokens(t) for t in self.doc.token_tables}
        for f in self.doc.files:
            if f.token_table is not None and f.token_table not in tables:
                raise KBError(f"file {f.source[:200]}: token table {f.token_table[:12]} is not in the file")
            self._file(f, _info(f, tables.get(f.token_table) if f.token_table else None))
        for p in self.doc.pairs:
            self._pair(p)
        for r in self.doc.runs:
            self._run(r)
        for r in self.doc.reported:
            self._reported(r)
        sections = load_sections()
        for name, items in self.doc.sections.items():
            section = sections.get(name)
            if section is None:
                self.ctx.messages.append(f"section {name[:64]!r} skipped: this installation does not keep such records")
                continue
            section.import_records(self.ctx, items)
        for pk in sorted(self.touched):
            refresh_best(Pair.objects.get(pk=pk))
        bump_generation()
        transaction.on_commit(bump_generation)
        return ImportReport(self.doc.installation.id, self.ctx.counts, self.ctx.messages)

    def _file(self, f: schema.FileIn, info: ModelInfo) -> None:
        theirs = _comparable(f.info)
        source = f.source
        for attempt in range(3):
            here = GGUFFile.objects.filter(source=source).first()
            if here is None:
                break
            if _comparable(here.info) == theirs:
                self.files[f.source] = here
                self.ctx.count("files already here")
                return
            # The same name with another inspection (another revision, another file at that path):
            # keep both, theirs under a name that says which revision or installation it is.
            source = self._other_name(f, attempt)
        else:
            raise KBError(f"file {f.source[:200]}: no free name for its second inspection")
        if source != f.source:
            self.ctx.messages.append(f"file {f.source} differs from the one registered here under that name: "
                                     f"kept both, theirs as {source}")
            self.ctx.count("files kept beside ours")
        reg = register(info, source=source, repo=f.repo, revision=f.revision, path=f.path, commit=f.commit,
                       etag=f.etag, size=f.size)
        origin = "" if f.installation == self.here else f.installation
        GGUFFile.objects.filter(pk=reg.file.pk).update(inspected_at=f.inspected_at, origin_installation=origin)
        self.files[f.source] = reg.file
        self.ctx.count("files added")

    def _other_name(self, f: schema.FileIn, attempt: int) -> str:
        if attempt == 0 and f.source.startswith("hf://") and f.commit and f.repo and f.path:
            return hf_source(f.repo, f.commit, f.path)  # a real name for exactly that revision
        return f"{f.source}#{f.installation}"[:1024] if attempt < 2 else f.source

    def _pair(self, p: schema.PairIn) -> None:
        ours = self.pair(p.target, p.draft)
        if (ours.compatible, ours.failed_rule) != (p.compatible, p.failed_rule):
            said = "compatible" if p.compatible else f"incompatible ({p.failed_rule})"
            now = "compatible" if ours.compatible else f"incompatible ({ours.failed_rule})"
            self.ctx.messages.append(f"pair {p.draft} → {p.target}: they said {said} under {p.rules_from or '?'}, "
                                     f"the rules here ({ours.rules_from}) say {now}")
            self.ctx.count("verdicts that differ")

    def _run(self, r: schema.RunIn) -> None:
        if self.ctx.already_here(BenchmarkRun, r.installation, r.id):
            self.ctx.count("runs already here")
            return
        pair = self.pair(r.target, r.draft)
        run = BenchmarkRun.objects.create(
            pair=pair, status=r.status, params=r.params, queue="", hardware=r.hardware,
            hardware_class=r.hardware_class, build=r.build, summary=r.summary, report_md=r.report_md,
            server_command=r.server_command, systemd_unit=r.systemd_unit, error=r.error, progress=1.0,
            started_at=r.started_at, finished_at=r.finished_at, origin_installation=r.installation,
            origin_id=r.id, origin_author=r.author, imported_at=self.now)
        BenchmarkRun.objects.filter(pk=run.pk).update(created_at=r.created_at)
        rows = []
        for c in r.results:
            values = c.model_dump(exclude={"created_at", "method"})
            values["method"] = c.method or "draft-simple"  # older exports name none: a draft model
            rows.append(BenchmarkResult(run=run, pair=pair, **values))
        BenchmarkResult.objects.bulk_create(rows)
        BenchmarkResult.objects.filter(run=run).update(created_at=r.created_at)
        self.touched.add(pair.pk)
        self.ctx.count("runs added")
        self.ctx.count("measured results added", len(rows))

    def _reported(self, r: schema.ReportedIn) -> None:
        if self.ctx.already_here(ReportedResult, r.installation, r.id):
            self.ctx.count("reported results already here")
            return
        pair = self.pair(r.target, r.draft)
        figures = r.model_dump(include={"k", "acceptance", "speedup", "tokens_per_second", "baseline_tokens_per_second",
                                        "content_type", "hardware", "llama_cpp_build"})
        same_cell = ReportedResult.objects.filter(pair=pair, k=r.k, content_type=r.content_type, hardware=r.hardware,
                                                  llama_cpp_build=r.llama_cpp_build)
        if same_cell.exists() and not same_cell.filter(speedup=r.speedup, acceptance=r.acceptance).exists():
            self.ctx.messages.append(f"reported K={r.k} {r.content_type or ''} for {r.draft} → {r.target}: their "
                                     f"figures differ from those here; kept both, theirs from installation {r.installation}")
            self.ctx.count("reported results kept beside ours")
        row = ReportedResult.objects.create(
            pair=pair, source_url=r.source_url, citation=r.citation, notes=r.notes,
            origin_installation=r.installation, origin_id=r.id,
            origin_author=r.author, imported_at=self.now, **figures)
        if r.created_at:
            ReportedResult.objects.filter(pk=row.pk).update(created_at=r.created_at)
        self.touched.add(pair.pk)
        self.ctx.count("reported results added")


def import_document(doc: schema.Document) -> ImportReport:
    try:
        with transaction.atomic():
            return _Importer(doc).run()
    except DatabaseError as exc:
        raise KBError(f"the database refused a record: {str(exc).splitlines()[0][:200]}") from None


def import_kb(path: str | os.PathLike) -> ImportReport:
    """Read, check and merge the knowledge base at ``path``; nothing changes unless all of it goes in."""
    return import_document(read(path))
