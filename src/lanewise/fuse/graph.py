"""The expression DAG that ``@lw.fuse`` traces: frozen nodes with shapes and dtypes.

Every node knows its NumPy shape and dtype (computed by NumPy's own rules when
the node is made), so lowering never guesses.  Nodes compare by identity: the
tracer interns them (one node per distinct expression), so structurally equal
sub-expressions are one object and the DAG stays a DAG (hashing nodes by value
would re-walk shared sub-graphs exponentially often).

Kinds of node:

* sources, whose values come from outside the lanes: :class:`Input` (an argument
  of the fused function), :class:`Captured` (an array the function closes over),
  :class:`Reduce` (computed by an earlier pass) and :class:`Boundary` (a NumPy
  call lanewise cannot fuse, run on materialised operands);
* :class:`View` — a source seen through basic indexing / transposes (free views
  of the concrete array; broadcasting is never materialised);
* :class:`Const` — a scalar constant, inlined into the generated lane;
* :class:`Elem` — an elementwise operation (ufunc, where, cast, vmapped lane call).

Example:
    >>> import numpy as np
    >>> x = Input(shape=(3,), dtype=np.dtype("float64"), index=0, name="x")
    >>> v = View(shape=(3, 1), dtype=x.dtype, base=x, ops=(Index((Slice(0, 1, 3), None)),))
    >>> v.shape, apply_ops(np.arange(3.0), v.ops).shape
    ((3, 1), (3, 1))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

_NODE = dict(frozen=True, eq=False, kw_only=True)


@dataclass(**_NODE)
class Node:
    shape: tuple[int, ...]
    dtype: np.dtype
    where: str = ""  # the user's file:line that made it (comments, explain)


@dataclass(**_NODE)
class Input(Node):
    """Leaf ``index`` of the flattened arguments of the fused function."""

    index: int
    name: str
    weak: bool = False  # a Python float/complex: NumPy 2's *weak* scalar


@dataclass(**_NODE)
class Captured(Node):
    """A concrete NumPy array the traced function closes over (or a NumPy scalar)."""

    value: Any


@dataclass(**_NODE)
class Const(Node):
    """A scalar constant, inlined into the lane; ``shape`` may broadcast it (``zeros_like``)."""

    value: Any
    weak: bool = True


@dataclass(**_NODE)
class View(Node):
    """A source seen through view operations (applied to the concrete array per call)."""

    base: Node
    ops: tuple = ()


@dataclass(**_NODE)
class Elem(Node):
    """An elementwise operation ``op`` (a key of ``rules.UFUNCS``, or "where", "cast",
    "lane", "item") of ``args`` broadcast to ``shape``; ``loop`` are the dtypes each
    argument is converted to first (NumPy's ufunc loop)."""

    op: str
    args: tuple[Node, ...]
    loop: tuple[np.dtype, ...] = ()
    fn: Callable | None = None  # op "lane": the user's scalar lane function
    item: int | None = None  # op "item": which result of a "lane" call
    dtypes: tuple = ()  # op "lane": dtype of each result
    weak: bool = False  # Python arithmetic on Python scalars (``s * 1j``): still a weak scalar


@dataclass(**_NODE)
class Reduce(Node):
    """``op`` over ``axes`` of ``arg`` (fused with arg's producer by lw.reduce)."""

    op: str
    arg: Node
    axes: tuple[int, ...]
    keepdims: bool = False
    cast: np.dtype | None = None  # NumPy's ``dtype=``: result converted to it


@dataclass(**_NODE)
class BoundaryCall:
    """A call lanewise cannot fuse: ``func`` run by NumPy on materialised operands."""

    name: str
    func: Callable
    inputs: tuple[Node, ...]  # the traced operands, materialised before the call
    rebuild: Callable  # values of inputs -> (args, kwargs) for func
    out_tree: Any  # structure of the result seen while tracing
    out_static: tuple  # its non-array leaves (must not change between calls)
    where: str = ""


@dataclass(**_NODE)
class Boundary(Node):
    """Array leaf ``leaf`` of a :class:`BoundaryCall`'s result."""

    call: BoundaryCall
    leaf: int


SOURCES = (Input, Captured, Reduce, Boundary)


def is_weak(node: Node) -> bool:
    """A Python scalar (constant or float argument): NumPy 2's weak promotion applies."""
    if isinstance(node, View):
        node = node.base
    return getattr(node, "weak", False)


# ----------------------------------------------------------------------------- view ops


@dataclass(frozen=True)
class Slice:
    """A normalised basic slice: ``length`` elements from ``start`` by ``step``."""

    start: int
    step: int
    length: int

    def py(self) -> slice:
        stop = self.start + self.step * self.length
        return slice(self.start, None if stop < 0 else stop, self.step)


@dataclass(frozen=True)
class Index:
    """Basic indexing: one entry per base dim (int or :class:`Slice`), plus ``None``
    entries where new axes go.  Always a view."""

    items: tuple

    def apply(self, value):
        return value[tuple(i.py() if isinstance(i, Slice) else i for i in self.items)]

    def shape(self, shape):
        out, dims = [], iter(shape)
        for item in self.items:
            if item is None:
                out.append(1)
            elif isinstance(item, Slice):
                next(dims)
                out.append(item.length)
            else:
                next(dims)
        return tuple(out)


@dataclass(frozen=True)
class Transpose:
    perm: tuple[int, ...]

    def apply(self, value):
        return value.transpose(self.perm)

    def shape(self, shape):
        return tuple(shape[p] for p in self.perm)


@dataclass(frozen=True)
class Reshape:
    """A general reshape; only ever applied to a source's concrete array."""

    new_shape: tuple[int, ...]

    def apply(self, value):
        return value.reshape(self.new_shape)

    def shape(self, shape):
        return self.new_shape


def apply_ops(value, ops) -> Any:
    """The concrete view of ``value`` under ``ops``."""
    for op in ops:
        value = op.apply(value)
    return value


def normalise_slice(s: slice, n: int) -> Slice:
    start, stop, step = s.indices(n)
    return Slice(start, step, len(range(start, stop, step)))


def size1_index(old: tuple[int, ...], new: tuple[int, ...]) -> Index | None:
    """A reshape from ``old`` to ``new`` that only adds/removes size-1 axes, as an
    :class:`Index` (which also pushes through elementwise nodes); else None."""
    if [d for d in old if d != 1] != [d for d in new if d != 1]:
        return None
    items, i, j = [], 0, 0
    while i < len(old) or j < len(new):
        if j < len(new) and new[j] == 1 and (i >= len(old) or old[i] != 1):
            items.append(None)
            j += 1
        elif i < len(old) and old[i] == 1 and (j >= len(new) or new[j] != 1):
            items.append(0)
            i += 1
        else:  # matching dims (both 1, or the same non-1 size)
            items.append(Slice(0, 1, old[i]))
            i += 1
            j += 1
    return Index(tuple(items))


def translate_for_operand(op, operand_shape, result_shape):
    """``op`` (meant for an elementwise result) as it applies to one broadcast operand.

    ``operand_shape`` is already padded to the result's rank.  A dim the operand
    broadcasts (size 1 against a larger size) keeps size 1: an int index becomes 0,
    a slice keeps the single element (or none, for an empty slice).
    """
    if not isinstance(op, Index):
        return op
    items, d = [], 0
    for item in op.items:
        if item is None:
            items.append(None)
            continue
        broadcast = operand_shape[d] == 1 and result_shape[d] != 1
        if broadcast and isinstance(item, Slice):
            item = Slice(0, 1, 1 if item.length else 0)
        elif broadcast:
            item = 0
        items.append(item)
        d += 1
    return Index(tuple(items))


def pad_for(shape: tuple[int, ...], rank: int) -> Index:
    return Index((None,) * (rank - len(shape)) + tuple(Slice(0, 1, n) for n in shape))


def walk(roots) -> list[Node]:
    """The elementwise nodes of ``roots`` (post-order, each once): descends through
    :class:`Elem` arguments only; Views, constants and sources are leaves."""
    seen, order = set(), []
    stack = [(r, False) for r in reversed(list(roots))]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        if isinstance(node, Elem):
            stack.extend((a, False) for a in reversed(node.args) if id(a) not in seen)
    return order


def direct_sources(roots) -> list[Node]:
    """The sources that ``roots`` read (through Views), in first-use order."""
    found, seen = [], set()
    for node in walk(roots):
        base = node.base if isinstance(node, View) else node if isinstance(node, SOURCES) else None
        if base is not None and id(base) not in seen:
            seen.add(id(base))
            found.append(base)
    return found


def source_deps(source: Node) -> list[Node]:
    """The sources a source needs before it can be computed."""
    if isinstance(source, Reduce):
        return direct_sources([source.arg])
    if isinstance(source, Boundary):
        return direct_sources(source.call.inputs)
    return []
