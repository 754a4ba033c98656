"""lanewise.lanemath — vectorisable transcendental functions for lane code.

Numba lost SVML, so ``math.cos`` inside a lane is a scalar libm call and the loop
nest around it stays scalar.  The functions here are written for one scalar but
compile to branch-free, table-free, fully inlined code (``alwaysinline``), so LLVM
vectorises the loop that calls them — AVX-512/AVX2 packed instructions on the hot
path; rare slow paths (trig arguments beyond 2**30) are masked vector calls that cost
one test per vector when unused (see :mod:`._slowpath`).

Accuracy: < 1 ulp in float64 and float32 for every function (measured maxima per
function in ``docs/lanemath.md``, reproduced by ``python -m lanewise.lanemath.accuracy``);
special values follow C99 Annex F (NaN for domain errors, signed zeros and infinities,
no exceptions).

Use::

    from lanewise import lanemath
    lanemath.cos(x)           # float64 -> float64, float32 -> float32, int -> float64
    lanemath.MATH["cos"]      # replacement for math.cos
    lanemath.NUMPY["cos"]     # replacement for np.cos on scalars (arrays -> np.cos)
    lanemath.math             # a module: `math` with every covered name replaced
    lanemath.numpy            # a module: `numpy` with every covered ufunc replaced
    lanemath.rebind_globals(fn.__globals__)   # a lane's globals with all of the above

Every function also works from the interpreter (it compiles a small wrapper on first
use), with the same results as in compiled code:

>>> from lanewise import lanemath
>>> lanemath.cos(0.0), lanemath.log(1.0), lanemath.atan2(-0.0, -0.0)
(1.0, 0.0, -3.141592653589793)
"""

from __future__ import annotations

import builtins as _builtins
import importlib as _importlib
import math as _math
import sys as _sys
import types as _types

import numpy as _np

from .. import primitives as _primitives
from . import explog as _explog
from . import hyper as _hyper
from . import inverse as _inverse
from . import misc as _misc
from . import intpower as _intpower  # noqa: F401  (registers a ** b of integers: see the module)
from . import complexdiv as _complexdiv  # noqa: F401  (registers z / w of complex numbers: see the module)
from . import mixedints as _mixedints  # noqa: F401  (types uint64 with signed integers exactly: see the module)
from . import special as _special
from . import trig as _trig
from ._core import kernel as _kernel
from ._core import sqrt as _sqrt
from ._public import FUNCTIONS, binary as _binary, pair as _pair, unary as _unary
from . import integers as _integers
# public (lanemath.sign ...), and the corrections the primitive table names (_lanemath)
from .arrays import dot, median  # noqa: F401
from .integers import around, floor_divide, fmod, reciprocal, remainder, sign, spacing  # noqa: F401
from .select import where

_np_power_int = lambda x, y: _integers.power(x, y)  # noqa: E731  (exact, NumPy's integer type)

sin = _unary("sin", _trig.sin64, ufunc=_np.sin)
cos = _unary("cos", _trig.cos64, ufunc=_np.cos)
tan = _unary("tan", _trig.tan64, ufunc=_np.tan)
sincos = _pair("sincos", _trig.sincos64,
               doc="sincos(x) -> (sin(x), cos(x)) sharing one argument reduction.")
exp = _unary("exp", _explog.exp64, ufunc=_np.exp)
exp2 = _unary("exp2", _explog.exp2_64, ufunc=_np.exp2)
expm1 = _unary("expm1", _explog.expm1_64, ufunc=_np.expm1)
log = _unary("log", _explog.log64, ufunc=_np.log)
log2 = _unary("log2", _explog.log2_64, ufunc=_np.log2)
log10 = _unary("log10", _explog.log10_64, ufunc=_np.log10)
log1p = _unary("log1p", _explog.log1p_64, ufunc=_np.log1p)
pow = _binary("pow", _explog.pow64, k32=_explog.pow32, ufunc=_np.power)  # noqa: A001
power = _binary("power", _explog.pow64, k32=_explog.pow32, ufunc=_integers.power, int_impl=_np_power_int,
                doc="np.power for scalars: pow for floats, integer power for two integers.")
sqrt = _unary("sqrt", _kernel(lambda x: _sqrt(x)), k32=_kernel(lambda x: _sqrt(x)),
              ufunc=_np.sqrt, doc="Correctly rounded square root (the hardware instruction).")
cbrt = _unary("cbrt", _misc.cbrt64, ufunc=_np.cbrt)
hypot = _binary("hypot", _misc.hypot64, ufunc=_np.hypot)
sinh = _unary("sinh", _hyper.sinh64, ufunc=_np.sinh)
cosh = _unary("cosh", _hyper.cosh64, ufunc=_np.cosh)
tanh = _unary("tanh", _hyper.tanh64, ufunc=_np.tanh)
asinh = _unary("asinh", _hyper.asinh64, ufunc=_np.arcsinh)
acosh = _unary("acosh", _hyper.acosh64, ufunc=_np.arccosh)
atanh = _unary("atanh", _hyper.atanh64, ufunc=_np.arctanh)
atan = _unary("atan", _inverse.atan64, ufunc=_np.arctan)
atan2 = _binary("atan2", _inverse.atan2_64, ufunc=_np.arctan2)
asin = _unary("asin", _inverse.asin64, ufunc=_np.arcsin)
acos = _unary("acos", _inverse.acos64, ufunc=_np.arccos)
erf = _unary("erf", _special.erf64)
erfc = _unary("erfc", _special.erfc64)

