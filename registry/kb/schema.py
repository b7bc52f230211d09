"""The knowledge-base format (version 1.x) and its bounds, validated with pydantic.

1.1 (pairs of base models): each file names its base model (``base_model``: key, name and the rule that
grouped it) and each run the two files it measured; 1.0 files, without them, are read as before.

1.2 (load and soaks): a measured result carries its concurrency (``clients``, ``parallel``), latencies and the share
of outputs that differ under load; a run carries its soaks (``stability``: a StabilityResult and its intervals).
1.0 and 1.1 files, without them, read as one client and no soaks.

1.4 (token types): ``token_types`` lists each distinct ``tokenizer.ggml.token_type`` array once (its
sha256, its count and the little-endian int32s in base64), and a file names its own by sha256, as it names its
token table; older files, without them, import as files whose types were not stored.

1.5 (state kinds): a pair carries ``state``, how the exporting installation's llama.cpp rolls it back after a rejected
draft (kv, checkpoints, rollback or none); it is informational and decided here again from the files. Older files,
whose rules refused every recurrent or hybrid pair, import as before: such a pair's verdict is decided here under
this build's rules, and the difference is reported like any other.

A file may come from anyone, so every list, string and number has a bound here, floats must be
finite, and unknown fields are ignored (a newer minor version may add some); an unknown major
version is refused before anything else is read.
"""

from __future__ import annotations

import dataclasses
import typing
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    create_model,
    field_validator,
    model_validator,
)

from inspector.info import ModelInfo
from inspector.spec_flags import MAX_OPTION_DIGITS, known_method, option_flags, own_option
from inspector.speculative import SPEC_TYPES

FORMAT = "specreg-knowledge-base"
SCHEMA_MAJOR = 1
# 1.3: a pair's verdict over every class combination; 1.4: token types; 1.5: a pair's state kind; 1.6: the verdict in
# the words the pages and the API use (compatible, partial, incompatible; 1.3-1.5 wrote all, partial, none)
SCHEMA_VERSION = f"{SCHEMA_MAJOR}.6"
OLD_VERDICTS = {"all": "compatible", "none": "incompatible"}  # 1.3-1.5

INT32 = 2**31 - 1  # PositiveIntegerField on PostgreSQL
INT64 = 2**63 - 1
MAX_TOKENS = 4 * 1024 * 1024  # the largest real vocabularies have ~262,000
MAX_FILES = 100_000
MAX_PAIRS = 2_000_000
MAX_RUNS = 200_000
MAX_RESULTS_PER_RUN = 20_000
MAX_REPORTED = 1_000_000
MAX_SOAKS_PER_RUN = 10  # a soak run keeps one record
# A soak lasts at most SPECREG_SOAK_MAX_HOURS (24 h by default) at one interval per 5 s or more: 17,280 intervals.
MAX_INTERVALS = 20_000
MAX_CLIENTS = 32_767  # PositiveSmallIntegerField

InstallationId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._-]{1,64}$")]
Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
Source = Annotated[str, StringConstraints(min_length=1, max_length=1024)]


# Bounded strings, one alias per bound (type checkers read aliases, not calls in annotations).
Text16 = Annotated[str, StringConstraints(max_length=16)]
Text32 = Annotated[str, StringConstraints(max_length=32)]


def _spec_type(v: str) -> str:
    # Pages and recommendations build llama.cpp options from it: only llama.cpp's own --spec-type names.
    if not known_method(v):
        raise ValueError(f"method must be one of {', '.join(SPEC_TYPES)}, or a chain such as ngram-mod+draft-simple")
    return v


SpecType = Annotated[Text32, AfterValidator(_spec_type)]
Text64 = Annotated[str, StringConstraints(max_length=64)]
Text100 = Annotated[str, StringConstraints(max_length=100)]
Text150 = Annotated[str, StringConstraints(max_length=150)]
Text200 = Annotated[str, StringConstraints(max_length=200)]
Text255 = Annotated[str, StringConstraints(max_length=255)]
Text500 = Annotated[str, StringConstraints(max_length=500)]
Text1000 = Annotated[str, StringConstraints(max_length=1_000)]
Text20K = Annotated[str, StringConstraints(max_length=20_000)]
Text100K = Annotated[str, StringConstraints(max_length=100_000)]
Text1M = Annotated[str, StringConstraints(max_length=1_000_000)]

