"""The ``torch.library`` ops of lanewise programs, and their rules (PyTorch's extension points).

Every bridge :class:`~lanewise.bridge.signature.Op` (the user's program, and
the programs derived from it) becomes one operator ``lanewise::<name>_<n>``
per argument dtypes and ranks, with the schema ``(Tensor a0, ...) -> (Tensor, ...)``:

* CPU kernel: C++ (:mod:`.native`) for a ``lw.vmap`` program of flat
  arguments: it calls the compiled program on the tensors' memory, with no
  Python, for input sizes it has a plan for; it hands any other call to the
  Python kernel, registered as the operator ``<name>_<n>_py``, which plans
  those sizes.  The Python kernel (the only one of a reduction, or where no
  C++ compiler is found) runs the program on NumPy views of the tensors (no
  copy); its results, fresh NumPy arrays, become the output tensors
  (``torch.from_numpy``, no copy);
* fake kernel (``torch.compile``, meta tensors): output shapes and dtypes from
  the program typed without data (``Op.infer``); symbolic sizes stay symbolic;
* autograd: the op's cotangent program (:mod:`lanewise.bridge.derive`, the
  lane's derivative by lanewise), run as another such operator, summed over the
  levels that do not map an argument; a reduction over every lane by a sum or
  a mean stays fused, any other one is differentiated by PyTorch's rule for
  the reduction of the ``lw.vmap`` operator's values;
* vmap (``torch.func.vmap``): the op's batched program, one more ``lw.vmap``
  level of the same fused nest.

Example:
    >>> import numpy as np, torch, lanewise as lw
    >>> from lanewise.bridge.signature import Op
    >>> op = Op.of(lw.vmap(lambda x: x + 1), (np.ones(2),))
    >>> [t.tolist() for t in call(op, [torch.zeros(2)])]
    [[1.0, 1.0]]
"""

from __future__ import annotations

import functools
import itertools
import re

import numpy as np
import torch
from torch.fx.experimental.symbolic_shapes import optimization_hint

from .. import pytree
from ..bridge import derive
from ..bridge.signature import Op
from ..plan import reduction
from . import native

NAMESPACE = "lanewise"
_LIB = torch.library.Library(NAMESPACE, "FRAGMENT")  # kept alive: dropping it deletes the ops
_COUNT = itertools.count()


#: The tensor dtypes lanes take (lanewise's: no float16/bfloat16).
DTYPES = frozenset({torch.bool, torch.uint8, torch.uint16, torch.uint32, torch.uint64, torch.int8, torch.int16,
                    torch.int32, torch.int64, torch.float32, torch.float64, torch.complex64, torch.complex128})
# Conversions computed once, here: under torch.compile's fake mode a tensor made to
# ask torch for a dtype would itself be fake and have no NumPy view.
_TO_NUMPY = {d: torch.empty(0, dtype=d).numpy().dtype for d in DTYPES}
_TO_TORCH = {v: k for k, v in _TO_NUMPY.items()}


def torch_dtype(dtype: np.dtype) -> torch.dtype:
    """The torch dtype of a NumPy dtype lanes produce."""
    return _TO_TORCH[np.dtype(dtype)]


def numpy_dtype(dtype: torch.dtype) -> np.dtype:
    """The NumPy dtype of a torch dtype in :data:`DTYPES`."""
    return _TO_NUMPY[dtype]


def types_of(tensors) -> tuple:
    """``Op.infer``'s (shape, dtype) of each tensor; a symbolic size (``torch.compile``
    with dynamic shapes) counts as the size it was traced with."""
    return tuple((tuple(optimization_hint(s) for s in t.shape), numpy_dtype(t.dtype)) for t in tensors)


def call(op: Op, tensors) -> list:
    """Run ``op`` on its argument tensors (real, fake or batched); its output tensors."""
    overload, _ = resolve(op, tensors)
    outs = overload(*tensors)
    return list(outs) if isinstance(outs, (tuple, list)) else [outs]


def resolve(op: Op, tensors) -> tuple:
    """The operator running ``op`` on tensors like these, and the program's result tree.

    Keyed by dtypes and ranks: the result's structure does not depend on sizes,
    so a call of new sizes costs a dictionary look-up, not a typing."""
    key = ("torch", tuple((t.dtype, t.dim()) for t in tensors))
    found = op.derived.get(key)
    if found is None:
        inferred = _typed(op, types_of(tensors))
        found = op.derived[key] = (define(op, key[1], inferred), inferred.out_tree)
    return found


def _typed(op: Op, types):
    """``op.infer``; for a reduction its ``lw.vmap`` program typed (:func:`_fake`
    takes the reduced axes out of its results)."""
    return derive.mapped(op).infer(*types)


