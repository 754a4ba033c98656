"""Render a map-reduce (``lw.reduce``) as a Numba module for the CPU.

Loop structure: the *kept* levels (not reduced) are collapsed into one index
``k``; the *reduced* levels into one flat lane index ``r`` cut into chunks.  A
block is one ``(k, chunk)``: it walks its lanes with an odometer over the
reduced levels (contiguous runs of the innermost one, no division per lane),
folds each lane's value into accumulators, and stores one partial.  The host
combines partials in a fixed order (backends.cpu_reduce).

Two folds.  A single running accumulator is a loop-carried dependency: LLVM may
not reorder floating-point folds, so the lane loop stays scalar (and libm beats
vector math there).  For the built-in commutative ops (sum, prod, mean, min,
max, any, all) the block instead evaluates ``TILE`` lanes into a small buffer —
the same store loop as ``lw.vmap``, which LLVM vectorises — then folds the
buffer into ``U`` interleaved accumulators (lane ``t`` of a tile into slot
``t % U``) and combines the slots pairwise at the end.  Which lane lands in
which slot depends only on the block's lane range, so results stay bitwise
independent of the thread count; ``U`` partial sums also make the sum more
accurate than one running sum.  ``argmin``/``argmax`` fill tiles the same way
(so their lanes vectorise too) and fold each tile in lane order into a running
(value, index) pair: the first index wins ties, as NumPy's.  ``lw.Monoid``
(associative, not necessarily commutative) keeps the running fold over lanes.


Example:
    >>> import numpy as np, lanewise as lw
    >>> r = lw.reduce(lw.vmap(lambda x: x * x), "sum")
    >>> float(r(np.arange(4.0)))
    14.0
"""

from __future__ import annotations

from ..plan.program import Program
from ..plan.reduction import OPS, ReduceSpec
from .common import (JIT, Names, block_loop, borrow_lines, caught, decompose, jit_inlining, lane_call, own_call,
                     unit_loop)
from .cpu import header, spmd_groups


#: Lanes evaluated into the buffer per tile (L1-resident: 2 KiB of float64).
TILE = 256
#: Interleaved accumulators (one AVX-512 vector of float64; latency hiding elsewhere).
U = 8


def render(program: Program, spec: ReduceSpec, track: bool = True, spmd=None) -> str:
    """The module source: ``rblock``, ``rkernel_blocks`` (what ``lw.reduce`` runs, on one
    thread or from several: :mod:`lanewise.runtime.pool`), ``rblock_caught``, and
    ``rkernel`` (``prange``) and ``rkernel_serial`` for compiled callers (the XLA
    handler, Dask) (+ ``rfinish``).

    As in :mod:`lanewise.codegen.cpu`, no function but ``rblock_caught`` has a
    ``try`` (Numba compiles one 0.2-1 s slower): a lane's exception propagates, and
    ``at`` says where — at[0] the lane (``track``: recorded per lane; else the
    block's first lane), at[1] its ``err`` slot, at[2] the unit that was running.

    ``spmd``: a :class:`lanewise.spmd.Plan` for a tiled fold; ``rtile`` then fills
    its buffers W lanes at a time through the W-wide lane ``lane_spmd``."""
    names = Names.of(program)
    head = header(program, spec.kept + spec.reduced).replace(
        "# loop order:", f"# reduce {spec.op} over levels {list(spec.reduced)}; loop order:")
    if spmd is not None:
        block = "\n\n".join([spmd.source, _tiled_block(program, spec, names, track, spmd)])
    else:
        block = (_tiled_block if spec.tiled else _block)(program, spec, names, track)
    parts = [head, block, _kernel_blocks(program, spec, names),
             _rblock_caught(program, spec, names),
             _kernel(program, spec, names, True), _kernel(program, spec, names, False)]
    if spec.op == "monoid":
        parts.append(render_finish())
    return "\n\n".join(parts) + "\n"


def partial_names(program: Program, spec: ReduceSpec) -> list[str]:
    """Kernel parameters for the partials: p0 (and q0 for argmin/argmax indices), ..."""
    names = []
    for m in _folded(program, spec):
        names += [f"p{m}", f"q{m}"] if spec.indexed else [f"p{m}"]
    return names


