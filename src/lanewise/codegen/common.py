"""Renderer pieces shared by the CPU and CUDA code generators (one copy each).

Generated modules name things the same way on every target: inputs ``a0, a1,
...``, outputs ``o0, ...``, level sizes ``n0, ...`` and level indices ``i0,
...``.  The helpers here turn a program's signature into those names, the
lane's call arguments, output slices and header comments.

Example:
    >>> import numpy as np
    >>> from lanewise.plan.program import bind_call
    >>> import lanewise as lw
    >>> call = bind_call(lw.vmap(lambda r, s: r[0] * s, in_axes=(0, None)), (np.ones((3, 2)), 2.0), {})
    >>> [leaf_expr(leaf, f"a{k}") for k, leaf in enumerate(call.signature.leaves)]
    ['a0[i0]', 'a1']
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import optree

from ..errors import LaneTypeError, function_location
from ..plan.program import Program, Signature
from ..lane.lanefn import CALL_LIMIT, indexes
from ..lane.records import record_class

#: The decorator of every CPU function of a generated module (``{}``: more options).
JIT = 'numba.njit(error_model="numpy", nogil=True, cache=True{})'


def jit_inlining(program: Program) -> str:
    """The decorator of a generated function that calls (so inlines) the lane:
    bounds-checked when the lane indexes arrays (see lanefn.JIT_OPTIONS)."""
    return JIT.format(inlining_options(program))


def inlining_options(program: Program) -> str:
    """The options :func:`jit_inlining` adds to :data:`JIT` (text to append)."""
    return ", boundscheck=True" if indexes(program.lane) else ""


def inlined_twin(name: str, options: str) -> str:
    """``{name}_inlined``: the generated function ``name`` for Numba's IR inliner.

    The host's kernel (``kernel_blocks``) calls the twin, so it types and
    optimises the block's code once.  (Not ``lw.reduce``'s ``rblock``: Dask's
    tasks call the compiled ``rblock`` from Numba's disk cache, where the
    client's run puts it.)  Calling the compiled block
    linked its optimised code into the kernel, and LLVM optimised it all over
    again there: a third of an SPMD lane's cold first call (about 1 s of 3).
    ``options`` must be the kernel's (Numba compiles inlined code with the
    caller's options).  ``name`` itself stays a function for the ``try`` of the
    ``*_caught`` wrappers: inlined inside a ``try``, a lane's bounds error did
    not stop the block's loop."""
    return "\n".join([f"# The kernel below inlines this twin of {name} (lanewise.codegen.common.inlined_twin).",
                       f"{name}_inlined = numba.njit(error_model=\"numpy\", nogil=True{options}, "
                       f"inline=\"always\")({name}.py_func)"])


@dataclass(frozen=True)
class Names:
    """Identifiers of one rendering, shared by every function of the module."""

    leaves: tuple[str, ...]
    outputs: tuple[str, ...]
    sizes: tuple[str, ...]
    shapes: tuple[str, ...]  # expected lane shape of each per-lane array output

    @classmethod
    def of(cls, program: Program) -> "Names":
        sig = program.signature
        return cls(tuple(f"a{k}" for k in range(len(sig.leaves))),
                   tuple(f"o{m}" for m in range(len(program.outputs))),
                   tuple(f"n{lv}" for lv in range(len(sig.levels))),
                   tuple(f"s{m}" for m, out in enumerate(program.outputs) if out.lane_ndim))

    def params(self, *extra: str) -> str:
        return ", ".join(self.parameters(*extra))

    def parameters(self, *extra: str) -> tuple[str, ...]:
        """The parameters of a generated function: every leaf, output, size and shape, then ``extra``."""
        return self.leaves + self.outputs + self.sizes + self.shapes + extra

    def call(self, fn: str, *extra: str, values: tuple[str, ...] = ()) -> str:
        """The call of generated function ``fn`` (parameters :meth:`parameters` of
        ``extra``), each argument its parameter's name, or for ``extra``'s trailing
        parameters, ``values`` (``lane_block_caught(..., outer, int64(0), n0)``)."""
        return own_call(fn, self.parameters(*extra), values)


def own_call(fn: str, params, values=()) -> str:
    """The call of generated function ``fn`` of parameters ``params``: each argument
    its parameter's name, but the last ``len(values)``, which are ``values``."""
    params = list(params)
    return call(fn, params[:len(params) - len(values)] + list(values), params)


