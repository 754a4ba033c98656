"""W3: per-series trading rule — fast/slow EMA crossover, P&L carried: a scan per series."""
import numpy as np

from .harness import Bar, Tolerance, jax_tool, lanewise_tool, numba_tool

ID = "W3"
TITLE = "EMA-crossover backtest, a scan per series"
SIZES = {"full": 2000, "quick": 200, "tiny": 8}  # number of series
STEPS = 5000
FAST, SLOW = 0.1, 0.02  # EMA weights of the newest price
SCALING = {"full": (500, 1000, 2000), "quick": (50, 100, 200)}
REF = "numba-prange"
# Final P&Ls are sums of ~5000 terms of size ~1 that cancel; the peers do the
# same arithmetic in the same order (no FMA on the NumPy/Numba side, XLA may
# contract), so they agree to ~1e-13; atol covers P&Ls near zero.
TOL = Tolerance(rtol=1e-9, atol=1e-9)
BAR = Bar(peer="numba-prange", factor=1.0, stretch=0.2, stretch_peer="jax-vmap-scan",
          text="≤ 1.0× Numba; ≤ 0.2× JAX")
NOTE = ("W3: every series starts flat (position 0) with both EMAs at its first price and "
        "scans all its prices; each step books `pos * (price - last)` with the previous "
        "position, then updates the EMAs (`e += a * (price - e)`) and flips the position "
        "on a strict crossover (ties keep it). Result: the final P&L of each series.")


def step(carry, price):
    """One time step of one series (the lanewise and reference semantics)."""
    fast, slow, pos, pnl, last = carry
    pnl = pnl + pos * (price - last)
    fast = fast + FAST * (price - fast)
    slow = slow + SLOW * (price - slow)
    if fast > slow:
        pos = 1.0
    elif fast < slow:
        pos = -1.0
    return (fast, slow, pos, pnl, price), None


def setup(n, seed=3, steps=STEPS):
    """``n`` geometric random walks from 100 (1% daily volatility), row-major (series, time)."""
    rng = np.random.default_rng(seed)
    logp = rng.standard_normal((n, steps))
    logp *= 0.01
    np.cumsum(logp, axis=1, out=logp)
    np.exp(logp, out=logp)
    logp *= 100.0
    return (logp,)


def describe(data):
    return "{} series × {} steps".format(*data[0].shape)


def numpy_time_loop(data):
    """A Python loop over time, each step vectorised across all series."""
    (prices,) = data
    last = prices[:, 0].copy()
    fast, slow = last.copy(), last.copy()
    pos, pnl = np.zeros_like(last), np.zeros_like(last)
    tmp = np.empty_like(last)
    for t in range(prices.shape[1]):  # a strided column: as fast here as a transposed copy
        price = prices[:, t]
        np.subtract(price, last, out=tmp)
        tmp *= pos
        pnl += tmp
        np.subtract(price, fast, out=tmp)
        tmp *= FAST
        fast += tmp
        np.subtract(price, slow, out=tmp)
        tmp *= SLOW
        slow += tmp
        pos[fast > slow] = 1.0
        pos[fast < slow] = -1.0
        last = price
    return pnl


def _numba(numba):
    @numba.njit(parallel=True)
    def backtest(prices):
        n, steps = prices.shape
        out = np.empty(n)
        for i in numba.prange(n):
            last = prices[i, 0]
            fast = slow = last
            pos = pnl = 0.0
            for t in range(steps):
                price = prices[i, t]
                pnl += pos * (price - last)
                fast += FAST * (price - fast)
                slow += SLOW * (price - slow)
                if fast > slow:
                    pos = 1.0
                elif fast < slow:
                    pos = -1.0
                last = price
            out[i] = pnl
        return out

    return backtest


def _jax(jax):
    jnp, lax = jax.numpy, jax.lax

    def jstep(carry, price):
        fast, slow, pos, pnl, last = carry
        pnl = pnl + pos * (price - last)
        fast = fast + FAST * (price - fast)
        slow = slow + SLOW * (price - slow)
        pos = jnp.where(fast > slow, 1.0, jnp.where(fast < slow, -1.0, pos))
        return (fast, slow, pos, pnl, price), None

    def series(p):
        init = (p[0], p[0], jnp.zeros_like(p[0]), jnp.zeros_like(p[0]), p[0])
        return lax.scan(jstep, init, p)[0][3]

    return jax.vmap(series)


def _lanewise(lw):
    return lw.vmap(lambda p: lw.scan(step, (p[0], p[0], 0.0, 0.0, p[0]), p)[0][3])


def tools():
    return {
        "numpy-time-loop": numpy_time_loop,
        "jax-vmap-scan": jax_tool(_jax),
        "numba-prange": numba_tool(_numba),
        "lanewise": lanewise_tool(_lanewise),
    }
