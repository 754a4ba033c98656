"""docs/tutorial.ipynb runs from top to bottom (issue 45, item 5): executed here with nbclient,
so that it cannot rot.  Its cells check their own results against NumPy with ``assert``s, so
executing it is the test; this file adds that every plot was drawn and that the notebook is
stored clean (no outputs, nbformat 4)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[1] / "docs" / "tutorial.ipynb"
KERNEL = "lanewise-tutorial"


def test_the_notebook_is_stored_without_outputs():
    """Outputs (images, timings) would make every run a diff; the notebook is kept as written."""
    data = json.loads(NOTEBOOK.read_text())
    assert data["nbformat"] == 4
    code = [c for c in data["cells"] if c["cell_type"] == "code"]
    assert code and all(c["outputs"] == [] and c["execution_count"] is None for c in code)
    assert data["metadata"]["kernelspec"]["language"] == "python"


def _kernel_for_this_python(tmp_path: Path, monkeypatch) -> str:
    """A kernelspec that starts ``sys.executable -m ipykernel_launcher``, found through JUPYTER_PATH:
    a ``python3`` kernel installed on the machine may be another Python, without lanewise."""
    from ipykernel.kernelspec import install

    prefix = tmp_path / "jupyter-prefix"
    install(kernel_name=KERNEL, prefix=str(prefix))
    monkeypatch.setenv("JUPYTER_PATH", str(prefix / "share" / "jupyter"))
    spec = json.loads((prefix / "share" / "jupyter" / "kernels" / KERNEL / "kernel.json").read_text())
    assert spec["argv"][0] == sys.executable, spec
    return KERNEL


def test_the_tutorial_runs_and_draws_every_plot(tmp_path, monkeypatch):
    nbclient = pytest.importorskip("nbclient")  # in the test extra: CI runs this
    import nbformat

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    workdir = tmp_path / "run"
    workdir.mkdir()
    # The kernel inherits this process's environment: PYTHONPATH (this checkout's lanewise)
    # and LANEWISE_CACHE_DIR (the test run's kernel cache, tests/conftest.py).
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel's inline backend draws the plots
    client = nbclient.NotebookClient(notebook, kernel_name=_kernel_for_this_python(tmp_path, monkeypatch),
                                     timeout=300, resources={"metadata": {"path": str(workdir)}})
    client.execute()  # a failing assert raises CellExecutionError, naming the cell
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert not errors, errors
        images = [o for o in cell.outputs if "image/png" in o.get("data", {})]
        assert len(images) == cell.source.count("plt.show()"), (cell.source, cell.outputs)
    assert sum("plt.show()" in c.source for c in notebook.cells) >= 4  # grid, loop, scan, gradient
