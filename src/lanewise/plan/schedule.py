"""The loop-nest schedule: pure functions of a program and its sizes.

Two decisions.  *Structure* (compiled in): the loop order — levels ordered as
the axes of the first output, so the innermost loop walks its contiguous axis
and LLVM can vectorise it.  *Blocking* (a run-time value): the outer levels are
collapsed into one flat index and the innermost level is cut into blocks, so the
parallel loop has enough independent blocks whether there are 2 or 64 cores and
whether the outer levels are long or short.  Blocking depends on sizes only,
never on the thread count: results (and later, reductions) are the same on any
machine.

Example:
    >>> blocking((3, 100_000), (0, 1))
    Blocking(n_outer=3, n_inner=100000, inner_blocks=86, block=1163)
"""

from __future__ import annotations

from dataclasses import dataclass

from .program import Program

#: Aim for at least this many blocks (load balance up to ~64 threads)...
TARGET_BLOCKS = 256
#: ...but never cut the innermost loop below this many lanes (vector loop
#: efficiency and per-block overhead).
MIN_BLOCK = 1024


def loop_order(program: Program) -> tuple[int, ...]:
    """Levels, outermost loop first; the innermost is the first output's last level axis."""
    levels = range(len(program.signature.levels))
    if not program.outputs:
        return tuple(levels)
    dims = program.outputs[0].level_dims
    unplaced = [lv for lv in levels if dims[lv] is None]
    placed = sorted((lv for lv in levels if dims[lv] is not None), key=lambda lv: dims[lv])
    return tuple(unplaced + placed)


@dataclass(frozen=True)
class Blocking:
    """How the lane space is cut: ``n_outer * inner_blocks`` blocks of ``block`` lanes."""

    n_outer: int
    n_inner: int
    inner_blocks: int
    block: int

    @property
    def n_blocks(self) -> int:
        return self.n_outer * self.inner_blocks

    @property
    def n_lanes(self) -> int:
        return self.n_outer * self.n_inner


def blocking(sizes, order, lane_work: int = 1, group: int = 1) -> Blocking:
    """Cut the iteration space of ``sizes`` (looped in ``order``) into blocks.

    ``lane_work`` (elements one lane reads, see :func:`lane_work`) shrinks the
    minimum block: 2000 lanes that each scan a 5000-step row are 250 blocks,
    not two.
    """
    n_inner = sizes[order[-1]]
    n_outer = 1
    for level in order[:-1]:
        n_outer *= sizes[level]
    return reblocked(n_outer, n_inner, lane_work, group)


