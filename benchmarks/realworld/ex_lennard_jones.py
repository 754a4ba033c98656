"""All-pairs Lennard-Jones energy of an atom cluster (the problem of Numba's public examples).

Each lane is one atom ``i``: it sums the pair potential with every atom after it, so lane
``i`` does ``n - 1 - i`` pair terms (a triangular, unbalanced loop), and the lanes are
summed by ``lw.reduce``. A reduction whose lanes read a small array passed whole: the
work is in the lanes' loops, not in the array sizes.
"""
from __future__ import annotations

import numpy as np

from benchmarks.harness import Tolerance

NAME = "ex_lennard_jones"
TITLE = "Lennard-Jones cluster energy (all pairs)"
DOMAIN = "molecular physics"
SOURCE = (
    "The problem of numba/numba-examples examples/lennard_jones (BSD-2-Clause): the total "
    "Lennard-Jones energy 4(r^-12 - r^-6) of a cluster, a prange loop over atoms with an inner "
    "loop over the later atoms. Written here from that description (the project's Numba "
    "version is the natural prange loop a Numba user writes for it), not copied."
)
SOURCE_SHORT = "numba/numba-examples lennard_jones"
SIZES = {"full": 3000, "quick": 1000, "tiny": 20}
TOL = Tolerance(rtol=1e-9, atol=1e-9)


def pair(r):
    sr6 = (1.0 / r) ** 6
    return 4.0 * (sr6 * sr6 - sr6)


def atom_energy(i, pos):
    """Atom ``i``'s pair energy with every later atom."""
    e = 0.0
    for j in range(i + 1, pos.shape[0]):
        dx = pos[j, 0] - pos[i, 0]
        dy = pos[j, 1] - pos[i, 1]
        dz = pos[j, 2] - pos[i, 2]
        e += pair((dx * dx + dy * dy + dz * dz) ** 0.5)
    return e


lanes = (atom_energy,)


def setup(n):
    """Atoms on a jittered cubic lattice (spacing 1.5): no two closer than about 1."""
    rng = np.random.default_rng(5)
    side = int(np.ceil(n ** (1 / 3)))
    grid = np.stack(np.meshgrid(*[np.arange(side)] * 3, indexing="ij"), -1).reshape(-1, 3)[:n]
    return (grid * 1.5 + rng.uniform(-0.2, 0.2, (n, 3)),)


def reference(pos):
    """NumPy, a block of atoms against all at a time (each pair counted once)."""
    total = 0.0
    for s in range(0, pos.shape[0], 256):
        d = np.sqrt(((pos[s:s + 256, None, :] - pos[None, :, :]) ** 2).sum(-1))
        i = np.arange(s, min(s + 256, pos.shape[0]))[:, None]
        mask = np.arange(pos.shape[0])[None, :] > i
        sr6 = (1.0 / d[mask]) ** 6
        total += float(np.sum(4.0 * (sr6 * sr6 - sr6)))
    return np.array(total)


def _prange(numba):
    g = dict(globals())
    g["pair"] = numba.njit(pair)
    lane = numba.njit(type(atom_energy)(atom_energy.__code__, g, "atom_energy"))

    @numba.njit(parallel=True)
    def energy(pos):
        e = 0.0
        for i in numba.prange(pos.shape[0] - 1):
            e += lane(i, pos)
        return e

    return lambda pos: np.array(energy(pos))


project = hand_prange = _prange


def lanewise(lw):
    total = lw.reduce(lw.vmap(atom_energy, in_axes=(0, None)), "sum")
    return lambda pos: np.asarray(total(np.arange(pos.shape[0] - 1), pos))
