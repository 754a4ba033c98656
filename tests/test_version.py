"""The version is written once, in ``src/lanewise/version.py``: pyproject.toml reads it
(``dynamic = ["version"]``), and the installed package's metadata says the same."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

import pytest

import lanewise as lw

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_pyproject_reads_the_version_from_version_py():
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]
    setuptools_config = pytest.importorskip("setuptools.config.pyprojecttoml")
    # what a build would write into the metadata, from this checkout's files
    assert setuptools_config.read_configuration(PYPROJECT)["project"]["version"] == lw.__version__


def test_installed_metadata_has_the_packages_version():
    assert importlib.metadata.version("lanewise") == lw.__version__


def test_the_installed_numba_is_in_the_range_pyproject_allows():
    """lanewise uses Numba internals, so pyproject allows one Numba minor release (CI tests
    its oldest and newest: .ci/run); a Numba outside it is an untested combination."""
    from packaging.requirements import Requirement

    dependencies = [Requirement(d) for d in tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]]
    numba = next(d for d in dependencies if d.name == "numba")
    bounds = {s.operator: s.version for s in numba.specifier}
    assert set(bounds) == {">=", "<"}, numba  # both ends: .ci/run installs the lower one
    assert importlib.metadata.version("numba") in numba.specifier
