"""Sliding-window biweight detrending of a stellar light curve (wotan), as used to search for transits.

Each lane is one time stamp: find the window of +-half a window length around it in the sorted
time array, then Tukey's biweight location of the fluxes in that window by wotan's iteration
(median and MAD to start, reweighting until the centre moves less than 1 ppm). Per-lane array
slices, medians (sorts), array expressions, a while loop with a per-lane trip count.
"""
from __future__ import annotations

import types
from math import nan

import numpy
import numpy as np
from numpy import exp, inf, median, pi, sin

from benchmarks.harness import Tolerance

NAME = "phys_wotan"
TITLE = "Light-curve biweight detrending (wotan)"
DOMAIN = "astronomy / exoplanets"
SOURCE = (
    "hippke/wotan (MIT, Copyright (c) 2019 Michael Hippke), wotan/slider.py running_segment and "
    "wotan/location_estimates.py location_iter (both jit(fastmath=True, nopython=True, cache=True)): "
    "wotan.flatten(time, flux, method='biweight', window_length=0.5, edge_cutoff=0, break_tolerance=0.5, "
    "cval=5) calls running_segment on each gap-free segment to get the trend. Reproduced faithfully "
    "(serial, as wotan runs it), with cache=True dropped; changed: running_segment keeps only the branch "
    "of the iterative estimators (method codes 1-3; the other estimators' branches are cut, which "
    "wotan's biweight call never takes), and constants.FTOL is a module constant."
)
SOURCE_SHORT = "hippke/wotan wotan/slider.py"
SIZES = {"full": 12_000, "quick": 1_200, "tiny": 200}   # 2-minute cadence points
# wotan compiles with fastmath=True (sums reassociated): its centre differs from the IEEE one by a
# few ulp per iteration, and a lane whose last step is near FTOL=1e-6 may stop one step apart.
TOL = Tolerance(rtol=0.0, atol=1e-6)

FTOL = 1e-6  # wotan.constants.FTOL
WINDOW_LENGTH, EDGE_CUTOFF, CVAL = 0.5, 0.0, 5.0  # wotan.flatten's defaults for biweight


# --------------------------------------------------------------------- wotan's functions
def location_iter(data, cval, method_code):
    """Robust location estimators"""

    # Numba can't handle strings, so we're passing the location estimator as an int:
    # 1 : biweight
    # 2 : andrewsinewave
    # 3 : welsch
    # (the others are not relevant for location_iter)

    # Initial estimate for the central location
    delta_center = inf
    median_data = median(data)
    mad = median(numpy.abs(data - median_data))
    center = center_old = median_data

    # Neglecting this case was a bug in scikit-learn
    if mad == 0:
        return center

    # one expensive division here, instead of two per loop later
    cmad = 1 / (cval * mad)

    # Newton-Raphson iteration, where each result is taken as the initial value of the
    # next iteration. Stops when the difference of a round is below ``FTOL`` threshold
    while numpy.abs(delta_center) > FTOL:
        distance = data - center
        dmad = distance * cmad

        # Inlier weights
        # biweight
        if method_code == 1:
            weight = (1 - dmad ** 2) ** 2
        # andrewsinewave
        if method_code == 2:
            # avoid division by zero
            dmad[dmad == 0] = 1e-10
            weight = sin(dmad) / dmad
        # welsch
        if method_code == 3:
            weight = exp(-(dmad**2) / 2)

        # Outliers with weight zero
        # biweight or welsch
        if method_code == 1 or method_code == 3:
            weight[(numpy.abs(dmad) >= 1)] = 0
        # andrewsinewave
        else:
            weight[(numpy.abs(dmad) >= pi)] = 0

        center += numpy.sum(distance * weight) / numpy.sum(weight)

        # Calculate how much center moved to check convergence threshold
        delta_center = center_old - center
        center_old = center
    return center


def running_segment(time, flux, window_length, edge_cutoff, cval, method_code):
    """Iterator for a single time-series segment using time-series window sliders"""
    size = len(time)
    mean_all = numpy.full(size, nan)
    half_window = window_length / 2
    # 0 < Edge cutoff < half_window:
    if edge_cutoff > half_window:
        edge_cutoff = half_window

    # Pre-calculate border checks before entering the loop (reason: large speed gain)
    low_index = numpy.min(time) + edge_cutoff
    hi_index = numpy.max(time) - edge_cutoff
    idx_start = 0
    idx_end = 0

    for i in range(size-1):
        if time[i] > low_index and time[i] < hi_index:
            # Nice style would be:
            #   idx_start = numpy.argmax(time > time[i] - window_length/2)
            #   idx_end = numpy.argmax(time > time[i] + window_length/2)
            # But that's too slow (factor 10). Instead, we write:
            while time[idx_start] < time[i] - half_window:
                idx_start += 1
            while time[idx_end] < time[i] + half_window and idx_end < size-1:
                idx_end += 1
            # Get the location estimate for the segment in question
            # iterative method for: biweight, andrewsinewave, welsch
            f = flux[idx_start:idx_end]
            if method_code == 1 or method_code == 2 or method_code == 3:
                mean_all[i] = location_iter(f, cval, method_code)
            # (wotan's other estimators: hodges, median, mean, trim_mean, ... cut here)
    return mean_all


