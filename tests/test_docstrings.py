"""Every docstring example in the package runs (public functions carry one)."""

import doctest
import importlib
import pkgutil

import pytest

import lanewise

SKIP = {"lanewise.__main__", "lanewise.demo"}  # the demo's examples run subprocesses
MODULES = sorted(m.name for m in pkgutil.walk_packages(lanewise.__path__, "lanewise.")
                 if m.name not in SKIP and ".cuda" not in m.name and not m.name.endswith("dask"))


#: Packages whose import needs an optional dependency: the test extra installs PyTorch on
#: Python 3.11 only (pyproject.toml), so elsewhere their examples skip, saying why.
NEEDS = {"lanewise.torch": "torch"}


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    for package, dependency in NEEDS.items():
        if name == package or name.startswith(package + "."):
            pytest.importorskip(dependency, reason=f"{name}'s examples need {dependency}, not installed here")
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0


def test_public_functions_have_examples():
    missing = [name for name in lanewise.__all__
               if callable(getattr(lanewise, name)) and not name.endswith("Error")
               and ">>>" not in (getattr(lanewise, name).__doc__ or "")]
    assert not missing, f"public callables without a docstring example: {missing}"
