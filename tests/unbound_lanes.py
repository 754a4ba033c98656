"""Lanes that read a local some paths leave unbound (tests/test_unbound.py).

Each takes a float ``x`` and an int ``n``; Python raises ``UnboundLocalError`` for a
lane that reaches a read of a local no statement bound on its path.  Kept out of the
test module so their lines do not move with the tests."""

from __future__ import annotations


def last_of_loop(x, n):
    for i in range(n):
        y = x * i
        if y > 3.0:
            break
    return y


def one_branch(x, n):
    if x > 1.0:
        y = x * 2.0
    return y + n


def elif_without_else(x, n):
    if x < 0.5:
        y = -x
    elif x < 1.5:
        y = x * x
    return y


def while_body(x, n):
    while x < 1.0:
        z = x
        x = x + 0.5
    return z * n


def augmented(x, n):
    if n > 1:
        t = x
    t += 1.0
    return t


def unpacked(x, n):
    if x > 0.5:
        a, b = x, 2.0 * x
    return a - b


def _half(x, n):
    if n > 2:
        h = x / 2.0
    return h


def through_helper(x, n):
    return _half(x, n) + 1.0


def nested_loops(x, n):
    s = 0.0
    for i in range(n):
        for j in range(i):
            inner = x * j
        s += inner
    return s


# ---------------------------------------------------------------- never unbound: no error on any lane


def guarded_by_flag(x, n):
    found = False
    for i in range(n):
        y = x * i
        found = True
    return y if found else -1.0


def guarded_by_and(x, n):
    found = False
    for i in range(n):
        y = x + i
        found = True
    if found and y > 2.0:
        return y
    return 0.0


def literal_range(x, n):
    for i in range(3):
        y = x * i
    return y


def while_true(x, n):
    k = 0
    while True:
        y = x + k
        k += 1
        if k >= n or k > 5:
            break
    return y


def both_branches(x, n):
    if x > 1.0:
        y = x
    else:
        y = -x
    return y


RAISING = (last_of_loop, one_branch, elif_without_else, while_body, augmented, unpacked, through_helper, nested_loops)
NEVER = (guarded_by_flag, guarded_by_and, literal_range, while_true, both_branches)
#: The lanes whose every read is surely bound: the pass leaves them as they are.
UNCHECKED = (literal_range, while_true, both_branches)


# ---------------------------------------------------------------- try (the cpu backend's scalar path)


def raised_before_binding(x, n):
    try:
        if n > 1:
            raise ValueError("too many")
        y = x
    except Exception:  # noqa: BLE001 - the cpu backend catches Exception only (docs/lanes.md L35)
        pass
    return y


def bound_in_the_handler(x, n):
    try:
        if n > 1:
            raise ValueError("too many")
        y = x
    except Exception:  # noqa: BLE001 - the cpu backend catches Exception only (docs/lanes.md L35)
        y = -x
    return y


TRY = (raised_before_binding, bound_in_the_handler)


# ---------------------------------------------------------------- lanes that fall off their end (Python: None)


def missing_return(x, n):
    if x > 1.0:
        return x * 2.0


def _clipped(x):
    for i in range(3):
        if x > i:
            return x - i


def through_a_helper_missing_a_return(x, n):
    return _clipped(x) + n


def returns_from_while_true(x, n):
    while True:
        if x > 1.0:
            return x + n
        x = x * 2.0 + 0.25


FALLS = (missing_return, through_a_helper_missing_a_return)


# ---------------------------------------------------------------- lambdas and comprehensions (the tpu refuses both)


def in_comprehension(x, n):
    if x > 1.0:
        y = x * 2.0
    return sum([y * k for k in range(n)])


def in_condition(x, n):
    if x > 1.0:
        y = x
    return sum([k for k in range(n) if k < y])


def in_lambda(x, n):
    if x > 1.0:
        y = x * 2.0
    f = lambda k: y * k  # noqa: E731 - the lambda is the case
    return f(n)


def own_names(x, n):
    return sum([k * x for k in range(n)]) + (lambda k: k * 2.0)(x)


CLOSURES = (in_comprehension, in_condition, in_lambda)
#: Their comprehension's and lambda's own names: never checked.
CLOSURES_NEVER = (own_names,)
