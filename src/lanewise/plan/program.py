"""The lane program: what a (nested) ``vmap`` means, independent of any backend.

Front end of the pipeline (docs/architecture.md): the user's ``Mapped`` nest and the call's
arguments become a :class:`Program` — frozen dataclasses describing every input
leaf (dtype, rank, layout, which original axis each vmap level maps), every
level (its size source), and, once the lane's result type is known, every output
leaf (dtype, where each level's axis lands).  Sizes are run-time values kept
outside the program so that one compiled kernel serves every size.

Example:
    >>> import numpy as np, lanewise as lw
    >>> f = lw.vmap(lw.vmap(lambda x, y: x * y, in_axes=(None, 0)), in_axes=(0, None))
    >>> call = bind_call(f, (np.ones(3), np.ones(4)), {})
    >>> [leaf.axes for leaf in call.signature.leaves], call.sizes
    ([(0, None), (None, 0)], (3, 4))
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

from .. import pytree
from ..dtypes import check_supported, named_wide_dtypes, storage_dtype
from ..errors import AxisSpecError, LaneTypeError, SizeMismatchError, scalar_kind
from ..runtime import interop


@dataclass(frozen=True)
class Leaf:
    """One input leaf: an array or a scalar handed (sliced) to every lane."""

    name: str  # how the user names it: "x", "params['w']", "y[1]"
    param: str  # the lane parameter it belongs to (dependency analysis)
    is_array: bool
    dtype: np.dtype
    ndim: int
    layout: str  # "C", "F" or "A": compiled code specialises on it
    readonly: bool
    axes: tuple[int | None, ...]  # per vmap level: original axis mapped there
    strong: bool = True  # arrays and NumPy scalars fix result widths; Python scalars are weak
    #: An 'A'-layout array whose lanes receive 1-D rows of unit stride (the rows of a
    #: sliding-window view): CPU kernels hand the lane its row typed as contiguous
    #: (lane.contiguous), so loops over it vectorise.
    unit_rows: bool = False

    @property
    def lane_ndim(self) -> int:
        return self.ndim - sum(a is not None for a in self.axes)

    @property
    def element_dtype(self) -> np.dtype:
        """The dtype of the scalar a lane receives from this leaf: integers
        narrower than 64 bits arrive as int64, as Python ints (they compute
        without wrapping: int8 ``-v`` at -128 is 128), on every backend."""
        if self.dtype.kind in "iu" and self.dtype.itemsize < 8:
            return np.dtype(np.int64)
        return self.dtype

    def describe(self, shape) -> str:
        return f"{self.name} of type {self.dtype}{list(shape)}" if self.is_array else \
            f"{self.name} of type {self.dtype} (a Python scalar)"


@dataclass(frozen=True)
class Level:
    """One ``vmap`` of the nest; level 0 is the outermost."""

    depth: int
    fun_name: str
    axis_size: int | None  # given by the user: level maps no argument
    out_axes: tuple  # pytree.freeze(user's out_axes prefix), resolved once outputs are known


@dataclass(frozen=True)
class Param:
    """One argument of the lane call: positional (keyword is None) or keyword."""

    keyword: str | None
    tree: Any  # optree PyTreeSpec of the argument
    first_leaf: int  # index of its first leaf in Signature.leaves


@dataclass(frozen=True)
class Signature:
    """Everything about a call that compiled code depends on (no sizes, no data)."""

    levels: tuple[Level, ...]
    params: tuple[Param, ...]
    leaves: tuple[Leaf, ...]

    def mapped_at(self, level: int) -> list[int]:
        return [k for k, leaf in enumerate(self.leaves) if leaf.axes[level] is not None]


@dataclass(frozen=True)
class OutLeaf:
    """One output leaf: the lane's value at ``path`` stored in an array."""

    name: str  # "out", "out[1]"
    path: tuple[int, ...]  # indices into the lane's (nested tuple) result
    dtype: np.dtype  # storage dtype (dtypes.storage_dtype)
    lane_ndim: int  # 0 for scalars; per-lane arrays keep their rank
    level_dims: tuple[int | None, ...]  # per level: its axis in the output, or None
    lane_dims: tuple[int, ...]  # where the lane's own axes land in the output

    @property
    def ndim(self) -> int:
        return self.lane_ndim + sum(d is not None for d in self.level_dims)

    def shape(self, sizes, lane_shape=()) -> tuple[int, ...]:
        shape = [0] * self.ndim
        for level, dim in enumerate(self.level_dims):
            if dim is not None:
                shape[dim] = sizes[level]
        for k, dim in enumerate(self.lane_dims):
            shape[dim] = lane_shape[k]
        return tuple(shape)


