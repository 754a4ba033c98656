"""A tpu program typed without data, for a framework that inlines it (``lw.jax.op``).

A bridge (:mod:`lanewise.bridge`) types a program for argument types alone.  On the
tpu backend the answer is the backend's own jitted whole call
(:meth:`.Executable.whole`: the arguments laid out, the ``pallas_call``, the results
placed), a pure JAX function of the argument leaves that a JAX op lowers in place,
and its results' types as JAX traces it: 32-bit, the chip's, whatever
``jax_enable_x64`` says.

Example:
    >>> import numpy as np, lanewise as lw
    >>> from lanewise.backends import tpu
    >>> program = lw.vmap(lambda x: x * 2.0, backend="tpu")
    >>> call = tpu.bind_call(program, (np.zeros(3, np.float32),), {})
    >>> with lw.config.overridden(tpu_interpret=True):
    ...     typed(program, call, (((3,), "float32"),))[2]
    [((3,), dtype('float32'))]
"""

from __future__ import annotations

import numpy as np

from .kernel import check_dtype


def typed(program, call, types) -> tuple:
    """``(whole, typed program, result types)`` of ``program`` (``lw.vmap`` or ``lw.reduce``
    with the tpu backend) bound as ``call`` to stand-ins of ``types`` ((shape, dtype) per
    argument leaf).  A dtype the chip does not compute is refused naming the argument,
    a 0-d float64 array included: the backend narrows Python scalars only, and a
    framework's leaves are arrays."""
    import jax

    from .. import tpu

    for leaf, (_, dtype) in zip(call.signature.leaves, types, strict=True):
        check_dtype(leaf.name, dtype)
    # JAX asks for the types inside its own tracing (abstract evaluation, where JAX
    # >= 0.12 sets no trace at all) or under a user's jit: the stand-ins' jnp steps
    # are evaluated eagerly, never staged into the caller's program
    with jax.enable_x64(False), jax.core.eval_context():
        exe = program.executable(tpu, call)
        if getattr(program, "_lw_reduce_spec", False):
            whole, mapped = exe.exe.whole(call, (exe.op, exe.axis))
        else:
            whole, mapped = exe.whole(call)
        results = jax.eval_shape(whole, *(jax.ShapeDtypeStruct(s, d) for s, d in types))
    return whole, mapped, [(tuple(r.shape), np.dtype(r.dtype)) for r in results]
