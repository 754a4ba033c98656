"""Gravity of point masses (Harmonica + Choclo): the downward acceleration g_z on a survey.

Each lane is one observation point; it sums Newton's inverse-square attraction of every point mass
(a direct N-body style gather: the lane reads the whole source arrays). Harmonica's forward model
for point sources, with Choclo's per-pair kernel.
"""
from __future__ import annotations

import types

import numpy as np

from benchmarks.harness import Tolerance

NAME = "phys_point_gravity"
TITLE = "Point-mass gravity g_z (forward model)"
DOMAIN = "geophysics / gravimetry"
SOURCE = (
    "fatiando/harmonica (BSD-3-Clause, Copyright (c) 2018 The Harmonica Developers), "
    "harmonica/_forward/point.py: point_gravity(coordinates, points, masses, field='g_z') runs "
    "point_mass_cartesian_parallel = jit(nopython=True, parallel=True)(point_mass_cartesian) (prange "
    "over observation points, inner loop over point masses, the per-pair kernel passed as a jitted "
    "first-class function), then flips the sign and converts to mGal. The kernel is "
    "fatiando/choclo (BSD-3-Clause, Copyright (c) 2022 The Choclo Developers) choclo/point/_forward.py "
    "gravity_u, with choclo/point/_kernels.py kernel_u and choclo/utils.py distance_cartesian (all "
    "jit(nopython=True)). Reproduced as is; changed: point_gravity's argument checks and reshapes "
    "(ravel, broadcast) are left out, the field is fixed to g_z."
)
SOURCE_SHORT = "fatiando/harmonica harmonica/_forward/point.py"
SIZES = {"full": 6_000, "quick": 2_000, "tiny": 50}   # observation points = point masses
TOL = Tolerance(rtol=1e-9, atol=1e-12)

GRAVITATIONAL_CONST = 0.00000000006673  # choclo.constants


# ------------------------------------------------------------------- Choclo's functions
def distance_cartesian(
    easting_p, northing_p, upward_p, easting_q, northing_q, upward_q
):
    distance = np.sqrt(
        (easting_p - easting_q) ** 2
        + (northing_p - northing_q) ** 2
        + (upward_p - upward_q) ** 2
    )
    return distance


def kernel_u(
    easting_p, northing_p, upward_p, easting_q, northing_q, upward_q, distance
):
    return -(upward_p - upward_q) / distance**3


def gravity_u(easting_p, northing_p, upward_p, easting_q, northing_q, upward_q, mass):
    distance = distance_cartesian(
        easting_p, northing_p, upward_p, easting_q, northing_q, upward_q
    )
    kernel = kernel_u(
        easting_p, northing_p, upward_p, easting_q, northing_q, upward_q, distance
    )
    return GRAVITATIONAL_CONST * mass * kernel


# ------------------------------------------------------------------- Harmonica's loop
def point_mass_cartesian(
    easting,
    northing,
    upward,
    easting_p,
    northing_p,
    upward_p,
    masses,
    out,
    forward_func,
):
    """
    Compute gravitational field of point masses in Cartesian coordinates
    """
    for l in prange(easting.size):  # noqa: E741, F821 - Harmonica's names; numba.prange
        for m in range(easting_p.size):
            out[l] += forward_func(
                easting[l],
                northing[l],
                upward[l],
                easting_p[m],
                northing_p[m],
                upward_p[m],
                masses[m],
            )


# --------------------------------------------------------------------------------- the lane
def g_z(easting, northing, upward, easting_p, northing_p, upward_p, masses):
    """One observation point: the sum over every point mass, as point_gravity returns it (mGal)."""
    result = 0.0
    for m in range(easting_p.size):
        result += gravity_u(easting, northing, upward, easting_p[m], northing_p[m], upward_p[m], masses[m])
    return -result * 1e5  # downward component, SI to mGal


lanes = (g_z,)

_HELPERS = ["distance_cartesian", "kernel_u", "gravity_u"]


def _rebind(names, decorate, **extra):
    """Copies of this module's functions ``names`` whose globals see each other's compiled
    versions (what decorating them in Choclo's modules does)."""
    g = dict(globals(), **extra)
    for name in names:
        f = globals()[name]
        g[name] = decorate(types.FunctionType(f.__code__, g, name, f.__defaults__))
    return g


# ------------------------------------------------------------------------------ the tools
def setup(n):
    rng = np.random.default_rng(11)
    # observation points: an airborne survey over a 20 x 20 km area at 800-1200 m
    east, north = rng.uniform(0.0, 20e3, n), rng.uniform(0.0, 20e3, n)
    up = rng.uniform(800.0, 1200.0, n)
    # point masses (a discretised density anomaly) 0.5-5 km deep, positive and negative
    east_p, north_p = rng.uniform(2e3, 18e3, n), rng.uniform(2e3, 18e3, n)
    up_p = rng.uniform(-5000.0, -500.0, n)
    masses = rng.normal(0.0, 1.0, n) * 1e10
    return (east, north, up, east_p, north_p, up_p, masses)


def reference(east, north, up, east_p, north_p, up_p, masses):
    """Whole-matrix NumPy, a block of observation points at a time."""
    out = np.empty(east.size)
    for s in range(0, east.size, 512):
        sl = slice(s, s + 512)
        de = east[sl, None] - east_p
        dn = north[sl, None] - north_p
        du = up[sl, None] - up_p
        dist = np.sqrt(de**2 + dn**2 + du**2)
        out[sl] = GRAVITATIONAL_CONST * (masses * du / dist**3).sum(axis=1) * 1e5
    return out


def project(numba):
    g = _rebind(_HELPERS, numba.jit(nopython=True), prange=numba.prange)
    point_mass_cartesian_parallel = numba.jit(nopython=True, parallel=True)(
        types.FunctionType(point_mass_cartesian.__code__, g, "point_mass_cartesian"))
    kernel = g["gravity_u"]

    def point_gravity(east, north, up, east_p, north_p, up_p, masses):
        """harmonica.point_gravity(..., field='g_z') around the kernel."""
        result = np.zeros(east.size, dtype="float64")
        point_mass_cartesian_parallel(east, north, up, east_p, north_p, up_p, masses, result, kernel)
        result *= -1   # Invert sign of gravity_u
        result *= 1e5  # SI to mGal
        return result

    return point_gravity


def hand_prange(numba):
    g = _rebind(_HELPERS + ["g_z"], numba.njit)
    lane = g["g_z"]

    @numba.njit(parallel=True)
    def run(east, north, up, east_p, north_p, up_p, masses):
        out = np.empty(east.shape[0])
        for i in numba.prange(east.shape[0]):
            out[i] = lane(east[i], north[i], up[i], east_p, north_p, up_p, masses)
        return out

    return run


def lanewise(lw):
    return lw.vmap(g_z, in_axes=(0, 0, 0, None, None, None, None))