def _folded(program: Program, spec: ReduceSpec) -> range:
    """The outputs folded into accumulators (not a segmented reduction's segment)."""
    return range(int(spec.segmented), len(program.outputs))


def _params(program, spec, names: Names, *extra) -> str:
    return ", ".join(_param_list(program, spec, names, *extra))


def _param_list(program, spec, names: Names, *extra) -> list[str]:
    """The parameters of ``rblock`` and the kernels (``extra`` last)."""
    strides = [f"st{lv}" for lv in spec.reduced] if spec.indexed else []
    shapes = [f"sh{m}" for m, nd in enumerate(spec.lane_ndims) if nd]  # lane 0's array shapes
    count = ["nseg"] if spec.segmented else []
    return [*names.leaves, *partial_names(program, spec), *names.sizes, *strides, *shapes, *count, *extra]


def _call(fn: str, program, spec, names: Names, *extra, values=()) -> str:
    """The call of ``rblock`` or ``rblock_caught`` (``values``: as :func:`.common.own_call`)."""
    return own_call(fn, _param_list(program, spec, names, *extra), values)


def _prologue(program: Program, spec: ReduceSpec, names: Names) -> list[str]:
    """``rblock``'s signature and the start indices of its lane range."""
    lines = [f"@{jit_inlining(program)}",
             f"def rblock({_params(program, spec, names, 'k', 'b', 'lo', 'hi', 'at')}):",
             '    """Fold reduced lanes [lo, hi) at kept index k into partial b."""',
             "    c = uint64(lo)"]
    lines += ["    " + s for s in decompose("uint64(k)", list(spec.kept), names)]
    return lines + ["    " + s for s in decompose("c", list(spec.reduced), names)]


def _block(program: Program, spec: ReduceSpec, names: Names, track: bool) -> str:
    inner = spec.reduced[-1] if spec.reduced else None
    lines = _prologue(program, spec, names)
    lines += ["    " + s for s in _init(program, spec)]
    lines += ["    pos = uint64(lo)", "    end = uint64(hi)", "    while pos < end:"]
    if inner is None:  # nothing reduced: one lane per kept index
        body = ["        at[0] = pos"] if track else []
        body += ["        " + s for s in _fold(program, spec, names)]
        lines += body + ["        pos += uint64(1)"]
    else:
        n_inner = f"uint64({names.sizes[inner]})"
        lines += [f"        start = i{inner}",
                  f"        stop = min({n_inner}, start + (end - pos))",
                  f"        for i{inner} in range(start, stop):"]
        lines += [f"            at[0] = pos + (i{inner} - start)"] if track else []
        lines += ["            " + s for s in _fold(program, spec, names)]
        lines += ["        pos += stop - start", f"        i{inner} = uint64(0)"]
        lines += ["        " + s for s in _carry(spec.reduced[:-1], names)]
    lines += ["    " + s for s in _store(program, spec)]
    return "\n".join(lines)


