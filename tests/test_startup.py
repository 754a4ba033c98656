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
    out = {"after_import": "scipy.linalg" in sys.modules}

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
    assert got == {"after_import": False, "dot_ok": True, "solve_ok": True, "attr_ok": True,
                   "have_blas": True}


def test_switch_off(tmp_path):
    got = _child(tmp_path, LANEWISE_EAGER_SCIPY="1")
    assert got["dot_ok"] and got["have_blas"] and got["solve_ok"]


def test_probe_does_nothing_when_arraymath_is_loaded():
    from lanewise.runtime.startup import probe_blas_cheaply

    import numba.np.arraymath  # noqa: F401 - loaded in this process already
    assert probe_blas_cheaply() is False
