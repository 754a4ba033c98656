"""``lw.scan``: ``jax.lax.scan`` semantics, as one compiled sequential loop.

``scan(f, init, xs)`` runs ``carry, y = f(carry, x)`` over the leading axis of
``xs`` and returns ``(carry, ys)`` with the ``y`` s stacked.  It works at top
level (one compiled loop, no per-step dispatch) and *inside lane functions*:
``lw.vmap(lambda p: lw.scan(step, c0, p))`` is one kernel in which every lane
runs its own loop.

Three implementations of one meaning:

* :func:`_reference` — the spec, a plain Python loop; used by the ``python``
  backend (also for scans inside its lanes);
* a Numba ``overload`` of :func:`scan`, generated per argument types, which a
  compiled lane calls;
* a compiled top-level entry that calls that overload.

Example:
    >>> import numpy as np, lanewise as lw
    >>> def step(total, x):
    ...     total = total + x
    ...     return total, 2 * total
    >>> lw.scan(step, 0.0, np.arange(4.0))
    (6.0, array([ 0.,  2.,  6., 12.]))
"""

from __future__ import annotations

import contextlib
import contextvars
import weakref
from typing import Any, Callable

import numba
import numpy as np
from numba.core import types
from numba.core.errors import NumbaError, TypingError
from numba.core.registry import cpu_target
from numba.extending import overload

from .. import pytree
from ..config import config
from ..errors import LaneTypeError, LanewiseError, SizeMismatchError

_reference_mode = contextvars.ContextVar("lanewise_reference_mode", default=False)


@contextlib.contextmanager
def reference_mode():
    """Within this block, :func:`scan` runs its Python reference (python backend)."""
    token = _reference_mode.set(True)
    try:
        yield
    finally:
        _reference_mode.reset(token)


def scan(f: Callable, init: Any, xs: Any = None, length: int | None = None, reverse: bool = False,
         unroll: int | bool = 1):
    """Loop ``f`` over the leading axis of ``xs``, carrying state: ``jax.lax.scan``.

    Args:
      f: ``f(carry, x) -> (carry, y)``; plain Python, compiled by lanewise. The
        returned carry must have the type of ``init`` (leaf by leaf).
      init: the initial carry: a scalar, array, or tuple/namedtuple of them.
      xs: what to scan over: an array, a tuple/namedtuple of arrays with equal
        leading size, or None (then ``length`` gives the number of steps).
      length: the number of steps when ``xs`` is None (must agree otherwise).
      reverse: scan from the end; ``ys`` stay in the order of ``xs``.
      unroll: accepted as in JAX (an int >= 1 or a bool); it changes no result, and
        the compiled loop is unrolled as LLVM sees fit.

    Returns:
      ``(carry, ys)``: the final carry and the ``y`` s stacked along a new
      leading axis (None where ``y`` is None).

    Example:
      >>> import numpy as np, lanewise as lw
      >>> def ema(state, price):
      ...     state = 0.5 * state + 0.5 * price
      ...     return state, state
      >>> series = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])
      >>> lw.vmap(lambda p: lw.scan(ema, p[0], p)[1])(series)
      array([[1. , 2. , 2.5],
             [2. , 2. , 1. ]])
    """
    _check_unroll(unroll)
    if _reference_mode.get() or config.backend == "python":
        return _reference(f, init, xs, length, reverse)
    return _compiled(f, init, xs, length, reverse)


scan._lw_intrinsic = True  # lanes call the Numba overload below, not this body
scan._lw_may_raise = True  # it checks lengths at run time (lanefn.may_raise)


def _check_unroll(unroll) -> None:
    if isinstance(unroll, bool) or (isinstance(unroll, (int, np.integer)) and unroll >= 1):
        return
    raise LanewiseError(f"lw.scan: unroll must be an int >= 1 or a bool (as in JAX), got {unroll!r}")


# ----------------------------------------------------------------------------- reference


