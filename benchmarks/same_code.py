"""Do two trees generate the same kernels?  The check behind a behaviour-neutral refactor.

Runs each job (a real-world kernel's first call, a workload's or a benchmark's quick run)
once per tree, each in a fresh process with an empty lanewise cache, and compares the
generated modules (``lw_*.py`` in the cache) as texts, up to the tree's own path::

    python -m benchmarks.same_code BEFORE_TREE             # every job
    python -m benchmarks.same_code BEFORE_TREE --only rw    # the real-world corpus only
    python -m benchmarks.same_code BEFORE_TREE --jobs 6     # six jobs at once (many cores)

``BEFORE_TREE`` is a snapshot of an earlier commit (``git archive <commit> | tar -x -C
ab_before``).  Prints one line per job and a unified diff of the first differing module;
exits 1 when any job's kernels differ or a job fails in either tree.
"""

from __future__ import annotations

import argparse
import difflib
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUICK = ["--quick", "--repeats", "5", "--no-memory", "--no-merge", "--md", os.devnull]
#: name -> the command (after ``python -m``) that compiles its kernels.
JOBS = {**{f"rw:{p.stem}": ["benchmarks.realworld.run", "child", p.stem, "lanewise"]
           for p in sorted((ROOT / "benchmarks" / "realworld").glob("[a-z]*_*.py"))},
        **{f"W:{w}": ["benchmarks.run", "--only", w, *QUICK] for w in ("W1", "W2", "W3", "W5", "W6", "W7")},
        "spmd": ["benchmarks.spmd", "--quick", "--repeats", "1"],
        "autodiff": ["benchmarks.autodiff", "--quick"]}


def generated(tree: Path, command: list[str]) -> tuple[dict[str, str], str]:
    """(module texts by name, the error's tail or "") of ``command`` run in ``tree``."""
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as numba_cache:
        env = {**os.environ, "LANEWISE_CACHE_DIR": cache, "NUMBA_CACHE_DIR": numba_cache,
               "PYTHONPATH": os.pathsep.join([str(tree / "src"), str(tree), os.environ.get("PYTHONPATH", "")]),
               "JAX_PLATFORMS": "cpu"}
        done = subprocess.run([sys.executable, "-m", *command], cwd=tree, env=env, capture_output=True, text=True)
        texts = {p.name: p.read_text().replace(str(tree), "<tree>") for p in Path(cache).rglob("lw_*.py")}
    # benchmarks.run exits 1 when a peer (not lanewise) is missing or wrong: not this check's concern
    last = (done.stderr.strip().splitlines() or [""])[-1]
    peers_only = "PEER RESULTS DISAGREE" in last
    return texts, ("" if done.returncode == 0 or peers_only else done.stderr[-2000:])


def compare(before: Path, after: Path, name: str, command: list[str]) -> tuple[bool, str]:
    """(whether both trees ran and generated the same modules, the job's report)."""
    (old, old_err), (new, new_err) = generated(before, command), generated(after, command)
    if old_err or new_err or not new:
        return False, f"{name}: FAILED to run (or generated nothing)\n{old_err or new_err}"
    if sorted(old.values()) == sorted(new.values()):
        return True, f"{name}: identical ({len(new)} modules)"
    only_old = sorted(set(old.values()) - set(new.values()))
    only_new = sorted(set(new.values()) - set(old.values()))
    report = f"{name}: DIFFERS ({len(only_old)} modules only before, {len(only_new)} only after)\n"
    if only_old and only_new:
        report += "".join(difflib.unified_diff(only_old[0].splitlines(True), only_new[0].splitlines(True),
                                               "before", "after", n=2))
    return False, report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path, help="the earlier tree (a snapshot folder)")
    ap.add_argument("--only", default="", help="comma list of job prefixes: rw, W, spmd, autodiff, rw:phys_spa...")
    ap.add_argument("--jobs", type=int, default=1, help="jobs run at once (each in its own processes)")
    args = ap.parse_args(argv)
    wanted = [w for w in args.only.split(",") if w]
    jobs = {k: v for k, v in JOBS.items() if not wanted or any(k == w or k.startswith(w + ":") for w in wanted)}
    with ThreadPoolExecutor(args.jobs) as pool:  # threads only wait on the jobs' processes
        runs = [pool.submit(compare, args.before.resolve(), ROOT, name, command) for name, command in jobs.items()]
        results = []
        for run in runs:
            same, report = run.result()
            print(report, flush=True)
            results.append(same)
    print(f"{sum(results)} of {len(results)} jobs generate identical kernels")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
