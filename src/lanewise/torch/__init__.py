"""lanewise programs inside PyTorch programs: ``lw.torch.op``.

``lw.torch.op(program)`` turns a ``lw.vmap`` or ``lw.reduce`` program into a PyTorch operator
(``torch.library``, namespace ``lanewise``) on CPU tensors: it runs the
program's compiled, multithreaded kernel on the tensors' memory, has a fake
kernel (``torch.compile`` traces it without running it, with no graph break),
gradients by lanewise's own derivative of the lane (``register_autograd``) and
a ``torch.func.vmap`` rule (one more level of the same fused nest).
:mod:`.library` defines the operators; docs/jax.md (section PyTorch) says more.

This module imports PyTorch; ``import lanewise`` does not (``lw.torch`` is
loaded on first use).

Example:
    >>> import torch, lanewise as lw
    >>> def escape(cr, ci):
    ...     zr = zi = 0.0
    ...     for n in range(50):
    ...         zr, zi = zr * zr - zi * zi + cr, 2 * zr * zi + ci
    ...         if zr * zr + zi * zi > 4.0:
    ...             return n
    ...     return 50
    >>> op = lw.torch.op(lw.vmap(escape))
    >>> c = torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64)
    >>> torch.compile(lambda c: op(c, c * 0) + 1, fullgraph=True)(c).tolist()
    [51, 3, 2]
"""

from __future__ import annotations

import functools
import inspect
from typing import Callable

import torch

from ..api import Mapped
from ..backends import auto
from ..reducing import Reduced
from ..bridge import derive
from ..bridge.signature import Op
from ..errors import LanewiseError, LaneTypeError
from . import library

__all__ = ["op"]


def op(program: Mapped) -> Callable:
    """``program`` (made by ``lw.vmap``, nested to any depth, or ``lw.reduce``) as a PyTorch
    operator on CPU tensors.

    Args:
      program: the lanewise program.  It runs on lanewise's CPU backend (its
        ``backend=`` must be None, ``"cpu"`` or ``"auto"``: PyTorch tensors are
        never on a TPU, so ``"auto"`` always chooses the cpu backend here).  A ``lw.reduce`` operator runs the
        fused map-reduce (nothing mapped is stored); ``torch.func.vmap`` keeps the
        new level; its gradient is fused for a sum or mean over every lane, and
        otherwise PyTorch's rule for the reduction of the lanes' values (which are
        then stored).  Segmented and ``lw.Monoid`` reductions are refused.

    Returns:
      A function of the program's positional arguments, each a CPU tensor or a
      Python scalar (a 0-d tensor of torch's default dtype for its kind),
      returning tensors structured as the lane's results (one tensor, a tuple,
      ...).  Inputs are read in place and outputs are the arrays the kernel
      wrote (no copies).  It works in eager mode and inside ``torch.compile``
      (``fullgraph=True``: the op is one node of the graph, its output shapes
      inferred from the lane without running it, dynamic sizes kept symbolic),
      under ``torch.autograd`` (real floating arguments; the gradient is the
      lane's own, by lanewise's autodiff, so data-dependent loops and branches
      differentiate exactly) and under ``torch.func.vmap``.  A 0-d tensor
      argument is handed to the lane as a scalar of its dtype.

    Example:
      >>> import torch, lanewise as lw
      >>> scale = lw.torch.op(lw.vmap(lambda x, a: (a * x, x > 1), in_axes=(0, None)))
      >>> scale(torch.arange(3.0), 2.0)
      (tensor([0., 2., 4.]), tensor([False, False,  True]))
      >>> torch.func.vmap(scale, in_dims=(0, None))(torch.arange(4.0).reshape(2, 2), 3.0)[0].tolist()
      [[0.0, 3.0], [6.0, 9.0]]

      Gradients: ``torch.autograd.grad(scale(x, a)[0].sum(), (x, a))`` for
      float tensors ``x`` and ``a`` (tests/test_torch_op.py checks them against
      PyTorch's own).
    """
    if not isinstance(program, (Mapped, Reduced)):
        raise TypeError(f"lw.torch.op takes a program made by lw.vmap or lw.reduce, got {type(program).__name__}")
    backend = program.fun.backend if isinstance(program, Reduced) else program.backend
    if backend not in (None, "cpu", auto.AUTO):
        raise LanewiseError(f"lw.torch.op runs programs on lanewise's CPU backend; {program!r} asks for "
                            f"backend={backend!r}")
    if backend == auto.AUTO:  # torch tensors are never on a TPU: auto's choice is the cpu backend, always
        program = _on_cpu(program)
    if isinstance(program, Reduced) and derive.refused_by_ops(program):
        raise LanewiseError(f"lw.torch.op({program.__name__}): segmented and lw.Monoid reductions are not "
                            "operators yet; make the operator of the lw.vmap program and reduce in PyTorch")
    ops: dict[int, Op] = {}  # by arity: a lane with defaults may be called with fewer arguments
    names = _param_names(program)
    kinds: list[type] = []  # the lane's namedtuple classes (a constant cannot hold a class for Dynamo)
    structures: dict[tuple, tuple] = {}  # by the arguments' (dtype, rank)

    # torch.compile does not trace this function: it is one node of the graph,
    # run on fake tensors by AOTAutograd, which records the operator inside it.
    # (Dynamo tracing it would meet Numba, locks and optree, and break the graph.)
    @torch._dynamo.nonstrict_trace
    def apply(*tensors) -> tuple:
        overload, _ = library.resolve(_op(len(tensors), tensors), tensors)
        outs = overload(*tensors)
        return tuple(outs) if isinstance(outs, (tuple, list)) else (outs,)

    # The result's structure, known once ``apply`` has run (traced) at these types;
    # a constant for Dynamo, which rebuilds the structure itself: a nonstrict_trace
    # function may return tuples of tensors, not the lane's namedtuples.
    @torch._dynamo.assume_constant_result
    def structure(key: tuple):
        found = structures.get(key)
        if found is None:
            found = structures[key] = _plain(library.template(ops[len(key)], key), kinds)
        return found

    def _op(n: int, tensors) -> Op:
        found = ops.get(n)
        if found is None:
            found = ops[n] = Op.of(program, tensors)
        return found

    @functools.wraps(program)
    def call(*args, **kwargs):
        if kwargs:
            raise TypeError(f"lw.torch.op({program.__name__}) takes positional arguments only, got "
                            f"keyword arguments {sorted(kwargs)}")
        tensors = [_tensor(a, k, names, program.__name__) for k, a in enumerate(args)]
        outs = apply(*tensors)
        return _fill(structure(tuple((t.dtype, t.dim()) for t in tensors)), outs, kinds)

    call._lw_program, call._lw_ops = program, ops  # for inspection (tests, opcheck)
    return call


