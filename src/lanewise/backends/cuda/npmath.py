"""NumPy's scalar math for CUDA lanes, where numba-cuda types a ufunc but cannot lower it.

numba-cuda (0.30) accepts ``np.exp(x)`` in device code at typing time and then
fails with ``KeyError: <ufunc 'exp'>``: its ufunc table lacks exp, sqrt,
absolute, floor and others.  A CUDA lane's ``np`` (and names imported from
NumPy) is therefore rebound (lanefn.jit_lane_cuda) to :data:`numpy_for_lanes`:
NumPy itself, except these functions, which are stubs whose numba-cuda
overloads call ``math``/``cmath`` (libdevice on the GPU) for scalar arguments,
keeping NumPy's result dtypes (float32 stays float32).

Only imported by the cuda backend for a real GPU or PTX compile (never under the
simulator, which runs the lane as Python with the real NumPy).
"""

from __future__ import annotations

import cmath
import math
import types as pytypes

import numpy as np
from numba.core import types
from numba.cuda.extending import overload

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


def _abs_ov():
    def absolute(x):
        raise NotImplementedError("lanewise's CUDA np.absolute runs only inside kernels")

    @overload(absolute, inline="always")
    def _ov(x):
        if isinstance(x, (types.Number, types.Boolean)):
            return lambda x: abs(x)
        return None

    return absolute


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


def _square():
    def square(x):
        raise NotImplementedError("lanewise's CUDA np.square runs only inside kernels")

    @overload(square, inline="always")
    def _ov(x):
        if isinstance(x, (types.Number, types.Boolean)):
            return lambda x: x * x
        return None

    return square


_absolute = _abs_ov()

#: NumPy names numba-cuda cannot lower, and their device versions.
REPLACEMENTS = {
    "exp": _unary("exp", math.exp, cmath.exp),
    "expm1": _unary("expm1", math.expm1),
    "log1p": _unary("log1p", math.log1p),
    "sqrt": _unary("sqrt", math.sqrt, cmath.sqrt),
    "absolute": _absolute,
    "abs": _absolute,
    "fabs": _unary("fabs", math.fabs),
    "floor": _rounding("floor", math.floor),
    "ceil": _rounding("ceil", math.ceil),
    "trunc": _rounding("trunc", math.trunc),
    "isinf": _predicate("isinf", math.isinf, False),
    "isfinite": _predicate("isfinite", math.isfinite, True),
    "square": _square(),
    "power": _binary("power", lambda x, y: x ** y),
    "copysign": _binary("copysign", lambda x, y: math.copysign(x, y)),
    "fmod": _binary("fmod", lambda x, y: math.fmod(x, y)),
    "add": _binary("add", lambda x, y: x + y),
    "subtract": _binary("subtract", lambda x, y: x - y),
    "multiply": _binary("multiply", lambda x, y: x * y),
}


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
