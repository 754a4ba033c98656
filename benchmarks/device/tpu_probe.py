"""Which while_loop carries does Mosaic compile?  A probe for the tpu backend's lowering.

    python3 benchmarks/device/tpu_probe.py      # on the device machine (a TPU): one line per variant

The first chip run of backend="tpu" failed in Mosaic ("failed to legalize operation 'scf.yield'")
on a per-tile while_loop whose carry held (8, 128) bool masks and an int32 tile splatted from a
constant.  Each variant below is the same escape-time loop over one (8, 128) tile, carrying the
active mask and the counter differently; the lowering should use a variant that compiles.
"""
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl

TILE, MAX_ITER = (8, 128), 100


def _loop(cr, ci, mask_dtype, counter, splat_init):
    n0 = jnp.int32(0) if counter == "scalar" else jnp.zeros(TILE, jnp.int32)
    res0 = jnp.full(TILE, MAX_ITER, jnp.int32) if splat_init else jnp.where(cr == cr, MAX_ITER, 0).astype(jnp.int32)
    active0 = jnp.ones(TILE, mask_dtype) if splat_init else (cr == cr).astype(mask_dtype)

    def cond(c):
        n, zr, zi, res, active = c
        live = active if mask_dtype == jnp.bool_ else active != 0
        return jnp.logical_and(jnp.any(live), jnp.max(n) < MAX_ITER)

    def body(c):
        n, zr, zi, res, active = c
        live = active if mask_dtype == jnp.bool_ else active != 0
        zr, zi = zr * zr - zi * zi + cr, 2 * zr * zi + ci
        out = jnp.logical_and(live, zr * zr + zi * zi > 4.0)
        res = jnp.where(out, n, res)
        live = jnp.logical_and(live, jnp.logical_not(out))
        return n + 1, zr, zi, res, live if mask_dtype == jnp.bool_ else live.astype(mask_dtype)

    zeros = jnp.zeros(TILE, jnp.float32)
    return lax.while_loop(cond, body, (n0, zeros, zeros, res0, active0))[3]


def variant(mask_dtype, counter, splat_init):
    def kernel(cr_ref, ci_ref, o_ref):
        o_ref[...] = _loop(cr_ref[...], ci_ref[...], mask_dtype, counter, splat_init)
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(TILE, jnp.int32))


def main():
    print("devices", jax.devices())
    cr = jnp.asarray(np.linspace(-2.0, 0.6, TILE[0] * TILE[1], dtype=np.float32).reshape(TILE))
    ci = jnp.asarray(np.linspace(-1.3, 1.3, TILE[0] * TILE[1], dtype=np.float32).reshape(TILE)[:, ::-1])
    want = None
    for mask_dtype in (jnp.bool_, jnp.int32):
        for counter in ("tile", "scalar"):
            for splat_init in (True, False):
                name = f"mask={jnp.dtype(mask_dtype).name} counter={counter} splat_init={splat_init}"
                try:
                    got = np.asarray(jax.jit(variant(mask_dtype, counter, splat_init))(cr, ci))
                    want = got if want is None else want
                    print(f"{name}: compiles, equal to the first: {np.array_equal(got, want)}")
                except Exception as e:  # noqa: BLE001 - a probe: each failure is a line
                    print(f"{name}: FAILS {type(e).__name__}: {str(e).splitlines()[0][:160]}")


if __name__ == "__main__":
    main()
