"""lanemath's trig slow paths (Payne-Hanek reduction) compile on first use only, and
kernels from the disk cache reach them in a new process (runtime/slow_symbols)."""

import json
import os
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent('''
    import json, math, sys
    import numpy as np
    import lanewise as lw
    from lanewise.runtime import slow_symbols

    f = lw.vmap(lambda x: math.cos(x) + math.sin(x))
    x = np.linspace(-100.0, 100.0, 4096) if sys.argv[1] == "small" else \\
        np.array([1e10, -3e17, 2.0**31, 1e300, 7.5e22, 1.0, -2.0, 5e15] * 512)
    got = f(x)
    want = np.cos(x) + np.sin(x)
    print(json.dumps({"err": float(np.max(np.abs(got - want))), "bound": sorted(slow_symbols._bound)}))
''')


def _child(tmp_path, which: str) -> dict:
    env = dict(os.environ, LANEWISE_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("NUMBA_CACHE_DIR", None)
    proc = subprocess.run([sys.executable, "-c", CHILD, which], capture_output=True, text=True, env=env,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_slow_path_compiles_only_when_an_argument_needs_it(tmp_path):
    small = _child(tmp_path, "small")
    assert small["bound"] == [] and small["err"] < 1e-14  # |x| <= 100: no lane took the slow path
    # A new process loads the same kernel from the disk cache; huge arguments reach the
    # slow path through the pointer registered at import, which compiles it then.
    huge = _child(tmp_path, "huge")
    assert huge["bound"] == ["cos_slow_f64", "sin_slow_f64"]
    assert huge["err"] < 4e-16


def test_bound_pointer_is_the_compiled_function():
    import ctypes

    from lanewise.runtime import slow_symbols

    compiled = slow_symbols.bind("tan_slow_f64")
    assert slow_symbols._cells["tan_slow_f64"].value == compiled.address
    fn = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)(slow_symbols._cells["tan_slow_f64"].value)
    import numpy as np
    assert abs(fn(1e22) - np.tan(1e22)) <= 2 * np.spacing(abs(np.tan(1e22)))