@dataclass(frozen=True)
class Program:
    """A signature plus the outputs its lane produces: what backends compile."""

    lane: Callable
    signature: Signature
    outputs: tuple[OutLeaf, ...]
    out_tree: Any  # optree PyTreeSpec of the result


@dataclass(frozen=True)
class Call:
    """One call of a mapped function: its signature, leaf values and sizes."""

    lane: Callable
    signature: Signature
    values: tuple[Any, ...]  # leaf values in Signature.leaves order
    sizes: tuple[int, ...]  # one per level
    #: "torch" or "jax" when every array argument came from that library: the
    #: results go back as its arrays (runtime.interop.to_library); None: NumPy.
    library: str | None = None


# ----------------------------------------------------------------------------- nest


def unwrap_nest(mapped) -> tuple[Callable, list]:
    """The innermost lane function and the ``Mapped`` objects, outermost first."""
    nest = []
    fun = mapped
    while hasattr(fun, "_lw_vmap_spec"):
        nest.append(fun)
        fun = fun.fun
    return fun, nest


def bind_call(mapped, args: tuple, kwargs: dict) -> Call:
    """Validate a call of a (nested) mapped function against JAX's vmap rules."""
    lane, nest = unwrap_nest(mapped)
    args = tuple(_as_value(a) for a in args)
    kwargs = {k: _as_value(v) for k, v in kwargs.items()}
    names = _param_names(lane, len(args))
    params, leaves_info, values, library = _flatten_params(args, kwargs, names)
    per_level = [_level_axes(m, args, kwargs) for m in nest]
    leaves, sizes = _resolve_axes(leaves_info, values, per_level, nest, lambda k, depth: _rank_hint(
        nest[depth], [*args, *kwargs.values()], params, values, per_level[depth], k))
    levels = tuple(Level(d, _fun_name(m.fun), m.axis_size, pytree.freeze(m.out_axes)) for d, m in enumerate(nest))
    return Call(lane, Signature(levels, tuple(params), tuple(leaves)), tuple(values), tuple(sizes), library)


def bind_keeping(mapped, args: tuple, kwargs: dict, kept: Callable[[Any], bool]) -> Call:
    """:func:`bind_call`, with the array leaves that ``kept`` accepts left as they are
    (a backend's device arrays, which :func:`bind_call` would copy to the host): the
    call is bound with host stand-ins of their shape and dtype, then gets them back.

    Example:
        >>> import numpy as np, lanewise as lw
        >>> x = np.arange(3.0)
        >>> call = bind_keeping(lw.vmap(lambda a: a), (x,), {}, lambda v: v is x)
        >>> call.values[0] is x, call.sizes
        (True, (3,))
    """
    real: dict[int, Any] = {}

    def swap(value):
        leaves, tree = pytree.flatten(value)
        if not any(kept(v) for v in leaves):
            return value
        new = []
        for v in leaves:
            if kept(v):
                stand_in = np.broadcast_to(np.zeros((), np.dtype(v.dtype)), tuple(v.shape))
                real[id(stand_in)] = v
                v = stand_in
            new.append(v)
        return pytree.unflatten(tree, new)

    call = bind_call(mapped, tuple(swap(a) for a in args), {k: swap(v) for k, v in kwargs.items()})
    if not real:
        return call
    return replace(call, values=tuple(real.get(id(v), v) for v in call.values))


def _as_value(x: Any) -> Any:
    """Lists of numbers become arrays (JAX would reject mapping over them); an array
    in non-native byte order (big-endian data read from FITS or HDF5 files) becomes
    the same values in native order (a copy: compiled code reads native numbers)."""
    if isinstance(x, np.ndarray) and not x.dtype.isnative and x.dtype.kind in "biufc":
        return x.astype(x.dtype.newbyteorder("="))
    if isinstance(x, list) and x and all(isinstance(v, (int, float, complex, bool, list)) for v in x):
        try:
            arr = np.asarray(x)
        except ValueError:
            return x
        if arr.dtype.kind in "biufc":
            return arr
    return x


