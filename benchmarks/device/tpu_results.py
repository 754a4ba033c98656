"""benchmarks/results/tpu.json from a device run of tpu_all.sh (its tpu_w2.json and tpu_ops.json).

    python -m benchmarks.device.tpu_results RUN_DIR [--date ISO] [--commit SHA]

RUN_DIR holds tpu_w2.json and tpu_ops.json (tpu_all.sh) and, if present, tpu_w1.json (tpu_w1.py).

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
        name = rec.get("peer") and "jax-vmap-while_loop" or {"flat": "lanewise-tpu-flat",
                                                              "cpu": "lanewise-cpu"}.get(part) or setting(rec)
        row["median_s"][name] = rec["s"]
        if "mismatch" in rec:
            row[f"{name}_mismatch"] = rec["mismatch"]
        if "threads" in rec:
            row["cpu_threads"] = rec["threads"]
    return list(rows.values())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--date", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--before", help="an earlier run's folder: its W2 times join as NAME-before")
    a = ap.parse_args()
    run = Path(a.run)
    w2 = json.loads((run / "tpu_w2.json").read_text())
    ops = json.loads((run / "tpu_ops.json").read_text())
    # ulps as whole numbers (quote.py prints an int as a count)
    rows = rows_of(w2)
    if a.before:
        earlier = rows_of(json.loads((Path(a.before) / "tpu_w2.json").read_text()))[0]["median_s"]
        rows[0]["median_s"].update({f"{k}-before": v for k, v in earlier.items() if k.startswith("lanewise-tpu")})
    w1 = run / "tpu_w1.json"  # tpu_w1.py's W1 and Newton at the defaults, when that run is there
    if w1.exists():
        extra = {r["workload"]: r for r in json.loads(w1.read_text())}
        rows[1]["median_s"]["lanewise-tpu-defaults"] = extra["newton-defaults"]["lanewise_tpu_s"]
        rows[1]["median_s"]["jax-vmap-while_loop-w1run"] = extra["newton-defaults"]["jax_s"]
        rows.append({"workload": "W1", "size": f"{extra['W1']['n']}x{extra['W1']['n']}, float32",
                     "median_s": {"jax-vmap": extra["W1"]["jax_s"], "lanewise-tpu": extra["W1"]["lanewise_tpu_s"]}})
    rows += [{"workload": f"op {r['op']}", **{k: math.ceil(v) if k.startswith("max_ulps") else v
                                                           for k, v in r.items() if k != "op"}} for r in ops]
    out = {"date": a.date, "machine": "device machine: one TPU v5e chip, 13 cores x86-64 host; jax 0.10.2",
           "command": f"bash benchmarks/device/tpu_all.sh 1536; python3 benchmarks/device/tpu_w1.py "
                      f"(commit {a.commit})",
           "threads": 13, "rows": rows}
    (ROOT / "benchmarks" / "results" / "tpu.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
