"""Merging a knowledge base from another installation (or from this one) into this installation.

The file is streamed (ijson), never held whole: one pass checks its JSON and its outline (header,
nesting depth, how many records each list holds), then one pass per list reads, checks and stores its
records one at a time, in the order they depend on each other (token tables and types, files, pairs, runs,
reported results, other apps' sections), so memory stays at about one record (plus the token tables
files need) whatever the file's size. Everything happens in one transaction: a file that is malformed
anywhere, even in its last record, changes nothing and is refused with one line naming what is wrong.
Sources must be hf:// names or names registered here (a local path only when the operator says so),
methods llama.cpp's known ones, and figures within the forms' bounds. Files are registered through the
same code as ours (``registration.register``), so pairs and verdicts follow this installation's
pinned rules; runs and reported results are kept with the installation and id they came with, which
is how a second import of the same file finds them and adds nothing. Figures that disagree with ours
are never merged into ours: both stay, each with its provenance.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import hashlib
import json
import os
import re
import struct
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import ijson
from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone
from pydantic import BaseModel, ValidationError

from inspector.hf_spec import parse_hf_spec
from inspector.hub_names import hf_source
from inspector.info import ModelInfo
from inspector.sources import SourceError
from inspector.tokens import TokenTable as Tokens
from inspector.tokens import vocab_key
from registry.cache_keys import bump_generation
from registry.catalog.adaptable import decide_again, decide_pending
from registry.catalog.pairing import pair_for
from registry.catalog.registration import register, store_types
from registry.jsonsafe import json_safe
from registry.kb import schema
from registry.kb.sections import ImportContext, load_sections
from registry.models import (
    BenchmarkResult,
    BenchmarkRun,
    GGUFFile,
    Pair,
    PredictedResult,
    ReportedResult,
    StabilityResult,
)
from registry.results.figures import FIGURES, refresh_best, refresh_predicted
from registry.results.recommend import rebuilt_deployment

# Lists whose records are one long string each (a vocabulary's texts or types), bounded by the file's size alone.
_ARRAYS = ("token_tables", "token_types")
# Fields of a stored inspection that say how it was read, not what the file holds.
_HOW_READ = ("source", "bytes_fetched")
# Deeper than any real knowledge base (a deployment's samples sit 6 levels down, a stored inspection
# about as deep), shallow enough that checking and storing a record never recurses far.
MAX_DEPTH = 100
# The top-level lists in the order their records depend on each other, with their record schema and bound.
LISTS: dict[str, tuple[type[BaseModel], int]] = {
    "token_tables": (schema.TokenTableIn, schema.MAX_FILES),
    "token_types": (schema.TokenTypesIn, schema.MAX_FILES),  # 1.4
    "files": (schema.FileIn, schema.MAX_FILES),
    "pairs": (schema.PairIn, schema.MAX_PAIRS),
    "runs": (schema.RunIn, schema.MAX_RUNS),
    "reported": (schema.ReportedIn, schema.MAX_REPORTED),
}
MAX_SECTIONS = 64
_HEADER_EVENTS = 10_000  # the installation object is a few strings: more events than this is not one
_READ_BYTES = 64 * 1024
_NUL = b"\\u0000"
# A second inspection kept beside another under a changed name (_Importer._other_name): SOURCE#INSTALLATION.
_BESIDE = re.compile(r"#[A-Za-z0-9._-]{1,64}$")


def where_from_source(f: schema.FileIn) -> tuple[str, str, str]:
    """A file's repository, revision and path as its source says (the record's own fields are not trusted: download
    lines built from them could point at another repository); a local source has no repository."""
    name = _BESIDE.sub("", f.source)
    if not name.startswith("hf://"):
        return "", "", name
    try:
        spec = parse_hf_spec(name)  # refuses '..', '.', empty and leading '/' components, encoded or not
    except SourceError as exc:
        raise KBError(f"file {str(exc)[:300]}") from None
    return spec.repo_id, spec.revision or "", spec.path


class KBError(Exception):
    """Why a knowledge base cannot be imported, as one line."""


@dataclass
class ImportReport:
    source_installation: str
    counts: dict[str, int] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)  # conflicts and verdicts that differ, one line each


class _Capped:
    """The file as ijson reads it: at most SPECREG_KB_MAX_BYTES (a file growing meanwhile is still capped),
    and, when ``check_utf8``, refused at the first byte that is not UTF-8 (yajl would only say "invalid char")."""

    def __init__(self, f: IO[bytes], cap: int, *, check_utf8: bool) -> None:
        self.f, self.cap, self.read_so_far = f, cap, 0
        self.decoder = codecs.getincrementaldecoder("utf-8")() if check_utf8 else None
        self.has_nul, self._tail = False, b""

    def read(self, n: int = -1) -> bytes:
        chunk = self.f.read(_READ_BYTES if n is None or n < 0 else n)
        if self.decoder is not None:
            try:
                self.decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as exc:
                raise KBError(
                    f"not UTF-8 text (byte {self.read_so_far + exc.start - len(exc.object) + len(chunk)})"
                ) from None
            # A string can hold NUL only through the escape \u0000 (yajl refuses raw control characters):
            # a file without one needs no json_safe copy of every record (the costliest step of an import).
            if not self.has_nul:
                seen = self._tail + chunk
                self.has_nul = _NUL in seen
                self._tail = seen[-(len(_NUL) - 1) :]
        self.read_so_far += len(chunk)
        if self.read_so_far > self.cap:
            raise KBError(f"more than SPECREG_KB_MAX_BYTES ({self.cap:,})")
        return chunk


def _json_error(exc: Exception) -> KBError:
    """One line for yajl's multi-line message (which quotes the file around the error)."""
    text = exc.args[0] if exc.args else str(exc)
    text = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
    lines = text.splitlines() or [""]
    if "integer overflow" in lines[0]:
        return KBError("an integer in the file does not fit in 64 bits")
    if "invalid char" in lines[0] and len(lines) >= 3:
        # The third line's caret points into the second, a copy of the text around the error.
        at = len(lines[2]) - 1
        near = lines[1][max(at - 1, 0) : at + 9]
        for name in ("-Infinity", "Infinity", "NaN"):
            if name in near:
                return KBError(f"the file holds {name}, which is not a JSON number")
    return KBError(f"not valid JSON: {lines[0].strip()[:200]}")


