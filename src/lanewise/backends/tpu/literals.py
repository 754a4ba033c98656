"""Python literals in a tpu lane's operators: folded as Python folds them, or checked
against the chip's 32-bit integers (:func:`.lower.lower` asks before it lowers an operator).

Example:
    >>> folded("sub", [0, 1]), folded("mul", [2, 0.5]), folded("add", [1, None])
    (-1, 1.0, None)
"""

from __future__ import annotations

import operator

import jax.numpy as jnp

from ...errors import LaneTypeError

#: IR operator names -> the ``operator`` primitive whose TPU rule computes them.
OPERATORS = {"add": "add", "sub": "sub", "mul": "mul", "truediv": "truediv", "floordiv": "floordiv",
             "mod": "mod", "pow": "pow", "lshift": "lshift", "rshift": "rshift", "bitor": "or_",
             "bitand": "and_", "bitxor": "xor", "neg": "neg", "pos": "pos", "invert": "invert",
             "lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "eq": "eq", "ne": "ne"}
#: The comparison operators: a literal beyond int32 decides them for every int32 lane.
_COMPARISONS = frozenset({"lt", "le", "gt", "ge", "eq", "ne"})
_INT32 = (-2**31, 2**31 - 1)


def folded(op: str, args: list):
    """An operator of Python literals computed as Python does (``-1`` in ``range(n, 0, -1)``
    stays a literal), or None."""
    if not all(isinstance(a, (bool, int, float)) for a in args):
        return None
    try:
        return getattr(operator, OPERATORS[op])(*args)
    except (ArithmeticError, ValueError):
        return None


def wide(op: str, args: list, at: str):
    """``args`` with every Python int literal beyond int32 made computable, as NumPy 2
    computes a weak Python int beside a 32-bit value: beside a float it is that float
    (``x * 2**40`` is float32); compared with an int (or bool) it decides the comparison
    for every lane, whose value is inside int32 (``n < 2**63`` is True) -- the constant
    tile is returned instead of the list; in arithmetic with ints it has no int32 value:
    a LaneTypeError naming the literal and the line (NumPy raises OverflowError there;
    JAX would raise its own, naming no line)."""
    wide = [k for k, a in enumerate(args) if type(a) is int and not _INT32[0] <= a <= _INT32[1]]
    if not wide:
        return args
    tiles = [a for a in args if not isinstance(a, (bool, int, float))]
    if not tiles:
        return args  # literals only: no 32-bit value in the operation
    if any(jnp.issubdtype(jnp.result_type(t), jnp.floating) for t in tiles):
        return [float(a) if k in wide else a for k, a in enumerate(args)]
    if op in _COMPARISONS and len(args) == 2:
        # any int32 lane compares with the literal as 0 does: the literal lies beyond them all
        decided = getattr(operator, op)(*(a if k in wide else 0 for k, a in enumerate(args)))
        return jnp.full(jnp.shape(tiles[0]), decided)
    raise LaneTypeError(f"the integer {args[wide[0]]} does not fit the TPU's int32, so {op} of it and an int "
                        f"is not computed on the tpu backend ({at}): write it as a float "
                        f"({float(args[wide[0]])!r}) or compute on the cpu backend")


def negative_int_power(op: str, args: list, at: str) -> None:
    """A LaneTypeError for an int lane to a negative literal power (``n ** -1``): NumPy's
    int32 raises ValueError there and Python gives a float; JAX would raise its own
    TypeError, naming no line.  (A negative exponent that is a lane's value is not seen
    here: the tpu gives JAX's integer power, docs/tpu.md.)"""
    if op not in ("pow", "power") or len(args) != 2:
        return
    base, exponent = args
    if type(exponent) is int and exponent < 0 and not isinstance(base, (bool, int, float)) \
            and not jnp.issubdtype(jnp.result_type(base), jnp.floating):
        raise LaneTypeError(f"an int to the negative power {exponent} is not computed on the tpu backend "
                            f"({at}): NumPy's int32 raises there and Python gives a float; write "
                            f"float(n) ** {exponent}")