def _tiled_block(program: Program, spec: ReduceSpec, names: Names, track: bool, spmd=None) -> str:
    """``rtile`` and ``rblock`` for the commutative built-in ops (module docstring).

    The lanes live in their own function: an inlined lane's many blocks next to
    the slot variables would overflow Numba's recursive SSA pass."""
    outs = range(len(program.outputs))
    inner = spec.reduced[-1] if spec.reduced else None
    tile = _tile_fn(program, names, inner, track) if spmd is None else _tile_fn_spmd(program, names, inner, spmd)
    lines = [tile, "", ""] + _prologue(program, spec, names)
    lines += [f"    buf{m} = np.empty({TILE}, BT{m})" for m in outs]
    if spec.indexed:  # a running (value, index) pair per output: the first index wins ties
        lines += ["    " + s for s in _init(program, spec)]
    else:
        lines += [f"    a{m}_{j} = ID{m}" for m in outs for j in range(U)]
    lines += ["    pos = uint64(lo)", "    end = uint64(hi)", "    while pos < end:"]
    if inner is None:  # nothing reduced: one lane per kept index
        lines += ["        start = uint64(0)", "        n = uint64(1)"]
    else:
        lines += [f"        start = i{inner}",
                  f"        n = min(uint64({names.sizes[inner]}) - start, end - pos, uint64({TILE}))"]
    lines += [f"        {own_call('rtile', _tile_params(program, names, inner))}"]
    fold = _fold_tile_indexed(program, spec, inner) if spec.indexed else _fold_tile(program, spec)
    lines += ["        " + s for s in fold]
    lines.append("        pos += n")
    if inner is not None:
        lines += [f"        i{inner} = start + n", f"        if i{inner} == uint64({names.sizes[inner]}):",
                  f"            i{inner} = uint64(0)"]
        lines += ["            " + s for s in _carry(spec.reduced[:-1], names)]
    lines += ["    " + s for s in (_store(program, spec) if spec.indexed else _combine_slots(program, spec))]
    return "\n".join(lines)


def _tile_args(program: Program, names: Names, inner) -> str:
    return ", ".join(_tile_params(program, names, inner))


def _tile_params(program: Program, names: Names, inner) -> list[str]:
    """``rtile``'s parameters: inputs, sizes, the fixed indices, the run and the buffers."""
    fixed = [f"i{lv}" for lv in range(len(names.sizes)) if lv != inner]
    bufs = [f"buf{m}" for m in range(len(program.outputs))]
    return [*names.leaves, *names.sizes, *fixed, "start", "n", "pos", *bufs, "at"]


def _tile_fn(program: Program, names: Names, inner, track: bool) -> str:
    lines = [f"@{jit_inlining(program)}", f"def rtile({_tile_args(program, names, inner)}):",
             '    """Lanes start..start+n of the innermost reduced level into the buffers."""']
    if inner is None:
        lines += ["    at[0] = pos"] if track else []
        lines += ["    " + s for s in _buffer_lane(program, names, "0")]
    else:
        lines += [f"    for i{inner} in range(start, start + n):"]
        lines += [f"        at[0] = pos + (i{inner} - start)"] if track else []
        lines += ["        " + s for s in _buffer_lane(program, names, f"i{inner} - start")]
    return "\n".join(lines)


def _tile_fn_spmd(program: Program, names: Names, inner, plan) -> str:
    """``rtile`` on the SPMD path: the run's lanes W at a time (:func:`.cpu.spmd_groups`)."""
    lines = ["@" + JIT.format(""), f"def rtile({_tile_args(program, names, inner)}):",
             f'    """Lanes start..start+n of the innermost reduced level into the buffers, {plan.width} at a '
             'time (SPMD on SIMD)."""']
    stores = [f"buf{m}[_lw_g - start + _lw_w] = _lw_r{m}[_lw_w]" for m in range(len(program.outputs))]
    lines += ["    " + line for line in spmd_groups(program, names, plan, inner, "start", "start + n",
                                                     "at[0] = pos + (_lw_g - start)", stores)]
    return "\n".join(lines)


def _buffer_lane(program: Program, names: Names, slot: str) -> list[str]:
    lines = [f"r = {lane_call(program, names)}"]
    for m, out in enumerate(program.outputs):
        lines.append(f"buf{m}[{slot}] = r" + "".join(f"[{i}]" for i in out.path))
    return lines


def _fold_tile(program: Program, spec: ReduceSpec) -> list[str]:
    """Buffer lane t into slot t % U; a partial last group is padded with the
    identity (one loop, no per-slot tail branches)."""
    fold = OPS[spec.op].fold
    outs = range(len(program.outputs))
    lines = [f"whole = (n + uint64({U - 1})) // uint64({U}) * uint64({U})",
             "for t in range(n, whole):"]
    lines += [f"    buf{m}[t] = IDB{m}" for m in outs]
    lines.append(f"for t in range(uint64(0), whole, uint64({U})):")
    for m in outs:
        lines += [f"    a{m}_{j} = {fold.format(a=f'a{m}_{j}', v=f'buf{m}[t + uint64({j})]')}" for j in range(U)]
    return lines


