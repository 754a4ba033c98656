"""Equivalent sources in spherical coordinates (Harmonica): predict a potential field on a survey.

Each lane is one observation point (longitude, latitude, radius): it sums coefficient / distance
over every equivalent source, the distance being Harmonica's chord between two points in geocentric
spherical coordinates (great-circle angle psi from sin/cos of both latitudes and the cosine of the
longitude difference). The lane reads the whole source arrays; five trig calls per pair.
"""
from __future__ import annotations

import types

import numpy as np

from benchmarks.harness import Tolerance

NAME = "phys_eqsources"
TITLE = "Spherical equivalent sources (predict)"
DOMAIN = "geophysics / geodesy"
SOURCE = (
    "fatiando/harmonica (BSD-3-Clause, Copyright (c) 2018 The Harmonica Developers): "
    "harmonica/_equivalent_sources/utils.py `predict` (jit(nopython=True, parallel=True), prange over "
    "data points, the Green's function passed as a jitted first-class function), "
    "harmonica/_equivalent_sources/spherical.py `greens_func_spherical` and harmonica/_forward/utils.py "
    "`distance_spherical` / `distance_spherical_core` (jit(nopython=True)). Used by "
    "EquivalentSourcesSph.predict / .grid to interpolate gravity and magnetic data on the sphere. "
    "Reproduced as is; changed: only the kernel (EquivalentSourcesSph.predict's array set-up around "
    "it is three lines: ravel the coordinates, allocate zeros, call) and the fitted coefficients come "
    "from a random generator instead of a least-squares fit."
)
SOURCE_SHORT = "fatiando/harmonica harmonica/_equivalent_sources/utils.py"
SIZES = {"full": 2000, "quick": 650, "tiny": 60}   # data points; as many sources, one below each
# 1 - cos(psi) for sources a few km apart cancels ~8 digits: a 1-ulp difference in cos gives
# up to ~1e-7 relative error in a distance (measured: 1.4e-7 absolute on sums of O(1) with
# lanewise's vector math; 1e-14 with LANEWISE_VECTOR_MATH=0), and the sums mix signs.
TOL = Tolerance(rtol=1e-6, atol=1e-6)

R_EARTH = 6_371_000.0


# ------------------------------------------------------------------ Harmonica's functions
def distance_spherical(point_p, point_q):
    """
    Calculate the distance between two points in spherical coordinates.

    All angles must be in degrees and radii in meters.
    """
    # Get coordinates of the two points
    longitude, latitude, radius = point_p[:]
    longitude_p, latitude_p, radius_p = point_q[:]
    # Convert angles to radians
    longitude, latitude = np.radians(longitude), np.radians(latitude)
    longitude_p, latitude_p = np.radians(longitude_p), np.radians(latitude_p)
    # Compute trigonometric quantities
    cosphi_p = np.cos(latitude_p)
    sinphi_p = np.sin(latitude_p)
    cosphi = np.cos(latitude)
    sinphi = np.sin(latitude)
    dist, _, _ = distance_spherical_core(
        longitude, cosphi, sinphi, radius, longitude_p, cosphi_p, sinphi_p, radius_p
    )
    return dist


def distance_spherical_core(
    longitude, cosphi, sinphi, radius, longitude_p, cosphi_p, sinphi_p, radius_p
):
    """
    Core computation of distance between two points in spherical coordinates.
    """
    coslambda = np.cos(longitude_p - longitude)
    cospsi = sinphi_p * sinphi + cosphi_p * cosphi * coslambda
    dist = np.sqrt((radius - radius_p) ** 2 + 2 * radius * radius_p * (1 - cospsi))
    return dist, cospsi, coslambda


def greens_func_spherical(
    longitude, latitude, radius, point_longitude, point_latitude, point_radius
):
    """
    Green's function for the equivalent sources in spherical coordinates
    """
    distance = distance_spherical(
        (longitude, latitude, radius), (point_longitude, point_latitude, point_radius)
    )
    return 1 / distance


def predict(coordinates, points, coeffs, result, greens_function):
    """
    Calculate the predicted data.

    It works both for Cartesian and spherical coordinates. We need to pass the
    corresponding Green's function through the ``greens_function`` argument.
    The prediction can be run in parallel using Numba ``jit`` decorator with
    ``parallel=True``.
    """
    east, north, upward = coordinates[:]
    point_east, point_north, point_upward = points[:]
    for i in prange(east.size):  # noqa: F821 - numba.prange, bound in project()
        for j in range(point_east.size):
            result[i] += coeffs[j] * greens_function(
                east[i],
                north[i],
                upward[i],
                point_east[j],
                point_north[j],
                point_upward[j],
            )


