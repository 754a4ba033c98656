"""Launch: a trivial lane over 65,536 lanes, where a parallel run is all overhead."""
import numpy as np

from .harness import Bar, Tolerance, lanewise_tool, numba_tool

ID = "launch"
TITLE = "parallel launch: x*2+1 over 65,536 lanes"
SIZES = {"full": 65_536, "quick": 65_536, "tiny": 64}
REF = "numba-prange"
TOL = Tolerance()
BAR = Bar(peer="numba-prange", factor=None, text="none (reported: the cost of a parallel run)")


def setup(n):
    return (np.arange(float(n)),)


def _numba(numba):
    @numba.njit(parallel=True)
    def affine(x):
        out = np.empty_like(x)
        for i in numba.prange(x.shape[0]):
            out[i] = x[i] * 2.0 + 1.0
        return out

    return affine


def _lanewise(lw):
    return lw.vmap(lambda x: x * 2.0 + 1.0)


def tools():
    return {"numba-prange": numba_tool(_numba), "lanewise": lanewise_tool(_lanewise)}
