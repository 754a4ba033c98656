"""Numba's compile errors, retold in terms of the user's lane code.

Numba reports a failed compile as a long message with ``File "...", line N``
blocks and colour codes.  lanewise finds the first location in the user's own
code and leads with it; Numba's full message stays chained as ``__cause__``.

Example:
    >>> first_user_frame('File "/u/lane.py", line 7:')
    ('/u/lane.py', 7)
"""

from __future__ import annotations

import os
import re

import numba

from ..errors import LaneCompileError, LaneTypeError, format_location, function_location

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_FILE = re.compile(r'File "([^"]+)", line (\d+)')
_SKIP = (os.path.dirname(numba.__file__), os.path.dirname(os.path.dirname(__file__)))
_GENERATED = re.compile(r"lw_[0-9a-f]+\.py$")
_NOISE = ("Failed in nopython mode pipeline", "During:", "<source", "^", "File ", "Enable logging")


def first_user_frame(message: str) -> tuple[str, int] | None:
    """The first ``(file, line)`` in ``message`` outside Numba and lanewise (its
    package and the kernel modules it generates into the cache, ``lw_<key>.py``)."""
    for filename, line in _FILE.findall(message):
        path = os.path.abspath(filename)
        if not path.startswith(_SKIP) and not filename.startswith("<") and not _GENERATED.match(os.path.basename(path)):
            return path, int(line)
    return None


_OURS = re.compile(r"(lw\.[\w.]+(?:: |\().*)")
#: lanewise's message proper (``lw.scan: ...``): found before a source line that
#: merely calls ``lw.scan(`` and which Numba quotes first.
_OURS_FIRST = re.compile(r"(lw\.[\w.]+: .*)")


def summary(message: str) -> str:
    """Numba's explanation: lanewise's own message if one is nested inside
    (e.g. from ``lw.scan``'s typing), else the text before the first location."""
    message = _ANSI.sub("", message)
    ours = _OURS_FIRST.search(message) or _OURS.search(message)
    if ours:
        return ours.group(1).strip()
    lines = [ln.strip() for ln in message.splitlines()]
    kept = []
    for line in lines:
        if _FILE.search(line):
            break
        if line and not line.startswith(_NOISE):
            kept.append(line)
    return "\n".join(kept[:6])


def internal_error(error: Exception, lane, backend: str) -> LaneCompileError:
    """A lanewise error for a failure of Numba's own code (not a ``NumbaError``: a bare
    ``assert`` in its typing, on ``enumerate(row, start=1)`` say) while it compiled
    ``lane``: the lane and where it is defined, and what failed."""
    name = getattr(lane, "__qualname__", repr(lane))
    return LaneCompileError(
        f"lane function {name} ({function_location(lane)}) cannot be compiled for the {backend} backend: "
        f"Numba failed inside its compiler ({type(error).__name__}: {str(error) or 'no message'}) on a construct of "
        "this lane or of a helper it calls; keyword arguments of builtins (enumerate(xs, start=1)) are a known "
        "cause: pass them by position.\n(Numba's error is chained below as __cause__.)")


def compile_error(error: Exception, lane, backend: str) -> LaneCompileError | LaneTypeError:
    """A lanewise error naming the user's file:line for Numba's ``error``.

    Return paths of different kinds (a tuple here, a scalar there) are a
    :class:`LaneTypeError` listing every return involved; anything else a
    :class:`LaneCompileError`.
    """
    message = _ANSI.sub("", str(error))
    name = getattr(lane, "__qualname__", repr(lane))
    if "Can't unify return type" in message:
        returns = [format_location(os.path.abspath(f), int(n)) for f, n in _FILE.findall(message)
                   if not os.path.abspath(f).startswith(_SKIP) and not f.startswith("<")]
        kinds = _UNIFY.search(message)
        return LaneTypeError("\n".join([
            f"lane function {name} ({function_location(lane)}) returns values of different kinds"
            + (f" ({kinds.group(1).strip()})" if kinds else "") + "; every return must give the "
            "same structure (e.g. always a 2-tuple):", *dict.fromkeys(returns),
            "(Numba's full error is chained below as __cause__.)"]))
    head = f"lane function {name} ({function_location(lane)}) cannot be compiled for the {backend} backend:"
    frame = first_user_frame(message)
    where = format_location(*frame) if frame else ""
    parts = [head, where, summary(message),
             "(Numba's full error is chained below as __cause__.)"]
    return LaneCompileError("\n".join(p for p in parts if p))


_UNIFY = re.compile(r"Can't unify return type from the following types: (.*)")
