"""Every ```python block of the README runs, in order, in one namespace."""

import re
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_examples_run(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 5
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)
    x = namespace["x"]
    r = x[:, None] ** 2 + x[None, :] ** 2
    np.testing.assert_allclose(namespace["z"], np.cos(r) / (1 + r), rtol=1e-12, atol=1e-15)
    rows = namespace["rows"]
    expected = [next((i for i, s in enumerate(np.cumsum(row)) if s > 50.0), -1) for row in rows]
    np.testing.assert_array_equal(namespace["idx"], expected)
    np.testing.assert_array_equal(namespace["idx_one"], expected)
    assert namespace["counts"].shape == (200, 300) and namespace["counts"].max() == 200
    assert namespace["transposed"].shape == (256, 1000)
    np.testing.assert_allclose(namespace["ramp"], [0, 0, 0.15625, 0.5, 0.84375, 1, 1])
    assert "lane_block" in capsys.readouterr().out
    z = namespace["z"]
    assert namespace["z_watched"].tobytes() == z.tobytes()
    np.testing.assert_allclose(namespace["s"], z.sum(), rtol=1e-12)
    # Reductions call libm, the materialised grid lanewise's vector math: 1 ulp apart.
    np.testing.assert_allclose(namespace["row_max"], z.max(axis=1), rtol=1e-15)
    assert z.flat[namespace["peak"]] == pytest.approx(z.max(), rel=1e-15)
    assert abs(namespace["extreme"]) == pytest.approx(np.abs(z).max(), rel=1e-15)
    prices = namespace["prices"]  # noqa: F841 - the README defines it
    assert namespace["pnl"].shape == (2000,) and np.isfinite(namespace["pnl"]).all()
    np.testing.assert_array_equal(namespace["ys"], [0, 0, 1, 3, 6])
    # Black-Scholes: 8.0214; 200k paths have a standard error of about 0.03
    assert abs(namespace["price"] - 8.0214) < 0.15
