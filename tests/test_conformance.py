"""The conformance suite (tests/conformance.py) on every backend of the registry.

Backends that cannot run here (a missing extra; cuda without a GPU: its cases
run under the simulator in tests/cuda) are skipped with the reason.  The tpu
backend, which computes 32-bit numbers only, runs every case's 32-bit variant
(``conformance.run_narrow``) with its Pallas kernels in interpret mode where no
TPU is attached; what it refuses is listed in :data:`REFUSED`, each with the
error it must raise (the construct, and the user's file:line for lane code) and why.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass

import pytest

import conformance
import lanewise as lw
from conformance import (MAP_CASES, REDUCE_CASES, run_case, run_explain, run_lane_error, run_out,
                         run_protocol)
from lanewise import backends

#: How a backend runs here without its device: the tpu's kernels in Pallas' interpret mode.
WITHOUT_DEVICE = {"tpu": {"tpu_interpret": True}}


@pytest.fixture(params=backends.NAMES)
def backend(request):
    name = request.param
    here = backends.available(name)
    with lw.config.overridden(**({} if here else WITHOUT_DEVICE.get(name, {}))):
        if not backends.available(name):
            pytest.skip(f"backend {name!r} cannot run here (extra missing, or no GPU: tests/cuda runs it "
                        "on the simulator)")
        yield name


@dataclass(frozen=True)
class Refused:
    """A case a backend refuses: the error, what its message must say, and why."""

    error: type
    says: str  # a regex: the construct, and for lane code the user's file:line
    reason: str


def at(fn, text: str) -> str:
    """``conformance.py:LINE`` of the line of ``fn`` holding ``text`` (a regex, escaped)."""
    lines, first = inspect.getsourcelines(fn)
    line = first + next(k for k, s in enumerate(lines) if text in s)
    return re.escape(f"conformance.py:{line}")


#: backend -> case (or ``lane_error``) -> how it is refused.  Everything else matches
#: the reference; a refused case that starts to run fails here (then move it out).
REFUSED = {"tpu": {
    "lane_arrays": Refused(lw.LaneCompileError, r"calling np.zeros is not supported on the tpu backend \(.*"
                           + at(conformance.cumulative, "np.zeros"),
                           "a lane allocating an array: a kernel's lanes hold numbers and read-only rows"),
    "uint64_with_literals": Refused(
        lw.LaneTypeError, r"the integer 6364136223846793005 does not fit the TPU's int32.*"
        + at(conformance.hash_mix, "6364136223846793005"),
        "a 64-bit constant in integer arithmetic has no int32 value (NumPy's int32 raises OverflowError too)"),
    "complex_division_by_zero": Refused(lw.LaneTypeError, r"argument z is complex64.*two float32 arrays",
                                        "the TPU computes no complex numbers"),
    "lane_error": Refused(lw.LaneCompileError, r"the statement raise is not supported on the tpu backend \(.*"
                          + at(conformance.checked_sqrt, "raise ValueError"),
                          "raise in a lane: a kernel raises nothing (its lanes cannot stop the call)"),
}}


def refused_or_run(backend: str, name: str, run, *args):
    """``run(*args, backend)``, or, where :data:`REFUSED` lists ``name``, its error."""
    refusal = REFUSED.get(backend, {}).get(name)
    if refusal is None:
        return run(*args, backend)
    with pytest.raises(refusal.error, match=refusal.says):
        run(*args, backend)


@pytest.mark.parametrize("case", MAP_CASES + REDUCE_CASES, ids=lambda c: c.name)
def test_matches_the_reference(backend, case):
    refused_or_run(backend, case.name, run_case, case)


def test_protocol(backend):
    run_protocol(backend)


def test_out(backend):
    run_out(backend)


def test_lane_error(backend):
    refused_or_run(backend, "lane_error", run_lane_error)


def test_explain(backend):
    run_explain(backend)


def test_refusals_name_cases_of_the_suite():
    """Every refusal names a case (no stale row) and gives its reason."""
    names = {c.name for c in MAP_CASES + REDUCE_CASES} | {"lane_error"}
    for backend, table in REFUSED.items():
        assert backend in backends.NAMES
        assert set(table) <= names, set(table) - names
        assert all(r.reason and r.says for r in table.values())


def test_registry_is_the_only_list_of_backends():
    """Adding a backend is one registry entry: the suite is parametrised from it."""
    assert set(backends.NAMES) >= {"cpu", "python", "cuda", "dask"}
    assert all(backends.REGISTRY[n].name == n for n in backends.NAMES)
