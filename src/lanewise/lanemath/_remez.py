"""Development tool: minimax polynomial coefficients (needs mpmath; not imported at run time).

``fit(f, a, b, powers, weight)`` returns doubles ``c`` minimising
``max |weight(t) * (f(t) - sum(c[i] * t**powers[i]))|`` over ``[a, b]`` by the Remez
exchange on a dense Chebyshev grid, in 160-bit arithmetic, then rounds the coefficients to double
and reports the error of the rounded polynomial.  The coefficients in the lanemath modules were made
with it; ``python -m lanewise.lanemath._remez`` prints them again.
"""

from __future__ import annotations

try:
    import mpmath as mp
except ImportError:  # pragma: no cover - only the development tool needs it
    mp = None
else:
    mp.mp.prec = 160


def _grid(a, b, n):
    a, b = mp.mpf(a), mp.mpf(b)
    return [(a + b) / 2 + (b - a) / 2 * mp.cos(mp.pi * (n - 1 - i) / (n - 1)) for i in range(n)]


def _remez(f, w, xs, powers, iters=40):
    fx = [f(x) for x in xs]
    wx = [w(x) for x in xs]
    n = len(powers)
    m = len(xs)
    ref = [int(round(i * (m - 1) / n)) for i in range(n + 1)]
    best = None
    for _ in range(iters):
        A = mp.matrix(n + 1, n + 1)
        rhs = mp.matrix(n + 1, 1)
        for row, i in enumerate(ref):
            for col, p in enumerate(powers):
                A[row, col] = xs[i] ** p
            A[row, n] = (-1) ** row / wx[i]
            rhs[row] = fx[i]
        try:
            sol = mp.lu_solve(A, rhs)
        except ZeroDivisionError:
            break
        c = [sol[i] for i in range(n)]
        E = abs(sol[n])
        err = [wx[i] * (fx[i] - sum(ci * xs[i] ** p for ci, p in zip(c, powers))) for i in range(m)]
        emax = max(abs(e) for e in err)
        if best is None or emax < best[1]:
            best = (c, emax)
        if emax <= E * (1 + mp.mpf(2) ** -20):
            break
        # local extrema with alternating signs
        ext = []
        for i in range(m):
            left = err[i - 1] if i > 0 else None
            right = err[i + 1] if i < m - 1 else None
            e = err[i]
            if (left is None or abs(e) >= abs(left)) and (right is None or abs(e) >= abs(right)):
                ext.append(i)
        merged = []
        for i in ext:
            if merged and (err[i] >= 0) == (err[merged[-1]] >= 0):
                if abs(err[i]) > abs(err[merged[-1]]):
                    merged[-1] = i
            else:
                merged.append(i)
        while len(merged) > n + 1:
            if abs(err[merged[0]]) < abs(err[merged[-1]]):
                merged.pop(0)
            else:
                merged.pop()
        if len(merged) < n + 1:
            break
        ref = merged
    return best


def fit(f, a, b, powers, weight=lambda t: 1, npts=2000):
    """Minimax fit, coefficients rounded to double; returns (coeffs, max weighted error)."""
    xs = _grid(a, b, npts)
    powers = list(powers)
    best = _remez(f, weight, xs, powers)
    coeffs = [float(c) for c in best[0]]
    err = max(abs(weight(x) * (f(x) - sum(mp.mpf(c) * x ** p for c, p in zip(coeffs, powers))))
              for x in xs)
    return coeffs, float(err)


if __name__ == "__main__":  # pragma: no cover - development aid
    import sys
    print("usage: import and call fit(); see the lanemath modules for the recipes", file=sys.stderr)


def erfcx_table(degree=9, per_binade=16, binades=range(-1, 5)):
    """Piecewise minimax fits of ``erfcx(x) = erfc(x) * exp(x*x)`` for :mod:`.special`.

    Intervals: each binade ``[2**e, 2**(e+1))`` for ``e`` in ``binades`` cut into
    ``per_binade`` equal parts (so the interval index is a bit field of ``x``); on each,
    ``erfcx(c + t) = c0 + c1*t + ...`` about the midpoint ``c``, with ``c0`` split into
    a double-double.  Returns ``(rows, worst relative error)``; each row is
    ``[c0_hi, c0_lo, c1, ..., c_degree]``.
    """
    rows = []
    worst = mp.mpf(0)
    for e in binades:
        lo = mp.mpf(2) ** e
        w = lo / per_binade
        for j in range(per_binade):
            a = lo + j * w
            b = a + w
            c = (a + b) / 2

            def F(t, c=c):
                x = c + t
                return mp.erfc(x) * mp.exp(x * x)

            f0 = F(mp.mpf(0))
            coeffs, _ = _remez_fit_exact(lambda t: F(t) - f0, -w / 2, w / 2, list(range(1, degree + 1)))
            c0h = float(f0)
            c0l = float(f0 - mp.mpf(c0h))
            row = [c0h, c0l] + coeffs
            xs = _grid(-w / 2, w / 2, 200)
            err = max(abs(F(t) - (mp.mpf(c0h) + mp.mpf(c0l)
                                  + sum(mp.mpf(ci) * t ** (i + 1) for i, ci in enumerate(coeffs))))
                      / f0 for t in xs)
            worst = max(worst, err)
            rows.append(row)
    return rows, float(worst)


def _remez_fit_exact(f, a, b, powers, npts=200):
    xs = _grid(a, b, npts)
    best = _remez(f, lambda t: 1, xs, powers)
    return [float(c) for c in best[0]], best[1]
