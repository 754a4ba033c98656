"""Identical lanes in two files each get their own file:line in errors (cpu, python and
tpu backends; lanewise's caches must not hand the second file the first's lines), and an
error raised in a derivative's generated code names the user's line behind it."""

from __future__ import annotations

import importlib.util
import re

import numpy as np
import pytest

import lanewise as lw

LANE = '''

def lane(x, p):
    y = x * 2.0
    return y + p[5]
'''


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def twins(tmp_path):
    """The same lane, the same lines, in two files of the same name in two folders."""
    made = []
    for k, folder in enumerate(("one", "two")):
        (tmp_path / folder).mkdir()
        path = tmp_path / folder / "lanes.py"
        path.write_text(LANE)
        made.append((str(path), load(path, f"twin_lanes_{k}")))
    return made


X = np.linspace(0.0, 1.0, 10)
ROWS = np.ones((10, 4))  # p[5] is out of range


@pytest.mark.parametrize("backend", ["cpu", "python"])
def test_an_index_error_names_each_files_line(twins, backend):
    for path, module in twins:
        with pytest.raises(lw.LaneIndexError, match=re.escape(f"{path}:5: return y + p[5]")):
            lw.vmap(module.lane, backend=backend)(X, ROWS)


@pytest.mark.parametrize("backend", ["cpu", "python"])
def test_an_error_in_a_derivative_names_the_users_line_not_the_generated_code(twins, backend):
    path, module = twins[1]
    with pytest.raises(lw.LaneIndexError, match=re.escape(f"{path}:5: return y + p[5])")):
        lw.vmap(lw.value_and_grad(module.lane), backend=backend)(X, ROWS)


def test_the_tpu_backend_names_each_files_line(twins):
    pytest.importorskip("jax")
    with lw.config.overridden(tpu_interpret=True):
        for path, module in twins:
            for lane in (module.lane, lw.grad(module.lane)):
                with pytest.raises(lw.LaneIndexError, match=re.escape(f"{path}:5: return y + p[5]")):
                    lw.vmap(lane, backend="tpu")(X.astype(np.float32), ROWS.astype(np.float32))
