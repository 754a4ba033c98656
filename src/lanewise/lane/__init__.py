"""Layer 3, one lane: reading, transforming and compiling the user's lane function.

* :mod:`.analysis` — the lane's source and what its outputs depend on;
* :mod:`.fingerprint` — a lane's fingerprint (the cache keys' part that hashes its code
  and everything it reaches);
* :mod:`.lanefn` — the lane as a Numba function (globals re-targeted to lanemath,
  lw.random and lw.scan);
* :mod:`.inplace`, :mod:`.prefetch` — lane-to-lane rewrites;
* :mod:`.scanning` — ``lw.scan`` inside lanes (and its reference);
* :mod:`.records`, :mod:`.numba_errors` — dict arguments, and Numba's errors
  retold with the user's file and line.

The lane libraries :mod:`lanewise.lanemath`, :mod:`lanewise.random` and the
SPMD transformation :mod:`lanewise.spmd` belong to this layer too.  See
``docs/architecture.md``.
"""
