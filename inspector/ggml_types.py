"""ggml's tensor type table of the pinned build (b11434): name, block size and block bytes per type id.

Copied from ``type_traits`` in ``ggml/src/ggml.c`` (sizes are ``sizeof(block_*)`` of
``ggml/src/ggml-common.h``); tests/inspector/test_ggml_types.py compiles those expressions from the pinned
source and compares. Removed and deprecated ids keep their slot with block size 0, which is how
llama.cpp's loader recognises them (it refuses such tensors).
"""

from __future__ import annotations

from typing import NamedTuple

from .ggml_constants import GGML_MAX_DIMS, GGML_TYPE_COUNT

GGML_MAX_NAME = 64  # ggml.h: a tensor name and its terminating NUL fit in 64 bytes


class TypeTraits(NamedTuple):
    name: str  # ggml's type_name
    blck_size: int  # elements per block; 0 for a removed type
    type_size: int  # bytes per block


TYPE_TRAITS: dict[int, TypeTraits] = {
    0: TypeTraits("f32", 1, 4),
    1: TypeTraits("f16", 1, 2),
    2: TypeTraits("q4_0", 32, 18),
    3: TypeTraits("q4_1", 32, 20),
    4: TypeTraits("DEPRECATED", 0, 0),
    5: TypeTraits("DEPRECATED", 0, 0),
    6: TypeTraits("q5_0", 32, 22),
    7: TypeTraits("q5_1", 32, 24),
    8: TypeTraits("q8_0", 32, 34),
    9: TypeTraits("q8_1", 32, 36),
    10: TypeTraits("q2_K", 256, 84),
    11: TypeTraits("q3_K", 256, 110),
    12: TypeTraits("q4_K", 256, 144),
    13: TypeTraits("q5_K", 256, 176),
    14: TypeTraits("q6_K", 256, 210),
    15: TypeTraits("q8_K", 256, 292),
    16: TypeTraits("iq2_xxs", 256, 66),
    17: TypeTraits("iq2_xs", 256, 74),
    18: TypeTraits("iq3_xxs", 256, 98),
    19: TypeTraits("iq1_s", 256, 50),
    20: TypeTraits("iq4_nl", 32, 18),
    21: TypeTraits("iq3_s", 256, 110),
    22: TypeTraits("iq2_s", 256, 82),
    23: TypeTraits("iq4_xs", 256, 136),
    24: TypeTraits("i8", 1, 1),
    25: TypeTraits("i16", 1, 2),
    26: TypeTraits("i32", 1, 4),
    27: TypeTraits("i64", 1, 8),
    28: TypeTraits("f64", 1, 8),
    29: TypeTraits("iq1_m", 256, 56),
    30: TypeTraits("bf16", 1, 2),
    31: TypeTraits("TYPE_Q4_0_4_4 REMOVED, use Q4_0 with runtime repacking", 0, 0),
    32: TypeTraits("TYPE_Q4_0_4_8 REMOVED, use Q4_0 with runtime repacking", 0, 0),
    33: TypeTraits("TYPE_Q4_0_8_8 REMOVED, use Q4_0 with runtime repacking", 0, 0),
    34: TypeTraits("tq1_0", 256, 54),
    35: TypeTraits("tq2_0", 256, 66),
    36: TypeTraits("TYPE_IQ4_NL_4_4 REMOVED, use IQ4_NL with runtime repacking", 0, 0),
    37: TypeTraits("TYPE_IQ4_NL_4_8 REMOVED, use IQ4_NL with runtime repacking", 0, 0),
    38: TypeTraits("TYPE_IQ4_NL_8_8 REMOVED, use IQ4_NL with runtime repacking", 0, 0),
    39: TypeTraits("mxfp4", 32, 17),
    40: TypeTraits("nvfp4", 64, 36),
    41: TypeTraits("q1_0", 128, 18),
    42: TypeTraits("q2_0", 64, 18),
}
if len(TYPE_TRAITS) != GGML_TYPE_COUNT:  # a table copied from another build: refuse to load rather than misread sizes
    raise ImportError(f"TYPE_TRAITS has {len(TYPE_TRAITS)} types, the pinned ggml {GGML_TYPE_COUNT}")

__all__ = ["GGML_MAX_DIMS", "GGML_MAX_NAME", "GGML_TYPE_COUNT", "TYPE_TRAITS", "TypeTraits"]