def _reference(f, init, xs, length, reverse):
    """The spec: a Python loop, then a leaf-wise stack of the ``y`` s."""
    leaves, tree = pytree.flatten(xs)
    n = _length([np.shape(v)[0] if np.ndim(v) else None for v in leaves], length)
    init_sig = _signature(init)
    weak = _weak_leaves(init)
    carry, ys = init, []
    for i in (range(n - 1, -1, -1) if reverse else range(n)):
        carry, y = f(carry, pytree.unflatten(tree, [v[i] for v in leaves]))
        init_sig = _check_carry(init_sig, _signature(carry), f, weak)
        weak = frozenset()  # the first step fixed the carry's types
        ys.append(y)
    if reverse:
        ys.reverse()
    if not ys:
        x0 = pytree.unflatten(tree, [np.zeros(np.shape(v)[1:], np.asarray(v).dtype) for v in leaves])
        _, y0 = f(init, x0)  # only to learn the structure of y, as JAX traces it
        y_leaves, y_tree = pytree.flatten(y0)
        return carry, pytree.unflatten(y_tree, [np.empty((0,) + np.shape(v), np.asarray(v).dtype)
                                                for v in y_leaves])
    y_tree = pytree.flatten(ys[0])[1]
    columns = zip(*[pytree.flatten(y)[0] for y in ys], strict=True)
    return carry, pytree.unflatten(y_tree, [np.stack([np.asarray(v) for v in col]) for col in columns])


def _length(sizes, length) -> int:
    known = {s for s in sizes if s is not None}
    if any(s is None for s in sizes):
        raise LanewiseError("lw.scan: every leaf of xs must have a leading axis to scan over")
    if length is not None:
        known.add(int(length))
    if len(known) > 1:
        raise SizeMismatchError(f"lw.scan got leading sizes {sorted(known)} for the leaves of xs and "
                            "length; they must all agree")
    if not known:
        raise LanewiseError("lw.scan needs xs or length to know how many steps to run")
    return known.pop()


def _signature(value):
    leaves, tree = pytree.flatten(value)
    return tree, [(np.asarray(v).dtype, np.shape(v)) for v in leaves]


def _weak_leaves(init) -> frozenset:
    """Leaves of ``init`` that are Python floats or complexes: weak, as in JAX, which
    casts such an init to the step's narrower carry (``0.0`` to float32 over float32 xs)."""
    return frozenset(k for k, v in enumerate(pytree.flatten(init)[0]) if type(v) in (float, complex))


def _check_carry(before, after, f, weak=frozenset()):
    """The carry signature to hold the next steps to: ``before``, or ``after`` where
    a weak init leaf took a narrower float (complex) dtype."""
    if before[0] != after[0]:
        raise LaneTypeError(f"lw.scan: {_name(f)} returned a carry with structure {after[0]}, "
                            f"but init has structure {before[0]}")
    for k, (a, b) in enumerate(zip(before[1], after[1], strict=True)):
        if k in weak and a[1] == b[1] and a[0].kind == b[0].kind:
            continue
        if a != b:
            raise LaneTypeError(f"lw.scan: carry leaf {k} of {_name(f)} changed from "
                                f"{a[0]}{list(a[1])} (init) to {b[0]}{list(b[1])}; the carry must keep "
                                "its type and shape")
    return after


def _name(f) -> str:
    return getattr(f, "__qualname__", repr(f))


# ----------------------------------------------------------------------------- compiled


def _compiled(f, init, xs, length, reverse):
    from .numba_errors import compile_error

    leaves = pytree.flatten(xs)[0]
    _length([np.shape(v)[0] if np.ndim(v) else None for v in leaves], length)  # sizes named in the error
    init, xs = _as_tuples(init, "init"), _as_tuples(xs, "xs")
    try:
        return _entry_for(f)(init, xs, length, reverse)
    except NumbaError as e:
        raise compile_error(e, f, "cpu") from e


#: The module of a top-level scan: ``lane`` (the step function, compiled) is
#: injected, so the entry is a plain cached function of the carry and xs (an njit
#: taking the step as an argument cannot be cached: 2 s in every new process).
_ENTRY_SOURCE = """# Generated by lanewise: a top-level lw.scan of one step function.
import numba
from lanewise.lane.scanning import scan


@numba.njit(error_model="numpy", nogil=True, cache=True)
def entry(init, xs, length, reverse):
    return scan(lane, init, xs, length, reverse)
"""


_entries: "weakref.WeakKeyDictionary[Callable, dict]" = weakref.WeakKeyDictionary()


def _entry_for(f):
    """The compiled entry of a top-level scan of ``f``: kept per (function, its
    fingerprint, settings) in this process, and on disk when it can be fingerprinted."""
    from .lanefn import fingerprint

    print_ = fingerprint(f)
    memo = (print_, config.vector_math, config.disk_cache)
    try:
        known = _entries.setdefault(f, {})
    except TypeError:  # not weakly referenceable: built each time
        known = {}
    if print_ is None or memo not in known:
        known[memo] = _load_entry(f, print_)
    return known[memo]


