"""Every lane of tests/corpus.py on backend="tpu", 32-bit, diff-tested against the reference.

Each corpus lane runs with each of its dtypes in 32 bits (``conformance.narrowed``:
float64 -> float32, int64 -> int32) on the tpu backend -- its Pallas kernel in
interpret mode where no TPU is attached -- and on ``backend="python"`` with the
same arguments, flat (one vmap level) and as a plane (two levels, the last 130
lanes wide, an argument mapped at the outer level only travelling as a column);
results compared by ``conformance.assert_same_32`` (floats within a float32
tolerance, ints and bools exactly, after the 32-bit wrap).  What the tpu refuses
is listed in :data:`REFUSED` with the error it must raise and why.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("jax")
import jax  # noqa: E402

import lanewise as lw  # noqa: E402
from conformance import assert_same_32, narrowed, to_numpy  # noqa: E402
from corpus import BY_NAME, CORPUS, lane_values  # noqa: E402

#: A corpus dtype as the 32-bit run takes it.
NARROW = {"float64": "float32", "int64": "int32", "uint64": "int32", "complex128": "complex64"}
#: Lanes of a flat call (a partial tile: padding lanes run too); the plane's (rows, columns).
FLAT, PLANE = 300, (3, 130)


#: The settings each run takes: small tiles and rounds of 2 iterations with rows of 4, and
#: lanewise's own defaults (lw.config's tile and unroll) with rows of 17, a trip count no
#: round divides (rounds that overshoot a range's end once gave wrong results there).
DEFAULTS = type(lw.config)()  # what lw.config holds in a fresh process (the environment's overrides included)
SETTINGS = {"unroll2-rows4": (dict(tpu_tile=(8, 128), tpu_unroll=2), 4),
            "defaults-rows17": (dict(tpu_tile=DEFAULTS.tpu_tile, tpu_unroll=DEFAULTS.tpu_unroll), 17)}


@pytest.fixture(autouse=True)
def interpret():
    with lw.config.overridden(tpu_interpret=jax.default_backend() != "tpu", tpu_tile=(8, 128), tpu_unroll=2):
        yield


def runs():
    """(lane name, 32-bit dtype) of every corpus lane, each dtype once."""
    return [(e.name, d) for e in CORPUS for d in dict.fromkeys(NARROW.get(d, d) for d in e.dtypes)]


_COMPLEX = ("the TPU computes no complex numbers", lw.LaneTypeError,
            r"argument (x|z|a) is complex64.*two float32 arrays \(real, imaginary\)")
_WHOLE_ROW = ("arithmetic on whole rows (a lane reads its row by index, len or lw.scan)", lw.LaneCompileError,
              r"a row as an operand of mul .* is not supported on the tpu backend \(.*corpus.py:\d+\)")

#: (lane, dtype) -> (reason, error, what the message says).  Every other run matches the reference.
REFUSED = {
    ("arith", "complex64"): _COMPLEX,
    ("cplx", "complex64"): _COMPLEX,
    ("dot", "complex64"): _COMPLEX,
    ("scale_row", "float32"): _WHOLE_ROW,
    ("row_and_head", "float32"): _WHOLE_ROW,
}


def arguments(entry, dtype, shape, row=4):
    """The lane's arguments of lane shape ``shape`` (a static ``k`` one Python int, a row
    ``row`` values) and in_axes for one vmap level."""
    rng = np.random.default_rng(len(entry.name))
    args, axes = [], []
    for kind in entry.kinds:
        if kind == "k":
            args.append(int(rng.integers(*entry.static)))
            axes.append(None)
        else:
            args.append(lane_values(rng, shape + ((row,) if kind == "r" else ()), dtype, entry.domain))
            axes.append(0)
    return narrowed(tuple(args)), tuple(axes)


def flat(entry, dtype, backend, row=4):
    args, axes = arguments(entry, dtype, (FLAT,), row)
    return lw.vmap(entry.lane, in_axes=axes, backend=backend)(*args)


def plane(entry, dtype, backend, row=4):
    """Two levels: the first argument one value per lane, the others one per row of the plane."""
    args, axes = arguments(entry, dtype, PLANE, row)
    args = tuple(a if k == 0 or ax is None else a[:, 0] for k, (a, ax) in enumerate(zip(args, axes, strict=True)))
    inner = tuple(ax if k == 0 else None for k, ax in enumerate(axes))
    return lw.vmap(lw.vmap(entry.lane, in_axes=inner), in_axes=axes, backend=backend)(*args)


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("layout", [flat, plane], ids=["flat", "plane"])
@pytest.mark.parametrize("name, dtype", runs(), ids=[f"{n}-{d}" for n, d in runs()])
def test_corpus_lane_matches_the_reference_in_32_bits(name, dtype, layout, setting):
    entry = BY_NAME[name]
    options, row = SETTINGS[setting]
    refusal = REFUSED.get((name, dtype))
    with lw.config.overridden(**options):
        if refusal is not None:
            _reason, error, says = refusal
            with pytest.raises(error, match=says):
                layout(entry, dtype, "tpu", row)
            return
        assert_same_32(layout(entry, dtype, "tpu", row), layout(entry, dtype, "python", row))


def test_refusals_name_runs_of_the_corpus():
    assert set(REFUSED) <= set(runs())
    assert all(reason for reason, _error, _says in REFUSED.values())


def test_int32_overflow_wraps_against_the_reference_wrapped():
    """arith's ``x * x + 3 * y - 1`` beyond int32: the tpu wraps at 32 bits (docs/tpu.md T06),
    the reference computes exact ints; equal modulo 2**32."""
    x = np.array([2**16, 46341, -(2**20), 7, 2**31 - 1], np.int32)
    y = np.array([2**30, -(2**30), 5, 2**29, 1], np.int32)
    got = np.asarray(lw.vmap(BY_NAME["arith"].lane, backend="tpu")(x, y))
    exact = x.astype(object) * x + 3 * y.astype(object) - 1
    want = [(int(v) + 2**31) % 2**32 - 2**31 for v in exact]
    assert got.dtype == np.int32 and got.tolist() == want
    assert_same_32(got, lw.vmap(BY_NAME["arith"].lane, backend="python")(x, y))


# ----------------------------------------------------------------------------- found by the 32-bit run


def wide_literals(x, n):
    return x * 2**40, n < 2**63, 2**40 > n, n == -(2**40), n != 18446744073709551615, x < 2**31


def test_int_literals_beyond_int32_beside_floats_and_in_comparisons_are_computed():
    """A Python int beyond int32 beside a float32 is that float (NumPy 2's weak scalar);
    compared with an int32 it decides every lane (all int32 values lie on one side of
    it).  JAX raised OverflowError, naming no line."""
    x = np.array([1.5, -3.0, 2.0**31], np.float32)
    n = np.array([-(2**31), 0, 2**31 - 1], np.int32)
    got = lw.vmap(wide_literals, backend="tpu")(x, n)
    assert [np.asarray(g).dtype for g in got] == [np.float32] + [np.bool_] * 5
    assert_same_32(got, lw.vmap(wide_literals, backend="python")(x, n))


def test_int_literals_beyond_int32_in_integer_arithmetic_are_refused_with_the_line():
    def lane(n):
        return n * 6364136223846793005 + 1

    line = lane.__code__.co_firstlineno + 1
    with pytest.raises(lw.LaneTypeError, match=rf"the integer 6364136223846793005 does not fit the TPU's int32"
                                               rf".*\(.*test_tpu_corpus\.py:{line}\).*{re.escape('6.36')}"):
        lw.vmap(lane, backend="tpu")(np.arange(4, dtype=np.int32))


EDGES = np.array([-np.inf, -2.5, -0.0, 0.0, 0.5, 1.5, 2.5, np.inf, np.nan, 3.0], np.float32)


def python_max_min(x, y):
    return max(x, y), min(x, y), max(y, x), min(y, x), max(x, 1), min(2, x)


def test_builtin_max_and_min_are_pythons_first_of_equals_and_nan_where_first():
    """Python's ``max(a, b)`` is ``b if b > a else a``: ``max(1.0, nan)`` is 1.0 and
    ``max(-0.0, 0.0)`` -0.0.  The tpu gave NumPy's ``np.maximum`` (nan, 0.0): wrong numbers."""
    x, y = EDGES, EDGES[::-1].copy()
    got = to_numpy(lw.vmap(python_max_min, backend="tpu")(x, y))
    want = lw.vmap(python_max_min, backend="python")(x, y)
    assert_same_32(got, want)
    for g, w in zip(got, want, strict=True):  # the zeros' signs too
        np.testing.assert_array_equal(np.signbit(g), np.signbit(w))
    assert np.asarray(got[0])[1] == -2.5 and np.isnan(np.asarray(got[0])[8])  # max(-2.5, nan), max(nan, -2.5)


def rounded(x, n):
    return round(x), np.round(x), round(n), np.round(n)


def test_round_halves_to_even_as_python_and_numpy():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999997, -3.7, 1e6 + 0.5, 7.0], np.float32)
    n = np.arange(-5, 5, dtype=np.int32)
    got = lw.vmap(rounded, backend="tpu")(x, n)
    assert [np.asarray(g).dtype for g in got] == [np.int32, np.float32, np.int32, np.int32]
    assert_same_32(got, lw.vmap(rounded, backend="python")(x, n))


