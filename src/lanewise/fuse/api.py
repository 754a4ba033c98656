"""``lw.fuse``: NumPy-style array code, traced once per input signature, run as fused passes.

Example:
    >>> import numpy as np, lanewise as lw
    >>> @lw.fuse
    ... def wave(x, y):
    ...     r = x[:, None] ** 2 + y[None, :] ** 2
    ...     return np.cos(r) / (1 + r)
    >>> x = np.linspace(-2, 2, 5)
    >>> np.allclose(wave(x, x), np.cos(x[:, None]**2 + x**2) / (1 + x[:, None]**2 + x**2))
    True
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import optree

from .. import backends, pytree
from ..api import Explanation
from ..errors import function_location
from .run import BoundaryStep, Evaluator, Pass, Retrace
from .trace import Proxy, Tracer


def fuse(fun: Callable | None = None, *, backend: str | None = None):
    """Compile NumPy-style array code into fused lanewise loop nests.

    ``fun`` is traced on array proxies the first time it is called with a given
    input signature (argument structure, dtypes, shapes, and the values of
    non-array arguments); the traced expression DAG becomes one generated scalar
    lane per pass, run by nested :func:`lanewise.vmap` (elementwise outputs) or
    :func:`lanewise.reduce` (reductions, fused with the expression that feeds
    them).  No intermediate array is materialised and broadcasting never copies:
    a chain of elementwise operations and a final reduction runs in constant memory.

    What is traced: arithmetic, comparisons and logic operators; NumPy ufuncs
    (``np.sin``, ``np.maximum`` ...); ``np.where``, ``np.clip``, ``astype``;
    indexing with ints, slices, ``None``/``np.newaxis`` and ``...``; ``.T``,
    ``transpose``, ``reshape``/``squeeze``/``expand_dims`` views; the reductions
    ``sum``, ``prod``, ``mean``, ``min``, ``max``, ``any``, ``all``, ``argmin``,
    ``argmax`` (functions or methods, ``axis=``, ``keepdims=``, ``dtype=``);
    calls of ``lw.vmap``-ped lane functions.  Anything else NumPy can do on the
    computed operands (``@``, ``np.sort``, fancy indexing, an unknown NumPy
    function) runs as a *materialisation boundary* that :func:`lanewise.explain`
    lists; code that needs values while tracing (``if`` on array values,
    ``float(x)``, a library calling ``np.asarray``) raises
    :class:`lanewise.fuse.FuseError` naming the operation and line.

    Semantics are NumPy 2's: result dtypes, weak Python scalars, NaN handling.
    Python ``int``/``bool`` arguments (and other non-array values) are static:
    part of the signature, baked into the trace (axes, flags).  Python ``float``
    and ``complex`` arguments are run-time values.

    Args:
      fun: the array function (or None, to use ``@lw.fuse(backend=...)``).
      backend: passed to every ``lw.vmap`` (``"cpu"``, ``"python"``, ``"cuda"``,
        ``"dask"``); default: chosen from the arguments as ``lw.vmap`` does.

    Returns:
      A :class:`Fused` callable with ``fun``'s signature.

    Example:
      >>> import numpy as np, lanewise as lw
      >>> @lw.fuse
      ... def energy(x, y):
      ...     return np.where(x > 0.5, np.sqrt(x * x + y * y), 0.0).sum()
      >>> float(energy(np.array([0.3, 0.6, 0.8]), np.array([0.4, 0.8, 0.6])))
      2.0
    """
    if fun is None:
        return lambda f: Fused(f, backend)
    return Fused(fun, backend)


class Fused:
    """A function compiled by :func:`fuse` (call it like the original).

    Example:
      >>> import numpy as np, lanewise as lw
      >>> norm = lw.fuse(lambda v: np.sqrt((v * v).sum(axis=-1)))
      >>> norm(np.array([[3.0, 4.0], [6.0, 8.0]]))
      array([ 5., 10.])
    """

    def __init__(self, fun: Callable, backend: str | None = None):
        if not callable(fun):
            raise TypeError(f"lw.fuse expects a function, got {type(fun).__name__}")
        backends.check(backend)  # fail early on a typo
        self.fun, self.backend = fun, backend
        self._programs: dict = {}
        functools.update_wrapper(self, fun, updated=())

    def __repr__(self) -> str:
        return f"fuse({getattr(self.fun, '__qualname__', self.fun)!s})"

    def __call__(self, *args, **kwargs):
        bound = bind(args, kwargs)
        if bound is None:
            return self.fun(*args, **kwargs)  # called inside another fused function: trace through
        program = self._programs.get(bound.key)
        if program is not None:
            try:
                return program.run(bound.leaves)
            except Retrace:  # a boundary's result changed shape (e.g. x[x > 0]): trace again
                pass
        program, result, _ = trace(self.fun, bound, self.backend)
        self._programs[bound.key] = program
        return result

    def _lw_explain(self, *args, **kwargs):
        """``lw.explain(fused, *args)``: the passes, their lanes and kernels, and boundaries."""
        bound = bind(args, kwargs)
        if bound is None:
            raise TypeError("lw.explain of a fused function needs concrete arrays, not traced ones")
        program, _, ev = trace(self.fun, bound, self.backend, dry=True)
        return explanation(self, program, ev)


# ----------------------------------------------------------------------------- binding


@dataclass(frozen=True)
class Bound:
    """A call's argument leaves and the key of its signature."""

    key: tuple
    args: tuple  # the positional arguments (lists of numbers as arrays)
    tree: Any
    leaves: tuple  # every leaf: arrays, scalars and statics, handed to the program
    kinds: tuple  # per leaf: "array", "weak" or "static"


