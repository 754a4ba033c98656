"""The lane IR (issue 43): a lane and its helpers parsed once into small, typed, structured nodes.

* :mod:`.nodes` — the nodes (frozen dataclasses): values, primitives, ``if`` regions,
  loops with their loop-carried names, explicit exits, source locations;
* :mod:`.build` — the front end (the only module of the IR that reads Python's ``ast``);
* :mod:`.printer` — the IR as deterministic text (``lw.explain``'s "lane IR:" section);
* :mod:`.render` — the IR back to Python source that behaves as the lane (for passes that rewrite it);
* :mod:`.passes` — analyses over the IR (:mod:`.passes.varying`: which values differ between lanes).
"""
