"""What differentiated lanes call besides the user's code: argument and result
checks, and the zero tangent of a value of any type.

Each is a plain function (the python backend and direct calls run it) with
a Numba ``overload`` that decides at typing time, so a compiled lane pays
nothing: an integer argument or a tuple result is a compile error that names the
argument, never a silently wrong derivative.

Example:
    >>> require_float(1.5, "x", "lw.grad")
    >>> try:
    ...     require_float(3, "n", "lw.grad")
    ... except TypeError as e:
    ...     print(str(e).split(";")[0])
    lw.grad: argument n is int
"""

from __future__ import annotations

import numpy as np
from numba.core import types
from numba.core.errors import TypingError
from llvmlite import ir
from numba.extending import intrinsic, overload, register_jitable

from ..errors import LaneTypeError, ReverseMemoryError

_INTEGRAL = (bool, int, np.integer, np.bool_)


def float_message(name: str, kind: str, transform: str) -> str:
    return (f"{transform}: argument {name} is {kind}; only float arguments can be differentiated "
            "(JAX's rule: integer and boolean inputs have no tangent). Differentiate with respect to "
            "other arguments (argnums) or pass a float")


def require_float(x, name: str, transform: str) -> None:
    """Raise unless ``x`` is one float scalar (what ``lw.grad``/``lw.jacfwd`` differentiate)."""
    if isinstance(x, _INTEGRAL):
        raise LaneTypeError(float_message(name, type(x).__name__, transform))
    if isinstance(x, (tuple, list, np.ndarray)) and np.ndim(x):
        raise LaneTypeError(shape_message(name, type(x).__name__, transform))


def shape_message(name: str, kind: str, transform: str) -> str:
    return (f"{transform}: argument {name} is {kind}; {transform} (forward mode) differentiates scalar "
            "arguments. For the gradient with respect to a 1-D array use lw.jacrev (reverse mode); for a "
            "directional derivative, lw.jvp with a tangent of the same structure")


def _literal(t) -> str:
    return str(getattr(t, "literal_value", t))


@overload(require_float, jit_options={"error_model": "numpy"}, inline="always")
def _require_float_overload(x, name, transform):
    if isinstance(x, (types.Integer, types.Boolean)):
        raise TypingError(float_message(_literal(name), str(x), _literal(transform)))
    if isinstance(x, (types.BaseTuple, types.Array, types.List)):
        raise TypingError(shape_message(_literal(name), str(x), _literal(transform)))
    return lambda x, name, transform: None


def scalar_message(what: str, transform: str) -> str:
    return (f"{transform}: the lane must return one scalar here, and it returns {what}. Use lw.jacfwd for "
            "several outputs (with the tuple written in the return statement), or has_aux=True to return "
            "(value, auxiliary data)")


def require_scalar(value, transform: str) -> None:
    """Raise unless ``value`` is one scalar (``lw.grad`` of a lane returning a tuple)."""
    if isinstance(value, (tuple, list)) or (isinstance(value, np.ndarray) and value.ndim):
        raise LaneTypeError(scalar_message(type(value).__name__, transform))


@overload(require_scalar, jit_options={"error_model": "numpy"}, inline="always")
def _require_scalar_overload(value, transform):
    if isinstance(value, (types.BaseTuple, types.Array)):
        raise TypingError(scalar_message(str(value), _literal(transform)))
    return lambda value, transform: None


def zero_tangent_of(x, tangent, name: str):
    """The tangent a lane works with for an argument: ``tangent`` as a float for a
    float argument; for an integer argument it must be None (JAX's float0) and is 0."""
    if isinstance(x, _INTEGRAL):
        if tangent is not None:
            raise LaneTypeError(tangent_message(name, type(x).__name__))
        return np.float64(0.0)
    return np.float64(tangent) if isinstance(tangent, float) else tangent


def tangent_message(name: str, kind: str) -> str:
    return (f"lw.jvp: argument {name} is {kind}, so its tangent must be None (integers have no tangent; "
            "JAX asks for float0 zeros)")


@overload(zero_tangent_of, jit_options={"error_model": "numpy"}, inline="always")
def _zero_tangent_overload(x, tangent, name):
    if isinstance(x, (types.Integer, types.Boolean)):
        if not isinstance(tangent, (types.NoneType, types.Omitted)):
            raise TypingError(tangent_message(_literal(name), str(x)))
        return lambda x, tangent, name: 0.0
    return lambda x, tangent, name: tangent