def _fun_name(fun) -> str:
    return getattr(fun, "__name__", None) or type(fun).__name__


def _param_names(lane: Callable, nargs: int) -> list[tuple[str, str]]:
    """(display name, lane parameter) of the first ``nargs`` positional arguments."""
    try:
        sig = inspect.signature(lane)
    except (TypeError, ValueError):
        return [(f"args[{i}]", f"args[{i}]") for i in range(nargs)]
    names, var = [], "args"
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append((p.name, p.name))
        elif p.kind == p.VAR_POSITIONAL:
            var = p.name
    extra = [(f"{var}[{i}]", var) for i in range(len(names), nargs)]
    return (names + extra)[:nargs]


def _flatten_params(args, kwargs, names):
    params, info, values, origins = [], [], [], []
    items = [(None, n, a) for n, a in zip(names, args, strict=True)]
    items += [(k, (k, k), v) for k, v in kwargs.items()]
    for keyword, (name, param), value in items:
        leaves, tree = pytree.flatten(value)
        params.append(Param(keyword, tree, len(values)))
        paths = pytree.leaf_paths(value)
        for path, leaf in zip(paths, leaves, strict=True):
            info.append((pytree.path_name(name, path), param))
            values.append(_as_leaf(leaf, pytree.path_name(name, path)))
            origins.append(interop.origin(leaf))
    return params, info, values, interop.library_of(origins)


def _as_leaf(leaf: Any, name: str) -> Any:
    if isinstance(leaf, np.ndarray) and leaf.ndim == 0:
        return leaf  # kept as a 0-d array: lanes get leaf[()], a scalar
    if isinstance(leaf, (bool, int, float, complex, np.ndarray, np.generic)):
        return leaf
    if interop.is_array_like(leaf):  # torch, JAX, DLPack, array interface: a view, not a copy
        return interop.as_host_array(leaf, f"argument {name}")
    hint = ("; lw.vmap takes a function as a positional argument of its own, unmapped (in_axes None); "
            "inside a pytree, as a keyword argument or in lw.reduce, pass it as a global, a closure "
            "variable or a bound argument (functools.partial(lane, f))" if callable(leaf) else "")
    raise LaneTypeError(
        f"argument {name} is a {type(leaf).__name__}; lanewise maps over arrays, "
        f"array-likes, Python/NumPy scalars and pytrees (tuples, lists, dicts) of them{hint}"
    )


def _in_axes(mapped, nargs: int):
    """A level's in_axes (a list read as a tuple), checked against ``nargs`` positional arguments."""
    in_axes = mapped.in_axes
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)  # JAX is lenient here too
    if isinstance(in_axes, tuple) and len(in_axes) != nargs:
        raise AxisSpecError(
            f"vmap({_fun_name(mapped.fun)}) in_axes has {len(in_axes)} entries but the call "
            f"passed {nargs} positional arguments; in_axes must be an int, None, or a "
            "tuple with one entry per positional argument"
        )
    return in_axes


def in_axes_without(mapped, fixed, nargs: int):
    """A level's in_axes without the entries of the positions in ``fixed``: the
    functions passed as arguments, which must be unmapped (None), as in ``jax.vmap``.

    Example:
        >>> import lanewise as lw
        >>> in_axes_without(lw.vmap(lambda f, v: f(v), in_axes=(None, 0)), {0}, 2)
        (0,)
    """
    in_axes = _in_axes(mapped, nargs)
    if in_axes is None:
        return None
    if isinstance(in_axes, tuple) and all(in_axes[k] is None for k in fixed):
        return tuple(a for k, a in enumerate(in_axes) if k not in fixed)
    k = min(k for k in fixed if not isinstance(in_axes, tuple) or in_axes[k] is not None)
    name = _param_names(unwrap_nest(mapped)[0], nargs)[k][0]
    fix = tuple(None if j in fixed else (in_axes[j] if isinstance(in_axes, tuple) else in_axes)
                for j in range(nargs))
    raise LaneTypeError(
        f"vmap({_fun_name(mapped.fun)}) maps argument {name}, which is a function: a function "
        f"cannot be mapped; pass it unmapped (in_axes={fix}), as jax.vmap requires")


def _level_axes(mapped, args, kwargs) -> list[int | None]:
    """One axis per leaf for a level: in_axes for positional, 0 for keywords."""
    in_axes = _in_axes(mapped, len(args))
    axes = pytree.broadcast_axes(in_axes, args, "vmap in_axes")
    n_kw = len(pytree.flatten(kwargs)[0])
    return axes + [0] * n_kw