def _lanemath(path: str):
    """The lanemath object at ``path`` (``"exp"``, ``"integers.power"``), as the primitive
    table names them (:class:`lanewise.primitives.Numba`)."""
    module, _, name = path.rpartition(".")
    return getattr(_importlib.import_module(f"{__name__}.{module}") if module else _sys.modules[__name__], name)


def _spelt(module: str, slot: str) -> dict:
    """``{name in module: lanemath object}`` of every primitive whose numba rule has ``slot``."""
    return {name: _lanemath(getattr(p.rules["numba"], slot)) for p in _primitives.with_rule("numba")
            if getattr(p.rules["numba"], slot) is not None for name in getattr(p, module)}


#: ``math`` names -> lanemath implementations.
MATH = {k: v for k, v in _spelt("math", "vector_math").items() if hasattr(_math, k)}

#: NumPy functions Numba computes wrongly for some arguments -> lanewise's (integers.py,
#: arrays.py): rebound in lanes with or without vector math (:func:`corrected`).
#: (``power`` with vector math is lanemath's ``power``, whose integer paths are these.)
CORRECTIONS = _spelt("numpy", "corrected")
FUNCTIONS.update({f.__name__: f for f in CORRECTIONS.values() if f.__name__ not in FUNCTIONS})
#: Python builtins Numba computes wrongly for some arguments -> lanewise's, likewise.
BUILTIN_CORRECTIONS = _spelt("builtins", "corrected")

#: ``numpy`` ufunc names (both spellings) -> lanemath implementations for scalars.
NUMPY = {**CORRECTIONS, **_spelt("numpy", "vector_math")}  # lanemath's own win: its power vectorises floats
NUMPY = {k: v for k, v in NUMPY.items() if hasattr(_np, k)}


def _shadow(base, replacements, name):
    """A stand-in for module ``base``, with ``replacements``.  It has ``base``'s
    ``__name__``: Numba's rewrites know NumPy calls by their module's name, and
    ``np.array([1.0, 2.0])`` through a module of another name built a list, then an
    array, in every lane (numba-stats' ``ndtri``, six such arrays: 3x slower)."""
    mod = _types.ModuleType(base.__name__, base.__doc__)
    mod.__dict__.update({k: v for k, v in vars(base).items() if not k.startswith("__")})
    mod.__dict__.update(replacements)
    mod.__lw_shadows__ = base.__name__  # what it stands in for (lane.signedness reads it)
    mod.__lw_name__ = name  # which stand-in it is
    return mod


#: A stand-in for the ``math`` module with the covered functions replaced.
math = _shadow(_math, MATH, "lanewise.lanemath.math")
#: A stand-in for the ``numpy`` module with the covered ufuncs replaced (scalars only;
#: array arguments still go to the NumPy ufunc).
numpy = _shadow(_np, {**NUMPY, "where": where}, "lanewise.lanemath.numpy")

#: A stand-in for ``numpy`` with only the corrections (lanes without vector math).
numpy_corrected = _shadow(_np, CORRECTIONS, "lanewise.lanemath.numpy_corrected")
_CORRECTED = {_np: numpy_corrected, **{getattr(_np, k): v for k, v in CORRECTIONS.items()},
              **{getattr(_builtins, k): v for k, v in BUILTIN_CORRECTIONS.items()}}

_REPLACEMENTS = {_math: math, _np: numpy, _np.where: where}
_REPLACEMENTS.update({getattr(_math, k): v for k, v in MATH.items()})
_REPLACEMENTS.update({getattr(_np, k): v for k, v in NUMPY.items()})
_REPLACEMENTS.update({getattr(_builtins, k): v for k, v in BUILTIN_CORRECTIONS.items()})


def replacement(obj):
    """The lanemath stand-in for ``obj`` (``math``/``numpy`` module, ``math.cos``,
    ``np.arctan2``, ...), or ``obj`` itself when lanemath does not replace it.

    >>> import math, numpy as np
    >>> from lanewise import lanemath
    >>> replacement(math.cos) is lanemath.cos, replacement(np.arctan2) is lanemath.atan2
    (True, True)
    >>> replacement(math) is lanemath.math, replacement(len) is len
    (True, True)
    """
    try:
        return _REPLACEMENTS.get(obj, obj)
    except TypeError:  # unhashable
        return obj


def corrected(obj):
    """The corrected stand-in for ``obj`` (``numpy``, ``np.sign``, ``np.reciprocal``),
    or ``obj`` itself: what a lane calls when vector math is off.

    >>> import numpy as np
    >>> from lanewise import lanemath
    >>> corrected(np.sign) is lanemath.sign, corrected(np.cos) is np.cos
    (True, True)
    """
    try:
        return _CORRECTED.get(obj, obj)
    except TypeError:  # unhashable
        return obj


def rebind_globals(namespace: dict) -> dict:
    """A copy of a lane's globals with ``math``, ``numpy`` and names imported from them
    (``from math import cos``) pointing at lanemath.

    >>> import math
    >>> from lanewise import lanemath
    >>> g = lanemath.rebind_globals({"math": math, "cos": math.cos, "k": 3})
    >>> g["math"] is lanemath.math, g["cos"] is lanemath.cos, g["k"]
    (True, True, 3)
    """
    return {k: replacement(v) for k, v in namespace.items()}


__all__ = sorted(FUNCTIONS) + ["MATH", "NUMPY", "FUNCTIONS", "CORRECTIONS", "BUILTIN_CORRECTIONS", "math", "numpy",
                               "numpy_corrected",
                               "replacement", "corrected", "where", "rebind_globals"]