def zero(x):
    """The zero tangent of a value: 0.0 for a scalar, a float array of zeros shaped
    like an array, the same tuple of zeros for a tuple.

    Example:
        >>> zero((1.5, np.ones(2), 3))
        (0.0, array([0., 0.]), 0.0)
    """
    if isinstance(x, tuple):
        return tuple(zero(v) for v in x)
    if isinstance(x, np.ndarray):
        return np.zeros(x.shape, x.dtype if x.dtype.kind in "fc" else np.float64)
    return 0.0


#: On the SPMD path every value is a scalar or a vector of scalars: its zero is 0.0
#: (a row's tangent would then fail to compile there, and the lane keeps the scalar path).
zero._lw_spmd_zero = True


def _elementwise(fn, n: int):
    """An implementation of ``fn`` for an ``n``-tuple: ``fn`` of each element (Numba
    cannot loop over a heterogeneous tuple)."""
    namespace = {"fn": fn}
    exec(f"def impl(x):\n    return ({''.join(f'fn(x[{k}]), ' for k in range(n))})\n", namespace)
    return namespace["impl"]


@overload(zero, jit_options={"error_model": "numpy"}, inline="always")
def _zero_overload(x):
    if isinstance(x, types.Array):
        dtype = x.dtype if isinstance(x.dtype, (types.Float, types.Complex)) else types.float64
        return lambda x: np.zeros(x.shape, dtype)
    if isinstance(x, types.BaseTuple):
        return _elementwise(zero, len(x))
    return lambda x: 0.0


def update(old, new):
    """``old op= e`` with Python's semantics, ``new`` being ``old op e``: an array (or a
    list) is changed in place, so every other name for it (``b = a``, a view
    ``a[1:]``, a tuple holding it) sees the change, and is returned; any other value
    (a number, a tuple) is immutable, and ``new`` is returned.

    Example:
        >>> a = np.zeros(2)
        >>> b = a
        >>> a = update(a, a + 1.0)
        >>> b
        array([1., 1.])
        >>> update(1.0, 2.5)
        2.5
    """
    if isinstance(old, np.ndarray):
        np.copyto(old, new, casting="same_kind")  # an int array += a float raises, as Python's += does
        return old
    if isinstance(old, list):
        old[:] = new
        return old
    return new


#: On the SPMD path every value is a scalar or a vector of scalars: immutable, so the new value.
update._lw_spmd_passes = 1


def _update_message(old, new) -> str:
    return (f"an augmented assignment (a += ...) of {new} into an array of {old} in a differentiated lane: "
            "Python refuses to cast in place; write a = a + ... (a new array) or use a float array")


@overload(update, jit_options={"error_model": "numpy"}, inline="always")
def _update_overload(old, new):
    if isinstance(old, types.Array):
        new_dtype = new.dtype if isinstance(new, types.Array) else new
        if isinstance(old.dtype, types.Integer) and isinstance(new_dtype, (types.Float, types.Complex)) or \
                isinstance(old.dtype, types.Float) and isinstance(new_dtype, types.Complex):
            raise TypingError(_update_message(old.dtype, new_dtype))

        def in_place(old, new):
            old[...] = new
            return old
        return in_place
    if isinstance(old, types.List):
        def in_list(old, new):
            old.clear()
            old.extend(new)
            return old
        return in_list
    return lambda old, new: new


def unshared(value, what: str) -> None:
    """Raise ``what`` unless ``value`` is immutable (a number, a tuple): reverse mode's
    check before ``a op= e`` where another name may share ``a``'s storage (an array
    there would be changed in place, which reverse mode does not follow)."""
    if isinstance(value, (np.ndarray, list, dict, set)):
        raise LaneTypeError(what)


unshared._lw_spmd_passes = 0


@overload(unshared, jit_options={"error_model": "numpy"}, inline="always", prefer_literal=True)
def _unshared_overload(value, what):
    if isinstance(value, (types.Array, types.List, types.DictType, types.Set)):
        raise TypingError(_literal(what))
    return lambda value, what: None