def _resolve_axes(info, values, per_level, nest, hint=lambda k, depth: ""):
    """Translate each level's axes to original dims; check ranks and sizes (``hint(k, depth)``:
    what to write instead when leaf ``k`` has too few axes for level ``depth``)."""
    remaining = [list(range(np.ndim(v))) for v in values]
    leaf_axes = [[] for _ in values]
    sizes = []
    for depth, axes in enumerate(per_level):
        seen = []
        for k, axis in enumerate(axes):
            if axis is None:
                leaf_axes[k].append(None)
                continue
            dims = remaining[k]
            if not -len(dims) <= axis < len(dims):
                shape = tuple(np.shape(values[k])[d] for d in dims)
                raise AxisSpecError(_rank_message(info[k][0], shape, axis, depth, nest) + hint(k, depth))
            original = dims.pop(axis % len(dims))
            leaf_axes[k].append(original)
            seen.append((k, original))
        sizes.append(_level_size(seen, values, info, depth, nest))
    leaves = [_make_leaf(name, param, v, tuple(ax))
              for (name, param), v, ax in zip(info, values, leaf_axes, strict=True)]
    return leaves, sizes


def _level_size(seen, values, info, depth, nest) -> int:
    mapped = nest[depth]
    sizes = {np.shape(values[k])[dim] for k, dim in seen}
    if mapped.axis_size is not None:
        sizes.add(int(mapped.axis_size))
    if not seen and mapped.axis_size is None:
        raise AxisSpecError(
            f"vmap({_fun_name(mapped.fun)}) must have at least one non-None value in in_axes "
            "(or be given axis_size=) to know how many lanes to run"
        )
    if len(sizes) == 1:
        return sizes.pop()
    lines = [f"  * argument {info[k][0]} of type {np.asarray(values[k]).dtype}"
             f"{list(np.shape(values[k]))} has size {np.shape(values[k])[dim]} "
             f"along its axis {dim}" for k, dim in seen]
    if mapped.axis_size is not None:
        lines.append(f"  * axis_size={mapped.axis_size} was given")
    level = "" if len(nest) == 1 else f" (vmap level {depth}, 0 = outermost)"
    raise SizeMismatchError(
        "vmap got inconsistent sizes for the mapped axis:\n" + "\n".join(lines) + level)


def _rank_message(name, shape, axis, depth, nest) -> str:
    level = "" if len(nest) == 1 else f" at vmap level {depth} (0 = outermost)"
    seen = "" if len(nest) == 1 or depth == 0 else " as this level sees it, outer mapped axes removed"
    return (f"vmap was requested to map argument {name} along axis {axis}{level}, which "
            f"implies that its rank should be at least {axis + 1 if axis >= 0 else -axis}, "
            f"but it is only {len(shape)} (its shape is {shape}{seen})")


def _rank_hint(mapped, arguments, params, values, axes, k) -> str:
    """What to write instead when mapped leaf ``k`` has no axis to map: for a ragged list,
    rows of one length; for a scalar, None in ``in_axes`` (the whole ``in_axes`` to
    write, with None for every scalar argument), or, for a keyword argument, which
    is always mapped, ``functools.partial``."""
    p = max(j for j, param in enumerate(params) if param.first_leaf <= k)
    param, argument = params[p], arguments[p]
    what = f"keyword argument {param.keyword}" if param.keyword is not None else \
        f"positional argument {p + 1} of {sum(q.keyword is None for q in params)}"
    rows = _ragged_rows(argument)
    if rows is not None:
        return (f".\nIt is {what}, a ragged list (rows of lengths {rows}): lanewise maps arrays, whose rows "
                "have one length; pad the rows to one length (e.g. with np.nan, keeping the true lengths in "
                "another array), or pass the rows as separate arrays")
    if np.ndim(values[k]) != 0:
        return ""
    within = "a leaf of " if isinstance(argument, (tuple, list, dict)) else ""
    head = f".\nIt is {within}{what}, {scalar_kind(values[k])}, which has no axis to map"
    if param.keyword is not None:
        return (f"{head}; keyword arguments are always mapped along axis 0, as in jax.vmap: pass it positionally "
                f"with None in in_axes, or bind it: functools.partial({_fun_name(mapped.fun)}, "
                f"{param.keyword}={argument!r})")
    suggested = _unmapped_scalars(params, values, axes)
    if not pytree.flatten(suggested)[0] and mapped.axis_size is None:  # None is an empty node: nothing mapped
        return f"{head}; no argument has an axis to map: pass an array, or give axis_size= (with in_axes=None)"
    return f"{head}. To hand it to every lane unchanged, write lw.vmap({_fun_name(mapped.fun)}, in_axes={suggested!r})"


