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
from ..errors import LaneTypeError, LanewiseError, SizeMismatchError, scalar_kind
from .records import Record, record_class

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
      init: the initial carry: a scalar, array, or tuple/namedtuple/dict of them
        (nested; dict leaves are ordered by sorted key, as JAX flattens them,
        and the step may return its dict with the keys in any order).
      xs: what to scan over: an array, a tuple/namedtuple/dict of arrays with
        equal leading size, or None (then ``length`` gives the number of steps).
      length: the number of steps when ``xs`` is None (must agree otherwise).
      reverse: scan from the end; ``ys`` stay in the order of ``xs``.
      unroll: accepted as in JAX (an int >= 1 or a bool); it changes no result, and
        the compiled loop is unrolled as LLVM sees fit.

    Returns:
      ``(carry, ys)``: the final carry and the ``y`` s stacked along a new
      leading axis (None where ``y`` is None); dicts stay dicts.

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
    n = _length(leaves, length)
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


def _length(leaves, length) -> int:
    """The number of steps: the leading size of the leaves of xs, and ``length``."""
    scalar = next((v for v in leaves if np.ndim(v) == 0), None)
    if scalar is not None:
        raise LanewiseError(_no_leading_axis(scalar_kind(scalar)))
    known = {np.shape(v)[0] for v in leaves}
    if length is not None:
        known.add(int(length))
    if len(known) > 1:
        raise SizeMismatchError(f"lw.scan got leading sizes {sorted(known)} for the leaves of xs and "
                            "length; they must all agree")
    if not known:
        raise LanewiseError("lw.scan needs xs or length to know how many steps to run")
    return known.pop()


def _no_leading_axis(scalar: str) -> str:
    """lw.scan's error for a leaf of xs that is ``scalar`` (a number: no axis to scan over);
    one text for the host and for compiled lanes."""
    return (f"lw.scan: a leaf of xs is {scalar}, which has no leading axis to scan over. A value every "
            "step reads unchanged is not scanned (lw.scan, like jax.lax.scan, has no in_axes): let the "
            "step read it from its enclosing scope (a closure), or carry it unchanged in init")


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
    if _length(leaves, length) == 0:
        # No step runs: the reference learns the structure of y from one Python call,
        # as JAX traces it (a typed dict's keys exist only when a step runs).
        return _reference(f, init, xs, length, reverse)
    init, xs = _as_tuples(init, "init"), _as_tuples(xs, "xs")
    try:
        return _as_dicts(_entry_for(f)(init, xs, length, reverse))
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
    from .fingerprint import fingerprint

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
    """Lists become tuples (Numba's allocation-free sequence); dicts become records
    (string keys, sorted as JAX flattens them), which the result turns back into dicts."""
    if isinstance(value, list):
        return tuple(_as_tuples(v, what) for v in value)
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_as_tuples(v, what) for v in value)
    if isinstance(value, dict):
        keys = tuple(value)
        if not all(isinstance(k, str) for k in keys):
            raise LaneTypeError(f"lw.scan: {what} is a dict with keys {list(keys)!r}; compiled scans take "
                                "dicts with string keys (or tuples; backend='python' takes any keys)")
        keys = tuple(sorted(keys))
        return record_class(keys)(*[_as_tuples(value[k], what) for k in keys])
    return value


def _as_dicts(value):
    """The result of a compiled top-level scan with its records and typed dicts as
    dicts, keys sorted (as ``jax.lax.scan`` returns them)."""
    if isinstance(value, Record):
        return {k: _as_dicts(v) for k, v in zip(value._lw_keys, value, strict=True)}
    if isinstance(value, numba.typed.Dict):
        return {k: _as_dicts(value[k]) for k in sorted(value)}
    if isinstance(value, tuple):
        parts = [_as_dicts(v) for v in value]
        return type(value)(*parts) if hasattr(value, "_fields") else tuple(parts)
    return value


