"""benchmarks/results/tpu.json from a device run of tpu_all.sh (its tpu_w2.json and tpu_ops.json).

    python -m benchmarks.device.tpu_results RUN_DIR [--date ISO] [--commit SHA]
    python -m benchmarks.device.tpu_results RUN_DIR --update --date ISO --commit SHA --command CMD

RUN_DIR holds tpu_w2.json and tpu_ops.json (tpu_all.sh) and, if present, tpu_w1.json (tpu_w1.py:
W1 per block size, W5, Newton at the defaults), tpu_w3.json (W3 per size, tile and unroll),
tpu_mc.json (MC per tool), tpu_w1_probe.json (W1's pieces, hand-written, against XLA) and
w1_interleaved.json (tpu_w1_interleaved.py: W1's XLA, lanewise and whole-call times in turn).

``--update`` merges a later, partial run (any of tpu_w1.json, tpu_w3.json, tpu_mc.json,
tpu_strips.json, tpu_bounds.json, a NEWTON_ONLY tpu_w2.json) into the existing
tpu.json: its rows replace those of the same workloads, and
the command says which were measured when.

Rows in the layout of benchmarks/quote.py's ``_rows``: ``W2`` and ``newton`` with the median
seconds of each setting (``lanewise-tpu-ROWSxCOLS-uUNROLL``, ``lanewise-tpu-flat``, ``lanewise-cpu``,
``jax-vmap-while_loop``), and one row per lowering with its ulp error against JAX on the CPU.
"""
import argparse
import json
import math
import re
import statistics
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
        if "exact_trig_s" in r and block == (256, 1024):  # every grid step on jnp.cos (tpu_w1.py)
            times["lanewise-tpu-exact-trig"] = r["exact_trig_s"]
    rows = [{"workload": "W1", "size": f"{w1[0]['n']}x{w1[0]['n']}, float32", "median_s": times}]
    for r in extra.get("W5", []):
        times = {"jax-jit-sum": r["jax_s"], "lanewise-tpu-reduce": r["lanewise_tpu_s"]}
        if "exact_trig_s" in r:
            times["lanewise-tpu-reduce-exact-trig"] = r["exact_trig_s"]
        rows.append({"workload": "W5", "size": f"sum over {r['n']}x{r['n']}, float32", "median_s": times,
                     "rel_diff": r["rel_diff"]})
    return rows


def w3_rows(records: list) -> list:
    """tpu_w3.py: one row per size, each tile and unroll as ``lanewise-tpu-ROWSxCOLS-uUNROLL``
    (the defaults, (32, 128) and 16, also as ``lanewise-tpu-defaults``)."""
    rows = {}
    for r in records:
        row = rows.setdefault((r["series"], r["steps"]), {
            "workload": f"W3-{r['series']}x{r['steps']}", "size": f"{r['series']} series x {r['steps']} steps, "
            "float32", "median_s": {"jax-vmap-scan": r["jax_s"]}, "max_abs_diff": 0.0})
        row["median_s"][setting(r)] = r["lanewise_tpu_s"]
        if tuple(r["tile"]) == (32, 128) and r["unroll"] == 16:
            row["median_s"]["lanewise-tpu-defaults"] = r["lanewise_tpu_s"]
        row["max_abs_diff"] = max(row["max_abs_diff"], r["max_abs_diff"])
    return list(rows.values())


def mc_rows(records: list) -> list:
    """tpu_mc.py: the seconds of each tool, and whether every price is within its bound of Black-Scholes."""
    tools = [r for r in records if "tool" in r]
    return [{"workload": "MC", "size": f"{tools[0]['n']:.0e} paths, float32",
             "median_s": {r["tool"]: r["s"] for r in tools}, "all_ok": all(r["ok"] for r in tools)}]


#: tpu_w1_probe.py's variants, as names a quote can hold (no "/" or "|").
PIECES = {"store x+y": "store", "r/(1+r)": "rational", "cos(r)": "cos", "W1 cos(r)/(1+r)": "w1",
          "cos(r)*recip(1+r) approx": "w1-approx-recip", "poly cos(r)": "poly-cos",
          "poly cos(r)/(1+r)": "poly-w1"}


def probe_rows(records: list) -> list:
    """tpu_w1_probe.py: W1's pieces as hand-written Pallas kernels and as XLA fuses them."""
    times = {}
    for r in records:
        if "error" not in r:
            times[f"xla-{PIECES[r['variant']]}"] = r["xla_s"]
            times[f"pallas-{PIECES[r['variant']]}"] = r["pallas_s"]
    return [{"workload": "W1-pieces", "size": f"{records[0]['n']}x{records[0]['n']}, float32", "median_s": times}]