def caught(fn: str, params, doc: str) -> str:
    """``{fn}_caught(params)``: generated ``fn(params, at)`` for a compiled caller,
    which cannot take an exception: -1, or ``at[0]`` when ``fn`` raised (the lane it
    was at, ``lo`` when it tracks none).

    Numba cannot compile a call of more than ``CALL_LIMIT`` arguments inside a
    ``try``, by keyword or not (it builds the argument list across the blocks the
    ``try`` splits the code into): past the limit the arguments travel as one
    tuple, built before the ``try``, to ``{fn}_unpacked``, which makes the call.
    """
    params = list(params)
    inner = params + ["at"]
    packed = len(inner) > CALL_LIMIT
    lines = [f"@{JIT.format('')}", f"def {fn}_caught({', '.join(params)}):", f'    """{doc}"""',
             "    at = np.full(1, lo, np.int64)"]
    lines += [f"    _lw_args = ({', '.join(inner)},)"] if packed else []
    lines += ["    try:", f"        {f'{fn}_unpacked(_lw_args)' if packed else call(fn, inner, inner)}",
              "    except Exception:", "        return int64(at[0])", "    return int64(-1)"]
    if not packed:
        return "\n".join(lines)
    unpacked = [f"@{JIT.format('')}", f"def {fn}_unpacked(_lw_args):",
                f'    """{fn} of the arguments in the tuple _lw_args ({fn}_caught: codegen.common.caught)."""',
                f"    {', '.join(inner)}, = _lw_args", f"    {call(fn, inner, inner)}"]
    return "\n".join(unpacked) + "\n\n\n" + "\n".join(lines)


def call(fn: str, args, params=(), kwargs=()) -> str:
    """Source of the call ``fn(args..., kwargs...)``: as written up to
    :data:`~lanewise.lane.lanefn.CALL_LIMIT` arguments.  A larger call is
    ``fn(*args)`` in CPython's bytecode, which Numba cannot inline; so past the
    limit, when no argument is a keyword yet (``kwargs``: keyword pairs), those
    from the ``CALL_LIMIT``-th on go by keyword, named by ``params`` (the callee's
    parameter names; None for one that cannot be passed by keyword, and the
    keywords then start after the last such).  When none can, the call stays
    positional: fine for a compiled callee, one the caller does not inline.

    Example:
        >>> call("f", ["x", "y"])
        'f(x, y)'
        >>> names = [f"a{k}" for k in range(32)]
        >>> call("f", [f"v[{k}]" for k in range(32)], names).split(", ")[29:]
        ['v[29]', 'a30=v[30]', 'a31=v[31])']
    """
    args, kwargs = list(args), list(kwargs)
    if len(args) + len(kwargs) > CALL_LIMIT and not kwargs:
        params = list(params) + [None] * (len(args) - len(params))
        first = max([CALL_LIMIT] + [k + 1 for k, name in enumerate(params[:len(args)]) if name is None])
        kwargs = list(zip(params[first:len(args)], args[first:], strict=True))
        args = args[:first]
    return f"{fn}({', '.join(args + [f'{k}={v}' for k, v in kwargs])})"


def comment_text(text: object) -> str:
    """``text`` safe inside a ``#`` comment of generated source: a user's string (a
    file name, a dict key, a function name) with a newline in it would otherwise end
    the comment and become code."""
    text = str(text)
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")


def lane_comment(program: Program) -> str:
    """The end-of-line comment pointing a generated call back to the user's lane."""
    name = getattr(program.lane, "__name__", "lane")
    return f"  # {comment_text(name)}() at {comment_text(function_location(program.lane))}"


def level_comments(program: Program) -> list[str]:
    """Header comment lines naming the lane and what each level maps."""
    sig = program.signature
    lines = [f"# lane: {comment_text(getattr(program.lane, '__qualname__', program.lane))} "
             f"defined at {comment_text(function_location(program.lane))}",
             "# levels (outermost first):"]
    for level in sig.levels:
        maps = [f"{leaf.name} axis {leaf.axes[level.depth]}" for leaf in sig.leaves
                if leaf.axes[level.depth] is not None] or [f"axis_size={level.axis_size}"]
        lines.append(comment_text(f"#   {level.depth}: vmap({level.fun_name}) maps {', '.join(maps)}"))
    return lines


def injected_names(sig: Signature) -> dict[str, type]:
    """Classes the generated code refers to (namedtuples, dict records), by name;
    and ``as_contiguous`` where a leaf's rows are (:func:`leaf_expr`)."""
    classes: dict[str, type] = {}
    if any(leaf.unit_rows for leaf in sig.leaves):
        from ..lane.contiguous import as_contiguous
        classes["as_contiguous"] = as_contiguous
    for param in sig.params:
        for spec in _walk(param.tree):
            cls = class_of(spec)
            if cls is not None and cls not in classes.values():
                classes[f"_nt{len(classes)}"] = cls
    return classes


#: Pytree nodes a lane receives as a dict (a record with string keys): an
#: OrderedDict or defaultdict argument reads like the dict it is.
_DICTS = (optree.PyTreeKind.DICT, optree.PyTreeKind.ORDEREDDICT, optree.PyTreeKind.DEFAULTDICT)


