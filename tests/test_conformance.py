"""The conformance suite (tests/conformance.py) on every backend of the registry.

Backends that cannot run here (a missing extra; cuda without a GPU: its cases
run under the simulator in tests/cuda) are skipped with the reason.
"""

from __future__ import annotations

import pytest

from conformance import (MAP_CASES, REDUCE_CASES, run_case, run_explain, run_lane_error, run_out,
                         run_protocol)
from lanewise import backends


def _usable(name):
    if not backends.REGISTRY[name].wide:  # the cases compute float64 and int64 (tests/test_tpu_backend.py: tpu)
        pytest.skip(f"backend {name!r} computes 32-bit numbers only; its own tests diff it against the reference")
    if not backends.available(name):
        pytest.skip(f"backend {name!r} cannot run here (extra missing, or no GPU: tests/cuda runs it "
                    "on the simulator)")
    return name


@pytest.fixture(params=backends.NAMES)
def backend(request):
    return _usable(request.param)


@pytest.mark.parametrize("case", MAP_CASES + REDUCE_CASES, ids=lambda c: c.name)
def test_matches_the_reference(backend, case):
    run_case(case, backend)


def test_protocol(backend):
    run_protocol(backend)


def test_out(backend):
    run_out(backend)


def test_lane_error(backend):
    run_lane_error(backend)


def test_explain(backend):
    run_explain(backend)


def test_registry_is_the_only_list_of_backends():
    """Adding a backend is one registry entry: the suite is parametrised from it."""
    assert set(backends.NAMES) >= {"cpu", "python", "cuda", "dask"}
    assert all(backends.REGISTRY[n].name == n for n in backends.NAMES)