def bind(args, kwargs) -> Bound | None:
    """The signature of a call (cheap: it runs on every call); None if it holds
    traced arrays (a fused function called inside another one)."""
    args = tuple(_as_array(a) for a in args)
    kwargs = {k: _as_array(v) for k, v in kwargs.items()}
    leaves, tree = optree.tree_flatten((args, kwargs))
    kinds = tuple(_kind(leaf) for leaf in leaves)
    if "proxy" in kinds:
        return None
    key = (tree, tuple(_leaf_key(leaf, kind) for leaf, kind in zip(leaves, kinds, strict=True)))
    return Bound(key, args, tree, tuple(leaves), kinds)


def leaf_names(fun, bound: Bound) -> list[str]:
    """How the user names each leaf (``x``, ``p['a']``), for messages and explain."""
    positional = _param_names(fun, len(bound.args))
    names = []
    for path in optree.tree_paths(optree.tree_unflatten(bound.tree, list(bound.leaves))):
        root = positional[path[1]] if path[0] == 0 else str(path[1])
        names.append(pytree.path_name(root, path[2:]))
    return names


def _as_array(value):
    """Lists of numbers are arrays (as lw.vmap treats them)."""
    if isinstance(value, list) and value and all(isinstance(v, (int, float, complex, bool)) for v in value):
        return np.asarray(value)
    return value


def _kind(leaf) -> str:
    if isinstance(leaf, Proxy):
        return "proxy"
    if isinstance(leaf, (np.ndarray, np.generic)):
        return "array"
    if isinstance(leaf, (float, complex)):
        return "weak"
    if hasattr(leaf, "shape") and hasattr(leaf, "dtype") and (
            hasattr(leaf, "__array_function__") or hasattr(leaf, "__cuda_array_interface__")):
        return "array"  # dask, CUDA arrays: lw.vmap picks their backend
    return "static"


def _leaf_key(leaf, kind: str):
    if kind == "array":
        return (type(leaf), np.dtype(leaf.dtype).str, tuple(leaf.shape))
    if kind == "weak":
        return (type(leaf),)
    try:
        hash(leaf)
    except TypeError:
        return ("id", id(leaf))
    return ("static", type(leaf), leaf)