def class_of(spec):
    """The class a pytree node is rebuilt with in generated code (namedtuple, record), or None."""
    if spec.kind == optree.PyTreeKind.NAMEDTUPLE:
        return spec.type
    if spec.kind in _DICTS and all(isinstance(k, str) for k in spec.entries()):
        return record_class(tuple(spec.entries()))
    return None


def _walk(spec):
    yield spec
    for child in spec.children():
        yield from _walk(child)


def decompose(flat: str, levels, names: Names) -> list[str]:
    """Index of each level of ``levels`` from the collapsed index ``flat`` (last level fastest)."""
    if not levels:
        return []
    lines = [f"rem = {flat}"]
    for lv in reversed(levels[1:]):
        size = f"uint64({names.sizes[lv]})"
        lines += [f"i{lv} = rem % {size}", f"rem = rem // {size}"]
    lines.append(f"i{levels[0]} = rem")
    return lines


def leaf_expr(leaf, name: str, zero_d: str = "index") -> str:
    """The lane's view of input leaf ``name``: sliced at the mapped levels' indices.

    ``zero_d``: how a 0-d array reaches the lane: ``"index"`` (``a[()]``, CPU) or
    ``"value"`` (the backend passes its value already, CUDA)."""
    if not leaf.is_array:
        return name
    if leaf.ndim == 0:
        return _element(leaf, f"{name}[()]" if zero_d == "index" else name)
    index = [":"] * leaf.ndim
    for lv, axis in enumerate(leaf.axes):
        if axis is not None:
            index[axis] = f"i{lv}"
    if all(i == ":" for i in index):
        return name
    while index and index[-1] == ":":  # x[i, :] and x[i] are the same view
        index.pop()
    view = f"{name}[{', '.join(index)}]"
    if leaf.unit_rows and zero_d == "index":  # the CPU: contiguous rows of an 'A' array, typed so
        return f"as_contiguous({view})"
    return view if leaf.lane_ndim else _element(leaf, view)


def _element(leaf, expr: str) -> str:
    """A scalar element as the lane receives it (``Leaf.element_dtype``)."""
    return expr if leaf.element_dtype == leaf.dtype else f"{leaf.element_dtype.name}({expr})"


def tree_expr(spec, leaves, classes) -> str:
    """Source that rebuilds an argument of pytree structure ``spec`` from leaf expressions."""
    if spec.is_leaf():
        return next(leaves)
    kind = spec.kind
    children = [tree_expr(c, leaves, classes) for c in spec.children()]
    if kind == optree.PyTreeKind.NONE:
        return "None"
    if kind in (optree.PyTreeKind.TUPLE, optree.PyTreeKind.LIST):
        # Lists reach the lane as tuples: Numba has no allocation-free list.
        return "(" + ", ".join(children) + ("," if len(children) == 1 else "") + ")"
    if class_of(spec) is not None:  # namedtuple, or a dict as a record (lane.records)
        return f"{classes[class_of(spec)]}({', '.join(children)})"
    if kind in _DICTS:
        items = ", ".join(f"{k!r}: {c}" for k, c in zip(spec.entries(), children, strict=True))
        return "{" + items + "}"
    raise LaneTypeError(f"lanewise cannot pass a {spec.type.__name__} to a compiled lane; "
                        "use tuples, lists, dicts or namedtuples")


def call_arguments(sig: Signature, names: Names, zero_d: str = "index") -> list[tuple[str | None, str]]:
    """``(keyword or None, source)`` of each argument of the lane call."""
    exprs = [leaf_expr(leaf, name, zero_d) for leaf, name in zip(sig.leaves, names.leaves, strict=True)]
    classes = {cls: name for name, cls in injected_names(sig).items()}
    out = []
    for param in sig.params:
        count = param.tree.num_leaves
        out.append((param.keyword, tree_expr(param.tree, iter(exprs[param.first_leaf:param.first_leaf + count]),
                                             classes)))
    return out


def lane_call(program: Program, names: Names, fn: str = "lane", kwargs=()) -> str:
    """The call of the lane (or of ``fn``, a rewrite of it with the same parameters and
    ``kwargs`` more), keywords as keywords, past :data:`CALL_LIMIT` arguments the
    tail by keyword too (:func:`call`)."""
    pairs = call_arguments(program.signature, names)
    args = [text for keyword, text in pairs if keyword is None]
    keywords = [(keyword, text) for keyword, text in pairs if keyword is not None]
    return call(fn, args, keyword_names(program.lane), keywords + list(kwargs))


