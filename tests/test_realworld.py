"""The real-world corpus (benchmarks/realworld/): every kernel's lanewise version, the
project's own version and the hand-written prange version agree with the kernel's
independent reference on its small input."""
import pytest

from benchmarks.harness import compare
from benchmarks.realworld import modules
from benchmarks.realworld.run import as_arrays, build

KERNELS = modules()


def test_corpus_has_at_least_twelve_kernels_with_sources():
    assert len(KERNELS) >= 12
    for mod in KERNELS:
        # numba/numba-examples' problems are named by issue 41; their kernels (ex_*) are
        # written here from the problems, the others copied from the projects they name
        assert mod.NAME.startswith("ex_") or "numba-examples" not in mod.SOURCE
        assert mod.SOURCE_SHORT and mod.TITLE and mod.DOMAIN


@pytest.mark.parametrize("tool", ["lanewise", "project", "hand_prange"])
@pytest.mark.parametrize("mod", KERNELS, ids=[m.NAME for m in KERNELS])
def test_kernel_agrees_with_reference(mod, tool):
    data = mod.setup(mod.SIZES["tiny"])
    ref = as_arrays(mod.reference(*data))
    out = as_arrays(build(mod, tool)(*data))
    assert len(out) == len(ref)
    for r, o in zip(ref, out, strict=True):
        check = compare(r, o, mod.TOL)
        assert check["ok"], (mod.NAME, tool, check)
