"""Per-lane rows, tuple values and ``lw.scan`` in the W-wide code (a mixin of the
emitter in :mod:`.transform`).

* A *row* is a lane parameter whose argument is an array mapped at the innermost
  level with one lane dimension: each lane receives a 1-D view, and all views
  share their length and stride.  The W-wide lane takes its W data pointers,
  the length and the stride (bytes).  ``p[i]`` is a masked read
  (:func:`~lanewise.spmd.rows.v_row`: a block of the rows for a uniform index,
  else a gather), ``len(p)``, ``p.shape[0]`` and ``p.size`` the length; any other use of
  the array is refused.
* Tuple values may be bound to names at a function's top level, passed to
  helpers and indexed with constants (``lw.scan(...)[0][3]``); ``None`` is a
  value that nothing computes with (a scan's ``ys``).
* ``lw.scan(f, init, xs)`` becomes a loop over ``t`` (the same trip count in
  every lane, so a plain loop, no mask): ``carry, y = f(carry, xs[t])`` with
  ``f`` inlined like any helper.  Only ``y is None`` is supported.

Example:
    >>> row = Row("_lw_pv0", "_lw_n0", "_lw_s0", "float64", "_lw_rb0", "_lw_rt0")
    >>> RowsAndScans.row_load(row, "_lw_i3", "_lw_alive")  # p[i] in the lanes of the mask
    'v_row(_lw_pv0, _lw_n0, _lw_s0, _lw_i3, _lw_alive, np.float64, _lw_rb0, _lw_rt0)'
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass

from ..lane.ir import nodes as ir
from ..lane.ir.unparse import python_text
from .desugar import int_literal
from .syntax import (Tup, Unsupported, bind_arguments, helper_function, is_call, leaves_of, shape_of, source_function,
                     where)


@dataclass(frozen=True)
class Row:
    """A per-lane 1-D array in the W-wide code: variables of its W data pointers
    (a Vec of uint64), its length and its stride in bytes; its dtype name; the
    variables of its block's storage (:func:`~lanewise.spmd.rows.v_row`)."""

    ptrs: str
    length: str
    stride: str
    dtype: str
    block: str | None = None  # None: the rows are strided, every read is a gather
    state: str | None = None
    shared: bool = False  # a table: every lane's view is the same array, ``ptrs`` is one pointer

    def declare(self, width: int) -> list[str]:
        """Lines that make the block's storage, at the top of the W-wide lane:
        W*W elements and (first index, lanes held), no block yet."""
        if self.block is None:
            return []
        return [f"{self.block} = stack_empty({width * width}, np.{self.dtype})",
                f"{self.state} = stack_empty(2, np.int64)", f"{self.state}[0] = -1", f"{self.state}[1] = 0"]


_ROW_USES = "a per-lane row supports row[i], len(row), row.shape[0], row.size and lw.scan over it"


def _scan_function():
    from ..lane.scanning import scan

    return scan


