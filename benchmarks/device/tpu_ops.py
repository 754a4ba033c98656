"""Each TPU lowering of the primitive table on the chip: does Mosaic compile it, and how far
is it from float64 NumPy (max error in float32 ulps over typical arguments)?

    python3 benchmarks/device/tpu_ops.py     # on the device machine; writes $OUT/tpu_ops.json

One tiny Pallas kernel per lowering (``lanewise.backends.tpu.ops.OPS`` and every tpu rule) over an (8, 128)
tile; float arguments from each function's domain, ints for the integer operators, bools
for the logical ones.  Interpret mode compiles all of them; Mosaic does not (expm1 in
jax 0.10.2, for one), and its transcendental functions are approximations.
"""
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

from lanewise import primitives
from lanewise.backends.tpu.ops import OPS, lowering

TILE = (8, 128)
#: Argument domains (lo, hi) of functions defined on part of the line; others take [-4, 4].
DOMAIN = {"log": (1e-3, 50), "log1p": (-0.9, 50), "log10": (1e-3, 50), "log2": (1e-3, 50), "sqrt": (0, 50),
          "arcsin": (-1, 1), "arccos": (-1, 1), "arccosh": (1, 50), "arctanh": (-0.99, 0.99),
          "reciprocal": (0.1, 5), "expm1": (-1, 1), "exp": (-20, 20), "exp2": (-20, 20),
          "sinh": (-8, 8), "cosh": (-8, 8), "tan": (-1.5, 1.5)}
INTS = {"floordiv", "mod", "lshift", "rshift", "and_", "or_", "xor", "invert", "floor_divide", "remainder",
        "int", "int32"}
BOOLS = {"logical_and", "logical_or", "logical_xor", "logical_not", "bool"}
ARITY2 = {"add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "lshift", "rshift", "and_", "or_", "xor",
          "lt", "le", "gt", "ge", "eq", "ne", "add_np", "subtract", "multiply", "divide", "less", "less_equal",
          "greater", "greater_equal", "equal", "not_equal", "logical_and", "logical_or", "logical_xor",
          "arctan2", "hypot", "copysign", "maximum", "fmax", "max", "minimum", "fmin", "min", "floor_divide",
          "remainder", "fmod", "power"}


def args_for(name, rng):
    if name == "where":
        return [rng.random(TILE) < 0.5, rng.uniform(-4, 4, TILE).astype(np.float32),
                rng.uniform(-4, 4, TILE).astype(np.float32)]
    if name in BOOLS:
        return [rng.random(TILE) < 0.5 for _ in range(2 if name in ARITY2 else 1)]
    if name in INTS:
        a = rng.integers(-1000, 1000, TILE).astype(np.int32)
        b = rng.integers(1, 20, TILE).astype(np.int32) * np.where(rng.random(TILE) < 0.5, -1, 1).astype(np.int32)
        if name in ("lshift", "rshift"):
            b = np.abs(b) % 16
        return [a, b][:2 if name in ARITY2 else 1]
    lo, hi = DOMAIN.get(name, (-4, 4))
    a = rng.uniform(lo, hi, TILE).astype(np.float32)
    b = rng.uniform(0.5, 3, TILE).astype(np.float32) if name in ("pow", "power") else \
        rng.uniform(-4, 4, TILE).astype(np.float32)
    if name in ("pow", "power"):
        a = np.abs(a)
    return [a, b][:2 if name in ARITY2 else 1]


def run(name, fn, args):
    def kernel(*refs):
        ins, out = refs[:-1], refs[-1]
        vals = [r[...] != 0 if a.dtype == bool else r[...] for r, a in zip(ins, args, strict=True)]
        v = jnp.asarray(fn(*vals))
        out[...] = jnp.broadcast_to(v.astype(jnp.float32 if v.dtype.kind == "f" else jnp.int32), TILE)

    kind = jax.eval_shape(lambda *a: jnp.asarray(fn(*a)), *[jax.ShapeDtypeStruct(TILE, a.dtype) for a in args])
    dtype = jnp.float32 if kind.dtype.kind == "f" else jnp.int32
    travel = [a.astype(np.int32) if a.dtype == bool else a for a in args]
    return np.asarray(pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(TILE, dtype),
                                     interpret=jax.default_backend() != "tpu")(*travel))


def main():
    rng = np.random.default_rng(0)
    rows = []
    lowered = {**OPS, **{p.rules["tpu"].op: lowering(p.rules["tpu"].op) for p in primitives.with_rule("tpu")}}
    for name, fn in sorted(lowered.items()):
        args = args_for(name, rng)
        try:
            got = run(name, fn, args)
        except Exception as e:  # noqa: BLE001 - a probe: each failure is a row
            rows.append({"op": name, "compiles": False, "error": " ".join(str(e).split())[:200]})
            print(json.dumps(rows[-1]), flush=True)
            continue
        with jax.default_device(jax.devices("cpu")[0]):
            want = np.asarray(jax.jit(fn)(*[jnp.asarray(a) for a in args]))
        if got.dtype.kind == "f":
            scale = np.spacing(np.abs(want).astype(np.float32))
            ulps = np.where(np.isfinite(want), np.abs(got.astype(np.float64) - want) / scale, 0)
            err = {"max_ulps_vs_cpu_jax": float(np.nanmax(ulps))}
        else:
            err = {"mismatches_vs_cpu_jax": int((got != want.astype(got.dtype)).sum())}
        rows.append({"op": name, "compiles": True, **err})
        print(json.dumps(rows[-1]), flush=True)
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "tpu_ops.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
