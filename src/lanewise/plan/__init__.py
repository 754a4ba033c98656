"""Layer 1, the call plan: what a call of a mapped function means, with no Numba in it.

* :mod:`.program` — the frozen dataclasses of a call (``Signature``, ``Leaf``,
  ``Level``, ``Program``, ``Call``) and the binding of arguments to them;
* :mod:`.reduction` — reductions as data: the ops table, ``Monoid``,
  ``ReduceSpec`` and the pure helpers around accumulators and partials;
* :mod:`.schedule` — the loop order and blocking: pure functions of a program
  and its sizes, and the flat-index decoding every backend shares.

Everything above this layer (lane transforms, renderers, backends, the API)
may import it; it imports only the base modules (errors, dtypes, pytree) and
the lane source analysis.  See ``docs/architecture.md``.
"""
