"""Farnocchia's Kepler propagator (hapsira, the maintained fork of poliastro): per-orbit root finding.

Each lane propagates one orbit by a time of flight: true anomaly -> time since periapsis ->
Kepler's equation solved again by Newton iterations (elliptic, hyperbolic, or, near e = 1,
Farnocchia's near-parabolic series with its own convergence loops). Branches per orbit type,
a different number of Newton steps per lane, and `assert`s inside the helpers as hapsira has them.
"""
from __future__ import annotations

import types
from math import acos, acosh, asinh, atan, atanh, cos, cosh, nan, pi, sin, sinh, sqrt, tan, tanh

import numpy as np

from benchmarks.harness import Tolerance

NAME = "phys_kepler"
TITLE = "Kepler propagation (Farnocchia)"
DOMAIN = "astrodynamics"
SOURCE = (
    "pleiszenburg/hapsira (MIT; fork of poliastro/poliastro, MIT, Copyright (c) 2012-2023 Juan Luis "
    "Cano Rodriguez and the poliastro development team), src/hapsira/core/angles.py and "
    "src/hapsira/core/propagation/farnocchia.py: farnocchia_coe_vf propagates many orbits (classical "
    "elements + time of flight -> true anomaly), used by hapsira's FarnocchiaPropagator. Reproduced "
    "faithfully: the scalar helpers under hapsira's `hjit` (numba.jit(signature, nopython=True, "
    "inline='never')) and the ufunc under `vjit` (numba.vectorize(signature, nopython=True)) with "
    "target='parallel' (hapsira's HAPSIRA_TARGET=parallel setting; the default 'cpu' target is "
    "single-threaded). Changed: the jit settings are applied inside project() instead of hapsira's "
    "jit module, and angles.py's signature 'f(f,f,f,f,i64)' is written 'f8(f8,f8,f8,f8,i8)' (numba "
    "has no type named i64)."
)
SOURCE_SHORT = "pleiszenburg/hapsira src/hapsira/core/propagation/farnocchia.py"
SIZES = {"full": 500_000, "quick": 50_000, "tiny": 500}
# Newton steps stop at |step| < 1.48e-8: the results agree to the ulp unless 1-ulp math
# differences move a lane across that threshold (then ~1e-16 relative, quadratic convergence).
TOL = Tolerance(rtol=1e-9, atol=1e-11)

K_EARTH = 398600.4418  # km^3 / s^2

# --------------------------------------------------------------------------- angles.py
_TOL = 1.48e-08


def E_to_M_hf(E, ecc):
    M = E - ecc * sin(E)
    return M


def F_to_M_hf(F, ecc):
    M = ecc * sinh(F) - F
    return M


def _kepler_equation_hf(E, M, ecc):
    return E_to_M_hf(E, ecc) - M


def _kepler_equation_prime_hf(E, M, ecc):
    return 1 - ecc * cos(E)


def _kepler_equation_hyper_hf(F, M, ecc):
    return F_to_M_hf(F, ecc) - M


def _kepler_equation_prime_hyper_hf(F, M, ecc):
    return ecc * cosh(F) - 1


def _newton_elliptic_hf(p0, M, ecc, tol, maxiter):
    for _ in range(maxiter):
        fval = _kepler_equation_hf(p0, M, ecc)
        fder = _kepler_equation_prime_hf(p0, M, ecc)
        newton_step = fval / fder
        p = p0 - newton_step
        if abs(p - p0) < tol:
            return p
        p0 = p
    return nan


def _newton_hyperbolic_hf(p0, M, ecc, tol, maxiter):
    for _ in range(maxiter):
        fval = _kepler_equation_hyper_hf(p0, M, ecc)
        fder = _kepler_equation_prime_hyper_hf(p0, M, ecc)
        newton_step = fval / fder
        p = p0 - newton_step
        if abs(p - p0) < tol:
            return p
        p0 = p
    return nan


def D_to_nu_hf(D):
    return 2 * atan(D)


def nu_to_D_hf(nu):
    return tan(nu / 2)


def nu_to_E_hf(nu, ecc):
    E = 2 * atan(sqrt((1 - ecc) / (1 + ecc)) * tan(nu / 2))
    return E


