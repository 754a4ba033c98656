"""Reverse mode: a lane's IR -> the source of a lane that records a tape and sweeps it back.

The forward emitter (:mod:`.forward`) writes the lane with a derivative beside
every active value; here that derivative is a *node id* on the lane's tape, not
a tangent.  Each active operation appends one node, ``da * a + db * b`` (its
linearisation: the rules of :mod:`.rules` evaluated with a unit tangent), in
the order the operations run.  The tape therefore records exactly the path the
lane took: ``while`` loops with data-dependent trip counts, ``break`` and early
``return`` need nothing of their own, and no user-supplied bound.  At ``return``
one backward sweep over the nodes (:func:`~.intrinsics.sweep`) gives the
adjoint of every input: a gradient with respect to all the elements of a
per-lane array costs one sweep, where forward mode would need one pass per
element.

What is stored: four floats (32 bytes) per active operation executed, in one
list per lane that grows as the lane runs, freed when the lane returns.  A lane
of 10^6 steps records 10^6 nodes per active operation in its loop; there is no
checkpointing yet.

Example:
    >>> import math, numpy as np
    >>> def f(x, w):
    ...     s = 0.0
    ...     for i in range(w.shape[0]):
    ...         s = s + math.sin(w[i] * x)
    ...     return s
    >>> g = transform(f, Plan(k=1, seeds=(None, (1.0,)), finish="grad", transform="lw.jacrev", mode="reverse"))
    >>> np.allclose(g(0.5, np.array([1.0, 2.0])), 0.5 * np.cos(0.5 * np.array([1.0, 2.0])))
    True
"""

from __future__ import annotations

from ..lane.ir import nodes as ir
from .forward import EMITTERS, Plan, Emitter, transform

__all__ = ["Plan", "transform", "ReverseEmitter"]