def _unmapped_scalars(params, values, axes) -> tuple:
    """The level's in_axes as a tuple over its positional arguments (``axes``: one per
    leaf), with None for every scalar leaf; an argument whose leaves agree is one entry."""
    positional = [q for q in params if q.keyword is None]
    bounds = [q.first_leaf for q in positional] + [params[len(positional)].first_leaf
                                                   if len(params) > len(positional) else len(values)]
    spec = []
    for q, start, end in zip(positional, bounds[:-1], bounds[1:], strict=True):
        leaf_axes = [None if np.ndim(values[j]) == 0 else axes[j] for j in range(start, end)]
        if len(set(leaf_axes)) <= 1:  # one entry for the whole argument (None for one with no leaves)
            spec.append(leaf_axes[0] if leaf_axes else None)
        else:
            spec.append(pytree.unflatten(q.tree, leaf_axes))
    return tuple(spec)


def _ragged_rows(value) -> list | None:
    """The row lengths of a list of numbers and lists that NumPy cannot make an array of
    (``_as_value`` left it a pytree of numbers), else None."""
    if not isinstance(value, list) or not any(isinstance(v, list) for v in value) \
            or not all(isinstance(v, (int, float, complex, bool, list)) for v in value):
        return None
    try:
        np.asarray(value)
    except ValueError:
        return [len(v) if isinstance(v, list) else "a number" for v in value]
    return None


def _unit_rows(value: np.ndarray, axes) -> bool:
    """Whether the lanes' views of ``value`` are 1-D with a stride of one element."""
    lane_axes = set(range(value.ndim)) - {a for a in axes if a is not None}
    return len(lane_axes) == 1 and value.strides[lane_axes.pop()] == value.itemsize


def _make_leaf(name: str, param: str, value: Any, axes) -> Leaf:
    if isinstance(value, np.ndarray):
        dtype = check_supported(value.dtype, f"argument {name}")
        layout = "C" if value.flags.c_contiguous else "F" if value.flags.f_contiguous else "A"
        return Leaf(name, param, True, dtype, value.ndim, layout, not value.flags.writeable, axes,
                    unit_rows=layout == "A" and _unit_rows(value, axes))
    dtype = check_supported(np.asarray(value).dtype, f"argument {name}")
    return Leaf(name, param, False, dtype, 0, "", True, axes, strong=isinstance(value, np.generic))


# ----------------------------------------------------------------------------- outputs

#: Result-type description a backend produces: nested tuples whose leaves are
#: (natural dtype, lane ndim); namedtuple classes are kept via ``ResultNode``.


@dataclass(frozen=True)
class ResultNode:
    """A tuple-like node of a lane's result type (``cls`` None for a plain tuple)."""

    children: tuple
    cls: type | None = None


@dataclass(frozen=True)
class ResultLeaf:
    dtype: np.dtype
    ndim: int


def strong_dtypes(call: Call, unused: frozenset = frozenset()) -> list[np.dtype]:
    """The dtypes a lane's float results are stored no narrower than (dtypes.storage_dtype):
    those of its array and NumPy-scalar arguments, but for the parameters in ``unused``
    (those the result is not computed from: an unused int64 argument does not make a
    float32 ``a * 3`` float64), and the 64-bit types its code names."""
    return [leaf.dtype for leaf in call.signature.leaves if leaf.strong and leaf.param not in unused] \
        + sorted(named_wide_dtypes(call.lane), key=str)