def nu_to_F_hf(nu, ecc):
    F = 2 * atanh(sqrt((ecc - 1) / (ecc + 1)) * tan(nu / 2))
    return F


def E_to_nu_hf(E, ecc):
    nu = 2 * atan(sqrt((1 + ecc) / (1 - ecc)) * tan(E / 2))
    return nu


def F_to_nu_hf(F, ecc):
    nu = 2 * atan(sqrt((ecc + 1) / (ecc - 1)) * tanh(F / 2))
    return nu


def M_to_E_hf(M, ecc):
    if -pi < M < 0 or pi < M:
        E0 = M - ecc
    else:
        E0 = M + ecc
    E = _newton_elliptic_hf(E0, M, ecc, _TOL, 50)
    return E


def M_to_F_hf(M, ecc):
    F0 = asinh(M / ecc)
    F = _newton_hyperbolic_hf(F0, M, ecc, _TOL, 100)
    return F


def M_to_D_hf(M):
    B = 3.0 * M / 2.0
    A = (B + (1.0 + B**2) ** 0.5) ** (2.0 / 3.0)
    D = 2 * A * B / (1 + A + A**2)
    return D


def D_to_M_hf(D):
    M = D + D**3 / 3
    return M


# ------------------------------------------------------------------ propagation/farnocchia.py
FARNOCCHIA_DELTA = 1e-2

_ATOL = 1e-12
_MAXITER = 50


def _S_x_hf(ecc, x, atol):
    assert abs(x) < 1
    S = 0
    k = 0
    while True:
        S_old = S
        S += (ecc - 1 / (2 * k + 3)) * x**k
        k += 1
        if abs(S - S_old) < atol:
            return S


def _dS_x_alt_hf(ecc, x, atol):
    # Notice that this is not exactly
    # the partial derivative of S with respect to D,
    # but the result of arranging the terms
    # in section 4.2 of Farnocchia et al. 2013
    assert abs(x) < 1
    S = 0
    k = 0
    while True:
        S_old = S
        S += (ecc - 1 / (2 * k + 3)) * (2 * k + 3) * x**k
        k += 1
        if abs(S - S_old) < atol:
            return S


def _kepler_equation_prime_near_parabolic_hf(D, M, ecc):
    x = (ecc - 1.0) / (ecc + 1.0) * (D**2)
    assert abs(x) < 1
    S = _dS_x_alt_hf(ecc, x, _ATOL)
    return sqrt(2.0 / (1.0 + ecc)) + sqrt(2.0 / (1.0 + ecc) ** 3) * (D**2) * S


def _D_to_M_near_parabolic_hf(D, ecc):
    x = (ecc - 1.0) / (ecc + 1.0) * (D**2)
    assert abs(x) < 1
    S = _S_x_hf(ecc, x, _ATOL)
    return sqrt(2.0 / (1.0 + ecc)) * D + sqrt(2.0 / (1.0 + ecc) ** 3) * (D**3) * S


def _kepler_equation_near_parabolic_hf(D, M, ecc):
    return _D_to_M_near_parabolic_hf(D, ecc) - M


def _M_to_D_near_parabolic_hf(M, ecc, tol, maxiter):
    D0 = M_to_D_hf(M)

    for _ in range(maxiter):
        fval = _kepler_equation_near_parabolic_hf(D0, M, ecc)
        fder = _kepler_equation_prime_near_parabolic_hf(D0, M, ecc)

        newton_step = fval / fder
        D = D0 - newton_step
        if abs(D - D0) < tol:
            return D

        D0 = D

    return nan


