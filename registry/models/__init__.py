"""The registry's data, one module per domain: the catalog (files, models, pairs), runs and their results, work
with the Hub, and access limits. Every model is named here too, so ``from registry.models import X`` reads the
same whatever module declares X."""

from registry.models.access import RateCount
from registry.models.catalog import (
    SHA256,
    AdaptCheck,
    BaseClass,
    BaseModel,
    ClassCheck,
    Family,
    GGUFFile,
    Model,
    Pair,
    PairCheckResult,
    PairRedirect,
    TokenizerClass,
    TokenTable,
    TokenTypeTable,
    VerdictChange,
)
from registry.models.hub import Crawl, CrawlRepo, HostSlot, HubJob, StoredFile
from registry.models.provenance import Provenance
from registry.models.runs import (
    BenchmarkResult,
    BenchmarkRun,
    PredictedResult,
    ReportedResult,
    ResultFigures,
    StabilityResult,
    speculation_setting,
)

__all__ = [
    "SHA256",
    "AdaptCheck",
    "BaseClass",
    "BaseModel",
    "BenchmarkResult",
    "BenchmarkRun",
    "ClassCheck",
    "Crawl",
    "CrawlRepo",
    "Family",
    "GGUFFile",
    "HostSlot",
    "HubJob",
    "Model",
    "Pair",
    "PairCheckResult",
    "PairRedirect",
    "PredictedResult",
    "Provenance",
    "RateCount",
    "ReportedResult",
    "ResultFigures",
    "StabilityResult",
    "StoredFile",
    "TokenTable",
    "TokenTypeTable",
    "TokenizerClass",
    "VerdictChange",
    "speculation_setting",
]
