"""Real-world corpus: kernels taken from public projects, each beside the lane a user would write.

Every module in this package is one kernel and exposes::

    NAME, TITLE, DOMAIN   "kde", "Gaussian kernel density estimate", "statistics"
    SOURCE                where the project's fast version comes from: repository, path,
                          licence, and what (if anything) was changed to call it here
    SOURCE_SHORT          "owner/repo path" for the report's table
    SIZES                 {"full": n, "quick": n, "tiny": n}   (tiny: the cold first call)
    TOL                   benchmarks.harness.Tolerance for the correctness check
    setup(n) -> tuple     NumPy inputs, built once and shared by every tool
    reference(*data)      an independent NumPy / plain-Python result (the check's truth)
    project(numba)        -> callable(*data): the project's own fast version, copied faithfully
    hand_prange(numba)    -> callable(*data): the lane ``njit``-ed into a plain ``prange`` loop,
                          what a Numba user would write by hand (the cold-compile bar's peer)
    lanewise(lw)          -> callable(*data): the natural lane version (no tricks)
    lanes                 (optional) the lane functions, for ``lw.explain`` in the report

Kernels named ``ex_*`` solve the problems of ``numba/numba-examples`` (issue 41 names them), written
here from their descriptions; the others are copied from the projects they name.
``python -m benchmarks.realworld.run`` measures them all (see run.py).
"""
from __future__ import annotations

import importlib
import pkgutil

SKIP = {"run"}


def modules():
    """Every kernel module of the corpus, sorted by name."""
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in SKIP
                   and not m.name.startswith("_"))
    return [importlib.import_module(f"{__name__}.{n}") for n in names]