def delta_t_from_nu_hf(nu, ecc, k, q, delta):
    assert -pi <= nu < pi
    if ecc < 1 - delta:
        # Strong elliptic
        E = nu_to_E_hf(nu, ecc)  # (-pi, pi]
        M = E_to_M_hf(E, ecc)  # (-pi, pi]
        n = sqrt(k * (1 - ecc) ** 3 / q**3)
    elif 1 - delta <= ecc < 1:
        E = nu_to_E_hf(nu, ecc)  # (-pi, pi]
        if delta <= 1 - ecc * cos(E):
            # Strong elliptic
            M = E_to_M_hf(E, ecc)  # (-pi, pi]
            n = sqrt(k * (1 - ecc) ** 3 / q**3)
        else:
            # Near parabolic
            D = nu_to_D_hf(nu)  # (-∞, ∞)
            M = _D_to_M_near_parabolic_hf(D, ecc)
            n = sqrt(k / (2 * q**3))
    elif ecc == 1:
        # Parabolic
        D = nu_to_D_hf(nu)  # (-∞, ∞)
        M = D_to_M_hf(D)  # (-∞, ∞)
        n = sqrt(k / (2 * q**3))
    elif 1 + ecc * cos(nu) < 0:
        # Unfeasible region
        return nan
    elif 1 < ecc <= 1 + delta:
        F = nu_to_F_hf(nu, ecc)  # (-∞, ∞)
        if delta <= ecc * cosh(F) - 1:
            # Strong hyperbolic
            M = F_to_M_hf(F, ecc)  # (-∞, ∞)
            n = sqrt(k * (ecc - 1) ** 3 / q**3)
        else:
            # Near parabolic
            D = nu_to_D_hf(nu)  # (-∞, ∞)
            M = _D_to_M_near_parabolic_hf(D, ecc)  # (-∞, ∞)
            n = sqrt(k / (2 * q**3))
    elif 1 + delta < ecc:
        # Strong hyperbolic
        F = nu_to_F_hf(nu, ecc)  # (-∞, ∞)
        M = F_to_M_hf(F, ecc)  # (-∞, ∞)
        n = sqrt(k * (ecc - 1) ** 3 / q**3)
    else:
        raise RuntimeError

    return M / n


def _nu_from_delta_t_hf(delta_t, ecc, k, q, delta):
    if ecc < 1 - delta:
        # Strong elliptic
        n = sqrt(k * (1 - ecc) ** 3 / q**3)
        M = n * delta_t
        # This might represent several revolutions,
        # so we wrap the true anomaly
        E = M_to_E_hf((M + pi) % (2 * pi) - pi, ecc)
        nu = E_to_nu_hf(E, ecc)
    elif 1 - delta <= ecc < 1:
        E_delta = acos((1 - delta) / ecc)
        # We compute M assuming we are in the strong elliptic case
        # and verify later
        n = sqrt(k * (1 - ecc) ** 3 / q**3)
        M = n * delta_t
        # We check against abs(M) because E_delta could also be negative
        if E_to_M_hf(E_delta, ecc) <= abs(M):
            # Strong elliptic, proceed
            # This might represent several revolutions,
            # so we wrap the true anomaly
            E = M_to_E_hf((M + pi) % (2 * pi) - pi, ecc)
            nu = E_to_nu_hf(E, ecc)
        else:
            # Near parabolic, recompute M
            n = sqrt(k / (2 * q**3))
            M = n * delta_t
            D = _M_to_D_near_parabolic_hf(M, ecc, _TOL, _MAXITER)
            nu = D_to_nu_hf(D)
    elif ecc == 1:
        # Parabolic
        n = sqrt(k / (2 * q**3))
        M = n * delta_t
        D = M_to_D_hf(M)
        nu = D_to_nu_hf(D)
    elif 1 < ecc <= 1 + delta:
        F_delta = acosh((1 + delta) / ecc)
        # We compute M assuming we are in the strong hyperbolic case
        # and verify later
        n = sqrt(k * (ecc - 1) ** 3 / q**3)
        M = n * delta_t
        # We check against abs(M) because F_delta could also be negative
        if F_to_M_hf(F_delta, ecc) <= abs(M):
            # Strong hyperbolic, proceed
            F = M_to_F_hf(M, ecc)
            nu = F_to_nu_hf(F, ecc)
        else:
            # Near parabolic, recompute M
            n = sqrt(k / (2 * q**3))
            M = n * delta_t
            D = _M_to_D_near_parabolic_hf(M, ecc, _TOL, _MAXITER)
            nu = D_to_nu_hf(D)
    # elif 1 + delta < ecc:
    else:
        # Strong hyperbolic
        n = sqrt(k * (ecc - 1) ** 3 / q**3)
        M = n * delta_t
        F = M_to_F_hf(M, ecc)
        nu = F_to_nu_hf(F, ecc)

    return nu


