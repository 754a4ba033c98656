"""``lane_stream``: the W-wide lane run over a whole range of lanes, a slot
refilled with the next lane as soon as its lane returns (see :func:`transform_stream`).

Example:
    >>> def halvings(x):
    ...     n = 0
    ...     while x > 1.0:
    ...         x = x / 2
    ...         n += 1
    ...     return n
    >>> src = transform_stream(halvings, ("varying",), ("float64",), (((), "int64"),), 8, 2)
    >>> "_lw_store(_lw_ctx" in src and "m_from_bits(_lw_newbits, 8)" in src
    True
"""

from __future__ import annotations

from ..lane.ir import nodes as ir
from ..lane.ir.build import function_ir
from ..lane.ir.passes.walk import stored, walk
from .frames import Ctx
from .syntax import Unsupported, block_temps, split_at_loop
from .transform import defaults, finish, start


#: Name of the generated streaming function.
STREAM = "lane_stream"


def transform_stream(fn, params, varying_dtypes, results, width: int, refill: int,
                     vector_math: bool | None = None) -> str:
    """Source of ``lane_stream``: the W-wide lane run over a whole range of lanes,
    refilling slots as lanes finish.

    For lanes of the form ``prologue; while ...: body; epilogue`` (prologue and
    epilogue without loops, the epilogue ending in ``return``) — every lane with
    one top-level loop, ``for`` included.  Without refills a group of W lanes
    lasts as long as its slowest lane; here a slot whose lane has finished takes
    the next lane as soon as ``refill`` slots are free (or the loop is empty), so
    the vector stays full on workloads whose lanes' trip counts vary a lot.

    The function is ``lane_stream(ctx, lo, hi, *uniform args)``; it calls the
    kernel module's ``_lw_load(ctx, i) -> (varying args of lane i,)`` and
    ``_lw_store(ctx, i, *results)``.  ``varying_dtypes``: NumPy dtype names of
    the varying parameters, in order.
    """
    em, function, names, frame = start(fn, params, width, vector_math)
    assigned = stream_shape(fn)
    # the same statements in the emitter's desugared IR (a for loop is a while loop
    # there, after the statements that start its counter)
    prologue, loop, epilogue = split_at_loop(function.body)
    w = width
    varying = [k for k, kind in enumerate(params) if kind == "varying"]
    # a uniform or defaulted parameter the lane assigns to differs between slots:
    # a new lane starts again from the argument
    restart = [k for k, (n, kind) in enumerate(zip(names, params, strict=True))
               if kind != "varying" and n in assigned]
    uniform = [f"_lw_u{k}" if k in restart else frame.name(n)
               for k, (n, kind) in enumerate(zip(names, params)) if kind == "uniform"]
    head = [f"    _lw_idx = stack_empty({w}, np.int64)",
            *[f"    _lw_b{k} = stack_empty({w}, np.{d})" for k, d in zip(varying, varying_dtypes)],
            *[f"    _lw_s{j} = stack_empty({w}, np.{d})" for j, (_, d) in enumerate(results)],
            f"    _lw_occ = m_const(False, {w})  # slots holding a lane",
            "    _lw_alive = _lw_occ  # ... that has not returned",
            "    _lw_L = _lw_occ  # ... that is in the loop",
            "    _lw_next = _lw_lo",
            *[f"    {frame.name(names[k])} = v_undef()" for k in varying + restart]]
    for line in defaults(em, fn, function, names, params, frame):
        local, value = line.strip().split(" = ", 1)
        k = names.index(local[len(frame.prefix):])
        head.append(f"    _lw_u{k} = {value}" if k in restart else line)
    # Schedule: every iteration tests the loop condition; when a quarter of the
    # slots are out of the loop (or all are), the lanes that left it run the
    # epilogue, finished lanes store their results, free slots take new lanes
    # (their prologue) and the condition is tested again.
    em.emit("while True:")
    em.indent += 1
    loop_ctx = Ctx(("_lw_alive", "_lw_L"), False, frozenset(), None, frame)
    test = em.value(loop.cond, loop_ctx, at=loop.loc)
    em.emit(f"_lw_L = m_and(_lw_L, m_truth({test}))")
    em.emit(f"if m_count(_lw_L) <= {w - refill} or not m_any(_lw_L):")
    em.indent += 1
    em.emit("_lw_left = m_andnot(_lw_alive, _lw_L)  # left the loop: the epilogue")
    em.emit("if m_any(_lw_left):")
    em.indent += 1
    first = len(em.inlined)
    em.block(epilogue, Ctx(("_lw_alive", "_lw_left"), False, block_temps(epilogue, frame.counts), None, frame))
    outside = em.inlined[first:]
    em.indent -= 1
    done_at = len(em.lines)  # the result slots are known once the whole lane is emitted
    em.emit("if _lw_next < _lw_hi:")
    em.indent += 1
    em.emit("_lw_newbits = np.uint64(0)  # free slots take the next lanes")
    em.emit("_lw_occbits = m_bits(_lw_occ)")
    em.emit(f"for _lw_w in range({w}):")
    em.emit("    if _lw_next < _lw_hi and not (_lw_occbits >> np.uint64(_lw_w)) & np.uint64(1):")
    em.emit("        _lw_idx[_lw_w] = _lw_next")
    if varying:
        em.emit("        _lw_x = _lw_load(_lw_ctx, _lw_next)")
        for j, k in enumerate(varying):
            em.emit(f"        _lw_b{k}[_lw_w] = _lw_x[{j}]")
    em.emit("        _lw_next += 1")
    em.emit("        _lw_newbits |= np.uint64(1) << np.uint64(_lw_w)")
    em.emit(f"_lw_new = m_from_bits(_lw_newbits, {w})")
    for k in varying:
        local = frame.name(names[k])
        em.emit(f"{local} = v_select(_lw_new, vload(_lw_b{k}, {w}), {local})")
    for k in restart:
        local = frame.name(names[k])
        em.emit(f"{local} = v_select(_lw_new, _lw_u{k}, {local})")
    em.emit("_lw_occ = m_or(_lw_occ, _lw_new)")
    em.emit("_lw_alive = m_or(_lw_alive, _lw_new)")
    first = len(em.inlined)
    # other slots hold lanes in flight: every store of the prologue is masked
    em.block(prologue, Ctx(("_lw_alive", "_lw_new"), False, block_temps(prologue, frame.counts), None, frame,
                           private_plain=False))
    outside += em.inlined[first:]
    em.emit("_lw_L = m_or(_lw_L, _lw_new)  # the new lanes that did not return yet")
    em.emit("continue  # test the loop condition of the new lanes")
    em.indent -= 1
    em.emit("if not m_any(_lw_L):")
    em.emit("    break")
    em.indent -= 1
    em.emit("_lw_B = _lw_L")
    em.block(loop.body, Ctx(("_lw_alive", "_lw_L", "_lw_B"), False, block_temps(loop.body, frame.counts),
                            (1, 2), frame))
    if any(_loops(f) for f in outside):
        raise Unsupported("streaming needs a prologue and epilogue without looping helpers")
    slots, inits, decls = finish(frame, results, names)
    pad = "    " * 3
    done = [pad + "_lw_done = m_andnot(_lw_occ, _lw_alive)  # returned: store, free the slot",
            pad + "if m_any(_lw_done):",
            *[pad + f"    vstore(_lw_s{j}, {slot})" for j, slot in enumerate(slots)],
            pad + "    _lw_bits = m_bits(_lw_done)",
            pad + f"    for _lw_w in range({w}):",
            pad + "        if (_lw_bits >> np.uint64(_lw_w)) & np.uint64(1):",
            pad + "            _lw_store(_lw_ctx, _lw_idx[_lw_w]"
            + "".join(f", _lw_s{j}[_lw_w]" for j in range(len(slots))) + ")",
            pad + "    _lw_occ = m_andnot(_lw_occ, _lw_done)"]
    em.lines[done_at:done_at] = done
    lines = [f"def {STREAM}({', '.join(['_lw_ctx', '_lw_lo', '_lw_hi'] + uniform)}):",
             f'    """{fn.__qualname__} over lanes [lo, hi), {w} slots refilled as lanes finish (SPMD on SIMD)."""',
             *head, *inits, *decls, *em.lines]
    return "\n".join(lines) + "\n"


