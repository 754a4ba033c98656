"""Measure the ulp error of every lanemath function against mpmath.

    python -m lanewise.lanemath.accuracy [--n N] [--func cos [--func exp ...]]
                                         [--dtype float64|float32] [--workers 2]
                                         [--no-write]

For each function the arguments are a mix (fixed seed) of

* log-uniformly spread magnitudes over the whole domain, both signs where the domain
  has them (so tiny, subnormal and huge arguments are all hit), and
* uniform values over the range where the function is not trivially saturated
  (e.g. ``[-745, 710]`` for exp, ``[-10, 10]`` for sin),

evaluated by a compiled loop over ``lanemath.<func>``.  float64 results are compared
with mpmath at 128-bit precision (the error of each point is computed in mpmath, so
subnormal results are measured exactly); float32 results with the float64 NumPy /
libm value, which is exact enough (its error is ~2**-29 ulp of float32).  The
error of a result ``r`` for the exact value ``y`` is ``|r - y| / ulp(y)`` where
``ulp(y)`` is the spacing of the floats in ``y``'s binade (the subnormal spacing
below the normal range).

Without ``--no-write`` the maxima go into ``benchmarks/results/lanemath_accuracy.json``
(only the rows measured are replaced; each keeps the date, machine and command of its
run) and the table rendered from that file into ``docs/lanemath.md`` between the
``accuracy`` markers.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mpc
import os
import shlex
import sys
import time
from dataclasses import dataclass
from typing import Callable

import numba
import numpy as np

from . import _results

F64_MAX = np.finfo(np.float64).max
F32_MAX = float(np.finfo(np.float32).max)


# ----------------------------------------------------------------------------- samplers

def _logu(rng, n, lo, hi):
    """Log-uniform magnitudes in [lo, hi]."""
    return np.exp(rng.uniform(np.log(lo), np.log(hi), n))


def _signs(rng, n):
    return np.where(rng.random(n) < 0.5, -1.0, 1.0)


def _mix(*parts):
    return np.concatenate(parts)


def _tiny(dtype):
    return 5e-324 if dtype == np.float64 else 1.401298464324817e-45


def _big(dtype):
    return F64_MAX if dtype == np.float64 else F32_MAX


def _sym(lo, hi, ulo, uhi):
    """Both signs, |x| log-uniform in [lo(dtype), hi(dtype)] plus uniform [ulo, uhi]."""
    def sample(rng, n, dtype):
        a = n // 2
        return (_mix(_signs(rng, a) * _logu(rng, a, lo(dtype), hi(dtype)),
                     rng.uniform(ulo, uhi, n - a)),)
    return sample


def _pos(lo, hi, ulo, uhi):
    def sample(rng, n, dtype):
        a = n // 2
        return (_mix(_logu(rng, a, lo(dtype), hi(dtype)), rng.uniform(ulo, uhi, n - a)),)
    return sample


def _const(v):
    return lambda dtype: v


def _log1p_sample(rng, n, dtype):
    a = n // 3
    return (_mix(_logu(rng, a, _tiny(dtype), _big(dtype)),
                 -_logu(rng, a, _tiny(dtype), 1.0),
                 rng.uniform(-1.0, 3.0, n - 2 * a)),)


def _log_sample(rng, n, dtype):
    a = n // 3
    return (_mix(_logu(rng, a, _tiny(dtype), _big(dtype)),
                 rng.uniform(0.0, 4.0, a),
                 1.0 + _signs(rng, n - 2 * a) * _logu(rng, n - 2 * a, 1e-17, 0.5)),)


def _unit_sample(rng, n, dtype):
    """asin/acos/atanh: (-1, 1), with points crowding 0 and +-1."""
    a = n // 3
    return (_mix(_signs(rng, a) * _logu(rng, a, _tiny(dtype), 1.0),
                 _signs(rng, a) * (1.0 - _logu(rng, a, 1e-17, 1.0)),
                 rng.uniform(-1.0, 1.0, n - 2 * a)),)


def _acosh_sample(rng, n, dtype):
    a = n // 2
    return (_mix(1.0 + _logu(rng, a, 1e-17, _big(dtype)), rng.uniform(1.0, 10.0, n - a)),)


def _pow_sample(rng, n, dtype):
    """x log-uniform over (0, max) (a quarter negative with integer y); y so that
    |y*log2|x|| is spread up to the overflow/underflow thresholds."""
    emax = 1100.0 if dtype == np.float64 else 140.0
    x = _logu(rng, n, _tiny(dtype), _big(dtype))
    l2 = np.abs(np.log2(x))
    l2 = np.where(l2 < 1e-3, 1e-3, l2)
    t = _signs(rng, n) * _logu(rng, n, 1e-6, emax)
    y = t / l2
    near1 = rng.random(n) < 0.15  # x close to 1, large y
    x = np.where(near1, 1.0 + _signs(rng, n) * _logu(rng, n, 1e-12, 0.1), x)
    y = np.where(near1, _signs(rng, n) * _logu(rng, n, 1.0, 1e6), y)
    neg = rng.random(n) < 0.25
    yi = np.round(y)
    y = np.where(neg, yi, y)
    x = np.where(neg, -x, x)
    return x, y


def _two_wide(rng, n, dtype):
    """atan2/hypot: both arguments log-uniform over the whole range, both signs,
    half the pairs with exponents within 60 of each other."""
    big = _big(dtype)
    y = _signs(rng, n) * _logu(rng, n, _tiny(dtype), big)
    x = _signs(rng, n) * _logu(rng, n, _tiny(dtype), big)
    close = rng.random(n) < 0.5
    with np.errstate(over="ignore"):
        x = np.where(close, _signs(rng, n) * np.abs(y) * _logu(rng, n, 2.0 ** -30, 2.0 ** 30), x)
    x = np.clip(x, -big, big)
    return y, x


# ----------------------------------------------------------------------------- registry

@dataclass(frozen=True)
class Spec:
    name: str
    nargs: int
    sample: Callable
    mp: Callable          # mpmath function of mpf arguments (exact reference)
    ref64: Callable       # float64 NumPy/libm reference (for float32 results)


def _mpfuncs():
    import mpmath as mp
    return mp


def _specs():
    mp = _mpfuncs()
    ln2 = mp.log(2)
    ln10 = mp.log(10)

    def mp_pow(x, y):
        if x < 0:
            r = mp.power(-x, y)
            return -r if int(y) % 2 else r
        return mp.power(x, y)

    erf_np = np.frompyfunc(math.erf, 1, 1)
    erfc_np = np.frompyfunc(math.erfc, 1, 1)
    big = lambda dt: _big(dt)  # noqa: E731
    tiny = lambda dt: _tiny(dt)  # noqa: E731
    S = [
        Spec("sin", 1, _sym(tiny, big, -10, 10), mp.sin, np.sin),
        Spec("cos", 1, _sym(tiny, big, -10, 10), mp.cos, np.cos),
        Spec("tan", 1, _sym(tiny, big, -10, 10), mp.tan, np.tan),
        Spec("exp", 1, _sym(tiny, _const(750.0), -745.2, 709.8), mp.exp, np.exp),
        Spec("exp2", 1, _sym(tiny, _const(1080.0), -1075.0, 1024.0),
             lambda x: mp.power(2, x), np.exp2),
        Spec("expm1", 1, _sym(tiny, _const(750.0), -40.0, 709.8), mp.expm1, np.expm1),
        Spec("log", 1, _log_sample, mp.log, np.log),
        Spec("log2", 1, _log_sample, lambda x: mp.log(x) / ln2, np.log2),
        Spec("log10", 1, _log_sample, lambda x: mp.log(x) / ln10, np.log10),
        Spec("log1p", 1, _log1p_sample, mp.log1p, np.log1p),
        Spec("pow", 2, _pow_sample, mp_pow, np.power),
        Spec("sqrt", 1, _pos(tiny, big, 0.0, 4.0), mp.sqrt, np.sqrt),
        Spec("cbrt", 1, _sym(tiny, big, -10, 10), lambda x: mp.sign(x) * mp.cbrt(abs(x)), np.cbrt),
        Spec("hypot", 2, _two_wide, mp.hypot, np.hypot),
        Spec("sinh", 1, _sym(tiny, _const(715.0), -20.0, 20.0), mp.sinh, np.sinh),
        Spec("cosh", 1, _sym(tiny, _const(715.0), -20.0, 20.0), mp.cosh, np.cosh),
        Spec("tanh", 1, _sym(tiny, _const(40.0), -5.0, 5.0), mp.tanh, np.tanh),
        Spec("asinh", 1, _sym(tiny, big, -5.0, 5.0), mp.asinh, np.arcsinh),
        Spec("acosh", 1, _acosh_sample, mp.acosh, np.arccosh),
        Spec("atanh", 1, _unit_sample, mp.atanh, np.arctanh),
        Spec("atan", 1, _sym(tiny, big, -5.0, 5.0), mp.atan, np.arctan),
        Spec("atan2", 2, _two_wide, mp.atan2, np.arctan2),
        Spec("asin", 1, _unit_sample, mp.asin, np.arcsin),
        Spec("acos", 1, _unit_sample, mp.acos, np.arccos),
        Spec("erf", 1, _sym(tiny, _const(30.0), -6.0, 6.0), mp.erf,
             lambda x: erf_np(x).astype(np.float64)),
        Spec("erfc", 1, _sym(tiny, _const(30.0), -6.0, 28.0), mp.erfc,
             lambda x: erfc_np(x).astype(np.float64)),
    ]
    return {s.name: s for s in S}


def sample_args(spec: Spec, n: int, dtype, seed: int = 0):
    rng = np.random.default_rng([seed, abs(hash(spec.name)) % 2**31, np.dtype(dtype).itemsize])
    args = spec.sample(rng, n, dtype)
    big = _big(dtype)
    return tuple(np.clip(a, -big, big).astype(dtype) for a in args)


# --------------------------------------------------------------------------- evaluation

_LOOPS: dict = {}


def _loop(fn, nargs):
    key = (fn, nargs)
    if key not in _LOOPS:
        if nargs == 1:
            @numba.njit(error_model="numpy")
            def loop(x, out):
                for i in range(numba.uint64(x.shape[0])):
                    out[i] = fn(x[i])
        else:
            @numba.njit(error_model="numpy")
            def loop(x, y, out):
                for i in range(numba.uint64(x.shape[0])):
                    out[i] = fn(x[i], y[i])
        _LOOPS[key] = loop
    return _LOOPS[key]


def evaluate(name: str, *args):
    """``lanemath.<name>`` applied elementwise by a compiled (vectorised) loop."""
    from lanewise import lanemath
    fn = lanemath.FUNCTIONS[name]
    out = np.empty_like(args[0])
    _loop(fn, len(args))(*args, out)
    return out


def _mp_errors(task):
    """Worker: ulp errors (float64 results) of one chunk, computed in mpmath."""
    name, args, ours = task
    import mpmath as mp
    mp.mp.prec = 128
    f = _specs()[name].mp
    errs = np.empty(len(ours))
    two = mp.mpf(2)
    for i in range(len(ours)):
        y = f(*[mp.mpf(float(a[i])) for a in args])
        r = ours[i]
        if not mp.isfinite(y) or y == 0 or abs(y) >= two ** 1024:
            exact = float(y) if mp.isfinite(y) and abs(y) < two ** 1024 else (
                math.copysign(math.inf, float(mp.sign(y))) if y != 0 and not mp.isnan(y) else float(y))
            errs[i] = 0.0 if (r == exact or (r != r and exact != exact)) else math.inf
            continue
        if r != r or math.isinf(r):
            # overflow boundary: the correctly rounded value may be inf
            errs[i] = 0.0 if (math.isinf(r) and abs(y) >= (two - two ** -53) * two ** 1023
                              and (r > 0) == (y > 0)) else math.inf
            continue
        man, exp = y.man, y.exp
        e = exp + int(abs(man)).bit_length() - 1        # floor(log2|y|)
        ulp = two ** (max(e, -1022) - 52)
        errs[i] = float(abs(mp.mpf(r) - y) / ulp)
    return errs


def ulp_errors64(name, args, ours, workers=2, chunk=2000):
    n = len(ours)
    tasks = [(name, tuple(a[i:i + chunk] for a in args), ours[i:i + chunk]) for i in range(0, n, chunk)]
    if workers > 1 and len(tasks) > 1:
        ctx = mpc.get_context("fork" if os.name == "posix" else "spawn")
        with ctx.Pool(workers) as pool:
            parts = pool.map(_mp_errors, tasks)
    else:
        parts = [_mp_errors(t) for t in tasks]
    return np.concatenate(parts)


def ulp_errors32(name, args, ours):
    spec = _specs()[name]
    with np.errstate(all="ignore"):
        ref = spec.ref64(*[a.astype(np.float64) for a in args])
    r = ours.astype(np.float64)
    a = np.abs(ref)
    e = np.floor(np.log2(np.where(a > 0, a, 1.0)))
    ulp = np.exp2(np.maximum(e, -126) - 23)
    with np.errstate(all="ignore"):
        err = np.abs(r - ref) / ulp
    with np.errstate(all="ignore"):
        ref32 = ref.astype(np.float32).astype(np.float64)
    special = ~np.isfinite(ref) | (ref == 0) | ~np.isfinite(ref32)
    same = (r == ref32) | (np.isnan(r) & np.isnan(ref32))
    err = np.where(special, np.where(same, 0.0, np.inf), err)
    return err


def measure(name, dtype=np.float64, n=20000, seed=0, workers=2):
    """``{"max": ..., "n": ..., "at": args of the worst point}`` for one function/dtype."""
    spec = _specs()[name]
    args = sample_args(spec, n, dtype, seed)
    ours = evaluate(name, *args)
    if np.dtype(dtype) == np.float64:
        errs = ulp_errors64(name, args, ours, workers)
    else:
        errs = ulp_errors32(name, args, ours)
    i = int(np.argmax(errs))
    return {"max": float(errs[i]), "n": len(errs), "at": tuple(float(a[i]) for a in args),
            "got": float(ours[i])}


# ------------------------------------------------------------------------------ report

def table(rows: dict) -> list[str]:
    """The accuracy table of ``rows`` (``{"cos/float64": {"max": ..., "n": ...}}``, a results
    file's), in the functions' order, with the runs it comes from."""
    def cells(name, dtype):
        r = rows.get(f"{name}/{dtype}")
        return (f"{r['max']:.3f}", f"{r['n']:,}") if r else ("", "")
    out = ["| function | max ulp float64 | points | max ulp float32 | points |", "|---|---:|---:|---:|---:|"]
    for name in _specs():
        if f"{name}/float64" in rows or f"{name}/float32" in rows:
            out.append("| `{}` | {} | {} | {} | {} |".format(name, *cells(name, "float64"), *cells(name, "float32")))
    return out + ["", _results.runs_line(rows)]


def _write_table(results, command):
    """Merge ``results`` into benchmarks/results/lanemath_accuracy.json and render its table."""
    rows = {f"{name}/{dt}": {"max": r["max"], "n": r["n"]} for name, per in results.items() for dt, r in per.items()}
    _results.write_block("accuracy", table(_results.merge("accuracy", rows, command)))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--func", action="append")
    p.add_argument("--dtype", action="append", choices=["float64", "float32"])
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-write", action="store_true")
    a = p.parse_args(argv)
    command = shlex.join(["python", "-m", "lanewise.lanemath.accuracy", *(sys.argv[1:] if argv is None else argv)])
    names = a.func or list(_specs())
    dtypes = a.dtype or ["float64", "float32"]
    results = {}
    for name in names:
        results[name] = {}
        for dt in dtypes:
            t = time.perf_counter()
            r = measure(name, np.dtype(dt).type, a.n, a.seed, a.workers)
            results[name][dt] = r
            print(f"{name:6s} {dt}: max {r['max']:.4f} ulp over {r['n']} points "
                  f"(worst at {r['at']} -> {r['got']!r}; {time.perf_counter() - t:.1f}s)",
                  flush=True)
        if not a.no_write:  # after each function, so a long run keeps what it measured
            _write_table({name: results[name]}, command)
    return results


if __name__ == "__main__":
    main()