def farnocchia_coe_hf(k, p, ecc, inc, raan, argp, nu, tof):
    """One orbit (the lane): hapsira's scalar farnocchia_coe, which farnocchia_coe_vf maps."""
    q = p / (1.0 + ecc)

    delta_t0 = delta_t_from_nu_hf(nu, ecc, k, q, FARNOCCHIA_DELTA)
    delta_t = delta_t0 + tof

    return _nu_from_delta_t_hf(delta_t, ecc, k, q, FARNOCCHIA_DELTA)


def farnocchia_coe_vf(k, p, ecc, inc, raan, argp, nu, tof):
    """
    Vectorized farnocchia_coe
    """

    return farnocchia_coe_hf(k, p, ecc, inc, raan, argp, nu, tof)


lanes = (farnocchia_coe_hf,)

# hapsira's signatures ("f" -> "f8"), callees first: explicit signatures compile eagerly
_SIGS = {
    "E_to_M_hf": "f8(f8,f8)", "F_to_M_hf": "f8(f8,f8)",
    "_kepler_equation_hf": "f8(f8,f8,f8)", "_kepler_equation_prime_hf": "f8(f8,f8,f8)",
    "_kepler_equation_hyper_hf": "f8(f8,f8,f8)", "_kepler_equation_prime_hyper_hf": "f8(f8,f8,f8)",
    "_newton_elliptic_hf": "f8(f8,f8,f8,f8,i8)", "_newton_hyperbolic_hf": "f8(f8,f8,f8,f8,i8)",
    "D_to_nu_hf": "f8(f8)", "nu_to_D_hf": "f8(f8)", "nu_to_E_hf": "f8(f8,f8)",
    "nu_to_F_hf": "f8(f8,f8)", "E_to_nu_hf": "f8(f8,f8)", "F_to_nu_hf": "f8(f8,f8)",
    "M_to_E_hf": "f8(f8,f8)", "M_to_F_hf": "f8(f8,f8)", "M_to_D_hf": "f8(f8)", "D_to_M_hf": "f8(f8)",
    "_S_x_hf": "f8(f8,f8,f8)", "_dS_x_alt_hf": "f8(f8,f8,f8)",
    "_kepler_equation_prime_near_parabolic_hf": "f8(f8,f8,f8)",
    "_D_to_M_near_parabolic_hf": "f8(f8,f8)", "_kepler_equation_near_parabolic_hf": "f8(f8,f8,f8)",
    "_M_to_D_near_parabolic_hf": "f8(f8,f8,f8,i8)",
    "delta_t_from_nu_hf": "f8(f8,f8,f8,f8,f8)", "_nu_from_delta_t_hf": "f8(f8,f8,f8,f8,f8)",
    "farnocchia_coe_hf": "f8(f8,f8,f8,f8,f8,f8,f8,f8)",
}


def _rebind(names, decorate):
    """Copies of this module's functions ``names`` whose globals see each other's compiled
    versions (what decorating them in hapsira's modules does), compiled in order."""
    g = dict(globals())
    for name in names:
        f = globals()[name]
        g[name] = decorate(name, types.FunctionType(f.__code__, g, name, f.__defaults__))
    return g


# ------------------------------------------------------------------------------ the tools
def setup(n):
    rng = np.random.default_rng(7)
    kind = rng.choice(4, size=n, p=[0.7, 0.1, 0.1, 0.1])
    ecc = np.where(kind == 0, rng.uniform(0.0, 0.95, n),                 # strong elliptic
          np.where(kind == 1, rng.uniform(0.99, 0.9999, n),              # near-parabolic, e < 1
          np.where(kind == 2, rng.uniform(1.0001, 1.01, n),              # near-parabolic, e > 1
                   rng.uniform(1.02, 3.0, n))))                          # strong hyperbolic
    ecc[rng.random(n) < 0.005] = 1.0                                     # a few exact parabolas
    p = rng.uniform(7000.0, 50000.0, n)                                  # semi-latus rectum, km
    # true anomaly: anywhere on an ellipse; inside the asymptotes of a hyperbola
    nu_max = np.where(ecc < 1.0, np.pi, 0.9 * np.arccos(-1.0 / np.maximum(ecc, 1.0)))
    nu = np.where(ecc < 1.0, rng.uniform(-np.pi, np.pi, n), rng.uniform(-1.0, 1.0, n) * nu_max)
    inc, raan, argp = rng.uniform(0, np.pi, n), rng.uniform(0, 2 * np.pi, n), rng.uniform(0, 2 * np.pi, n)
    tof = rng.uniform(-3 * 86400.0, 3 * 86400.0, n)                      # +-3 days, s
    return (K_EARTH, p, ecc, inc, raan, argp, nu, tof)


