"""Lanes of more than 30 parameters compile and run on every backend (issue 42).

CPython compiles a call of more than 30 arguments to ``CALL_FUNCTION_EX`` (a
``*args`` tuple), which Numba's inliner rejects ("Calling a closure with *args is
unsupported"), and Numba cannot compile inside a ``try`` at all.  The generated
kernels pass the arguments past the 30th by keyword (``codegen.common.call``) and
pack them into one tuple for the calls inside a ``try`` (``codegen.common.caught``).
Every result is checked against the lane run in plain Python lane by lane, or NumPy.
The lanes (tests/many_lanes.py) are written to a file and imported, as a user's are.
"""

from __future__ import annotations

import importlib.util
import os

import numba
import numpy as np
import pytest

import lanewise as lw
import many_lanes as ml
from lanewise.codegen.common import call, caught
from lanewise.lane.lanefn import CALL_LIMIT

BACKENDS = ["python", "cpu"] + (["dask"] if importlib.util.find_spec("dask") else [])
ARGS = ml.arguments()


@pytest.fixture(scope="module")
def lanes(tmp_path_factory):
    return ml.load(tmp_path_factory.mktemp("many_lanes"))


# ----------------------------------------------------------------------------- the call renderer


def _exec_call(source: str, fn):
    """Evaluate the rendered call ``source`` in plain Python, calling ``fn``."""
    return eval(source, {"f": fn, "v": list(range(100))})  # noqa: S307 - our own rendered call


def test_call_is_unchanged_up_to_the_limit_and_keyword_past_it():
    params = [f"p{k}" for k in range(40)]
    args = [f"v[{k}]" for k in range(40)]
    assert call("f", args[:CALL_LIMIT], params) == f"f({', '.join(args[:CALL_LIMIT])})"
    wide = call("f", args, params)
    assert wide.startswith(f"f({', '.join(args[:CALL_LIMIT])}, p{CALL_LIMIT}=v[{CALL_LIMIT}]")
    assert wide.count("=") == 40 - CALL_LIMIT

    def f(*p0_to_p39, **kw):  # a stand-in with the same parameter names
        return list(p0_to_p39) + [kw[f"p{k}"] for k in range(len(p0_to_p39), 40)]
    assert _exec_call(wide, f) == list(range(40))


def test_call_keeps_positional_only_arguments_positional():
    args = [f"v[{k}]" for k in range(40)]
    params = [None] * 34 + [f"p{k}" for k in range(34, 40)]  # the first 34 positional-only
    rendered = call("f", args, params)
    assert "v[33], p34=v[34]" in rendered and rendered.count("=") == 6
    # none can be passed by keyword: positional as written (a compiled callee, not inlined)
    assert call("f", args, [None] * 40) == f"f({', '.join(args)})"
    # a call that has keywords already is one Numba unwraps as it is
    assert call("f", args, params, [("k", "1")]) == f"f({', '.join(args)}, k=1)"


def test_caught_packs_a_wide_call_into_a_tuple_outside_the_try():
    params = [f"x{k}" for k in range(CALL_LIMIT + 5)] + ["lo"]
    narrow = caught("work", params[-4:], "doc")
    assert "_lw_args" not in narrow and "work(x32, x33, x34, lo, at)" in narrow
    source = caught("work", params, "doc")
    body = source.split("def work_caught")[1]
    assert body.index("_lw_args = (") < body.index("try:")
    work = numba.njit(_plain_function("work", params + ["at"],
                                      ["at[0] = lo + 2", "if x0 + x34 > 100.0:", "    raise ValueError('x0')"]))
    namespace = {"numba": numba, "np": np, "int64": np.int64, "work": work}
    exec(source.replace("cache=True", "cache=False"), namespace)  # no file to cache it by
    values = [float(k) for k in range(CALL_LIMIT + 5)]
    assert namespace["work_caught"](*values, 3) == -1
    assert namespace["work_caught"](*([200.0] + values[1:]), 3) == 5  # at[0] as the callee left it


def _plain_function(name: str, params, body) -> object:
    namespace: dict = {}
    exec(f"def {name}({', '.join(params)}):\n" + "".join(f"    {line}\n" for line in body), namespace)
    return namespace[name]


# ----------------------------------------------------------------------------- lw.vmap


def _keywords(lanes):
    """wsum with its last parameters passed by keyword."""
    kw = {f"a{i}": ARGS[i] for i in range(30, ml.N)}
    return lanes.wsum, ARGS[:30], kw, {}, ml.weighted(ARGS)


def _unmapped(lanes):
    """wsum with 16 unmapped scalars (uniform across the lanes)."""
    args = ARGS[:20] + [0.5 * i for i in range(20, ml.N)]
    in_axes = (0,) * 20 + (None,) * (ml.N - 20)
    return lanes.wsum, args, {}, {"in_axes": in_axes}, ml.per_lane(lanes.wsum, args, in_axes)


def _simple(name, args=None):
    def case(lanes):
        fn, a = getattr(lanes, name), args or ARGS
        return fn, a, {}, {}, ml.per_lane(fn, a)
    return case


CASES = {
    "wsum": _simple("wsum"),
    "while_loop": _simple("divergent"),
    "helper_of_36_arguments": _simple("calls_helper"),
    "positional_only": _simple("posonly"),
    "positional_only_then_keywords": _simple("posonly_tail"),
    "20_positional_only": _simple("posonly_few"),
    "scan_inside": _simple("with_scan"),
    "tuple_result": _simple("two_results"),
    "36_results": _simple("many_results", ARGS[:1]),
    "keyword_arguments": _keywords,
    "unmapped_arguments": _unmapped,
}


