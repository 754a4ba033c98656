"""``@lw.fuse``: think in arrays, never materialise.

NumPy-style code (broadcasting, ufuncs, ``np.where``, reductions) is traced on
array proxies and compiled into the same fused lanewise loop nests as
``lw.vmap``/``lw.reduce``: one generated scalar lane per pass, no intermediate
arrays, broadcasting by index instead of by copy.

Modules: :mod:`.graph` (the DAG), :mod:`.rules` (ufunc -> scalar expression),
:mod:`.common` (errors, axes), :mod:`.trace` (proxies), :mod:`.functions` (NumPy
functions, vmapped lanes), :mod:`.lower` (lane source), :mod:`.run` (passes and
boundaries), :mod:`.api`.

Example:
    >>> import numpy as np, lanewise as lw
    >>> f = lw.fuse(lambda x: np.clip(x * 2.0, 0.0, 1.0).mean())
    >>> float(f(np.array([0.1, 0.3, 0.9])))  # mean of [0.2, 0.6, 1.0]
    0.6
"""

from .api import Fused, fuse
from .common import FuseError

# ``lanewise.fuse`` (the attribute) is the function: these make ``lw.fuse.FuseError`` work too.
fuse.FuseError, fuse.Fused = FuseError, Fused

__all__ = ["fuse", "Fused", "FuseError"]
