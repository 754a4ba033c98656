"""Pytrees (tuples, lists, dicts, namedtuples, None) as JAX defines them, via optree.

Axis specifications (``in_axes``/``out_axes``) are pytree *prefixes* whose leaves
are ints or None; ``None`` is a leaf there but an empty node in values, which is
why specs go through :func:`broadcast_axes`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import optree

from .errors import AxisSpecError

_NONE = object()  # stands for a None (unmapped) axis while broadcasting specs


def flatten(tree: Any) -> tuple[list[Any], optree.PyTreeSpec]:
    """Leaves and structure of a value pytree (None is an empty node, as in JAX)."""
    return optree.tree_flatten(tree)


def unflatten(spec: optree.PyTreeSpec, leaves) -> Any:
    """Rebuild a value pytree from its structure and leaves."""
    return optree.tree_unflatten(spec, list(leaves))


def leaf_paths(tree: Any) -> list[tuple]:
    """The path (sequence of keys/indices) of each leaf, in flatten order."""
    return optree.tree_paths(tree)


def path_name(root: str, path: tuple) -> str:
    """``x`` + path ``(1, 'a')`` -> ``x[1]['a']``: how users index the leaf."""
    return root + "".join(f"[{k!r}]" for k in path)


def broadcast_axes(spec: Any, tree: Any, what: str) -> list[int | None]:
    """One axis (int or None) per leaf of ``tree``, from the prefix ``spec``.

    Example: ``broadcast_axes((0, None), (x, (y, z)), "in_axes")`` -> ``[0, None, None]``.
    """
    marked = optree.tree_map(lambda a: _NONE if a is None else a, spec, none_is_leaf=True)
    try:
        axes = optree.broadcast_prefix(marked, tree)
    except ValueError as e:
        raise AxisSpecError(
            f"{what} specification must be a tree prefix of the corresponding value, "
            f"got specification {spec!r} for value tree {optree.tree_structure(tree)}: {e}"
        ) from None
    for a in axes:
        if a is not _NONE and not _is_int(a):
            raise AxisSpecError(f"{what} leaves must be ints or None, got {a!r} in {spec!r}")
    return [None if a is _NONE else int(a) for a in axes]


def _is_int(a: Any) -> bool:
    return isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_))


def freeze(spec: Any, what: str = "out_axes") -> tuple:
    """A hashable form of an axis spec (which may hold lists and dicts); its leaves
    must be ints or None (an array leaf raised ``TypeError: unhashable type``)."""
    leaves, tree = optree.tree_flatten(spec, none_is_leaf=True)
    for a in leaves:
        if a is not None and not _is_int(a):
            raise AxisSpecError(f"{what} leaves must be ints or None, got {type(a).__name__} {a!r} in {spec!r}")
    return tree, tuple(int(a) if a is not None else None for a in leaves)


def thaw(frozen: tuple) -> Any:
    """Inverse of :func:`freeze`."""
    tree, leaves = frozen
    return optree.tree_unflatten(tree, list(leaves))