def _fold_tile_indexed(program: Program, spec: ReduceSpec, inner) -> list[str]:
    """argmin/argmax: buffer lanes in lane order into the running pairs; a lane's flat
    index is the outer reduced levels' part plus its position on the innermost."""
    outer = " + ".join(f"i{lv} * uint64(st{lv})" for lv in spec.reduced if lv != inner) or "uint64(0)"
    step = f"uint64(st{inner})" if inner is not None else "uint64(0)"
    lines = [f"base = int64({outer})", "for t in range(uint64(0), n):", f"    idx = base + int64((start + t) * {step})"]
    for m in range(len(program.outputs)):
        lines += ["    " + line for line in _take_if_better(spec, m, f"buf{m}[t]")]
    return lines


def _take_if_better(spec: ReduceSpec, m: int, value: str) -> list[str]:
    """argmin/argmax: lane value ``value`` at index ``idx`` into output m's running pair.
    A block's first lane is always taken: a value equal to the identity (all -inf, an
    all-False mask, uint 0) must still give its index, as NumPy does."""
    cond = OPS[spec.op].fold.format(a=f"acc{m}", v=f"v{m}")
    return [f"v{m} = {value}", f"if at{m} < 0 or {cond}:", f"    acc{m} = v{m}", f"    at{m} = idx"]


def _combine_slots(program: Program, spec: ReduceSpec) -> list[str]:
    """Slots combined pairwise in a fixed tree: ((0 1)(2 3))((4 5)(6 7)); store the partial."""
    fold = OPS[spec.op].fold
    lines = []
    for m in range(len(program.outputs)):
        level = [f"a{m}_{j}" for j in range(U)]
        depth = 0
        while len(level) > 1:
            nxt = []
            for i in range(0, len(level), 2):
                name = f"c{m}_{depth}_{i // 2}"
                lines.append(f"{name} = {fold.format(a=level[i], v=level[i + 1])}")
                nxt.append(name)
            level, depth = nxt, depth + 1
        lines.append(f"p{m}[b] = {level[0]}")
    return lines


def _init(program, spec) -> list[str]:
    if spec.arrays:  # accumulate into the block's row of partials (filled with the identity)
        return [f"acc{m} = p{m}[b]" for m in _folded(program, spec)] + (
            [f"at{m} = q{m}[b]" for m in _folded(program, spec)] if spec.indexed else [])
    lines = []
    for m in range(len(program.outputs)):
        lines.append(f"acc{m} = ID{m}")
        if spec.indexed:
            lines.append(f"at{m} = int64(-1)")
    return lines


def _fold(program: Program, spec: ReduceSpec, names: Names) -> list[str]:
    lines = [f"r = {lane_call(program, names)}"]
    if spec.indexed:
        flat = " + ".join(f"i{lv} * uint64(st{lv})" for lv in spec.reduced) or "uint64(0)"
        lines.append(f"idx = int64({flat})")
    if spec.segmented:  # the lane names its segment; the host reports one out of range
        segment = "r" + "".join(f"[{i}]" for i in program.outputs[0].path)
        lines += [f"g = int64({segment})", "if g < 0 or g >= nseg:", "    raise IndexError('segment out of range')"]
    for m, out in enumerate(program.outputs):
        value = "r" + "".join(f"[{i}]" for i in out.path)
        if spec.segmented and m == 0:
            continue
        if spec.arrays:
            lines += _fold_elements(spec, m, value, "g" if spec.segmented else "")
        elif spec.op == "monoid":
            lines.append(f"acc{m} = combine(acc{m}, {value})")
        elif spec.indexed:
            lines += _take_if_better(spec, m, value)
        else:
            lines += [f"v{m} = {value}", f"acc{m} = {OPS[spec.op].fold.format(a=f'acc{m}', v=f'v{m}')}"]
    return lines


