"""Test-session setup for lanewise.

Order matters: the cache directory and Numba's allocation statistics are read
from the environment when lanewise / Numba are first imported, so they are set
here, at the very top, before anything imports either of them.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile

# One cache for the whole run: pytest-xdist's workers inherit the controller's
# environment, so they share the directory it made (the corpus lanes are compiled
# once per run, not once per worker), and only the process that made it deletes it.
_CACHE_DIR = os.environ.get("LANEWISE_TEST_RUN_CACHE")
if _CACHE_DIR is None:
    _CACHE_DIR = tempfile.mkdtemp(prefix="lanewise-test-cache-")
    os.environ["LANEWISE_TEST_RUN_CACHE"] = _CACHE_DIR
    atexit.register(shutil.rmtree, _CACHE_DIR, ignore_errors=True)
os.environ["LANEWISE_CACHE_DIR"] = _CACHE_DIR
# test_structure counts the allocations made inside compiled kernels.
os.environ.setdefault("NUMBA_NRT_STATS", "1")

_IMPORTED_EARLY = "lanewise" in sys.modules

import jax  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, Phase, settings  # noqa: E402

jax.config.update("jax_enable_x64", True)

import lanewise as lw  # noqa: E402

if _IMPORTED_EARLY:  # a plugin imported lanewise before us: point it at our cache anyway
    lw.config.cache_dir = _CACHE_DIR

# Every distinct lane signature (dtype, rank, layout, read-only flag, axes) costs
# a Numba compile of about a second, so examples are few and deterministic; set
# LANEWISE_HYPOTHESIS_PROFILE=thorough for a long randomised run.
_COMMON = dict(
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much],
)
# No shrinking under "ci": each shrink step is a new signature, i.e. a new compile.
settings.register_profile("ci", max_examples=6, derandomize=True,
                          phases=[Phase.explicit, Phase.reuse, Phase.generate], **_COMMON)
settings.register_profile("thorough", max_examples=60, derandomize=False, **_COMMON)
settings.load_profile(os.environ.get("LANEWISE_HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def cache_dir() -> str:
    assert str(lw.config.cache_dir) == _CACHE_DIR
    return _CACHE_DIR


@pytest.fixture
def restore_config():
    """Undo changes a test makes to ``lw.config``."""
    saved = dict(vars(lw.config))
    yield lw.config
    for k, v in saved.items():
        setattr(lw.config, k, v)