@overload(scan, jit_options={"error_model": "numpy"}, inline="always")
def _scan_overload(f, init, xs=None, length=None, reverse=False, unroll=1):
    return scan_implementation(cpu_target.typing_context, f, init, xs)


def scan_implementation(typing_context, f, init, xs, stacked_ys=True):
    """The generated implementation of ``scan`` for these argument types.

    Each Numba target registers it as the overload of :func:`scan` with its own
    typing context (the CPU here; the cuda backend in its ``scan`` module, with
    ``stacked_ys=False``: device code cannot allocate the stacked ``ys``).

    Dicts in the carry travel as records (keys sorted, as JAX flattens them), so
    a step may return a dict display in any key order, or a typed dict, and the
    carry keeps one type."""
    init_leaves, init_tree = _type_leaves(init, "init")
    carry_in = _rebuild_type(init_tree, iter([types.unliteral(t) for t in init_leaves]))
    x_leaves, x_tree = _type_leaves(xs, "xs")
    x_types = [_element_type(t) for t in x_leaves]
    x_type = _rebuild_type(x_tree, iter(x_types))
    sig = typing_context.resolve_function_type(f, (carry_in, x_type), {})
    if sig is None:
        raise TypingError(f"lw.scan: cannot call {f} with (carry: {carry_in}, x: {x_type})")
    out = sig.return_type
    if not isinstance(out, types.BaseTuple) or len(out) != 2:
        raise TypingError(f"lw.scan: the step function must return (carry, y), got {out}")
    out_leaves, sized = _carry_leaves(init_tree, out[0], (out[0], init))
    carry_out = _rebuild_type(init_tree, iter([types.unliteral(t) for t in out_leaves]))
    if not _same_carry(carry_out, carry_in):
        raise TypingError(f"lw.scan: the step function returns a carry of type {_describe(out[0])}, but "
                          f"init has type {_describe(carry_in)}; the carry must keep its type (make init the "
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
                 "LanewiseError": LanewiseError, "LaneTypeError": LaneTypeError, "_Dict": numba.typed.Dict,
                 "_str": types.unicode_type, "_has_keys": _has_keys}
    carry = _CarrySource(init_tree, [isinstance(t, types.DictType) for t in init_leaves], sized, namespace)
    source = _render(x_leaves, x_tree, y_leaves, y_tree, carry, namespace)
    exec(compile(source, "<lanewise scan>", "exec"), namespace)
    return namespace["impl"]


def _carry_leaves(tree, t, whole, path=""):
    """The leaf types of the step's carry ``t`` at the places of init's ``tree``, and
    the paths where a typed dict stands for a dict of init (its keys are checked when
    it runs); a different structure is a TypingError naming both."""
    if tree == "leaf":
        return [t], []
    if tree is None:
        tree = ("tuple", None, [], None)  # None carries nothing: only a None matches it
        if t is None or isinstance(t, types.NoneType):
            return [], []
    _, _, children, keys = tree
    value = _typed_dict_value(t) if keys is not None else None
    if value is not None and all(c == "leaf" for c in children):
        return [value] * len(keys), [(path, keys)]
    got_keys, parts = _dict_parts(t)
    if got_keys is None and keys is None and isinstance(t, types.BaseTuple):
        parts = list(t.types)
    if got_keys != keys or parts is None or len(parts) != len(children):
        raise TypingError(f"lw.scan: the step function returned a carry with structure {_describe(whole[0])}, "
                          f"but init has structure {_describe(whole[1])}; they must be the same")
    index = keys if keys is not None else range(len(children))
    leaves, sized = [], []
    for k, c, part in zip(index, children, parts, strict=True):
        sub, checks = _carry_leaves(c, part, whole, f"{path}[{k!r}]")
        leaves += sub
        sized += checks
    return leaves, sized


