"""Every ```python block of the README runs on its own (imports included), in a
fresh namespace, as a reader who copies one block would run it; then its
results are checked against NumPy or plain Python.  (tests/test_doc_blocks.py
pastes each into a fresh ``python``; tests/docblocks.py reads the blocks.)"""

import linecache

import numpy as np
import pytest
from docblocks import blocks
from optional import requires_torch

README_BLOCKS = blocks("README.md")
BLOCKS = [b.code for b in README_BLOCKS]


def grid_reference(x):
    r = x[:, None] ** 2 + x[None, :] ** 2
    return np.cos(r) / (1 + r)


def first_pass_reference(rows, threshold):
    return [next((i for i, s in enumerate(np.cumsum(row)) if s > threshold), -1) for row in rows]


#: What each block must compute, by a name it defines.
CHECKS = {
    "settle_op": lambda ns: _check_settle(ns),
    "z": lambda ns: np.testing.assert_allclose(ns["z"], grid_reference(ns["x"]), rtol=1e-12, atol=1e-15),
    "counts": lambda ns: (ns["counts"].shape == (200, 300) and ns["counts"].max() == 200) or pytest.fail("counts"),
    "radii": lambda ns: (np.testing.assert_allclose(
        ns["grad"], ((1 / (1 + np.exp(-ns["X"] @ ns["w"])) - ns["y"])[:, None] * ns["X"]).sum(0), rtol=1e-10),
        # within a few lanes per bin: a 1-ulp hypot may put a radius on a bin edge the other side
        np.testing.assert_allclose(ns["radii"], np.bincount(np.minimum(
            (np.hypot(ns["t"][:, None], ns["t"][None, :]) * 10).astype(int), 29).ravel(), minlength=30), atol=8)),
    "idx": lambda ns: [np.testing.assert_array_equal(ns[k], first_pass_reference(ns["rows"], 50.0))
                       for k in ("idx", "idx_one")],
    "transposed": lambda ns: (np.testing.assert_array_equal(ns["transposed"], ns["rows"].T * 2.0),
                              np.testing.assert_allclose(ns["sums"], ns["rows"].sum(axis=1), rtol=1e-12),
                              np.testing.assert_array_equal(ns["hi"], ns["rows"].max(axis=1))),
    "ramp": lambda ns: np.testing.assert_allclose(ns["ramp"], [0, 0, 0.15625, 0.5, 0.84375, 1, 1]),
    "pnl": lambda ns: (ns["pnl"].shape == (2000,) and np.isfinite(ns["pnl"]).all()
                       and list(ns["ys"]) == [0, 0, 1, 3, 6]) or pytest.fail("scan"),
    "extreme": lambda ns: (np.testing.assert_allclose(ns["s"], grid_reference(ns["x"]).sum(), rtol=1e-12),
                           np.testing.assert_allclose(ns["row_max"], grid_reference(ns["x"]).max(axis=1), rtol=1e-15),
                           pytest.approx(grid_reference(ns["x"]).max(), rel=1e-15) == grid_reference(ns["x"]).flat[
                               ns["peak"]] or pytest.fail("peak"),
                           pytest.approx(np.abs(grid_reference(ns["x"])).max(), rel=1e-15) == abs(ns["extreme"])
                           or pytest.fail("extreme")),
    "wave_max": lambda ns: np.testing.assert_allclose(ns["w4_out"], (lambda a, b: np.sqrt(a**2 + b**2) * np.exp(-a)
                                                      + np.sin(3 * b) * (a > 0.5) - 0.5 * a * b)(ns["u"], ns["u"]),
                                                      rtol=1e-12),
    "z_watched": lambda ns: np.testing.assert_allclose(ns["z_watched"], grid_reference(ns["x"]), rtol=1e-12,
                                                       atol=1e-15),
    "d_cr": lambda ns: _check_escape_gradient(ns),
    "ga": lambda ns: np.testing.assert_allclose(
        [ns["sse"], ns["ga"], ns["gb"], ns["gc"]], _fit_reference(ns["t"], ns["y"]), rtol=1e-11),
    "capped": lambda ns: _check_capped(ns),
    # Black-Scholes: 8.0214; 200k paths have a standard error of about 0.03
    "tpu_counts": lambda ns: _check_tpu_counts(ns),
    "price": lambda ns: abs(ns["price"] - 8.0214) < 0.15 or pytest.fail(f"price {ns['price']}"),
}


def _fit_reference(t, y):
    import jax
    import jax.numpy as jnp

    def sse(a, b, c):
        return jnp.sum((a * jnp.exp(-b * t) + c - y) ** 2)

    value, grads = jax.value_and_grad(sse, argnums=(0, 1, 2))(1.5, 0.5, 0.0)
    return [float(value), *map(float, grads)]


