"""The disk cache: a warm process pays no compile; concurrent, corrupt and stale entries."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CHILD = textwrap.dedent('''
    import json, sys, time
    t0 = time.perf_counter()
    import numpy as np
    import lanewise as lw
    from lanewise.backends import cpu, host
    sys.path.insert(0, sys.argv[1])
    import lanes
    x = np.linspace(-2, 2, 50)
    grid = lw.vmap(lw.vmap(lanes.f, in_axes=(None, 0)), in_axes=(0, None))
    z = grid(x, x)
    exe = next(iter(grid._executables.values()))
    misses = sum(d.stats.cache_misses[k] for d in (exe.module.kernel_blocks,)
                 for k in d.stats.cache_misses)
    print(json.dumps({"typed": cpu.stats["typed"], "disk": cpu.stats["disk"], "misses": misses,
                      "checksum": float(z.sum()), "path": str(exe.path),
                      "lane_made": not isinstance(exe.inject["lane"], host.Deferred),
                      "scipy_linalg": "scipy.linalg" in sys.modules,
                      "seconds": time.perf_counter() - t0}))
''')

LANES = textwrap.dedent('''
    import math
    SCALE = {scale}
    def helper(r):
        return math.cos(r) / (1 + r)
    def f(x, y):
        return SCALE * helper(x * x + y * y)
''')


def _run(tmp_path: Path, cache: Path, numba_dir: Path | None = None) -> dict:
    env = dict(os.environ, LANEWISE_CACHE_DIR=str(cache))
    env.pop("NUMBA_CACHE_DIR", None)
    if numba_dir is not None:
        env["NUMBA_CACHE_DIR"] = str(numba_dir)
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _expected(scale: float) -> float:
    import numpy as np
    x = np.linspace(-2, 2, 50)
    r = x[:, None] ** 2 + x[None, :] ** 2
    return float((scale * np.cos(r) / (1 + r)).sum())


@pytest.fixture
def lanes(tmp_path):
    def write(scale):
        (tmp_path / "lanes.py").write_text(LANES.format(scale=scale))
        for pyc in tmp_path.glob("__pycache__/lanes*"):
            pyc.unlink()
    write(1.0)
    return write


def test_second_process_pays_no_compile(tmp_path, lanes):
    cache = tmp_path / "cache"
    cold = _run(tmp_path, cache)
    warm = _run(tmp_path, cache)
    assert cold["typed"] == 1 and cold["misses"] >= 1
    assert warm["typed"] == 0 and warm["disk"] == 1 and warm["misses"] == 0
    # A warm process neither re-analyses the lane (host.Deferred) nor imports
    # scipy.linalg for Numba's BLAS probe (lanewise.runtime.startup).
    assert cold["lane_made"] and not warm["lane_made"]
    assert not warm["scipy_linalg"]
    assert warm["checksum"] == pytest.approx(_expected(1.0), rel=1e-12)
    assert Path(warm["path"]).is_relative_to(cache)


def test_editing_a_helper_invalidates(tmp_path, lanes):
    cache = tmp_path / "cache"
    first = _run(tmp_path, cache)
    lanes(3.0)  # a global the lane reads changes: a new fingerprint
    second = _run(tmp_path, cache)
    assert second["typed"] == 1 and second["path"] != first["path"]
    assert second["checksum"] == pytest.approx(_expected(3.0), rel=1e-12)


@pytest.mark.parametrize("victim", [".py", ".meta"])
def test_corrupt_entry_is_rebuilt(tmp_path, lanes, victim):
    cache = tmp_path / "cache"
    path = Path(_run(tmp_path, cache)["path"])
    target = path.with_suffix(victim)
    target.write_bytes(target.read_bytes()[: len(target.read_bytes()) // 2])
    again = _run(tmp_path, cache)
    assert again["typed"] == 1
    assert again["checksum"] == pytest.approx(_expected(1.0), rel=1e-12)
    assert _run(tmp_path, cache)["typed"] == 0  # and the rebuilt entry is good


def test_concurrent_writers(tmp_path, lanes):
    cache = tmp_path / "cache"
    env = dict(os.environ, LANEWISE_CACHE_DIR=str(cache))
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(3)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert all(r["checksum"] == pytest.approx(_expected(1.0), rel=1e-12) for r in results)
    assert len({r["path"] for r in results}) == 1
    assert len(list(Path(results[0]["path"]).parent.glob("lw_*.py"))) == 1
    assert not list(Path(results[0]["path"]).parent.glob(".tmp-*"))
    assert _run(tmp_path, cache)["typed"] == 0


def test_deleting_the_cache_is_safe(tmp_path, lanes):
    import shutil
    cache = tmp_path / "cache"
    _run(tmp_path, cache)
    shutil.rmtree(cache)
    again = _run(tmp_path, cache)
    assert again["typed"] == 1
    assert again["checksum"] == pytest.approx(_expected(1.0), rel=1e-12)


def test_corrupt_numba_object_code_is_recompiled(tmp_path, lanes):
    cache = tmp_path / "cache"
    path = Path(_run(tmp_path, cache)["path"])
    index_files = list(path.parent.glob("__pycache__/*.nbi"))
    assert index_files
    for f in index_files:
        f.write_text("garbage")
    again = _run(tmp_path, cache)
    assert again["checksum"] == pytest.approx(_expected(1.0), rel=1e-12)
    assert _run(tmp_path, cache)["misses"] == 0


def test_module_on_disk_without_object_code_compiles(tmp_path, lanes):
    """The generated module is on disk but Numba's object code is not (another process
    typed it without compiling, or it was deleted): the lane is made and compiled."""
    cache = tmp_path / "cache"
    path = Path(_run(tmp_path, cache)["path"])
    for f in path.parent.glob("__pycache__/*.nb[ic]"):
        f.unlink()
    again = _run(tmp_path, cache)
    assert again["typed"] == 0 and again["misses"] >= 1 and again["lane_made"]
    assert again["checksum"] == pytest.approx(_expected(1.0), rel=1e-12)
    assert not _run(tmp_path, cache)["lane_made"]


def test_corrupt_object_code_under_numba_cache_dir_is_recompiled(tmp_path, lanes):
    """With NUMBA_CACHE_DIR set, Numba keeps object code there, not beside the module:
    a corrupt entry must be found and dropped there too."""
    cache, numba_dir = tmp_path / "cache", tmp_path / "numba"
    _run(tmp_path, cache, numba_dir)
    index_files = list(numba_dir.rglob("lw_*.nbi"))
    assert index_files and not list(cache.rglob("lw_*.nbi"))
    for f in index_files:
        f.write_text("garbage")
    again = _run(tmp_path, cache, numba_dir)
    assert again["checksum"] == pytest.approx(_expected(1.0), rel=1e-12)
    assert _run(tmp_path, cache, numba_dir)["misses"] == 0


MODULE_CHILD = textwrap.dedent('''
    import json, sys
    import numpy as np
    import lanewise as lw
    from lanewise.backends import cpu
    sys.path.insert(0, sys.argv[1])
    import attr_lanes
    z = lw.vmap(attr_lanes.f)(np.arange(4.0))
    print(json.dumps({"typed": cpu.stats["typed"], "z": z.tolist()}))
''')


def test_editing_a_module_attribute_invalidates(tmp_path):
    """A lane reading ``cfg.SCALE`` and ``cfg.SHIFT`` of a user module by attribute:
    Numba freezes both into the kernel, so editing either must miss the disk cache."""
    (tmp_path / "attr_lanes.py").write_text("import cfg\n\ndef f(x):\n    return x * cfg.SCALE + cfg.SHIFT\n")

    def write_cfg(scale, shift):
        (tmp_path / "cfg.py").write_text(f"SCALE = {scale}\nSHIFT = {shift}\nUNUSED = object()\n")
        for pyc in tmp_path.glob("__pycache__/cfg*"):
            pyc.unlink()

    def run():
        env = dict(os.environ, LANEWISE_CACHE_DIR=str(tmp_path / "cache"))
        proc = subprocess.run([sys.executable, "-c", MODULE_CHILD, str(tmp_path)], capture_output=True,
                              text=True, env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout.strip().splitlines()[-1])

    write_cfg(2.0, 0.5)
    assert run() == {"typed": 1, "z": [0.5, 2.5, 4.5, 6.5]}
    assert run()["typed"] == 0  # unchanged (an unused, unhashable attribute does not matter)
    write_cfg(3.0, 0.5)
    assert run() == {"typed": 1, "z": [0.5, 3.5, 6.5, 9.5]}
    write_cfg(3.0, -1.0)
    assert run() == {"typed": 1, "z": [-1.0, 2.0, 5.0, 8.0]}


WARM_CHILD = textwrap.dedent('''
    import json, sys
    sys.path.insert(0, sys.argv[1])
    import numpy as np
    import lanewise as lw
    from numba.core.registry import cpu_target
    import warm_lanes
    x = np.linspace(0, 1, 20)
    out = {"alloc": lw.vmap(warm_lanes.alloc)(x).tolist(), "keyed": lw.vmap(warm_lanes.keyed)(x).tolist()}
    out["want_keyed"] = [v + 2 * v + hash("lanewise") % 7 for v in x.tolist()]
    out["registries"] = len(cpu_target.target_context._registries)
    from numba.core import entrypoints
    out["entry_points"] = entrypoints._already_initialized
    try:
        lw.vmap(warm_lanes.checked)(np.linspace(0, 2, 5))
    except ValueError as e:
        out["error"] = str(e)
    print(json.dumps(out))
''')

WARM_LANES = textwrap.dedent('''
    import numpy as np
    def alloc(x):                      # arrays: Numba's runtime (NRT)
        w = np.zeros(3)
        for k in range(3):
            w[k] = x * (k + 1)
        return w.sum() + w.max()
    def keyed(x):                      # str hashing: the process's hash secret
        d = {"a": x, "b": 2.0 * x}
        return d["a"] + d["b"] + hash("lanewise") % 7
    def checked(x):                    # an exception raised in compiled code
        if x > 1.5:
            raise ValueError("too big")
        return x
''')


@pytest.mark.parametrize("refresh", ["", "1"])
def test_warm_process_loads_kernels_without_numbas_registries(tmp_path, refresh):
    """A warm process loads its kernels' object code without refreshing Numba's
    registries (lanewise.runtime.warm), and what that object code calls is there:
    the runtime for arrays, the hash secret of *this* process (Python's hash of a
    str differs per process), exceptions.  LANEWISE_NUMBA_REFRESH=1 restores the
    refresh.  Nor does it scan the installed packages for Numba extensions."""
    (tmp_path / "warm_lanes.py").write_text(WARM_LANES)
    env = dict(os.environ, LANEWISE_CACHE_DIR=str(tmp_path / "cache"), LANEWISE_NUMBA_REFRESH=refresh)
    env.pop("NUMBA_CACHE_DIR", None)
    runs = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", WARM_CHILD, str(tmp_path)], capture_output=True, text=True,
                              env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    x = [k / 19 for k in range(20)]
    for got in runs:
        assert got["alloc"] == pytest.approx([6 * v + 3 * v for v in x], rel=1e-12)
        assert got["keyed"] == pytest.approx(got["want_keyed"], rel=1e-12)
        assert got["error"] == "too big"
    assert runs[0]["registries"] > 0  # the cold process compiled
    assert (runs[1]["registries"] > 0) == bool(refresh)
    assert runs[1]["entry_points"] == bool(refresh)


BIG_GLOBAL_CHILD = textwrap.dedent('''
    import numpy as np
    import lanewise as lw
    BIG = np.arange(300_000.0)  # 2.4 MB: Numba compiles it in by address
    mapped = lw.vmap(lambda i: BIG[i] * 2.0)
    assert mapped(np.arange(3)).tolist() == [0.0, 2.0, 4.0]
    print(str(lw.explain(mapped, np.arange(3))).split("generated source:")[0])
''')


def test_a_kernel_numba_cannot_cache_is_explained_not_warned(tmp_path):
    """A lane reading a global array over 1 MB: Numba cannot cache the kernel on disk.
    Before, its raw NumbaWarning named lanewise's generated kernel_blocks and file, and
    lw.explain showed a cache path; now no warning, and lw.explain names the array."""
    env = dict(os.environ, LANEWISE_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-c", BIG_GLOBAL_CHILD], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "NumbaWarning" not in proc.stderr and "dynamic globals" not in proc.stderr, proc.stderr
    cache_line = next(line for line in proc.stdout.splitlines() if line.startswith("cache:"))
    assert "memory only" in cache_line and "(BIG)" in cache_line and "in_axes=None" in cache_line, cache_line
