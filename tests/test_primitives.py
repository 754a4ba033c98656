"""The primitive table: every reference meaning against NumPy, every jvp against a
finite difference, the one missing-rule error, and the consumers' tables drawn from it."""

from __future__ import annotations

import math
import operator

import numpy as np
import pytest

from lanewise import primitives
from lanewise.primitives import REGISTRY, UnsupportedPrimitive, lookup, named, result_dtype, rule

#: Argument dtypes a primitive of each kind is checked at.
_DTYPES = {"b": ["bool"], "i": ["int64", "int32"], "f": ["float64", "float32"], "c": ["complex128"]}
_DEFAULT = {"b": (True, False, True), "i": (1, 2, 3), "f": (0.25, 0.5, 0.75), "c": (0.5 + 0.25j, 1.0, -0.5j)}
_ROW = np.array([3.0, -1.0, 2.0, 0.5])

ALL = list(REGISTRY)
ELEMENTWISE = [p for p in ALL if p.category != "row" and p.category != "iteration"]


def _samples(prim, kind):
    """Argument tuples of ``kind`` inside ``prim``'s domain (each argument a rotation of the values)."""
    values = prim.domain if prim.domain and kind == "f" else _DEFAULT[kind]
    n = len(values)
    return [tuple(values[(i + k) % n] for k in range(prim.arity)) for i in range(n)]


def _close(got, want):
    got, want = np.asarray(got), np.asarray(want)
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(got.astype(want.dtype), want, rtol=1e-12, atol=1e-15)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("prim", ELEMENTWISE, ids=lambda p: p.name)
def test_every_denoting_object_computes_the_reference_meaning(prim):
    # Python-scalar arguments: what a lane passes to math.exp, abs, operator.add, np.exp alike.
    objects = prim.denoting() or (prim.reference,)
    kinds = [k for k in prim.kinds if k != "c" or prim.numpy]  # math/builtins take no complex
    assert kinds, prim.name
    for kind in kinds:
        for args in _samples(prim, kind):
            want = prim.reference(*args)
            for obj in objects:
                if kind == "c" and not isinstance(obj, np.ufunc):
                    continue
                _close(obj(*args), want)


@pytest.mark.parametrize("prim", ELEMENTWISE, ids=lambda p: p.name)
def test_the_dtype_rule_is_numpys(prim):
    if prim.dtype is None or prim.name == "cast":
        pytest.skip("no fixed result dtype")
    checked = 0
    for kind in prim.kinds:
        for dtype in _DTYPES[kind]:
            args = [np.asarray(v, dtype) for v in _samples(prim, kind)[0]]
            with np.errstate(all="ignore"):
                got = np.asarray(prim.reference(*args)).dtype
            assert got == result_dtype(prim.dtype, [a.dtype for a in args]), (prim.name, dtype)
            checked += 1
    assert checked


@pytest.mark.parametrize("prim", [p for p in ALL if p.category == "row"], ids=lambda p: p.name)
def test_row_primitives_compute_the_reference_on_rows(prim):
    args = (_ROW,) * prim.arity
    for obj in prim.denoting():
        _close(obj(*args), prim.reference(*args))
    assert np.asarray(prim.reference(*args)).dtype == result_dtype(prim.dtype, [_ROW.dtype] * prim.arity)


def test_range_iterates_as_arange():
    assert list(named("range").denoting()[0](4)) == named("range").reference(4).tolist()


# ----------------------------------------------------------------------------- jvp


def _evaluate(template, names):
    """A jvp template filled with literals, run as the lane code it is."""
    return eval(template.format(**names), {"np": np, "math": math})  # noqa: S307 - the table's own templates


def _jvp(prim, args, tangents, module="np"):
    """The tangent the prim's jvp rule gives (each template evaluated as lane code)."""
    jvp = prim.rules["jvp"]
    names = {"p": repr(float(prim.reference(*args))), "m": module,
             **{k: repr(float(a)) for k, a in zip("xy", args, strict=False)}}
    if jvp.unary is not None:
        return _evaluate(jvp.unary, {**names, "t": repr(tangents[0])})
    left = _evaluate(jvp.left, {**names, "t": repr(tangents[0]), "u": "0.0"})
    right = _evaluate(jvp.right, {**names, "t": "0.0", "u": repr(tangents[1])})
    return left + right


