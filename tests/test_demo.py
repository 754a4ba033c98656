"""``python -m lanewise demo``: runs end to end, prints its table, agrees, saves a PNG with its charts."""

import math
import os
import platform
import subprocess
import sys

import numpy as np
import pytest

from lanewise import demo

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _run(args, tmp_path, timeout=300, env=(), before="pass"):
    """``python -m lanewise ARGS`` in a fresh process; ``before``: Python run first in that process."""
    env = {**os.environ, "LANEWISE_CACHE_DIR": str(tmp_path / "cache"), **dict(env)}
    code = f"import sys; {before}; from lanewise.__main__ import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _machine_line(stdout):
    lines = [line for line in stdout.splitlines() if line.startswith("machine: ")]
    assert len(lines) == 1, stdout
    return lines[0]


def test_demo_quick_prints_table_agrees_and_saves_png(tmp_path):
    out = tmp_path / "x.png"
    proc = _run(["demo", "--quick", "--out", str(out)], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = out.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > len(PNG_MAGIC)
    lines = proc.stdout.splitlines()
    for method in ("python loops", "numpy meshgrid", "numpy broadcasting", "numba prange loop",
                   "jax vmap under jit", "lanewise nested vmap"):  # jax: in the test extra
        assert any(line.startswith(method + " ") for line in lines), proc.stdout
    machine = _machine_line(proc.stdout)
    threads = subprocess.run([sys.executable, "-c", "import numba; print(numba.get_num_threads())"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert f"threads: numba {threads}, jax: XLA's own pool, lanewise {threads} " in machine, machine
    assert f"{platform.machine()}, {os.cpu_count()} logical CPUs" in machine, machine
    assert any(line.startswith("python loops (extrapolated") for line in lines), proc.stdout
    assert any(line.startswith("lanewise vs the fastest other method, ") for line in lines), proc.stdout
    agree = [line for line in lines if line.startswith("agree:")]
    assert agree and all(f" {m} " in agree[0] for m in ("python", "broadcast", "numba", "jax", "lanewise")), \
        proc.stdout
    assert not (tmp_path / "lanewise_demo.png").exists()  # --out was honoured


def _reference(x, y):
    """f on the grid, written here rather than taken from the demo: an independent check."""
    return np.array([[math.cos(a * a + b * b) / (1 + a * a + b * b) for b in y] for a in x])


@pytest.mark.parametrize("method", demo.METHODS)
def test_every_method_agrees_with_an_independent_reference(method):
    rng = np.random.default_rng(0)
    x, y = rng.uniform(-2, 2, 7), rng.uniform(-2, 2, 5)  # not square: a transposed result fails
    grid = demo.implementation(method)
    np.testing.assert_allclose(grid(x, y), _reference(x, y), rtol=0, atol=demo.TOLERANCE)


def test_without_jax_the_demo_runs_says_why_and_names_machine_and_threads(tmp_path):
    """JAX blocked (None in sys.modules: ``import jax`` fails) and Numba on one thread: no JAX row,
    a line saying JAX was skipped and why, and the machine line with the thread count the workers used."""
    small = ["demo", "--n", "64", "--python-n", "16", "--repeats", "1", "--no-plot"]
    proc = _run(small, tmp_path, env={"NUMBA_NUM_THREADS": "1"}, before="sys.modules['jax'] = None")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert not any(line.startswith(demo.LABELS["jax"] + " ") for line in lines), proc.stdout
    assert f"{demo.LABELS['jax']}: skipped, jax is not installed" in proc.stdout, proc.stdout
    machine = _machine_line(proc.stdout)
    assert platform.machine() in machine and f"{os.cpu_count()} logical CPUs" in machine, machine
    assert "threads: numba 1, lanewise 1 " in machine and "jax" not in machine, machine
    agree = next(line for line in lines if line.startswith("agree:"))
    assert " jax " not in agree, agree


def test_figure_has_the_surface_and_both_bar_charts(tmp_path):
    n = 24
    results = {m: demo.measure(m, 12 if m == "python" else n, repeats=1) for m in demo.METHODS}
    z = demo.downsample(demo.grid_meshgrid(demo.axis(n), demo.axis(n)))
    fig = demo.build_figure(z, results, n)
    assert len(fig.axes) >= 3  # the surface (and its colour bar), time, memory
    titles = " ".join(ax.get_title() for ax in fig.axes)
    assert f"{platform.machine()}, {os.cpu_count()} logical CPUs; threads: numba " in fig.get_suptitle()
    assert "surface" in titles and "time" in titles and "memory" in titles
    for ax in fig.axes:
        if "time" in ax.get_title() or "memory" in ax.get_title():
            assert [t.get_text() for t in ax.get_yticklabels()] == [demo.LABELS[m] for m in demo.METHODS]
            assert ax.get_xscale() == ("log" if "time" in ax.get_title() else "linear")
    python = demo.bars(results, n)[0]
    assert python["guessed"] and "extrapolated" in python["time_text"]  # measured at 12, shown at 24
    out = demo.save_plot(z, results, n, tmp_path / "sub" / "fig.png")
    assert out.read_bytes().startswith(PNG_MAGIC)


def test_help_lists_the_demo_command(tmp_path):
    proc = _run(["--help"], tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "usage:" in proc.stdout and "demo" in proc.stdout
