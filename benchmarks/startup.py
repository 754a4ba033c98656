"""Cold compile and warm (on-disk cache) time to the first W1 result, in fresh processes.

Each measurement is its own subprocess with ``LANEWISE_CACHE_DIR`` pointing at a
temporary folder: empty for "cold", populated by the previous cold run for "warm".
The hand-written Numba kernel (no cache) is timed the same way for context.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ID = "startup"
REPO = Path(__file__).resolve().parent.parent
SIZES = {"full": 1000, "quick": 500}


def child(tool: str, n: int) -> dict:
    """In the fresh process: seconds from ``import <tool>`` to the first result."""
    import numpy as np

    t0 = time.perf_counter()
    if tool == "lanewise":
        import lanewise as lw

        from benchmarks.w1_grid import _lanewise as make
        mod = lw
    else:
        import numba

        from benchmarks.w1_grid import _numba as make
        mod = numba
    t_import = time.perf_counter()
    fn = make(mod)
    x = np.linspace(-2.0, 2.0, n)
    fn(x, x)
    t_first = time.perf_counter()
    fn(x, x)
    return {"import_s": t_import - t0, "first_result_s": t_first - t0,
            "second_call_s": time.perf_counter() - t_first}


def spawn(tool: str, n: int, cache_dir: str) -> dict:
    # Python's default bytecode caching, as on a user's machine: a sandbox with
    # PYTHONDONTWRITEBYTECODE=1 recompiled lanewise's source (an editable
    # install) in every process, about 0.07 s, while Numba's .pyc files came
    # precompiled from pip.  The cold process writes them, warm ones read them.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["LANEWISE_CACHE_DIR"] = cache_dir
    cmd = [sys.executable, "-m", "benchmarks.startup", "child", tool, str(n)]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["?"])[-1][:300]}
    return dict(json.loads(p.stdout.strip().splitlines()[-1]), wall_s=wall)


def cache_files(folder: str) -> int:
    return sum(len(files) for _, _, files in os.walk(folder))


def series(label: str, tool: str, n: int, dirs: list[str]) -> dict:
    """Median over one fresh process per cache folder in ``dirs``."""
    print(f"  {label} ...", end=" ", flush=True)
    runs = [spawn(tool, n, d) for d in dirs]
    errors = [r["error"] for r in runs if "error" in r]
    if errors:
        print("error", flush=True)
        return {"tool": label, "status": "error", "note": errors[0], "runs": runs}
    row = {"tool": label, "status": "ok", "runs": runs,
           "cache_files": cache_files(dirs[-1]) if tool == "lanewise" else None}
    for key in ("import_s", "first_result_s", "second_call_s", "wall_s"):
        row[key] = statistics.median(r[key] for r in runs)
    print(f"{row['first_result_s']:.3g} s", flush=True)
    return row


def run(repeats: int, lw_ok, mode: str = "full") -> dict:
    n, reps = SIZES[mode], 3
    print(f"startup: W1 n={n}, time to first result in fresh processes", flush=True)
    scratch = tempfile.mkdtemp(prefix="lw-bench-startup-")
    try:
        rows = [series("numba prange, no cache (cold)", "numba", n, [scratch] * reps)]
        if not lw_ok[0]:
            return {"id": ID, "n": n, "rows": rows + [{"tool": "lanewise", "status": "n/a", "note": lw_ok[1]}]}
        cold = [tempfile.mkdtemp(dir=scratch) for _ in range(reps)]
        rows.append(series("lanewise cold (empty cache)", "lanewise", n, cold))
        rows.append(series("lanewise warm (disk cache)", "lanewise", n, [cold[-1]] * reps))
        return {"id": ID, "n": n, "rows": rows}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__" and sys.argv[1:2] == ["child"]:
    print(json.dumps(child(sys.argv[2], int(sys.argv[3]))))