def mirror(value, tangent, arg, arg_tangent):
    """``tangent``, sharing storage with ``arg_tangent`` exactly when ``value`` shares it
    with ``arg``: a name that an in-place update may reach (``a += e``) needs a tangent
    aliased as its value is.  A tangent rule may hand back an argument's own tangent
    for a new value (``b = a + 1.0``: the tangent of ``b`` is the tangent of ``a``):
    it is copied.  The converse (a value sharing an argument whose tangent it does not)
    cannot be followed and raises.

    Example:
        >>> a, ta = np.zeros(2), np.ones(2)
        >>> mirror(a + 1.0, ta, a, ta) is ta
        False
        >>> mirror(a[1:], ta[1:], a, ta).base is ta
        True
    """
    if isinstance(value, (tuple, list)):
        return type(tangent)(mirror(v, t, arg, arg_tangent) for v, t in zip(value, tangent, strict=True))
    if isinstance(arg, (tuple, list)):
        for a, at in zip(arg, arg_tangent, strict=True):
            tangent = mirror(value, tangent, a, at)
        return tangent
    if not all(isinstance(v, np.ndarray) for v in (value, tangent, arg, arg_tangent)):
        return tangent
    primal, derivative = np.may_share_memory(value, arg), np.may_share_memory(tangent, arg_tangent)
    if primal and not derivative:
        raise LaneTypeError(_MIRROR_MESSAGE)
    return tangent.copy() if derivative and not primal else tangent


_MIRROR_MESSAGE = ("lanewise forward mode: a value shares storage with an argument whose derivative it does not "
                   "share, and the lane changes one of them in place; copy it where it is bound (b = a.copy())")
mirror._lw_spmd_passes = 1


@register_jitable
def _span(a):
    """The first and one-past-last byte addresses an array may touch."""
    lo = a.ctypes.data
    hi = lo
    for k in range(a.ndim):
        extent = (a.shape[k] - 1) * a.strides[k]
        if extent < 0:
            lo += extent
        else:
            hi += extent
    return lo, hi + a.itemsize


@register_jitable
def _overlap(a, b):
    if a.size == 0 or b.size == 0:
        return False
    lo_a, hi_a = _span(a)
    lo_b, hi_b = _span(b)
    return lo_a < hi_b and lo_b < hi_a


def _holds_array(t) -> bool:
    return isinstance(t, types.BaseTuple) and any(isinstance(e, types.Array) or _holds_array(e) for e in t)


@overload(mirror, jit_options={"error_model": "numpy"}, inline="always")
def _mirror_overload(value, tangent, arg, arg_tangent):
    if any(_holds_array(t) for t in (value, tangent, arg, arg_tangent)):
        raise TypingError("lanewise forward mode: a tuple holding arrays, bound to a name the lane also changes "
                          "in place; compiled lanes do not follow it (run with backend='python', or copy the "
                          "arrays: b = a.copy())")
    if not all(isinstance(t, types.Array) for t in (value, tangent, arg, arg_tangent)):
        return lambda value, tangent, arg, arg_tangent: tangent

    def check(value, tangent, arg, arg_tangent):
        primal, derivative = _overlap(value, arg), _overlap(tangent, arg_tangent)
        if primal and not derivative:
            raise ValueError(_MIRROR_MESSAGE)
        if derivative and not primal:
            return tangent.copy()
        return tangent
    return check


def seed(x, value: float, name: str, transform: str) -> float:
    """``value`` (a differentiated argument's first tangent), once ``x`` is checked
    to be a float scalar: an assignment, so the SPMD path handles it."""
    require_float(x, name, transform)
    # A NumPy float: run as Python, tangents then follow IEEE as compiled lanes do
    # (d sqrt(x) at 0 is inf, not ZeroDivisionError); :func:`out` makes them floats again.
    return np.float64(value)


#: The SPMD path keeps the value (argument 1): the lane's scalar typing, which runs
#: first on every path, made the check.
seed._lw_spmd_passes = 1


@overload(seed, jit_options={"error_model": "numpy"}, inline="always")
def _seed_overload(x, value, name, transform):
    _require_float_overload(x, name, transform)
    return lambda x, value, name, transform: value


def scalar_result(value, transform: str):
    """``value``, once checked to be one scalar (``lw.grad``'s output)."""
    require_scalar(value, transform)
    return value