def _newton(f, fprime, p0, args, tol, maxiter):
    """Vectorised Newton: every element iterates until its own step is below tol."""
    out = np.full_like(p0, np.nan)
    idx = np.arange(p0.size)
    for _ in range(maxiter):
        step = f(p0, *args) / fprime(p0, *args)
        p = p0 - step
        done = np.abs(p - p0) < tol
        out[idx[done]] = p[done]
        keep = ~done
        idx, p0, args = idx[keep], p[keep], tuple(a[keep] for a in args)
        if idx.size == 0:
            break
    return out


def _series(ecc, x, term, atol=_ATOL):
    """Vectorised S_x / dS_x_alt: each element sums until its own term is below atol."""
    S = np.zeros_like(x)
    out = np.empty_like(x)
    idx = np.arange(x.size)
    k = 0
    while idx.size:
        S_old = S
        S = S + term(ecc, k) * x**k
        done = np.abs(S - S_old) < atol
        out[idx[done]] = S[done]
        idx, S, ecc, x = idx[~done], S[~done], ecc[~done], x[~done]
        k += 1
    return out


def _ref_D_to_M_np(D, ecc):
    x = (ecc - 1.0) / (ecc + 1.0) * D**2
    assert np.all(np.abs(x) < 1)
    S = _series(ecc, x, lambda e, k: e - 1 / (2 * k + 3))
    return np.sqrt(2.0 / (1.0 + ecc)) * D + np.sqrt(2.0 / (1.0 + ecc) ** 3) * D**3 * S


def _ref_M_to_D_np(M, ecc):
    B = 3.0 * M / 2.0
    A = (B + (1.0 + B**2) ** 0.5) ** (2.0 / 3.0)
    D0 = 2 * A * B / (1 + A + A**2)

    def f(D, M, ecc):
        return _ref_D_to_M_np(D, ecc) - M

    def fp(D, M, ecc):
        x = (ecc - 1.0) / (ecc + 1.0) * D**2
        S = _series(ecc, x, lambda e, k: (e - 1 / (2 * k + 3)) * (2 * k + 3))
        return np.sqrt(2.0 / (1.0 + ecc)) + np.sqrt(2.0 / (1.0 + ecc) ** 3) * D**2 * S

    return _newton(f, fp, D0, (M, ecc), _TOL, _MAXITER)


def _ref_M_to_E(M, ecc):
    E0 = np.where(((-np.pi < M) & (M < 0)) | (np.pi < M), M - ecc, M + ecc)
    return _newton(lambda E, M, e: E - e * np.sin(E) - M, lambda E, M, e: 1 - e * np.cos(E),
                   E0, (M, ecc), _TOL, 50)


def _ref_M_to_F(M, ecc):
    return _newton(lambda F, M, e: e * np.sinh(F) - F - M, lambda F, M, e: e * np.cosh(F) - 1,
                   np.arcsinh(M / ecc), (M, ecc), _TOL, 100)


def reference(k, p, ecc, inc, raan, argp, nu, tof):
    """The same algorithm written array-at-a-time: each regime as a boolean mask, each Newton
    iteration / series term applied to the elements that have not converged yet."""
    with np.errstate(invalid="ignore"):
        return _reference(k, p, ecc, nu, tof)