def _fold_elements(spec: ReduceSpec, m: int, value: str, segment: str) -> list[str]:
    """Fold output ``m``'s lane value into the array accumulator ``acc{m}``, element by
    element (a scalar into element 0), at ``segment``'s elements when segmented.  A
    lane whose array has another shape than lane 0's fails here; the host replays it
    and reports the shape."""
    if not spec.lane_ndims[m]:
        return [f"x{m} = {value}", *_fold_element(spec, m, segment or "0", f"x{m}")]
    at = f"{segment} * x{m}.size + q" if segment else "q"
    return [f"v{m} = {value}", f"if v{m}.shape != sh{m}:", "    raise ValueError('per-lane array shape changed')",
            f"x{m} = v{m}.ravel()", f"for q in range(x{m}.size):",
            *("    " + s for s in _fold_element(spec, m, at, f"x{m}[q]"))]


def _fold_element(spec: ReduceSpec, m: int, q: str, element: str) -> list[str]:
    acc = f"acc{m}[{q}]"
    if spec.op == "monoid":
        return [f"{acc} = combine({acc}, {element})"]
    if spec.indexed:  # a block's first lane is always taken (as in _fold)
        cond = OPS[spec.op].fold.format(a=acc, v="e")
        return [f"e = {element}", f"if at{m}[{q}] < 0 or {cond}:", f"    {acc} = e", f"    at{m}[{q}] = idx"]
    return [f"e = {element}", f"{acc} = {OPS[spec.op].fold.format(a=acc, v='e')}"]


def _carry(outer_reduced, names: Names) -> list[str]:
    """Advance the odometer of the outer reduced levels by one (innermost wrapped)."""
    lines, indent = [], ""
    for lv in reversed(outer_reduced):
        lines += [f"{indent}i{lv} += uint64(1)", f"{indent}if i{lv} == uint64({names.sizes[lv]}):",
                  f"{indent}    i{lv} = uint64(0)"]
        indent += "    "
    return lines


def _store(program, spec) -> list[str]:
    if spec.arrays:  # the accumulators are the partials' rows
        return []
    lines = []
    for m in range(len(program.outputs)):
        lines.append(f"p{m}[b] = acc{m}")
        if spec.indexed:
            lines.append(f"q{m}[b] = at{m}")
    return lines


def _kernel(program: Program, spec: ReduceSpec, names: Names, parallel: bool) -> str:
    if spec.segmented:
        return _slot_kernel(program, spec, names, parallel)
    kept = " * ".join(names.sizes[lv] for lv in spec.kept) or "1"
    body = ["k = b // nchunks", "lo = (b - k * nchunks) * chunk", "hi = min(lo + chunk, nred)",
            f"e = {_call('rblock_caught', program, spec, names, 'k', 'b', 'lo', 'hi')}", "if e >= 0:",
            "    err[b] = e"]
    doc = '    """Every (kept index, chunk) block; partial b = k * nchunks + chunk; err[b] = failed lane."""'
    if parallel:  # the threads take the blocks one at a time; stop[0] != 0 (Ctrl-C) skips the rest
        return "\n".join([
            f"@{JIT.format(', parallel=True')}",
            f"def rkernel({_params(program, spec, names, 'nchunks', 'chunk', 'nred', 'err', 'stop', 'taken')}):",
            doc, "    # taken[0]: the next block to take (0 at the call)",
            *block_loop(f"({kept}) * nchunks"), *("            " + line for line in body)])
    return "\n".join([
        f"@{JIT.format('')}",
        f"def rkernel_serial({_params(program, spec, names, 'nchunks', 'chunk', 'nred', 'err')}):", doc,
        f"    for b in range(({kept}) * nchunks):", *("        " + line for line in body)])


