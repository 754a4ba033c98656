"""The cuda backend's disk cache: a warm process neither types the lane nor compiles kernels.

Without a GPU, the lanewise side runs on numba-cuda's simulator (each process
is a child: the simulator is chosen when ``numba.cuda`` is first imported) and
the real target is checked structurally (kernels built for a card keep their
code in numba-cuda's file cache beside the module).  With a GPU, a second
process must load every kernel from that cache.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

CHILD = textwrap.dedent('''
    import json, sys
    import numpy as np
    import lanewise as lw
    from lanewise.backends import cuda as lc
    sys.path.insert(0, sys.argv[1])
    import lanes
    x = np.linspace(0.0, 1.0, 7)
    grid = lw.vmap(lw.vmap(lanes.f, in_axes=(None, 0)), in_axes=(0, None), backend="cuda")
    z = grid(x, x)
    total = lw.reduce(lw.vmap(lanes.g, backend="cuda"), "sum")(x)
    hits = misses = 0
    if not lc.SIMULATOR:  # numba-cuda's own counters of its file cache
        exe = next(iter(grid._executables.values()))
        hits = sum(exe.module.kernel._cache_hits.values())
        misses = sum(exe.module.kernel._cache_misses.values())
    print(json.dumps({"typed": lc.stats["typed"], "disk": lc.stats["disk"], "z": z.tolist(),
                      "total": float(total), "hits": hits, "misses": misses}))
''')

LANES = textwrap.dedent('''
    import math
    SCALE = {scale}
    def f(x, y):
        return SCALE * math.cos(x * y) + 1.0
    def g(x):
        return x * x
''')


def _write_lanes(folder: Path, scale: float) -> None:
    (folder / "lanes.py").write_text(LANES.format(scale=scale))
    for pyc in folder.glob("__pycache__/lanes*"):
        pyc.unlink()


def _run(folder: Path, simulator: bool) -> dict:
    env = dict(os.environ, LANEWISE_CACHE_DIR=str(folder / "cache"))
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    if simulator:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    proc = subprocess.run([sys.executable, "-c", CHILD, str(folder)], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _expected(scale: float):
    x = np.linspace(0.0, 1.0, 7)
    return scale * np.cos(x[:, None] * x[None, :]) + 1.0, float((x * x).sum())


def test_simulator_second_process_reads_the_module_from_disk(tmp_path):
    _write_lanes(tmp_path, 2.0)
    cold = _run(tmp_path, simulator=True)
    warm = _run(tmp_path, simulator=True)
    assert (cold["typed"], cold["disk"]) == (1, 0)
    assert (warm["typed"], warm["disk"]) == (0, 1)
    z, total = _expected(2.0)
    for got in (cold, warm):
        np.testing.assert_allclose(got["z"], z, rtol=1e-15)
        assert got["total"] == pytest.approx(total, rel=1e-15)
    modules = sorted((tmp_path / "cache").rglob("lw_*.py"))
    assert len(modules) == 2  # the grid's kernel module and the reduction's
    assert all("cache=True" in p.read_text() for p in modules)


def test_simulator_editing_the_lane_invalidates(tmp_path):
    _write_lanes(tmp_path, 2.0)
    _run(tmp_path, simulator=True)
    _write_lanes(tmp_path, 3.0)
    edited = _run(tmp_path, simulator=True)
    assert (edited["typed"], edited["disk"]) == (1, 0)
    np.testing.assert_allclose(edited["z"], _expected(3.0)[0], rtol=1e-15)


def test_kernels_for_a_card_use_numba_cuda_file_cache(tmp_path, monkeypatch):
    """No GPU needed: the module built for the real target lives in the disk
    cache and its kernels carry numba-cuda's file cache (their compiled code
    is saved beside the module on the first launch)."""
    import lanewise as lw
    from lanewise.backends import cuda as lc
    from numba.cuda.dispatcher import CUDACache

    if lc.SIMULATOR:
        pytest.skip("this process runs the simulator")
    monkeypatch.setattr(lw.config, "cache_dir", str(tmp_path))

    def lane(x, y):
        return x * y + 1.0

    call = lc.bind_call(lw.vmap(lane, in_axes=(0, None), backend="cuda"), (np.ones(3), 2.0), {})
    exe = lc.build(call, need_device=False)
    assert exe.path is not None and Path(exe.path).is_relative_to(tmp_path)
    assert isinstance(exe.module.kernel._cache, CUDACache)


def _has_gpu() -> bool:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return False
    try:
        from numba import cuda
        return cuda.is_available()
    except Exception:  # noqa: BLE001 - no usable numba-cuda: no GPU
        return False


@pytest.mark.skipif(not _has_gpu(), reason="needs a CUDA GPU")
def test_gpu_second_process_loads_compiled_kernels(tmp_path):
    _write_lanes(tmp_path, 2.0)
    cold = _run(tmp_path, simulator=False)
    warm = _run(tmp_path, simulator=False)
    assert cold["misses"] >= 1 and cold["hits"] == 0
    assert warm["hits"] >= 1 and warm["misses"] == 0 and warm["typed"] == 0
    np.testing.assert_allclose(warm["z"], _expected(2.0)[0], rtol=1e-13)