scalar_result._lw_spmd_passes = 0


@overload(scalar_result, jit_options={"error_model": "numpy"}, inline="always")
def _scalar_result_overload(value, transform):
    _require_scalar_overload(value, transform)
    return lambda value, transform: value


def out(value):
    """A differentiated lane's result as Python floats (tangents computed in NumPy
    floats when the lane runs as Python); compiled, the value itself.

    Example:
        >>> out((np.float64(1.5), (2.0, np.float64(3.0))))
        (1.5, (2.0, 3.0))
    """
    if isinstance(value, tuple):
        return tuple(out(v) for v in value)
    return float(value) if isinstance(value, np.floating) and value.dtype == np.float64 else value


out._lw_spmd_passes = 0


@overload(out, jit_options={"error_model": "numpy"}, inline="always")
def _out_overload(value):
    return lambda value: value


def times_cotangent(c, t):
    """``c * t``, with a ``None`` cotangent (an argument with none: ``lw.custom_vjp``) as 0."""
    return 0.0 if c is None else c * t


@overload(times_cotangent, jit_options={"error_model": "numpy"}, inline="always")
def _times_cotangent_overload(c, t):
    if isinstance(c, (types.NoneType, types.Omitted)):
        return lambda c, t: 0.0
    return lambda c, t: c * t


def unit_message(got: str, name: str) -> str:
    return (f"lw.custom_vjp: the fwd rule of {name} must return (out, residuals) with out one scalar; "
            f"out is {got} (lanewise applies custom_vjp rules to functions with one scalar result)")


def unit_cotangent(out, name: str) -> float:
    """1.0, the cotangent of ``out``, once ``out`` is checked to be one scalar."""
    if isinstance(out, (tuple, list)) or (isinstance(out, np.ndarray) and out.ndim):
        raise LaneTypeError(unit_message(type(out).__name__, name))
    return 1.0


@overload(unit_cotangent, jit_options={"error_model": "numpy"}, inline="always", prefer_literal=True)
def _unit_cotangent_overload(out, name):
    if isinstance(out, (types.BaseTuple, types.Array)):
        raise TypingError(unit_message(str(out), _literal(name)))
    return lambda out, name: 1.0


def cotangents_message(got: str, n: int, name: str) -> str:
    return (f"lw.custom_vjp: the bwd rule of {name} must return a tuple of {n} cotangent(s), one per "
            f"argument of {name} (None for an argument with none); it returned {got}")


def cotangents(c, arguments: tuple, name: str):
    """``c``, once checked to be a tuple of as many cotangents as ``arguments``
    (what a ``bwd`` rule returns: one per argument)."""
    if not isinstance(c, tuple) or len(c) != len(arguments):
        raise LaneTypeError(cotangents_message(repr(c), len(arguments), name))
    return c


@overload(cotangents, jit_options={"error_model": "numpy"}, inline="always")
def _cotangents_overload(c, arguments, name):
    if not isinstance(c, types.BaseTuple) or len(c) != len(arguments):
        raise TypingError(cotangents_message(str(c), len(arguments), _literal(name)))
    return lambda c, arguments, name: c


def stop_gradient(x):
    """``x``, as a constant for differentiation (``jax.lax.stop_gradient``).

    Example:
        >>> import lanewise as lw
        >>> lw.grad(lambda x: x * lw.stop_gradient(x))(3.0)
        3.0
    """
    return x


@overload(stop_gradient, jit_options={"error_model": "numpy"}, inline="always")
def _stop_gradient_overload(x):
    return lambda x: x


stop_gradient._lw_spmd_passes = 0  # the value itself, in a vector lane too


# ----------------------------------------------------------------------------- reverse mode: the tape
#
# A lane's tape is one list of floats, four per node: (parent a, d node / d a,
# parent b, d node / d b).  Node 0 is the constant (its adjoint is never read);
# node ids are list positions / 4.  The forward sweep appends a node per active
# operation, in the order it runs (so loops, branches and early exits need no
# record of their own); the sweep walks the nodes backwards once.


@register_jitable
def new_tape():
    """A tape holding node 0, the constant."""
    return [0.0, 0.0, 0.0, 0.0]