# A setting's option is exactly [flag, value], two strings: pages label it and commands are built from it.
OptionIn = Annotated[list[Text32], Field(min_length=2, max_length=2)]
Options = Annotated[list[OptionIn], Field(max_length=8)]


def own_options_of(method: str, options: list[list[str]]) -> None:
    """ValueError (one line) unless every option is one of the method's own with a number for its value."""
    for option in options:
        if not own_option(method, option):
            flags = sorted(option_flags(method))
            takes = f"only {flags[0]} with a number of up to {MAX_OPTION_DIGITS} digits" if flags else "no options"
            raise ValueError(f"options: {method} takes {takes}, not {option!r}")


Count32 = Annotated[int, Field(ge=0, le=INT32)]
OptFloat = Annotated[float | None, Field(default=None)]
OptNonNeg = Annotated[float | None, Field(default=None, ge=0)]
OptFraction = Annotated[float | None, Field(default=None, ge=0, le=1)]
Clients = Annotated[int, Field(ge=1, le=MAX_CLIENTS)]


class Base(BaseModel):
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)


class Installation(Base):
    id: InstallationId
    rules_from: Text32 = ""  # the llama.cpp build whose rules its verdicts follow
    specreg_version: Text32 = ""


class TokenTableIn(Base):
    sha256: Sha256
    count: Annotated[int, Field(ge=0, le=MAX_TOKENS)]
    blob: str  # base64 of the stored array, (u64 little-endian length, bytes) per token


class TokenTypesIn(Base):
    """A token type array (1.4): one little-endian int32 per token, as registration stores it."""

    sha256: Sha256  # of the array's bytes
    count: Annotated[int, Field(ge=0, le=MAX_TOKENS)]
    blob: str  # base64 of the array


class BaseModelIn(Base):
    key: Annotated[str, StringConstraints(min_length=1, max_length=300)]
    name: Annotated[str, StringConstraints(min_length=1, max_length=300)]
    rule: Literal["hub", "header", "repo", "adapted"]


class FileIn(Base):
    source: Source
    repo: Text200 = ""
    revision: Text255 = ""
    path: Annotated[str, StringConstraints(min_length=1, max_length=1000)]
    commit: Text64 = ""
    size: Annotated[int | None, Field(ge=0, le=INT64)] = None
    etag: Text200 = ""
    token_table: Sha256 | None = None
    token_types: Sha256 | None = None  # 1.4: one of the file's token_types by sha256
    info: dict[str, Any]
    inspected_at: AwareDatetime
    installation: InstallationId  # which installation read the header
    base_model: BaseModelIn | None = None  # 1.1


class PairIn(Base):
    target: Source
    draft: Source
    compatible: bool
    failed_rule: Text32 = ""
    rules_from: Text32 = ""
    # 1.6: compatible, partial or incompatible over the two models' class combinations (informational: recomputed
    # here); 1.3-1.5 files say all or none for the first and last, read as the words of today
    verdict: Literal["compatible", "partial", "incompatible", ""] = ""
    # 1.5: kv, checkpoints, rollback or none (informational: decided here again)
    state: Literal["kv", "checkpoints", "rollback", "none", ""] = ""

    @field_validator("verdict", mode="before")
    @classmethod
    def _older_words(cls, v: object) -> object:
        return OLD_VERDICTS.get(v, v) if isinstance(v, str) else v


class Figures(Base):
    k: Count32
    acceptance: OptFloat
    speedup: Annotated[float | None, Field(default=None, ge=0)]
    tokens_per_second: Annotated[float | None, Field(default=None, ge=0)]
    baseline_tokens_per_second: Annotated[float | None, Field(default=None, ge=0)]
    content_type: Text32 = ""
    hardware: Text200 = ""
    llama_cpp_build: Text32 = ""
    created_at: AwareDatetime | None = None