class RowsAndScans:
    """Methods of the emitter for rows, tuple values and ``lw.scan``."""

    # -- rows
    def row(self, node, ctx):
        """The Row ``node`` names, or None."""
        if isinstance(node, ir.Var) and not (ctx.renames and node.name in ctx.renames):
            return ctx.frame.rows.get(node.name)
        return None

    def subscript(self, node: ir.Prim, ctx, allow_tuple: bool, guarded: bool):
        here = where(node.loc)
        base, index = node.args
        if isinstance(base, ir.Prim) and base.op == "attr" and self.row(base.args[0], ctx) is not None:
            if dict(base.params)["name"] == "shape" and int_literal(index) in (0, -1):
                return self.row(base.args[0], ctx).length
            raise Unsupported(f"`{python_text(node)}` at {here} ({_ROW_USES})")
        row = self.row(base, ctx)
        if row is not None:
            return self.gather(row, index, ctx, guarded, node.loc)
        if (isinstance(base, ir.Prim) and (base.op in ("getitem", "tuple") or is_call(base))) or (
                isinstance(base, ir.Var) and base.name in ctx.frame.tuples):
            value = self.value(base, ctx, allow_tuple=True, guarded=guarded, at=node.loc)
            k = int_literal(index)
            part = _tuple_slice(index)
            if isinstance(value, Tup) and part is not None:  # t[:], t[1:]: a tuple of the same values
                if not allow_tuple:
                    raise Unsupported(f"a tuple used as a value at {here}")
                return Tup(value.items[part])
            if isinstance(value, Tup) and k is not None and -len(value.items) <= k < len(value.items):
                item = value.items[k]
                if isinstance(item, Tup) and not allow_tuple:
                    raise Unsupported(f"a tuple used as a value at {here}")
                return item
            if isinstance(value, Tup):
                raise Unsupported(f"`{python_text(node)}` at {here}: a tuple indexed with anything but "
                                  "an integer literal in range or a slice of integer literals")
        raise Unsupported(f"indexing ({python_text(node)}) at {here}: only per-lane 1-D rows and "
                          "tuples (with integer literals) can be indexed inside SPMD lanes")

    def gather(self, row: Row, index_node, ctx, guarded: bool, at: ir.Loc) -> str:
        if isinstance(index_node, ir.Prim) and index_node.op in ("slice", "tuple") and not is_call(index_node):
            raise Unsupported(f"slicing or multi-indexing a row at {where(at)} ({_ROW_USES} with an integer i)")
        if guarded:  # the mask does not know which lanes Python would evaluate it for
            raise Unsupported(f"indexing a row at {where(at)} in a position Python may not evaluate "
                              "(after and/or, in a conditional expression)")
        index = self.value(index_node, ctx, guarded=guarded, at=at)
        return self.row_load(row, index, ctx.mask)

    @staticmethod
    def row_load(row: Row, index: str, mask: str) -> str:
        args = f"{row.ptrs}, {row.length}, {row.stride}, {index}, {mask}, np.{row.dtype}"
        if row.shared:
            return f"v_table({args})"
        return f"v_row({args}, {row.block}, {row.state})" if row.block else f"v_gather({args})"

    def refuse_row(self, node, ctx, what: str, at: ir.Loc) -> None:
        """Refuse a row used anywhere but where :data:`_ROW_USES` says."""
        if self.row(node, ctx) is not None:
            raise Unsupported(f"the array {node.name!r} {what} at {where(at)} "
                              f"({_ROW_USES}; no other use of an array)")

    # -- tuples
    def bind_tuple(self, value: Tup) -> Tup:
        """A tuple value held in plain variables (a name or parameter bound to it):
        identifiers are kept (no one reassigns a caller's variable while a
        tuple bound to it is alive), expressions are evaluated once."""
        return self.materialise(value)

    def store_tuple(self, name: str, value: Tup, ctx, where: str) -> None:
        if not ctx.plain or ctx.renames is not None or name in ctx.frame.rows:
            raise Unsupported(f"a tuple stored in variable {name!r} at {where} under a branch or loop "
                              "(unpack it: a, b = ...)")
        copies = Tup(tuple(self.fresh_copy(v) for v in value.items))
        ctx.frame.tuples[name] = copies

    def fresh_copy(self, value):
        """``value`` copied into fresh variables (the name it came from may be reassigned)."""
        if isinstance(value, Tup):
            return Tup(tuple(self.fresh_copy(v) for v in value.items))
        if value == "None":
            return value
        tmp = self.fresh("t")
        self.emit(f"{tmp} = {value}")
        return tmp

    # -- calls
    def builtin_len(self, target, node: ir.Prim, ctx):
        """``len(row)``, or None when this is another call."""
        if target is builtins.len and len(node.args) == 1 and not node.keywords:
            row = self.row(node.args[0], ctx)
            if row is not None:
                return row.length
        return None

    def scan(self, node: ir.Prim, ctx, allow_tuple: bool, guarded: bool):
        """``lw.scan(f, init, xs=None, length=None, reverse=False)`` inlined as a loop."""
        here = where(node.loc)
        args = _scan_arguments(node, here)
        if guarded:
            raise Unsupported(f"lw.scan at {here} in a position Python may not evaluate")
        helper = self.scan_body(args["f"], ctx, node.loc)
        init = self.value(args["init"], ctx, allow_tuple=True, at=node.loc)
        row, n = self.scan_length(args, ctx, node.loc)
        reverse = args.get("reverse")
        if reverse is not None and not (isinstance(reverse, ir.Const) and type(reverse.value) is bool):
            raise Unsupported(f"lw.scan at {here} with reverse= other than True or False")
        carry = self.fresh_copy(init)
        t, i = self.fresh("t"), self.fresh("i")
        self.emit(f"for {t} in range({n}):  # lw.scan at {here}: every lane runs the same steps")
        self.indent += 1
        self.emit(f"{i} = {n} - 1 - {t}" if reverse is not None and reverse.value else f"{i} = {t}")
        x = self.row_load(row, i, ctx.mask) if row is not None else "None"
        if row is not None:
            x = self.materialise(x)
        out = self.inline_values(helper, [carry, x], ctx, allow_tuple=True, where=here)
        if not (isinstance(out, Tup) and len(out.items) == 2):
            raise Unsupported(f"lw.scan at {here}: {helper.__qualname__} does not return (carry, y)")
        new, ys = out.items
        if ys != "None":
            raise Unsupported(f"lw.scan at {here} with stacked ys ({helper.__qualname__} returns a y "
                              "other than None; a per-lane array output)")
        if shape_of(new) != shape_of(carry):
            raise Unsupported(f"lw.scan at {here}: the carry changes its structure")
        for name, value in zip(leaves_of(carry), leaves_of(new), strict=True):
            if name != "None":  # lanes outside the mask never read the carry: no select
                self.emit(f"{name} = {value}")
        self.indent -= 1
        result = Tup((carry, "None"))
        if not allow_tuple:
            raise Unsupported(f"the tuple lw.scan returns used as a value at {here}")
        return result

    def scan_body(self, node, ctx, at: ir.Loc):
        if isinstance(node, ir.Lambda):
            raise Unsupported(f"lw.scan at {where(at)} with a lambda (write the step function with def)")
        helper = helper_function(self.resolve(node, ctx, at))
        if helper is None:
            raise Unsupported(f"lw.scan at {where(at)} over {python_text(node)}, which is not a plain "
                              "Python function")
        source_function(helper)  # its source must be available
        return helper

    def scan_length(self, args, ctx, at: ir.Loc):
        """The row ``xs`` (or None) and the scan's trip count as source text."""
        xs = args.get("xs")
        if xs is None or (isinstance(xs, ir.Const) and xs.value is None):
            length = args.get("length")
            if length is None:
                raise Unsupported(f"lw.scan at {where(at)} without xs or length")
            return None, self.materialise(self.value(length, ctx, at=at))
        row = self.row(xs, ctx)
        if row is None:
            raise Unsupported(f"lw.scan at {where(at)} over `{python_text(xs)}` (only a per-lane 1-D row "
                              "argument of the lane, or xs=None with length=)")
        if args.get("length") is not None:
            raise Unsupported(f"lw.scan at {where(at)} with both xs and length")
        return row, row.length


def _tuple_slice(node) -> slice | None:
    """``node`` as a Python slice when it is one with integer-literal (or no) bounds."""
    if not (isinstance(node, ir.Prim) and node.op == "slice" and not is_call(node)):
        return None
    parts = [None if isinstance(p, ir.Const) and p.value is None else p for p in node.args]
    bounds = [None if p is None else int_literal(p) for p in parts]
    if any(b is None and part is not None for b, part in zip(bounds, parts, strict=True)) or bounds[2] == 0:
        return None
    return slice(*bounds)


_SCAN_PARAMS = ("f", "init", "xs", "length", "reverse")


def _scan_arguments(node: ir.Prim, here: str) -> dict:
    args = bind_arguments(node, _SCAN_PARAMS, f"lw.scan at {here}")
    if "f" not in args or "init" not in args:
        raise Unsupported(f"lw.scan at {here} without f and init")
    return args


def is_scan(target) -> bool:
    return target is _scan_function()


__all__ = ["Row", "RowsAndScans", "is_scan"]