@register_jitable
def push(tape, a, da, b, db):
    """Append the node ``da * a + db * b`` (a linearised operation); its id."""
    node = len(tape) // 4
    tape.append(float(a))
    tape.append(float(da))
    tape.append(float(b))
    tape.append(float(db))
    return node


@register_jitable
def sweep(tape, outputs, seeds):
    """The adjoint of every node, given the adjoints ``seeds`` of the nodes ``outputs``."""
    n = len(tape) // 4
    adjoint = np.zeros(n)
    for k in range(len(outputs)):
        adjoint[outputs[k]] += seeds[k]
    for node in range(n - 1, 0, -1):
        g = adjoint[node]
        if g != 0.0:
            adjoint[int(tape[4 * node])] += tape[4 * node + 1] * g
            adjoint[int(tape[4 * node + 2])] += tape[4 * node + 3] * g
    return adjoint


def inputs(tape, x, name: str, transform: str):
    """Node ids for a differentiated argument: one for a float, an array of them
    (one per element) for a 1-D float array."""
    _check_reverse_argument(x, name, transform)
    if isinstance(x, np.ndarray):
        return np.array([push(tape, 0, 0.0, 0, 0.0) for _ in range(x.shape[0])], dtype=np.int64)
    return push(tape, 0, 0.0, 0, 0.0)


def _check_reverse_argument(x, name: str, transform: str) -> None:
    """Reverse mode differentiates floats and 1-D float arrays."""
    if isinstance(x, _INTEGRAL) or (isinstance(x, np.ndarray) and x.dtype.kind in "biu"):
        raise LaneTypeError(float_message(name, type(x).__name__ if not isinstance(x, np.ndarray)
                                           else f"an array of {x.dtype}", transform))
    if isinstance(x, np.ndarray) and x.ndim != 1:
        raise LaneTypeError(_rank_message(name, x.ndim, transform))
    if isinstance(x, (tuple, list)):
        raise LaneTypeError(shape_message(name, type(x).__name__, transform))


def _check_reverse_type(x, name, transform) -> None:
    """:func:`_check_reverse_argument` at typing time."""
    if isinstance(x, (types.Integer, types.Boolean)) or (isinstance(x, types.Array)
                                                         and isinstance(x.dtype, (types.Integer, types.Boolean))):
        raise TypingError(float_message(_literal(name), str(x), _literal(transform)))
    if isinstance(x, types.Array) and x.ndim != 1:
        raise TypingError(_rank_message(_literal(name), x.ndim, _literal(transform)))
    if isinstance(x, (types.BaseTuple, types.List)):
        raise TypingError(shape_message(_literal(name), str(x), _literal(transform)))


def _rank_message(name: str, ndim: int, transform: str) -> str:
    return f"{transform}: argument {name} is a {ndim}-D array; reverse mode differentiates floats and 1-D arrays"


@overload(inputs, jit_options={"error_model": "numpy"})
def _inputs_overload(tape, x, name, transform):
    _check_reverse_type(x, name, transform)
    if isinstance(x, types.Array):
        def array_impl(tape, x, name, transform):
            ids = np.empty(x.shape[0], np.int64)
            for k in range(x.shape[0]):
                ids[k] = push(tape, 0, 0.0, 0, 0.0)
            return ids
        return array_impl
    return lambda tape, x, name, transform: push(tape, 0, 0.0, 0, 0.0)


def zero_nodes(x):
    """The node ids of a constant shaped like ``x``: 0, an int array of zeros, a tuple of them."""
    if isinstance(x, tuple):
        return tuple(zero_nodes(v) for v in x)
    if isinstance(x, np.ndarray):
        return np.zeros(x.shape, np.int64)
    return 0


@overload(zero_nodes, jit_options={"error_model": "numpy"}, inline="always")
def _zero_nodes_overload(x):
    if isinstance(x, types.Array):
        return lambda x: np.zeros(x.shape, np.int64)
    if isinstance(x, types.BaseTuple):
        return _elementwise(zero_nodes, len(x))
    return lambda x: 0


# ----------------------------------------------------------------------------- reverse mode's adjoint code