# --------------------------------------------------------------------------------- the lane
def biweight_trend(t, time, flux, window_length, edge_cutoff, cval):
    """The trend at one time stamp t: running_segment's loop body, the window found by search."""
    size = len(time)
    half_window = window_length / 2
    if edge_cutoff > half_window:
        edge_cutoff = half_window
    low_index = time[0] + edge_cutoff          # numpy.min(time): time is sorted
    hi_index = time[size - 1] - edge_cutoff    # numpy.max(time)
    if not (t > low_index and t < hi_index):
        return nan
    idx_start = numpy.searchsorted(time, t - half_window)
    idx_end = min(numpy.searchsorted(time, t + half_window), size - 1)
    return location_iter(flux[idx_start:idx_end], cval, 1)


lanes = (biweight_trend,)


# ------------------------------------------------------------------------------ the tools
def setup(n):
    rng = np.random.default_rng(2019)
    # a TESS-like light curve: 2-minute cadence, starspot modulation, two transits, white
    # noise and a few outliers (flares, cosmic rays)
    time = 1325.0 + np.arange(n) * (2.0 / 1440.0)
    flux = (1.0 + 0.01 * np.sin(2 * np.pi * time / 3.7) + 0.004 * np.sin(2 * np.pi * time / 1.3 + 1.0))
    phase = (time - 1326.2) % 5.5
    flux -= 0.008 * (phase < 0.12)
    flux += rng.normal(0.0, 1e-3, n)
    out = rng.random(n) < 0.003
    flux[out] += rng.uniform(0.005, 0.05, out.sum())
    return (time, flux, WINDOW_LENGTH, EDGE_CUTOFF, CVAL)


def reference(time, flux, window_length, edge_cutoff, cval):
    """Plain NumPy per time stamp (IEEE arithmetic, np.searchsorted for the window)."""
    size = time.size
    out = np.full(size, np.nan)
    half = window_length / 2
    edge = min(edge_cutoff, half)
    lo, hi = time.min() + edge, time.max() - edge
    starts = np.searchsorted(time, time - half)
    ends = np.minimum(np.searchsorted(time, time + half), size - 1)
    for i in range(size - 1):
        if not (lo < time[i] < hi):
            continue
        d = flux[starts[i]:ends[i]]
        c = np.median(d)
        mad = np.median(np.abs(d - c))
        if mad == 0:
            out[i] = c
            continue
        cmad = 1 / (cval * mad)
        delta = np.inf
        while abs(delta) > FTOL:
            dist = d - c
            u = dist * cmad
            w = np.where(np.abs(u) >= 1, 0.0, (1 - u**2) ** 2)
            new = c + np.sum(dist * w) / np.sum(w)
            delta, c = c - new, new
        out[i] = c
    return out


def _rebind(names, decorate):
    g = dict(globals())
    for name in names:
        f = globals()[name]
        g[name] = decorate(types.FunctionType(f.__code__, g, name, f.__defaults__))
    return g


def project(numba):
    g = _rebind(["location_iter", "running_segment"], numba.jit(fastmath=True, nopython=True))
    segment = g["running_segment"]

    def trend(time, flux, window_length, edge_cutoff, cval):
        return segment(time, flux, window_length, edge_cutoff, cval, 1)  # method_code 1: biweight

    return trend


def hand_prange(numba):
    g = _rebind(["location_iter", "biweight_trend"], numba.njit)
    lane = g["biweight_trend"]

    @numba.njit(parallel=True)
    def run(time, flux, window_length, edge_cutoff, cval):
        out = np.empty(time.shape[0])
        for i in numba.prange(time.shape[0]):
            out[i] = lane(time[i], time, flux, window_length, edge_cutoff, cval)
        return out

    return run


def lanewise(lw):
    mapped = lw.vmap(biweight_trend, in_axes=(0, None, None, None, None, None))

    def trend(time, flux, window_length, edge_cutoff, cval):
        # the time stamps are both the lanes and the series every lane searches
        return mapped(time, time, flux, window_length, edge_cutoff, cval)

    return trend