class ResultIn(Figures):
    method: Text32 = ""  # the speculation method, where the exporting installation records one
    temperature: float = 0.0
    p_min: OptFloat
    n_predict: Count32
    repeats: Count32
    n_prompts: Count32
    status: Text16
    error: Text20K = ""
    speculation_ran: bool = True
    baseline_min: OptFloat
    baseline_max: OptFloat
    tps_min: OptFloat
    tps_max: OptFloat
    drafted: Count32 = 0
    accepted: Count32 = 0
    mean_accepted: OptFloat
    identical: bool | None = None
    divergences: Annotated[list[Any], Field(max_length=10_000)] = []
    other_cpu_share: OptFloat
    via: Literal["cli", "server"] = "cli"  # how the exporting installation measured it
    # 1.2: under load (runner.measure.load); older files measured one client at a time.
    clients: Clients = 1
    parallel: Clients = 1
    latency_p50: OptNonNeg
    latency_p95: OptNonNeg
    baseline_latency_p95: OptNonNeg
    ttft_p50: OptNonNeg
    differing_share: OptFraction
    prompt_repeats: bool = False
    # 1.2: the speedup's range over the interleaved pairs (a gain is measured only beyond it)
    speedup_min: OptNonNeg
    speedup_max: OptNonNeg
    pairs: Count32 | None = None

    @field_validator("method")
    @classmethod
    def _known_method(cls, v: str) -> str:
        # Pages and recommendations build llama.cpp options from it: only llama.cpp's own --spec-type names.
        if v and not known_method(v):
            raise ValueError(
                f"method must be one of {', '.join(SPEC_TYPES)}, or a chain such as ngram-mod+draft-simple"
            )
        return v


class IntervalIn(Base):
    """One interval of a soak (runner.soak.loop.Interval): numbers only, every key present once read."""

    t: Annotated[float, Field(ge=0)]  # seconds from the soak's start to the interval's end
    requests: Count32 = 0
    tokens: Count32 = 0
    tokens_per_second: Annotated[float, Field(ge=0)] = 0.0
    drafted: Count32 = 0
    accepted: Count32 = 0
    acceptance: OptFraction
    rss_mb: OptNonNeg  # MiB
    errors: Count32 = 0
    timeouts: Count32 = 0
    compared: Count32 = 0
    differing: Count32 = 0


class StabilityIn(Figures):
    """A soak (1.2), kept with the run that soaked: the setting, its totals, verdict and intervals."""

    method: SpecType = "draft-simple"
    p_min: OptFloat
    options: Options = []
    clients: Clients = 1
    parallel: Clients = 1
    planned_s: Count32
    elapsed_s: Annotated[float, Field(ge=0)] = 0.0
    interval_s: Count32 = 60
    status: Literal["running", "stable", "failed", "timeout", "unstable", "cancelled", "interrupted"]
    verdict: Text500 = ""
    command: Text100K = ""
    intervals: Annotated[list[IntervalIn], Field(max_length=MAX_INTERVALS)] = []
    requests: Count32 = 0
    errors: Count32 = 0
    timeouts: Count32 = 0
    rss_start_mb: OptNonNeg
    rss_end_mb: OptNonNeg
    acceptance_min: OptFraction
    acceptance_max: OptFraction
    compared: Count32 = 0
    differing: Count32 = 0
    prompt_repeats: bool = False
    finished_at: AwareDatetime | None = None

    @model_validator(mode="after")
    def _own_options(self) -> StabilityIn:
        own_options_of(self.method, self.options)
        return self


class PredictionIn(Figures):
    """A predicted figure (kept with the run that predicted it): temperature 0, on the run's hardware class."""

    method: SpecType = "draft-simple"
    p_min: OptFloat
    options: Options = []
    n_predict: Count32
    n_prompts: Count32 = 0
    task_set: Text100 = ""
    hardware_class: Text64 = ""
    drafted: Count32 = 0
    accepted: Count32 = 0
    tokens: Count32 = 0
    near_ties: Count32 = 0

    @model_validator(mode="after")
    def _own_options(self) -> PredictionIn:
        own_options_of(self.method, self.options)
        return self