def template(op: Op, key: tuple):
    """The program's result structure for tensors of ``key``'s (dtype, rank), with
    output indices at its leaves (``resolve`` must have seen such tensors)."""
    tree = op.derived[("torch", key)][1]
    return pytree.unflatten(tree, list(range(tree.num_leaves)))


def define(op: Op, types: tuple, inferred):
    """The operator of ``op`` for arguments of ``types`` ((dtype, rank) each), which
    ``inferred`` types (defined on first use)."""
    key = ("torch op", types)
    if key not in op.derived:
        n, n_out = op.in_tree.num_leaves, len(inferred.out)
        name = f"{re.sub(r'[^0-9A-Za-z_]', '_', op.name)[:40]}_{next(_COUNT)}"
        qualname = f"{NAMESPACE}::{name}"
        results = "Tensor" if n_out == 1 else f"({', '.join(['Tensor'] * n_out)})"
        schema = f"({', '.join(f'Tensor a{k}' for k in range(n))}) -> {results}"
        torch.library.define(qualname, schema, lib=_LIB)
        twin = _native(op, qualname, schema, types, inferred)
        if twin is None:
            torch.library.impl(qualname, "cpu", _runner(op), lib=_LIB)
        # With the C++ kernels, the twin records the backward (native.cpp's autograd kernel calls it).
        for defined in ([qualname] if twin is None else [qualname, twin]):
            torch.library.register_fake(defined, functools.partial(_fake, op), lib=_LIB)
        torch.library.register_autograd(twin or qualname, functools.partial(_backward, op), setup_context=_setup,
                                        lib=_LIB)  # cotangent programs too: second derivatives
        torch.library.register_vmap(qualname, functools.partial(_vmap, op), lib=_LIB)
        op.derived[key] = getattr(getattr(torch.ops, NAMESPACE), name).default
    return op.derived[key]


def _host(t: torch.Tensor):
    """A tensor as lanewise receives it: a NumPy view of its memory; a 0-d tensor as a
    NumPy scalar, as ``Op.infer`` types it (a strong scalar of the tensor's dtype)."""
    if t.requires_grad:  # the autograd kernel hands the tensors on as they are
        t = t.detach()
    return t.numpy()[()] if t.dim() == 0 else t.numpy()


def _native(op: Op, qualname: str, schema: str, types: tuple, inferred) -> str | None:
    """Give ``qualname`` the C++ CPU and autograd kernels, and define its Python twin
    (whose name it returns); None where the kernels cannot run ``op`` (a reduction,
    nested arguments) or are not built."""
    if derive.reduced(op) or op.in_tree.num_nodes != op.in_tree.num_leaves + 1 or native.library() is None:
        return None
    twin = f"{qualname}_py"
    torch.library.define(twin, schema, lib=_LIB)
    torch.library.impl(twin, "cpu", _runner(op, planned=qualname), lib=_LIB)
    native.define(qualname, twin, [numpy_dtype(d) for d, _ in types], [r for _, r in types],
                  [o.dtype for o in inferred.out], [len(o.shape) for o in inferred.out])
    return twin


def _packed(outs: list):
    return outs[0] if len(outs) == 1 else tuple(outs)


def _runner(op: Op, planned: str | None = None):
    """The Python CPU kernel of ``op``'s operator: the program on NumPy views of the
    tensors.  Specialised to flat arguments and one output (a call costs ~2 us of
    lanewise's fast path plus the views; the dispatcher's Python call costs more).
    ``planned``: the operator whose C++ kernel this one serves; it plans the sizes
    of each call it runs, until the C++ kernel keeps no more plans."""
    program, tree = op.program, op.in_tree
    flat = tree.num_nodes == tree.num_leaves + 1  # a tuple of leaves: the user's op, batched ops
    planning = [planned is not None]

    def run(*tensors):
        values = [_host(t) for t in tensors]
        result = program(*values) if flat else program(*pytree.unflatten(tree, values))
        if planning[0]:  # after the run: a lane that raised leaves nothing planned
            planning[0] = native.plan(planned, op, types_of(tensors), tensors) != native.FULL
        if type(result) is np.ndarray:
            return torch.from_numpy(result)  # the fresh C array the kernel wrote: no copy
        return _packed([torch.from_numpy(np.asarray(leaf)) for leaf in pytree.flatten(result)[0]])
    return run


