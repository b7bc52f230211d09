"""Benchmark parameters: non-finite numbers are refused when queued, not hours later in llama.cpp."""

from __future__ import annotations

import pytest

from runner.errors import BenchmarkError
from runner.runs.params import normalize_params


@pytest.mark.parametrize("value", ["nan", float("nan"), float("inf"), "-inf"])
def test_non_finite_temperatures_are_refused(value):
    with pytest.raises(BenchmarkError, match=r"temperatures must lie in \[0, 2\]"):  # was: NaN passed t < 0 or t > 2
        normalize_params({"temperatures": [0.0, value]})


@pytest.mark.parametrize("params", [{"p_min": float("nan")}, {"p_mins": [0.5, float("nan")]}, {"p_min": float("inf")}])
def test_non_finite_p_mins_are_refused(params):
    with pytest.raises(BenchmarkError, match=r"p-min must lie in \[0, 1\]"):
        normalize_params(params)


def test_finite_values_still_pass():
    p = normalize_params({"temperatures": [0, "0.7", 2.0], "p_min": 0.25})
    assert p["temperatures"] == [0.0, 0.7, 2.0] and p["p_mins"] == [0.25]
