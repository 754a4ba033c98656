"""Max ulp error of every lanemath function against mpmath (float64) and against the
float64 libm value (float32), on a few thousand arguments spread over each domain
(``lanewise.lanemath.accuracy`` runs the same measurement on 10**6 points)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from lanewise.lanemath.accuracy import _specs, measure

pytest.importorskip("mpmath")

N64 = int(os.environ.get("LANEMATH_TEST_N64", 3000))
N32 = int(os.environ.get("LANEMATH_TEST_N32", 20000))

#: The bar is 1 ulp; what the 10**6-point run measured is in docs/lanemath.md.
BOUND = {name: 1.0 for name in _specs()}
BOUND["sqrt"] = 0.5


@pytest.mark.parametrize("name", list(_specs()))
def test_float64_within_one_ulp(name):
    r = measure(name, np.float64, N64, seed=1, workers=1)
    assert r["max"] <= BOUND[name], r


@pytest.mark.parametrize("name", list(_specs()))
def test_float32_within_one_ulp(name):
    r = measure(name, np.float32, N32, seed=1)
    # float32 results are float64 results rounded once: 0.5 ulp up to double rounding
    assert r["max"] <= min(BOUND[name], 0.5 + 1e-6), r