def strips_rows(records: list) -> list:
    """tpu_strips.py: hand-written kernels of W1, W5 and MC's lane, each block whole
    (``pallas-whole``) or in strips (``pallas-strip-RxC``), beside XLA's fused W1 and W5."""
    rows = {}
    for r in records:
        size = f"{r['n']} lanes" if "MC" in r["workload"] else f"{r['n']}x{r['n']}"
        row = rows.setdefault(r["workload"], {"workload": f"strips-{r['workload']}", "median_s": {},
                                              "size": f"{size}, float32, blocks of 256x1024"})
        if "xla_s" in r:
            row["median_s"]["xla"] = r["xla_s"]
        name = "pallas-whole" if r["strip"] is None else f"pallas-strip-{r['strip'][0]}x{r['strip'][1]}"
        row["median_s"][name] = r["pallas_s"]
    return list(rows.values())


def mc_strip_rows(text: str) -> list:
    """tpu_all.sh's MC strip sweep (mc_strips.log: ``STRIP {tpu_mc.py's record}`` per line):
    each lanewise form's seconds per ``LANEWISE_TPU_STRIP`` (0: whole blocks)."""
    times, n = {}, None
    for line in text.splitlines():  # the records may be cut short: their first fields are enough
        strip, _, record = line.partition(" ")
        tool, n, s = re.search(r'"tool": "([^"]+)", "n": (\d+), "s": ([0-9.e-]+)', record).groups()
        times[f"{tool}-strip-{'whole' if strip == '0' else strip}"] = float(s)
        n = int(n)
    return [{"workload": "MC-strips", "size": f"{n:.0e} paths, float32", "median_s": times}] if times else []


def bounds_rows(records: dict) -> list:
    """tpu_bounds.py: each lane's call with its row reads checked and with the check taken
    out, called eagerly and under jax.jit (the record read by a host callback)."""
    rows = {}
    for r in records["rows"]:
        row = rows.setdefault(r["lane"], {"workload": f"bounds-{r['lane']}", "median_s": {}, "max_abs_diff": 0.0,
                                          "size": BOUNDS_SIZES.get(r["lane"], "")})
        row["median_s"][f"checked-{r['how']}"] = r["checked_s"]
        row["median_s"][f"unchecked-{r['how']}"] = r["unchecked_s"]
        row["max_abs_diff"] = max(row["max_abs_diff"], r["max_abs_diff"])
    return list(rows.values())


#: What each tpu_bounds.py lane is, for its row.
BOUNDS_SIZES = {"lagged": "16384 series x 1000 steps, p[i] * p[i - 1]: known in range, no check",
                "clamped": "16384 series x 1000 steps, p[min(i + 1, len(p) - 1)]: one index for all lanes, checked",
                "picked": "2^22 lanes, rows of 16, p[k]: an index per lane, checked"}


def newton_settings(w2: list, newton: dict) -> dict:
    """``newton`` (tpu.json's row) with a NEWTON_ONLY run's settings added (tpu_w2.py), the
    one of lanewise's default tile and unroll as ``lanewise-tpu-defaults`` too."""
    import lanewise as lw

    defaults = type(lw.config)()
    out = json.loads(json.dumps(newton))
    for rec in w2:
        if rec.get("part") == "newton" and "s" in rec and not rec.get("peer"):
            out["median_s"][setting(rec)] = rec["s"]
            if (tuple(rec["tile"]), rec["unroll"]) == (tuple(defaults.tpu_tile), defaults.tpu_unroll):
                out["median_s"]["lanewise-tpu-defaults"] = rec["s"]
            out[f"{setting(rec)}_mismatch"] = rec.get("mismatch")
        elif rec.get("part") == "newton" and rec.get("peer"):
            out["median_s"]["jax-vmap-while_loop"] = rec["s"]
    return out