def test_an_int_to_a_negative_literal_power_is_refused_with_the_line():
    def lane(n):
        return n ** -1

    line = lane.__code__.co_firstlineno + 1
    with pytest.raises(lw.LaneTypeError, match=rf"negative power -1 .*test_tpu_corpus\.py:{line}.*float\(n\)"):
        lw.vmap(lane, backend="tpu")(np.arange(1, 5, dtype=np.int32))
    x = np.arange(1, 5, dtype=np.float32)  # a float base is computed
    assert_same_32(lw.vmap(lane, backend="tpu")(x), lw.vmap(lane, backend="python")(x))


def test_a_product_of_bools_is_an_int_as_numpys():
    """np.prod of bools is an int (0 or 1); the tpu gave a bool."""
    x = np.linspace(-1, 3, 300, dtype=np.float32)
    for data in (x, np.abs(x) + 1):
        def product(backend):
            return lw.reduce(lw.vmap(lambda v: v > 0, backend=backend), "prod")(data)

        got, want = np.asarray(product("tpu")), np.asarray(product("python"))
        assert got.dtype.kind == want.dtype.kind == "i" and got == want


def int_quotients(a, b):
    return a // b, a % b, np.floor_divide(a, b), a // 0


def test_an_int_divided_by_zero_is_zero_as_numpys_int32():
    """NumPy's int32 (the reference) gives 0 for ``a // 0`` and ``a % 0``; the tpu gave -2
    and -1 (XLA's integer division by zero, floored): wrong numbers."""
    a = np.array([7, -7, 0, 2**31 - 1, -(2**31), 5, -5], np.int32)
    b = np.array([0, 0, 0, 0, 0, -2, 3], np.int32)
    got = lw.vmap(int_quotients, backend="tpu")(a, b)
    assert np.asarray(got[0]).tolist() == [0, 0, 0, 0, 0, -3, -2]
    assert_same_32(got, lw.vmap(int_quotients, backend="python")(a, b))


