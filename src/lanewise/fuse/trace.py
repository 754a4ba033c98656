"""Tracing NumPy-style code on array proxies into the DAG of :mod:`.graph`.

A :class:`Proxy` stands for an array while ``@lw.fuse`` runs the user's function
once per input signature.  Arithmetic, comparisons and NumPy ufuncs (through
``__array_ufunc__``), NumPy functions (through ``__array_function__``), methods
(``.sum``, ``.astype`` ...) and basic indexing build nodes; nothing is computed.

* Views (``x[:, None]``, ``.T``, slices, size-1 reshapes) of an elementwise
  expression are pushed down to its leaves, where they are free views of the
  concrete arrays: broadcasting is never materialised.
* What cannot be fused (``@``, ``np.sort``, fancy indexing, a ufunc with no rule,
  an unknown ``__array_function__``) becomes a *materialisation boundary*: its
  operands are computed, NumPy runs the call, tracing continues on the result
  (``lw.explain`` lists every boundary).
* What cannot be traced at all (``if`` on array values, ``float(x)``,
  ``np.asarray(x)`` inside a library) raises :class:`FuseError` naming the
  operation and the user's line.

Example:
    >>> import numpy as np
    >>> t = Tracer(evaluator=None)
    >>> x = t.input(0, np.ones((3, 4)), "x")
    >>> y = np.sqrt(x[:, None] * 2.0)
    >>> y.shape, y.dtype, type(y._node).__name__
    ((3, 1, 4), dtype('float64'), 'Elem')
"""

from __future__ import annotations

import sys

import numpy as np
import optree

from ..dtypes import check_supported
from . import functions, graph, rules
from .common import FuseError, Traced, normalise_axes, normalise_axis, user_location
from .graph import Boundary, BoundaryCall, Const, Elem, Index, Input, Reduce, Reshape, Slice, Transpose, View

weak = graph.is_weak


