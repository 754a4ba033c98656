"""The conformance suite (tests/conformance.py) for the cuda backend, on the simulator."""

from __future__ import annotations

import pytest

from conformance import (MAP_CASES, REDUCE_CASES, run_case, run_explain, run_lane_error, run_out,
                         run_protocol)


@pytest.mark.parametrize("case", MAP_CASES + REDUCE_CASES, ids=lambda c: c.name)
def test_matches_the_reference(case):
    run_case(case, "cuda")


def test_protocol():
    run_protocol("cuda")


def test_out():
    run_out("cuda")


def test_lane_error():
    run_lane_error("cuda")


def test_explain():
    run_explain("cuda")