def test_a_lane_without_source_text_may_return_a_tuple():
    """A lane exec'd from a string (or piped into python) is rebuilt from bytecode as one
    loop over its basic blocks; the tuple it returns is built in a local of that loop,
    which entered as a bool placeholder: refused ("a local holds a tuple on one path")."""
    namespace = {}
    exec(compile("def steps(x, n):\n"
                 "    k = 0\n"
                 "    while x < n:\n"
                 "        x = x * 2.0\n"
                 "        k += 1\n"
                 "    return k, x\n", "<string>", "exec"), namespace)
    lane = namespace["steps"]
    x = np.linspace(0.1, 3.0, 40, dtype=np.float32)
    n = np.arange(40, dtype=np.int32)
    assert_same_32(lw.vmap(lane, backend="tpu")(x, n), lw.vmap(lane, backend="python")(x, n))


LABEL = "not a number"


def reads_a_string_global(x):
    y = x + 1.0
    return y * LABEL


def reads_a_local_of_the_loop(x, n):
    for i in range(n):
        last = x * i
    return last


@pytest.mark.parametrize("lane, line, says", [
    (reads_a_string_global, 2, "the global LABEL is not a number"),
])
def test_refusals_of_a_name_point_at_its_statement(lane, line, says):
    """Errors about a global, a constant or a local name the user's file:line of the
    statement (they named the function only)."""
    line += lane.__code__.co_firstlineno
    with pytest.raises(lw.LaneCompileError, match=rf"{says}.*\({lane.__name__}, .*test_tpu_corpus\.py:{line}\)"):
        lw.vmap(lane, in_axes=(0,) + (None,) * (lane.__code__.co_argcount - 1), backend="tpu")(
            np.ones(4, np.float32), *([np.int32(3)] * (lane.__code__.co_argcount - 1)))


