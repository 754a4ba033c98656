"""The plan of a W-wide lane (:class:`Plan`): how the kernel calls it (the kind of
each parameter, the results, the width) and the module text defining it.

Example:
    >>> refill(32)  # a streamed lane refills its slots when a quarter are free
    8
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import settings
from .expressions import TWIN_MODULES
from .settings import width_for
from .stream import transform_stream
from .syntax import Unsupported, lane_params
from .transform import transform
from .uniform import uniform_reads


#: Names the generated module imports for the W-wide lane.
RUNTIME = ("stack_empty", "vload", "vstore", "v_undef", "v_select", "v_as", "v_range", "m_const",
           "m_bits", "m_count", "m_from_bits",
           "v_add", "v_sub", "v_mul", "v_truediv", "v_floordiv", "v_mod", "v_pow", "v_lshift",
           "v_rshift", "v_bitand", "v_bitor", "v_bitxor", "v_lt", "v_le", "v_gt", "v_ge", "v_eq",
           "v_ne", "v_neg", "v_pos", "v_invert", "v_call1", "v_call2", "v_call3", "v_call4",
           "m_and", "m_or", "m_andnot", "m_truth", "m_uniform", "m_not", "m_any")

#: ... and from :mod:`.rows`, for lanes that index a per-lane row.
ROW_RUNTIME = ("v_row", "v_gather", "v_table")


@dataclass(frozen=True)
class Plan:
    """How the kernel calls the W-wide lane."""

    width: int
    kinds: tuple  # per lane parameter: "varying", "uniform", "row" (a per-lane 1-D view), "table" (one 1-D
    #               array every lane shares), "tuple" (a flat tuple of scalars passed whole) or "default"
    leaves: tuple  # per lane parameter: the signature leaf passed (a tuple of them for "tuple"; None for "default")
    results: tuple  # ((path, numba result dtype name), ...) in program.outputs order
    source: str  # the module text defining lane_spmd (or lane_stream)
    stream: bool = False  # lane_stream: slots refilled as lanes finish
    gathered: bool = False  # a table is read at an index that differs between lanes (gathers_tables)



def make_plan(program, call, result, lane, stream: bool = True) -> Plan:
    """Transform the lane for this program's parameters and results."""
    sig = program.signature
    inner = _inner_level(program)
    names = lane_params(lane)
    kinds, leaves = ["default"] * len(names), [None] * len(names)
    for k, param in enumerate(sig.params):
        index = k if param.keyword is None else (names.index(param.keyword) if param.keyword in names else None)
        if index is None or index >= len(names):
            raise Unsupported(f"the argument {param.keyword or k} (it does not name a parameter)")
        if not param.tree.is_leaf():
            kinds[index], leaves[index] = "tuple", _scalar_tuple_leaves(sig, param, inner)
            continue
        leaf = sig.leaves[param.first_leaf]
        if leaf.dtype.kind not in "biuf":
            raise Unsupported(f"the {leaf.dtype} argument {leaf.name}")
        if leaf.is_array and leaf.lane_ndim:
            kinds[index] = _row_kind(leaf, inner)
        else:
            varying = leaf.is_array and leaf.axes[inner] is not None
            kinds[index] = "varying" if varying else "uniform"
        leaves[index] = param.first_leaf
    flat = _result_leaves(result)
    if not flat or len(flat) != len(program.outputs):
        raise Unsupported("a lane without a result, or with None in its result")
    results = []
    for out, (path, leaf) in zip(program.outputs, flat):
        if leaf.ndim or out.lane_ndim:
            raise Unsupported(f"the per-lane array output {out.name}")
        if np.dtype(leaf.dtype).kind not in "biuf":
            raise Unsupported(f"the {leaf.dtype} output {out.name}")
        results.append((tuple(path), np.dtype(leaf.dtype).name))
    itemsizes = [np.dtype(d).itemsize for _, d in results]
    itemsizes += [sig.leaves[leaves[i]].dtype.itemsize for i, k in enumerate(kinds)
                  if k in ("varying", "row", "table")]
    varying_dtypes = tuple(sig.leaves[leaves[i]].element_dtype.name for i, k in enumerate(kinds) if k == "varying")
    row_dtypes = tuple(sig.leaves[leaves[i]].dtype.name for i, k in enumerate(kinds) if k == "row")
    table_dtypes = {names[i]: sig.leaves[leaves[i]].dtype.name for i, k in enumerate(kinds) if k == "table"}
    gathered = gathers_tables(lane, kinds)
    width = width_for(max(itemsizes), rows=bool(row_dtypes) or gathered)
    # Rows and tables run in groups only: every lane of a group shares the row
    # length, and the streamed form would have to refill pointers slot by slot.
    if stream and settings.STREAMING and any(k == "varying" for k in kinds) and not row_dtypes and not table_dtypes \
            and "tuple" not in kinds:
        try:
            body = transform_stream(lane, tuple(kinds), varying_dtypes, tuple(results), width, refill(width))
            return Plan(width, tuple(kinds), tuple(leaves), tuple(results), module_text(body), True)
        except Unsupported:
            pass  # not of the form prologue; loop; epilogue: groups of W lanes
    tuple_sizes = {names[i]: len(leaves[i]) for i, k in enumerate(kinds) if k == "tuple"}
    body = transform(lane, tuple(kinds), tuple(results), width, row_dtypes=row_dtypes,
                     row_blocks=row_blocks(sig, kinds, leaves), table_dtypes=table_dtypes, tuple_sizes=tuple_sizes)
    return Plan(width, tuple(kinds), tuple(leaves), tuple(results), module_text(body), gathered=gathered)


