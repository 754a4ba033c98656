"""Executing a traced program: passes (one lw.vmap / lw.reduce nest each) and boundaries.

The :class:`Evaluator` schedules what the outputs need, in dependency order:

* a reduction is one fused map-reduce pass (``lw.reduce`` of a nested ``lw.vmap``
  of the generated lane); reductions over the same domain with the same op and
  axes share one pass (the lane returns a tuple);
* a boundary call runs once its operands are computed;
* elementwise outputs over the same shape are one ``lw.vmap`` pass returning a tuple.

Every step is recorded while tracing, so later calls with the same input
signature replay the steps without tracing again.  Inputs are handed to the
nest as views with their size-1 (broadcast) axes dropped and mapped only along
their real axes (``in_axes=None`` elsewhere): broadcasting is never materialised.

Example:
    >>> import numpy as np, lanewise as lw
    >>> f = lw.fuse(lambda x, y: (x[:, None] * y).sum(axis=1))
    >>> f(np.arange(3.0), np.ones(4))
    array([0., 4., 8.])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import optree

from .. import backends, reducing
from ..api import explain, vmap
from ..dtypes import storage_dtype
from .graph import (Boundary, BoundaryCall, Captured, Const, Elem, Input, Node, Reduce, View, apply_ops,
                    direct_sources, is_weak, source_deps, walk)
from .lower import LaneSource, generate


class Retrace(Exception):
    """A boundary's result changed shape or structure: the program must be traced again."""


@dataclass
class Pass:
    """One compiled loop nest over ``domain``: the lane computes ``roots`` for ``targets``."""

    domain: tuple[int, ...]
    roots: tuple[Node, ...]
    targets: tuple[Node, ...]
    reduce: tuple | None  # (op, axes) or None for a map
    lane: LaneSource
    squeeze: tuple  # per parameter: index dropping its size-1 axes, or None
    fn: Any  # the lw.vmap / lw.reduce callable, or the Python lane (0-d domain)
    backend: str | None

    def kind(self) -> str:
        if self.reduce is None:
            return f"map over {list(self.domain)}"
        op, axes = self.reduce
        return f"{op} over axes {list(axes)} of {list(self.domain)}"

    def arguments(self, ev: "Evaluator") -> list:
        values = [ev.value(p) for p in self.lane.params]
        values = [v if s is None else v[s] for v, s in zip(values, self.squeeze, strict=True)]
        if self.lane.anchor is not None:
            values.append(self.lane.anchor.type(0))
        return values

    def run(self, ev: "Evaluator") -> None:
        args = self.arguments(ev)
        if ev.dry:  # explain: compile and describe, compute nothing
            ev.describe_pass(self, args)
            results = [np.zeros(t.shape, t.dtype) for t in self.targets]
        elif not self.domain:
            results = self._scalar(args)
        else:
            out = self.fn(*args)
            results = list(out) if len(self.roots) > 1 else [out]
        for target, value in zip(self.targets, results, strict=True):
            ev.values[id(target)] = _finish(target, value) if not ev.dry else value

    def _scalar(self, args) -> list:
        """A 0-d domain: the lane runs once, in Python (nothing to map)."""
        with np.errstate(all="ignore"):
            out = self.fn(*[a[()] if isinstance(a, np.ndarray) else a for a in args])
        out = out if len(self.roots) > 1 else (out,)
        values = [np.asarray(v).astype(r.dtype)[()] for v, r in zip(out, self.roots, strict=True)]
        if self.reduce is None:
            return values
        op = self.reduce[0]
        return [getattr(np, op)(np.asarray(v)) for v in values]


def _finish(target: Node, value):
    """A reduction's result as NumPy gives it: keepdims axes, dtype= conversion, and a
    NumPy scalar, not a 0-d array, for a reduction over every axis."""
    if isinstance(target, Reduce):
        if target.keepdims:
            value = np.expand_dims(value, target.axes)
        if target.cast is not None:
            value = np.asarray(value).astype(target.cast)
        if isinstance(value, np.ndarray) and value.ndim == 0:
            value = value[()]
    return value


@dataclass
class BoundaryStep:
    """A call NumPy runs on materialised operands (a materialisation boundary)."""

    call: BoundaryCall
    nodes: tuple[Boundary, ...]

    def run(self, ev: "Evaluator") -> None:
        args, kwargs = self.call.rebuild(ev.materialise(self.call.inputs))
        result = self.call.func(*args, **kwargs)
        ev.store_boundary(self, optree.tree_flatten(result, none_is_leaf=True))