@dataclass
class Outline:
    """What the first pass found: the header's values, and how many records each list and section holds."""

    header: dict[str, Any] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)  # top-level key → "list", "object" or "value"
    counts: dict[str, int] = field(default_factory=dict)  # top-level list → records
    sections: dict[str, int] = field(default_factory=dict)  # section → records, in the file's order
    section_kinds: dict[str, str] = field(default_factory=dict)
    is_object: bool = True
    has_nul: bool = False  # some string holds NUL: records go through json_safe


class RecordBound:
    """One record of a list (a run, a deployment, a soak…) is built whole when imported, in memory several times its
    size: each is bounded, in values (SPECREG_KB_MAX_RECORD_VALUES) and bytes (SPECREG_KB_MAX_RECORD_BYTES;
    token tables and token types, one string each, excepted), and refused in one line as soon as it passes either."""

    def __init__(self) -> None:
        self.values_cap = settings.SPECREG_KB_MAX_RECORD_VALUES
        self.bytes_cap = settings.SPECREG_KB_MAX_RECORD_BYTES
        self.level: int | None = None  # the record's level while inside one
        self.name, self.values, self.start = "", 0, 0
        self.index: dict[str, int] = {}  # records seen per list, for the message

    def event(self, event: str, level: int, top: str, sec: str, kinds: dict[str, str], at: int) -> None:
        opens = event in ("start_map", "start_array")
        if self.level is None:
            in_list = (level == 2 and top in LISTS) or (level == 3 and top == "sections" and kinds.get(sec) == "list")
            if not (opens and in_list):
                return
            self.level, self.name = level, sec if level == 3 else top
            self.index[self.name] = self.index.get(self.name, -1) + 1
            self.values, self.start = 0, at
        self.values += 1
        where = f"{'sections.' if self.level == 3 else ''}{self.name}.{self.index[self.name]}"
        if self.values > self.values_cap:
            raise KBError(f"{where}: one record of more than {self.values_cap:,} values (SPECREG_KB_MAX_RECORD_VALUES)")
        if self.name not in _ARRAYS and at - self.start > self.bytes_cap:
            raise KBError(f"{where}: one record of more than {self.bytes_cap:,} bytes (SPECREG_KB_MAX_RECORD_BYTES)")
        if level == self.level and event in ("end_map", "end_array"):
            self.level = None


