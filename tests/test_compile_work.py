"""What lanewise's own machinery makes Numba compile, beyond the user's lane.

A new process pays for every Numba function compiled in it that its disk cache
cannot hold: Numba's own generic helpers are compiled again in every process.
Numba's slice assignment (``a[:k] = b``) checks shapes with a formatted error
message, whose string code took 3-4 s to compile: the XLA handlers' error and
cast code and the reverse-mode stack's growth paid it, in every new process
(the reverse lane) or cache folder (the handler).  These tests run lanewise's
machinery in a fresh process with an empty cache and list what compiled.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

_PROBE = r"""
import json, math, sys
import numpy as np
from numba.core import event
import lanewise as lw

def f(x, n):
    s = 0.0
    for k in range(n):
        s = s + math.sin(x * s + k)
    return s

def g(x):
    return x > 0.5, int(x * 10), x * 2.0

def escape(c):
    z, n = 0.0, 0
    while z * z < 4.0 and n < 50:   # divergent: the SPMD path
        z, n = z * z + c, n + 1
    return n

def step(carry, x):
    return carry + x, carry * x

def outer_product(u, v):   # a 2-d array per lane
    return np.outer(u, v)

compiled = []
with event.install_recorder("numba:compile") as rec:
    x = np.linspace(0.0, 1.0, 40)
    lw.vmap(lw.jacrev(f), in_axes=(0, None))(x, 300)   # reverse mode: the stack grows
    lw.reduce(lw.vmap(g), "max")(x)
    lw.vmap(escape)(x)
    lw.vmap(lambda row: lw.scan(step, 0.0, row), in_axes=0)(np.ones((4, 10)))
    lw.vmap(outer_product, in_axes=(0, None))(np.ones((3, 2)), np.ones(4))
    if sys.argv[1] == "jax":
        import jax
        jax.config.update("jax_enable_x64", False)    # int64 results go through int32 temporaries
        op = lw.jax.op(lw.vmap(g))
        jax.jit(op)(jax.numpy.linspace(0.0, 1.0, 40, dtype="float32"))
        jax.jit(lw.jax.op(lw.reduce(lw.vmap(g), "max")))(jax.numpy.linspace(0.0, 1.0, 40, dtype="float32"))
for ts, ev in rec.buffer:
    if ev.is_start:
        fn = ev.data["dispatcher"].py_func
        compiled.append(f"{fn.__module__}.{fn.__qualname__}")
print(json.dumps(compiled))
"""


@pytest.mark.parametrize("with_jax", [False, True], ids=["map-reduce-reverse", "xla-ops"])
def test_no_string_formatting_code_compiles_for_lanewise_itself(tmp_path, with_jax):
    env = dict(os.environ, LANEWISE_CACHE_DIR=str(tmp_path / "cache"), NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    probe = tmp_path / "probe.py"  # a file: lanewise differentiates the lane's source
    probe.write_text(_PROBE)
    run = subprocess.run([sys.executable, str(probe), "jax" if with_jax else "plain"], env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    compiled = json.loads(run.stdout.strip().splitlines()[-1])
    assert any(name.startswith("lanewise.") for name in compiled)  # the recorder saw lanewise's compiles
    strings = sorted({name for name in compiled if name.startswith("numba.cpython.unicode")})
    assert not strings, f"Numba compiled string code for lanewise's machinery: {strings}"
