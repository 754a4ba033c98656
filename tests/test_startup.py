"""lanewise.runtime.startup: Numba's BLAS probe without importing scipy.linalg, and
nothing a user relies on changes (BLAS in lanes, scipy.linalg afterwards)."""

import json
import os
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent('''
    import json, sys
    import numpy as np
    import lanewise as lw
    out = {"after_import": "scipy.linalg" in sys.modules or "numba.np.arraymath" in sys.modules}

    lw.vmap(lambda v: v + 1.0)(np.ones(3))  # a compile: Numba loads its registries
    out["after_compile"] = "scipy.linalg" in sys.modules  # the probe ran before them

    def lane(a, b):  # a BLAS call per lane: Numba's np.dot of two vectors
        return np.dot(a, b)

    rng = np.random.default_rng(0)
    a, b = rng.random((5, 3)), rng.random((5, 3))
    got = lw.vmap(lane)(a, b)
    out["dot_ok"] = bool(np.allclose(got, (a * b).sum(axis=1), rtol=1e-14))
    import scipy.linalg
    import scipy.linalg.cython_blas
    out["solve_ok"] = bool(np.allclose(scipy.linalg.solve(np.eye(3) * 2, np.ones(3)), 0.5))
    out["attr_ok"] = hasattr(scipy.linalg, "cython_blas") and hasattr(scipy.linalg.cython_blas, "__pyx_capi__")
    from numba.np import arraymath
    out["have_blas"] = bool(arraymath._HAVE_BLAS)
    print(json.dumps(out))
''')


def _child(tmp_path, **env) -> dict:
    environ = {k: v for k, v in os.environ.items() if k != "LANEWISE_EAGER_SCIPY"}
    environ.update(LANEWISE_CACHE_DIR=str(tmp_path / "cache"), **env)
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                          env=environ, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_probe_skips_scipy_linalg_and_blas_still_works(tmp_path):
    got = _child(tmp_path)
    assert got == {"after_import": False, "dot_ok": True, "after_compile": False, "solve_ok": True,
                   "attr_ok": True, "have_blas": True}


def test_switch_off(tmp_path):
    got = _child(tmp_path, LANEWISE_EAGER_SCIPY="1")
    assert got["dot_ok"] and got["have_blas"] and got["solve_ok"] and got["after_compile"]


def test_probe_does_nothing_when_arraymath_is_loaded():
    import sys

    from lanewise.runtime.startup import _ProbeOnImport, probe_on_import

    import numba.np.arraymath  # noqa: F401 - loaded in this process already
    probe_on_import()
    assert not any(isinstance(f, _ProbeOnImport) for f in sys.meta_path)


def test_any_import_of_arraymath_gets_the_cheap_probe():
    """Not only Numba's registries import numba.np.arraymath: a cached kernel's
    environment naming one of its globals does, while it is unpickled in a warm
    process.  Whatever imports it first gets the cheap probe."""
    code = textwrap.dedent('''
        import json, sys
        import lanewise
        before = "numba.np.arraymath" in sys.modules
        import numba.np.arraymath as am
        linalg = "scipy.linalg" in sys.modules
        import scipy.linalg.cython_blas
        print(json.dumps([before, linalg, bool(am._HAVE_BLAS), hasattr(scipy.linalg, "cython_blas")]))
    ''')
    environ = {k: v for k, v in os.environ.items() if k != "LANEWISE_EAGER_SCIPY"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environ, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [False, False, True, True]