def _plain(node, kinds: list):
    """A result structure (output indices at its leaves) as plain data: ``(-1, items)``
    for a tuple, ``(k, items)`` for a namedtuple of class ``kinds[k]``."""
    if not isinstance(node, tuple):
        return node
    kind = -1
    if hasattr(node, "_fields"):
        if type(node) not in kinds:
            kinds.append(type(node))
        kind = kinds.index(type(node))
    return kind, tuple(_plain(item, kinds) for item in node)


def _fill(node, outs, kinds: list):
    """The structure from :func:`_plain` filled with the outputs."""
    if node is None or isinstance(node, int):  # None: a lane returning nothing
        return node if node is None else outs[node]
    kind, items = node
    items = [_fill(item, outs, kinds) for item in items]
    return tuple(items) if kind < 0 else kinds[kind](*items)


def _param_names(program: Mapped) -> list[str]:
    try:
        return list(inspect.signature(program).parameters)
    except (TypeError, ValueError):  # a builtin lane without a signature
        return []


def _name(names: list[str], k: int) -> str:
    return f"argument {k} ({names[k]!r})" if k < len(names) else f"argument {k}"


def _tensor(value, k: int, names: list[str], program: str) -> torch.Tensor:
    """Argument ``k`` as the op's tensor, checked so that errors name it."""
    if isinstance(value, torch.Tensor) and value.dtype in library.DTYPES and value.device.type == "cpu" and not (
            value.requires_grad and value.is_complex()):
        return value
    if isinstance(value, (bool, int, float, complex)):
        return torch.tensor(value)
    what = f"lw.torch.op({program}): {_name(names, k)}"
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{what} is a {type(value).__name__}; pass a torch tensor or a Python scalar")
    if value.device.type != "cpu":
        raise LanewiseError(f"{what} is on {value.device}; the op runs on CPU tensors")
    if value.dtype not in library.DTYPES:
        raise LaneTypeError(f"{what} has dtype {value.dtype}; lanewise lanes take bool, int, uint, float32/float64 "
                            "and complex64/complex128 tensors")
    raise LaneTypeError(f"{what} is a complex tensor that requires grad; lanewise differentiates real floating "
                        "arguments only")


def _on_cpu(program):
    """A copy of ``program`` (``lw.vmap``, nested, or ``lw.reduce`` of one) whose outermost
    level, which runs the nest, asks for the cpu backend: what an operator of a
    ``backend="auto"`` program runs, torch tensors being never on a TPU."""
    if isinstance(program, Reduced):
        return type(program)(_on_cpu(program.fun), program.op, program.axis)
    return Mapped(program.fun, program.in_axes, program.out_axes, program.axis_size, "cpu", program.progress)