def outline(f: IO[bytes], cap: int) -> Outline:
    """One streaming pass over the whole file: valid UTF-8 JSON, no deeper than MAX_DEPTH, no key twice at
    the top or among the sections; the header's values (small) and the lists' lengths. Nothing is built
    but the header, so a refusal costs one read and no memory."""
    walk = _OutlineWalk()
    try:
        reader = _Capped(f, cap, check_utf8=True)
        for event, value in ijson.basic_parse(reader, use_float=True):
            level = walk.level(event)
            walk.bound.event(event, level, walk.top, walk.sec, walk.out.section_kinds, reader.read_so_far)
            if level <= 3:  # only levels 0-3 (the top object, its values, records, their fields) matter
                walk.event(event, value, level)
    except ijson.JSONError as exc:
        raise _json_error(exc) from None
    walk.out.has_nul = reader.has_nul
    return walk.out


_STARTS = ("start_map", "start_array")
_ENDS = ("end_map", "end_array")


class _OutlineWalk:
    """``outline``'s state as the events arrive: the depth, the top-level key and section it is in, and the
    header value being built."""

    def __init__(self) -> None:
        self.out = Outline()
        self.depth, self.top, self.sec = 0, "", ""
        self.building: ijson.common.ObjectBuilder | None = None
        self.built_events = 0
        self.bound = RecordBound()

    def level(self, event: str) -> int:
        """How many containers enclose the event (a container's start and end count at its parent's level)."""
        if event in _STARTS:
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise KBError("not a knowledge base: JSON nested too deeply")
            return self.depth - 1
        if event in _ENDS:
            self.depth -= 1
        return self.depth

    def event(self, event: str, value: Any, level: int) -> None:
        if self.building is not None:
            self.building.event(event, value)
            self.built_events += 1
            if self.built_events > _HEADER_EVENTS:
                self.building, self.out.header[self.top] = None, None  # not a header value: the schema refuses it
        if event in _STARTS:
            self._start(event, value, level)
        elif event in _ENDS:
            if level == 1 and self.building is not None:
                self.out.header[self.top], self.building = self.building.value, None
        elif event == "map_key":
            self._key(value, level)
        elif level == 1:
            if self.top in schema.HEADER:
                self.out.header[self.top] = value
        else:
            self._count(level)

    def _start(self, event: str, value: Any, level: int) -> None:
        out, top, sec = self.out, self.top, self.sec
        kind = "list" if event == "start_array" else "object"
        if level == 0:
            out.is_object = event == "start_map"
        elif level == 1:
            out.kinds[top] = kind
            if top in schema.HEADER and self.building is None:
                self.building, self.built_events = ijson.common.ObjectBuilder(), 0
                self.building.event(event, value)
        elif level == 2:
            if top in out.counts:
                out.counts[top] += 1
            elif top == "sections" and sec:
                out.section_kinds[sec] = kind
        elif level == 3 and top == "sections" and out.section_kinds.get(sec) == "list":
            out.sections[sec] += 1

    def _key(self, value: str, level: int) -> None:
        out = self.out
        if level == 1:
            if value in out.kinds:
                raise KBError(f"the key {value[:64]!r} appears twice at the top of the file")
            self.top, self.sec = value, ""
            out.kinds[value] = "value"
            if value in LISTS:
                out.counts[value] = 0
        elif level == 2 and self.top == "sections":
            if value in out.sections:
                raise KBError(f"sections: {value[:64]!r} appears twice")
            self.sec = value
            out.sections[value], out.section_kinds[value] = 0, "value"

    def _count(self, level: int) -> None:
        """A scalar record (level 2) or a scalar in a section's list (level 3)."""
        out, top, sec = self.out, self.top, self.sec
        if level == 2:
            if top in out.counts and out.kinds[top] == "list":
                out.counts[top] += 1
        elif level == 3 and top == "sections" and out.section_kinds.get(sec) == "list":
            out.sections[sec] += 1