def _kernel_blocks(program: Program, spec: ReduceSpec, names: Names) -> str:
    """``rkernel_blocks``: units [first, last) on the calling thread, or chunks of a
    shared run (:func:`~lanewise.codegen.common.unit_loop`), a unit being a (kept
    index, chunk) block, or for a segmented reduction a slot (its chunks in order).
    Returns -1, or -2 when stop[0] != 0 (Ctrl-C) ended the call before a block (as
    ``kernel_blocks``); a lane's exception propagates, ``at`` saying where (the host
    records it in ``err`` and goes on with the next unit: backends.cpu.reduce.run_units)."""
    head = [f"@{JIT.format('')}"]
    borrow = borrow_lines(program, names, *partial_names(program, spec), "err", "at")
    units = ("nslots",) if spec.segmented else ()
    params = _params(program, spec, names, *units, "nchunks", "chunk", "nred", "err", "first", "last", "stop",
                     "at")
    if spec.segmented:
        slot_args = ("0", "s", "lo", "hi", "at")  # kept index 0, partial s
        return "\n".join([
            *head,
            f"def rkernel_blocks({params}):",
            '    """Slots [first, last), each folding chunks s, s + nslots, ... in order."""',
            *borrow,
            *unit_loop("s"),
            "        for c in range(s, nchunks, nslots):",
            "            if stopped(stop):",
            "                return -2",
            "            lo = c * chunk",
            "            hi = min(lo + chunk, nred)",
            "            at[0] = lo",
            "            at[1] = c",
            "            at[2] = s",
            f"            {_call('rblock', program, spec, names, 'k', 'b', 'lo', 'hi', 'at', values=slot_args)}",
            "        s += 1"])
    return "\n".join([
        *head,
        f"def rkernel_blocks({params}):",
        '    """Blocks [first, last) of (kept index, chunk); partial b = k * nchunks + chunk."""',
        *borrow,
        *unit_loop("b"),
        "        k = b // nchunks",
        "        lo = (b - k * nchunks) * chunk",
        "        hi = min(lo + chunk, nred)",
        "        at[0] = lo",
        "        at[1] = b",
        "        at[2] = b",
        f"        {_call('rblock', program, spec, names, 'k', 'b', 'lo', 'hi', 'at')}",
        "        b += 1"])


def _rblock_caught(program: Program, spec: ReduceSpec, names: Names) -> str:
    return caught("rblock", _param_list(program, spec, names, "k", "b", "lo", "hi"),
                  "rblock for a compiled caller: -1, or the lane that raised (or the block's first).")


def _slot_kernel(program: Program, spec: ReduceSpec, names: Names, parallel: bool) -> str:
    """A segmented reduction's kernel: ``nslots`` accumulators (rows of the partials),
    slot s folding chunks s, s + nslots, ... in order.  Which lane lands in which slot
    depends on the sizes only, so results are bitwise independent of the thread
    count, and memory is nslots x segments, not chunks x segments."""
    name, loop, opt = ("rkernel", "prange", ", parallel=True") if parallel else ("rkernel_serial", "range", "")
    stop = ["            if stopped(stop):", "                break"] if parallel else []
    stop_param = ["stop"] if parallel else []
    slot_args = ("0", "s", "lo", "hi")  # kept index 0, partial s
    return "\n".join([
        f"@{JIT.format(opt)}",
        f"def {name}({_params(program, spec, names, 'nslots', 'nchunks', 'chunk', 'nred', 'err', *stop_param)}):",
        '    """Every chunk, in slot chunk % nslots; err[chunk] = failed lane (a slot stops at its first)."""',
        f"    for s in {loop}(nslots):",
        "        for c in range(s, nchunks, nslots):",
        *stop,
        "            lo = c * chunk",
        "            hi = min(lo + chunk, nred)",
        f"            e = {_call('rblock_caught', program, spec, names, 'k', 'b', 'lo', 'hi', values=slot_args)}",
        "            if e >= 0:",
        "                err[c] = e",
        "                break",
    ])


def render_finish() -> str:
    """``rfinish(p, out)``: a Monoid's partials folded in order with ``combine`` (a global)."""
    return "\n".join([
        f"@{JIT.format('')}",
        "def rfinish(p, out):",
        '    """Combine a Monoid\'s partials in order: out[k] = p[k, 0] + p[k, 1] + ..."""',
        "    for k in range(p.shape[0]):",
        "        acc = p[k, 0]",
        "        for c in range(1, p.shape[1]):",
        "            acc = combine(acc, p[k, c])",
        "        out[k] = acc",
    ])
