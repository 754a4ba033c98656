"""Passes over the lane IR: analyses that read :mod:`lanewise.lane.ir.nodes` (never Python's ``ast``).

* :mod:`.varying` — which locals differ between lanes (uniform/varying).
"""