def _fd(prim, args, direction, h=1e-6):
    plus = [a + h * d for a, d in zip(args, direction, strict=True)]
    minus = [a - h * d for a, d in zip(args, direction, strict=True)]
    return (float(prim.reference(*plus)) - float(prim.reference(*minus))) / (2 * h)


_DIFFERENTIABLE = [p for p in ELEMENTWISE if p.rules.get("jvp") is not None and "f" in p.kinds]


_DIRECTIONS = {1: [(1.0,)], 2: [(1.0, 0.0), (0.0, 1.0), (0.5, -2.0)]}
_FLAT = (0.3, 1.3, -1.7)  # away from integers, zero and ties: where a zero-derivative primitive is flat


@pytest.mark.parametrize("prim", _DIFFERENTIABLE, ids=lambda p: p.name)
def test_every_jvp_rule_agrees_with_a_finite_difference(prim):
    zero = prim.rules["jvp"].zero
    samples = [tuple(_FLAT[(i + k) % 3] for k in range(prim.arity)) for i in range(3)] if zero \
        else _samples(prim, "f")
    for args in samples:
        args = [float(a) for a in args]
        if prim.arity == 2 and args[0] == args[1]:
            continue  # max/min ties: JAX's even split, not a derivative
        for direction in _DIRECTIONS[prim.arity]:
            want = _fd(prim, args, direction)
            got = 0.0 if zero else _jvp(prim, args, direction)
            assert got == pytest.approx(want, rel=1e-6, abs=1e-6), (prim.name, args, direction)


def test_jvp_rules_agree_with_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    for name in ("exp", "log1p", "arctan", "tanh", "hypot", "arctan2", "power", "fmod"):
        prim = named(name)
        args = [float(a) for a in _samples(prim, "f")[1]]
        direction = [1.0, -0.5][:prim.arity]
        _, want = jax.jvp(getattr(jnp, name), tuple(jnp.float64(a) for a in args),
                          tuple(jnp.float64(d) for d in direction))
        assert _jvp(prim, args, direction) == pytest.approx(float(want), rel=1e-12), name


# ----------------------------------------------------------------------------- the missing-rule error


def test_a_missing_rule_names_the_primitive_the_backend_and_the_line():
    with pytest.raises(UnsupportedPrimitive, match=r"^np\.logaddexp is not supported on the tpu backend "
                                                   r"\(model\.py:12\)$") as info:
        rule(lookup(np.logaddexp), "tpu", "model.py:12")
    assert isinstance(info.value, primitives.UnsupportedPrimitive.__mro__[1])  # a LaneCompileError
    with pytest.raises(UnsupportedPrimitive, match=r"^math\.isclose is not supported on the tpu backend \(m\.py:3\)$"):
        rule(lookup(math.isclose), "tpu", "m.py:3", math.isclose)
    with pytest.raises(UnsupportedPrimitive, match=r"^the operator << has no derivative \(jvp\) rule \(m\.py:3\)$"):
        rule(lookup(operator.lshift), "jvp", "m.py:3")
    with pytest.raises(UnsupportedPrimitive, match=r"^np\.nextafter has no derivative \(jvp\) rule \(m\.py:4\)$"):
        rule(lookup(np.nextafter), "jvp", "m.py:4")


def test_every_target_slot_is_read_through_rule():
    assert rule(named("exp"), "jvp", "x.py:1").unary == "{p} * {t}"
    assert rule(named("sqrt"), "spmd", "x.py:1").how == "instruction"
    with pytest.raises(ValueError, match="unknown target 'fpga'"):
        rule(named("exp"), "fpga", "x.py:1")
    assert rule(lookup(math.sqrt), "tpu", "x.py:1").op == "sqrt"