def _reference(k, p, ecc, nu, tof):
    delta = FARNOCCHIA_DELTA
    q = p / (1.0 + ecc)
    n_ell = np.sqrt(k * np.abs(1 - ecc) ** 3 / q**3)
    n_par = np.sqrt(k / (2 * q**3))
    # ---- delta_t_from_nu
    M0, n0 = np.full_like(nu, np.nan), np.full_like(nu, np.nan)
    E = 2 * np.arctan(np.sqrt(np.abs((1 - ecc) / (1 + ecc))) * np.tan(nu / 2))
    F = 2 * np.arctanh(np.sqrt(np.abs((ecc - 1) / (ecc + 1))) * np.tan(nu / 2))
    ell = ecc < 1
    ell_strong = ell & ((ecc < 1 - delta) | (delta <= 1 - ecc * np.cos(E)))
    hyp = ecc > 1
    hyp_strong = hyp & ((1 + delta < ecc) | (delta <= ecc * np.cosh(F) - 1))
    near = (ell & ~ell_strong) | (hyp & ~hyp_strong)
    M0[ell_strong] = (E - ecc * np.sin(E))[ell_strong]
    M0[hyp_strong] = (ecc * np.sinh(F) - F)[hyp_strong]
    n0[ell_strong | hyp_strong] = n_ell[ell_strong | hyp_strong]
    D = np.tan(nu / 2)
    M0[near] = _ref_D_to_M_np(D[near], ecc[near])
    par = ecc == 1
    M0[par] = (D + D**3 / 3)[par]
    n0[near | par] = n_par[near | par]
    dt = M0 / n0 + tof
    # ---- nu_from_delta_t
    out = np.full_like(nu, np.nan)
    M = n_ell * dt
    E_delta = np.arccos(np.minimum((1 - delta) / ecc, 1.0))
    ell_strong = (ecc < 1 - delta) | (ell & (ecc >= 1 - delta) & (E_delta - ecc * np.sin(E_delta) <= np.abs(M)))
    Ms = (M + np.pi) % (2 * np.pi) - np.pi
    Es = _ref_M_to_E(Ms[ell_strong], ecc[ell_strong])
    e_s = ecc[ell_strong]
    out[ell_strong] = 2 * np.arctan(np.sqrt((1 + e_s) / (1 - e_s)) * np.tan(Es / 2))
    F_delta = np.arccosh(np.maximum((1 + delta) / ecc, 1.0))
    hyp_strong = (1 + delta < ecc) | (hyp & (ecc <= 1 + delta) & (ecc * np.sinh(F_delta) - F_delta <= np.abs(M)))
    Fs = _ref_M_to_F(M[hyp_strong], ecc[hyp_strong])
    e_h = ecc[hyp_strong]
    out[hyp_strong] = 2 * np.arctan(np.sqrt((e_h + 1) / (e_h - 1)) * np.tanh(Fs / 2))
    near = (ell & ~ell_strong) | (hyp & ~hyp_strong)
    Mp = n_par * dt
    out[near] = 2 * np.arctan(_ref_M_to_D_np(Mp[near], ecc[near]))
    B = 3.0 * Mp[par] / 2.0
    A = (B + (1.0 + B**2) ** 0.5) ** (2.0 / 3.0)
    out[par] = 2 * np.arctan(2 * A * B / (1 + A + A**2))
    return out


def project(numba):
    def hjit(name, f):
        return numba.jit(_SIGS[name], nopython=True, inline="never")(f)

    g = _rebind(list(_SIGS), hjit)
    vf = types.FunctionType(farnocchia_coe_vf.__code__, g, "farnocchia_coe_vf")
    return numba.vectorize(["f8(f8,f8,f8,f8,f8,f8,f8,f8)"], target="parallel", nopython=True)(vf)


def hand_prange(numba):
    g = _rebind(list(_SIGS), lambda name, f: numba.njit(f))
    lane = g["farnocchia_coe_hf"]

    @numba.njit(parallel=True)
    def run(k, p, ecc, inc, raan, argp, nu, tof):
        out = np.empty(p.shape[0])
        for i in numba.prange(p.shape[0]):
            out[i] = lane(k, p[i], ecc[i], inc[i], raan[i], argp[i], nu[i], tof[i])
        return out

    return run


def lanewise(lw):
    return lw.vmap(farnocchia_coe_hf, in_axes=(None, 0, 0, 0, 0, 0, 0, 0))
