"""The carry of a tile's loop: its types settled, and the ``lax.while_loop`` that runs it.

:class:`Carry` is the part of the lowering (:mod:`.lower`) that turns a loop body of
tile values into a loop Mosaic compiles: :meth:`Carry.settle` finds the types the
body keeps (``s = 0`` then ``s += x`` carries a float), :meth:`Carry.while_loop` runs
the body while some lane of the tile is active, ``unroll`` iterations per check, with
the carry in the forms of :data:`.lower.LOWERING` (bool masks as int32, values
materialised from the tile's lanes).  It reads the lowering's ``shape``, ``valid``
and ``options``.

Example:
    >>> import jax.numpy as jnp
    >>> class Tile(Carry):
    ...     shape, valid = (2,), jnp.ones(2, bool)
    ...     options = {"int_masks": True, "materialise": True}
    >>> body = lambda c: {"vars": {"s": c["vars"]["s"] + 1.5}, "result": None, "active": c["active"]}
    >>> carry = Tile().settle(body, {"vars": {"s": 0}, "result": None, "active": jnp.ones(2, bool)}, None)
    >>> carry["vars"]["s"].dtype.kind  # s = 0 entered as an int tile; the body makes it a float
    'f'
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from ...errors import LaneCompileError
from ...lane.ir import nodes as ir
from ...lane.ir.lines import user_line as where
from .ops import loop_forms, some


class Carry:
    """Loop carries of tile values (the lowering's mixin)."""

    def while_loop(self, body, carry, unroll: int, trips: int | None = None):
        """``lax.while_loop`` of ``body`` while some lane of the tile is active, ``unroll``
        iterations per check, the carry in the form Mosaic compiles (:data:`LOWERING`)."""
        encode, decode = loop_forms(carry, self.options["int_masks"])

        def step(c):
            c = decode(c)
            for _ in range(unroll):
                c = self.fixed(body(c), c)
            return encode(c)

        start = encode(carry)
        if self.options["materialise"]:
            active = start.pop("active")
            start = jax.tree.map(self.materialised, start)
            # not materialised by adding 1 off the real lanes: a padding lane must never be
            # active (its values are undefined: it might never leave the loop)
            start["active"] = jnp.where(self.valid, active, jnp.zeros((), active.dtype))

        def going(c):
            alive = some(decode(c)["active"])
            return alive if trips is None else alive & (c["k"] < trips)

        return decode(lax.while_loop(going, step, start))

    def materialised(self, v):
        """A tile with ``v``'s values in the real lanes, computed from the tile's lanes (a
        constant splat has a replicated layout, which a Mosaic loop cannot yield)."""
        if v.shape != self.shape or v.dtype == jnp.bool_:
            return v
        return jnp.where(self.valid, v, v + jnp.ones((), v.dtype))

    def settle(self, body, carry, loc: ir.Loc):
        """The loop's carry with the types the body keeps: every leaf a tile of a
        fixed dtype (the dtype a value takes in the body: ``s = 0`` then ``s += x``
        carries a float), the result created if the body returns.  A fixed point of
        the body's types, reached in a few rounds."""
        count = carry.pop("k", None)
        carry = self.tiles(carry)
        if count is not None:
            carry["k"] = count
        for _ in range(4 + len(carry["vars"])):  # a type moves along a chain of copies one round at a time
            out = jax.eval_shape(body, carry)
            _same_structure(carry["vars"], out["vars"], loc)
            if carry["result"] is None and out["result"] is not None:
                carry["result"] = jax.tree.map(lambda o: jnp.zeros(self.shape, o.dtype), out["result"])
                if "returned" in carry:  # a counted loop keeps no returned mask
                    carry["returned"] = jnp.zeros(self.shape, bool)
                continue
            if carry.get("returned", False) is None and out["returned"] is not None:
                # a result already made (inside a counted loop, which keeps no mask) but no
                # lane returned yet: the body's return makes the mask
                carry["returned"] = jnp.zeros(self.shape, bool)
                continue
            wider = jax.tree.map(lambda c, o: jnp.promote_types(c.dtype, o.dtype), carry, out)
            if jax.tree.all(jax.tree.map(lambda c, w: c.dtype == w, carry, wider)):
                return carry
            carry = jax.tree.map(lambda c, w: c.astype(w), carry, wider)
        raise LaneCompileError(f"the types of this loop's values do not settle ({where(loc)})")

    def tiles(self, tree):
        """Every leaf a strongly typed tile (JAX's weak Python scalars fixed to 32 bits)."""
        return jax.tree.map(lambda v: jnp.broadcast_to(jnp.asarray(v, jnp.result_type(v)), self.shape), tree)

    def fixed(self, out, carry):
        """The body's values in the carry's dtypes and shapes (a scalar stays a scalar)."""
        return jax.tree.map(lambda o, c: jnp.broadcast_to(jnp.asarray(o).astype(c.dtype), c.shape), out, carry)


def _same_structure(carry: dict, out: dict, loc: ir.Loc) -> None:
    """Refuse a loop whose locals leave an iteration in another structure than they entered
    it (None, or a tuple, on one path and a value on another: a tile holds one structure)."""
    for name in carry:
        if jax.tree.structure(carry[name]) != jax.tree.structure(out[name]):
            raise LaneCompileError(f"{name} holds None or a tuple on one path through this loop and another "
                                   f"value on another; the tpu backend needs one structure per local ({where(loc)})")