def keyword_names(fn) -> list[str | None]:
    """The name of each positional parameter of ``fn``, None for one that cannot be
    passed by keyword (positional-only); empty where ``fn`` has no signature, and up
    to its ``*args`` (what those take cannot be passed by keyword either)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    out: list[str | None] = []
    for p in params:
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            break
        out.append(p.name if p.kind == p.POSITIONAL_OR_KEYWORD else None)
    return out


def out_index(out, fill: str = ":", scalar: str = "()") -> str:
    """The output slice of the current lane: ``fill`` for the lane's own dimensions
    (a whole per-lane array on the CPU; element 0 of a 1-element array on CUDA)."""
    index = [fill] * out.ndim
    for lv, dim in enumerate(out.level_dims):
        if dim is not None:
            index[dim] = f"i{lv}"
    return ", ".join(index) if index else scalar


def guarded_store(out, oname: str, value: str, fill: str = ":", scalar: str = "()") -> list[str]:
    """``oname[index] = value``, written by the first lane only along unmapped levels
    (out_axes=None: every lane computes the same value, one of them stores it).  A
    per-lane array (``fill`` ":") is copied element by element: the caller has
    checked its shape."""
    target = f"{oname}[{out_index(out, fill, scalar)}]"
    store = element_copy(target, value, out.lane_ndim) if out.lane_ndim and fill == ":" else [f"{target} = {value}"]
    guard = [f"i{lv} == 0" for lv, dim in enumerate(out.level_dims) if dim is None]
    return [f"if {' and '.join(guard)}:", *("    " + s for s in store)] if guard else store


def element_copy(target: str, value: str, ndim: int) -> list[str]:
    """Source for ``target = value`` (arrays of one shape, ``ndim`` dimensions) as loops.
    Numba's slice assignment checks shapes with a formatted error message whose
    string code took 3 s to compile, in every process, for every lane that
    returns an array.

    Example:
        >>> for line in element_copy("o[i0, :]", "v", 1):
        ...     print(line)
        _lw_slot = o[i0, :]
        for _lw_k0 in range(_lw_slot.shape[0]):
            _lw_slot[_lw_k0] = v[_lw_k0]
    """
    index = ", ".join(f"_lw_k{d}" for d in range(ndim))
    loops = ["    " * d + f"for _lw_k{d} in range(_lw_slot.shape[{d}]):" for d in range(ndim)]
    return [f"_lw_slot = {target}", *loops, "    " * ndim + f"_lw_slot[{index}] = {value}[{index}]"]


def block_loop(count: str) -> list[str]:
    """A parallel kernel's loop over blocks ``b`` in [0, count), as source lines: each
    thread takes the next block from the shared counter ``taken[0]`` (zero at the
    launch) until none is left or ``stop[0]`` is set (Ctrl-C).  ``prange`` alone gives
    each thread a fixed share of the blocks, however uneven their lanes
    (:mod:`lanewise.runtime.counter`).  The loop's body follows, indented by 12 spaces."""
    return ["    for _lw_thread in prange(thread_count()):",
            "        while True:",
            "            b = fetch_add(taken, 1)",
            f"            if b >= {count} or stopped(stop):",
            "                break"]


def unit_loop(var: str, first: str = "first", last: str = "last") -> list[str]:
    """A host kernel's loop over its units ``var`` (blocks, or a segmented reduction's
    slots), as source lines at one indent; the body follows at two.

    With a one-element ``stop`` the units are [first, last).  A shared run's longer
    ``stop`` (:data:`lanewise.runtime.counter.SHARED_SLOTS`) makes every thread's one call
    take guided chunks of [0, last) from a shared counter until none is left, so a
    parallel run costs one call through Python per thread, not one per chunk (with 13
    threads the per-chunk calls, serialised on the GIL, had capped a 20 ms kernel at
    7 ms).  ``at[3]`` holds the end of the chunk running, for a host that resumes a
    chunk after a lane's failure.  Returns -1 when done, -2 when ``stop[0]`` is set
    (Ctrl-C) before a unit."""
    return [f"    {var} = {first}",
            f"    _lw_end = {last}",
            "    _lw_shared = stop.shape[0] > 1",
            "    if _lw_shared:",
            f"        _lw_end = {first}",
            "    while True:",
            f"        if {var} >= _lw_end:",
            "            if not _lw_shared:",
            "                return -1",
            f"            {var}, _lw_end = take_chunk(stop, {last})",
            "            at[3] = _lw_end",
            f"            if {var} >= _lw_end:",
            "                return -1",
            "        if stopped(stop):",
            "            return -2"]


def borrow_lines(program: Program, names: Names, *arrays: str) -> list[str]:
    """A kernel body's first lines: its array arguments (the program's array
    leaves, then ``arrays``) with their reference counts detached
    (:mod:`lanewise.runtime.borrow`), so no lane does an atomic increment on
    memory the caller holds anyway."""
    leaves = [n for leaf, n in zip(program.signature.leaves, names.leaves, strict=True) if leaf.is_array]
    return [f"    {a} = borrowed({a})" for a in (*leaves, *arrays)]