def _load_entry(f, print_):
    from ..runtime import cache
    from .lanefn import jit_lane

    key = cache.key_of("scan", print_, config.vector_math) if print_ is not None and config.disk_cache else None
    found = cache.lookup(key) if key else None
    path = found[0] if found else (cache.store(key, _ENTRY_SOURCE, None) if key else None)
    name = f"lw_scan_{key or id(f)}"
    try:
        return cache.load_module(name, path, _ENTRY_SOURCE, {"lane": jit_lane(f)}).entry
    except OSError:  # the cache was deleted meanwhile: in memory
        return cache.load_module(name, None, _ENTRY_SOURCE, {"lane": jit_lane(f)}).entry


def _as_tuples(value, what):
    """Lists become tuples (Numba's allocation-free sequence); dicts are refused."""
    if isinstance(value, list):
        return tuple(_as_tuples(v, what) for v in value)
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_as_tuples(v, what) for v in value)
    if isinstance(value, dict):
        raise LaneTypeError(f"lw.scan: {what} is a dict; compiled scans take tuples or namedtuples")
    return value


@overload(scan, jit_options={"error_model": "numpy"}, inline="always")
def _scan_overload(f, init, xs=None, length=None, reverse=False, unroll=1):
    return scan_implementation(cpu_target.typing_context, f, init, xs)


def scan_implementation(typing_context, f, init, xs, stacked_ys=True):
    """The generated implementation of ``scan`` for these argument types.

    Each Numba target registers it as the overload of :func:`scan` with its own
    typing context (the CPU here; the cuda backend in its ``scan`` module, with
    ``stacked_ys=False``: device code cannot allocate the stacked ``ys``)."""
    init_t = _unliteral(init)
    x_leaves, x_tree = _type_leaves(xs, "xs")
    x_types = [_element_type(t) for t in x_leaves]
    x_type = _rebuild_type(x_tree, iter(x_types))
    sig = typing_context.resolve_function_type(f, (init_t, x_type), {})
    if sig is None:
        raise TypingError(f"lw.scan: cannot call {f} with (carry: {init_t}, x: {x_type})")
    out = sig.return_type
    if not isinstance(out, types.BaseTuple) or len(out) != 2:
        raise TypingError(f"lw.scan: the step function must return (carry, y), got {out}")
    carry_t = _unliteral(out[0])
    if not _same_carry(carry_t, init_t):
        raise TypingError(f"lw.scan: the step function returns a carry of type {carry_t}, but "
                          f"init has type {init_t}; the carry must keep its type (make init the "
                          "same type, e.g. 0.0 instead of 0)")
    y_leaves, y_tree = _type_leaves(out[1], "y")
    if y_leaves and not stacked_ys:
        raise TypingError(f"lw.scan: on the GPU a lane cannot allocate the stacked ys; the step "
                          f"function must return (carry, None) there, got y of type {out[1]} "
                          "(keep what you need in the carry)")
    # A real module name, and the step function as a global rather than the
    # argument value: Numba can then cache the lanes that call this scan.
    # The errors by name: a lane's failure is re-raised from its Python run, whose
    # message has the sizes (lanewise.backends.host.replay_lane).
    namespace = {"np": np, "__name__": __name__, "_step": f.dispatcher, "SizeMismatchError": SizeMismatchError,
                 "LanewiseError": LanewiseError}
    source = _render(x_leaves, x_tree, y_leaves, y_tree, init_t, namespace)
    exec(compile(source, "<lanewise scan>", "exec"), namespace)
    return namespace["impl"]


def _unliteral(t):
    if isinstance(t, types.BaseTuple) and not isinstance(t, types.BaseNamedTuple):
        return types.Tuple([_unliteral(c) for c in t.types])
    return types.unliteral(t)


def _same_carry(a, b) -> bool:
    if isinstance(a, types.Array) and isinstance(b, types.Array):
        return a.dtype == b.dtype and a.ndim == b.ndim
    if isinstance(a, types.BaseTuple) and isinstance(b, types.BaseTuple):
        return len(a) == len(b) and all(_same_carry(x, y) for x, y in zip(a.types, b.types))
    return a == b