def _assert_matches(got, want):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-13)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-13)


@pytest.mark.parametrize("backend", BACKENDS)
def test_vmap_of_a_36_parameter_lane(lanes, backend):
    _assert_matches(lw.vmap(lanes.wsum, backend=backend)(*ARGS), ml.weighted(ARGS))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(CASES))
def test_wide_lanes_match_plain_python(lanes, case, backend):
    fn, args, kwargs, vmap, want = CASES[case](lanes)
    _assert_matches(lw.vmap(fn, backend=backend, **vmap)(*args, **kwargs), want)


def test_nested_vmap_of_a_wide_lane(lanes):
    inner = lw.vmap(lanes.wsum, in_axes=(0,) * (ml.N - 1) + (None,))
    outer = lw.vmap(inner, in_axes=(None,) * (ml.N - 1) + (0,))
    got = outer(*ARGS[:-1], ARGS[-1])
    want = ml.weighted(ARGS[:-1] + [0.0])[None, :] + ml.N * ARGS[-1][:, None]
    np.testing.assert_allclose(got, want, rtol=1e-13)


@pytest.mark.parametrize("name", ["wsum", "divergent"])
def test_wide_lanes_on_the_spmd_path(lanes, name):
    fn = getattr(lanes, name)
    with lw.config.overridden(spmd=True):
        mapped = lw.vmap(fn)
        assert "lane path: SPMD" in str(lw.explain(mapped, *ARGS))
        got = mapped(*ARGS)
    np.testing.assert_allclose(got, ml.per_lane(fn, ARGS), rtol=1e-13)


def test_positional_only_lane_is_called_not_inlined_and_says_why(lanes):
    text = str(lw.explain(lw.vmap(lanes.posonly), *ARGS))
    assert f"more than {CALL_LIMIT} positional-only parameters" in text
    assert f"more than {CALL_LIMIT} positional-only parameters" in str(lw.explain(lw.vmap(lanes.posonly_tail), *ARGS))
    # a lane of fewer positional-only parameters is inlined as usual
    assert "inlined into the lane loop" in str(lw.explain(lw.vmap(lanes.posonly_few), *ARGS))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_wide_lane_that_raises_reports_the_lane(lanes, backend):
    with pytest.raises(ValueError, match="a0 above one half"):
        np.asarray(lw.vmap(lanes.raises, backend=backend)(*ARGS))  # dask: computed here


# ----------------------------------------------------------------------------- reduce, grad, fuse


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op, numpy", [("sum", np.sum), ("max", np.max), ("argmax", np.argmax)])
def test_reduce_of_a_wide_lane(lanes, op, numpy, backend):
    got = lw.reduce(lw.vmap(lanes.wsum, backend=backend), op)(*ARGS)
    np.testing.assert_allclose(got, numpy(ml.weighted(ARGS)), rtol=1e-13)


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "python"])
def test_reduce_of_a_wide_lane_that_raises(lanes, backend):
    # dask's tasks run the reduction through rblock_caught: the call inside its try
    with pytest.raises(ValueError, match="a0 above one half"):
        np.asarray(lw.reduce(lw.vmap(lanes.raises, backend=backend), "sum")(*ARGS))


def test_grad_of_a_wide_lane_for_every_argument(lanes):
    got = lw.vmap(lw.grad(lanes.smooth, argnums=tuple(range(ml.N))))(*ARGS)
    cos = np.cos(ml.weighted(ARGS))
    assert len(got) == ml.N
    for i, g in enumerate(got):
        np.testing.assert_allclose(g, (i + 1.0) * cos, rtol=1e-12)


def _weighted_sum(*xs):
    total = xs[0] * 1.0
    for i, x in enumerate(xs[1:], 2):
        total = total + i * x
    return total


def test_fuse_of_36_inputs():
    np.testing.assert_allclose(lw.fuse(_weighted_sum)(*ARGS), ml.weighted(ARGS), rtol=1e-13)
    np.testing.assert_allclose(lw.fuse(lambda *xs: _weighted_sum(*xs).sum())(*ARGS), ml.weighted(ARGS).sum(),
                               rtol=1e-13)


@pytest.mark.slow
def test_a_compiled_caller_runs_a_wide_lane(lanes):
    """lw.jax.op's XLA handler runs the kernels made for compiled callers (lane_block_caught)."""
    jax = pytest.importorskip("jax")
    op = jax.jit(lw.jax.op(lw.vmap(lanes.wsum)))
    np.testing.assert_allclose(np.asarray(op(*[jax.numpy.asarray(a) for a in ARGS])), ml.weighted(ARGS),
                               rtol=1e-13)


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", reason="PTX needs the real numba-cuda")
@pytest.mark.parametrize("name", ["wsum", "posonly", "two_results"])
def test_wide_lanes_compile_to_ptx(lanes, name):
    pytest.importorskip("numba.cuda")
    from lanewise.backends import cuda as lw_cuda
    kernels = lw_cuda.compile_kernels(lw.vmap(getattr(lanes, name), backend="cuda"), *ARGS, cc=(9, 0))
    assert all(".visible .entry" in ptx for ptx in kernels.values())
    reduce = lw_cuda.compile_kernels(lw.reduce(lw.vmap(lanes.wsum, backend="cuda"), "sum"), *ARGS, cc=(9, 0))
    assert set(reduce) >= {"rkernel"}