def _check_capped(ns):
    """JAX arrays in, JAX arrays out, equal to NumPy's."""
    import jax

    expected = np.minimum(np.asarray(ns["xs"]) ** 2, 2)
    assert isinstance(ns["capped"], jax.Array) and ns["capped"].dtype == np.float32
    np.testing.assert_array_equal(np.asarray(ns["capped"]), expected)
    np.testing.assert_allclose(float(ns["capped_total"]), expected.sum(), rtol=1e-6)


def _check_escape_gradient(ns):
    """Central differences wherever the nudged lanes leave the loop at the same step."""
    f, h = ns["escape_smooth"], 1e-6
    steps = [_escape_steps(a, b) for a, b in zip(ns["cr"], ns["ci"], strict=True)]
    same = [k for k, (a, b) in enumerate(zip(ns["cr"], ns["ci"], strict=True))
            if _escape_steps(a - h, b) == _escape_steps(a + h, b) == steps[k]]
    assert len(same) > 300
    fd = [(f(ns["cr"][k] + h, ns["ci"][k]) - f(ns["cr"][k] - h, ns["ci"][k])) / (2 * h) for k in same]
    # 1e-2: lanes near the set boundary have derivatives of 1e4 and curvature that skews differences
    np.testing.assert_allclose(ns["d_cr"][same], fd, rtol=1e-2, atol=1e-6)


def _check_settle(ns):
    """lw.jax.op's (or lw.torch.op's) gradient against central differences of the plain Python lane."""
    x = ns["x"].detach().numpy() if hasattr(ns["x"], "detach") else np.asarray(ns["x"])
    settle, h = ns["settle"], 1e-6

    def loss(x, rate):
        return np.mean([settle(v, rate) ** 2 for v in x])

    some = range(0, x.size, 37)
    fd = [(settle(x[k] + h, 1.5) ** 2 - settle(x[k] - h, 1.5) ** 2) / (2 * h) / x.size for k in some]
    np.testing.assert_allclose(np.asarray(ns["dx"])[list(some)], fd, rtol=1e-5, atol=1e-12)
    np.testing.assert_allclose(float(ns["drate"]), (loss(x, 1.5 + h) - loss(x, 1.5 - h)) / (2 * h), rtol=1e-4)


def _escape_steps(cr, ci):
    zr = zi = 0.0
    for n in range(100):
        zr, zi = zr * zr - zi * zi + cr, 2.0 * zr * zi + ci
        if zr * zr + zi * zi > 4.0:
            return n
    return 100


def _check_tpu_counts(ns):
    """The tpu backend's counts against the scalar lane in float32 (lanes may differ only
    where float32 rounding moves the iteration of escape: a few boundary points)."""
    import jax

    counts = ns["tpu_counts"]
    assert isinstance(counts, jax.Array) and counts.shape == (200, 300)
    f32 = np.float32
    want = np.array([[_escape_steps32(f32(a), f32(b)) for b in ns["im"]] for a in ns["re"]])
    assert (np.asarray(counts) != want).mean() <= 0.002


def _escape_steps32(cr, ci):
    zr = zi = np.float32(0.0)
    for n in range(100):
        zr, zi = zr * zr - zi * zi + cr, np.float32(2.0) * zr * zi + ci
        if zr * zr + zi * zi > np.float32(4.0):
            return n
    return 100


def test_the_readme_has_examples():
    assert len(BLOCKS) >= 10


@pytest.mark.parametrize("k", range(len(BLOCKS)))
def test_each_readme_block_runs_alone(k, capsys):
    if "torch" in README_BLOCKS[k].needs:
        requires_torch()
    if "tpu" in README_BLOCKS[k].needs:  # without a TPU, interpret mode, as the README says
        pytest.importorskip("jax")
        import lanewise as lw

        with lw.config.overridden(tpu_interpret=lw.config.tpu_interpret or not _has_tpu()):
            return _run_readme_block(k, capsys)
    _run_readme_block(k, capsys)


def _has_tpu() -> bool:
    import jax

    return jax.default_backend() == "tpu"


def _run_readme_block(k, capsys):
    namespace: dict = {"__name__": f"readme_block_{k}"}
    # Registered like a notebook cell (IPython does this): lanes pasted from the
    # README have a source, which lw.grad and the SPMD path read.
    filename = f"<README block {k}>"
    linecache.cache[filename] = (len(BLOCKS[k]), None, BLOCKS[k].splitlines(True), filename)
    exec(compile(BLOCKS[k], filename, "exec"), namespace)
    checked = [name for name in CHECKS if name in namespace]
    for name in checked:
        CHECKS[name](namespace)
    if "print(lw.explain(grid, x, x))" in BLOCKS[k]:
        assert "lane_block" in capsys.readouterr().out
        checked.append("explain")
    assert checked, f"README block {k} is not checked against a reference:\n{BLOCKS[k][:200]}"
