"""Layer 5, renderers: a lane program (and its schedule) as the source of a generated module.

:mod:`.common` holds what every target shares (names, argument and output
expressions, headers); :mod:`.cpu` and :mod:`.cpu_reduce` render Numba modules
for the CPU, :mod:`.cuda` numba-cuda modules.  Generated source is deterministic,
carries comments pointing back to the user's lines, and can be printed
(``LANEWISE_DEBUG=1`` or ``lw.explain``).  See ``docs/architecture.md``.
"""
