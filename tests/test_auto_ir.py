"""Auto mode's judgement and the streamed shape, read from the lane IR (spmd/auto.py,
spmd/stream.py): what they name is the first loop, exit or call as the code is written,
and a lane with no text to read is judged as before (no loops seen)."""

import pytest

from lanewise.spmd import Unsupported, branch_loops, divergence, long_fixed_loop, row_work
from lanewise.spmd.stream import stream_shape

N = 20


def halve(x):
    while x > 1.0:
        x = x * 0.5
    return x


def double(x):
    while x < 1.0:
        x = x * 2.0
    return x


def accumulates(x):
    s = 0.0
    s += halve(x)  # written first, one level deeper in the IR than the next call
    t = double(x)
    return s + t


def nested_exits(x, n):
    for k in range(n):
        if x > 2.0:
            if x > 3.0:
                return x
            break
        x = x + 1.0
    return x


def fixed(x):
    for k in range(-N, N):
        x = x * 0.5
    return x


def chained(row, n):
    s = 0.0
    for k in range(n):
        s += 0.0 < row[k] < 1.0  # one read, two comparisons
    return s


def streamed(x, scale):
    n = 0
    for k in range(4):
        x = x + k
    return n


def test_the_first_helper_written_is_named():
    assert divergence(accumulates).startswith("halve has a while loop")


def test_the_outermost_exit_is_named():
    line = nested_exits.__code__.co_firstlineno
    assert divergence(nested_exits) == f"nested_exits leaves a for loop early (line {line + 5})"


def test_branches_that_call_looping_helpers():
    def lane(x):
        if x > 1.0:
            y = halve(x)
        else:
            y = double(x)
        return y
    assert branch_loops(lane).endswith("lane's branches each run a loop (lines {}, {})".format(
        *(lane.__code__.co_firstlineno + k for k in (2, 4))))


def test_a_loop_of_global_bounds_is_fixed():
    assert divergence(fixed) is None
    assert long_fixed_loop(fixed).startswith("fixed runs a for loop of 40 iterations")


def test_a_comparison_chain_shares_its_middle_operand():
    # the loop: range's call, 2 comparisons, += and the chain's read once: 4 per read
    assert row_work(chained, {"row"}) == 4.0


def test_a_lane_without_text_is_not_read():
    lane = eval("lambda x: x")  # noqa: S307 - code with no file to read
    assert divergence(lane) is None and branch_loops(lane) is None
    with pytest.raises(Unsupported):
        row_work(lane, {"x"})


def test_stream_shape():
    assert stream_shape(halve) == {"x"}
    assert stream_shape(streamed) == {"n", "x", "k"}
    with pytest.raises(Unsupported, match="exactly one top-level loop"):
        stream_shape(lambda x: x)
    with pytest.raises(Unsupported, match="end with a return"):
        def no_return(x):
            while x > 1.0:
                x = x / 2.0
        stream_shape(no_return)
