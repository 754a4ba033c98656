"""Lanes with ``assert`` statements, kept out of the test modules: pytest rewrites
the asserts of a test module into calls of its own helpers, which no lane
compiler can compile (a user's lane in a pytest test file meets the same)."""

from __future__ import annotations


def checked_halving(x, limit):
    assert x >= 0.0, "x must not be negative"
    n = 0
    while x > 1.0:
        x = x / 2
        n += 1
        if n > limit:
            raise ValueError("too many halvings")
    return n