def _describe(t) -> str:
    """A carry type as the user wrote it: ``{'a': float64, 'b': (int64, float64)}``."""
    keys, parts = _dict_parts(t)
    if keys is not None:
        return "{" + ", ".join(f"{k!r}: {_describe(v)}" for k, v in zip(keys, parts, strict=True)) + "}"
    if isinstance(t, types.BaseTuple):
        inner = ", ".join(_describe(c) for c in t.types)
        if isinstance(t, types.BaseNamedTuple):
            return f"{t.instance_class.__name__}({inner})"
        return f"({inner}{',' if len(t) == 1 else ''})"
    value = _typed_dict_value(t)
    if value is not None:
        return f"dict[str, {_describe(value)}] (Numba's typed dict, which a dict display of values of one type becomes)"
    return str(types.unliteral(t))


@numba.njit
def _has_keys(d, keys):
    """Whether dict ``d`` has exactly ``keys`` (a tuple of names, or another dict's keys)."""
    if len(d) != len(keys):
        return False
    for k in keys:
        if k not in d:
            return False
    return True


class _CarrySource:
    """The source lines that keep the carry in init's structure (dicts as records)."""

    def __init__(self, tree, typed, sized, namespace):
        self.tree, self.sized, self.namespace = tree, sized, namespace
        self.paths = _paths(tree)
        self.typed = [p for p, t in zip(self.paths, typed, strict=True) if t]  # typed-dict leaves: keys at run time
        self.rebuilt = _has_records(tree)

    def first(self) -> str:
        return "carry = " + (self._rebuild("init") if self.rebuilt else "init")

    def step(self, x_at: str, indent: str) -> list[str]:
        if not (self.rebuilt or self.sized or self.typed):
            return [f"{indent}carry, y = _step(carry, {x_at})"]
        lines = [f"{indent}stepped, y = _step(carry, {x_at})"]
        tests = [(f"not _has_keys(stepped{p}, {keys!r})", f"init{p} has the keys {list(keys)!r}")
                 for p, keys in self.sized]
        tests += [(f"not _has_keys(stepped{p}, init{p})", f"init{p} has different keys") for p in self.typed]
        for test, why in tests:
            message = f"lw.scan: the step function returned a carry dict with other keys than init ({why})"
            lines += [f"{indent}if {test}:", f"{indent}    raise LaneTypeError({message!r})"]
        return lines + [f"{indent}carry = {self._rebuild('stepped') if self.rebuilt else 'stepped'}"]

    def _rebuild(self, root: str) -> str:
        return _expr(self.tree, iter(f"{root}{p}" for p in self.paths), self.namespace)


def _has_records(tree) -> bool:
    return isinstance(tree, tuple) and (tree[3] is not None or any(_has_records(c) for c in tree[2]))


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
    """(leaf types, structure) of a Numba type: tuples/namedtuples nest, None is
    empty.  A dict whose keys the type knows (a record from the top level, a dict
    display of values of different types) is a record node, keys sorted as JAX
    orders them; a typed dict (a display of values of one type: its keys are known
    only when it runs) is a leaf."""
    if t is None or isinstance(t, (types.NoneType, types.Omitted)):
        return [], None
    keys, parts = _dict_parts(t)
    if keys is not None or isinstance(t, types.BaseTuple):
        leaves, children = [], []
        for c in (parts if keys is not None else t.types):
            sub, tree = _type_leaves(c, what)
            leaves += sub
            children.append(tree)
        cls = record_class(keys) if keys is not None else (
            t.instance_class if isinstance(t, types.BaseNamedTuple) else None)
        return leaves, ("tuple", cls, children, keys)
    if what == "xs" and not isinstance(_typed_dict_value(t) or t, types.Array):
        raise TypingError(_no_leading_axis(f"a {t}"))
    return [t], "leaf"


def _dict_parts(t):
    """(sorted keys, their value types) of a record or literal-keyed dict type, else (None, None)."""
    if isinstance(t, types.BaseNamedTuple) and issubclass(t.instance_class, Record):
        return t.instance_class._lw_keys, list(t.types)
    if isinstance(t, types.LiteralStrKeyDict):
        items = sorted((k.literal_value, v) for k, v in t.literal_value.items())
        return tuple(k for k, _ in items), [v for _, v in items]
    return None, None