def test_a_local_of_the_loop_read_unbound_names_its_statement():
    """A local first assigned in a loop is read after it (it crosses the loop's end in
    the carry); a lane whose loop ran no iteration raises Python's error at the read."""
    line = reads_a_local_of_the_loop.__code__.co_firstlineno + 3
    x = np.linspace(0.0, 1.0, 4).astype(np.float32)
    mapped = lw.vmap(reads_a_local_of_the_loop, in_axes=(0, None), backend="tpu")
    np.testing.assert_allclose(mapped(x, np.int32(3)), 2.0 * x)
    with pytest.raises(lw.LaneUnboundError, match=rf"'last'.*lane i0=0 of .*test_tpu_corpus\.py:{line}"):
        mapped(x, np.int32(0))


def bowl(a, c):
    return -(a - 1.0) ** 2 - (c - 0.5) ** 2 + 0.1 * a * c


@pytest.mark.parametrize("op", ["argmin", "argmax"])
def test_argmin_and_argmax_give_numpys_flat_index_of_the_mapped_result(op):
    """NumPy's index over the result as out_axes places it (the same lanes, transposed,
    give another index), the first of ties, the first NaN."""
    a, c = np.linspace(-2, 3, 7, dtype=np.float32), np.linspace(-1, 2, 5, dtype=np.float32)

    def grid(backend, out_axes):
        return lw.reduce(lw.vmap(lw.vmap(bowl, in_axes=(0, None)), in_axes=(None, 0), out_axes=out_axes,
                                 backend=backend), op)

    got = [int(grid("tpu", oa)(a, c)) for oa in (0, 1)]
    assert got == [int(grid("python", oa)(a, c)) for oa in (0, 1)] and got[0] != got[1]
    for x in ([3.0, np.nan, 1.0, np.nan, 1.0], [2.0, 1.0, 1.0, 5.0, 5.0]):
        x = np.array(x, np.float32)

        def flat(backend):
            return lw.reduce(lw.vmap(lambda v: v * 1.0, backend=backend), op)(x)

        assert int(flat("tpu")) == int(flat("python")) == getattr(np, op)(x)
    with pytest.raises(lw.EmptyReductionError, match=f"{op} over zero lanes"):
        lw.reduce(lw.vmap(lambda v: v * 1.0, backend="tpu"), op)(np.zeros(0, np.float32))
