"""Passes over the lane IR: analyses that read :mod:`lanewise.lane.ir.nodes` (never Python's ``ast``).

* :mod:`.varying` — which locals differ between lanes (uniform/varying);
* :mod:`.dependence` — which lane parameters each output depends on (``out_axes=None``, unused parameters).
"""
