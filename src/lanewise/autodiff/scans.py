"""``lw.scan`` in reverse mode: a scan written as the loop it is, so the adjoint code
(:mod:`.adjoint`) records, reverses and checkpoints it like any loop.

``(a, b), _ = lw.scan(step, (a0, b0), xs)`` becomes::

    a, b = a0, b0
    for t in range(len(xs)):
        (a, b), y = step((a, b), xs[t])

and ``c, _ = lw.scan(step, c0, xs)`` the same with one number ``c``.  The step is
called as the scan calls it, so the lane computes what it computed.  Taken: a
carry that is a number or a flat tuple written in the lane (init and target),
``xs`` a name (an array, one element a step) or ``None`` with ``length``,
``reverse`` a constant, and ``ys`` unused.  Anything else is refused with the
reason (the adjoint code then leaves the lane to the tape, which refuses scans).

Example:
    >>> import ast
    >>> tree = ast.parse("def f(x, xs):\\n    (a, b), _ = lw.scan(step, (x, 0.0), xs)\\n    return a").body[0]
    >>> print(ast.unparse(desugar(tree, lambda f: ast.unparse(f) == "lw.scan", "_q_")))
    def f(x, xs):
        a, b = (x, 0.0)
        for _q_t0 in range(len(xs)):
            (a, b), _q_y0 = step((a, b), xs[_q_t0])
        return a
"""

from __future__ import annotations

import ast
import copy
import itertools

_NAMES = ("f", "init", "xs", "length", "reverse", "unroll")


class NotDesugared(Exception):
    """A scan the rewrite does not take; the message says why."""


def desugar(fdef: ast.FunctionDef, is_scan, pre: str) -> ast.FunctionDef:
    """``fdef`` (a copy) with each ``lw.scan`` assignment written as a loop; ``is_scan(func)``
    tells a call of ``lw.scan`` by its function expression."""
    counter = itertools.count()
    read = {n.id for n in ast.walk(fdef) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}

    class Rewrite(ast.NodeTransformer):
        def visit_Assign(self, node):
            if isinstance(node.value, ast.Call) and is_scan(node.value.func):
                return [ast.copy_location(s, node) for s in _loop(node, next(counter), pre, read)]
            return self.generic_visit(node)

        def visit_Call(self, node):
            if is_scan(node.func):
                raise NotDesugared("lw.scan is taken in reverse mode only as an assignment, "
                                   "(a, b), _ = lw.scan(step, (a0, b0), xs)")
            return self.generic_visit(node)

    out = Rewrite().visit(copy.deepcopy(fdef))
    return ast.fix_missing_locations(out)


def _loop(node: ast.Assign, n: int, pre: str, read: set) -> list:
    call = node.value
    if call.keywords and any(k.arg not in _NAMES for k in call.keywords) or len(call.args) > len(_NAMES):
        raise NotDesugared("lw.scan is called as lw.scan(f, init, xs, length, reverse, unroll)")
    args = dict(zip(_NAMES, call.args))
    args.update({k.arg: k.value for k in call.keywords})
    target = node.targets[0] if len(node.targets) == 1 else None
    if not (isinstance(target, ast.Tuple) and len(target.elts) == 2):
        raise NotDesugared("lw.scan's result is unpacked as carry, ys")
    carry, ys = target.elts
    if not isinstance(ys, ast.Name) or ys.id in read:
        raise NotDesugared("lw.scan's ys is used (reverse mode takes scans whose ys is unused: carry, _ = ...)")
    init = args["init"]
    if isinstance(carry, ast.Tuple):
        if not (all(isinstance(e, ast.Name) for e in carry.elts) and isinstance(init, ast.Tuple)
                and len(init.elts) == len(carry.elts)):
            raise NotDesugared("a tuple carry is written in the lane: (a, b), _ = lw.scan(step, (a0, b0), xs)")
    elif not isinstance(carry, ast.Name) or isinstance(init, ast.Tuple):
        raise NotDesugared("the carry is a number, or a tuple written in the lane: (a, b), _ = lw.scan(...)")
    xs = args.get("xs")
    xs = None if isinstance(xs, ast.Constant) and xs.value is None else xs
    if xs is not None and not isinstance(xs, ast.Name):
        raise NotDesugared("lw.scan's xs is a name (an array) in reverse mode")
    if xs is None and "length" not in args:
        raise NotDesugared("lw.scan without xs needs length=")
    backwards = args.get("reverse", ast.Constant(False))
    if not isinstance(backwards, ast.Constant):
        raise NotDesugared("lw.scan's reverse= is a constant")
    t = f"{pre}t{n}"
    count = f"len({xs.id})" if xs is not None else f"({ast.unparse(args['length'])})"
    steps = f"range({count} - 1, -1, -1)" if backwards.value else f"range({count})"
    x = f"{xs.id}[{t}]" if xs is not None else "None"
    c = ast.unparse(carry)
    text = (f"{c} = {ast.unparse(init)}\n"
            f"for {t} in {steps}:\n"
            f"    {c if isinstance(carry, ast.Name) else '(' + c + ')'}, {pre}y{n} = "
            f"{ast.unparse(args['f'])}({c if isinstance(carry, ast.Name) else '(' + c + ')'}, {x})\n")
    return ast.parse(text).body
