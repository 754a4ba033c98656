"""Type a function without generating its machine code (the lane's result type).

lanewise learns a lane's result type by compiling a small ``probe`` that calls
lane 0.  Compiled in full, the probe costs one more LLVM optimisation of the
lane's whole code (Numba optimises each function's module with its callees
linked in): a cold first call paid for the lane four times where a hand-written
``prange`` kernel pays twice.  Typing the probe is enough: typing its call to
the lane still compiles the lane itself (the kernels link that code), but the
probe's own module is never built.

Example:
    >>> import numba
    >>> @numba.njit
    ... def half(x):
    ...     return x / 2
    >>> def probe(x):
    ...     return half(x)
    >>> return_type(probe, (numba.int64,))
    float64
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
from numba.core.compiler import CompilerBase, DefaultPassBuilder
from numba.core.compiler_machinery import FunctionPass, register_pass
from numba.core.typed_passes import NopythonTypeInference


@dataclass(frozen=True)
class Typed:
    """What typing a function found: its return type, and its typed IR (the parts of a
    compiled overload's ``type_annotation`` that lanewise's checks read)."""

    return_type: object
    typemap: dict
    calltypes: dict
    blocks: dict
    #: The typed function's own source file: statements located there are its own,
    #: the others those of the functions inlined into it.
    file: str = ""

    def inlined(self, stmt) -> bool:
        """Whether ``stmt`` (or expression) comes from a function inlined into this one."""
        return getattr(getattr(stmt, "loc", None), "filename", self.file) != self.file


class _Typed(Exception):
    """Carries the typing out of the pipeline once it is done (not an error)."""

    def __init__(self, typed: Typed):
        super().__init__("typed")
        self.typed = typed


@register_pass(mutates_CFG=False, analysis_only=True)
class _StopAfterTyping(FunctionPass):
    _name = "lanewise_stop_after_typing"

    def __init__(self):
        FunctionPass.__init__(self)

    def run_pass(self, state):
        raise _Typed(Typed(state.return_type, state.typemap, state.calltypes, state.func_ir.blocks,
                           state.func_ir.loc.filename))


class _TypeOnly(CompilerBase):
    """Numba's nopython pipeline up to type inference."""

    def define_pipelines(self):
        pm = DefaultPassBuilder.define_nopython_pipeline(self.state)
        pm.add_pass_after(_StopAfterTyping, NopythonTypeInference)
        pm.finalize()
        return [pm]


def typed(fn, argtypes: tuple, **options) -> Typed:
    """``fn`` (plain Python) typed for ``argtypes``: the functions it calls are compiled
    (those ``inline="always"`` are inlined and typed with it), ``fn`` itself is only
    typed.  Typing errors raise as Numba's."""
    dispatcher = numba.njit(pipeline_class=_TypeOnly, **options)(fn)
    try:
        dispatcher.compile(argtypes)
    except _Typed as done:
        return done.typed
    raise AssertionError("the typing pipeline ended without a return type")  # pragma: no cover


def return_type(fn, argtypes: tuple, **options):
    """The Numba return type of ``fn`` (plain Python) for ``argtypes`` (see :func:`typed`)."""
    return typed(fn, argtypes, **options).return_type


def call_dtype(fn, *dtypes):
    """The NumPy dtype ``fn`` (plain Python, compiled as a lane's helper is) returns for
    scalar arguments of ``dtypes``; None when it is not a scalar or ``fn`` does not
    compile for them (its caller's compile then reports why).

    Example:
        >>> import numpy as np
        >>> call_dtype(lambda a, b: (a + b) / 2, np.dtype(np.int64), np.dtype(np.int64))
        dtype('float64')
    """
    from .lanefn import jit_lane

    argtypes = tuple(numba.from_dtype(d) for d in dtypes)
    try:
        dispatcher = jit_lane(fn)
        dispatcher.compile(argtypes)
        returned = dispatcher.overloads[argtypes].signature.return_type
        return numba.np.numpy_support.as_dtype(returned)
    except Exception:  # noqa: BLE001 - not typable here: the caller's compile says why
        return None
