"""The source passes ruff with the project's configuration (pyproject.toml, [tool.ruff])."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _ruff() -> list[str]:
    if shutil.which("ruff"):
        return ["ruff"]
    try:
        import ruff  # noqa: F401
    except ImportError:
        pytest.skip("ruff is not installed (pip install 'lanewise[test]')")
    return [sys.executable, "-m", "ruff"]


def test_ruff_check_passes():
    proc = subprocess.run([*_ruff(), "check", "src", "tests", "benchmarks"], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