def _type_leaves(t, what):
    """(leaf types, structure) of a Numba type: tuples/namedtuples nest, None is empty."""
    if t is None or isinstance(t, (types.NoneType, types.Omitted)):
        return [], None
    if isinstance(t, types.BaseTuple):
        leaves, children = [], []
        for c in t.types:
            sub, tree = _type_leaves(c, what)
            leaves += sub
            children.append(tree)
        cls = t.instance_class if isinstance(t, types.BaseNamedTuple) else None
        return leaves, ("tuple", cls, children)
    if what == "xs" and not isinstance(t, types.Array):
        raise TypingError(f"lw.scan: xs leaves must be arrays, got {t}")
    return [t], "leaf"


def _element_type(t: types.Array):
    if t.ndim == 1:
        return t.dtype
    return types.Array(t.dtype, t.ndim - 1, "C" if t.layout == "C" else "A", readonly=not t.mutable)


def _rebuild_type(tree, leaves):
    if tree is None:
        return types.none
    if tree == "leaf":
        return next(leaves)
    _, cls, children = tree
    parts = [_rebuild_type(c, leaves) for c in children]
    return types.NamedTuple(parts, cls) if cls else types.Tuple(parts)


def _expr(tree, leaves, namespace):
    """Source rebuilding a value of structure ``tree`` from leaf expressions."""
    if tree is None:
        return "None"
    if tree == "leaf":
        return next(leaves)
    _, cls, children = tree
    parts = [_expr(c, leaves, namespace) for c in children]
    if cls is not None:
        name = f"_cls{len(namespace)}"
        namespace[name] = cls
        return f"{name}({', '.join(parts)})"
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def _paths(tree, prefix="") -> list[str]:
    """Accessor suffixes (``[0][1]``) of each leaf, in order."""
    if tree is None:
        return []
    if tree == "leaf":
        return [prefix]
    return [p for k, c in enumerate(tree[2]) for p in _paths(c, f"{prefix}[{k}]")]


def _render(x_leaves, x_tree, y_leaves, y_tree, init_t, namespace) -> str:
    x_paths = _paths(x_tree, "xs")
    x_at = _expr(x_tree, iter(f"{p}[i]" for p in x_paths), namespace)
    lines = ["def impl(f, init, xs=None, length=None, reverse=False, unroll=1):"]
    if x_paths:
        lines.append(f"    n = {x_paths[0]}.shape[0]")
        for k, p in enumerate(x_paths[1:], 1):
            lines += [f"    if {p}.shape[0] != n:",
                      f"        raise SizeMismatchError('lw.scan: leaf {k} of xs has a different length')"]
        lines += ["    if length is not None and length != n:",
                  "        raise SizeMismatchError('lw.scan: length does not match xs')"]
    else:
        lines += ["    if length is None:", "        raise LanewiseError('lw.scan needs xs or length')",
                  "    n = length"]
    lines += ["    carry = init", "    i = n - 1 if reverse else 0", "    if n > 0:",
              f"        carry, y = _step(carry, {x_at})"]
    dtypes = [_dtype_name(t, namespace) for t in y_leaves]
    lines += [f"        ys{k} = np.empty((n,) + np.shape(y{p}), {dtypes[k]})"
              for k, p in enumerate(_paths(y_tree))]
    lines += [f"        ys{k}[i] = y{p}" for k, p in enumerate(_paths(y_tree))]
    # No step to learn an array y's shape from: zeros, like JAX's empty stack.
    lines += ["    else:", "        pass"]
    lines += [f"        ys{k} = np.empty((0,) * {_rank(t) + 1}, {dtypes[k]})"
              for k, t in enumerate(y_leaves)]
    lines += ["    for step in range(1, n):", "        i = n - 1 - step if reverse else step",
              f"        carry, y = _step(carry, {x_at})"]
    lines += [f"        ys{k}[i] = y{p}" for k, p in enumerate(_paths(y_tree))]
    ys = _expr(y_tree, iter(f"ys{k}" for k in range(len(y_leaves))), namespace)
    lines.append(f"    return carry, {ys}")
    return "\n".join(lines) + "\n"


def _rank(t) -> int:
    return t.ndim if isinstance(t, types.Array) else 0


def _dtype_name(t, namespace) -> str:
    # The scalar type (np.float64), not a dtype object: Numba embeds it as a
    # constant, so lanes calling this scan stay cacheable on disk.
    dtype = numba.np.numpy_support.as_dtype(t.dtype if isinstance(t, types.Array) else t)
    name = f"_dt{len(namespace)}"
    namespace[name] = dtype.type
    return name
