"""What every framework bridge shares (``lanewise.jax``, ``lanewise.torch``).

A bridge sees a lanewise program as a function of flat argument leaves
(:class:`~lanewise.bridge.signature.Op`): it needs the output shapes and dtypes
for argument shapes and dtypes, without data (:mod:`.signature`), and the
programs derived from it for the framework's transformations: batched, tangent
and cotangent (:mod:`.derive`).  Neither module imports a framework.
"""