# --------------------------------------------------------------------------------- the lane
def predict_point(longitude, latitude, radius, point_longitude, point_latitude, point_radius, coeffs):
    """One observation point: predict's inner loop over every source."""
    result = 0.0
    for j in range(point_longitude.size):
        result += coeffs[j] * greens_func_spherical(
            longitude, latitude, radius, point_longitude[j], point_latitude[j], point_radius[j]
        )
    return result


lanes = (predict_point,)

_HELPERS = ["distance_spherical_core", "distance_spherical", "greens_func_spherical"]


def _rebind(names, decorate, **extra):
    """Copies of this module's functions ``names`` whose globals see each other's compiled
    versions (what decorating them in Harmonica's modules does)."""
    g = dict(globals(), **extra)
    for name in names:
        f = globals()[name]
        g[name] = decorate(types.FunctionType(f.__code__, g, name, f.__defaults__))
    return g


# ------------------------------------------------------------------------------ the tools
def setup(n):
    rng = np.random.default_rng(42)
    # a scattered regional survey (10 x 10 degrees), observation heights 500-1500 m
    lon = rng.uniform(-70.0, -60.0, n)
    lat = rng.uniform(-40.0, -30.0, n)
    radius = R_EARTH + rng.uniform(500.0, 1500.0, n)
    # Harmonica's default source layout: one source beneath each data point (relative depth 500 m
    # below the data here, plus some spread), with fitted coefficients of both signs
    p_lon, p_lat = lon.copy(), lat.copy()
    p_radius = radius - 500.0 - rng.uniform(0.0, 2000.0, n)
    coeffs = rng.normal(0.0, 1.0, n) * 1e3
    return (lon, lat, radius, p_lon, p_lat, p_radius, coeffs)


def reference(lon, lat, radius, p_lon, p_lat, p_radius, coeffs):
    """Whole-matrix NumPy, a block of observation points at a time."""
    out = np.empty(lon.size)
    cos_p, sin_p = np.cos(np.radians(p_lat)), np.sin(np.radians(p_lat))
    lon_p = np.radians(p_lon)
    for s in range(0, lon.size, 256):
        sl = slice(s, s + 256)
        lam = np.radians(lon[sl])[:, None]
        phi = np.radians(lat[sl])[:, None]
        r = radius[sl][:, None]
        cospsi = sin_p * np.sin(phi) + cos_p * np.cos(phi) * np.cos(lon_p - lam)
        dist = np.sqrt((r - p_radius) ** 2 + 2 * r * p_radius * (1 - cospsi))
        out[sl] = (coeffs / dist).sum(axis=1)
    return out


def project(numba):
    g = _rebind(_HELPERS, numba.jit(nopython=True), prange=numba.prange)
    predict_numba_parallel = numba.jit(nopython=True, parallel=True)(
        types.FunctionType(predict.__code__, g, "predict"))
    greens_function = g["greens_func_spherical"]

    def eqs_predict(lon, lat, radius, p_lon, p_lat, p_radius, coeffs):
        """EquivalentSourcesSph.predict around the kernel."""
        coordinates = tuple(np.atleast_1d(i).ravel() for i in (lon, lat, radius))
        data = np.zeros(coordinates[0].size, dtype=coordinates[0].dtype)
        predict_numba_parallel(coordinates, (p_lon, p_lat, p_radius), coeffs, data, greens_function)
        return data

    return eqs_predict


def hand_prange(numba):
    g = _rebind(_HELPERS + ["predict_point"], numba.njit)
    lane = g["predict_point"]

    @numba.njit(parallel=True)
    def run(lon, lat, radius, p_lon, p_lat, p_radius, coeffs):
        out = np.empty(lon.shape[0])
        for i in numba.prange(lon.shape[0]):
            out[i] = lane(lon[i], lat[i], radius[i], p_lon, p_lat, p_radius, coeffs)
        return out

    return run


def lanewise(lw):
    return lw.vmap(predict_point, in_axes=(0, 0, 0, None, None, None, None))
