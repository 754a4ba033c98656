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


# ------------------------------------------------------------------ typing without compiling


def radius2(p):  # subscripts: compiled for a scalar kernel, only inlined (and typed) for SPMD
    return p[0] * p[0] + p[1] * p[1]


def escape_lane(c):
    z, n = 0.0, 0
    while radius2((z, 0.0)) < 4.0 and n < 50:  # divergent: the SPMD path, which never runs the scalar lane
        z, n = z * z + c, n + 1
    return n


def test_typing_a_lane_compiles_nothing_the_spmd_path_does_not_run():
    """The lane's result type came from compiling it and its helpers (0.1-0.8 s of a
    cold first call), though the SPMD kernel runs only its W-wide form: typed inlined,
    neither is compiled."""
    import numpy as np

    import lanewise as lw
    from lanewise.lane.lanefn import jit_lane

    x = np.linspace(-2.0, 0.5, 100)
    got = lw.vmap(escape_lane)(x)
    np.testing.assert_array_equal(got, lw.vmap(escape_lane, backend="python")(x))
    assert "SPMD" in lw.explain(lw.vmap(escape_lane), x)
    assert not jit_lane(escape_lane).overloads and not jit_lane(radius2).overloads


def _realworld_calls():
    """The lane call of every kernel of the real-world corpus at its tiny size."""
    import lanewise as lw
    from benchmarks.realworld import run as realworld
    from lanewise.backends.cpu import map as cpu_map

    calls = []
    typed = cpu_map.typed_lane
    cpu_map.typed_lane = lambda call: (calls.append(call), typed(call))[1]
    try:
        with lw.config.overridden(disk_cache=False):  # every kernel typed here, none found on disk
            for mod in realworld.modules():
                mod.lanewise(lw)(*mod.setup(mod.SIZES["tiny"]))
    finally:
        cpu_map.typed_lane = typed
    return calls


def _corpus_calls():
    """A call of every lane of tests/corpus.py for each of its dtypes."""
    import numpy as np

    import lanewise as lw
    from lanewise.plan.program import bind_call
    from tests.corpus import CORPUS, lane_values

    rng, calls = np.random.default_rng(0), []
    shapes = {"s": (5,), "r": (5, 4)}
    for entry in CORPUS:
        for dtype in entry.dtypes:
            args = tuple(3 if k == "k" else lane_values(rng, shapes[k], dtype, entry.domain) for k in entry.kinds)
            mapped = lw.vmap(entry.lane, in_axes=tuple(None if k == "k" else 0 for k in entry.kinds))
            calls.append(bind_call(mapped, args, {}))
    return calls


def test_typing_inlined_agrees_with_typing_the_compiled_lane():
    """The reference: the lane compiled and its call typed (what lanewise did before).
    Result types and the allocation finding (which decides how the kernel calls the
    lane) must be the same for every lane of both corpora."""
    import numba

    from lanewise.backends.cpu import map as cpu_map

    realworld = _realworld_calls()
    assert len(realworld) >= 15
    for call in realworld + _corpus_calls():
        with cpu_map.scalar_lane_math(call.lane):
            inlined = cpu_map.typed_lane(call)
            compiled = cpu_map._typed_compiled(call, tuple(numba.typeof(v) for v in call.values))
        assert inlined == compiled, call.lane


def mandelbrot(c_re, c_im, max_iter):  # returns from inside its loop: the streamed SPMD path
    x = y = 0.0
    for i in range(max_iter):
        x2, y2 = x * x, y * y
        if x2 + y2 > 4.0:
            return i
        y = 2.0 * x * y + c_im
        x = x2 - y2 + c_re
    return max_iter


def _stream_compiles(run) -> int:
    """How many times ``run()`` makes Numba compile a streamed W-wide lane."""
    from numba.core import event

    import lanewise as lw

    with lw.config.overridden(disk_cache=False), event.install_recorder("numba:compile") as rec:
        run()
    return sum(ev.is_start and ev.data["dispatcher"].py_func.__name__ == "lane_stream" for _, ev in rec.buffer)


def test_a_streamed_lane_is_compiled_once():
    """The SPMD check compiles the streamed lane with the kernel's own loads and
    stores, for the kernel's types: the kernel links that compile (it compiled a
    second copy: 0.4 s of a Mandelbrot lane's 1.2 s cold first call)."""
    import numpy as np

    import lanewise as lw

    re, im = np.meshgrid(np.linspace(-2.0, 1.0, 37), np.linspace(-1.5, 1.5, 23))
    re, im = re.ravel(), im.ravel()
    f = lw.vmap(mandelbrot, in_axes=(0, 0, None))
    got = {}
    assert _stream_compiles(lambda: got.setdefault("r", f(re, im, 60))) == 1
    assert "refilled" in lw.explain(f, re, im, 60)
    np.testing.assert_array_equal(got["r"], lw.vmap(mandelbrot, in_axes=(0, 0, None), backend="python")(re, im, 60))


def test_a_streamed_lane_called_with_other_types_reads_and_writes_as_the_kernel():
    """Where the kernel's context types differ from the check's prediction (a strided
    output), the checked lane compiles again for them, with the kernel's own loads and
    stores: the results land where the kernel's would, and nowhere else."""
    import numpy as np

    import lanewise as lw

    re = np.linspace(-2.0, 1.0, 301)
    im = np.linspace(-1.0, 1.0, 301)[::-1].copy()
    f = lw.vmap(mandelbrot, in_axes=(0, 0, None))
    buffer = np.full(2 * re.size, -1)
    with lw.config.overridden(disk_cache=False):
        f(re, im, 60, out=buffer[::2])
    np.testing.assert_array_equal(buffer[::2], lw.vmap(mandelbrot, in_axes=(0, 0, None), backend="python")(re, im, 60))
    assert (buffer[1::2] == -1).all()