def stream_shape(fn) -> set:
    """The names ``fn`` assigns, when it has the streamed shape: ``prologue; loop;
    epilogue`` with one top-level loop (``while``, or ``for`` over a range), no loop
    in the prologue or epilogue, and a ``return`` ending the epilogue; else
    :class:`.Unsupported` says what is missing.  Read from the lane IR.

    Example:
        >>> def sqrt(a, tol=1e-12):
        ...     r = a
        ...     for k in range(60):
        ...         r = 0.5 * (r + a / r)
        ...     return r if abs(r * r - a) < tol else -1.0
        >>> sorted(stream_shape(sqrt))
        ['k', 'r']
    """
    lane = _source_ir(fn)
    body = lane.body
    loops = [k for k, st in enumerate(body) if isinstance(st, ir.Loop)]
    if len(loops) != 1:
        raise Unsupported("streaming needs exactly one top-level loop")
    prologue, epilogue = body[:loops[0]], body[loops[0] + 1:]
    if any(isinstance(n, ir.Loop) for n in walk(prologue + epilogue)):
        raise Unsupported("streaming needs a prologue and epilogue without loops")
    if not epilogue or not (isinstance(epilogue[-1], ir.Exit) and epilogue[-1].kind == "return"):
        raise Unsupported("streaming needs the lane to end with a return after its loop")
    return stored(walk(body), defs=False)


def _loops(fn) -> bool:
    """Whether the helper ``fn`` has a loop."""
    return any(isinstance(n, ir.Loop) for n in walk(_source_ir(fn)))


def _source_ir(fn) -> ir.Function:
    """The memoised IR of ``fn``, read from its text (the code the emitter reads)."""
    function = function_ir(fn)
    if function.source != "source":
        raise Unsupported(f"the source of {fn.__qualname__} is not available, or is not the code "
                          "that runs (exec'd from a string, or edited since import)")
    return function
