"""Derivatives of lanes (lw.grad / lw.jacfwd / lw.value_and_grad) against JAX and against the primal.

Three workloads, the bars of the autodiff issue (docs/autodiff.md):

* Greeks: pathwise delta and vega of an arithmetic Asian call, 64 steps per path,
  ``lw.reduce(lw.vmap(lw.value_and_grad(asian, argnums=(s0, sigma))), "mean")``
  with ``lw.random`` draws, against ``jax.jit(jax.value_and_grad)`` of the same
  program in JAX (``jax.random.normal``, ``vmap``, ``lax.scan``), and against
  lanewise's own primal (the price alone);
* per-pixel fitting: a 3-parameter exponential decay fitted to 32 samples per
  pixel by 10 Gauss-Newton steps, the Jacobian by ``lw.jacfwd`` inside the lane,
  against ``jax.vmap`` of the same solver with ``jax.jacfwd`` (results compared);
* a divergent loop: the gradient of a smooth observable of an escape-time
  iteration (a ``break`` at a data-dependent step) against the primal, by
  forward mode (``lw.grad``) and by reverse mode (``lw.jacrev``); JAX's reverse
  mode cannot go through such a loop.

Timing: one warm-up call per tool (compiles; results checked), then ``--repeats``
interleaved rounds; medians are reported.

    python -m benchmarks.autodiff            # documented sizes (writes results/autodiff.json)
    python -m benchmarks.autodiff --quick    # small sizes, nothing written
"""
from __future__ import annotations

import argparse
import math
import statistics
import time

import numba
import numpy as np

import lanewise as lw
import lanewise.random as lwr

from .harness import jax_x64

# ---------------------------------------------------------------------------- Greeks

STEPS = 64
S0, STRIKE, RATE, SIGMA, T = 100.0, 100.0, 0.05, 0.2, 1.0
DT = T / STEPS
DISCOUNT = math.exp(-RATE * T)


def asian(key, i, s0, sigma):
    """One path of an arithmetic-average Asian call: the discounted payoff."""
    path = lwr.fold_in(key, i)
    drift = (RATE - 0.5 * sigma * sigma) * DT
    vol = sigma * math.sqrt(DT)
    s = s0
    total = 0.0
    for j in range(STEPS):
        s = s * math.exp(drift + vol * lwr.normal(lwr.fold_in(path, j)))
        total += s
    return DISCOUNT * max(total / STEPS - STRIKE, 0.0)


def greeks_tools():
    key = tuple(int(k) for k in lwr.key(7))
    primal = lw.reduce(lw.vmap(asian, in_axes=(None, 0, None, None)), "mean")
    greeks = lw.reduce(lw.vmap(lw.value_and_grad(asian, argnums=(2, 3)), in_axes=(None, 0, None, None)), "mean")
    jax = jax_x64()
    jnp = jax.numpy

    def jax_price(s0, sigma, key, n):
        z = jax.random.normal(key, (n, STEPS), dtype=jnp.float64)
        drift = (RATE - 0.5 * sigma * sigma) * DT
        vol = sigma * jnp.sqrt(DT)

        def path(zs):
            def step(s, zj):
                s = s * jnp.exp(drift + vol * zj)
                return s, s

            _, ss = jax.lax.scan(step, s0, zs)
            return DISCOUNT * jnp.maximum(ss.mean() - STRIKE, 0.0)

        return jnp.mean(jax.vmap(path)(z))

    jax_greeks = jax.jit(jax.value_and_grad(jax_price, argnums=(0, 1)), static_argnums=3)
    jkey = jax.random.PRNGKey(7)

    def flat(value_and_grads):
        value, (delta, vega) = value_and_grads
        return np.array([float(value), float(delta), float(vega)])

    return {
        "lanewise value_and_grad": lambda idx: flat(greeks(key, idx, S0, SIGMA)),
        "jax value_and_grad (jit)": lambda idx: flat(jax_greeks(S0, SIGMA, jkey, idx.shape[0])),
        "lanewise primal": lambda idx: np.array([float(primal(key, idx, S0, SIGMA))]),
    }


def greeks_check(results, data):
    """Both tools' price, delta and vega agree within Monte Carlo noise (different
    generators: about 1/sqrt(n) relative, so 10/sqrt(n) is several standard errors)."""
    ours, theirs = results["lanewise value_and_grad"], results["jax value_and_grad (jit)"]
    assert abs(results["lanewise primal"][0] - ours[0]) < 1e-9 * abs(ours[0]), "primal != value"
    assert np.allclose(ours, theirs, rtol=10 / math.sqrt(data[0].shape[0])), (ours, theirs)
    return f"price, delta, vega: lanewise {np.round(ours, 4).tolist()}, JAX {np.round(theirs, 4).tolist()}"