def _scalar_tuple_leaves(sig, param, inner: int) -> tuple:
    """The leaves of a tuple argument the SPMD path takes: a flat tuple of scalars,
    the same for every lane of the innermost level (an lw.random key, constants)."""
    import optree

    tree = param.tree
    if tree.kind != optree.PyTreeKind.TUPLE or tree.num_leaves != tree.num_children or not tree.num_leaves:
        raise Unsupported(f"the argument {param.keyword or param.first_leaf}: a {tree} (the SPMD path takes "
                          "scalars, 1-D rows and flat tuples of scalars)")
    out = tuple(range(param.first_leaf, param.first_leaf + tree.num_leaves))
    for j in out:
        leaf = sig.leaves[j]
        if leaf.dtype.kind not in "biuf" or (leaf.is_array and (leaf.lane_ndim or leaf.axes[inner] is not None)):
            raise Unsupported(f"the tuple argument holding {leaf.name} (only tuples of scalars passed whole)")
    return out


def _row_kind(leaf, inner: int) -> str:
    """``"row"`` for an array argument whose lanes each receive their own 1-D view
    along the innermost level, ``"table"`` for the same 1-D array shared by the
    level's lanes (passed whole or mapped at outer levels only: coefficients,
    sources, sample times: one data pointer, see :func:`.rows.v_table`), else refused."""
    if leaf.lane_ndim != 1:
        raise Unsupported(f"the array argument {leaf.name}: its lanes receive {leaf.lane_ndim}-D views "
                          "(only 1-D rows are supported)")
    if leaf.dtype.kind not in "iuf":
        raise Unsupported(f"the {leaf.dtype} array argument {leaf.name} (rows of integers or floats only)")
    return "table" if leaf.axes[inner] is None else "row"


def gathers_tables(lane, kinds) -> bool:
    """Whether the lane reads a table at an index that differs between lanes (a
    gather: W scalar loads, which cap W as rows do; :func:`width_for`)."""
    if "table" not in kinds:
        return False
    return not _uniform_reads_of(lane, kinds, "table")


def row_blocks(sig, kinds, leaves) -> tuple:
    """Per ``"row"`` parameter, whether its rows are contiguous, so that a read at
    a uniform index goes through a block (:func:`.rows.v_row`, which checks the
    stride again at run time): True when the row axis is the last of a C array or
    the first of an F array, None for an "A" array (either; ``x[::2]`` has
    contiguous rows, ``x[:, ::2]`` not), else False."""
    out = []
    for kind, leaf_index in zip(kinds, leaves, strict=True):
        if kind == "row":
            leaf = sig.leaves[leaf_index]
            axis = (set(range(leaf.ndim)) - {a for a in leaf.axes if a is not None}).pop()
            out.append(None if leaf.layout == "A" else axis == (leaf.ndim - 1 if leaf.layout == "C" else 0))
    return tuple(out)


def block_reads(lane, kinds) -> bool:
    """Whether the lane reads its rows only at uniform indices (block reads)."""
    return _uniform_reads_of(lane, kinds, "row")


def _uniform_reads_of(lane, kinds, kind: str) -> bool:
    """Whether the lane reads its parameters of ``kind`` ("row" or "table") only at
    uniform indices."""
    names = lane_params(lane)  # as make_plan counts them
    pick = {n for n, k in zip(names, kinds) if k in ("uniform", "default")}
    arrays = {n for n, k in zip(names, kinds) if k in ("row", "table")}
    return uniform_reads(lane, pick, arrays, {n for n, k in zip(names, kinds) if k == kind})


def refill(width: int) -> int:
    """Free slots that trigger a refill of a streamed lane: refilling costs a pass
    over the slots, so it waits until a quarter of them are free."""
    return max(1, width // 4)


def _inner_level(program) -> int:
    from ..plan.schedule import loop_order

    return loop_order(program)[-1]


def _result_leaves(result, path=()):
    from ..plan.program import ResultLeaf

    if result is None:
        return [(path, None)] if path else []
    if isinstance(result, ResultLeaf):
        return [(path, result)]
    out = []
    for i, child in enumerate(result.children):
        sub = _result_leaves(child, path + (i,))
        if any(leaf is None for _, leaf in sub):
            raise Unsupported("None in the lane's result")
        out += sub
    if result.cls is not None:
        raise Unsupported(f"the {result.cls.__name__} result (return a plain tuple)")
    return out


#: Options of the W-wide lane, which only the kernels call (never Python): no
#: wrappers for calls from Python or as a C function, which took 15% of its IR
#: and 0.1 s of an SPMD lane's cold first call.  Calling it from Python crashes.
LINK_ONLY = ", no_cpython_wrapper=True, no_cfunc_wrapper=True"


def module_text(body: str) -> str:
    """The part of a generated kernel module that defines the W-wide lane."""
    jit = f'numba.njit(error_model="numpy", nogil=True, cache=True{LINK_ONLY})'
    return "\n".join([
        "import math",
        "import numpy as np",
        "from lanewise import lanemath",
        f"from lanewise.spmd.vector import ({', '.join(RUNTIME)})",
        *([f"from lanewise.spmd.rows import ({', '.join(ROW_RUNTIME)},)"]
          if any(f"{name}(" in body for name in ROW_RUNTIME) else []),
        *(["from lanewise.spmd.failure import m_raise"] if "m_raise(" in body else []),
        *[f"from {module.rpartition('.')[0]} import {module.rpartition('.')[2]} as {alias}"
          for module, alias in TWIN_MODULES.items() if f"{alias}." in body],
        "",
        "",
        f"@{jit}",
        body.rstrip("\n"),
    ])