def _typed_dict_value(t):
    """The value type of a typed dict with string keys, else None."""
    if isinstance(t, types.DictType) and t.key_type == types.unicode_type:
        return t.value_type
    return None


def _element_type(t):
    value = _typed_dict_value(t)
    if value is not None:  # a typed dict of arrays: a typed dict of their elements
        return types.DictType(types.unicode_type, _element_type(value))
    if t.ndim == 1:
        return t.dtype
    return types.Array(t.dtype, t.ndim - 1, "C" if t.layout == "C" else "A", readonly=not t.mutable)


def _rebuild_type(tree, leaves):
    if tree is None:
        return types.none
    if tree == "leaf":
        return next(leaves)
    _, cls, children, _ = tree
    parts = [_rebuild_type(c, leaves) for c in children]
    return types.NamedTuple(parts, cls) if cls else types.Tuple(parts)


def _expr(tree, leaves, namespace):
    """Source rebuilding a value of structure ``tree`` from leaf expressions."""
    if tree is None:
        return "None"
    if tree == "leaf":
        return next(leaves)
    _, cls, children, _ = tree
    parts = [_expr(c, leaves, namespace) for c in children]
    if cls is not None:
        name = f"_cls{len(namespace)}"
        namespace[name] = cls
        return f"{name}({', '.join(parts)})"
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def _paths(tree, prefix="") -> list[str]:
    """Accessor suffixes (``[0]['a']``) of each leaf, in order: a dict node is indexed by
    key, which records, literal-keyed and typed dicts all take."""
    if tree is None:
        return []
    if tree == "leaf":
        return [prefix]
    _, _, children, keys = tree
    index = keys if keys is not None else range(len(children))
    return [p for k, c in zip(index, children, strict=True) for p in _paths(c, f"{prefix}[{k!r}]")]


def _render(x_leaves, x_tree, y_leaves, y_tree, carry, namespace) -> str:
    x_paths = _paths(x_tree, "xs")
    rows = [_typed_dict_value(t) is not None for t in x_leaves]  # typed dicts: a new dict of elements each step
    x_at = _expr(x_tree, iter(f"x{k}" if row else f"{p}[i]"
                              for k, (p, row) in enumerate(zip(x_paths, rows, strict=True))), namespace)
    lines = ["def impl(f, init, xs=None, length=None, reverse=False, unroll=1):"] + _length_lines(x_paths, rows)
    elements = _x_rows(x_paths, x_leaves, rows, namespace)
    lines += ["    " + carry.first(), "    i = n - 1 if reverse else 0", "    if n > 0:"]
    lines += [f"        {e}" for e in elements] + carry.step(x_at, "        ")
    y_paths = _paths(y_tree)
    stacks = [_YStack(k, p, t, namespace) for k, (p, t) in enumerate(zip(y_paths, y_leaves, strict=True))]
    lines += [line for s in stacks for line in s.first()]
    # No step to learn an array y's shape from: zeros, like JAX's empty stack.
    lines += ["    else:", "        pass"] + [f"        {s.empty()}" for s in stacks]
    lines += ["    for step in range(1, n):", "        i = n - 1 - step if reverse else step"]
    lines += [f"        {e}" for e in elements] + carry.step(x_at, "        ")
    lines += [line for s in stacks for line in s.store()]
    ys = _expr(y_tree, iter(f"ys{k}" for k in range(len(y_leaves))), namespace)
    lines.append(f"    return carry, {ys}")
    return "\n".join(lines) + "\n"


