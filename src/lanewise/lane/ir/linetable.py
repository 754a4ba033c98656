"""Line numbers of a code object compiled from rendered text, moved to the user's lines.

A pass that rewrites a lane prints it from the IR (:mod:`.render`) and compiles the
text; the code must still say the user's file and lines, so that Numba's errors and
lanewise's bounds errors name them.  The text cannot keep them itself: a rewrite
writes one statement twice (loop versioning's two copies of a loop) or several at one
user line (the in-place rewrite's three for the allocation).  :func:`relined` rewrites
the code's location table instead: each text line becomes the line of the user's
statement printed on it, and a nested function (a ``def``, a lambda, a comprehension)
starts at the line of the statement it is in.  Columns are dropped (the text's are
not the user's).

The table's format is CPython's (``Objects/locations.md``, 3.11 and later): entries
of one to eight code units; a "no columns" entry (code 13) holds the line as a
signed varint delta from the previous entry's line, a "no location" entry (code 15)
nothing.

Example:
    >>> code = compile("x = 1\\ny = 2\\n", "<text>", "exec")
    >>> moved = relined(code, {1: 10, 2: 10}, 10)
    >>> sorted({line for _, _, line in moved.co_lines() if line})
    [10]
"""

from __future__ import annotations

import itertools
import types

_NO_COLUMNS, _NO_LOCATION = 13, 15


def relined(code: types.CodeType, lines: dict, first: int) -> types.CodeType:
    """``code`` (and the code objects in its constants) with each text line ``t`` at
    line ``lines[t]`` (a line not in ``lines``: the last mapped line before it), the
    first line ``first`` (a nested code object's: its own first line's).

    Example:
        >>> code = compile("def f():\\n    return [k for k in ()]\\n", "<text>", "exec")
        >>> f = next(c for c in relined(code, {1: 7, 2: 9}, 7).co_consts if isinstance(c, types.CodeType))
        >>> f.co_firstlineno, sorted({line for _, _, line in f.co_lines() if line})
        (7, [7, 9])
    """
    return _relined(code, _mapping(lines), first)


def _relined(code: types.CodeType, at, first: int) -> types.CodeType:
    consts = tuple(_relined(c, at, at(c.co_firstlineno)) if isinstance(c, types.CodeType) else c
                   for c in code.co_consts)
    ranges = [(line, (end - start) // 2) for start, end, line in code.co_lines()]  # (text line, code units)
    user = {line: None if line is None else at(line) for line in {line for line, _ in ranges}}
    table = bytearray()
    previous = first
    for line, same in itertools.groupby(ranges, key=lambda r: user[r[0]]):
        count = sum(units for _, units in same)
        while count:  # an entry holds at most 8 units
            run = min(count, 8)
            if line is None:
                table.append(0x80 | (_NO_LOCATION << 3) | (run - 1))
            else:
                table.append(0x80 | (_NO_COLUMNS << 3) | (run - 1))
                table += _svarint(line - previous)
                previous = line
            count -= run
    return code.replace(co_linetable=bytes(table), co_firstlineno=first, co_consts=consts)


def _mapping(lines: dict):
    """``lines`` as a function of any text line (the last mapped line at or before it; the
    first mapped one before that), read from a table filled once: a search per code unit
    (as this was written first) took 14 ms for a 200-statement function, on a lane's first call."""
    low, high = min(lines), max(lines)
    dense, current = {}, lines[low]
    for t in range(low, high + 1):
        current = dense[t] = lines.get(t, current)
    return lambda line: dense[min(max(line, low), high)]


def _svarint(value: int) -> bytes:
    return _varint((-value << 1) | 1 if value < 0 else value << 1)


def _varint(value: int) -> bytes:
    """Six bits a byte, least significant first; bit 6 says another byte follows."""
    out = bytearray()
    while value >= 64:
        out.append(0x40 | (value & 63))
        value >>= 6
    out.append(value)
    return bytes(out)
