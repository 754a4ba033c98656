"""Reverse mode's value stack (``lw.jacrev``) in a loop-free lane on the tpu backend.

Reverse mode's adjoint code (:mod:`lanewise.autodiff.adjoint`) pushes each statement's
partial derivatives and each branch taken onto a per-lane stack as the lane runs,
then pops them backwards.  Without loops every push site runs at most once, so a
lane's stack never holds more values than the lane has push sites: here the stack is
that many slots, one float32 tile each.  A position that is one Python int in every
lane (straight-line code) is one slot; after a branch the lanes' positions differ,
and a push or pop at a per-lane position selects among the slots it may be.  Each
push writes the live lanes only, so the two sides of a branch keep their own records.

With a loop a lane's stack grows with its own trip count: not a fixed set of tiles.
Such a lane is refused with the loop's line and the fix, forward mode.

Example:
    >>> import jax.numpy as jnp
    >>> stack = Stack(3)
    >>> live = jnp.array([True, False])
    >>> stack.write(0, jnp.array([1.0, 2.0]), live)
    >>> stack.write(0, jnp.array([5.0, 6.0]), ~live)
    >>> [float(v) for v in stack.read(0)]
    [1.0, 6.0]
    >>> [float(v) for v in stack.read(jnp.array([0, 1]))]
    [1.0, 0.0]
"""

from __future__ import annotations

import jax.numpy as jnp

from ...autodiff import intrinsics as ad
from ...errors import LaneCompileError, LaneTypeError
from ...lane.ir import nodes as ir
from ...lane.ir.passes.walk import walk
from . import rows as _rows
from ...lane.ir.lines import user_line
from .ops import where


FIX = ("Use forward mode, which stores nothing: lw.grad, lw.value_and_grad or lw.jacfwd (argnums=(0, 1, ...) "
       "for several arguments), lw.jvp; or run reverse mode on the cpu backend")


class Stack:
    """A lane's value stack on a tile: ``size`` slots (its push sites), each a tile or a
    number once written."""

    def __init__(self, size: int):
        self.size = size
        self.slots: dict[int, object] = {}
        # the capacity the adjoint code checks before each push: every push fits (one object,
        # so a branch that keeps it merges nothing)
        self.capacity = size + 1

    def write(self, at, value, live) -> None:
        """``stack[at] = value`` in the lanes of ``live`` (``at``: an int, or a tile of them)."""
        for k in self._candidates(at):
            old = self.slots.get(k)
            mask = live if isinstance(at, int) else live & (at == k)
            # a slot no lane wrote yet takes the value whole: a lane reads only what it wrote
            self.slots[k] = value if old is None and isinstance(at, int) else where(mask, value, 0.0 if old is None
                                                                                     else old)

    def read(self, at):
        """``stack[at]`` in every lane (0 where a lane wrote nothing)."""
        if isinstance(at, int):
            return self.slots.get(at, 0.0)
        out = 0.0
        for k in self._candidates(at):
            if k in self.slots:
                out = where(at == k, self.slots[k], out)
        return out

    def _candidates(self, at):
        return (at,) if isinstance(at, int) else range(self.size)


def no_loop(functions) -> None:
    """Refuse reverse mode where one of ``functions`` (those that record) has a loop: its
    records grow with each lane's own trip count."""
    loop = next((n for f in functions for n in walk(f.body) if isinstance(n, ir.Loop)), None)
    if loop is not None:
        raise LaneCompileError(
            f"reverse mode (lw.jacrev) of a loop is not lowered on the tpu backend ({user_line(loop.loc)}): its "
            f"records of partial derivatives grow with each lane's own trip count, and a tile of lanes on the chip "
            f"holds a fixed set of values per lane. {FIX}")


def _reached(function: ir.Function, functions: dict) -> list:
    """``function`` and the helpers it calls, directly or not, each once."""
    reached, todo = [], [function]
    while todo:
        f = todo.pop()
        if all(f is not g for g in reached):
            reached.append(f)
            todo.extend(functions[n.op[5:]] for n in walk(f.body)
                        if isinstance(n, ir.Prim) and n.op.startswith("call:") and n.op[5:] in functions)
    return reached


def new_stack(args, at, st, lowering):
    no_loop([st.function])  # the stack is the function's own: its helpers run in forward mode
    sites = sum(1 for n in walk(st.function.body) if isinstance(n, ir.Prim) and ir.called(n) is ad.poke)
    stack = Stack(sites)
    return stack, stack, stack.capacity


