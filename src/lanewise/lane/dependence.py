"""Which lane parameters each lane output depends on, as lanewise's checks ask it.

* ``out_axes=None``: JAX rejects it for an output that depends on the mapped axis
  (it knows by tracing); :func:`check_unmapped_outputs` refuses it the same way;
* :func:`unused_parameters`: the parameters a result's values are not computed
  from, which its storage dtype ignores (plan/program).

Both read :func:`lanewise.lane.ir.passes.dependence.output_dependencies`, the
conservative taint analysis over the lane IR.

Example:
    >>> def lane(x, y):
    ...     s = x + 1
    ...     return s, y * 2
    >>> unused_parameters(lane, (1,))
    frozenset({'x'})
"""

from __future__ import annotations

import inspect
import weakref
from typing import Callable

from ..errors import UnmappedOutputError
from ..plan.program import Program
from .ir.passes.dependence import Deps, output_dependencies


# ----------------------------------------------------------------------------- out_axes=None


def check_unmapped_outputs(program: Program) -> None:
    """``out_axes=None`` is only allowed for outputs independent of the level."""
    sig = program.signature
    deps = None
    for out in program.outputs:
        for depth, dim in enumerate(out.level_dims):
            if dim is not None or not sig.mapped_at(depth):
                continue
            if deps is None:
                deps = output_dependencies(program.lane)
            used = _deps_for(deps, out.path)
            for k in sig.mapped_at(depth):
                leaf = sig.leaves[k]
                if used is None or leaf.param in used:
                    raise UnmappedOutputError(
                        f"vmap({sig.levels[depth].fun_name}) has out_axes=None for output "
                        f"{out.name}, but that output depends on argument {leaf.param}, "
                        f"which is mapped at that level (leaf {leaf.name}, axis "
                        f"{leaf.axes[depth]}). Use an integer out_axes, or make the output "
                        "independent of it.")


def unused_parameters(fn: Callable, path: tuple) -> Deps:
    """The parameters of ``fn`` that the values of the output at ``path`` (indices into
    the returned tuple) are not computed from (a parameter that only chooses between
    values is unused): empty when the analysis cannot tell.  What decides a float
    result's storage dtype (plan/program), as NumPy's types follow the values.

    Example:
        >>> unused_parameters(lambda a, k: a * 3, ())
        frozenset({'k'})
    """
    used = _deps_for(_cached_dependencies(fn), path)
    if used is None:
        return Deps()
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return Deps()
    return Deps(name for name in params if name not in used)


def _cached_dependencies(fn: Callable):
    """:func:`output_dependencies`, parsed once per lane function (a build asks per output)."""
    try:
        return _DEPENDENCIES[fn]
    except KeyError:
        _DEPENDENCIES[fn] = found = output_dependencies(fn, values_only=True)
        return found
    except TypeError:  # not weakly referenceable
        return output_dependencies(fn, values_only=True)


_DEPENDENCIES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _deps_for(deps, path):
    if deps is None or isinstance(deps, frozenset):
        return deps
    return deps[path[0]] if path and path[0] < len(deps) else frozenset().union(*deps)