def check_outline(o: Outline) -> schema.Header:
    """The format and major version before anything else (a newer major may mean anything), then the header
    and the lists' shapes and bounds, with the wording pydantic gives a record."""
    h = o.header
    if not o.is_object or h.get("format") != schema.FORMAT:
        raise KBError(f'not a specreg knowledge base (no "format": "{schema.FORMAT}")')
    major = schema.major_of(h.get("schema_version"))
    if major is None:
        raise KBError('schema_version must be a string MAJOR.MINOR, such as "1.0"')
    if major != schema.SCHEMA_MAJOR:
        raise KBError(
            f"schema version {h['schema_version'][:20]} is not supported: this specreg reads "
            f"{schema.SCHEMA_MAJOR}.x (export it with a specreg that writes {schema.SCHEMA_MAJOR}.x)"
        )
    header = _validated(schema.Header, h, "")
    for key, (_, bound) in LISTS.items():
        if o.kinds.get(key, "list") != "list":
            raise KBError(f"{key}: Input should be a valid list")
        if o.counts.get(key, 0) > bound:
            raise KBError(f"{key}: List should have at most {bound} items, not {o.counts[key]:,}")
    if o.kinds.get("sections", "object") != "object":
        raise KBError("sections: Input should be a valid dictionary")
    if len(o.sections) > MAX_SECTIONS:
        raise KBError(f"sections: Dictionary should have at most {MAX_SECTIONS} items, not {len(o.sections)}")
    for name, kind in o.section_kinds.items():
        if len(name) > 64:
            raise KBError(f"sections.{name[:64]}…: a section's name is at most 64 characters")
        if kind != "list":
            raise KBError(f"sections.{name}: Input should be a valid list")
    return header


def _validated(model: type[BaseModel], value: Any, where: str) -> Any:
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in (*((where,) if where else ()), *err["loc"]))
        more = f" (and {exc.error_count() - 1} more problems)" if exc.error_count() > 1 else ""
        raise KBError(f"{loc[:200]}: {err['msg'][:200]}{more}") from None


def records(f: IO[bytes], cap: int, prefix: str, bound: int, *, nul: bool = True) -> Generator[Any, None, None]:
    """The values of the list at ``prefix`` ("runs", "sections.notes"), one at a time, as PostgreSQL's jsonb
    takes them (no NUL in strings; ``nul`` False: the outline found none). The file was checked by
    ``outline``; it is read again from the start."""
    f.seek(0)
    try:
        for i, item in enumerate(ijson.items(_Capped(f, cap, check_utf8=False), f"{prefix}.item", use_float=True)):
            if i >= bound:  # the file changed since the first pass
                raise KBError(f"{prefix}: List should have at most {bound} items")
            yield json_safe(item) if nul else item
    except ijson.JSONError as exc:
        raise _json_error(exc) from None


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