def _param_names(fun, n: int) -> list[str]:
    try:
        params = [p for p in inspect.signature(fun).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return [params[i].name if i < len(params) else f"args[{i}]" for i in range(n)]


# ----------------------------------------------------------------------------- tracing


@dataclass(frozen=True)
class Program:
    """A traced function: recorded steps and where each output comes from."""

    steps: tuple
    outputs: tuple  # per output leaf: a node, or ("static", value)
    out_tree: Any
    backend: str | None
    boundaries: tuple

    def run(self, values: tuple):
        ev = Evaluator(values, self.backend)
        for step in self.steps:
            step.run(ev)
        return self.assemble(ev)

    def assemble(self, ev: Evaluator):
        leaves = [out[1] if isinstance(out, tuple) else ev.value(out) for out in self.outputs]
        return optree.tree_unflatten(self.out_tree, leaves)

    @property
    def passes(self) -> list[Pass]:
        return [s for s in self.steps if isinstance(s, Pass)]


def trace(fun, bound: Bound, backend, dry: bool = False):
    """Trace ``fun`` on proxies of ``bound``'s arrays; run it (or, ``dry``, describe it)."""
    ev = Evaluator(bound.leaves, backend, dry)
    tracer = Tracer(ev)
    names = leaf_names(fun, bound)
    leaves = [leaf if kind == "static" else tracer.input(k, leaf, name, kind == "weak")
              for k, (leaf, kind, name) in enumerate(zip(bound.leaves, bound.kinds, names, strict=True))]
    args, kwargs = optree.tree_unflatten(bound.tree, leaves)
    out = fun(*args, **kwargs)
    out_leaves, out_tree = optree.tree_flatten(out)
    nodes = [leaf._node for leaf in out_leaves if isinstance(leaf, Proxy)]
    ev.ensure(nodes)
    outputs = tuple(leaf._node if isinstance(leaf, Proxy) else ("static", leaf) for leaf in out_leaves)
    program = Program(tuple(ev.steps), outputs, out_tree, backend, tuple(tracer.boundaries))
    return program, program.assemble(ev), ev


# ----------------------------------------------------------------------------- explain


def explanation(fused: Fused, program: Program, ev: Evaluator):
    """The text of ``lw.explain(fused, ...)`` (an :class:`lanewise.Explanation`)."""
    passes = [note for note in ev.notes if note[0] == "pass"]
    bounds = [note for note in ev.notes if note[0] == "boundary"]
    lines = [f"lanewise fuse: {fused!r} defined at {function_location(fused.fun)}",
             f"{len(passes)} fused pass(es) (one loop nest each), {len(bounds)} materialisation boundary(ies)"]
    kernels, lanes = [], []
    for k, (_, step, text) in enumerate(ev.notes, 1):
        if isinstance(step, BoundaryStep):
            shapes = ", ".join(f"{n.dtype}{list(n.shape)}" for n in step.call.inputs) or "none"
            lines.append(f"step {k}: materialisation boundary: {step.call.name} at {step.call.where}; "
                         f"operands materialised: {shapes}")
            continue
        lines.append(f"step {k}: pass: {step.kind()} -> {len(step.targets)} result(s); "
                     f"lane {step.lane.filename}:")
        lines += ["    " + line for line in step.lane.text.splitlines()]
        lanes.append(step.lane.text)
        if text is not None:
            kernels.append(text.source)
            lines += ["    " + line for line in str(text).splitlines()]
    result = Explanation("\n".join(lines))
    result.source = "\n".join(kernels)
    result.program = program
    result.passes = [text for _, _, text in passes]
    result.lanes = lanes
    result.boundaries = [f"{step.call.name} at {step.call.where}" for _, step, _ in bounds]
    return result