def make_program(call: Call, result, unused: Callable[[tuple], frozenset] | None = None) -> Program:
    """Combine a call's signature with the lane's result type into a Program.

    ``unused(path)``: the lane parameters the output at ``path`` (indices into the
    result's tuples) is not computed from (lane.dependence.unused_parameters); asked for
    float and complex outputs only.  (``out_axes=None`` needs the lane's dependencies
    too: backends build programs with :func:`lanewise.backends.host.program`, which
    gives ``unused`` and checks them.)"""
    sig = call.signature
    skeleton, flat = _skeleton(result, ())
    leaves, out_tree = pytree.flatten(skeleton)
    per_level = [pytree.broadcast_axes(pytree.thaw(level.out_axes), skeleton, "vmap out_axes") for level in sig.levels]
    outputs = []
    for k, (path, rleaf) in enumerate(flat):
        name = "out" + "".join(f"[{i}]" for i in path)
        level_dims, lane_dims = _place_dims(rleaf.ndim, [axes[k] for axes in per_level], sig.levels, name)
        skip = unused(path) if unused is not None and np.dtype(rleaf.dtype).kind in "fc" else frozenset()
        dtype = storage_dtype(rleaf.dtype, strong_dtypes(call, skip))
        outputs.append(OutLeaf(name, path, dtype, rleaf.ndim, level_dims, lane_dims))
    return Program(call.lane, sig, tuple(outputs), out_tree)


def _skeleton(result, path):
    """A pytree with leaf indices in place of values, and (path, leaf) pairs."""
    if isinstance(result, ResultLeaf):
        return len(path), [(path, result)]
    if result is None:
        return None, []
    parts, flat = [], []
    for i, child in enumerate(result.children):
        sk, fl = _skeleton(child, path + (i,))
        parts.append(sk)
        flat += fl
    if result.cls is not None:
        return result.cls(*parts), flat
    return tuple(parts), flat


def _place_dims(lane_ndim, axes, levels, name):
    """Insert each level's axis into the output, innermost level first (as JAX does)."""
    dims: list = [("lane", k) for k in range(lane_ndim)]
    for depth in reversed(range(len(levels))):
        axis = axes[depth]
        if axis is None:
            continue
        rank = len(dims) + 1
        if not -rank <= axis < rank:
            raise AxisSpecError(
                f"vmap({levels[depth].fun_name}) out_axes={axis} is out of range for output "
                f"{name} of rank {rank} (after adding the mapped axis)")
        dims.insert(axis % rank, ("level", depth))
    level_dims = tuple(dims.index(("level", d)) if ("level", d) in dims else None
                       for d in range(len(levels)))
    lane_dims = tuple(dims.index(("lane", k)) for k in range(lane_ndim))
    return level_dims, lane_dims


# ----------------------------------------------------------------------------- one lane


def lane_arguments(sig: Signature, values, index) -> tuple[list, dict]:
    """The positional and keyword arguments lane ``index`` (one int per level) gets."""
    leaves = [_lane_leaf(leaf, v, index) for leaf, v in zip(sig.leaves, values, strict=True)]
    args, kwargs = [], {}
    for param in sig.params:
        part = leaves[param.first_leaf:param.first_leaf + param.tree.num_leaves]
        value = pytree.unflatten(param.tree, part)
        if param.keyword is None:
            args.append(value)
        else:
            kwargs[param.keyword] = value
    return args, kwargs


def _lane_leaf(leaf: Leaf, value, index):
    if not leaf.is_array:
        return value
    idx = [slice(None)] * leaf.ndim
    for level, axis in enumerate(leaf.axes):
        if axis is not None:
            idx[axis] = index[level]
    value = value[tuple(idx)]
    # Lanes are Python: a bool element is a Python bool (True + True == 2), not
    # NumPy's logical np.bool_; an integer element narrower than 64 bits arrives as
    # int64 (Leaf.element_dtype: int8 127 * 2 == 254, -(-128) == 128), as compiled
    # lanes receive it.  64-bit elements stay NumPy scalars: they wrap like the
    # compiled int64 (a Python int would not).
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer) and value.dtype.itemsize < 8:
        return np.int64(value)
    return value


def dummy_values(call: Call) -> tuple:
    """Leaf values with every size-0 mapped axis grown to 1 (zeros), for probing."""
    if all(call.sizes):
        return call.values
    out = []
    for leaf, value in zip(call.signature.leaves, call.values, strict=True):
        if leaf.is_array and any(a is not None and call.sizes[lv] == 0 for lv, a in enumerate(leaf.axes)):
            shape = list(value.shape)
            for lv, a in enumerate(leaf.axes):
                if a is not None and call.sizes[lv] == 0:
                    shape[a] = 1
            value = np.zeros(shape, value.dtype)
        out.append(value)
    return tuple(out)
