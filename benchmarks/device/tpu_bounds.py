"""What checking row reads costs on the chip (backends/tpu/bounds.py), float32.

    python3 benchmarks/device/tpu_bounds.py      # on the device machine; writes $OUT/tpu_bounds.json

Lanes whose reads have an index computed at run time, timed as they are (the kernel tests
each read and writes a record block, the host reads the first record after the call) and
with the check taken out (``bounds.Sites.read`` and ``Records.read`` patched to do nothing:
the same kernel without the tests, the record block or the host's read), median of 7
calls after a warm-up, each call synchronised:

* ``lagged``: ``s += p[i] * p[i - 1]`` over 16384 series x 1000 steps: indices the kernel
  knows in range before it runs (``bounds.Intervals``): no check at all;
* ``clamped``: ``s += p[i] * p[min(i + 1, len(p) - 1)]``, the same rows: an index the same
  in every lane that the kernel cannot bound (``min``): one scalar comparison per read;
* ``picked``: ``p[k]`` for 2**22 lanes of rows of 16 (a per-lane index: a vector test);

each called eagerly (``lw.vmap``) and under ``jax.jit`` through ``lw.jax.op`` (the record
read by a ``jax.debug.callback``).  Both versions' results are compared.
"""
import json
import os
import statistics
import time

import jax
import numpy as np

import lanewise as lw
from lanewise.backends.tpu import bounds

OUT = os.environ.get("OUT", "/tmp")
SERIES, STEPS = int(os.environ.get("SERIES", 16384)), int(os.environ.get("STEPS", 1000))
PICKED, LENGTH = int(os.environ.get("PICKED", 1 << 22)), 16


def lagged(p):
    s = 0.0
    for i in range(1, len(p)):
        s += p[i] * p[i - 1]
    return s


def lagged_unchecked(p):  # the same lane, a kernel of its own (built with the check patched out)
    s = 0.0
    for i in range(1, len(p)):
        s += p[i] * p[i - 1]
    return s


def clamped(p):
    s = 0.0
    for i in range(len(p)):
        s += p[i] * p[min(i + 1, len(p) - 1)]
    return s


def clamped_unchecked(p):
    s = 0.0
    for i in range(len(p)):
        s += p[i] * p[min(i + 1, len(p) - 1)]
    return s


def picked(p, k):
    return p[k] * 2.0


def picked_unchecked(p, k):
    return p[k] * 2.0


def median_s(fn, *args) -> float:
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(7):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def unchecked(make):
    """``make()``'s program built and warmed with the reads' checks patched out."""
    saved = bounds.Sites.read, bounds.Records.read
    bounds.Sites.read = bounds.Records.read = lambda *a, **k: None
    try:
        return make()
    finally:
        bounds.Sites.read, bounds.Records.read = saved


def main() -> None:
    rng = np.random.default_rng(0)
    rows = jax.device_put(rng.random((SERIES, STEPS), dtype=np.float32))
    short = jax.device_put(rng.random((PICKED, LENGTH), dtype=np.float32))
    ks = jax.device_put(rng.integers(0, LENGTH, PICKED).astype(np.int32))
    cases = {"lagged": (lagged, lagged_unchecked, (rows,)), "clamped": (clamped, clamped_unchecked, (rows,)),
             "picked": (picked, picked_unchecked, (short, ks))}
    out = []
    for name, (lane, twin, args) in cases.items():
        for how in ("eager", "jit"):
            def make(f, how=how, args=args):
                program = lw.vmap(f, backend="tpu")
                fn = jax.jit(lw.jax.op(program)) if how == "jit" else program
                jax.block_until_ready(fn(*args))  # built (and, unchecked, compiled) here
                return fn

            checked_fn, plain_fn = make(lane), unchecked(lambda: make(twin))
            diff = float(np.max(np.abs(np.asarray(checked_fn(*args)) - np.asarray(plain_fn(*args)))))
            rec = {"lane": name, "how": how, "checked_s": median_s(checked_fn, *args),
                   "unchecked_s": median_s(plain_fn, *args), "max_abs_diff": diff}
            rec["ratio"] = rec["checked_s"] / rec["unchecked_s"]
            print(json.dumps(rec), flush=True)
            out.append(rec)
    with open(os.path.join(OUT, "tpu_bounds.json"), "w") as fh:
        json.dump({"device": str(jax.devices()[0]), "rows": out}, fh, indent=1)


if __name__ == "__main__":
    main()