@dataclass
class Evaluator:
    """Values of one call: argument leaves in, computed nodes out; records its steps."""

    args: tuple
    backend: str | None = None
    dry: bool = False  # explain: compile and describe passes, compute nothing
    values: dict = field(default_factory=dict)
    steps: list = field(default_factory=list)
    notes: list = field(default_factory=list)  # explain: one entry per step
    _boundary_nodes: dict = field(default_factory=dict)  # id(BoundaryCall) -> its Boundary nodes

    # ------------------------------------------------------------------ values

    def value(self, node: Node):
        if isinstance(node, View):
            return apply_ops(self.value(node.base), node.ops)
        if isinstance(node, Input):
            return self.args[node.index]
        if isinstance(node, Captured):
            return node.value
        if isinstance(node, Const):
            return np.full(node.shape, node.value, node.dtype) if node.shape else node.dtype.type(node.value)
        return self.values[id(node)]

    def materialise(self, nodes) -> list:
        self.ensure(nodes)
        return [self.value(n) for n in nodes]

    # ------------------------------------------------------------------ scheduling

    def ensure(self, nodes) -> None:
        """Compute what ``nodes`` need (sources first), grouping passes that can share."""
        pending = [s for s in _sources_needed(nodes) if not self._done(s)]
        while pending:
            ready = [s for s in pending if all(self._done(d) for d in source_deps(s))]
            assert ready, "the traced graph has a cycle"
            groups: dict = {}
            for s in ready:
                if isinstance(s, Reduce):
                    groups.setdefault((s.arg.shape, s.op, s.axes), []).append(s)
            for (shape, op, axes), reds in groups.items():
                for part in kernel_sized(reds, lambda r: r.arg):
                    self._run(self._pass(shape, [r.arg for r in part], part, (op, axes)))
            for s in ready:
                if isinstance(s, Boundary) and not self._done(s):
                    self.ensure(s.call.inputs)
                    self._run(BoundaryStep(s.call, tuple(self._boundary_nodes[id(s.call)])))
            pending = [s for s in pending if not self._done(s)]
        shapes: dict = {}
        for n in nodes:
            if isinstance(n, Elem) and not self._done(n) and n not in shapes.get(n.shape, []):
                shapes.setdefault(n.shape, []).append(n)
        for shape, elems in shapes.items():
            for part in kernel_sized(elems):
                self._run(self._pass(shape, part, part, None))

    def _done(self, node) -> bool:
        return not isinstance(node, (Reduce, Boundary, Elem)) or id(node) in self.values

    def _run(self, step) -> None:
        self.steps.append(step)
        step.run(self)

    def _pass(self, domain, roots, targets, reduce) -> Pass:
        return make_pass(tuple(domain), tuple(roots), tuple(targets), reduce, self.backend)

    # ------------------------------------------------------------------ boundaries

    def record_boundary(self, call: BoundaryCall, nodes: list, out_leaves: list) -> None:
        """A boundary the tracer just ran: record its step, keep its results."""
        self._boundary_nodes[id(call)] = nodes
        step = BoundaryStep(call, tuple(nodes))
        self.steps.append(step)
        if self.dry:
            self.notes.append(("boundary", step, None))
        for node in nodes:
            self.values[id(node)] = out_leaves[node.leaf]

    def store_boundary(self, step: BoundaryStep, flat) -> None:
        leaves, tree = flat
        call = step.call
        statics = tuple(v for k, v in enumerate(leaves) if k not in {n.leaf for n in step.nodes})
        if tree != call.out_tree or not _same_statics(statics, call.out_static):
            raise Retrace(call.name)
        for node in step.nodes:
            value = leaves[node.leaf]
            dtype = value.dtype if hasattr(value, "dtype") else np.asarray(value).dtype
            if tuple(np.shape(value)) != node.shape or dtype != node.dtype:
                raise Retrace(call.name)  # e.g. x[x > 0]: the shape depends on the data
            self.values[id(node)] = value

    def describe_pass(self, p: Pass, args) -> None:
        text = explain(p.fn, *args) if p.domain and p.backend in (None, backends.EXPLAINED) else None
        self.notes.append(("pass", p, text))