# ---------------------------------------------------------------------------- per-pixel fitting

SAMPLES, GN_STEPS = 32, 10
TS = np.linspace(0.0, 3.0, SAMPLES)
START = (1.5, 0.6, 0.2)


def decay(t, a, b, c):
    return a * math.exp(-b * t) + c


d_decay = lw.jacfwd(decay, argnums=(1, 2, 3))


def fit_pixel(ys, ts, a, b, c):
    """10 Gauss-Newton steps for y = a exp(-b t) + c; the Jacobian by lw.jacfwd."""
    for _ in range(GN_STEPS):
        h00 = h01 = h02 = h11 = h12 = h22 = g0 = g1 = g2 = 0.0
        for i in range(ts.shape[0]):
            r = decay(ts[i], a, b, c) - ys[i]
            ja, jb, jc = d_decay(ts[i], a, b, c)
            h00 += ja * ja
            h01 += ja * jb
            h02 += ja * jc
            h11 += jb * jb
            h12 += jb * jc
            h22 += jc * jc
            g0 += ja * r
            g1 += jb * r
            g2 += jc * r
        c00 = h11 * h22 - h12 * h12  # H is symmetric: solve by its cofactors
        c01 = h02 * h12 - h01 * h22
        c02 = h01 * h12 - h02 * h11
        c11 = h00 * h22 - h02 * h02
        c12 = h01 * h02 - h00 * h12
        c22 = h00 * h11 - h01 * h01
        det = h00 * c00 + h01 * c01 + h02 * c02
        a -= (c00 * g0 + c01 * g1 + c02 * g2) / det
        b -= (c01 * g0 + c11 * g1 + c12 * g2) / det
        c -= (c02 * g0 + c12 * g1 + c22 * g2) / det
    return a, b, c


def pixels(n):
    rng = np.random.default_rng(3)
    a, b, c = rng.uniform(1.0, 2.0, n), rng.uniform(0.3, 1.0, n), rng.uniform(0.0, 0.5, n)
    return a[:, None] * np.exp(-b[:, None] * TS) + c[:, None] + rng.normal(0.0, 0.01, (n, SAMPLES))


def fitting_tools():
    ours = lw.vmap(fit_pixel, in_axes=(0, None, None, None, None))
    jax = jax_x64()
    jnp = jax.numpy
    ts = jnp.asarray(TS)

    def model(p, t):
        return p[0] * jnp.exp(-p[1] * t) + p[2]

    jac = jax.jacfwd(model)

    def fit(ys):
        def step(_, p):
            r = jax.vmap(model, (None, 0))(p, ts) - ys
            j = jax.vmap(jac, (None, 0))(p, ts)
            return p - jnp.linalg.solve(j.T @ j, j.T @ r)

        return jax.lax.fori_loop(0, GN_STEPS, step, jnp.array(START))

    jax_fit = jax.jit(jax.vmap(fit))
    return {
        "lanewise jacfwd in the lane": lambda ys: np.stack(ours(ys, TS, *START), axis=1),
        "jax vmap(jacfwd) (jit)": lambda ys: np.asarray(jax_fit(ys)),
    }


def fitting_check(results):
    ours, theirs = results["lanewise jacfwd in the lane"], results["jax vmap(jacfwd) (jit)"]
    err = float(np.max(np.abs(ours - theirs)))
    assert err <= 1e-10, err
    return f"max |lanewise - JAX| over all fitted parameters: {err:.1e}"


# ---------------------------------------------------------------------------- divergent loop


def escape_smooth(cr, ci):
    """A smooth observable of an escape-time iteration that leaves at a data-dependent step."""
    zr = zi = acc = 0.0
    for _ in range(200):
        zr, zi = zr * zr - zi * zi + cr, 2.0 * zr * zi + ci
        acc += math.exp(-(zr * zr + zi * zi))
        if zr * zr + zi * zi > 4.0:
            break
    return acc


def divergent_tools(derivative=lw.grad, name="lanewise grad"):
    primal = lw.vmap(escape_smooth)
    grad = lw.vmap(derivative(escape_smooth, argnums=(0, 1)))
    return {
        name: lambda cr, ci: np.stack(grad(cr, ci), axis=1),
        "lanewise primal": lambda cr, ci: primal(cr, ci),
    }


def divergent_data(n):
    rng = np.random.default_rng(5)
    return rng.uniform(-2.0, 0.6, n), rng.uniform(-1.2, 1.2, n)


