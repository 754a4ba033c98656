"""A forward "surely bound" dataflow over basic blocks, to its fixed point.

Both checks of reads that may be unbound over code with jumps use it: the one over a
lane rebuilt from bytecode (its ``while True`` over basic blocks, :mod:`.unbound`) and
the one over the blocks Numba's frontend reads (:func:`lanewise.lane.fromcode.unbound_reads`).

Example:
    >>> jumps = {0: [(1, {"x"}), (2, {"x", "y"})], 1: [(2, {"x"})], 2: []}
    >>> states = fixed_point(0, frozenset(), lambda label, state: jumps[label])
    >>> sorted(states[2])
    ['x']
"""

from __future__ import annotations


def fixed_point(start, entry: frozenset, exits) -> dict:
    """What is surely bound on entry to each block reached from ``start`` (entered with
    ``entry``): ``exits(label, state)`` walks block ``label`` entered with ``state`` and
    gives (target, what is bound at the jump) for each jump out of it; a block's state is
    the meet (intersection) over the jumps into it, recomputed with a worklist until no
    state changes (each only shrinks, so it ends).  Blocks no jump reaches are absent."""
    states = {start: frozenset(entry)}
    work = [start]
    while work:
        label = work.pop()
        for target, bound in exits(label, states[label]):
            new = frozenset(bound) if target not in states else states[target] & frozenset(bound)
            if new != states.get(target):
                states[target] = new
                work.append(target)
    return states


__all__ = ["fixed_point"]
