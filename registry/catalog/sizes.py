"""How big a model is, from the best evidence its files give: which of two models is the target depends on it.

A file's parameter count is the sum of its tensors' elements, so a header-only upload (no tensors, or tensors whose
data is not in the file) says 0 or whatever its tensor list claims. The evidence, best first:
1. files that carry their tensors' data: what llama.cpp would load;
2. files whose header lists tensors without their data: a claim, but the whole list;
3. ``general.size_label`` ("7B", "0.5B", "8x7B"), as convert_hf_to_gguf.py writes it from the original model: a claim
   of one string, there to fall back on when nothing else says a size.
A lower level never overrides a higher one, and within a level the lower median of the files decides, so one upload
cannot move an established model: it would have to outnumber its files.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from inspector.info import size_label_count
from registry.models import GGUFFile

DATA, TENSORS, LABEL, NONE = "tensor data", "tensor list", "size label", "none"


@dataclass(frozen=True)
class FileSize:
    """What one file says of its model's size."""

    parameter_count: int  # its tensors' elements (0: no tensors listed)
    data_complete: bool | None  # its tensors' data are in the file (None: not known, an older inspection)
    size_label: object = None  # general.size_label as stored (any JSON value)


@dataclass(frozen=True)
class Size:
    parameter_count: int
    evidence: str  # DATA, TENSORS, LABEL or NONE


def _lower_median(values: list[int]) -> int:
    values = sorted(values)
    return values[(len(values) - 1) // 2]


def model_size(files: Iterable[FileSize]) -> Size:
    """A model's size from its files, by the best evidence any of them gives (the module's order)."""
    data: list[int] = []
    tensors: list[int] = []
    labels: list[int] = []
    for f in files:
        if f.parameter_count > 0 and f.data_complete is not False:
            data.append(f.parameter_count)
        elif f.parameter_count > 0:
            tensors.append(f.parameter_count)
        elif n := size_label_count(f.size_label):
            labels.append(n)
    for found, evidence in ((data, DATA), (tensors, TENSORS), (labels, LABEL)):
        if found:
            return Size(_lower_median(found), evidence)
    return Size(0, NONE)


def ratio(target_count: int, draft_count: int) -> float | None:
    """Target parameters over draft parameters; None where either is unknown."""
    return target_count / draft_count if target_count > 0 and draft_count > 0 else None


def pair_ratio(target: GGUFFile, draft: GGUFFile) -> float | None:
    """The pair's size ratio: the two files' own counts where both list tensors, else their base models' sizes (a
    header-only upload lists none; its model's other files or its size label say the size). One read, and only then."""
    own = ratio(target.parameter_count, draft.parameter_count)
    if own is not None or not (target.pk and draft.pk):
        return own
    counts = dict(
        GGUFFile.objects.filter(pk__in=[target.pk, draft.pk]).values_list("pk", "model__base__parameter_count")
    )
    return ratio(
        target.parameter_count or counts.get(target.pk) or 0, draft.parameter_count or counts.get(draft.pk) or 0
    )
