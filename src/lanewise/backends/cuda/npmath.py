"""NumPy's scalar math for CUDA lanes, where numba-cuda types a ufunc but cannot lower it.

numba-cuda (0.30) accepts ``np.exp(x)`` in device code at typing time and then
fails with ``KeyError: <ufunc 'exp'>``: its ufunc table lacks exp, sqrt,
absolute, floor and others.  A CUDA lane's ``np`` (and names imported from
NumPy) is therefore rebound (lanefn.jit_lane_cuda) to :data:`numpy_for_lanes`:
NumPy itself, except these functions, which are stubs whose numba-cuda
overloads call ``math``/``cmath`` (libdevice on the GPU) for scalar arguments,
keeping NumPy's result dtypes (float32 stays float32).  Which functions, and how,
is each primitive's ``"cuda"`` rule (:mod:`lanewise.primitives`).

Only imported by the cuda backend for a real GPU or PTX compile (never under the
simulator, which runs the lane as Python with the real NumPy).
"""

from __future__ import annotations

import types as pytypes

import numpy as np
from numba.core import types
from numba.cuda.extending import overload

from ... import primitives

_BIG = 4503599627370496.0  # 2**52: floats at least this large are integers


def _float_result(x):
    """NumPy's float type for a unary float function of ``x`` (ints -> float64)."""
    return x if isinstance(x, types.Float) else types.float64


def _unary(name, real, complex_=None):
    def stub(x):
        raise NotImplementedError(f"lanewise's CUDA np.{name} runs only inside kernels")

    stub.__name__ = stub.__qualname__ = name

    @overload(stub, inline="always")
    def _ov(x):
        if isinstance(x, types.Complex) and complex_ is not None:
            return lambda x: complex_(x)
        if isinstance(x, (types.Float, types.Integer, types.Boolean)):
            ty = _float_result(x)
            return lambda x: ty(real(ty(x)))
        return None

    return stub


def _rounding(name, fn):
    def stub(x):
        raise NotImplementedError(f"lanewise's CUDA np.{name} runs only inside kernels")

    stub.__name__ = stub.__qualname__ = name

    @overload(stub, inline="always")
    def _ov(x):
        if isinstance(x, types.Float):
            ty = x

            def impl(x):
                if not abs(x) < _BIG:  # already integral, inf or nan
                    return x
                return ty(fn(x))
            return impl
        if isinstance(x, types.Integer):
            return lambda x: x
        return None

    return stub


def _binary(name, impl):
    """A binary function of two scalars, implemented by ``impl`` (compiled as is)."""
    def stub(x, y):
        raise NotImplementedError(f"lanewise's CUDA np.{name} runs only inside kernels")

    stub.__name__ = stub.__qualname__ = name

    @overload(stub, inline="always")
    def _ov(x, y):
        if isinstance(x, (types.Number, types.Boolean)) and isinstance(y, (types.Number, types.Boolean)):
            return impl
        return None

    return stub


def _number(name, impl):
    """A unary function of any number, implemented by ``impl`` (compiled as is)."""
    def stub(x):
        raise NotImplementedError(f"lanewise's CUDA np.{name} runs only inside kernels")

    stub.__name__ = stub.__qualname__ = name

    @overload(stub, inline="always")
    def _ov(x):
        if isinstance(x, (types.Number, types.Boolean)):
            return impl
        return None

    return stub


def _predicate(name, fn, integer_result):
    """A float -> bool test (ints: a constant, as NumPy)."""
    def stub(x):
        raise NotImplementedError(f"lanewise's CUDA np.{name} runs only inside kernels")

    stub.__name__ = stub.__qualname__ = name

    @overload(stub, inline="always")
    def _ov(x):
        if isinstance(x, (types.Integer, types.Boolean)):
            return lambda x: integer_result
        if isinstance(x, types.Float):
            return lambda x: fn(x)
        return None

    return stub


#: How each kind of :class:`lanewise.primitives.Cuda` rule becomes a device function.
_BUILDERS = {
    "unary": lambda name, rule: _unary(name, rule.impl, rule.complex_),
    "rounding": lambda name, rule: _rounding(name, rule.impl),
    "predicate": lambda name, rule: _predicate(name, rule.impl, rule.constant),
    "binary": lambda name, rule: _binary(name, rule.impl),
    "number": lambda name, rule: _number(name, rule.impl),
}


def _replacements() -> dict:
    """NumPy name -> device version, for every primitive whose cuda rule is not numba-cuda's
    own (one device function per primitive, under each of its NumPy names)."""
    out = {}
    for prim in primitives.with_rule("cuda"):
        cuda = prim.rules["cuda"]
        if cuda.kind != "native" and prim.numpy:
            device = _BUILDERS[cuda.kind](prim.numpy[0], cuda)
            out.update({name: device for name in prim.numpy if hasattr(np, name)})
    return out


#: NumPy names numba-cuda cannot lower, and their device versions.
REPLACEMENTS = _replacements()


def _make_module() -> pytypes.ModuleType:
    module = pytypes.ModuleType("numpy")  # numba-cuda resolves attributes by value
    module.__dict__.update({k: v for k, v in vars(np).items() if not k.startswith("__")})
    module.__dict__.update(REPLACEMENTS)
    return module


#: NumPy with the replacements, as a CUDA lane's ``np``.
numpy_for_lanes = _make_module()



def _register_rounded_products() -> None:
    """lanewise.random's ``mul``/``mul32`` as libdevice's ``dmul_rn``/``fmul_rn``:
    products NVVM never contracts into an FMA, so draws match the CPU bit for bit."""
    from numba.cuda import libdevice

    from ...random import ROUNDED_PRODUCTS

    mul, mul32 = ROUNDED_PRODUCTS
    overload(mul, inline="always")(lambda a, b: lambda a, b: libdevice.dmul_rn(a, b))
    overload(mul32, inline="always")(lambda a, b: lambda a, b: libdevice.fmul_rn(a, b))


_register_rounded_products()


#: id(object) -> what a CUDA lane's globals get instead (lanefn.CUDA_SUBSTITUTES).
SUBSTITUTES = {id(np): numpy_for_lanes,
               **{id(getattr(np, name)): fn for name, fn in REPLACEMENTS.items()}}