def reblocked(n_outer: int, n_inner: int, lane_work: int, group: int = 1) -> Blocking:
    """The blocks of an ``n_outer`` x ``n_inner`` lane space whose lanes each do
    ``lane_work`` units (elements read; or a measured cost in the same units).

    ``group``: lanes run ``group`` at a time (the SPMD path's W): a block is a
    whole number of groups, else every block ends in a part-empty group (heavy
    lanes cut into blocks of 8 ran in groups of 32 a quarter full: 2.2x slower).

    Example:
        >>> reblocked(1, 1000, 1).block, reblocked(1, 1000, 10_000).block, reblocked(1, 1000, 10_000, 32).block
        (1000, 4, 32)
    """
    wanted = -(-TARGET_BLOCKS // max(n_outer, 1))  # inner blocks per outer index
    smallest = max(1, MIN_BLOCK // max(lane_work, 1))
    block = max(smallest, -(-n_inner // wanted)) if wanted > 1 else n_inner
    block = -(-block // group) * group
    block = max(1, min(block, n_inner))
    return Blocking(n_outer, n_inner, -(-n_inner // block) if n_inner else 0, block)


#: A reduction block folds at most this many lanes sequentially before its
#: partial joins the pairwise combination: bounds rounding error and the work
#: of one block, while keeping the partials few (memory independent of n).
MAX_CHUNK = 1 << 18


@dataclass(frozen=True)
class ReduceBlocking:
    """A reduction's blocks: ``n_kept`` outputs x ``n_chunks`` chunks of ``chunk`` lanes."""

    n_kept: int
    n_reduced: int
    n_chunks: int
    chunk: int

    @property
    def n_blocks(self) -> int:
        return self.n_kept * self.n_chunks


def reduce_blocking(n_kept: int, n_reduced: int, lane_work: int = 1) -> ReduceBlocking:
    """Chunks of the reduced lane space; shapes only, so any thread count agrees.

    Example:
        >>> reduce_blocking(1, 10**6)
        ReduceBlocking(n_kept=1, n_reduced=1000000, n_chunks=256, chunk=3907)
    """
    wanted = -(-TARGET_BLOCKS // max(n_kept, 1))
    smallest = max(1, MIN_BLOCK // max(lane_work, 1))
    chunk = min(max(smallest, -(-n_reduced // wanted)), MAX_CHUNK, max(n_reduced, 1))
    return ReduceBlocking(n_kept, n_reduced, -(-n_reduced // chunk), chunk)


#: A segmented reduction folds into at most this many accumulators (slots): each
#: thread takes whole slots, so 16 slots kept 13 threads busy for two rounds (a
#: histogram of 3e6 values ran slower on 13 threads than on 4); sizes only, so any
#: thread count agrees.
SEGMENT_SLOTS = 64
#: ... and their memory stays under this many bytes (fewer slots when the
#: segments are many): 1e6 float64 segments get 8 slots.
SEGMENT_SLOT_BYTES = 64 << 20


def segment_slots(n_chunks: int, elements: int, itemsize: int) -> int:
    """How many slots a segmented reduction of ``n_chunks`` chunks into ``elements``
    accumulator elements (segments x value size) of ``itemsize`` bytes uses.

    Example:
        >>> segment_slots(256, 100, 8), segment_slots(256, 10**6, 8), segment_slots(3, 10, 8)
        (64, 8, 3)
    """
    fits = SEGMENT_SLOT_BYTES // max(elements * itemsize, 1)
    return max(1, min(n_chunks, SEGMENT_SLOTS, fits))


def lane_work(leaves, values, sizes, loops: bool = False) -> int:
    """Elements one lane can read through its mapped argument views (>= 1), and
    with ``loops`` (the lane loops) the arrays it is passed whole too: such a lane
    may walk them (a kernel density over every sample, an all-pairs energy), and
    10,000 lanes of 20,000 steps each cut into blocks of 1,024 lanes had kept only
    10 of 13 threads busy.

    Depends on shapes only, so blocking stays independent of the thread count.

    Example:
        >>> import numpy as np
        >>> from lanewise.plan.program import bind_call
        >>> import lanewise as lw
        >>> call = bind_call(lw.vmap(lambda r, t: r.sum() + t.sum(), in_axes=(0, None)),
        ...                  (np.ones((4, 100)), np.ones(50)), {})
        >>> lane_work(call.signature.leaves, call.values, call.sizes)
        101
        >>> lane_work(call.signature.leaves, call.values, call.sizes, loops=True)
        151
    """
    work = 1
    for leaf, value in zip(leaves, values, strict=True):
        if not leaf.is_array:
            continue
        if leaf.lane_ndim and any(a is not None for a in leaf.axes):
            lanes = 1
            for level, axis in enumerate(leaf.axes):
                if axis is not None:
                    lanes *= sizes[level]
            work += value.size // lanes if lanes else 0
        elif loops and all(a is None for a in leaf.axes):
            work += value.size
    return work


# ----------------------------------------------------------------------------- flat indices


def unravel(flat: int, shape) -> list[int]:
    """The C-order digits of ``flat`` in ``shape`` (last fastest).

    Example:
        >>> unravel(5, (2, 3))
        [1, 2]
    """
    out = []
    for n in reversed(shape):
        flat, i = divmod(flat, n)
        out.append(i)
    return out[::-1]


def ravel(index, shape) -> int:
    """The C-order flat position of ``index`` in ``shape`` (inverse of :func:`unravel`).

    Example:
        >>> ravel([1, 2], (2, 3))
        5
    """
    flat = 0
    for i, n in zip(index, shape, strict=True):
        flat = flat * n + i
    return flat


def lane_index(sizes, *parts) -> tuple[int, ...]:
    """A lane's index, one int per level, from ``(levels, flat)`` parts: each flat
    position is decoded over its levels (last fastest); other levels are 0.

    Every backend reports a failed lane as flat positions in its own loop order
    (a block and a lane, a kept and a reduced index); this is their one decoder.

    Example:
        >>> lane_index((2, 3, 4), ((0, 2), 5), ((1,), 2))
        (1, 2, 1)
    """
    index = [0] * len(sizes)
    for levels, flat in parts:
        for lv, i in zip(levels, unravel(flat, [sizes[lv] for lv in levels]), strict=True):
            index[lv] = i
    return tuple(index)