def update(run: Path, date: str, commit: str, command: str) -> dict:
    """The existing tpu.json with ``run``'s rows in place of those of the same workloads."""
    old = json.loads((ROOT / "benchmarks" / "results" / "tpu.json").read_text())
    rows = {r["workload"]: r for r in old["rows"]}
    new = []
    if (run / "tpu_w1.json").exists():
        newton = json.loads(json.dumps(rows["newton"]))
        new += w1_rows(json.loads((run / "tpu_w1.json").read_text()), newton) + [newton]
    for name, make in (("tpu_w3.json", w3_rows), ("tpu_mc.json", mc_rows), ("tpu_strips.json", strips_rows),
                       ("w1_interleaved.json", interleaved_rows), ("tpu_cos.json", trig_rows)):
        if (run / name).exists():
            new += make(json.loads((run / name).read_text()))
    if (run / "mc_strips.log").exists():
        new += mc_strip_rows((run / "mc_strips.log").read_text())
    if (run / "tpu_bounds.json").exists():
        new += bounds_rows(json.loads((run / "tpu_bounds.json").read_text()))
    if (run / "tpu_w2.json").exists():  # a NEWTON_ONLY run of tpu_w2.py: its settings join the newton row
        new.append(newton_settings(json.loads((run / "tpu_w2.json").read_text()), rows["newton"]))
    for r in new:  # an earlier run's times kept as NAME-before stay beside the new ones
        before = {k: v for k, v in rows.get(r["workload"], {}).get("median_s", {}).items() if k.endswith("-before")}
        rows[r["workload"]] = {**r, "median_s": {**before, **r.get("median_s", {})}}
    measured = ", ".join(r["workload"] for r in new)
    return {**old, "date": date, "rows": list(rows.values()),
            "command": f"{old['command']}; {measured} re-measured {date}: {command} (commit {commit})"}


def trig_rows(records: list) -> list:
    """tpu_cos_probe.py: the bounded cos and sin's largest error in float32 ulps (rounded up)
    against float64 beside the chip's own, per range of |x| (``trig-ulps``), and W5's
    hand-written sum with each guard (``W5-pieces``, medians over the rounds)."""
    ulps = {f"max_ulps_{r['cos'].replace('-', '_')}_{int(r['range'])}": math.ceil(r["max_ulp"])
            for r in records if "cos" in r}
    kernels: dict = {}
    for r in records:
        if "kernel" in r:
            kernels.setdefault(r["kernel"], []).append(r["s"])
    rows = [{"workload": "trig-ulps", **ulps}] if ulps else []
    if kernels:
        rows.append({"workload": "W5-pieces", "median_s": {k: statistics.median(v) for k, v in kernels.items()}})
    return rows


def interleaved_rows(record: dict) -> list:
    """tpu_w1_interleaved.py: W1's XLA, lanewise call and jitted whole call timed in turn."""
    med = record["median_s"]
    return [{"workload": "W1-interleaved", "size": f"{record['n']}x{record['n']}, float32",
             "median_s": {"jax-vmap": med["xla"], "lanewise-tpu": med["lanewise"],
                          "lanewise-tpu-whole-call": med["whole"]}}]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--date", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--before", help="an earlier run's folder: its W2 (and W1, W5) times join as NAME-before")
    ap.add_argument("--ops", help="the folder of the run that measured the lowerings (tpu_ops.json), when "
                                  "RUN skipped them (SKIP_OPS=1)")
    ap.add_argument("--command", default="bash benchmarks/device/tpu_all.sh 1536",
                    help="the command that made RUN, as it was run")
    ap.add_argument("--update", action="store_true", help="merge RUN's rows into the existing tpu.json")
    a = ap.parse_args()
    run = Path(a.run)
    if a.update:
        out = update(run, a.date, a.commit, a.command)
        (ROOT / "benchmarks" / "results" / "tpu.json").write_text(json.dumps(out, indent=1) + "\n")
        return
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
        earlier = Path(a.before or "") / "tpu_w1.json"
        if a.before and earlier.exists():  # W1's and W5's times in the earlier run, as NAME-before
            for row, old in zip(rows[2:4], w1_rows(json.loads(earlier.read_text()), {"median_s": {}})[:2],
                                strict=True):
                row["median_s"].update({f"{k}-before": v for k, v in old["median_s"].items()
                                        if "block" not in k})
    for name, make in (("tpu_w3.json", w3_rows), ("tpu_mc.json", mc_rows), ("tpu_w1_probe.json", probe_rows),
                       ("w1_interleaved.json", interleaved_rows)):
        if (run / name).exists():
            rows += make(json.loads((run / name).read_text()))
    rows += [{"workload": f"op {r['op']}", **{k: math.ceil(v) if k.startswith("max_ulps") else v
                                                           for k, v in r.items() if k != "op"}} for r in ops]
    out = {"date": a.date, "machine": "device machine: one TPU v5e chip, 13 cores x86-64 host; jax 0.10.2",
           "command": f"{a.command} (commit {a.commit})" + (f"; lowerings' ulps from an earlier run ({a.ops})"
                                                              if a.ops else ""),
           "threads": 13, "rows": rows}
    (ROOT / "benchmarks" / "results" / "tpu.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