def _types(t: schema.TokenTypesIn) -> bytes:
    """A token type array (1.4), checked against its count and hash before any file names it."""
    # The text's length first: a count that does not fit it is refused before anything is decoded.
    if len(t.blob) != 4 * -(-4 * t.count // 3):
        raise KBError(f"token types {t.sha256[:12]}: {len(t.blob):,} base64 characters do not hold {t.count:,} int32s")
    try:
        blob = base64.b64decode(t.blob, validate=True)
    except (binascii.Error, ValueError):
        raise KBError(f"token types {t.sha256[:12]}: blob is not base64") from None
    if len(blob) != 4 * t.count:
        raise KBError(f"token types {t.sha256[:12]}: {len(blob):,} bytes are not {t.count:,} int32s")
    digest = hashlib.sha256(blob).hexdigest()
    if digest != t.sha256:
        raise KBError(f"token types {t.sha256[:12]}: their content hashes to {digest[:12]}")
    return blob


def _file_types(f: schema.FileIn, tokens: Tokens | None, types: dict[str, bytes]) -> bytes | None:
    """The file's token types (1.4), which must type its token table one for one, as registration reads them
    beside it (an older file names none: its types stay unknown here)."""
    if f.token_types is None:
        return None
    blob = types.get(f.token_types)
    if blob is None:
        raise KBError(f"file {f.source[:200]}: token types {f.token_types[:12]} are not in the file")
    if tokens is None or len(blob) // 4 != tokens.count:
        n = tokens.count if tokens is not None else 0
        raise KBError(f"file {f.source[:200]}: {len(blob) // 4:,} token types for {n:,} tokens")
    return blob


def _info(f: schema.FileIn, tokens: Tokens | None) -> ModelInfo:
    try:
        checked = schema.ModelInfoIn.model_validate(f.info).model_dump()
        info = ModelInfo.from_dict(checked, tokens=tokens)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise KBError(
            f"file {f.source[:200]}: info.{'.'.join(map(str, err['loc']))[:100]}: {err['msg'][:200]}"
        ) from None
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


_CACHED = 1_000  # files and pairs kept at hand between records; the rest are read back by id when named


class _Importer:
    def __init__(self, f: IO[bytes], cap: int, o: Outline, header: schema.Header, *, allow_local_paths: bool) -> None:
        self.f, self.cap, self.outline = f, cap, o
        self.allow_local_paths = allow_local_paths
        self.source_installation = header.installation.id
        self.here = settings.SPECREG_INSTALLATION_ID
        self.now = timezone.now()
        # Exported source → id of the file here. Ids only: a stored inspection can be large, so files are
        # kept at hand a few at a time, without it (read back when a pair is checked).
        self.file_ids: dict[str, int] = {}
        self._files: dict[int, GGUFFile] = {}
        self.pairs: dict[tuple[str, str], Pair] = {}
        self.touched: set[int] = set()  # pairs whose best result may have changed
        self.predicted: set[int] = set()  # pairs whose best predicted setting may have changed
        self.typed: list[int] = []  # files already here that lacked the token types this file gave them
        self.ctx = ImportContext(self.here, self.source_installation, self.now, self.file, self.pair)

    def file(self, source: str) -> GGUFFile:
        pk = self.file_ids.get(source)
        if pk is None:
            raise KBError(f"{source[:200]}: not among the file's files")
        f = self._files.get(pk)
        if f is None:
            if len(self._files) >= _CACHED:
                self._files.clear()
            f = self._files[pk] = GGUFFile.objects.defer("info").get(pk=pk)
        return f

    def pair(self, target: str, draft: str) -> Pair:
        key = (target, draft)
        if key not in self.pairs:
            if len(self.pairs) >= _CACHED:
                self.pairs.clear()
            self.pairs[key] = pair_for(self.file(target), self.file(draft))
        return self.pairs[key]

    def _each(self, key: str) -> Iterator[Any]:
        """The list's records, each checked against its schema as it is read."""
        model = LISTS[key][0]
        for i, item in enumerate(self._stream(key, self.outline.counts.get(key, 0))):
            yield _validated(model, item, f"{key}.{i}")

    def _stream(self, prefix: str, expected: int) -> Iterator[Any]:
        """The list's records; the pass stops at its last one (the outline counted them), so lists before a
        big one cost a read of the file's beginning, not of all of it."""
        if expected == 0:
            return
        n = 0
        items = records(self.f, self.cap, prefix, expected, nul=self.outline.has_nul)
        try:
            for item in items:
                n += 1
                yield item
                if n == expected:
                    return
        finally:
            items.close()
        raise KBError(f"{prefix}: the file changed while it was read")

    def check_source(self, source: str) -> None:
        """As the forms take a source: an hf:// name (kept beside another as NAME#INSTALLATION), or one
        registered here; a local path only when the operator said so (--allow-local-paths), since pages and
        benchmarks then treat it as a file on this server."""
        if any(ord(c) < 32 or c == "\x7f" for c in source):
            raise KBError(f"file {source[:200]!r}: a source holds no control characters")
        name = _BESIDE.sub("", source)
        if name.startswith("hf://"):
            try:
                parse_hf_spec(name)
            except SourceError as exc:
                raise KBError(f"file {str(exc)[:300]}") from None
            return
        if self.allow_local_paths and os.path.isabs(name) and "://" not in name:
            return
        if GGUFFile.objects.filter(source=source).exists():
            return
        what = "a local path" if os.path.isabs(name) else "neither an hf:// name nor a file registered here"
        raise KBError(
            f"file {source[:200]}: {what}; import_kb takes hf:// sources and names registered here "
            "(--allow-local-paths also takes local paths)"
        )

    def run(self) -> ImportReport:
        tables = {t.sha256: _tokens(t) for t in self._each("token_tables")}
        types = {t.sha256: _types(t) for t in self._each("token_types")}
        for f in self._each("files"):
            self.check_source(f.source)
            if f.token_table is not None and f.token_table not in tables:
                raise KBError(f"file {f.source[:200]}: token table {f.token_table[:12]} is not in the file")
            tokens = tables.get(f.token_table) if f.token_table else None
            info = _info(f, tokens)
            info.token_types = _file_types(f, tokens, types)  # registration stores them beside the texts
            self._file(f, info)
        del tables, types
        for start in range(0, len(self.typed), 500):  # their near-miss pairs could not tell before
            decide_again(self.typed[start : start + 500])
        for p in self._each("pairs"):
            self._pair(p)
        # Whether the near-misses its files made can be adapted: decided once, so that pages only read it.
        decide_pending(self.file_ids.values())
        for r in self._each("runs"):
            self._run(r)
        for r in self._each("reported"):
            self._reported(r)
        sections = load_sections()
        for name, count in self.outline.sections.items():
            section = sections.get(name)
            if section is None:
                self.ctx.messages.append(f"section {name[:64]!r} skipped: this installation does not keep such records")
                continue
            section.import_records(self.ctx, self._stream(f"sections.{name}", count))
        for pk in sorted(self.touched):
            refresh_best(Pair.objects.get(pk=pk))
        for pk in sorted(self.predicted):
            refresh_predicted(Pair.objects.get(pk=pk))
        bump_generation()
        transaction.on_commit(bump_generation)
        return ImportReport(self.source_installation, self.ctx.counts, self.ctx.messages)

    def _file(self, f: schema.FileIn, info: ModelInfo) -> None:
        theirs = _comparable(f.info)
        source = f.source
        for attempt in range(3):
            here = GGUFFile.objects.filter(source=source).first()
            if here is None:
                break
            if _comparable(here.info) == theirs:
                self.file_ids[f.source] = here.pk
                self.ctx.count("files already here")
                self._give_types(here, info.token_types)
                return
            # The same name with another inspection (another revision, another file at that path):
            # keep both, theirs under a name that says which revision or installation it is.
            source = self._other_name(f, attempt)
        else:
            raise KBError(f"file {f.source[:200]}: no free name for its second inspection")
        if source != f.source:
            self.ctx.messages.append(
                f"file {f.source} differs from the one registered here under that name: kept both, theirs as {source}"
            )
            self.ctx.count("files kept beside ours")
        repo, revision, path = where_from_source(f)
        reg = register(
            info,
            source=source,
            repo=repo,
            revision=revision,
            path=path,
            commit=f.commit,
            etag=f.etag,
            size=f.size,
            # The Hub card's grouping, which the header cannot give again (1.1; the other rules need nothing).
            base_models=[f.base_model.name] if f.base_model is not None and f.base_model.rule == "hub" else None,
        )
        origin = "" if f.installation == self.here else f.installation
        GGUFFile.objects.filter(pk=reg.file.pk).update(inspected_at=f.inspected_at, origin_installation=origin)
        self.file_ids[f.source] = reg.file.pk
        self.ctx.count("files added")

    def _give_types(self, here: GGUFFile, types: bytes | None) -> None:
        """The same inspection here without its token types (registered before they were stored): theirs, read
        from the same header, are stored as registration stores them, and its adaptability is decided again."""
        if types is None or here.token_types_id is not None:
            return
        GGUFFile.objects.filter(pk=here.pk).update(token_types=store_types(types), inspected_at=self.now)
        self.typed.append(here.pk)
        self.ctx.count("files given their token types")

    def _other_name(self, f: schema.FileIn, attempt: int) -> str:
        if attempt == 0 and f.source.startswith("hf://") and f.commit and f.repo and f.path:
            return hf_source(f.repo, f.commit, f.path)  # a real name for exactly that revision
        return f"{f.source}#{f.installation}"[:1024] if attempt < 2 else f.source

    def _pair(self, p: schema.PairIn) -> None:
        ours = self.pair(p.target, p.draft)
        if (ours.compatible, ours.failed_rule) != (p.compatible, p.failed_rule):
            said = "compatible" if p.compatible else f"incompatible ({p.failed_rule})"
            now = "compatible" if ours.compatible else f"incompatible ({ours.failed_rule})"
            self.ctx.messages.append(
                f"pair {p.draft} → {p.target}: they said {said} under {p.rules_from or '?'}, "
                f"the rules here ({ours.rules_from}) say {now}"
            )
            self.ctx.count("verdicts that differ")
        elif p.verdict and p.verdict != ours.verdict:
            self.ctx.messages.append(
                f"pair {p.draft} → {p.target}: they said {p.verdict} over its quant combinations, "
                f"the files here say {ours.verdict}"
            )
            self.ctx.count("verdicts that differ")

    def _run(self, r: schema.RunIn) -> None:
        if self.ctx.already_here(BenchmarkRun, r.installation, r.id):
            self.ctx.count("runs already here")
            return
        pair = self.pair(r.target, r.draft)
        run = BenchmarkRun.objects.create(
            pair=pair,
            target_file=self.file(r.target),
            draft_file=self.file(r.draft),
            status=r.status,
            kind=BenchmarkRun.kind_of(r.params),
            params=r.params,
            queue="",
            hardware=r.hardware,
            hardware_class=r.hardware_class,
            build=r.build,
            summary=r.summary,
            report_md=r.report_md,
            # Rebuilt below from the stored setting: another installation's text never becomes the command shown.
            server_command="",
            systemd_unit="",
            error=r.error,
            progress=1.0,
            started_at=r.started_at,
            finished_at=r.finished_at,
            origin_installation=r.installation,
            origin_id=r.id,
            origin_author=r.author,
            imported_at=self.now,
        )
        BenchmarkRun.objects.filter(pk=run.pk).update(created_at=r.created_at)
        rows = []
        for c in r.results:
            values = c.model_dump(exclude={"created_at", "method"})
            values["method"] = c.method or "draft-simple"  # older exports name none: a draft model
            rows.append(BenchmarkResult(run=run, pair=pair, **values))
        BenchmarkResult.objects.bulk_create(rows)
        BenchmarkResult.objects.filter(run=run).update(created_at=r.created_at)
        predicted = [PredictedResult(run=run, pair=pair, **x.model_dump(exclude={"created_at"})) for x in r.predictions]
        PredictedResult.objects.bulk_create(predicted)
        if predicted:
            self.predicted.add(pair.pk)
            self.ctx.count("predicted results added", len(predicted))
        for x in r.stability:
            values = x.model_dump(exclude={"created_at"})
            if values["status"] == StabilityResult.RUNNING:
                # Only finished runs are exported, so nothing will ever finish it here: marked as runner.runs.records
                # marks a soak whose run ended without it.
                values["status"] = StabilityResult.INTERRUPTED
            soak = StabilityResult.objects.create(run=run, pair=pair, **values)
            StabilityResult.objects.filter(pk=soak.pk).update(created_at=x.created_at or r.created_at)
            self.ctx.count("stability results added")
        built = rebuilt_deployment(run)
        if built is not None:
            BenchmarkRun.objects.filter(pk=run.pk).update(server_command=built.command, systemd_unit=built.unit)
        self.touched.add(pair.pk)
        self.ctx.count("runs added")
        self.ctx.count("measured results added", len(rows))

    def _reported(self, r: schema.ReportedIn) -> None:
        if self.ctx.already_here(ReportedResult, r.installation, r.id):
            self.ctx.count("reported results already here")
            return
        pair = self.pair(r.target, r.draft)
        # The figures every result carries (registry.results.figures.FIGURES, as the exporter wrote them), but the
        # method: a reported record's schema has none (the model's default stands).
        figures = r.model_dump(include=set(FIGURES) - {"method"})
        same_cell = ReportedResult.objects.filter(
            pair=pair, k=r.k, content_type=r.content_type, hardware=r.hardware, llama_cpp_build=r.llama_cpp_build
        )
        if same_cell.exists() and not same_cell.filter(speedup=r.speedup, acceptance=r.acceptance).exists():
            self.ctx.messages.append(
                f"reported K={r.k} {r.content_type or ''} for {r.draft} → {r.target}: their "
                f"figures differ from those here; kept both, theirs from installation {r.installation}"
            )
            self.ctx.count("reported results kept beside ours")
        row = ReportedResult.objects.create(
            pair=pair,
            source_url=r.source_url,
            citation=r.citation,
            notes=r.notes,
            origin_installation=r.installation,
            origin_id=r.id,
            origin_author=r.author,
            imported_at=self.now,
            **figures,
        )
        if r.created_at:
            ReportedResult.objects.filter(pk=row.pk).update(created_at=r.created_at)
        self.touched.add(pair.pk)
        self.ctx.count("reported results added")


def import_kb(path: str | os.PathLike, *, allow_local_paths: bool = False) -> ImportReport:
    """Read, check and merge the knowledge base at ``path``; nothing changes unless all of it goes in.

    ``allow_local_paths``: also take files whose source is a local path (the operator vouches for the file)."""
    p = Path(path)
    cap = settings.SPECREG_KB_MAX_BYTES
    try:
        with p.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > cap:
                raise KBError(f"{p}: {size:,} bytes, more than SPECREG_KB_MAX_BYTES ({cap:,})")
            o = outline(f, cap)
            header = check_outline(o)
            try:
                with transaction.atomic():
                    return _Importer(f, cap, o, header, allow_local_paths=allow_local_paths).run()
            except DatabaseError as exc:
                raise KBError(f"the database refused a record: {str(exc).splitlines()[0][:200]}") from None
    except OSError as exc:
        raise KBError(f"{p}: {exc.strerror or exc}") from None
