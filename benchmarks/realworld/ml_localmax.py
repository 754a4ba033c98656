"""Spectral peaks per frame: librosa's ``util.localmax`` along the frequency axis.

librosa's pitch tracker (``piptrack``) marks, in each frame of a magnitude spectrogram, the
bins that are local maxima along frequency: ``localmax(S * (S > ref), axis=-2)``. The lane is
one frame (a column of the spectrogram): a loop over its bins building a per-lane bool array.
"""
from __future__ import annotations

import numpy as np

from benchmarks.harness import Tolerance

NAME = "ml_localmax"
TITLE = "per-frame local maxima of a spectrogram"
DOMAIN = "signal processing (audio)"
SOURCE = (
    "librosa/librosa, librosa/util/utils.py (`localmax`, its `_localmax` "
    "`@numba.guvectorize([...], '(n)->(n)', cache=True, nopython=True)` wrapping the "
    "`@numba.stencil` `_localmax_sten`), ISC licence, Copyright (c) 2013--2023 librosa "
    "development team. Used by `librosa.piptrack` (peaks along frequency, axis=-2) and by onset/"
    "beat code (along time). Changes: cache=True dropped, and only the float64 signature of "
    "the five is kept (the others are the same kernel for int16/int32/int64/float32)."
)
SOURCE_SHORT = "librosa/librosa librosa/util/utils.py"

SIZES = {"full": 12000, "quick": 1200, "tiny": 16}  # frames of a 1025-bin spectrogram
N_BINS = 1025  # n_fft = 2048
TOL = Tolerance()  # booleans, compared exactly against the 0/1 reference


def setup(n):
    """|STFT|-like magnitudes (1025 bins x n frames): harmonic partials over a noise floor,
    thresholded as piptrack does (S * (S > ref)), so runs of equal zeros occur."""
    rng = np.random.default_rng(3)
    bins = np.arange(N_BINS, dtype=np.float64)[:, None]
    f0 = rng.uniform(20.0, 60.0, size=n)[None, :]  # fundamental bin per frame
    s = rng.exponential(0.05, size=(N_BINS, n))
    for k in range(1, 9):
        s += (1.0 / k) * np.exp(-0.5 * ((bins - k * f0) / 1.5) ** 2)
    ref = 0.1 * s.max(axis=0, keepdims=True)
    return (s * (s > ref),)


def reference(s):
    """NumPy slices: x[i] > x[i-1] and x[i] >= x[i+1]; first bin never, last bin > its neighbour."""
    out = np.zeros(s.shape, dtype=bool)
    out[1:-1] = (s[1:-1] > s[:-2]) & (s[1:-1] >= s[2:])
    out[-1] = s[-1] > s[-2]
    return out.view(np.uint8)  # 0/1: harness.compare checks integer arrays exactly (bool has no '-')


def project(numba):
    @numba.stencil
    def _localmax_sten(x):  # pragma: no cover
        """Numba stencil for local maxima computation"""
        return (x[0] > x[-1]) & (x[0] >= x[1])

    @numba.guvectorize(
        [
            "void(float64[:], bool_[:])",
        ],
        "(n)->(n)",
        nopython=True,
    )
    def _localmax(x, y):  # pragma: no cover
        """Vectorized wrapper for the localmax stencil"""
        y[:] = _localmax_sten(x)

    def localmax(x, *, axis=0):
        # Rotate the target axis to the end
        xi = x.swapaxes(-1, axis)

        # Allocate the output array and rotate target axis
        lmax = np.empty_like(x, dtype=bool)
        lmaxi = lmax.swapaxes(-1, axis)

        # Call the vectorized stencil
        _localmax(xi, lmaxi)

        # Handle the edge condition not covered by the stencil
        lmaxi[..., -1] = xi[..., -1] > xi[..., -2]

        return lmax

    def run(s):
        return localmax(s, axis=-2)

    return run


# ------------------------------------------------------------------ the lane
def frame_peaks(x):
    """Local maxima of one frame's magnitudes (librosa's rule, edges included)."""
    n = x.shape[0]
    peaks = np.zeros(n, dtype=np.bool_)
    for i in range(1, n - 1):
        peaks[i] = x[i] > x[i - 1] and x[i] >= x[i + 1]
    peaks[n - 1] = x[n - 1] > x[n - 2]
    return peaks


lanes = (frame_peaks,)


def lanewise(lw):
    # one lane per frame (a column); its peaks go back into the column
    return lw.vmap(frame_peaks, in_axes=1, out_axes=1)


def hand_prange(numba):
    lane = numba.njit(frame_peaks)

    @numba.njit(parallel=True)
    def run(s):
        out = np.empty(s.shape, dtype=np.bool_)
        for t in numba.prange(s.shape[1]):
            out[:, t] = lane(s[:, t])
        return out

    return run
