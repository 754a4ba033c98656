"""A read out of bounds inside a derived lane (lw.grad, lw.jacrev, ...) raises on every backend.

The spec is ``backend="python"``: ``p[5]`` on a 3-element ``p`` raises
:class:`lanewise.LaneIndexError` naming the index, the lane and the user's line, also
when the value read is never used or feeds only the primal value a derivative drops.
Before the fix the cpu backend returned numbers for every derived lane of these:
Numba's dead-code elimination, which runs once it inlines the autodiff intrinsics,
deleted the unused read with its bounds check (``lanewise.lane.kept_reads``).

The tpu backend raises the same error, derived lane or not: its kernel records a live
lane's read out of range, literal index or computed (backends/tpu/bounds.py).
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import lanewise as lw


def unused(p, x):
    y = p[5]  # noqa: F841 - an out-of-range read whose value is unused
    return x * x


def negative(p, x):
    y = p[-5]  # noqa: F841
    return x * x


def in_loop(p, x):
    s = x
    for i in range(3):
        y = p[i + 3]  # noqa: F841
        s = s * x
    return s


def in_branch(p, x):
    if x >= 0.0:
        y = p[7]  # noqa: F841
    return x * x


def primal_only(p, x):
    return x * x + p[5]  # no derivative flows through the read: a gradient drops it


#: lane -> (the index that is out of bounds, text of the line that reads it)
LANES = {unused: (5, "y = p[5]"), negative: (-5, "y = p[-5]"), in_loop: (3, "y = p[i + 3]"),
         in_branch: (7, "y = p[7]"), primal_only: (5, "return x * x + p[5]")}


def jvp_in_lane(f):
    """``lw.jvp`` called inside the lane (compiled as an overload, not a transformed lane)."""
    def lane(p, x):
        return lw.jvp(f, (p, x), (p * 0.0, 1.0))[1]
    return lane


TRANSFORMS = {
    "plain": lambda f: f,
    "grad": lambda f: lw.grad(f, argnums=1),
    "value_and_grad": lambda f: lw.value_and_grad(f, argnums=1),
    "jacfwd": lambda f: lw.jacfwd(f, argnums=1),
    "jacrev": lambda f: lw.jacrev(f, argnums=1),
    "hessian": lambda f: lw.hessian(f, argnums=1),
    "jvp": jvp_in_lane,
}


def error_of(lane, backend, dtype=np.float64):
    """The exception ``lw.vmap(lane)`` raises on ``backend`` (a failure when it returns)."""
    p, x = np.arange(3.0, dtype=dtype), np.arange(4.0, dtype=dtype)
    with pytest.raises(lw.LanewiseError) as info:
        out = lw.vmap(lane, in_axes=(None, 0), backend=backend)(p, x)
        np.asarray(out.compute() if hasattr(out, "compute") else out)
    return info.value


def where(fn, needle: str) -> str:
    """``file:line`` of the line of ``fn`` holding ``needle``."""
    lines, first = inspect.getsourcelines(fn)
    return f"{inspect.getsourcefile(fn)}:{first + next(k for k, s in enumerate(lines) if needle in s)}"


def assert_same_error(lane, fn, backend):
    want, got = error_of(lane, "python"), error_of(lane, backend)
    index, needle = LANES[fn]
    assert isinstance(want, lw.LaneIndexError) and f"index {index} is out of bounds" in str(want)
    assert f"{where(fn, needle)}: {needle}" in str(want), str(want)  # the user's file and line
    assert type(got) is type(want) and str(got) == str(want)


@pytest.mark.parametrize("name", TRANSFORMS)
@pytest.mark.parametrize("fn", [unused, primal_only], ids=lambda f: f.__name__)
def test_every_transform_keeps_the_check_of_a_read_on_cpu(fn, name):
    assert_same_error(TRANSFORMS[name](fn), fn, "cpu")


@pytest.mark.parametrize("name", ["grad", "jacrev", "hessian"])
@pytest.mark.parametrize("fn", [negative, in_loop, in_branch], ids=lambda f: f.__name__)
def test_negative_indices_loops_and_branches_keep_their_checks(fn, name):
    assert_same_error(TRANSFORMS[name](fn), fn, "cpu")


@pytest.mark.parametrize("spmd", [True, False])
@pytest.mark.parametrize("fn", [unused, in_loop], ids=lambda f: f.__name__)
def test_the_spmd_path_keeps_the_check(fn, spmd):
    with lw.config.overridden(spmd=spmd):
        assert_same_error(lw.grad(fn, argnums=1), fn, "cpu")


@pytest.mark.parametrize("name", ["grad", "jacrev"])
def test_dask_keeps_the_check(name):
    pytest.importorskip("dask")
    assert_same_error(TRANSFORMS[name](unused), unused, "dask")


def test_a_plain_lane_inlining_an_overload_keeps_the_check():
    """Not only derivatives: ``np.where`` is an inline overload too (before the fix the
    kernel raised and its replay did not: "failed ... but not when replayed")."""
    def lane(p, x):
        y = p[5]  # noqa: F841
        return np.where(x > 1.0, x, 0.0)

    want, got = error_of(lane, "python"), error_of(lane, "cpu")
    assert isinstance(want, lw.LaneIndexError) and type(got) is type(want) and str(got) == str(want)


@pytest.mark.parametrize("name", ["plain", "grad", "value_and_grad", "jacfwd", "hessian"])
@pytest.mark.parametrize("fn", [unused, in_branch, primal_only], ids=lambda f: f.__name__)
def test_tpu_raises_python_s_error_for_a_literal_index_out_of_range_in_every_derived_lane(fn, name):
    """A literal index out of range is checked like a computed one on the tpu: the live
    lanes that read it raise python's LaneIndexError (docs/tpu.md, "Rows and scans")."""
    pytest.importorskip("jax")
    lane = TRANSFORMS[name](fn)
    with lw.config.overridden(tpu_interpret=True):
        want, got = error_of(lane, "python", np.float32), error_of(lane, "tpu", np.float32)
    _, needle = LANES[fn]
    assert isinstance(want, lw.LaneIndexError) and f"{where(fn, needle)}: {needle}" in str(want)
    assert type(got) is type(want) and str(got) == str(want)