#: At most this many lane parameters plus results in one pass.  A kernel takes every one
#: of them plus a few sizes and bounds, and Python 3.11+ compiles a call of more than 30
#: arguments to a ``*args`` call, which Numba refuses ("Calling a closure with *args").
MAX_PASS_VALUES = 20


def kernel_sized(targets: list, root=lambda node: node) -> list[list]:
    """``targets`` split, in order, into groups whose lanes (computing ``root(t)`` for
    each) read and return at most :data:`MAX_PASS_VALUES` values; a target alone may
    read more (it must run anyway).

    Example:
        >>> from lanewise.fuse.trace import Tracer
        >>> x = Tracer(evaluator=None).input(0, np.ones(3), "x")
        >>> [len(g) for g in kernel_sized([(x + float(k))._node for k in range(25)])]  # 1 input + 19 results
        [19, 6]
    """
    groups: list[list] = []
    for target in targets:
        if groups and _values_of([root(t) for t in groups[-1] + [target]]) <= MAX_PASS_VALUES:
            groups[-1].append(target)
        else:
            groups.append([target])
    return groups


def _values_of(roots) -> int:
    return len(roots) + sum(isinstance(n, View) for n in walk(roots))


def _same_statics(a, b) -> bool:
    try:
        return len(a) == len(b) and all(x is y or bool(x == y) for x, y in zip(a, b, strict=True))
    except Exception:  # noqa: BLE001 - incomparable values: assume changed
        return False


def _sources_needed(nodes) -> list[Node]:
    """Every source (reduction, boundary) ``nodes`` depend on, dependencies first."""
    order, seen = [], set()

    def visit(source):
        if id(source) in seen:
            return
        seen.add(id(source))
        for dep in source_deps(source):
            visit(dep)
        order.append(source)

    roots = []
    for n in nodes:
        if isinstance(n, (Reduce, Boundary)):
            roots.append(n)
        else:
            roots.extend(direct_sources([n]))
    for s in roots:
        visit(s)
    return [s for s in order if isinstance(s, (Reduce, Boundary))]


# ----------------------------------------------------------------------------- building passes


def make_pass(domain, roots, targets, reduce, backend) -> Pass:
    """Generate the lane for ``roots`` and wrap it in a nest of lw.vmap over ``domain``."""
    lane = generate(roots)
    anchor = _anchor(lane, roots)
    if anchor is not None:
        lane = generate(roots, anchor)
    squeeze, mapped = [], []
    rank = len(domain)
    for leaf in lane.params:
        shape = leaf.shape
        squeeze.append(tuple(0 if n == 1 else slice(None) for n in shape) if 1 in shape else None)
        mapped.append({rank - len(shape) + k for k, n in enumerate(shape) if n != 1})
    entry = backends.REGISTRY.get(backend)  # None: the config's backend, or "auto" (a compiled one)
    python = entry is not None and not entry.compiles
    fn = lane.function(python=python or not domain)
    for depth in reversed(range(rank)):
        in_axes = tuple(0 if depth in m else None for m in mapped) + ((None,) if anchor is not None else ())
        # axis_size only where no input gives the size: it is part of the kernel's signature,
        # and sizes taken from the inputs let one compiled kernel serve every shape.
        size = None if any(depth in m for m in mapped) else domain[depth]
        fn = vmap(fn, in_axes=in_axes, axis_size=size, backend=backend)
    if reduce is not None and rank:
        op, axes = reduce
        axis = (None if len(axes) == rank else axes[0]) if op in ("argmin", "argmax") else axes
        fn = reducing.reduce(fn, op, axis=axis)  # not reduce(): the parameter ``reduce`` shadows it
    return Pass(domain, roots, targets, reduce, lane, tuple(squeeze), fn, backend)


def _anchor(lane: LaneSource, roots) -> np.dtype | None:
    """lw.vmap stores a float result at the width of the widest array input (so that
    ``x * 2.0`` stays float32); NumPy may want it wider (``x.astype(np.float64)``).
    An unused scalar parameter of the result's dtype makes lanewise keep it."""
    strong = [p.dtype for p in lane.params if not is_weak(p)]
    wanted = [r.dtype for r in roots]
    if all(storage_dtype(d, strong) == d for d in wanted):
        return None
    return np.result_type(*[d for d in wanted if d.kind in "fc"])