def _length_lines(x_paths, rows) -> list[str]:
    """Source setting ``n``, the number of steps, from the leaves of xs (a typed dict's
    arrays are counted when it runs) or ``length``, all of which must agree."""
    if not x_paths:
        return ["    if length is None:", "        raise LanewiseError('lw.scan needs xs or length')", "    n = length"]
    lines = ["    n = -1"]
    for k, (p, row) in enumerate(zip(x_paths, rows, strict=True)):
        pad = "    " if row else ""
        sizes = [f"    for rows{k} in {p}.values():", f"        size = rows{k}.shape[0]"] if row \
            else [f"    size = {p}.shape[0]"]
        lines += sizes + [f"{pad}    if n < 0:", f"{pad}        n = size", f"{pad}    elif size != n:",
                          f"{pad}        raise SizeMismatchError('lw.scan: leaf {k} of xs has a different length')"]
    return lines + ["    if n < 0:",
                    "        raise LanewiseError('lw.scan: xs has no arrays to scan over (an empty dict)')",
                    "    if length is not None and length != n:",
                    "        raise SizeMismatchError('lw.scan: length does not match xs')"]


def _x_rows(x_paths, x_leaves, rows, namespace) -> list[str]:
    """Statements making ``x{k}``, the typed dict of step ``i``'s elements of a typed dict of arrays."""
    lines = []
    for k, (p, t, row) in enumerate(zip(x_paths, x_leaves, rows, strict=True)):
        if row:
            namespace[f"_xt{k}"] = _element_type(_typed_dict_value(t))
            lines += [f"x{k} = _Dict.empty(_str, _xt{k})", f"for key, rows{k} in {p}.items():",
                      f"    x{k}[key] = rows{k}[i]"]
    return lines


class _YStack:
    """The source lines stacking the leaf ``y{path}`` of each step into ``ys{k}``:
    an array, or for a typed dict (keys known when it runs) a typed dict of arrays."""

    def __init__(self, k, path, t, namespace):
        self.k, self.path = k, path
        value = _typed_dict_value(t)
        self.dtype = _dtype_name(value if value is not None else t, namespace)
        self.rank = _rank(value if value is not None else t)
        self.stacked = None
        if value is not None:
            self.stacked = f"_yt{len(namespace)}"
            namespace[self.stacked] = types.Array(_scalar(value), self.rank + 1, "C")

    def first(self) -> list[str]:
        if self.stacked is None:
            return [f"        ys{self.k} = np.empty((n,) + np.shape(y{self.path}), {self.dtype})",
                    f"        ys{self.k}[i] = y{self.path}"]
        return [f"        ys{self.k} = _Dict.empty(_str, {self.stacked})",
                f"        for key, v{self.k} in y{self.path}.items():",
                f"            ys{self.k}[key] = np.empty((n,) + np.shape(v{self.k}), {self.dtype})",
                f"            ys{self.k}[key][i] = v{self.k}"]

    def empty(self) -> str:
        if self.stacked is None:
            return f"ys{self.k} = np.empty((0,) * {self.rank + 1}, {self.dtype})"
        return f"ys{self.k} = _Dict.empty(_str, {self.stacked})"  # its keys are unknown without a step

    def store(self) -> list[str]:
        if self.stacked is None:
            return [f"        ys{self.k}[i] = y{self.path}"]
        return [f"        if len(y{self.path}) != len(ys{self.k}):",
                "            raise LaneTypeError('lw.scan: the step function returned y dicts with different keys')",
                f"        for key, v{self.k} in y{self.path}.items():", f"            ys{self.k}[key][i] = v{self.k}"]


def _scalar(t):
    return t.dtype if isinstance(t, types.Array) else types.unliteral(t)


def _rank(t) -> int:
    return t.ndim if isinstance(t, types.Array) else 0


def _dtype_name(t, namespace) -> str:
    # The scalar type (np.float64), not a dtype object: Numba embeds it as a
    # constant, so lanes calling this scan stay cacheable on disk.
    dtype = numba.np.numpy_support.as_dtype(_scalar(t))
    name = f"_dt{len(namespace)}"
    namespace[name] = dtype.type
    return name