def test_every_tpu_rule_names_a_lowering_of_the_tpu_backend():
    pytest.importorskip("jax")
    from lanewise.backends.tpu.ops import lowering

    ops = {p.name: p.rules["tpu"].op for p in primitives.with_rule("tpu")}
    assert "add" in ops and "sqrt" in ops and "logaddexp" not in ops
    assert all(callable(lowering(op)) for op in ops.values())  # an OPS row, or jnp's function of that name


def test_the_error_reaches_the_user_from_a_differentiated_lane():
    import lanewise as lw

    def f(x):
        return np.logaddexp(x, 1.0)

    with pytest.raises(lw.LaneCompileError, match=r"np\.logaddexp has no derivative \(jvp\) rule") as info:
        lw.grad(f)(0.5)
    assert "test_primitives.py" in str(info.value)


def test_an_object_denotes_one_primitive():
    with pytest.raises(ValueError, match="denotes both"):
        registry = primitives.Registry()
        registry.register(named("exp"))
        registry.register(primitives.table.primitive("exp_again", np.exp, "float", 1, numpy=("exp",)))
    assert lookup(math.exp) is lookup(np.exp) is named("exp")
    assert lookup(np.abs) is named("absolute") and lookup(abs) is named("abs")
    assert lookup(print) is None and lookup([1]) is None


# ----------------------------------------------------------------------------- consumers


def _registered(obj) -> bool:
    return lookup(obj) is not None


def test_the_fusers_templates_are_registered_primitives():
    from lanewise.fuse import rules

    for name, template in rules.UFUNCS.items():
        assert _registered(getattr(np, name)), name
        assert lookup(getattr(np, name)).rules["numba"].template is template, name
    for name, template in rules.OTHER.items():
        assert named(name).rules["numba"].template is template


def test_autodiffs_rules_are_registered_primitives():
    from lanewise.autodiff import intrinsics, rules

    for fn, jvp in rules.RULES.items():
        assert fn is intrinsics.out or lookup(fn).rules["jvp"] is jvp, fn
    for fn in rules.ZERO:
        assert lookup(fn).rules["jvp"].zero, fn


def test_spmds_vector_instructions_are_registered_primitives():
    from lanewise.spmd import instructions

    for fn, (fop, iop) in instructions._NATIVE.items():
        vector = lookup(fn).rules["spmd"]
        assert (vector.how, vector.float, vector.integer) == ("instruction", fop, iop), fn
    for fn, predicate in instructions._CMP.items():
        assert lookup(fn).rules["spmd"].compare == predicate, fn
    for fn in instructions.INSTRUCTIONS:
        assert lookup(fn).rules["spmd"].how == "instruction", fn
    assert math.sqrt in instructions.INSTRUCTIONS and np.absolute in instructions.INSTRUCTIONS


def test_lanemaths_substitutes_are_registered_primitives():
    import lanewise.lanemath as lanemath

    for module, table, slot in ((math, lanemath.MATH, "vector_math"), (np, lanemath.NUMPY, None),
                                (np, lanemath.CORRECTIONS, "corrected")):
        for name, fn in table.items():
            numba = lookup(getattr(module, name)).rules["numba"]
            paths = [numba.vector_math, numba.corrected] if slot is None else [getattr(numba, slot)]
            assert fn.__name__ in {p.rpartition(".")[2] for p in paths if p}, name


def test_cudas_device_functions_are_registered_primitives():
    pytest.importorskip("numba.cuda")
    import subprocess
    import sys

    # in a fresh process: this one may have numba.cuda imported as the simulator
    code = ("from lanewise.backends.cuda import npmath; import numpy as np; from lanewise.primitives import lookup\n"
            "for name in npmath.REPLACEMENTS:\n"
            "    assert lookup(getattr(np, name)).rules['cuda'].kind != 'native', name\n"
            "print(sorted(npmath.REPLACEMENTS))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    if done.returncode and "CudaSupportError" in done.stderr:
        pytest.skip("numba-cuda cannot load here")
    assert done.returncode == 0, done.stderr
    assert "'exp'" in done.stdout and "'absolute'" in done.stdout