class Tape:
    """Reverse mode's tape (autodiff.reverse: a lane returning a tuple, ...) in a loop-free
    lane: its nodes ``da * a + db * b`` in the order the lowering meets their push sites,
    so a node's id is one int in every lane; a parent id may differ from lane to lane (a
    node chosen by a branch).  A lane's results reach only nodes of the path it took; the
    nodes of the other path get no adjoint in that lane."""

    def __init__(self):
        self.nodes = [(0, 0.0, 0, 0.0)]  # node 0: the constant

    def push(self, a, da, b, db) -> int:
        self.nodes.append((a, da, b, db))
        return len(self.nodes) - 1

    def sweep(self, outputs, seeds) -> tuple:
        """The adjoint of every node, given the adjoints ``seeds`` of the nodes ``outputs``."""
        adjoint = [0.0] * len(self.nodes)
        for node, seed in zip(outputs, seeds, strict=True):
            _spread(adjoint, node, seed, len(self.nodes))
        for node in range(len(self.nodes) - 1, 0, -1):
            g = adjoint[node]
            if isinstance(g, float) and g == 0.0:  # no result reaches it in any lane
                continue
            a, da, b, db = self.nodes[node]
            for parent, d in ((a, da), (b, db)):
                # where g is 0 (a lane whose path skips this node) d may be anything, inf too:
                # the CPU's sweep skips such a node, and so does this select
                _spread(adjoint, parent, where(g != 0.0, d * g, 0.0), node)
        return tuple(adjoint)


def _spread(adjoint: list, node, value, below: int) -> None:
    """``adjoint[node] += value`` with ``node`` an int or a tile of ids (each below ``below``)."""
    if isinstance(node, int):
        adjoint[node] = adjoint[node] + value
        return
    for k in range(1, below):
        adjoint[k] = adjoint[k] + where(node == k, value, 0.0)


def new_tape(args, at, st, lowering):
    no_loop(_reached(st.function, lowering.functions))  # its helpers push onto the same tape
    return Tape()


def inputs(args, at, st, lowering):
    """A differentiated argument's node, once it is checked to be a float."""
    tape, x, name, transform = args
    adjoint_of([x, name, transform], at, st, lowering)
    return tape.push(0, 0.0, 0, 0.0)


def adjoint_of(args, at, st, lowering):
    """A differentiated argument's zero adjoint, once it is checked to be a float."""
    x, name, transform = args
    if isinstance(x, (_rows.Row, _rows.Stacked)):
        raise LaneCompileError(f"{transform} with respect to a row (a per-lane array, argument {name}) is not "
                               f"lowered on the tpu backend ({at}): differentiate with respect to scalar "
                               "arguments, or run it on the cpu backend")
    dtype = None if isinstance(x, float) else jnp.result_type(x)
    if isinstance(x, tuple) or dtype is not None and not jnp.issubdtype(dtype, jnp.floating):
        kind = "tuple" if isinstance(x, tuple) else type(x).__name__ if isinstance(x, (bool, int)) else str(dtype)
        raise LaneTypeError((ad.shape_message if isinstance(x, tuple) else ad.float_message)(name, kind, transform))
    return 0.0


def require_scalar_input(args, at, st, lowering):
    x, name, transform = args
    if isinstance(x, (_rows.Row, _rows.Stacked)):
        raise LaneTypeError(ad.whole_message(name, transform))


def _zero_nodes(value):
    return tuple(_zero_nodes(v) for v in value) if isinstance(value, tuple) else 0


#: Reverse mode's stack and tape intrinsics: ``rule(args, at, st, lowering)``.
RULES = {
    ad.new_stack: new_stack,
    ad.adjoint_of: adjoint_of,
    ad.require_scalar_input: require_scalar_input,
    ad.grow: lambda args, *_: (args[1], args[1].capacity),  # never needed: the slots are every push site
    ad.poke: lambda args, at, st, lowering: args[0].write(args[1], args[2], st.live),
    ad.peek: lambda args, *_: args[0].read(args[1]),
    ad.keep: lambda args, *_: None,
    ad.new_tape: new_tape,
    ad.inputs: inputs,
    ad.push: lambda args, *_: args[0].push(*args[1:]),
    ad.sweep: lambda args, *_: args[0].sweep(*args[1:]),
    ad.zero_nodes: lambda args, *_: _zero_nodes(args[0]),
}
