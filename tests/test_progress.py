"""lw.vmap(..., progress=True): chunked CPU runs give the unchunked result, bit for bit."""

import math

import numpy as np
import pytest

import lanewise as lw
from lanewise import progress


def wave(x, y):
    r = x * x + y * y
    return math.cos(r) / (1 + r), x > y


def grid(**kw):
    return lw.vmap(lw.vmap(wave, in_axes=(None, 0)), in_axes=(0, None), **kw)


@pytest.fixture
def small_pieces(monkeypatch):
    monkeypatch.setattr(progress, "MIN_PIECE", 1)  # many pieces on small inputs
    monkeypatch.setattr(progress, "CHUNKS", 7)


@pytest.mark.parametrize("out_axes", [0, 1])
def test_pieces_equal_one_run(small_pieces, capsys, out_axes):
    x, y = np.linspace(-2, 2, 45), np.linspace(-1, 1, 30)[::-1]  # a negative-stride input
    want = grid(out_axes=out_axes)(x, y)
    got = grid(out_axes=out_axes, progress=True)(x, y)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes()
    assert "wave" in capsys.readouterr().err  # the bar, named after the lane


def test_out_is_filled(small_pieces):
    x = np.linspace(0, 1, 20)
    out = (np.empty((20, 20)), np.empty((20, 20), bool))
    result = grid(progress=True)(x, x, out=out)
    assert result is out
    np.testing.assert_array_equal(out[0], grid()(x, x)[0])


def raises_at_13(x):
    if x == 13.0:
        raise ValueError("thirteen")
    return x


def test_lane_error_names_the_true_lane(small_pieces):
    with pytest.raises(ValueError, match="thirteen") as info:
        lw.vmap(raises_at_13, progress=True)(np.arange(20.0))
    assert "i0=13" in "".join(info.value.__notes__)


def test_other_backends_are_refused():
    with pytest.raises(lw.BackendError, match="progress=True runs on the cpu backend"):
        lw.vmap(raises_at_13, backend="python", progress=True)(np.arange(3.0))