class RunIn(Base):
    installation: InstallationId
    id: Annotated[int, Field(ge=1, le=INT64)]
    target: Source
    draft: Source
    status: Literal["done", "failed", "cancelled"]
    params: dict[str, Any] = {}
    hardware: dict[str, Any] = {}
    hardware_class: Text64 = ""
    build: dict[str, Any] = {}
    summary: dict[str, Any] = {}
    report_md: Text1M = ""
    server_command: Text100K = ""
    systemd_unit: Text100K = ""
    error: Text20K = ""
    author: Text150 = ""
    created_at: AwareDatetime
    started_at: AwareDatetime | None = None
    finished_at: AwareDatetime | None = None
    results: Annotated[list[ResultIn], Field(max_length=MAX_RESULTS_PER_RUN)] = []
    predictions: Annotated[list[PredictionIn], Field(max_length=MAX_RESULTS_PER_RUN)] = []
    stability: Annotated[list[StabilityIn], Field(max_length=MAX_SOAKS_PER_RUN)] = []  # 1.2


class ReportedIn(Figures):
    installation: InstallationId
    id: Annotated[int, Field(ge=1, le=INT64)]
    target: Source
    draft: Source
    source_url: Text500 = ""
    citation: Annotated[str, StringConstraints(min_length=1, max_length=500)]
    notes: Text100K = ""
    author: Text150 = ""

    @field_validator("source_url")
    @classmethod
    def _web_address(cls, v: str) -> str:
        # Pages link to it: a javascript: or data: address would run in a visitor's browser.
        if v and not v.lower().startswith(("https://", "http://")):
            raise ValueError("source_url must be an http(s) address")
        return v

    # The bounds of the reported-result form (registry.results.reporting), which every other way in uses.
    @field_validator("acceptance")
    @classmethod
    def _fraction(cls, v: float | None) -> float | None:
        if v is not None and not 0 <= v <= 1:
            raise ValueError("acceptance must be a fraction between 0 and 1")
        return v

    @field_validator("speedup", "tokens_per_second", "baseline_tokens_per_second")
    @classmethod
    def _above_zero(cls, v: float | None) -> float | None:
        if v is not None and not v > 0:
            raise ValueError("must be above 0")
        return v


HEADER = ("format", "schema_version", "exported_at", "installation")


class Header(Base):
    """The file's own fields; the importer reads them in a first pass, and each list's records one at a time."""

    format: Literal["specreg-knowledge-base"]
    schema_version: str
    exported_at: AwareDatetime
    installation: Installation


def _model_info_schema() -> type[BaseModel]:
    """ModelInfo's fields as a pydantic model, so a stored inspection from a file is type-checked
    field by field (nested tokenizer included) before the registry rebuilds a ModelInfo from it."""
    hints = typing.get_type_hints(ModelInfo)
    fields = {
        f.name: (hints[f.name], f.default if f.default is not dataclasses.MISSING else ...)
        for f in dataclasses.fields(ModelInfo)
        if f.name not in ("tokens", "token_types")  # stored apart, never in a stored inspection
    }
    return create_model(  # type: ignore[call-overload]  # field types come from ModelInfo at run time
        "ModelInfoIn", __config__=ConfigDict(extra="ignore", allow_inf_nan=False), **fields
    )


ModelInfoIn = _model_info_schema()


def major_of(version: Any) -> int | None:
    """The major number of "MAJOR.MINOR", or None when it is not such a string."""
    if not isinstance(version, str) or len(version) > 20:
        return None
    major, _, minor = version.partition(".")
    return int(major) if major.isdigit() and (minor == "" or minor.isdigit()) else None


def now_iso(dt: datetime | None) -> str | None:
    return dt.isoformat() if dt else None
