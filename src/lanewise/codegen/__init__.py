"""Lowering a lane program to a loop nest: the planner and the source renderers."""
