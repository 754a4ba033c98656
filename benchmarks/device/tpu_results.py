"""benchmarks/results/tpu.json from a device run of tpu_all.sh (its tpu_w2.json and tpu_ops.json).

    python -m benchmarks.device.tpu_results RUN_DIR [--date ISO] [--commit SHA]

RUN_DIR holds tpu_w2.json and tpu_ops.json (tpu_all.sh) and, if present, tpu_w1.json (tpu_w1.py:
W1 per block size, W5, Newton at the defaults).

Rows in the layout of benchmarks/quote.py's ``_rows``: ``W2`` and ``newton`` with the median
seconds of each setting (``lanewise-tpu-ROWSxCOLS-uUNROLL``, ``lanewise-tpu-flat``, ``lanewise-cpu``,
``jax-vmap-while_loop``), and one row per lowering with its ulp error against JAX on the CPU.
"""
import argparse
import math
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def setting(rec) -> str:
    return f"lanewise-tpu-{rec['tile'][0]}x{rec['tile'][1]}-u{rec['unroll']}"


def rows_of(w2: list) -> list:
    rows = {"W2": {"workload": "W2", "size": "1536x1536, 500 iterations, float32", "median_s": {}},
            "newton": {"workload": "newton", "size": "1536x1536, at most 60 steps, float32", "median_s": {}}}
    for rec in w2:
        part = rec.get("part")
        row = rows["newton" if part == "newton" else "W2"] if part else None
        if row is None or "s" not in rec:
            continue
        if part == "handwritten":
            name = f"pallas-handwritten-{rec['tile'][0]}x{rec['tile'][1]}"
        else:
            name = rec.get("peer") and "jax-vmap-while_loop" or {"flat": "lanewise-tpu-flat",
                                                                  "cpu": "lanewise-cpu"}.get(part) or setting(rec)
        row["median_s"][name] = rec["s"]
        if "mismatch" in rec:
            row[f"{name}_mismatch"] = rec["mismatch"]
        if "threads" in rec:
            row["cpu_threads"] = rec["threads"]
    return list(rows.values())


def w1_rows(records: list, newton: dict) -> list:
    """tpu_w1.py's W1 (per block size; the default block, 256x1024, is ``lanewise-tpu``), W5
    and Newton at the defaults (joined to the ``newton`` row)."""
    extra = {}
    for r in records:
        extra.setdefault(r["workload"], []).append(r)
    nd = extra["newton-defaults"][0]
    newton["median_s"]["lanewise-tpu-defaults"] = nd["lanewise_tpu_s"]
    newton["median_s"]["jax-vmap-while_loop-w1run"] = nd["jax_s"]
    w1 = extra["W1"]
    times = {"jax-vmap": w1[0]["jax_s"]}
    for r in w1:
        block = tuple(r.get("block", (256, 1024)))
        times["lanewise-tpu" if block == (256, 1024) else f"lanewise-tpu-block-{block[0]}x{block[1]}"] = \
            r["lanewise_tpu_s"]
    rows = [{"workload": "W1", "size": f"{w1[0]['n']}x{w1[0]['n']}, float32", "median_s": times}]
    for r in extra.get("W5", []):
        rows.append({"workload": "W5", "size": f"sum over {r['n']}x{r['n']}, float32",
                     "median_s": {"jax-jit-sum": r["jax_s"], "lanewise-tpu-reduce": r["lanewise_tpu_s"]},
                     "rel_diff": r["rel_diff"]})
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--date", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--before", help="an earlier run's folder: its W2 times join as NAME-before")
    ap.add_argument("--ops", help="the folder of the run that measured the lowerings (tpu_ops.json), when "
                                  "RUN skipped them (SKIP_OPS=1)")
    ap.add_argument("--command", default="bash benchmarks/device/tpu_all.sh 1536",
                    help="the command that made RUN, as it was run")
    a = ap.parse_args()
    run = Path(a.run)
    w2 = json.loads((run / "tpu_w2.json").read_text())
    ops = json.loads((Path(a.ops or run) / "tpu_ops.json").read_text())
    # ulps as whole numbers (quote.py prints an int as a count)
    rows = rows_of(w2)
    if a.before:
        earlier = rows_of(json.loads((Path(a.before) / "tpu_w2.json").read_text()))[0]["median_s"]
        rows[0]["median_s"].update({f"{k}-before": v for k, v in earlier.items() if k.startswith("lanewise-tpu")})
    w1 = run / "tpu_w1.json"  # tpu_w1.py's W1 and Newton at the defaults, when that run is there
    if w1.exists():
        rows += w1_rows(json.loads(w1.read_text()), rows[1])
    rows += [{"workload": f"op {r['op']}", **{k: math.ceil(v) if k.startswith("max_ulps") else v
                                                           for k, v in r.items() if k != "op"}} for r in ops]
    out = {"date": a.date, "machine": "device machine: one TPU v5e chip, 13 cores x86-64 host; jax 0.10.2",
           "command": f"{a.command} (commit {a.commit})" + (f"; lowerings' ulps from an earlier run ({a.ops})"
                                                              if a.ops else ""),
           "threads": 13, "rows": rows}
    (ROOT / "benchmarks" / "results" / "tpu.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