def divergent_check(results, data):
    """Central differences on lanes whose nudged neighbours leave the loop at the same step."""
    cr, ci = data
    g = next(v for k, v in results.items() if k != "lanewise primal")
    h, checked, worst = 1e-7, 0, 0.0
    for k in range(0, cr.shape[0], max(1, cr.shape[0] // 400)):
        up, down = escape_smooth(cr[k] + h, ci[k]), escape_smooth(cr[k] - h, ci[k])
        fd = (up - down) / (2 * h)
        if abs(fd) < 1e3:  # away from the escape boundary, where one side leaves a step earlier
            worst = max(worst, abs(fd - g[k, 0]) / max(1.0, abs(fd)))
            checked += 1
    assert worst < 1e-4, worst
    return f"d/dcr against central differences on {checked} lanes: worst relative error {worst:.1e}"


# ---------------------------------------------------------------------------- runner

SIZES = {"greeks": {"full": 10**6, "quick": 10**4}, "fitting": {"full": 10**6, "quick": 10**4},
         "divergent": {"full": 10**6, "quick": 10**4}}


def workloads(size):
    n = {k: v[size] for k, v in SIZES.items()}
    yield ("Greeks: Asian call delta and vega, 64 steps", f"{n['greeks']:.0e} paths",
           (np.arange(n["greeks"], dtype=np.int64),), greeks_tools(), greeks_check,
           "jax value_and_grad (jit)", "lanewise value_and_grad", "lanewise primal")
    yield ("Per-pixel fit: 3 parameters, 32 samples, 10 Gauss-Newton steps", f"{n['fitting']:.0e} pixels",
           (pixels(n["fitting"]),), fitting_tools(), lambda r, d: fitting_check(r),
           "jax vmap(jacfwd) (jit)", "lanewise jacfwd in the lane", None)
    yield ("Divergent loop: gradient of an escape-time observable", f"{n['divergent']:.0e} lanes",
           divergent_data(n["divergent"]), divergent_tools(), divergent_check,
           None, "lanewise grad", "lanewise primal")
    yield ("Divergent loop, reverse mode (lw.jacrev: adjoint code)", f"{n['divergent']:.0e} lanes",
           divergent_data(n["divergent"]), divergent_tools(lw.jacrev, "lanewise jacrev"), divergent_check,
           None, "lanewise jacrev", "lanewise primal")


def run(size: str = "full", repeats: int = 5) -> list[dict]:
    rows = []
    for title, label, data, tools, check, peer, ours, primal in workloads(size):
        results = {name: fn(*data) for name, fn in tools.items()}  # warm-up: compiles
        note = check(results, data)
        times = {name: [] for name in tools}
        for _ in range(repeats):
            for name, fn in tools.items():
                t0 = time.perf_counter()
                fn(*data)
                times[name].append(time.perf_counter() - t0)
        med = {name: statistics.median(ts) for name, ts in times.items()}
        rows.append({"workload": title, "size": label, "median_s": med, "check": note,
                     "vs_peer": med[ours] / med[peer] if peer else None,
                     "vs_primal": med[ours] / med[primal] if primal else None})
    return rows


def table(rows) -> str:
    lines = ["| workload | size | lanewise derivative (s) | peer (s) | lanewise primal (s) | ÷ peer | ÷ primal |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        m = r["median_s"]
        ours = next(v for k, v in m.items() if k.startswith("lanewise") and "primal" not in k)
        peer = next((f"{v:.3f} ({k})" for k, v in m.items() if not k.startswith("lanewise")), "— (JAX cannot)")
        primal = next((f"{v:.3f}" for k, v in m.items() if "primal" in k), "—")
        lines.append(f"| {r['workload']} | {r['size']} | {ours:.3f} | {peer} | {primal} | "
                     f"{_ratio(r['vs_peer'])} | {_ratio(r['vs_primal'])} |")
    return "\n".join(lines)


def _ratio(value) -> str:
    return "—" if value is None else f"{value:.2f}x"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, nothing written")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    rows = run("quick" if args.quick else "full", args.repeats)
    print(f"threads: {numba.get_num_threads()}")
    print(table(rows))
    for r in rows:
        print(f"- {r['workload']}: {r['check']}")
    if not args.quick:
        save(rows, args.repeats)


def save(rows: list[dict], repeats: int) -> None:
    """benchmarks/results/autodiff.json: the rows, with the run's context."""
    from .report import save_rows

    save_rows("autodiff", rows, repeats)


if __name__ == "__main__":
    main()