class Tracer:
    """Builds interned nodes for one trace; ``evaluator`` materialises boundary operands."""

    def __init__(self, evaluator):
        self.evaluator = evaluator
        self._interned: dict = {}
        self.boundaries: list[BoundaryCall] = []

    # ------------------------------------------------------------------ plumbing

    def intern(self, key, make):
        node = self._interned.get(key)
        if node is None:
            node = self._interned[key] = make()
        return node

    def wrap(self, node) -> "Proxy":
        return Proxy(node, self)

    def input(self, index: int, value, name: str, is_weak: bool = False) -> "Proxy":
        """The proxy for argument leaf ``index`` (an array, NumPy scalar or Python float)."""
        dtype = check_supported(np.asarray(value).dtype if not is_weak else np.dtype(type(value)),
                                f"argument {name}")
        src = Input(shape=tuple(np.shape(value)), dtype=dtype, index=index, name=name, weak=is_weak)
        return self.wrap(self.view_of(src))

    def view_of(self, source, ops=()) -> View:
        shape = source.shape
        for op in ops:
            shape = op.shape(shape)
        return self.intern(("view", id(source), ops),
                           lambda: View(shape=shape, dtype=source.dtype, base=source, ops=ops, where=user_location()))

    def lift(self, value) -> graph.Node:
        """The node for an operand: a proxy's node, or a constant."""
        if isinstance(value, Proxy):
            if value._tracer is not self:
                raise FuseError("an array traced by one lw.fuse call was used in another")
            return value._node
        if isinstance(value, (bool, np.bool_)):
            return self.const(bool(value), np.dtype(bool), weak=False)
        if isinstance(value, int):
            # Weak: NumPy 2 gives a Python int the other operand's dtype, and the value decides
            # (through the stand-ins of rules.py) whether it fits; int64 only marks its kind,
            # where np.asarray would make 2**63 uint64 and 2**64 an object.
            return self.const(value, np.dtype(np.int64), weak=True)
        if isinstance(value, (float, complex)):
            return self.const(value, np.asarray(value).dtype, weak=True)
        if isinstance(value, np.generic):
            return self.const(value.item(), check_supported(value.dtype, "a NumPy scalar constant"), weak=False)
        if isinstance(value, list):
            value = np.asarray(value)
        if isinstance(value, np.ndarray):
            if value.ndim == 0:
                return self.const(value.item(), check_supported(value.dtype, "a 0-d constant"), weak=False)
            check_supported(value.dtype, "an array the fused function uses")
            src = self.intern(("captured", id(value)), lambda: graph.Captured(
                shape=value.shape, dtype=value.dtype, value=value, where=user_location()))
            return self.view_of(src)
        raise FuseError(f"lw.fuse cannot use a {type(value).__name__} as an array operand "
                        f"(at {user_location()})")

    def const(self, value, dtype: np.dtype, weak: bool = True, shape=()) -> Const:
        key = ("const", type(value).__name__, repr(value), dtype.str, weak, shape)
        return self.intern(key, lambda: Const(shape=shape, dtype=dtype, value=value, weak=weak))

    # ------------------------------------------------------------------ views

    def view(self, node, op) -> graph.Node:
        """``op`` applied to ``node``; pushed down to the leaves of elementwise nodes."""
        if _identity(op, node.shape):
            return node
        return self.intern(("push", id(node), op), lambda: self._push(node, op))

    def _push(self, node, op):
        if isinstance(node, View):
            return self.view_of(node.base, node.ops + (op,))
        if isinstance(node, Const):
            return self.const(node.value, node.dtype, node.weak, op.shape(node.shape))
        if isinstance(node, Elem):
            shape = op.shape(node.shape)
            rank = len(node.shape)
            args = []
            for a in node.args:
                if len(a.shape) < rank:
                    a = self.view(a, graph.pad_for(a.shape, rank))
                args.append(self.view(a, graph.translate_for_operand(op, a.shape, node.shape)))
            return self.elem(node.op, args, node.loop, node.dtype, shape=shape, fn=node.fn,
                             item=node.item, dtypes=node.dtypes, weak=node.weak)
        raise AssertionError(f"cannot view a {type(node).__name__}")  # sources are always wrapped in View

    def index(self, proxy: "Proxy", key) -> "Proxy":
        node = proxy._node
        op = basic_index(key, node.shape)
        if op is None:  # advanced (fancy / boolean) indexing: NumPy on materialised operands
            return self.boundary("fancy indexing x[...]", _getitem, (proxy, key), {})
        return self.wrap(self.view(node, op))

    def transpose(self, proxy, axes=None) -> "Proxy":
        ndim = proxy.ndim
        perm = tuple(reversed(range(ndim))) if axes is None else tuple(
            normalise_axis(a, ndim, "transpose") for a in axes)
        if sorted(perm) != list(range(ndim)):
            raise ValueError("axes don't match array")
        return self.wrap(self.view(proxy._node, Transpose(perm)))

    def reshape(self, proxy, shape) -> "Proxy":
        node = proxy._node
        new = _resolve_shape(shape, node.shape)
        op = graph.size1_index(node.shape, new)
        if op is not None:
            return self.wrap(self.view(node, op))
        if isinstance(node, View):  # a real reshape of a source: NumPy reshapes the array per call
            return self.wrap(self.view_of(node.base, node.ops + (Reshape(new),)))
        return self.boundary("reshape of a computed array", np.reshape, (proxy, new), {})

    # ------------------------------------------------------------------ elementwise

    def elem(self, op, args, loop, dtype, shape=None, fn=None, item=None, dtypes=(), weak=False) -> Elem:
        args = tuple(args)
        if shape is None:
            shape = np.broadcast_shapes(*[a.shape for a in args])
        key = ("elem", op, tuple(map(id, args)), tuple(d.str for d in loop), dtype.str, shape,
               id(fn), item, weak)
        return self.intern(key, lambda: Elem(shape=shape, dtype=dtype, op=op, args=args, loop=tuple(loop),
                                              fn=fn, item=item, dtypes=dtypes, weak=weak, where=user_location()))

    def ufunc(self, ufunc: np.ufunc, method: str, inputs, kwargs, python_op: bool = False):
        """``ufunc(*inputs)``; ``python_op``: reached through a Python operator, where two
        Python scalars (a float argument and a constant) compute in Python, so stay weak."""
        if method == "reduce" and ufunc.__name__ in _UFUNC_REDUCE and not (set(kwargs) - {"axis", "dtype", "keepdims"}):
            return self.reduce(_UFUNC_REDUCE[ufunc.__name__], inputs[0], axis=kwargs.get("axis", 0),
                               dtype=kwargs.get("dtype"), keepdims=kwargs.get("keepdims", False))
        if method == "outer" and len(inputs) == 2 and not kwargs:
            a, b = (self.wrap(self.lift(v)) for v in inputs)
            return ufunc(a[(Ellipsis,) + (None,) * b.ndim], b)
        if method == "__call__" and ufunc is np.divmod:
            return (np.floor_divide(*inputs, **kwargs), np.remainder(*inputs, **kwargs))
        rule = rules.UFUNCS.get(ufunc.__name__)
        if method != "__call__" or rule is None or ufunc.signature is not None or set(kwargs) - {"dtype"}:
            what = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
            if "out" in kwargs:
                raise FuseError(f"lw.fuse does not support out= ({what} at {user_location()}): fused "
                                "functions return new arrays")
            return self.boundary(what, getattr(ufunc, method) if method != "__call__" else ufunc, inputs, kwargs)
        nodes = [self.lift(v) for v in inputs]
        where = user_location()
        operands = [(n.dtype, weak(n), n.value if isinstance(n, Const) else None) for n in nodes]
        loop, outs = rules.ufunc_dtypes(ufunc, operands, where, kwargs.get("dtype"))
        answer = rules.constant_comparison(ufunc, operands) if "dtype" not in kwargs else None
        if answer is not None:  # e.g. int8 < 300: true everywhere, where int8(300) would be 44
            shape = np.broadcast_shapes(*[n.shape for n in nodes])
            return self.wrap(self.const(answer, outs[0], weak=False, shape=shape))
        if rule.template_for(loop[0]) is None:  # e.g. complex maximum: NumPy does it, at a boundary
            return self.boundary(f"np.{ufunc.__name__} on {loop[0]}", ufunc, inputs, kwargs)
        name = ufunc.__name__
        if name == "power" and isinstance(nodes[1], Const) and nodes[1].value == 2 and nodes[1].shape == ():
            # NumPy's x**2 is square(x); pow(x, 2) rounds the same: x * x is both, and vectorises
            name, nodes, loop = "square", nodes[:1], loop[:1]
        stays_weak = python_op and all(weak(n) for n in nodes) and outs[0].kind in "fc"
        return self.wrap(self.elem(name, nodes, loop, outs[0], weak=stays_weak))

    def where(self, cond, a, b) -> "Proxy":
        nodes = [self.lift(v) for v in (cond, a, b)]
        dtype = np.where(*[rules.stand_in(n.dtype, weak(n), getattr(n, "value", None)) for n in nodes]).dtype
        dtype = check_supported(dtype, f"np.where at {user_location()}")
        return self.wrap(self.elem("where", nodes, (np.dtype(bool), dtype, dtype), dtype))

    def cast(self, proxy, dtype) -> "Proxy":
        node = self.lift(proxy)
        dtype = check_supported(np.dtype(dtype), f"astype at {user_location()}")
        return self.wrap(self.elem("cast", [node], (dtype,), dtype, shape=node.shape))

    def broadcast_to(self, proxy, shape) -> "Proxy":
        node = self.lift(proxy)
        shape = tuple(int(n) for n in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        if np.broadcast_shapes(node.shape, shape) != shape:
            raise ValueError(f"cannot broadcast a traced array of shape {node.shape} to {shape}")
        return self.wrap(self.elem("cast", [node], (node.dtype,), node.dtype, shape=shape))

    def part(self, proxy, which: str) -> "Proxy":
        node = self.lift(proxy)
        if node.dtype.kind != "c":
            return proxy if which == "real" else self.wrap(self.const(0, node.dtype, False, node.shape))
        dtype = np.dtype(f"f{node.dtype.itemsize // 2}")
        return self.wrap(self.elem(which, [node], (node.dtype,), dtype))

    # ------------------------------------------------------------------ reductions

    def reduce(self, op: str, proxy, axis=None, dtype=None, keepdims=False):
        node = self.lift(proxy)
        ndim = len(node.shape)
        if op in ("argmin", "argmax") and not (axis is None or isinstance(axis, (int, np.integer))):
            raise TypeError(f"{op} takes one integer axis or None, got {axis!r}")
        axes = tuple(range(ndim)) if axis is None else normalise_axes(axis, ndim, op)
        kw = {} if dtype is None else {"dtype": dtype}
        dummy = np.zeros((1,) * ndim, node.dtype)
        # the method: NumPy's x.any(dtype=bool) takes a dtype where np.any does not
        result_dtype = getattr(dummy, op)(axis=axis, keepdims=keepdims, **kw).dtype
        result_dtype = check_supported(result_dtype, f"np.{op} at {user_location()}")
        if op in ("argmin", "argmax") and ndim == 0:
            return self.wrap(self.const(0, result_dtype, False))
        operand = node if dtype is None else self.lift(self.cast(self.wrap(node), dtype))
        if not axes:  # reducing over no axis is elementwise: NumPy converts to the result dtype
            return self.cast(self.wrap(operand), result_dtype)
        shape = tuple(1 if d in axes else n for d, n in enumerate(node.shape) if keepdims or d not in axes)
        natural = getattr(np, op)(np.zeros((1,) * ndim, operand.dtype), axis=axis).dtype
        cast = None if natural == result_dtype else result_dtype
        red = self.intern(("reduce", op, id(operand), axes, keepdims, result_dtype.str),
                          lambda: Reduce(shape=shape, dtype=result_dtype, op=op, arg=operand, axes=axes,
                                         keepdims=keepdims, cast=cast, where=user_location()))
        return self.wrap(self.view_of(red))

    # ------------------------------------------------------------------ boundaries

    def boundary(self, name: str, func, args, kwargs):
        """Run ``func`` by NumPy on materialised operands; continue tracing on its result."""
        where = user_location()
        leaves, tree = optree.tree_flatten((tuple(args), dict(kwargs)), is_leaf=lambda v: isinstance(v, Proxy),
                                           none_is_leaf=True)
        slots = [k for k, v in enumerate(leaves) if isinstance(v, Proxy)]
        inputs = tuple(self.lift(leaves[k]) for k in slots)

        def rebuild(values, leaves=tuple(leaves), slots=tuple(slots), tree=tree):
            filled = list(leaves)
            for k, v in zip(slots, values, strict=True):
                filled[k] = v
            return optree.tree_unflatten(tree, filled)

        if self.evaluator is None:
            raise FuseError(f"{name} needs concrete values (at {where})")
        call_args, call_kwargs = rebuild(self.evaluator.materialise(inputs))
        result = func(*call_args, **call_kwargs)
        out_leaves, out_tree = optree.tree_flatten(result, none_is_leaf=True)
        arrays = [k for k, v in enumerate(out_leaves) if _is_array_value(v)]
        statics = tuple(v for k, v in enumerate(out_leaves) if k not in arrays)
        call = BoundaryCall(name=name, func=func, inputs=inputs, rebuild=rebuild, out_tree=out_tree,
                            out_static=statics, where=where)
        self.boundaries.append(call)
        nodes = {}
        for k in arrays:
            value = out_leaves[k]
            dtype = check_supported(np.asarray(value).dtype if not hasattr(value, "dtype") else value.dtype,
                                    f"the result of {name} (at {where})")
            nodes[k] = Boundary(shape=tuple(np.shape(value)), dtype=dtype, call=call, leaf=k, where=where)
        self.evaluator.record_boundary(call, list(nodes.values()), out_leaves)
        wrapped = [self.wrap(self.view_of(nodes[k])) if k in nodes else v for k, v in enumerate(out_leaves)]
        return optree.tree_unflatten(out_tree, wrapped)

    def function(self, func, args, kwargs):
        handler = functions.HANDLERS.get(func)
        if handler is not None:
            return handler(self, *args, **kwargs)
        if kwargs.get("out") is not None:  # NumPy would write into a materialised copy, never seen
            raise FuseError(f"lw.fuse does not support out= (np.{getattr(func, '__name__', func)} at "
                            f"{user_location()}): fused functions return new arrays, use the result")
        return self.boundary(f"np.{getattr(func, '__name__', func)}", func, args, kwargs)


def _getitem(x, key):
    return x[key]


def _is_array_value(v) -> bool:
    if isinstance(v, (np.ndarray, np.generic, bool, int, float, complex)):
        return True
    return hasattr(v, "shape") and hasattr(v, "dtype")


_UFUNC_REDUCE = {"add": "sum", "multiply": "prod", "minimum": "min", "maximum": "max"}


def _identity(op, shape) -> bool:
    if isinstance(op, Transpose):
        return op.perm == tuple(range(len(shape)))
    if isinstance(op, Index):
        return len(op.items) == len(shape) and all(
            isinstance(i, Slice) and i.start == 0 and i.step == 1 and i.length == n
            for i, n in zip(op.items, shape, strict=True))
    return False


def _resolve_shape(shape, old) -> tuple[int, ...]:
    shape = tuple(int(n) for n in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    size = int(np.prod(old))
    if shape.count(-1) == 1:
        rest = int(np.prod([n for n in shape if n != -1]))
        if rest and size % rest == 0:
            shape = tuple(size // rest if n == -1 else n for n in shape)
    if int(np.prod(shape)) != size or any(n < 0 for n in shape):
        raise ValueError(f"cannot reshape array of size {size} into shape {shape}")
    return shape


def basic_index(key, shape) -> Index | None:
    """``key`` as an :class:`Index` over ``shape``; None for advanced indexing."""
    key = key if isinstance(key, tuple) else (key,)
    if any(isinstance(k, (Proxy, np.ndarray, list, bool, np.bool_)) for k in key):
        return None
    consumed = sum(1 for k in key if k is not None and k is not Ellipsis)
    if consumed > len(shape):
        raise IndexError(f"too many indices for array: array is {len(shape)}-dimensional, "
                         f"but {consumed} were indexed")
    if sum(k is Ellipsis for k in key) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    items, d = [], 0
    for k in key:
        if k is None:
            items.append(None)
        elif k is Ellipsis:
            for _ in range(len(shape) - consumed):
                items.append(Slice(0, 1, shape[d]))
                d += 1
        elif isinstance(k, slice):
            items.append(graph.normalise_slice(k, shape[d]))
            d += 1
        elif isinstance(k, (int, np.integer)):
            n = shape[d]
            if not -n <= k < n:
                raise IndexError(f"index {k} is out of bounds for axis {d} with size {n}")
            items.append(int(k) % n)
            d += 1
        else:
            raise IndexError(f"lw.fuse: unsupported index {k!r} (at {user_location()})")
    items += [Slice(0, 1, n) for n in shape[d:]]
    return Index(tuple(items))


# ----------------------------------------------------------------------------- the proxy


def _untraceable(what: str):
    """A method of the traced array that refuses ``what`` with a FuseError."""
    def fail(self, *args, **kwargs):
        raise FuseError(
            f"lw.fuse cannot trace {what} on a traced array (at {user_location()}): its values are "
            "not known while tracing. Use np.where instead of if/while on array values, or write "
            "the per-element logic as a lane function and call lw.vmap(lane) on the arrays "
            "(such calls are fused)")
    return fail


def _binary(ufunc, reflected=False):
    """A Python operator: NumPy's ufunc (its dispatch and type rules), marked as an operator."""
    if reflected:
        return lambda self, other: self._tracer.ufunc(ufunc, "__call__", (other, self), {}, python_op=True)
    return lambda self, other: self._tracer.ufunc(ufunc, "__call__", (self, other), {}, python_op=True)


def _unary(ufunc):
    return lambda self: self._tracer.ufunc(ufunc, "__call__", (self,), {}, python_op=True)


class Proxy(Traced):
    """An array while ``@lw.fuse`` traces: shape and dtype are real, values are not."""

    __slots__ = ("_node", "_tracer")
    __array_priority__ = 1000
    _lw_fuse_proxy = True  # lw.vmap's hook: a vmapped lane called on traced arrays is fused
    __hash__ = None  # like ndarray

    def __init__(self, node, tracer):
        self._node, self._tracer = node, tracer

    shape = property(lambda self: self._node.shape)
    dtype = property(lambda self: self._node.dtype)
    ndim = property(lambda self: len(self._node.shape))
    size = property(lambda self: int(np.prod(self._node.shape)))
    T = property(lambda self: self._tracer.transpose(self))
    real = property(lambda self: self._tracer.part(self, "real"))
    imag = property(lambda self: self._tracer.part(self, "imag"))

    def __repr__(self) -> str:
        return f"<lw.fuse traced {self.dtype}{list(self.shape)}>"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return self._tracer.ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return self._tracer.function(func, args, kwargs)

    def __getitem__(self, key):
        return self._tracer.index(self, key)

    def __setitem__(self, key, value):
        raise FuseError(f"lw.fuse cannot assign into a traced array (x[...] = v at {user_location()}); "
                        "build the result with np.where instead")

    # values are unknown while tracing: conversions and control flow on them are refused
    __bool__ = _untraceable("bool() (an if/while/and/or on array values)")
    __float__ = _untraceable("float()")
    __int__ = _untraceable("int()")
    __index__ = _untraceable("an integer conversion (__index__)")
    __complex__ = _untraceable("complex()")
    __iter__ = _untraceable("iteration")
    item = _untraceable(".item()")
    tolist = _untraceable(".tolist()")

    def __array__(self, dtype=None, copy=None):
        caller = sys._getframe(1)
        inner = f"{caller.f_code.co_filename}:{caller.f_lineno}" if caller else "?"
        raise FuseError(
            f"lw.fuse cannot trace a conversion of a traced array to a NumPy array (np.asarray/"
            f"np.array/__array__, at {inner}, reached from {user_location()}). A library that takes "
            "concrete arrays cannot run inside @lw.fuse: call it outside the fused function, or use "
            "NumPy operations lanewise can fuse")

    # arithmetic: through the ufuncs, so NumPy's own dispatch and type rules apply
    __add__, __radd__ = _binary(np.add), _binary(np.add, True)
    __sub__, __rsub__ = _binary(np.subtract), _binary(np.subtract, True)
    __mul__, __rmul__ = _binary(np.multiply), _binary(np.multiply, True)
    __truediv__, __rtruediv__ = _binary(np.true_divide), _binary(np.true_divide, True)
    __floordiv__, __rfloordiv__ = _binary(np.floor_divide), _binary(np.floor_divide, True)
    __mod__, __rmod__ = _binary(np.remainder), _binary(np.remainder, True)
    __pow__, __rpow__ = _binary(np.power), _binary(np.power, True)
    __and__, __rand__ = _binary(np.bitwise_and), _binary(np.bitwise_and, True)
    __or__, __ror__ = _binary(np.bitwise_or), _binary(np.bitwise_or, True)
    __xor__, __rxor__ = _binary(np.bitwise_xor), _binary(np.bitwise_xor, True)
    __lshift__, __rlshift__ = _binary(np.left_shift), _binary(np.left_shift, True)
    __rshift__, __rrshift__ = _binary(np.right_shift), _binary(np.right_shift, True)
    __matmul__, __rmatmul__ = _binary(np.matmul), _binary(np.matmul, True)
    __lt__, __le__ = _binary(np.less), _binary(np.less_equal)
    __gt__, __ge__ = _binary(np.greater), _binary(np.greater_equal)
    __eq__, __ne__ = _binary(np.equal), _binary(np.not_equal)
    __divmod__ = _binary(np.divmod)

    __neg__, __pos__ = _unary(np.negative), _unary(np.positive)
    __abs__, __invert__ = _unary(np.absolute), _unary(np.invert)

    # methods (NumPy's signatures; unsupported keywords raise)
    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
        if not copy and np.dtype(dtype) == self.dtype:
            return self
        return self._tracer.cast(self, dtype)

    def copy(self, order="C"):
        return self._tracer.cast(self, self.dtype)

    def reshape(self, *shape, order="C"):
        _only_c(order, "reshape")
        return self._tracer.reshape(self, shape[0] if len(shape) == 1 else shape)

    def ravel(self, order="C"):
        _only_c(order, "ravel")
        return self._tracer.reshape(self, -1)

    flatten = ravel

    def transpose(self, *axes):
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
            axes = axes[0]
        return self._tracer.transpose(self, axes or None)

    def swapaxes(self, a, b):
        return np.swapaxes(self, a, b)

    def squeeze(self, axis=None):
        return np.squeeze(self, axis)

    def clip(self, min=None, max=None, **kwargs):  # noqa: A002 - NumPy's names
        return np.clip(self, min, max, **kwargs)

    def round(self, decimals=0):
        return np.round(self, decimals)

    def conj(self):
        return np.conjugate(self)

    conjugate = conj


def _reduction_method(op):
    """``x.<op>(...)``: bound by NumPy's method parameters (those of ``np.<op>`` after the
    array, but for the dtype of ``x.any``/``x.all``), keywords such as ``keepdims`` included."""
    handler = functions.reduction(op, method=True)

    def method(self, *args, **kwargs):
        return handler(self._tracer, self, *args, **kwargs)
    method.__name__ = op
    return method


for _op in ("sum", "prod", "mean", "min", "max", "any", "all", "argmin", "argmax"):
    setattr(Proxy, _op, _reduction_method(_op))


def _numpy_method(func):
    """``x.<name>(...)`` as ``np.<name>(x, ...)`` (the same parameters): NumPy runs it at a
    materialisation boundary, so its semantics are NumPy's own."""
    def method(self, *args, **kwargs):
        return func(self, *args, **kwargs)
    method.__name__ = func.__name__
    return method


for _func in (np.cumsum, np.cumprod, np.std, np.var):
    setattr(Proxy, _func.__name__, _numpy_method(_func))


def _only_c(order, what):
    if order not in ("C", "A"):
        raise FuseError(f"lw.fuse supports {what}(order='C') only")