@register_jitable
def trips(start, stop, step):
    """``len(range(start, stop, step))``: the trip count of a ``for`` rewritten as a ``while``."""
    if step > 0:
        return max(0, (stop - start + step - 1) // step)
    if step < 0:
        return max(0, (start - stop - step - 1) // -step)
    raise ValueError("range() arg 3 must not be zero")


# The stack is addressed through a plain integer in compiled code: an array
# variable rebound inside a loop (to grow it) costs Numba two atomic reference
# count updates per iteration, five times the rest of a push.  ``room`` checks
# before every push keep each access in bounds.  In Python the "address" is the
# array itself.

_STACK_START = 4096  # 32 KB: malloc hands the same block back lane after lane


@register_jitable
def _stack_size(limit):
    return _STACK_START if limit < 0 else min(_STACK_START, limit)


def new_stack(limit=-1):
    """``(owner, address, capacity)`` of a new value stack for one lane's adjoint code
    (of at most ``limit`` values when it is not -1)."""
    buffer = np.empty(_stack_size(limit))
    return [buffer], buffer, buffer.shape[0]


def grow(owner, address, top, n, limit=-1):
    """A stack at least twice as large (at most ``limit`` values when it is not -1) with
    the ``top`` values kept: ``(address, capacity)``."""
    old = owner[0]
    size = max(2 * old.shape[0], top + n)
    if limit >= 0:
        if top + n > limit:
            raise ReverseMemoryError(_budget_message(limit))
        size = min(size, limit)
    bigger = np.empty(size)
    # An element loop in the compiled twin below: Numba's slice assignment formats
    # its shape errors with string code that took 3 s to compile in every process.
    bigger[:top] = old[:top]
    owner[0] = bigger  # the old buffer is freed; the address it had is not used again
    return bigger, bigger.shape[0]


def poke(address, k, value) -> None:
    """``stack[k] = value``."""
    address[k] = value


def peek(address, k) -> float:
    """``stack[k]``."""
    return address[k]


def keep(owner) -> None:
    """Nothing, but a use of ``owner``: compiled code frees a variable after its last use,
    and the stack is read through a bare address until the lane returns."""


@overload(keep, jit_options={"error_model": "numpy"})
def _keep_overload(owner):
    return lambda owner: None


@overload(new_stack, jit_options={"error_model": "numpy"})
def _new_stack_overload(limit=-1):
    def impl(limit=-1):
        buffer = np.empty(_stack_size(limit))
        return [buffer], buffer.ctypes.data, buffer.shape[0]
    return impl


@overload(grow, jit_options={"error_model": "numpy"})
def _grow_overload(owner, address, top, n, limit=-1):
    message = "lanewise reverse mode: the lane needs more than lw.config.reverse_memory for its records; " \
        "raise the budget (or set it to None), or use forward mode (lw.grad, lw.jacfwd)"

    def impl(owner, address, top, n, limit=-1):
        old = owner[0]
        size = max(2 * old.shape[0], top + n)
        if limit >= 0:
            if top + n > limit:
                raise ReverseMemoryError(message)
            size = min(size, limit)
        bigger = np.empty(size)
        for k in range(top):  # not bigger[:top] = old[:top]: see grow
            bigger[k] = old[k]
        owner[0] = bigger
        return bigger.ctypes.data, bigger.shape[0]
    return impl


@intrinsic
def _poke(typingctx, address, k, value):
    if not (isinstance(address, types.Integer) and isinstance(k, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        base, index, x = args
        x = context.cast(builder, x, signature.args[2], types.float64)
        pointer = builder.inttoptr(base, ir.DoubleType().as_pointer())
        builder.store(x, builder.gep(pointer, [context.cast(builder, index, signature.args[1], types.intp)]))
        return context.get_dummy_value()
    return types.void(address, k, value), codegen


@intrinsic
def _peek(typingctx, address, k):
    if not (isinstance(address, types.Integer) and isinstance(k, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        base, index = args
        pointer = builder.inttoptr(base, ir.DoubleType().as_pointer())
        return builder.load(builder.gep(pointer, [context.cast(builder, index, signature.args[1], types.intp)]))
    return types.float64(address, k), codegen


@overload(poke, jit_options={"error_model": "numpy"}, inline="always")
def _poke_overload(address, k, value):
    if isinstance(address, types.Integer):
        return lambda address, k, value: _poke(address, k, value)


@overload(peek, jit_options={"error_model": "numpy"}, inline="always")
def _peek_overload(address, k):
    if isinstance(address, types.Integer):
        return lambda address, k: _peek(address, k)


@register_jitable
def thin(stack, base, held, width):
    """Keep every other of ``held`` checkpoints of ``width`` values at ``base`` (the
    even ones, moved down): the loop's checkpoints, twice as far apart."""
    for i in range(1, held // 2):
        for k in range(width):
            poke(stack, base + i * width + k, peek(stack, base + 2 * i * width + k))


def restore(like, value):
    """``value`` (a float64 from the stack) as the type of ``like``: a checkpointed local back."""
    return type(like)(value)


@overload(restore, jit_options={"error_model": "numpy"}, inline="always")
def _restore_overload(like, value):
    if isinstance(like, types.Boolean):
        return lambda like, value: value != 0.0
    if isinstance(like, types.Integer):
        return lambda like, value: int(value)
    if like == types.float32:
        return lambda like, value: np.float32(value)
    if isinstance(like, types.Float):
        return lambda like, value: value
    raise TypingError(f"lanewise reverse mode: a checkpointed loop carries a {like}, not a number")


def _budget_message(limit: int) -> str:
    return (f"lanewise reverse mode: the lane needs more than lw.config.reverse_memory ({limit * 8} bytes) "
            "for its records; raise the budget (or set it to None), or use forward mode (lw.grad, lw.jacfwd)")


def unpacks(value, n: int, what: str) -> None:
    """Raise unless ``value`` is a tuple of ``n`` items (a helper's result unpacked)."""
    if not (isinstance(value, tuple) and len(value) == n):
        raise LaneTypeError(what)


@overload(unpacks, jit_options={"error_model": "numpy"}, inline="always", prefer_literal=True)
def _unpacks_overload(value, n, what):
    if not (isinstance(value, types.BaseTuple) and len(value) == getattr(n, "literal_value", None)):
        raise TypingError(_literal(what))
    return lambda value, n, what: None


def number(value, what: str) -> None:
    """Raise unless ``value`` is one number (an item unpacked into a name)."""
    if isinstance(value, tuple) or np.ndim(value) != 0:
        raise LaneTypeError(what)


@overload(number, jit_options={"error_model": "numpy"}, inline="always")
def _number_overload(value, what):
    if not isinstance(value, (types.Number, types.Boolean)):
        raise TypingError(_literal(what))
    return lambda value, what: None


@register_jitable
def spread_all(adjoint, scale):
    """``adjoint += scale`` (the reverse of ``np.sum``), in place."""
    for k in range(adjoint.shape[0]):
        adjoint[k] += scale


@register_jitable
def spread_along(adjoint, direction, scale):
    """``adjoint += direction * scale`` (the reverse of ``np.dot`` with ``direction``), in place."""
    if direction.shape[0] != adjoint.shape[0]:
        raise ValueError("np.dot of arrays of different lengths")
    for k in range(adjoint.shape[0]):
        adjoint[k] += direction[k] * scale


def adjoint_of(x, name: str, transform: str):
    """The zero adjoint of a differentiated argument: 0.0 for a float, zeros for a 1-D float array."""
    _check_reverse_argument(x, name, transform)
    return np.zeros(x.shape[0]) if isinstance(x, np.ndarray) else 0.0


@overload(adjoint_of, jit_options={"error_model": "numpy"}, inline="always")
def _adjoint_of_overload(x, name, transform):
    _check_reverse_type(x, name, transform)
    if isinstance(x, types.Array):
        return lambda x, name, transform: np.zeros(x.shape[0])
    return lambda x, name, transform: 0.0


def _whole_message(name: str, transform: str) -> str:
    return (f"{transform}: argument {name} is an array that the lane uses whole; reverse mode differentiates a "
            f"1-D array through its elements ({name}[i]) read in the lane")


def require_scalar_input(x, name: str, transform: str) -> None:
    """Raise if a differentiated argument the lane uses as a number is an array."""
    if isinstance(x, np.ndarray):
        raise LaneTypeError(_whole_message(name, transform))


@overload(require_scalar_input, jit_options={"error_model": "numpy"}, inline="always")
def _require_scalar_input_overload(x, name, transform):
    if isinstance(x, types.Array):
        raise TypingError(_whole_message(_literal(name), _literal(transform)))
    return lambda x, name, transform: None