class ReverseEmitter(Emitter):
    """The forward emitter with node ids for tangents, a tape, and a sweep at each return."""

    ZERO, ZERO_OF = "0", "zero_nodes"

    def __init__(self, fn, plan: Plan):
        super().__init__(fn, plan)
        if plan.k != 1:
            raise ValueError("reverse mode carries one node id per value (k = 1)")
        self.tape = f"{self.pre}tape"
        self.order = argnums_order(self.params, plan.seeds)

    def _how(self) -> str:
        return "reverse mode: a tape, swept back at return"

    # -- nodes

    def _push(self, parents) -> list[str]:
        """A node (a chain of them for more than two parents): ``[its id]``."""
        (a, da), rest = parents[0], list(parents[1:])
        b, db = rest.pop(0) if rest else ("0", "0.0")
        node = self._node(a, da, b, db)
        for b, db in rest:
            node = self._node(node, "1.0", b, db)
        return [node]

    def _node(self, a, da, b, db) -> str:
        name = f"{self.pre}n{self.count}"
        self.count += 1
        self.emit(f"{name} = {self.pre}ad.push({self.tape}, {a}, {da}, {b}, {db})")
        return name

    def _combine(self, ta, tb, left, right):
        parents = ([(ta[0], left("1.0"))] if ta is not None else []) + \
                  ([(tb[0], right("1.0"))] if tb is not None else [])
        return self._push(parents) if parents else None

    def _scaled(self, ts, make):
        return self._push([(ts[0], make("1.0"))])

    def _array_linear(self, node, ts, make):
        self._fail(node, "array methods and NumPy reductions of differentiated arrays are not supported in "
                         "reverse mode yet (write the loop: for i in range(len(a)): s += a[i])")

    def _helper_extra(self) -> list[str]:
        return [self.tape]

    def _scan_call(self, node, callee):
        self._fail(node, "reverse mode takes lw.scan written as (a, b), _ = lw.scan(step, (a0, b0), xs) or "
                         "c, _ = lw.scan(step, c0, xs), with ys unused (or write the loop, or use forward mode: "
                         "lw.grad, lw.jacfwd)")

    def _custom_call(self, node, fn):
        """A custom_jvp function: its rule with a unit tangent on each active argument
        in turn gives that argument's partial derivative."""
        p, parts = custom_partials(self, node, fn)
        return p, self._push([(n[0], partial) for n, partial in parts])

    # -- the function's parameters and first lines

    def _tangent_params(self) -> list[str]:
        if self.plan.finish == "helper":
            return [self.tan(p, 0) for p, s in zip(self.params, self.plan.seeds, strict=True) if s == "arg"] + \
                [self.tape]
        return [f"{self.pre}cotangent"] if self.plan.finish == "vjp" else []

    def _seed(self) -> None:
        if self.plan.finish != "helper":
            self.emit(f"{self.tape} = {self.pre}ad.new_tape()")
        for param, seed in zip(self.params, self.plan.seeds, strict=True):
            if isinstance(seed, tuple):  # the input's own nodes, kept: the lane may reassign the parameter
                self.emit(f'{self._input(param)} = {self.pre}ad.inputs({self.tape}, {param}, "{param}", '
                          f'"{self.plan.transform}")')
                self.emit(f"{self.tan(param, 0)} = {self._input(param)}")
            elif seed is None and param in self.active:
                self.emit(f"{self.tan(param, 0)} = {self.pre}ad.zero_nodes({param})")

    # -- results: one sweep per output leaf (one in all for lw.vjp)

    def _adjoints(self, nodes: list[str], seeds: list[str]) -> str:
        return self.temp(f"{self.pre}ad.sweep({self.tape}, ({''.join(n + ', ' for n in nodes)}), "
                         f"({''.join(s + ', ' for s in seeds)}))")

    def _input(self, param: str) -> str:
        return f"{self.pre}input_{param}"

    def _pick(self, adjoint: str) -> str:
        picked = [f"{adjoint}[{self._input(p)}]" for p in self.order]
        return picked[0] if self.plan.single else "(" + "".join(t + ", " for t in picked) + ")"

    def _gradients(self, ts, aux: bool) -> str:
        node = self.temp(f"{ts[0]}[0]") if aux else ts[0]
        return self._pick(self._adjoints([node], ["1.0"]))

    def _jacobian_of(self, p, ts) -> str:
        self.temp(f'{self.pre}ad.scalar_result({p}, "{self.plan.transform}")')
        return self._pick(self._adjoints([self.atom(ts[0])], ["1.0"]))

    def _finish_jacrev(self, value):
        self._finish_jacfwd(value)

    def _finish_vjp(self, value):
        """``(value, cotangents of every argument)`` for the cotangent parameter."""
        leaves: list[tuple[str, str]] = []
        p = self._leaves(value, f"{self.pre}cotangent", leaves)
        adjoint = self._adjoints([n for n, _ in leaves], [c for _, c in leaves])
        self.emit(f"return {self.pre}ad.out(({p}, {self._pick(adjoint)}))")

    def _leaves(self, value, cotangent: str, leaves: list) -> str:
        """The primal of a returned IR expression; its scalar leaves' (node, cotangent)
        appended.  A tuple written as one (``return a, b``: a tuple display in the IR) is
        one leaf per element."""
        if isinstance(value, ir.Prim) and value.op == "tuple" and value.type == "tuple":
            parts = [self._leaves(e, f"{cotangent}[{k}]", leaves) for k, e in enumerate(value.args)]
            return "(" + "".join(q + ", " for q in parts) + ")"
        p, ts = self._result(value)
        self.temp(f'{self.pre}ad.scalar_result({p}, "{self.plan.transform} (each returned leaf)")')
        leaves.append((ts[0], cotangent))
        return p


def argnums_order(params, seeds) -> list[str]:
    """The differentiated parameters, in argnums order (a seed is its basis vector)."""
    return [p for _, p in sorted((s.index(1.0), p) for p, s in zip(params, seeds, strict=True)
                                 if isinstance(s, tuple))]


def custom_partials(emitter: Emitter, node, fn):
    """``(result, [(derivative of an active argument, its partial)])`` of a call of a
    custom_jvp function: its rule run once per active argument, with a unit tangent
    there (both reverse modes use it)."""
    values, primals, rule = emitter._custom_rule(node, fn)
    p, parts = f"{emitter.pre}p{emitter.count}", []
    emitter.count += 1
    for i, (_, derivative) in enumerate(values):
        if derivative is not None:
            unit = "(" + "".join(("1.0" if k == i else "0.0") + ", " for k in range(len(values))) + ")"
            partial = f"{emitter.pre}p{emitter.count}"
            emitter.count += 1
            emitter.emit(f"{p}, {partial} = {rule}({primals}, {unit})")
            parts.append((derivative, partial))
    return p, parts


EMITTERS["reverse"] = ReverseEmitter