def _fake(op: Op, *tensors):
    types = types_of(tensors)
    inferred = _typed(op, types)
    if inferred.lane_shapes:
        # A per-lane array's shape was probed at these sizes and may depend on
        # them: specialise every size (guards) rather than assume it does not.
        for t in tensors:
            [int(s) for s in t.shape]
    sizes = level_sizes(inferred, [t.shape for t in tensors])
    outputs = inferred.exe.program.outputs
    shapes = [list(o.shape(sizes, inferred.lane_shapes.get(k, ()))) for k, o in enumerate(outputs)]
    dtypes = [o.dtype for o in inferred.out]
    if derive.reduced(op):
        axes = derive.reduced_axes(op, types)
        shapes = [[n for d, n in enumerate(shape) if d not in ax] for shape, ax in zip(shapes, axes, strict=True)]
        dtypes = [reduction.OPS[op.program.op].result(d) for d in dtypes]
    return _packed([torch.empty(s, dtype=torch_dtype(d)) for s, d in zip(shapes, dtypes, strict=True)])


def level_sizes(inferred, shapes) -> list:
    """Each level's number of lanes, from the arguments' (possibly symbolic) ``shapes``:
    the size of the first leaf mapped there (the others must agree), else ``axis_size``."""
    sig, sizes = inferred.call.signature, []
    for d in range(len(sig.levels)):
        mapped = [shapes[k][sig.leaves[k].axes[d]] for k in sig.mapped_at(d)]
        for other in mapped[1:]:
            torch._check(other == mapped[0])  # the kernel checks it too; this tells the compiler
        sizes.append(mapped[0] if mapped else inferred.call.sizes[d])
    return sizes


def _setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)
    ctx.out_types = [(o.shape, o.dtype) for o in (output if isinstance(output, tuple) else (output,))]


def _backward(op: Op, ctx, *grads):
    primals = ctx.saved_tensors
    active = tuple(j for j, t in enumerate(primals) if ctx.needs_input_grad[j] and derive.is_float(
        numpy_dtype(t.dtype)))
    result = [None] * len(primals)
    if not active:
        return tuple(result)
    if derive.reduced(op) and (op.program.axis is not None or op.program.op not in derive.LINEAR_REDUCTIONS):
        return _backward_of_values(op, primals, active, grads)
    lin = derive.Linear(op, active)
    # Integer outputs have no gradient; the cotangent program still takes a leaf for them.
    cts = [torch.zeros(shape, dtype=dtype) if g is None else g for g, (shape, dtype) in
           zip(grads, ctx.out_types, strict=True)]
    if derive.reduced(op) and op.program.op == "mean":  # each lane's share of a mean
        cts = [c / derive.lane_count(op, types_of(primals)) for c in cts]
    found = {}
    for group in derive.cotangent_programs(lin, types_of(primals), types_of(cts)):
        for k, r, summed in zip(group.leaves, call(group.op, [*primals, *cts]), group.summed, strict=True):
            found[k] = (r.sum(dim=tuple(range(summed))) if summed else r).to(primals[k].dtype)
    for j, k in zip(active, lin.diff, strict=True):
        result[j] = found[k]
    return tuple(result)


def _backward_of_values(op: Op, primals, active, grads) -> tuple:
    """A reduction over some axes, or by min, max or prod: PyTorch's derivative of the
    reduction of the ``lw.vmap`` operator's values (ties and zeros as PyTorch treats
    them), the values' own gradient by lanewise.  The values are stored."""
    xs = [p.detach().requires_grad_(j in active) for j, p in enumerate(primals)]
    with torch.enable_grad():
        values = call(derive.mapped(op), xs)
        folded = [_fold(op.program.op, v, axes) for v, axes in zip(values, derive.reduced_axes(op, types_of(xs)),
                                                                  strict=True)]
    pairs = [(f, g) for f, g in zip(folded, grads, strict=True) if g is not None and f.requires_grad]
    found = torch.autograd.grad([f for f, _ in pairs], [xs[j] for j in active], [g for _, g in pairs],
                                allow_unused=True, materialize_grads=True, create_graph=torch.is_grad_enabled())
    result = [None] * len(primals)
    for j, g in zip(active, found, strict=True):
        result[j] = g
    return tuple(result)


def _fold(name: str, values: torch.Tensor, axes: tuple) -> torch.Tensor:
    """``values`` reduced over ``axes`` as ``lw.reduce`` reduces them, by PyTorch."""
    if name == "prod":  # one axis at a time: torch.prod takes one
        for axis in sorted(axes, reverse=True):
            values = torch.prod(values, dim=axis)
        return values
    fold = {"sum": torch.sum, "mean": torch.mean, "min": torch.amin, "max": torch.amax}.get(name)
    if fold is None or not values.is_floating_point():  # argmin, any, ...: no derivative
        return values.detach()
    return fold(values, dim=axes)


def _vmap(op: Op, info, in_dims, *tensors):
    if all(d is None for d in in_dims):
        outs = call(op, tensors)
        return _packed(outs), _packed([None] * len(outs))
    outs = call(derive.batched(op, tuple(in_dims)), tensors)  # a reduction keeps the batch level
    return _packed(outs), _packed([0] * len(outs))
