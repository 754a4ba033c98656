"""Test dependencies that some supported Pythons do not install (pyproject's test extra)."""

from __future__ import annotations

import pytest

#: Why torch tests skip where torch is absent.
TORCH_ABSENT = ("torch is not installed: the test extra requires it on Python 3.11 only (pyproject.toml: "
                "its CPU build is what CI installs; on another Python pip would fetch a multi-GB CUDA build)")


def requires_torch():
    """torch, or a skip of the calling test module (or test) saying why it is absent."""
    return pytest.importorskip("torch", reason=TORCH_ABSENT)
